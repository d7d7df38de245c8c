/* Shape functions of the elementwise kernels (kernels/elementwise.c). UNARY and CAST: ep_shape_first. */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

/* Numpy broadcasting of every input into the output's rank: BINARY (A, B) and WHERE (Cond, X, Y). */
ep_status ep_shape_BINARY(ep_node *n) {
  for (uint32_t k = 0; k < n->n_in; k++) if (!n->in[k]) return EP_E_SHAPE;
  return ep_shape_broadcast(n->out[0], n->in, n->n_in);
}
EP_COLD_FILE_END
