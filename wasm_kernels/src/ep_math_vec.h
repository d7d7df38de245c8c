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

/* Where the polynomials' coefficients start in ep_erf_k (below; the table erf's f32x4 code reads as vectors, the
 * scalar forms as floats): exp's P (EXP_P0..5), erf's Q and R. */
#define EP_K_EXP_P 4
#define EP_K_ERF_Q 12
#define EP_K_ERF_R 19

/* Horner's rule on n <= 15 coefficients, highest degree first: p = c[0], then p = p*t + c[i] for i = 1 .. n-1, in
 * that order. One definition for every polynomial of ep_math.c: float, f32x4 (from a table of floats: constant
 * vectors; or of vectors: erf's, see EP_ERF_NK) and double (sin, cos, pow's log and exp). Tests on n, not a
 * loop: always inlined with a constant n they fold at once, and the code is that of the chain written out (a loop
 * unrolls only later, if at all: gcc -O2 keeps it; and GELU's loop would no longer hoist erf's coefficient loads
 * into locals). */
#define EP_HORNER_STEPS_(n, STEP) \
  if ((n) > 1) { STEP(1); } if ((n) > 2) { STEP(2); } if ((n) > 3) { STEP(3); } if ((n) > 4) { STEP(4); } \
  if ((n) > 5) { STEP(5); } if ((n) > 6) { STEP(6); } if ((n) > 7) { STEP(7); } if ((n) > 8) { STEP(8); } \
  if ((n) > 9) { STEP(9); } if ((n) > 10) { STEP(10); } if ((n) > 11) { STEP(11); } if ((n) > 12) { STEP(12); } \
  if ((n) > 13) { STEP(13); } if ((n) > 14) { STEP(14); }
#define EP_HORNER_F_(i) p = p * t + c[i]
#define EP_HORNER_4_(i) p = f32x4_fma(f32x4_splat(c[i]), p, t)
#define EP_HORNER_4V_(i) p = f32x4_fma(k[i], p, t)
EP_AINLINE double ep_horner_d(double t, const double *c, const uint32_t n) {
  double p = c[0];
  EP_HORNER_STEPS_(n, EP_HORNER_F_)
  return p;
}
EP_AINLINE float ep_horner(float t, const float *c, const uint32_t n) {
  float p = c[0];
  EP_HORNER_STEPS_(n, EP_HORNER_F_)
  return p;
}
EP_AINLINE f32x4 ep_horner4(f32x4 t, const float *c, const uint32_t n) {
  f32x4 p = f32x4_splat(c[0]);
  EP_HORNER_STEPS_(n, EP_HORNER_4_)
  return p;
}
EP_AINLINE f32x4 ep_horner4v(f32x4 t, const f32x4 *k, const uint32_t n) {
  f32x4 p = k[0];
  EP_HORNER_STEPS_(n, EP_HORNER_4V_)
  return p;
}
#undef EP_HORNER_F_
#undef EP_HORNER_4_
#undef EP_HORNER_4V_
#undef EP_HORNER_STEPS_

/* exp's polynomial part, shared by every f32x4 exp here: the Cody-Waite reduction r = x - n*ln2 (two parts), then
 * 1 + r + r^2 * P(r), degree 5. Constants from k = ep_erf_k's layout (k[2], k[3]: ln2's parts, k[4..9]: P,
 * k[10]: 1): the exps below pass constant vectors (v128.const at each use), erf its table (see EP_ERF_NK). */
EP_AINLINE f32x4 ep_exp_r(f32x4 x, f32x4 n, const f32x4 *k) {
  return f32x4_sub(f32x4_sub(x, f32x4_mul(n, k[2])), f32x4_mul(n, k[3]));
}
EP_AINLINE f32x4 ep_exp_poly(f32x4 x, f32x4 n, const f32x4 *k) {
  const f32x4 r = ep_exp_r(x, n, k);
  f32x4 z = f32x4_mul(r, r);
  return f32x4_add(f32x4_fma(r, ep_horner4v(r, k + EP_K_EXP_P, 6), z), k[10]);
}

/* exp(xc) given n = round(xc * log2e), as a float and as an integer: Cody-Waite reduction, the degree-5
 * polynomial, then the scale by 2^n in two steps (one 2^n cannot hold the subnormal results' scale). */
