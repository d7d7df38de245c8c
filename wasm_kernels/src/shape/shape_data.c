/* Shape functions of the data movement kernels (kernels/data.c). COPY: ep_shape_first. Forms whose
 * words do not determine the output (SLICE's normalized 2r form, PAD's begin-only form, SPLIT's [axis],
 * EXPAND without its shape input) return EP_E_SHAPE: such nodes run only with the plan's shapes. */
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
 * the last one what remains. [axis] alone does not say how the extent is cut. */
ep_status ep_shape_SPLIT(ep_node *n) {
  const ep_tensor *x = n->in[0];
  const int equal = n->n_params == 2 && n->params[1] == -1;
  if (!x || n->n_out == 0 || (!equal && n->n_params != 1 + n->n_out)) return EP_E_SHAPE;
  const int32_t axis = n->params[0];
  if (axis < 0 || (uint32_t)axis >= x->rank) return EP_E_SHAPE;
  const int64_t d = x->dims[axis], chunk = (d + n->n_out - 1) / n->n_out;
  int64_t left = d;
  for (uint32_t i = 0; i < n->n_out; i++) {
    const int64_t s = !equal ? n->params[1 + i] : i + 1 < n->n_out ? chunk : left;
    if (s < 0 || s > left) return EP_E_SHAPE;
    left -= s;
    const ep_status st = with_axis(n->out[i], x, axis, s);
    if (st) return st;
  }
  return left == 0 ? EP_OK : EP_E_SHAPE;
}

/* [start_0.., end_0.., step_0..] (3r words, ONNX semantics) resolved against the input's dims. */
ep_status ep_shape_SLICE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 3 * x->rank) return EP_E_SHAPE;
  const uint32_t r = x->rank;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < r; k++) {
    const int32_t step = n->params[2 * r + k];
    if (step == 0) return EP_E_PARAM;
    int64_t first, len;
    ep_slice_axis(x->dims[k], n->params[k], n->params[r + k], step, &first, &len);
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

/* [mode, value_lo, value_hi, begin_0.., end_0..] (3 + 2r words): y_k = x_k + begin_k + end_k. */
ep_status ep_shape_PAD(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 3 + 2 * x->rank) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < x->rank; k++) {
    const int64_t v = (int64_t)x->dims[k] + n->params[3 + k] + n->params[3 + x->rank + k];
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
