/* Shape and scratch functions (ep_shape.h) of the convolution, linear-algebra and pooling kernels.
 * Shapes live in src/shape/shape_conv.c and shape_linalg.c; each scratch function lives in its kernel's file,
 * next to check(), so that the two share one formula (and one derivation of the block sizes a dynamic plan
 * leaves to the core: CONV's, WINOGRAD's, QCONV's, QWINOGRAD's nt, QMATMUL's nb and ATTENTION's block_rows
 * written as 0). */
#ifndef EP_SHAPE_CONV_LINALG_H
#define EP_SHAPE_CONV_LINALG_H
#include "ep_shape.h"

/* Per-thread scratch buffers the packager gives DEPTHWISE_CONV (padded planes), WINOGRAD_CONV(_F4) (input rows)
 * and POOL (rows): docs/plan-format.md "Threads"; packager/ops/conv.py THREAD_SLOTS. */
#define EP_THREAD_SLOTS 4u

/* Scratch byte counts past 32 bits saturate: check() then refuses the node (no arena holds it). */
static inline uint32_t ep_scratch_u32(uint64_t bytes) { return bytes > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)bytes; }

#define EP_SHAPE_OPS(X) X(CONV) X(DEPTHWISE_CONV) X(WINOGRAD_CONV) X(WINOGRAD_CONV_F4) X(CONV_TRANSPOSE) X(GEMM) \
  X(MATMUL) X(POOL) X(QCONV) X(QDEPTHWISE_CONV) X(QMATMUL) X(QWINOGRAD_CONV) X(ATTENTION)
#define EP_SHAPE_DECLARE(name) ep_status ep_shape_##name(ep_node *n); uint32_t ep_scratch_##name(const ep_node *n);
EP_SHAPE_OPS(EP_SHAPE_DECLARE)
#undef EP_SHAPE_DECLARE
ep_status ep_shape_WINOGRAD_FILTER(ep_node *n);   /* no scratch */
#endif
