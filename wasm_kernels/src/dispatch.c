/* Kernel table: op id -> arity and the check/run pair of its family file. */
#include "ep_dispatch.h"

/* min_in, max_in, min_out, max_out per op. Variadic ops (Concat, Split) take up to EP_MAX_IO. */
#define K(name, a, b, c, d) [EP_OP_##name] = {a, b, c, d, ep_check_##name, ep_run_##name}
static const ep_kernel kernels[EP_OP_COUNT] = {
  K(UNARY, 1, 1, 1, 1),
  K(BINARY, 2, 2, 1, 1),
  K(WHERE, 3, 3, 1, 1),
  K(CAST, 1, 1, 1, 1),
  K(CONV, 2, 4, 1, 1),            /* X, packed W, bias?, residual? */
  K(CONV_TRANSPOSE, 2, 3, 1, 1),
  K(GEMM, 2, 4, 1, 1),            /* A, B, C?, residual? */
  K(MATMUL, 2, 4, 1, 1),          /* A, B, bias?, residual? */
  K(POOL, 1, 1, 1, 1),
  K(GLOBAL_POOL, 1, 1, 1, 1),
  K(BATCHNORM, 3, 5, 1, 1),      /* X, a, b (folded) or X, scale, B, mean, var */
  K(SOFTMAX, 1, 1, 1, 1),
  K(LAYERNORM, 1, 3, 1, 3),      /* X, scale?, bias? -> Y, Mean?, InvStdDev? */
  K(REDUCE, 1, 1, 1, 1),
  K(CONCAT, 1, EP_MAX_IO, 1, 1),
  K(SPLIT, 1, 1, 1, EP_MAX_IO),
  K(SLICE, 1, 1, 1, 1),
  K(GATHER, 2, 2, 1, 1),
  K(TRANSPOSE, 1, 1, 1, 1),
  K(COPY, 1, 1, 1, 1),
  K(PAD, 1, 2, 1, 1),
  K(EXPAND, 1, 1, 1, 1),
  K(RESIZE, 1, 1, 1, 1),
  K(DEPTHWISE_CONV, 2, 4, 1, 1),
  K(WINOGRAD_CONV, 2, 4, 1, 1),   /* X, transformed W, bias?, residual? */
  K(QUANTIZE_LINEAR, 2, 3, 1, 1),  /* X, scale, zp? */
  K(DEQUANTIZE_LINEAR, 2, 3, 1, 1),
  K(DYNAMIC_QUANTIZE_LINEAR, 1, 1, 3, 3),
  K(QCONV, 2, 5, 1, 1),            /* X, packed W, bias?, mult?, wzp? */
  K(QDEPTHWISE_CONV, 2, 5, 1, 1),
  K(QMATMUL, 2, 6, 1, 1),          /* X, W, bias?, mult?, wzp?, xzp? */
  K(QADD, 2, 2, 1, 1),
  K(QMAXPOOL, 1, 1, 1, 1),
  K(QWINOGRAD_CONV, 2, 4, 1, 1),   /* X, U (int16 pairs), bias?, mult? */
  K(WINOGRAD_CONV_F4, 2, 4, 1, 1), /* X, transformed W (36 matrices), bias?, residual? */
  K(WINOGRAD_FILTER, 1, 1, 1, 1),  /* 3x3 taps -> U */
  K(IF, 1, 1, 1, EP_MAX_IO),       /* cond -> outputs; the executor runs them (control.c) */
  K(LOOP, 2, EP_MAX_IO, 1, EP_MAX_IO), /* M?, cond?, carried -> carried, scan outputs */
  K(SCAN, 1, EP_MAX_IO, 1, EP_MAX_IO), /* states, scan inputs -> states, scan outputs */
};
#undef K

const ep_kernel *ep_kernel_for(uint32_t op) {
  if (op == 0 || op >= EP_OP_COUNT || kernels[op].run == 0) return 0;
  return &kernels[op];
}
