/* Kernel ids: the `op` field of a plan node. Stable numbers: they are part of the plan format.
 * packager/plan/opcodes.py mirrors this list (a test checks both agree). Never renumber; append. */
#ifndef EP_OPS_H
#define EP_OPS_H
#define EP_OP_LIST(X) \
  X(1, UNARY)          /* elementwise unary f32, params[0] = ep_unary_fn, then fn params */ \
  X(2, BINARY)         /* elementwise binary with broadcasting, params[0] = ep_binary_fn */ \
  X(3, WHERE)          \
  X(4, CAST)           \
  X(5, CONV)           \
  X(6, CONV_TRANSPOSE) \
  X(7, GEMM)           \
  X(8, MATMUL)         \
  X(9, POOL)           \
  X(10, GLOBAL_POOL)   \
  X(11, BATCHNORM)     \
  X(12, SOFTMAX)       \
  X(13, LAYERNORM)     \
  X(14, REDUCE)        \
  X(15, CONCAT)        \
  X(16, SPLIT)         \
  X(17, SLICE)         \
  X(18, GATHER)        \
  X(19, TRANSPOSE)     \
  X(20, COPY)          /* byte copy: Reshape/Flatten/Squeeze/Unsqueeze/Identity when not aliased */ \
  X(21, PAD)           \
  X(22, EXPAND)        \
  X(23, RESIZE)        \
  X(24, DEPTHWISE_CONV) \
  X(25, WINOGRAD_CONV)  /* 3x3 stride-1 conv as Winograd F(2x2,3x3) */ \
  X(26, QUANTIZE_LINEAR) /* int8 family (ids 26..39): quantize.c, qconv.c, qmatmul.c */ \
  X(27, DEQUANTIZE_LINEAR) \
  X(28, DYNAMIC_QUANTIZE_LINEAR) \
  X(29, QCONV)          /* integer conv through the int8 GEMM, requantizing epilogue */ \
  X(30, QDEPTHWISE_CONV) \
  X(31, QMATMUL)        \
  X(32, QADD)           /* DQ(a) + DQ(b) [-> act] -> Q */ \
  X(33, QMAXPOOL)       /* MaxPool on int8/uint8 data (DQ -> MaxPool -> Q with equal scales) */ \
  X(34, QWINOGRAD_CONV) /* 3x3 stride-1 QCONV as exact integer Winograd F(2x2,3x3) */ \
  X(40, WINOGRAD_CONV_F4) /* 3x3 stride-1 conv as Winograd F(4x4,3x3): planes of 16+ tiles */ \
  X(41, WINOGRAD_FILTER) /* prologue: Winograd U = G g G^T from 3x3 taps, once at bind */ \
  X(42, SHAPE)          /* plan v2: the dims of its input as int64 (reads no data) */ \
  X(43, VIEW)           /* plan v2: Reshape/Flatten/Squeeze/Unsqueeze: same bytes, dims resolved at run time */ \
  X(44, RANGE)          /* plan v2: Range(start, limit, delta), length known at run time */ \
  X(45, CONSTANT_OF_SHAPE) /* plan v2: ConstantOfShape of a run-time shape */ \
  X(46, IF)             /* plan v2 control flow (src/control.c): bodies are node ranges after the main sequence */ \
  X(47, LOOP)           \
  X(48, SCAN)

enum ep_op {
#define EP_OP_ENUM(n, name) EP_OP_##name = n,
  EP_OP_LIST(EP_OP_ENUM)
#undef EP_OP_ENUM
  EP_OP_COUNT
};
#endif
