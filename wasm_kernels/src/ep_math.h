/* Freestanding float math (no libm): accurate to a few ulp over the full float range,
 * with IEEE special cases (inf, nan, signed zero) handled as libm does. Scalar and f32x4 forms. */
#ifndef EP_MATH_H
#define EP_MATH_H
#include <stdint.h>
#include "ep_vec.h"

/* Scalar max/min propagating NaN from either operand (numpy maximum/minimum); the vector layer's f32x4_max_nan /
 * f32x4_min_nan are the lane versions (its plain f32x4_max/min are wasm's pmax/pmin, which drop a NaN second
 * operand). Reductions, MaxPool, ScatterElements' max/min. */
static inline float ep_max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float ep_min_nan(float a, float b) { return (a < b || a != a) ? a : b; }

float ep_expf(float x);
float ep_logf(float x);
float ep_tanhf(float x);
float ep_erff(float x);
float ep_log1pf(float x);     /* log(1+x), accurate for small x */
float ep_sigmoidf(float x);   /* 1/(1+exp(-x)) without overflow */
float ep_powf(float x, float y);
float ep_sqrtf(float x);      /* maps to the sqrt instruction */
float ep_floorf(float x);
float ep_ceilf(float x);
float ep_roundf_even(float x); /* round half to even, as ONNX Round and QuantizeLinear */
float ep_fabsf(float x);
float ep_sinf(float x);
float ep_cosf(float x);
float ep_fmodf(float x, float y);   /* C fmodf, exact: sign of x; NaN for y = 0 or x = inf */
float ep_trigf(int32_t which, float x);   /* 0 tan, 1 asin, 2 acos, 3 atan, 4 sinh, 5 cosh, 6 asinh, 7 acosh, 8 atanh */
float ep_nanf(void);
float ep_inff(void);
int ep_isnan(float x);
/* Vector forms for the hot activations; lane-wise identical in accuracy to the scalar forms. */
f32x4 ep_expf4(f32x4 x);
f32x4 ep_tanhf4(f32x4 x);
f32x4 ep_erff4(f32x4 x);
f32x4 ep_sigmoidf4(f32x4 x);
f32x4 ep_logf4(f32x4 x);
#endif
