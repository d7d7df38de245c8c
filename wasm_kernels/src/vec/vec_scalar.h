/* Portable scalar implementation of the vector layer: four plain floats per "vector".
 * It is the reference every other implementation is tested against. */
#ifndef EP_VEC_SCALAR_H
#define EP_VEC_SCALAR_H
#include <stdint.h>
#define EP_VEC_NAME "scalar"
typedef struct { float v[4]; } f32x4;
typedef struct { int32_t v[4]; } i32x4;
typedef struct { int16_t v[8]; } i16x8;
typedef struct { int8_t v[16]; } i8x16;

static inline f32x4 f32x4_load(const float *p) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = p[i]; return r; }
static inline void f32x4_store(float *p, f32x4 a) { for (int i = 0; i < 4; i++) p[i] = a.v[i]; }
static inline f32x4 f32x4_splat(float x) { f32x4 r = {{x, x, x, x}}; return r; }
static inline f32x4 f32x4_zero(void) { return f32x4_splat(0.0f); }
static inline f32x4 f32x4_load_splat(const float *p) { return f32x4_splat(*p); }
#define EP_SCALAR_BIN(name, expr) \
  static inline f32x4 name(f32x4 a, f32x4 b) { f32x4 r; for (int i = 0; i < 4; i++) { float x = a.v[i], y = b.v[i]; r.v[i] = (expr); } return r; }
EP_SCALAR_BIN(f32x4_add, x + y)
EP_SCALAR_BIN(f32x4_sub, x - y)
EP_SCALAR_BIN(f32x4_mul, x * y)
EP_SCALAR_BIN(f32x4_div, x / y)
EP_SCALAR_BIN(f32x4_max, x < y ? y : x)
EP_SCALAR_BIN(f32x4_min, y < x ? y : x)
EP_SCALAR_BIN(f32x4_max_nan, (x > y || x != x) ? x : y)   /* NaN in either operand gives NaN */
EP_SCALAR_BIN(f32x4_min_nan, (x < y || x != x) ? x : y)
#undef EP_SCALAR_BIN
static inline f32x4 f32x4_fma(f32x4 acc, f32x4 a, f32x4 b) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = acc.v[i] + a.v[i] * b.v[i]; return r; }
static inline float f32x4_hsum(f32x4 a) { return a.v[0] + a.v[1] + a.v[2] + a.v[3]; }
static inline float f32x4_hmax(f32x4 a) { float m = a.v[0]; for (int i = 1; i < 4; i++) m = a.v[i] > m ? a.v[i] : m; return m; }
#define f32x4_lane_splat(a, L) f32x4_splat((a).v[L])

static inline i32x4 i32x4_load(const int32_t *p) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = p[i]; return r; }
static inline void i32x4_store(int32_t *p, i32x4 a) { for (int i = 0; i < 4; i++) p[i] = a.v[i]; }
static inline i32x4 i32x4_splat(int32_t x) { i32x4 r = {{x, x, x, x}}; return r; }
static inline i32x4 i32x4_add(i32x4 a, i32x4 b) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (int32_t)((uint32_t)a.v[i] + (uint32_t)b.v[i]); return r; }
static inline i16x8 i16x8_load_i8(const int8_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; }
static inline i16x8 i16x8_load_u8(const uint8_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; }
static inline i32x4 i32x4_dot_i16x8_add(i32x4 acc, i16x8 a, i16x8 b) {
  for (int i = 0; i < 4; i++)   /* wraps like the SIMD instruction (each product fits int32; their sums may not) */
    acc.v[i] = (int32_t)((uint32_t)acc.v[i] + (uint32_t)((int32_t)a.v[2 * i] * b.v[2 * i]) +
                         (uint32_t)((int32_t)a.v[2 * i + 1] * b.v[2 * i + 1]));
  return acc;
}
static inline f32x4 f32x4_from_i32x4(i32x4 a) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (float)a.v[i]; return r; }
/* ---- Additions (elementwise/math family): compares, select, rounding, integer lanes, bitcasts. ----
 * Masks are i32x4 lanes of all-ones (true) or zero (false). */
