/* Op id -> its shape and scratch functions (ep_shape.h). A kernel with no shape function runs only
 * with the shapes written in the plan: the packager keeps shapes static around it. */
#include "ep_shape.h"
#include "conv_linalg.h"

/* Defined in the kernel family files (src/kernels) or src/shape. */
static const ep_shape_entry table[EP_OP_COUNT] = {
  [EP_OP_UNARY] = {0, 0},
  [EP_OP_BINARY] = {0, 0},
  [EP_OP_WHERE] = {0, 0},
  [EP_OP_CAST] = {0, 0},
  [EP_OP_CONV] = {ep_shape_CONV, ep_scratch_CONV},
  [EP_OP_CONV_TRANSPOSE] = {ep_shape_CONV_TRANSPOSE, ep_scratch_CONV_TRANSPOSE},
  [EP_OP_GEMM] = {ep_shape_GEMM, ep_scratch_GEMM},
  [EP_OP_MATMUL] = {ep_shape_MATMUL, ep_scratch_MATMUL},
  [EP_OP_POOL] = {ep_shape_POOL, ep_scratch_POOL},
  [EP_OP_GLOBAL_POOL] = {0, 0},
  [EP_OP_BATCHNORM] = {0, 0},
  [EP_OP_SOFTMAX] = {0, 0},
  [EP_OP_LAYERNORM] = {0, 0},
  [EP_OP_REDUCE] = {0, 0},
  [EP_OP_CONCAT] = {0, 0},
  [EP_OP_SPLIT] = {0, 0},
  [EP_OP_SLICE] = {0, 0},
  [EP_OP_GATHER] = {0, 0},
  [EP_OP_TRANSPOSE] = {0, 0},
  [EP_OP_COPY] = {0, 0},
  [EP_OP_PAD] = {0, 0},
  [EP_OP_EXPAND] = {0, 0},
  [EP_OP_RESIZE] = {0, 0},
  [EP_OP_DEPTHWISE_CONV] = {ep_shape_DEPTHWISE_CONV, ep_scratch_DEPTHWISE_CONV},
  [EP_OP_WINOGRAD_CONV] = {ep_shape_WINOGRAD_CONV, ep_scratch_WINOGRAD_CONV},
  [EP_OP_QUANTIZE_LINEAR] = {0, 0},
  [EP_OP_DEQUANTIZE_LINEAR] = {0, 0},
  [EP_OP_DYNAMIC_QUANTIZE_LINEAR] = {0, 0},
  [EP_OP_QCONV] = {ep_shape_QCONV, ep_scratch_QCONV},
  [EP_OP_QDEPTHWISE_CONV] = {ep_shape_QDEPTHWISE_CONV, ep_scratch_QDEPTHWISE_CONV},
  [EP_OP_QMATMUL] = {ep_shape_QMATMUL, ep_scratch_QMATMUL},
  [EP_OP_QADD] = {0, 0},
  [EP_OP_QMAXPOOL] = {0, 0},
  [EP_OP_QWINOGRAD_CONV] = {ep_shape_QWINOGRAD_CONV, ep_scratch_QWINOGRAD_CONV},
  [EP_OP_WINOGRAD_CONV_F4] = {ep_shape_WINOGRAD_CONV_F4, ep_scratch_WINOGRAD_CONV_F4},
  [EP_OP_WINOGRAD_FILTER] = {ep_shape_WINOGRAD_FILTER, 0},
};

const ep_shape_entry *ep_shape_for(uint32_t op) {
  if (op == 0 || op >= EP_OP_COUNT) return 0;
  return &table[op];
}