EP_AINLINE f32x4 ep_exp_reduced(f32x4 xc, f32x4 n, i32x4 ni) {
  const f32x4 k[11] = {f32x4_zero(), f32x4_zero(), f32x4_splat(LN2_C1), f32x4_splat(LN2_C2), f32x4_splat(EXP_P0),
                       f32x4_splat(EXP_P1), f32x4_splat(EXP_P2), f32x4_splat(EXP_P3), f32x4_splat(EXP_P4),
                       f32x4_splat(EXP_P5), f32x4_splat(1.0f)};
  f32x4 y = ep_exp_poly(xc, n, k);
  const i32x4 n1 = i32x4_shr(ni, 1), n2 = i32x4_sub(ni, n1), bias = i32x4_splat(127);
  y = f32x4_mul(y, i32x4_as_f32x4(i32x4_shl(i32x4_add(n1, bias), 23)));
  return f32x4_mul(y, i32x4_as_f32x4(i32x4_shl(i32x4_add(n2, bias), 23)));
}

EP_AINLINE f32x4 ep_expf4_body(f32x4 x) {
  f32x4 xc = f32x4_min(f32x4_max(x, f32x4_splat(EXP_LO)), f32x4_splat(EXP_HI));
  f32x4 n = f32x4_round_even(f32x4_mul(xc, f32x4_splat(LOG2EF)));
  f32x4 y = ep_exp_reduced(xc, n, i32x4_from_f32x4(n));
  y = f32x4_select(f32x4_lt(f32x4_splat(EXP_HI), x), f32x4_splat(__builtin_inff()), y);
  return f32x4_select(f32x4_eq(x, x), y, x);   /* NaN in, NaN out */
}

/* erf and the exp inside it read their constants from k[EP_ERF_NK] (values: ep_erf_k below). Called with
 * constants (ep_erff4_body) the compiler folds them into v128.const at each use, which V8 materializes
 * with several instructions per use, every time; a loop over many vectors (GELU, below) loads its table into
 * locals once instead (ep_consts4), which V8 keeps in registers or spill slots. */
#define EP_ERF_NK 30
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

/* expf4_body for x in [-16, 0] (erf's exp(-a^2), a <= 4): the same bits with the parts that range makes dead
 * left out: no clamp, inf or NaN select; n = round(x*log2e) through 1.5*2^23 (exact for |n| < 2^22, ties to
 * even like f32x4_round_even), whose bits then hold n, so no float->int conversion (in V8 trunc_sat is ~7
 * instructions); one scale by 2^n, exact while 2^n is normal (n >= -24 here). */
#define EXP_MAGIC 12582912.0f            /* 1.5 * 2^23 */
/* 2^n from t = 1.5*2^23 + n, -127 <= n <= 128: t's low 23 bits are 2^22 + n; << 23 keeps (n + 127) mod 512 =
 * n + 127, the exponent field of 2^n (0 at n = -127: 2^n flushed to 0) */
EP_AINLINE f32x4 ep_exp2_magic(f32x4 t) {
  return i32x4_as_f32x4(i32x4_shl(i32x4_add(f32x4_as_i32x4(t), i32x4_splat(127)), 23));
}
EP_AINLINE f32x4 ep_expf4_neg16(f32x4 x, const f32x4 *k) {
  f32x4 t = f32x4_add(f32x4_mul(x, k[0]), k[1]);
  f32x4 n = f32x4_sub(t, k[1]);
  return f32x4_mul(ep_exp_poly(x, n, k), ep_exp2_magic(t));
}

