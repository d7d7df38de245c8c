/* Shape and scratch functions of the reductions: REDUCE (kernels/reduce.c) and GLOBAL_POOL (kernels/pool.c,
 * a reduction over the spatial dims; POOL's shape lives with the window kernels). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

#define R_LSE 9   /* reduce.c's log-sum-exp kind: the one that needs scratch */

/* [kind, mask]: the reduced dims become 1 when Y keeps X's rank (keepdims, or nothing reduced), else go. */
ep_status ep_shape_REDUCE(ep_node *n) {
  const ep_tensor *x = n->in[0];
  ep_tensor *y = n->out[0];
  if (!x || n->n_params != 2 || n->params[1] < 0 || (uint32_t)n->params[1] >= (1u << x->rank)) return EP_E_SHAPE;
  const uint32_t mask = (uint32_t)n->params[1], keep = y->rank == x->rank;
  int32_t d[EP_MAX_RANK];
  uint32_t j = 0;
  for (uint32_t k = 0; k < x->rank; k++) {
    if (!((mask >> k) & 1u)) d[j++] = x->dims[k];
    else if (keep) d[j++] = 1;
  }
  return ep_shape_set(y, j, d);
}

uint32_t ep_scratch_REDUCE(const ep_node *n) {
  if (n->n_params != 2 || n->params[0] != R_LSE) return 0;
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
