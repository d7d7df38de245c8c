/* Shape functions of the plan v2 kernels of kernels/dims.c: SHAPE, VIEW, RANGE, CONSTANT_OF_SHAPE.
 * VIEW's Reshape, RANGE and CONSTANT_OF_SHAPE need the values of their shape inputs (EP_E_SHAPE while unknown). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

#define BIG 0x100000000ull   /* more elements than a tensor may have */

void ep_shape_span(uint32_t rank, const int32_t *p, uint32_t *first, uint32_t *count) {
  int64_t s = p[0], e = p[1];
  if (s < 0) s += rank;
  if (e < 0) e += rank;
  s = s < 0 ? 0 : s > rank ? rank : s;
  e = e < 0 ? 0 : e > rank ? rank : e;
  *first = (uint32_t)s;
  *count = e > s ? (uint32_t)(e - s) : 0u;
}

/* [start, end]: Y = [count of the input's dims in the span] (ONNX Shape-15). */
ep_status ep_shape_SHAPE(ep_node *n) {
  if (!n->in[0] || n->n_params != 2) return EP_E_SHAPE;
  uint32_t first, count;
  ep_shape_span(n->in[0]->rank, n->params, &first, &count);
  const int32_t d[1] = {(int32_t)count};
  return ep_shape_set(n->out[0], 1, d);
}

/* prod(d[a..b)), saturated at BIG. */
static uint64_t prod(const int32_t *d, uint32_t a, uint32_t b) {
  uint64_t p = 1;
  for (uint32_t k = a; k < b; k++) p = p >= BIG && d[k] ? BIG : p * (uint64_t)d[k];
  return p;
}

/* Reshape's target from the int64 values of s: 0 copies x's dim (unless allowzero), one -1 is inferred. */
static ep_status reshape_dims(const ep_tensor *x, const ep_tensor *s, int32_t allowzero, uint32_t r, int32_t *d) {
  if (!s || !s->data || s->dtype != EP_I64 || s->rank != 1 || s->numel != r || (allowzero & ~1)) return EP_E_SHAPE;
  int32_t infer = -1;
  for (uint32_t i = 0; i < r; i++) {
    int64_t v = ep_value_at(s, i);
    if (v == 0 && !allowzero) v = i < x->rank ? x->dims[i] : -2;
    if (v == -1 && infer < 0) { infer = (int32_t)i; v = 1; }
    if (v < 0 || v > INT32_MAX) return EP_E_SHAPE;
    d[i] = (int32_t)v;
  }
  const uint64_t known = prod(d, 0, r);
  if (infer >= 0) {
    if (known == 0 || x->numel % known || x->numel / known > INT32_MAX) return EP_E_SHAPE;
    d[infer] = (int32_t)(x->numel / known);
  }
  return EP_OK;
}

/* [mode, a, n_axes, axes...]: 0 Reshape (input 1's values, a = allowzero), 1 Flatten (a = axis), 2 Squeeze
 * (axes; none = every dim of extent 1), 3 Unsqueeze (axes in the output's rank); Squeeze/Unsqueeze with n_axes 0
 * and an input 1 take the axes from its int64 values. The element count stays. */