EP_AINLINE f32x4 ep_erff4_k(f32x4 x, const f32x4 *k) {
  f32x4 z = f32x4_mul(x, x);
  f32x4 q = ep_horner4v(z, k + EP_K_ERF_Q, 7);
  f32x4 small = f32x4_fma(x, x, q);
  f32x4 a0 = f32x4_abs(x);
  f32x4 a = f32x4_min(a0, k[11]);
  f32x4 r = ep_horner4v(a, k + EP_K_ERF_R, 11);
  f32x4 l = f32x4_sub(k[10], f32x4_mul(ep_expf4_neg16(f32x4_neg(f32x4_mul(a, a)), k), r));
  /* l >= 0.84 here: x's sign bit onto it (where x is -0 the small branch is taken) */
  l = i32x4_as_f32x4(i32x4_xor(f32x4_as_i32x4(l), i32x4_and(f32x4_as_i32x4(x), i32x4_splat((int32_t)0x80000000u))));
  f32x4 y = f32x4_select(f32x4_lt(a0, k[10]), small, l);
  return f32x4_select(f32x4_eq(x, x), y, x);
}
static const float ep_erf_k[EP_ERF_NK] = {
  LOG2EF, EXP_MAGIC, LN2_C1, LN2_C2, EXP_P0, EXP_P1, EXP_P2, EXP_P3, EXP_P4, EXP_P5, 1.0f, 4.0f,
  ERF_Q0, ERF_Q1, ERF_Q2, ERF_Q3, ERF_Q4, ERF_Q5, ERF_Q6,
  ERF_R0, ERF_R1, ERF_R2, ERF_R3, ERF_R4, ERF_R5, ERF_R6, ERF_R7, ERF_R8, ERF_R9, ERF_R10,
};
/* GELU x * Phi(x) through erfc, without erf's two polynomials nor the cancellation of 1 + erf(x / sqrt 2) for x < 0:
 * h = Phi(-|x|) = exp(-z^2) * 0.5 erfcx(z), z = |x| / sqrt 2, 0.5 erfcx(z) a degree-8 polynomial G in t = 3 / (3 + z)
 * (fitted on [0, 9.25], relative error 1e-7); GELU = x * (x < 0 ? h : 1 - h). Beyond z = 9.25, h = 0 (exp(-z^2)
 * would leave expf4_neg16's normal range; Phi(-13) < 1e-38); -inf * 0 is NaN, as x * 0.5 * (1 + erf) gives.
 * Constants from k[EP_GELU_NK]: exp's as in ep_erf_k (k[0..10]), then 9.25, G, 3, 1/sqrt 2. */
#define EP_GELU_NK 24
#define EP_K_GELU_G 12
#define GELU_G0 (-0.05996953f)
#define GELU_G1 0.18892784f
#define GELU_G2 (-0.10682899f)
#define GELU_G3 0.13928948f
#define GELU_G4 0.061619308f
#define GELU_G5 0.08772037f
#define GELU_G6 0.09548912f
#define GELU_G7 0.09373125f
#define GELU_G8 2.1088463e-05f
static const float ep_gelu_k[EP_GELU_NK] = {
  LOG2EF, EXP_MAGIC, LN2_C1, LN2_C2, EXP_P0, EXP_P1, EXP_P2, EXP_P3, EXP_P4, EXP_P5, 1.0f, 9.25f,
  GELU_G0, GELU_G1, GELU_G2, GELU_G3, GELU_G4, GELU_G5, GELU_G6, GELU_G7, GELU_G8, 3.0f, 0.70710678118654752f, 0.0f,
};
EP_AINLINE f32x4 ep_gelu4_k(f32x4 x, const f32x4 *k) {
  const f32x4 z = f32x4_mul(f32x4_abs(x), k[22]);
  const f32x4 g = ep_horner4v(f32x4_div(k[21], f32x4_add(k[21], z)), k + EP_K_GELU_G, 9);
  f32x4 h = f32x4_mul(ep_expf4_neg16(f32x4_neg(f32x4_mul(z, z)), k), g);
  h = f32x4_select(f32x4_lt(z, k[11]), h, k[23]);   /* also NaN: x * 1 below keeps it */
  return f32x4_mul(x, f32x4_select(f32x4_lt(x, k[23]), h, f32x4_sub(k[10], h)));
}
/* n constants of table c as vectors (loaded once before a loop), c behind an empty asm: the compiler can no
 * longer see the values, so it keeps the loaded vectors instead of folding them into v128.const at each use */
EP_AINLINE void ep_consts4(f32x4 *kv, const float *c, const uint32_t n) {
  __asm__("" : "+r"(c));
  for (uint32_t i = 0; i < n; i++) kv[i] = f32x4_splat(c[i]);
}
EP_AINLINE f32x4 ep_erff4_body(f32x4 x) {
  f32x4 kv[EP_ERF_NK];
  for (uint32_t i = 0; i < EP_ERF_NK; i++) kv[i] = f32x4_splat(ep_erf_k[i]);
  return ep_erff4_k(x, kv);
}
/* expf4_body for x <= 0 or NaN (softmax's x - max): the same bits without what that range makes dead: no upper
 * clamp nor inf select; n = round(x*log2e) through 1.5*2^23 as in ep_expf4_neg16 (|n| <= 150 here), its integer
 * read from t's bits (no trunc_sat). The two-step scale stays: exp(-104 .. -87) is subnormal. */
