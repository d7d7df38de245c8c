/* Function codes of the UNARY kernel (its params[0]) and the shared activation epilogue.
 * Codes below EP_ACT_COUNT are the activations that conv/gemm/matmul may fuse: they call
 * ep_activation_nparams() in check() and ep_apply_activation() on their output rows in run().
 * Mirrored in packager/ops/elementwise.py (class UnaryFn). Plan format: never renumber, append. */
#ifndef EP_ACTIVATION_H
#define EP_ACTIVATION_H
#include <stdint.h>

enum ep_unary_fn {
  EP_ACT_NONE = 0,           /* identity */
  EP_ACT_RELU = 1,
  EP_ACT_LEAKY_RELU = 2,     /* alpha */
  EP_ACT_CLIP = 3,           /* min, max (either may be -inf/+inf) */
  EP_ACT_SIGMOID = 4,
  EP_ACT_HARDSIGMOID = 5,    /* alpha, beta: max(0, min(1, alpha*x + beta)) */
  EP_ACT_HARDSWISH = 6,      /* x * hardsigmoid(x; 1/6, 1/2) */
  EP_ACT_TANH = 7,
  EP_ACT_GELU = 8,           /* 0.5 x (1 + erf(x / sqrt 2)) */
  EP_ACT_GELU_TANH = 9,      /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  EP_ACT_COUNT = 10,
  /* UNARY only (not fusable): */
  EP_UN_ERF = 10,
  EP_UN_EXP = 11,
  EP_UN_LOG = 12,
  EP_UN_SQRT = 13,
  EP_UN_RECIPROCAL = 14,
  EP_UN_NEG = 15,
  EP_UN_ABS = 16,
  EP_UN_FLOOR = 17,
  EP_UN_CEIL = 18,
  EP_UN_ROUND = 19,          /* half to even */
  EP_UN_SIGN = 20,
  EP_UN_ELU = 21,            /* alpha */
  EP_UN_SELU = 22,           /* alpha, gamma */
  EP_UN_CELU = 23,           /* alpha */
  EP_UN_SOFTPLUS = 24,
  EP_UN_SOFTSIGN = 25,
  EP_UN_MISH = 26,
  EP_UN_THRESHOLDED_RELU = 27, /* alpha */
  EP_UN_SIN = 28,
  EP_UN_COS = 29,
  EP_UN_POW = 30,            /* exponent: x^e, exact fast paths for e in {0, 1, 2, 3, 4, -1} */
  EP_UN_NOT = 31,            /* bool -> bool (the only non-float32 function) */
  EP_UN_COUNT = 32
};

/* Number of float parameter words function `fn` takes; -1 if fn is not a UNARY function code. */
int32_t ep_unary_nparams(int32_t fn);
/* Same, but -1 unless fn is a fusable activation (0 <= fn < EP_ACT_COUNT). */
int32_t ep_activation_nparams(int32_t fn);
/* Apply activation fn (validated with ep_activation_nparams in check()) with its parameter words
 * fn_params[0..nparams) to x[0..count) in place. Vectorized; x needs no particular alignment. */
void ep_apply_activation(float *x, uint32_t count, int32_t fn, const int32_t *fn_params);
#endif