ep_status ep_shape_VIEW(ep_node *n) {
  const ep_tensor *x = n->in[0], *v = n->n_in > 1 ? n->in[1] : 0;
  ep_tensor *y = n->out[0];
  const int32_t *p = n->params;
  if (!x || n->n_params < 3 || (uint32_t)p[2] > EP_MAX_RANK || n->n_params != 3u + (uint32_t)p[2]) return EP_E_SHAPE;
  int32_t axes[EP_MAX_RANK];
  uint32_t na = (uint32_t)p[2];
  for (uint32_t i = 0; i < na; i++) axes[i] = p[3 + i];
  if (p[0] >= 2 && v) {   /* run-time axes (a value input) */
    if (na || !v->data || v->dtype != EP_I64 || v->rank != 1 || v->numel > EP_MAX_RANK) return EP_E_SHAPE;
    for (na = 0; na < v->numel; na++) {
      const int64_t a = ep_value_at(v, na);
      if (a < -EP_MAX_RANK * 2 || a > EP_MAX_RANK * 2) return EP_E_SHAPE;
      axes[na] = (int32_t)a;
    }
  }
  const uint32_t mode = (uint32_t)p[0], xr = x->rank, ro = mode == 3 ? xr + na : xr;
  int32_t d[EP_MAX_RANK];
  uint32_t r = 0, marked = 0;
  if (mode == 0) {
    r = y->rank;
    const ep_status s = reshape_dims(x, n->n_in > 1 ? n->in[1] : 0, p[1], r, d);
    if (s) return s;
  } else if (mode == 1) {
    const uint32_t ax = (uint32_t)(p[1] < 0 ? p[1] + (int32_t)xr : p[1]);
    if (ax > xr) return EP_E_SHAPE;   /* also a negative axis below -rank */
    const uint64_t outer = prod(x->dims, 0, ax), inner = prod(x->dims, ax, xr);
    if (outer > INT32_MAX || inner > INT32_MAX) return EP_E_SHAPE;
    d[0] = (int32_t)outer; d[1] = (int32_t)inner; r = 2;
  } else if (mode <= 3) {
    if (ro > EP_MAX_RANK) return EP_E_SHAPE;
    for (uint32_t i = 0; i < na; i++) {
      const uint32_t ax = (uint32_t)(axes[i] < 0 ? axes[i] + (int32_t)ro : axes[i]);
      if (ax >= ro || (marked >> ax) & 1u || (mode == 2 && x->dims[ax] != 1)) return EP_E_SHAPE;
      marked |= 1u << ax;
    }
    for (uint32_t k = 0, j = 0; k < ro; k++) {
      const uint32_t m = (marked >> k) & 1u;
      if (mode == 3) d[r++] = m ? 1 : x->dims[j++];
      else if (na ? !m : x->dims[k] != 1) d[r++] = x->dims[k];
    }
  } else {
    return EP_E_SHAPE;
  }
  const ep_status s = ep_shape_set(y, r, d);
  return s ? s : y->numel == x->numel ? EP_OK : EP_E_SHAPE;
}

/* Start, limit, delta (scalars of one dtype): max(ceil((limit - start) / delta), 0) elements, computed as
 * onnxruntime does (float32: the difference in float, the quotient in double; integers: exactly). */
ep_status ep_shape_RANGE(ep_node *n) {
  const ep_tensor *t[3] = {n->in[0], n->in[1], n->in[2]};
  for (int i = 0; i < 3; i++)
    if (!t[i] || !t[i]->data || t[i]->numel != 1 || t[i]->dtype != t[0]->dtype) return EP_E_SHAPE;
  uint64_t count;
  if (t[0]->dtype == EP_F32) {
    const float s = ep_f32(t[0])[0], l = ep_f32(t[1])[0], dl = ep_f32(t[2])[0];
    const double q = (double)(l - s) / (double)dl;
    if (dl == 0.0f || q != q || q > (double)INT32_MAX) return EP_E_SHAPE;
    count = q <= 0.0 ? 0 : (uint64_t)q + ((double)(uint64_t)q < q);
  } else if (t[0]->dtype == EP_I64 || t[0]->dtype == EP_I32) {
    const int64_t s = ep_value_at(t[0], 0), l = ep_value_at(t[1], 0), dl = ep_value_at(t[2], 0);
    if (dl == 0) return EP_E_SHAPE;
    /* |difference| and |delta| in uint64: exact for every int64 value, no signed overflow */
    const uint64_t diff = dl > 0 ? (uint64_t)l - (uint64_t)s : (uint64_t)s - (uint64_t)l;
    const uint64_t step = dl > 0 ? (uint64_t)dl : 0u - (uint64_t)dl;
    count = (dl > 0 ? l > s : s > l) ? diff / step + (diff % step != 0) : 0;
  } else {
    return EP_E_SHAPE;
  }
  if (count > INT32_MAX) return EP_E_SHAPE;
  const int32_t d[1] = {(int32_t)count};
  return ep_shape_set(n->out[0], 1, d);
}

/* [value_lo, value_hi]: Y's dims are input 0's int64 values. */
ep_status ep_shape_CONSTANT_OF_SHAPE(ep_node *n) {
  ep_tensor t;
  const ep_status s = ep_shape_of_values(n->in[0], &t);
  return s ? s : ep_shape_set(n->out[0], t.rank, t.dims);
}
EP_COLD_FILE_END