EP_AINLINE f32x4 ep_expf4_nonpos_body(f32x4 x) {
  const f32x4 magic = f32x4_splat(EXP_MAGIC);
  f32x4 xc = f32x4_max(x, f32x4_splat(EXP_LO));
  f32x4 t = f32x4_add(f32x4_mul(xc, f32x4_splat(LOG2EF)), magic);
  f32x4 n = f32x4_sub(t, magic);
  /* t = 1.5*2^23 + n exactly: its bits minus those of 1.5*2^23 are n */
  const i32x4 ni = i32x4_sub(f32x4_as_i32x4(t), i32x4_splat(0x4B400000));
  return f32x4_select(f32x4_eq(x, x), ep_exp_reduced(xc, n, ni), x);   /* NaN in, NaN out */
}
#if EP_ISA_WASM128   /* src/vec/ep_isa.h */
#define ep_expf4_hot ep_expf4_body
#define ep_expf4_nonpos_hot ep_expf4_nonpos_body
#define ep_erff4_hot ep_erff4_body
#else
#define ep_expf4_hot ep_expf4
#define ep_expf4_nonpos_hot ep_expf4
#define ep_erff4_hot ep_erff4
#endif
/* sigmoid: (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|): no overflow, no cancellation. On the wasm SIMD builds e
 * is inlined: exp's reduction (n = round(x*log2e) through 1.5*2^23, r = x - n*ln2 in two parts), then a degree-4
 * minimax polynomial on |r| <= ln2/2 (relative error 2.7e-6, sigmoid's at most the same: fewer operations and
 * constants than exp's degree 5, and within onnxruntime's tolerance for Sigmoid, docs/benchmarks.md session 17),
 * and one scale by 2^n, -|x| clamped at -88 so n >= -127: n = -127 (x <= -87.68) gives 2^n = 0, so sigmoid
 * flushes to 0 where it is below 2^-126 (its limit at -inf). f32x4_max is pmax with x first: NaN stays NaN
 * through every step (no select). Elsewhere (scalar build, edge) a call to the shared exp (size). */
#define SIGMOID_LO (-88.0f)
#define SIGMOID_E0 0.041458610445261f
#define SIGMOID_E1 0.16790907084941864f
#define SIGMOID_E2 0.5000435709953308f
#define SIGMOID_E3 0.9999634027481079f
#define SIGMOID_E4 0.9999992847442627f
EP_AINLINE f32x4 ep_sigmoidf4_body(f32x4 x) {
  const f32x4 one = f32x4_splat(1.0f);
#if EP_ISA_WASM128
  const f32x4 k[4] = {f32x4_splat(LOG2EF), f32x4_splat(EXP_MAGIC), f32x4_splat(LN2_C1), f32x4_splat(LN2_C2)};
  const f32x4 p[5] = {f32x4_splat(SIGMOID_E0), f32x4_splat(SIGMOID_E1), f32x4_splat(SIGMOID_E2),
                      f32x4_splat(SIGMOID_E3), f32x4_splat(SIGMOID_E4)};
  const f32x4 xc = f32x4_max(f32x4_neg(f32x4_abs(x)), f32x4_splat(SIGMOID_LO));
  const f32x4 t = f32x4_add(f32x4_mul(xc, k[0]), k[1]);
  const f32x4 e = f32x4_mul(ep_horner4v(ep_exp_r(xc, f32x4_sub(t, k[1]), k), p, 5), ep_exp2_magic(t));
#else
  const f32x4 e = ep_expf4_nonpos_hot(f32x4_neg(f32x4_abs(x)));
#endif
  return f32x4_div(f32x4_select(f32x4_lt(x, f32x4_zero()), e, one), f32x4_add(one, e));
}
#if EP_ISA_WASM128
#define ep_sigmoidf4_hot ep_sigmoidf4_body
#else
#define ep_sigmoidf4_hot ep_sigmoidf4
#endif
#endif