static inline uint32_t ep_vs_bits(float f) { union { float f; uint32_t u; } c; c.f = f; return c.u; }
static inline float ep_vs_float(uint32_t u) { union { float f; uint32_t u; } c; c.u = u; return c.f; }
/* Round to an integer value, mode 0 trunc, 1 floor, 2 ceil, 3 nearest-even; NaN, inf, |x| >= 2^23 pass. */
static inline float ep_vs_round(float x, int mode) {
  uint32_t u = ep_vs_bits(x), sign = u & 0x80000000u;
  if ((u & 0x7fffffffu) >= 0x4b000000u) return x;
  float a = ep_vs_float(u & 0x7fffffffu), t;
  if (mode == 3) { t = (a + 8388608.0f) - 8388608.0f; }
  else {
    t = (float)(int32_t)a;
    if (mode == 1 && sign && t != a) t += 1.0f;   /* floor of a negative: away from zero */
    if (mode == 2 && !sign && t != a) t += 1.0f;  /* ceil of a positive: away from zero */
  }
  return ep_vs_float(ep_vs_bits(t) | sign);
}
#define EP_SCALAR_UN(name, expr) \
  static inline f32x4 name(f32x4 a) { f32x4 r; for (int i = 0; i < 4; i++) { float x = a.v[i]; r.v[i] = (expr); } return r; }
EP_SCALAR_UN(f32x4_abs, ep_vs_float(ep_vs_bits(x) & 0x7fffffffu))
EP_SCALAR_UN(f32x4_neg, ep_vs_float(ep_vs_bits(x) ^ 0x80000000u))
EP_SCALAR_UN(f32x4_sqrt, __builtin_sqrtf(x))
EP_SCALAR_UN(f32x4_trunc, ep_vs_round(x, 0))
EP_SCALAR_UN(f32x4_floor, ep_vs_round(x, 1))
EP_SCALAR_UN(f32x4_ceil, ep_vs_round(x, 2))
EP_SCALAR_UN(f32x4_round_even, ep_vs_round(x, 3))
#undef EP_SCALAR_UN
#define EP_SCALAR_CMP(name, expr) \
  static inline i32x4 name(f32x4 a, f32x4 b) { i32x4 r; for (int i = 0; i < 4; i++) { float x = a.v[i], y = b.v[i]; r.v[i] = (expr) ? -1 : 0; } return r; }
EP_SCALAR_CMP(f32x4_lt, x < y)
EP_SCALAR_CMP(f32x4_le, x <= y)
EP_SCALAR_CMP(f32x4_eq, x == y)
#undef EP_SCALAR_CMP
static inline f32x4 f32x4_select(i32x4 m, f32x4 a, f32x4 b) {
  f32x4 r;
  for (int i = 0; i < 4; i++) r.v[i] = ep_vs_float((ep_vs_bits(a.v[i]) & (uint32_t)m.v[i]) | (ep_vs_bits(b.v[i]) & ~(uint32_t)m.v[i]));
  return r;
}
#define EP_SCALAR_IBIN(name, expr) \
  static inline i32x4 name(i32x4 a, i32x4 b) { i32x4 r; for (int i = 0; i < 4; i++) { uint32_t x = (uint32_t)a.v[i], y = (uint32_t)b.v[i]; r.v[i] = (int32_t)(expr); } return r; }
EP_SCALAR_IBIN(i32x4_sub, x - y)
EP_SCALAR_IBIN(i32x4_and, x & y)
EP_SCALAR_IBIN(i32x4_or, x | y)
EP_SCALAR_IBIN(i32x4_xor, x ^ y)
EP_SCALAR_IBIN(i32x4_gt, (int32_t)x > (int32_t)y ? 0xffffffffu : 0u)
#undef EP_SCALAR_IBIN
static inline i32x4 i32x4_shl(i32x4 a, int n) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (int32_t)((uint32_t)a.v[i] << n); return r; }
static inline i32x4 i32x4_shr(i32x4 a, int n) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = a.v[i] >> n; return r; }
static inline i32x4 i32x4_from_f32x4(f32x4 a) {
  i32x4 r;
  for (int i = 0; i < 4; i++) {
    float x = a.v[i];
    r.v[i] = x != x ? 0 : x >= 2147483648.0f ? 2147483647 : x <= -2147483648.0f ? (-2147483647 - 1) : (int32_t)x;
  }
  return r;
}
static inline i32x4 f32x4_as_i32x4(f32x4 a) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (int32_t)ep_vs_bits(a.v[i]); return r; }
static inline f32x4 i32x4_as_f32x4(i32x4 a) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = ep_vs_float((uint32_t)a.v[i]); return r; }

