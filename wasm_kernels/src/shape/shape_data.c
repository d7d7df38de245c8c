/* Shape functions of the data movement kernels (kernels/data.c). COPY: ep_shape_first. Forms whose
 * words do not determine the output (SLICE's normalized 2r form, PAD's begin-only form, SPLIT's [axis],
 * EXPAND without its shape input) return EP_E_SHAPE: such nodes run only with the plan's shapes. SLICE, PAD
 * and SPLIT may take their words' values from value inputs instead (ep_slice_words, ep_pad_words). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN


void ep_slice_axis(int64_t d, int64_t s, int64_t e, int64_t st, int64_t *first, int64_t *len) {
  if (s < 0) s += d;
  if (e < 0) e += d;
  int64_t n;
  if (st > 0) {
    s = s < 0 ? 0 : s > d ? d : s;
    e = e < 0 ? 0 : e > d ? d : e;
    n = e > s ? (e - s + st - 1) / st : 0;
  } else {
    s = s < 0 ? 0 : s;             /* max, then min: an empty axis gives s = e = -1 */
    s = s > d - 1 ? d - 1 : s;
    e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    n = s > e ? (s - e - st - 1) / -st : 0;
  }
  *first = n ? s : 0;
  *len = n;
}

/* Values of an optional input holding `count` elements: 1 when given, 0 when absent, -1 when unknown or of another
 * count (ep_value_at reads int32 / int64 ones; the packager gives no other dtype). */
__attribute__((noinline)) static int given(const ep_tensor *t, uint64_t count) {
  return !t ? 0 : t->data && t->numel == count ? 1 : -1;
}

/* SLICE's and PAD's value inputs: w[j * r + k] = dflt[j] for every dim k, then per entry i < count the axis (input
 * 3 axes?'s value, negative from the end, none repeated; i when absent) gets w[j * r + axis] = src[j]'s value
 * i + at[j] (at NULL: i; int32-clamped: extents are below 2^31, so a clamped bound resolves the same; src[j] absent: none). */
static ep_status per_axis(const ep_node *n, uint32_t r, uint64_t count, const ep_tensor *const *src, const uint64_t *at,
                          const int32_t *dflt, uint32_t nsrc, int32_t *w) {
  const ep_tensor *ax = n->n_in > 3 ? n->in[3] : 0;
  if (count > r || given(ax, count) < 0) return EP_E_SHAPE;
  for (uint32_t k = 0; k < nsrc * r; k++) w[k] = dflt[k / r];
  uint32_t seen = 0;
  for (uint64_t i = 0; i < count; i++) {
    int64_t a = ax ? ep_value_at(ax, i) : (int64_t)i;
    if (a < 0) a += r;
    if (a < 0 || a >= (int64_t)r || ((seen >> a) & 1u)) return EP_E_SHAPE;
    seen |= 1u << a;
    for (uint32_t j = 0; j < nsrc; j++) {
      if (!src[j]) continue;
      const int64_t v = ep_value_at(src[j], i + (at ? at[j] : 0));
      w[j * r + a] = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
    }
  }
  return EP_OK;
}

/* Output 0 = input 0's dims with dims[axis] replaced; axis and rank validated. */
static ep_status with_axis(ep_tensor *out, const ep_tensor *x, int32_t axis, int64_t extent) {
  if (!x || axis < 0 || (uint32_t)axis >= x->rank || extent < 0 || extent > INT32_MAX) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < x->rank; k++) d[k] = x->dims[k];
  d[axis] = (int32_t)extent;
  return ep_shape_set(out, x->rank, d);
}

/* [axis]: the inputs' extents on axis add up. */
ep_status ep_shape_CONCAT(ep_node *n) {
  if (n->n_params != 1) return EP_E_PARAM;
  const int32_t axis = n->params[0];
  int64_t sum = 0;
  for (uint32_t i = 0; i < n->n_in; i++) {
    const ep_tensor *t = n->in[i];
    if (!t || !n->in[0] || t->rank != n->in[0]->rank || axis < 0 || (uint32_t)axis >= t->rank) return EP_E_SHAPE;
    sum += t->dims[axis];
  }
  return with_axis(n->out[0], n->in[0], axis, sum);
}

