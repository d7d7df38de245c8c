/* The f32x4 exp and erf of ep_math.c as always-inline bodies, with the constants the scalar forms share.
 * Kernels whose loop is one of these (softmax, GELU, Erf) call ep_expf4_hot / ep_erff4_hot: inlined on the wasm
 * SIMD builds, where a call per vector keeps none of the polynomial's constants in registers (in V8 exp 1.3x,
 * erf 1.5x slower than inlined in the kernel's loop: docs/transformer.md); a call elsewhere (the scalar build
 * stays under its size budget). Same operations either way, so the same bits as ep_expf4 / ep_erff4. */
#ifndef EP_MATH_VEC_H
#define EP_MATH_VEC_H
#include "ep_kernel.h"
#include "ep_vec.h"
#include "ep_math.h"

#define EXP_HI 88.72283172607421875f     /* largest x with a finite expf (0x42b17217) */
#define EXP_LO (-104.0f)                 /* below this expf rounds to +0 */
#define LOG2EF 1.44269504088896341f
#define LN2_C1 0.693359375f              /* ln2 = C1 - C2, C1 exact in 10 bits */
#define LN2_C2 (-2.12194440e-4f)
#define EXP_P0 1.9875691500E-4f
#define EXP_P1 1.3981999507E-3f
#define EXP_P2 8.3334519073E-3f
#define EXP_P3 4.1665795894E-2f
#define EXP_P4 1.6666665459E-1f
#define EXP_P5 5.0000001201E-1f

EP_AINLINE f32x4 ep_expf4_body(f32x4 x) {
  f32x4 xc = f32x4_min(f32x4_max(x, f32x4_splat(EXP_LO)), f32x4_splat(EXP_HI));
  f32x4 n = f32x4_round_even(f32x4_mul(xc, f32x4_splat(LOG2EF)));
  f32x4 r = f32x4_sub(xc, f32x4_mul(n, f32x4_splat(LN2_C1)));
  r = f32x4_sub(r, f32x4_mul(n, f32x4_splat(LN2_C2)));
  f32x4 z = f32x4_mul(r, r);
  f32x4 p = f32x4_splat(EXP_P0);
  p = f32x4_fma(f32x4_splat(EXP_P1), p, r);
  p = f32x4_fma(f32x4_splat(EXP_P2), p, r);
  p = f32x4_fma(f32x4_splat(EXP_P3), p, r);
  p = f32x4_fma(f32x4_splat(EXP_P4), p, r);
  p = f32x4_fma(f32x4_splat(EXP_P5), p, r);
  f32x4 y = f32x4_add(f32x4_fma(r, p, z), f32x4_splat(1.0f));
  i32x4 ni = i32x4_from_f32x4(n), n1 = i32x4_shr(ni, 1), n2 = i32x4_sub(ni, n1);
  const i32x4 bias = i32x4_splat(127);
  y = f32x4_mul(y, i32x4_as_f32x4(i32x4_shl(i32x4_add(n1, bias), 23)));
  y = f32x4_mul(y, i32x4_as_f32x4(i32x4_shl(i32x4_add(n2, bias), 23)));
  y = f32x4_select(f32x4_lt(f32x4_splat(EXP_HI), x), f32x4_splat(__builtin_inff()), y);
  return f32x4_select(f32x4_eq(x, x), y, x);   /* NaN in, NaN out */
}

/* |x| < 1: erf(x) = x + x*Q(x^2) */
#define ERF_Q0 7.898139301687479e-05f
#define ERF_Q1 (-0.0008024335256777704f)
#define ERF_Q2 0.005190051626414061f
#define ERF_Q3 (-0.026854807510972023f)
#define ERF_Q4 0.11283612251281738f
#define ERF_Q5 (-0.3761262893676758f)
#define ERF_Q6 0.12837916612625122f
/* 1 <= |x| <= 4: erfc(x) = exp(-x^2) * R(x); beyond 4 erf rounds to +-1. */
#define ERF_R0 6.701274287479464e-06f
#define ERF_R1 (-0.0001558478397782892f)
#define ERF_R2 0.0016487045213580132f
#define ERF_R3 (-0.010549217462539673f)
#define ERF_R4 0.04584718123078346f
#define ERF_R5 (-0.1443343609571457f)
#define ERF_R6 0.34349584579467773f
#define ERF_R7 (-0.6376125812530518f)
#define ERF_R8 0.9425475597381592f
#define ERF_R9 (-1.1108734607696533f)
#define ERF_R10 0.9975630640983582f

EP_AINLINE f32x4 ep_erff4_body(f32x4 x) {
  f32x4 z = f32x4_mul(x, x);
  f32x4 q = f32x4_splat(ERF_Q0);
  q = f32x4_fma(f32x4_splat(ERF_Q1), q, z);
  q = f32x4_fma(f32x4_splat(ERF_Q2), q, z);
  q = f32x4_fma(f32x4_splat(ERF_Q3), q, z);
  q = f32x4_fma(f32x4_splat(ERF_Q4), q, z);
  q = f32x4_fma(f32x4_splat(ERF_Q5), q, z);
  q = f32x4_fma(f32x4_splat(ERF_Q6), q, z);
  f32x4 small = f32x4_fma(x, x, q);
  f32x4 a0 = f32x4_abs(x);
  f32x4 a = f32x4_min(a0, f32x4_splat(4.0f));
  f32x4 r = f32x4_splat(ERF_R0);
  r = f32x4_fma(f32x4_splat(ERF_R1), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R2), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R3), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R4), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R5), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R6), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R7), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R8), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R9), r, a);
  r = f32x4_fma(f32x4_splat(ERF_R10), r, a);
  f32x4 l = f32x4_sub(f32x4_splat(1.0f), f32x4_mul(ep_expf4_body(f32x4_neg(f32x4_mul(a, a))), r));
  l = f32x4_select(f32x4_lt(x, f32x4_zero()), f32x4_neg(l), l);
  f32x4 y = f32x4_select(f32x4_lt(a0, f32x4_splat(1.0f)), small, l);
  return f32x4_select(f32x4_eq(x, x), y, x);
}
#if defined(__wasm_simd128__) && !defined(EP_FORCE_SCALAR)
#define ep_expf4_hot ep_expf4_body
#define ep_erff4_hot ep_erff4_body
#else
#define ep_expf4_hot ep_expf4
#define ep_erff4_hot ep_erff4
#endif
#endif
