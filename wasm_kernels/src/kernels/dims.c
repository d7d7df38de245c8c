/* Plan v2 kernels whose output dims are known only at run time (shape functions: shape/shape_dims.c).
 *
 * SHAPE             in: any tensor (data never read) -> out: int64 [count]. params [start, end] (ONNX Shape-15,
 *                   normalized against the input's rank here, clamped). Writes the input's dims in [start, end).
 * VIEW              in: data, shape? (int64: Reshape's target, or Squeeze/Unsqueeze's axes when n_axes is 0)
 *                   -> out: same dtype and element count.
 *                   params [mode, a, n_axes, axes...]: 0 Reshape (a = allowzero), 1 Flatten (a = axis), 2 Squeeze,
 *                   3 Unsqueeze. Copies the bytes unless the output is the input's own bytes (then nothing).
 * RANGE             in: start, limit, delta (one element each; int32, int64 or float32) -> out: 1-D of their dtype,
 *                   y[i] = start + i * delta. No params.
 * CONSTANT_OF_SHAPE in: shape (int64 1-D) -> out: those dims, filled with params [value_lo, value_hi] (the raw
 *                   little-endian bytes of the value in the output's dtype, as PAD's value words). */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN   /* shape arithmetic: smallest code */

/* Where the values a shape function reads are known (weights, or resolved), the output dims must be its. */
static ep_status agrees_if(int known, const ep_node *n, ep_shape_fn f) { return known ? ep_shape_agrees(n, f) : EP_OK; }

/* ---- SHAPE ---- */

ep_status ep_check_SHAPE(const ep_node *n) {
  EP_CHECK(n->in[0] && n->n_params == 2, EP_E_PARAM);
  EP_CHECK(n->out[0]->dtype == EP_I64, EP_E_DTYPE);
  return ep_shape_agrees(n, ep_shape_SHAPE);
}

ep_status ep_run_SHAPE(const ep_node *n) {
  uint32_t first, count;
  ep_shape_span(n->in[0]->rank, n->params, &first, &count);
  for (uint32_t i = 0; i < count; i++) ep_i64(n->out[0])[i] = n->in[0]->dims[first + i];
  return EP_OK;
}

/* ---- VIEW ---- */

ep_status ep_check_VIEW(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0], *s = n->n_in > 1 ? n->in[1] : 0;
  EP_CHECK(x && n->n_params >= 3 && n->params[0] >= 0 && n->params[0] <= 3, EP_E_PARAM);
  EP_CHECK(x->dtype == y->dtype, EP_E_DTYPE);
  EP_CHECK(x->numel == y->numel && x->numel * ep_dtype_size(x->dtype) <= 0xFFFFFFFFu, EP_E_SHAPE);
  if (n->params[0] == 0) EP_CHECK(s && s->dtype == EP_I64 && s->rank == 1 && s->numel == y->rank, EP_E_SHAPE);
  else if (s) EP_CHECK(n->params[0] >= 2 && n->params[2] == 0 && s->dtype == EP_I64 && s->rank == 1, EP_E_OP);   /* run-time axes */
  return agrees_if(!s || s->data, n, ep_shape_VIEW);
}

ep_status ep_run_VIEW(const ep_node *n) {
  if (n->out[0]->data != n->in[0]->data)
    ep_memcpy(n->out[0]->data, n->in[0]->data, (uint32_t)(n->in[0]->numel * ep_dtype_size(n->in[0]->dtype)));
  return EP_OK;
}

/* ---- RANGE ---- */

ep_status ep_check_RANGE(const ep_node *n) {
  EP_CHECK(n->n_params == 0, EP_E_PARAM);
  const uint32_t dt = n->out[0]->dtype;
  EP_CHECK(dt == EP_F32 || dt == EP_I64 || dt == EP_I32, EP_E_DTYPE);
  for (int i = 0; i < 3; i++) {
    EP_CHECK(n->in[i], EP_E_OP);
    EP_CHECK(n->in[i]->dtype == dt, EP_E_DTYPE);
    EP_CHECK(n->in[i]->numel == 1, EP_E_SHAPE);
  }
  EP_CHECK(n->out[0]->rank == 1, EP_E_SHAPE);
  return agrees_if(n->in[0]->data && n->in[1]->data && n->in[2]->data, n, ep_shape_RANGE);
}

ep_status ep_run_RANGE(const ep_node *n) {
  const ep_tensor *y = n->out[0];
  if (y->dtype == EP_F32) {
    const float s = ep_f32(n->in[0])[0], dl = ep_f32(n->in[2])[0];
    for (uint64_t i = 0; i < y->numel; i++) ep_f32(y)[i] = s + (float)i * dl;
    return EP_OK;
  }
  /* integers wrap in uint64 (no signed overflow), as the int64 arithmetic of onnxruntime */
  const uint64_t s = (uint64_t)ep_value_at(n->in[0], 0), dl = (uint64_t)ep_value_at(n->in[2], 0);
  for (uint64_t i = 0; i < y->numel; i++) {
    const uint64_t v = s + i * dl;
    if (y->dtype == EP_I64) ep_i64(y)[i] = (int64_t)v;
    else ((int32_t *)(void *)y->data)[i] = (int32_t)(uint32_t)v;
  }
  return EP_OK;
}

/* ---- CONSTANT_OF_SHAPE ---- */

ep_status ep_check_CONSTANT_OF_SHAPE(const ep_node *n) {
  const ep_tensor *s = n->in[0], *y = n->out[0];
  EP_CHECK(s && n->n_params == 2, EP_E_PARAM);
  const uint32_t es = ep_dtype_size(y->dtype);
  EP_CHECK(es == 1 || es == 2 || es == 4 || es == 8, EP_E_DTYPE);
  EP_CHECK(s->dtype == EP_I64 && s->rank == 1 && s->numel == y->rank, EP_E_SHAPE);
  return agrees_if(s->data != 0, n, ep_shape_CONSTANT_OF_SHAPE);
}

ep_status ep_run_CONSTANT_OF_SHAPE(const ep_node *n) {
  const ep_tensor *y = n->out[0];
  ep_fill_value(y->data, y->numel, ep_dtype_size(y->dtype), (uint32_t)n->params[0], (uint32_t)n->params[1]);
  return EP_OK;
}
EP_COLD_FILE_END