/* [axis, size_0..size_{n_out-1}]: explicit extents; [axis, -1]: ONNX num_outputs parts of ceil(d / n_out),
 * the last one what remains; [axis] with input split: its values. [axis] alone does not say how the extent is cut. */
ep_status ep_shape_SPLIT(ep_node *n) {
  const ep_tensor *x = n->in[0], *v = n->n_in > 1 ? n->in[1] : 0;   /* v: the sizes as values ([axis] alone) */
  const int equal = n->n_params == 2 && n->params[1] == -1;
  if (!x || n->n_out == 0 || (!equal && n->n_params != (v ? 1 : 1 + n->n_out)) || given(v, n->n_out) < 0) return EP_E_SHAPE;
  const int32_t axis = n->params[0];
  if (axis < 0 || (uint32_t)axis >= x->rank) return EP_E_SHAPE;
  const int64_t d = x->dims[axis], chunk = (d + n->n_out - 1) / n->n_out;
  int64_t left = d;
  for (uint32_t i = 0; i < n->n_out; i++) {
    const int64_t s = v ? ep_value_at(v, i) : !equal ? n->params[1 + i] : i + 1 < n->n_out ? chunk : left;
    if (s < 0 || s > left) return EP_E_SHAPE;
    left -= s;
    const ep_status st = with_axis(n->out[i], x, axis, s);
    if (st) return st;
  }
  return left == 0 ? EP_OK : EP_E_SHAPE;
}

ep_status ep_slice_words(const ep_node *n, int32_t *w) {
  static const int32_t dflt[3] = {0, INT32_MAX, 1};
  const uint32_t r = n->in[0]->rank;
  if (n->n_in == 1) {
    if (n->n_params != 3 * r) return EP_E_SHAPE;
    for (uint32_t k = 0; k < n->n_params; k++) w[k] = n->params[k];
    return EP_OK;
  }
  /* value inputs: starts, ends, axes?, steps? as ONNX Slice-10 takes them (a step 0 is refused by the callers) */
  const ep_tensor *st = n->in[1], *src[3] = {st, n->n_in > 2 ? n->in[2] : 0, n->n_in > 4 ? n->in[4] : 0};
  if (n->n_params || !st || given(st, st->numel) != 1 || given(src[1], st->numel) != 1 || given(src[2], st->numel) < 0)
    return EP_E_SHAPE;
  return per_axis(n, r, st->numel, src, 0, dflt, 3, w);
}

/* [start_0.., end_0.., step_0..] (3r words, ONNX semantics; or no words and the values of inputs starts, ends,
 * axes?, steps?) resolved against the input's dims. */
ep_status ep_shape_SLICE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  int32_t w[3 * EP_MAX_RANK];
  if (!x || ep_slice_words(n, w)) return EP_E_SHAPE;
  const uint32_t r = x->rank;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < r; k++) {
    const int32_t step = w[2 * r + k];
    if (step == 0) return EP_E_PARAM;
    int64_t first, len;
    ep_slice_axis(x->dims[k], w[k], w[r + k], step, &first, &len);
    d[k] = (int32_t)len;
  }
  return ep_shape_set(n->out[0], r, d);
}

