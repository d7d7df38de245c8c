/* Op id -> its shape and scratch functions (ep_shape.h). A kernel with no shape function runs only
 * with the shapes written in the plan: the packager keeps shapes static around it. */
#include "ep_shape.h"
#include "conv_linalg.h"

/* Defined in the kernel family files (src/kernels) or src/shape. */
static const ep_shape_entry table[EP_OP_COUNT] = {
  [EP_OP_UNARY] = {ep_shape_first, 0},
  [EP_OP_BINARY] = {ep_shape_BINARY, 0},
  [EP_OP_WHERE] = {ep_shape_BINARY, 0},
  [EP_OP_CAST] = {ep_shape_first, 0},
  [EP_OP_CONV] = {ep_shape_CONV, ep_scratch_CONV},
  [EP_OP_CONV_TRANSPOSE] = {ep_shape_CONV_TRANSPOSE, ep_scratch_CONV_TRANSPOSE},
  [EP_OP_GEMM] = {ep_shape_GEMM, ep_scratch_GEMM},
  [EP_OP_MATMUL] = {ep_shape_MATMUL, ep_scratch_MATMUL},
  [EP_OP_POOL] = {ep_shape_POOL, ep_scratch_POOL},
  [EP_OP_GLOBAL_POOL] = {ep_shape_GLOBAL_POOL, 0},
  [EP_OP_BATCHNORM] = {ep_shape_first, 0},
  [EP_OP_SOFTMAX] = {ep_shape_first, 0},
  [EP_OP_LAYERNORM] = {ep_shape_LAYERNORM, 0},
  [EP_OP_REDUCE] = {ep_shape_REDUCE, ep_scratch_REDUCE},
  [EP_OP_CONCAT] = {ep_shape_CONCAT, 0},
  [EP_OP_SPLIT] = {ep_shape_SPLIT, 0},
  [EP_OP_SLICE] = {ep_shape_SLICE, 0},
  [EP_OP_GATHER] = {ep_shape_GATHER, 0},
  [EP_OP_TRANSPOSE] = {ep_shape_TRANSPOSE, 0},
  [EP_OP_COPY] = {ep_shape_first, 0},
  [EP_OP_PAD] = {ep_shape_PAD, 0},
  [EP_OP_EXPAND] = {ep_shape_EXPAND, 0},
  [EP_OP_RESIZE] = {0, 0},   /* static only: its tables are per output coordinate */
  [EP_OP_DEPTHWISE_CONV] = {ep_shape_DEPTHWISE_CONV, ep_scratch_DEPTHWISE_CONV},
  [EP_OP_WINOGRAD_CONV] = {ep_shape_WINOGRAD_CONV, ep_scratch_WINOGRAD_CONV},
  [EP_OP_QUANTIZE_LINEAR] = {ep_shape_first, 0},
  [EP_OP_DEQUANTIZE_LINEAR] = {ep_shape_first, 0},
  [EP_OP_DYNAMIC_QUANTIZE_LINEAR] = {ep_shape_DYNAMIC_QUANTIZE_LINEAR, 0},
  [EP_OP_QCONV] = {ep_shape_QCONV, ep_scratch_QCONV},
  [EP_OP_QDEPTHWISE_CONV] = {ep_shape_QDEPTHWISE_CONV, ep_scratch_QDEPTHWISE_CONV},
  [EP_OP_QMATMUL] = {ep_shape_QMATMUL, ep_scratch_QMATMUL},
  [EP_OP_QADD] = {ep_shape_first, 0},
  [EP_OP_QMAXPOOL] = {ep_shape_QMAXPOOL, 0},
  [EP_OP_QLUT] = {ep_shape_first, 0},
  [EP_OP_QWINOGRAD_CONV] = {ep_shape_QWINOGRAD_CONV, ep_scratch_QWINOGRAD_CONV},
  [EP_OP_WINOGRAD_CONV_F4] = {ep_shape_WINOGRAD_CONV_F4, ep_scratch_WINOGRAD_CONV_F4},
  [EP_OP_WINOGRAD_FILTER] = {ep_shape_WINOGRAD_FILTER, 0},
  [EP_OP_SHAPE] = {ep_shape_SHAPE, 0},
  [EP_OP_VIEW] = {ep_shape_VIEW, 0},
  [EP_OP_RANGE] = {ep_shape_RANGE, 0},
  [EP_OP_CONSTANT_OF_SHAPE] = {ep_shape_CONSTANT_OF_SHAPE, 0},
  [EP_OP_RECURRENT] = {ep_shape_RECURRENT, ep_scratch_RECURRENT},
  [EP_OP_AXIS] = {ep_shape_AXIS, ep_scratch_AXIS},   /* kernels/axis_ops.c */
  [EP_OP_SCATTER] = {ep_shape_first, 0},
  [EP_OP_GATHER_ND] = {ep_shape_GATHER_ND, 0},
  [EP_OP_NONZERO] = {ep_shape_NONZERO, 0},   /* kernels/datadep.c: capacities */
  [EP_OP_NON_MAX_SUPPRESSION] = {ep_shape_NON_MAX_SUPPRESSION, ep_scratch_NON_MAX_SUPPRESSION},
  [EP_OP_UNIQUE] = {ep_shape_UNIQUE, ep_scratch_UNIQUE},
  [EP_OP_ATTENTION] = {ep_shape_ATTENTION, ep_scratch_ATTENTION},
};

const ep_shape_entry *ep_shape_for(uint32_t op) {
  if (op == 0 || op >= EP_OP_COUNT) return 0;
  return &table[op];
}