/* ---- additions (pooling, linalg): stride-2 deinterleave ---- */
/* Even / odd lanes of the 8-float sequence a:b: (a0,a2,b0,b2) and (a1,a3,b1,b3); stride-2 pooling. */
static inline f32x4 f32x4_even(f32x4 a, f32x4 b) { f32x4 r = {{a.v[0], a.v[2], b.v[0], b.v[2]}}; return r; }
static inline f32x4 f32x4_odd(f32x4 a, f32x4 b) { f32x4 r = {{a.v[1], a.v[3], b.v[1], b.v[3]}}; return r; }

/* ---- additions (winograd): interleave ---- */
/* Lanes of a and b interleaved: zip_lo = (a0,b0,a1,b1), zip_hi = (a2,b2,a3,b3). */
static inline f32x4 f32x4_zip_lo(f32x4 a, f32x4 b) { f32x4 r = {{a.v[0], b.v[0], a.v[1], b.v[1]}}; return r; }
static inline f32x4 f32x4_zip_hi(f32x4 a, f32x4 b) { f32x4 r = {{a.v[2], b.v[2], a.v[3], b.v[3]}}; return r; }
static inline i32x4 i32x4_zip_lo(i32x4 a, i32x4 b) { i32x4 r = {{a.v[0], b.v[0], a.v[1], b.v[1]}}; return r; }
static inline i32x4 i32x4_zip_hi(i32x4 a, i32x4 b) { i32x4 r = {{a.v[2], b.v[2], a.v[3], b.v[3]}}; return r; }

/* ---- additions (int8 family: qgemm, qconv, quantize) ---- */
static inline i16x8 i16x8_load(const int16_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; }
static inline void i16x8_store(int16_t *p, i16x8 a) { for (int i = 0; i < 8; i++) p[i] = a.v[i]; }
static inline i16x8 i16x8_splat(int16_t x) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = x; return r; }
static inline i16x8 i16x8_sub(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = (int16_t)(a.v[i] - b.v[i]); return r; }
static inline i16x8 i16x8_and(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = (int16_t)(a.v[i] & b.v[i]); return r; }
static inline i16x8 i16x8_zip_lo(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 4; i++) { r.v[2 * i] = a.v[i]; r.v[2 * i + 1] = b.v[i]; } return r; }
static inline i16x8 i16x8_zip_hi(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 4; i++) { r.v[2 * i] = a.v[4 + i]; r.v[2 * i + 1] = b.v[4 + i]; } return r; }
/* Even / odd lanes of the 16 lanes a:b. */
static inline i16x8 i16x8_even(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 4; i++) { r.v[i] = a.v[2 * i]; r.v[4 + i] = b.v[2 * i]; } return r; }
static inline i16x8 i16x8_odd(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 4; i++) { r.v[i] = a.v[2 * i + 1]; r.v[4 + i] = b.v[2 * i + 1]; } return r; }
static inline i16x8 ep_vs_pair_splat(i16x8 a, int L) { i16x8 r; for (int i = 0; i < 4; i++) { r.v[2 * i] = a.v[2 * L]; r.v[2 * i + 1] = a.v[2 * L + 1]; } return r; }
#define i16x8_pair_splat(a, L) ep_vs_pair_splat((a), (L))
static inline i16x8 i16x8_load_pair_splat(const int16_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i & 1]; return r; }
static inline i32x4 i32x4_mul(i32x4 a, i32x4 b) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (int32_t)((uint32_t)a.v[i] * (uint32_t)b.v[i]); return r; }
static inline int32_t ep_vs_sat(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; }
static inline i16x8 i16x8_narrow_i32x4(i32x4 a, i32x4 b) {
  i16x8 r; for (int i = 0; i < 4; i++) { r.v[i] = (int16_t)ep_vs_sat(a.v[i], -32768, 32767); r.v[4 + i] = (int16_t)ep_vs_sat(b.v[i], -32768, 32767); } return r;
}
static inline i8x16 i8x16_narrow_i16x8(i16x8 a, i16x8 b) {
  i8x16 r; for (int i = 0; i < 8; i++) { r.v[i] = (int8_t)ep_vs_sat(a.v[i], -128, 127); r.v[8 + i] = (int8_t)ep_vs_sat(b.v[i], -128, 127); } return r;
}
static inline i8x16 u8x16_narrow_i16x8(i16x8 a, i16x8 b) {
  i8x16 r; for (int i = 0; i < 8; i++) { r.v[i] = (int8_t)(uint8_t)ep_vs_sat(a.v[i], 0, 255); r.v[8 + i] = (int8_t)(uint8_t)ep_vs_sat(b.v[i], 0, 255); } return r;
}
static inline i32x4 i32x4_widen_lo(i16x8 a) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = a.v[i]; return r; }
static inline i32x4 i32x4_widen_hi(i16x8 a) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = a.v[4 + i]; return r; }
static inline void i8x16_store_lo8(void *p, i8x16 a) { int8_t *d = (int8_t *)p; for (int i = 0; i < 8; i++) d[i] = a.v[i]; }


