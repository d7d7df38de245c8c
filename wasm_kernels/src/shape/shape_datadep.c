/* Shape and scratch functions of the data-dependent kernels (kernels/datadep.c): each output's capacity, the
 * largest extent the run can set (docs/plan-format.md, "Data-dependent output dims"). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

/* [max(rank, 1), numel] */
ep_status ep_shape_NONZERO(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || x->numel > 0x7FFFFFFFu) return EP_E_SHAPE;
  const int32_t d[2] = {x->rank ? (int32_t)x->rank : 1, (int32_t)x->numel};
  return ep_shape_set(n->out[0], 2, d);
}

/* [B * C * min(per_class, N), 3] (per_class -1: N) */
ep_status ep_shape_NON_MAX_SUPPRESSION(ep_node *n) {
  const ep_tensor *b = n->in[0], *s = n->in[1];
  if (!b || !s || b->rank != 3 || s->rank != 3 || n->n_params != 2) return EP_E_SHAPE;
  const int64_t k = n->params[1], per = k < 0 || k > b->dims[1] ? b->dims[1] : k;
  const uint64_t rows = (uint64_t)s->dims[0] * (uint64_t)s->dims[1] * (uint64_t)per;
  if (rows > 0x7FFFFFFFu) return EP_E_SHAPE;
  const int32_t d[2] = {(int32_t)rows, 3};
  return ep_shape_set(n->out[0], 2, d);
}

uint32_t ep_scratch_NON_MAX_SUPPRESSION(const ep_node *n) {
  return n->in[0] && n->in[0]->rank == 3 ? 8u * (uint32_t)n->in[0]->dims[1] : 0;
}

/* Y: X flattened [numel], or X's dims (axis >= 0); indices, inverse_indices, counts: [n] */
ep_status ep_shape_UNIQUE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 2 || n->n_out != 4 || n->params[0] < -1 || n->params[0] >= (int32_t)x->rank) return EP_E_SHAPE;
  const int32_t axis = n->params[0];
  if (x->numel > 0x7FFFFFFFu) return EP_E_SHAPE;
  const int32_t len = axis < 0 ? (int32_t)x->numel : x->dims[axis];
  ep_status s = axis < 0 ? ep_shape_set(n->out[0], 1, &len) : ep_shape_like(n->out[0], x);
  for (uint32_t o = 1; o < 4 && !s; o++) s = ep_shape_set(n->out[o], 1, &len);
  return s;
}

uint32_t ep_scratch_UNIQUE(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 2 || n->params[0] < -1 || n->params[0] >= (int32_t)x->rank || x->numel > 0x7FFFFFFFu) return 0;
  return 8u * (uint32_t)(n->params[0] < 0 ? x->numel : (uint64_t)x->dims[n->params[0]]);
}

EP_COLD_FILE_END
