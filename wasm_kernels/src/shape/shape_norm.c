/* Shape functions of the normalization kernels (kernels/norm.c). BATCHNORM, SOFTMAX: ep_shape_first. */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

/* [axis, epsilon]: Y has X's dims; Mean and InvStdDev have X's dims before axis and 1 after it (ONNX), or
 * are 1-D [rows] (the packager's stand-in for an absent middle output). */
ep_status ep_shape_LAYERNORM(ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 2) return EP_E_SHAPE;
  const int32_t axis = n->params[0];
  if (axis < 0 || (uint32_t)axis >= x->rank) return EP_E_SHAPE;
  ep_status s = ep_shape_like(n->out[0], x);
  int32_t d[EP_MAX_RANK];
  uint64_t rows = 1;
  for (uint32_t k = 0; k < x->rank; k++) {
    d[k] = (int32_t)k < axis ? x->dims[k] : 1;
    rows *= (uint64_t)d[k];
  }
  if (rows > INT32_MAX) return EP_E_SHAPE;
  const int32_t flat[1] = {(int32_t)rows};
  for (uint32_t o = 1; o < n->n_out && !s; o++)
    s = n->out[o]->rank == x->rank ? ep_shape_set(n->out[o], x->rank, d) : ep_shape_set(n->out[o], 1, flat);
  return s;
}
EP_COLD_FILE_END