/* [axis, mode]: Gather data[:axis] + indices + data[axis+1:]; GatherElements: the indices' dims. */
ep_status ep_shape_GATHER(ep_node *n) {
  const ep_tensor *x = n->in[0], *ix = n->in[1];
  if (!x || !ix || n->n_params != 2) return EP_E_SHAPE;
  const int32_t axis = n->params[0];
  if (axis < 0 || (uint32_t)axis >= x->rank) return EP_E_SHAPE;
  if (n->params[1] == 1) return ep_shape_like(n->out[0], ix);
  const uint32_t r = x->rank - 1 + ix->rank;
  if (r > EP_MAX_RANK) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  uint32_t j = 0;
  for (uint32_t k = 0; k < x->rank; k++) {
    if ((int32_t)k != axis) { d[j++] = x->dims[k]; continue; }
    for (uint32_t i = 0; i < ix->rank; i++) d[j++] = ix->dims[i];
  }
  return ep_shape_set(n->out[0], r, d);
}

/* [perm_0..]: y.dims[i] = x.dims[perm[i]]. */
ep_status ep_shape_TRANSPOSE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != x->rank) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < x->rank; k++) {
    const int32_t q = n->params[k];
    if (q < 0 || (uint32_t)q >= x->rank) return EP_E_PARAM;
    d[k] = x->dims[q];
  }
  return ep_shape_set(n->out[0], x->rank, d);
}

ep_status ep_pad_words(const ep_node *n, int32_t *w) {
  static const int32_t dflt[2] = {0, 0};
  const ep_tensor *x = n->in[0], *p = n->n_in > 1 ? n->in[1] : 0;
  const uint32_t r = x->rank;
  if (n->n_params > 3 + 2 * r) return EP_E_SHAPE;
  for (uint32_t k = 0; k < n->n_params; k++) w[k] = n->params[k];
  if (!p) return n->n_params == 3 + r || n->n_params == 3 + 2 * r ? EP_OK : EP_E_SHAPE;
  /* value inputs: pads [begin.., end..] over axes? (every dim when absent), value? (x's dtype, one element) */
  const ep_tensor *v = n->n_in > 2 ? n->in[2] : 0, *ax = n->n_in > 3 ? n->in[3] : 0, *src[2] = {p, p};
  const uint64_t na = ax ? ax->numel : r, at[2] = {0, na};
  if (n->n_params != 3 || given(p, 2 * na) != 1) return EP_E_SHAPE;
  if (v && v->data && v->numel) {   /* known at run time (or a weight): its little-endian bytes as the value words */
    if (v->dtype != x->dtype) return EP_E_SHAPE;
    for (uint32_t i = 0; i < ep_dtype_size(x->dtype); i++) ((uint8_t *)(void *)(w + 1))[i] = v->data[i];
  }
  return per_axis(n, r, na, src, at, dflt, 2, w + 3);
}

/* [mode, value_lo, value_hi, begin_0.., end_0..] (3 + 2r words; or 3 and the values of inputs pads, axes?):
 * y_k = x_k + begin_k + end_k. */
ep_status ep_shape_PAD(ep_node *n) {
  const ep_tensor *x = n->in[0];
  int32_t w[3 + 2 * EP_MAX_RANK];
  if (!x || ep_pad_words(n, w) || (n->n_in < 2 && n->n_params != 3 + 2 * x->rank)) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < x->rank; k++) {
    const int64_t v = (int64_t)x->dims[k] + w[3 + k] + w[3 + x->rank + k];
    if (v < 0 || v > INT32_MAX) return EP_E_SHAPE;
    d[k] = (int32_t)v;
  }
  return ep_shape_set(n->out[0], x->rank, d);
}

/* With the target shape input (int64 values): ONNX Expand's bidirectional broadcast of x and the shape. */
ep_status ep_shape_EXPAND(ep_node *n) {
  ep_tensor t;
  const ep_tensor *ins[2] = {n->in[0], &t};
  ep_status s = n->n_in > 1 ? ep_shape_of_values(n->in[1], &t) : EP_E_SHAPE;
  if (s || !ins[0]) return EP_E_SHAPE;
  return n->out[0]->rank == (ins[0]->rank > t.rank ? ins[0]->rank : t.rank) ? ep_shape_broadcast(n->out[0], ins, 2) : EP_E_SHAPE;
}
EP_COLD_FILE_END