/* ---- additions (int8 quads: the 4-way dot kernels' B packing, kernels/qgemm_quads.h) ---- */
static inline i16x8 i16x8_add(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = (int16_t)(a.v[i] + b.v[i]); return r; }
static inline i16x8 i16x8_min(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i]; return r; }
static inline i16x8 i16x8_max(i16x8 a, i16x8 b) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]; return r; }
static inline int i16x8_any_gt(i16x8 a, i16x8 b) { int r = 0; for (int i = 0; i < 8; i++) r |= a.v[i] > b.v[i]; return r; }
static inline i16x8 i16x8_swap_pairs(i16x8 a) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = a.v[i ^ 1]; return r; }
static inline i16x8 i16x8_dup_even(i16x8 a) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = a.v[i & ~1]; return r; }
static inline i16x8 i16x8_zip32_lo(i16x8 a, i16x8 b) {
  i16x8 r; for (int i = 0; i < 2; i++) { r.v[4 * i] = a.v[2 * i]; r.v[4 * i + 1] = a.v[2 * i + 1]; r.v[4 * i + 2] = b.v[2 * i]; r.v[4 * i + 3] = b.v[2 * i + 1]; } return r;
}
static inline i16x8 i16x8_zip32_hi(i16x8 a, i16x8 b) {
  i16x8 r; for (int i = 0; i < 2; i++) { r.v[4 * i] = a.v[4 + 2 * i]; r.v[4 * i + 1] = a.v[5 + 2 * i]; r.v[4 * i + 2] = b.v[4 + 2 * i]; r.v[4 * i + 3] = b.v[5 + 2 * i]; } return r;
}
static inline void i8x16_store(void *p, i8x16 a) { int8_t *d = (int8_t *)p; for (int i = 0; i < 16; i++) d[i] = a.v[i]; }

/* ---- table lookups (QLUT: kernels/quantize.c) ---- */
static inline i8x16 i8x16_load(const void *p) { i8x16 r; const int8_t *s = (const int8_t *)p; for (int i = 0; i < 16; i++) r.v[i] = s[i]; return r; }
/* Each byte's low and high 4 bits, as unsigned lanes in [0, 15]. */
static inline i8x16 i8x16_lo_nibble(i8x16 x) { i8x16 r; for (int i = 0; i < 16; i++) r.v[i] = (int8_t)(x.v[i] & 15); return r; }
static inline i8x16 i8x16_hi_nibble(i8x16 x) { i8x16 r; for (int i = 0; i < 16; i++) r.v[i] = (int8_t)((uint8_t)x.v[i] >> 4); return r; }
/* t[i] per lane, every lane of i in [0, 15]. */
static inline i8x16 i8x16_lut16(i8x16 t, i8x16 i) { i8x16 r; for (int k = 0; k < 16; k++) r.v[k] = t.v[i.v[k] & 15]; return r; }
/* a where m's lane is all ones, b where it is 0. */
static inline i8x16 i8x16_select(i8x16 m, i8x16 a, i8x16 b) { i8x16 r; for (int i = 0; i < 16; i++) r.v[i] = m.v[i] ? a.v[i] : b.v[i]; return r; }

#endif
