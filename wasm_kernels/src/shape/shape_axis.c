/* Shape and scratch functions of the long-tail index kernels (kernels/axis_ops.c): AXIS and GATHER_ND; SCATTER's
 * output is its data input's shape (ep_shape_first). */
#include "ep_shape.h"
#include "conv_linalg.h"
EP_COLD_FILE_BEGIN

enum { AX_ARGMAX, AX_ARGMIN, AX_HARDMAX, AX_TOPK, AX_CUMSUM, AX_CUMPROD };   /* AXIS's modes (kernels/axis_ops.c) */

int32_t ep_axis_of(const ep_node *n) {
  const ep_tensor *x = n->in[0], *v = n->n_in > 1 ? n->in[1] : 0;
  if (!x || n->n_params != 4) return -1;
  int64_t a = n->params[1];
  if (a == -1 && n->params[0] >= AX_CUMSUM) {   /* CumSum / CumProd's axis input (a value input) */
    if (!v || !v->data || v->numel != 1) return -1;   /* int32 / int64 (ep_value_at reads no other dtype) */
    a = ep_value_at(v, 0);
    if (a < 0) a += x->rank;
  }
  return a >= 0 && a < (int64_t)x->rank ? (int32_t)a : -1;
}

/* [mode, axis, a, b]: ArgMax/ArgMin drop axis or keep it as 1 (Y's rank says which); TopK puts k (b, or K's
 * value when b = -1) on it; Hardmax, CumSum and CumProd keep X's dims. */
ep_status ep_shape_AXIS(ep_node *n) {
  const ep_tensor *x = n->in[0];
  const int32_t ax = ep_axis_of(n);
  if (ax < 0) return EP_E_SHAPE;
  const int32_t mode = n->params[0];
  const uint32_t axis = (uint32_t)ax;
  int32_t d[EP_MAX_RANK];
  uint32_t r = 0;
  int64_t k = 1;
  if (mode == AX_TOPK) {
    k = n->params[3];
    if (k < 0) {
      if (n->n_in < 2 || !n->in[1] || !n->in[1]->data || n->in[1]->numel != 1) return EP_E_SHAPE;
      k = ep_value_at(n->in[1], 0);
    }
    if (k < 0 || k > x->dims[axis] || n->n_out != 2) return EP_E_SHAPE;
  }
  for (uint32_t i = 0; i < x->rank; i++) {
    if (i != axis || mode == AX_HARDMAX || mode >= AX_CUMSUM) d[r++] = x->dims[i];
    else if (mode == AX_TOPK) d[r++] = (int32_t)k;
    else if (n->out[0]->rank == x->rank) d[r++] = 1;   /* ArgMax/ArgMin keepdims */
  }
  for (uint32_t o = 0; o < n->n_out; o++) {
    const ep_status s = ep_shape_set(n->out[o], r, d);
    if (s) return s;
  }
  return EP_OK;
}

uint32_t ep_scratch_AXIS(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  if (!x || n->n_params != 4 || n->params[0] != AX_TOPK || n->params[1] < 0 || (uint32_t)n->params[1] >= x->rank) return 0;
  return ep_scratch_u32(4u * (uint64_t)x->dims[n->params[1]]);
}

/* [b]: indices.shape[:-1] + data.shape[b + q:], the first b dims shared. */
ep_status ep_shape_GATHER_ND(ep_node *n) {
  const ep_tensor *d = n->in[0], *ix = n->in[1];
  if (!d || !ix || n->n_params != 1 || ix->rank < 1) return EP_E_SHAPE;
  const int32_t b = n->params[0];
  const uint32_t q = (uint32_t)ix->dims[ix->rank - 1];
  if (b < 0 || (uint32_t)b >= ix->rank || (uint32_t)b + q > d->rank) return EP_E_SHAPE;
  int32_t o[EP_MAX_RANK];
  uint32_t r = 0;
  for (uint32_t k = 0; k + 1 < ix->rank; k++) {
    if (k < (uint32_t)b && ix->dims[k] != d->dims[k]) return EP_E_SHAPE;
    o[r++] = ix->dims[k];
  }
  for (uint32_t k = (uint32_t)b + q; k < d->rank; k++) {
    if (r >= EP_MAX_RANK) return EP_E_SHAPE;
    o[r++] = d->dims[k];
  }
  return ep_shape_set(n->out[0], r, o);
}

EP_COLD_FILE_END
