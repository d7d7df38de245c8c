/* Shared pieces of the kernels' shape functions (ep_shape.h). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

ep_status ep_shape_set(ep_tensor *t, uint32_t rank, const int32_t *dims) {
  if (rank != t->rank || rank > EP_MAX_RANK) return EP_E_SHAPE;
  uint64_t numel = 1;
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] < 0) return EP_E_SHAPE;
    t->dims[i] = dims[i];
    numel *= (uint64_t)dims[i];
    if (numel > 0xFFFFFFFFull) return EP_E_SHAPE;
  }
  for (uint32_t i = rank; i < EP_MAX_RANK; i++) t->dims[i] = 0;
  t->numel = numel;
  return EP_OK;
}

ep_status ep_shape_like(ep_tensor *out, const ep_tensor *t) { return ep_shape_set(out, t->rank, t->dims); }

ep_status ep_shape_broadcast(ep_tensor *out, const ep_tensor *const *ins, uint32_t n) {
  const uint32_t r = out->rank;
  int32_t d[EP_MAX_RANK];
  for (uint32_t i = 0; i < r; i++) d[i] = 1;
  for (uint32_t k = 0; k < n; k++) {
    const ep_tensor *t = ins[k];
    if (!t) continue;
    if (t->rank > r) return EP_E_SHAPE;
    for (uint32_t j = 0; j < t->rank; j++) {
      const uint32_t i = r - t->rank + j;
      const int32_t v = t->dims[j];
      if (v == d[i] || v == 1) continue;
      if (d[i] != 1) return EP_E_SHAPE;
      d[i] = v;
    }
  }
  return ep_shape_set(out, r, d);
}

int64_t ep_value_at(const ep_tensor *t, uint64_t k) {
  if (!t || !t->data || k >= t->numel) return 0;
  if (t->dtype == EP_I64) return ((const int64_t *)(const void *)t->data)[k];
  if (t->dtype == EP_I32) return ((const int32_t *)(const void *)t->data)[k];
  return 0;
}

ep_status ep_shape_of_values(const ep_tensor *s, ep_tensor *t) {
  if (!s || !s->data || s->dtype != EP_I64 || s->rank != 1 || s->numel > EP_MAX_RANK) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < s->numel; k++) {
    const int64_t v = ep_value_at(s, k);
    if (v < 0 || v > INT32_MAX) return EP_E_SHAPE;
    d[k] = (int32_t)v;
  }
  t->rank = (uint32_t)s->numel;
  return ep_shape_set(t, t->rank, d);
}

ep_status ep_shape_first(ep_node *n) {
  if (!n->in[0]) return EP_E_SHAPE;
  return ep_shape_like(n->out[0], n->in[0]);
}

ep_status ep_shape_agrees(const ep_node *n, ep_shape_fn f) {
  ep_node m = *n;
  ep_tensor o[EP_MAX_IO];
  for (uint32_t k = 0; k < n->n_out; k++) { o[k] = *n->out[k]; m.out[k] = &o[k]; }
  const ep_status s = f(&m);
  if (s) return s;
  for (uint32_t k = 0; k < n->n_out; k++)
    for (uint32_t d = 0; d < o[k].rank; d++)
      if (o[k].dims[d] != n->out[k]->dims[d]) return EP_E_SHAPE;
  return EP_OK;
}
EP_COLD_FILE_END
