/* Shape and scratch functions of the reductions: REDUCE (kernels/reduce.c) and GLOBAL_POOL (kernels/pool.c,
 * a reduction over the spatial dims; POOL's shape lives with the window kernels). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

#define R_LSE 9   /* reduce.c's log-sum-exp kind: the one that needs scratch */

ep_status ep_reduce_mask(const ep_node *n, uint32_t *mask) {
  const ep_tensor *x = n->in[0], *a = n->n_in > 1 ? n->in[1] : 0;
  if (!x || n->n_params < 2 || n->n_params > 3 || n->params[1] < 0 || (uint32_t)n->params[1] >= (1u << x->rank)) return EP_E_SHAPE;
  *mask = (uint32_t)n->params[1];
  if (n->n_params == 2) return a ? EP_E_SHAPE : EP_OK;
  /* run-time axes: int64 1-D values, negative from the end, none repeated */
  if (!a || !a->data || a->dtype != EP_I64 || a->rank != 1 || *mask || (n->params[2] & ~1)) return EP_E_SHAPE;
  for (uint64_t k = 0; k < a->numel; k++) {
    int64_t v = ep_value_at(a, k);
    if (v < 0) v += x->rank;
    if (v < 0 || v >= (int64_t)x->rank || ((*mask >> v) & 1u)) return EP_E_SHAPE;
    *mask |= 1u << v;
  }
  if (a->numel == 0 && !n->params[2]) *mask = (1u << x->rank) - 1u;
  return EP_OK;
}

/* [kind, mask] or [kind, 0, noop] with axes: the reduced dims become 1 when Y keeps X's rank (keepdims, or nothing
 * reduced), else go. */
ep_status ep_shape_REDUCE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  ep_tensor *y = n->out[0];
  uint32_t mask;
  if (ep_reduce_mask(n, &mask)) return EP_E_SHAPE;
  const uint32_t keep = y->rank == x->rank;
  int32_t d[EP_MAX_RANK];
  uint32_t j = 0;
  for (uint32_t k = 0; k < x->rank; k++) {
    if (!((mask >> k) & 1u)) d[j++] = x->dims[k];
    else if (keep) d[j++] = 1;
  }
  return ep_shape_set(y, j, d);
}

uint32_t ep_scratch_REDUCE(const ep_node *n) {
  if (n->n_params < 2 || n->params[0] != R_LSE) return 0;
  return n->out[0]->numel > 0x3FFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(4u * n->out[0]->numel);
}

/* [kind]: Y is [N, C, 1, ...] of X's rank. */
ep_status ep_shape_GLOBAL_POOL(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || x->rank < 2) return EP_E_SHAPE;
  int32_t d[EP_MAX_RANK];
  for (uint32_t k = 0; k < x->rank; k++) d[k] = k < 2 ? x->dims[k] : 1;
  return ep_shape_set(n->out[0], x->rank, d);
}
EP_COLD_FILE_END
