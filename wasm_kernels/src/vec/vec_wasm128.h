/* WebAssembly SIMD128 implementation of the vector layer. */
#ifndef EP_VEC_WASM128_H
#define EP_VEC_WASM128_H
#include <wasm_simd128.h>
#if defined(__wasm_relaxed_simd__)
#define EP_VEC_NAME "wasm-simd128-relaxed"
#else
#define EP_VEC_NAME "wasm-simd128"
#endif
typedef v128_t f32x4;
typedef v128_t i32x4;
typedef v128_t i16x8;
typedef v128_t i8x16;

static inline f32x4 f32x4_load(const float *p) { return wasm_v128_load(p); }
static inline void f32x4_store(float *p, f32x4 v) { wasm_v128_store(p, v); }
static inline f32x4 f32x4_splat(float x) { return wasm_f32x4_splat(x); }
/* Broadcast *p: one load-and-broadcast instruction (vbroadcastss / ld1r) rather than a load plus a shuffle. */
static inline f32x4 f32x4_load_splat(const float *p) { return wasm_v128_load32_splat(p); }
static inline f32x4 f32x4_zero(void) { return wasm_f32x4_splat(0.0f); }
static inline f32x4 f32x4_add(f32x4 a, f32x4 b) { return wasm_f32x4_add(a, b); }
static inline f32x4 f32x4_sub(f32x4 a, f32x4 b) { return wasm_f32x4_sub(a, b); }
static inline f32x4 f32x4_mul(f32x4 a, f32x4 b) { return wasm_f32x4_mul(a, b); }
static inline f32x4 f32x4_div(f32x4 a, f32x4 b) { return wasm_f32x4_div(a, b); }
/* pmin/pmax lower to single minps/maxps on x86; NaN semantics differ from IEEE min/max only when an operand is NaN. */
static inline f32x4 f32x4_max(f32x4 a, f32x4 b) { return wasm_f32x4_pmax(a, b); }
static inline f32x4 f32x4_min(f32x4 a, f32x4 b) { return wasm_f32x4_pmin(a, b); }
/* IEEE-style max/min that propagate NaN from either operand (reductions, MaxPool: numpy's max/min). The plain
 * (non-relaxed) f32x4.max/min on every wasm build: relaxed_max/min leave NaN lanes implementation-defined. */
static inline f32x4 f32x4_max_nan(f32x4 a, f32x4 b) { return wasm_f32x4_max(a, b); }
static inline f32x4 f32x4_min_nan(f32x4 a, f32x4 b) { return wasm_f32x4_min(a, b); }
#if defined(__wasm_relaxed_simd__)
#define EP_VEC_FUSED 1
static inline f32x4 f32x4_fma(f32x4 acc, f32x4 a, f32x4 b) { return wasm_f32x4_relaxed_madd(a, b, acc); }
#else
static inline f32x4 f32x4_fma(f32x4 acc, f32x4 a, f32x4 b) { return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b)); }
#endif
static inline float f32x4_hsum(f32x4 v) {
  return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) +
         wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}
static inline float f32x4_hmax(f32x4 v) {
  float a = wasm_f32x4_extract_lane(v, 0), b = wasm_f32x4_extract_lane(v, 1);
  float c = wasm_f32x4_extract_lane(v, 2), d = wasm_f32x4_extract_lane(v, 3);
  a = a > b ? a : b; c = c > d ? c : d; return a > c ? a : c;
}
/* Broadcast lane L of v to all lanes. */
#define f32x4_lane_splat(v, L) wasm_i32x4_shuffle((v), (v), L, L, L, L)

static inline i32x4 i32x4_load(const int32_t *p) { return wasm_v128_load(p); }
static inline void i32x4_store(int32_t *p, i32x4 v) { wasm_v128_store(p, v); }
static inline i32x4 i32x4_splat(int32_t x) { return wasm_i32x4_splat(x); }
static inline i32x4 i32x4_add(i32x4 a, i32x4 b) { return wasm_i32x4_add(a, b); }
static inline i16x8 i16x8_load_i8(const int8_t *p) { return wasm_i16x8_load8x8(p); }   /* widen 8 x i8 */
static inline i16x8 i16x8_load_u8(const uint8_t *p) { return wasm_u16x8_load8x8(p); }  /* widen 8 x u8 */
/* acc += pairwise dot of i16 lanes: acc[i] += a[2i]*b[2i] + a[2i+1]*b[2i+1] */
static inline i32x4 i32x4_dot_i16x8_add(i32x4 acc, i16x8 a, i16x8 b) { return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a, b)); }
static inline f32x4 f32x4_from_i32x4(i32x4 v) { return wasm_f32x4_convert_i32x4(v); }
/* ---- Additions (elementwise/math family): compares, select, rounding, integer lanes, bitcasts. ----
 * Masks are i32x4 lanes of all-ones (true) or zero (false). NEON needs the same names. */
static inline f32x4 f32x4_abs(f32x4 a) { return wasm_f32x4_abs(a); }
static inline f32x4 f32x4_neg(f32x4 a) { return wasm_f32x4_neg(a); }
static inline f32x4 f32x4_sqrt(f32x4 a) { return wasm_f32x4_sqrt(a); }
static inline f32x4 f32x4_floor(f32x4 a) { return wasm_f32x4_floor(a); }
static inline f32x4 f32x4_ceil(f32x4 a) { return wasm_f32x4_ceil(a); }
static inline f32x4 f32x4_trunc(f32x4 a) { return wasm_f32x4_trunc(a); }
static inline f32x4 f32x4_round_even(f32x4 a) { return wasm_f32x4_nearest(a); }
static inline i32x4 f32x4_lt(f32x4 a, f32x4 b) { return wasm_f32x4_lt(a, b); }
static inline i32x4 f32x4_le(f32x4 a, f32x4 b) { return wasm_f32x4_le(a, b); }
static inline i32x4 f32x4_eq(f32x4 a, f32x4 b) { return wasm_f32x4_eq(a, b); }
/* mask ? a : b, lane-wise */
static inline f32x4 f32x4_select(i32x4 mask, f32x4 a, f32x4 b) { return wasm_v128_bitselect(a, b, mask); }
static inline i32x4 i32x4_sub(i32x4 a, i32x4 b) { return wasm_i32x4_sub(a, b); }
static inline i32x4 i32x4_and(i32x4 a, i32x4 b) { return wasm_v128_and(a, b); }
static inline i32x4 i32x4_or(i32x4 a, i32x4 b) { return wasm_v128_or(a, b); }
static inline i32x4 i32x4_xor(i32x4 a, i32x4 b) { return wasm_v128_xor(a, b); }
static inline i32x4 i32x4_shl(i32x4 a, int n) { return wasm_i32x4_shl(a, n); }
static inline i32x4 i32x4_shr(i32x4 a, int n) { return wasm_i32x4_shr(a, n); }   /* arithmetic */
static inline i32x4 i32x4_gt(i32x4 a, i32x4 b) { return wasm_i32x4_gt(a, b); }
static inline i32x4 i32x4_from_f32x4(f32x4 a) { return wasm_i32x4_trunc_sat_f32x4(a); } /* truncating, saturating */
static inline i32x4 f32x4_as_i32x4(f32x4 a) { return a; }   /* bit reinterpretation */
static inline f32x4 i32x4_as_f32x4(i32x4 a) { return a; }

/* ---- additions (pooling, linalg): stride-2 deinterleave ---- */
/* Even / odd lanes of the 8-float sequence a:b: (a0,a2,b0,b2) and (a1,a3,b1,b3); stride-2 pooling. */
static inline f32x4 f32x4_even(f32x4 a, f32x4 b) { return wasm_i32x4_shuffle(a, b, 0, 2, 4, 6); }
static inline f32x4 f32x4_odd(f32x4 a, f32x4 b) { return wasm_i32x4_shuffle(a, b, 1, 3, 5, 7); }

/* ---- additions (winograd): interleave ---- */
/* Lanes of a and b interleaved: zip_lo = (a0,b0,a1,b1), zip_hi = (a2,b2,a3,b3). */
static inline f32x4 f32x4_zip_lo(f32x4 a, f32x4 b) { return wasm_i32x4_shuffle(a, b, 0, 4, 1, 5); }
static inline f32x4 f32x4_zip_hi(f32x4 a, f32x4 b) { return wasm_i32x4_shuffle(a, b, 2, 6, 3, 7); }
static inline i32x4 i32x4_zip_lo(i32x4 a, i32x4 b) { return wasm_i32x4_shuffle(a, b, 0, 4, 1, 5); }
static inline i32x4 i32x4_zip_hi(i32x4 a, i32x4 b) { return wasm_i32x4_shuffle(a, b, 2, 6, 3, 7); }

/* ---- additions (int8 family: qgemm, qconv, quantize) ----
 * An A row's (k, k+1) i16 pair is broadcast to every 32-bit lane (i16x8_pair_splat) and multiplied
 * into 4 columns' (k, k+1) pairs with i32x4_dot_i16x8_add. */
static inline i16x8 i16x8_load(const int16_t *p) { return wasm_v128_load(p); }
static inline void i16x8_store(int16_t *p, i16x8 v) { wasm_v128_store(p, v); }
static inline i16x8 i16x8_splat(int16_t x) { return wasm_i16x8_splat(x); }
static inline i16x8 i16x8_sub(i16x8 a, i16x8 b) { return wasm_i16x8_sub(a, b); }
static inline i16x8 i16x8_and(i16x8 a, i16x8 b) { return wasm_v128_and(a, b); }
/* (a0,b0,a1,b1,a2,b2,a3,b3) and (a4,b4,...,a7,b7) */
static inline i16x8 i16x8_zip_lo(i16x8 a, i16x8 b) { return wasm_i16x8_shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11); }
static inline i16x8 i16x8_zip_hi(i16x8 a, i16x8 b) { return wasm_i16x8_shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15); }
static inline i16x8 i16x8_even(i16x8 a, i16x8 b) { return wasm_i16x8_shuffle(a, b, 0, 2, 4, 6, 8, 10, 12, 14); }
static inline i16x8 i16x8_odd(i16x8 a, i16x8 b) { return wasm_i16x8_shuffle(a, b, 1, 3, 5, 7, 9, 11, 13, 15); }
#define i16x8_pair_splat(v, L) wasm_i32x4_shuffle((v), (v), L, L, L, L)
/* The i16 pair at p broadcast to every 32-bit lane, straight from memory. */
static inline i16x8 i16x8_load_pair_splat(const int16_t *p) { return wasm_v128_load32_splat(p); }
static inline i32x4 i32x4_mul(i32x4 a, i32x4 b) { return wasm_i32x4_mul(a, b); }
/* Saturating narrowing: i32 -> i16 (a's lanes first), i16 -> i8 / u8. */
static inline i16x8 i16x8_narrow_i32x4(i32x4 a, i32x4 b) { return wasm_i16x8_narrow_i32x4(a, b); }
static inline i8x16 i8x16_narrow_i16x8(i16x8 a, i16x8 b) { return wasm_i8x16_narrow_i16x8(a, b); }
static inline i8x16 u8x16_narrow_i16x8(i16x8 a, i16x8 b) { return wasm_u8x16_narrow_i16x8(a, b); }
static inline i32x4 i32x4_widen_lo(i16x8 a) { return wasm_i32x4_extend_low_i16x8(a); }
static inline i32x4 i32x4_widen_hi(i16x8 a) { return wasm_i32x4_extend_high_i16x8(a); }
static inline void i8x16_store_lo8(void *p, i8x16 v) { wasm_v128_store64_lane(p, v, 0); }


/* ---- additions (int8 quads: the 4-way dot kernels' B packing, kernels/qgemm_quads.h) ---- */
static inline i16x8 i16x8_add(i16x8 a, i16x8 b) { return wasm_i16x8_add(a, b); }
static inline i16x8 i16x8_min(i16x8 a, i16x8 b) { return wasm_i16x8_min(a, b); }
static inline i16x8 i16x8_max(i16x8 a, i16x8 b) { return wasm_i16x8_max(a, b); }
static inline int i16x8_any_gt(i16x8 a, i16x8 b) { return wasm_v128_any_true(wasm_i16x8_gt(a, b)); }
/* (a1,a0,a3,a2,...): the lanes of each 32-bit pair swapped; (a0,a0,a2,a2,...): even lanes doubled. */
static inline i16x8 i16x8_swap_pairs(i16x8 a) { return wasm_i16x8_shuffle(a, a, 1, 0, 3, 2, 5, 4, 7, 6); }
static inline i16x8 i16x8_dup_even(i16x8 a) { return wasm_i16x8_shuffle(a, a, 0, 0, 2, 2, 4, 4, 6, 6); }
/* 32-bit pairs of a and b interleaved: (a0 a1 b0 b1 a2 a3 b2 b3) and (a4 a5 b4 b5 a6 a7 b6 b7). */
static inline i16x8 i16x8_zip32_lo(i16x8 a, i16x8 b) { return wasm_i32x4_shuffle(a, b, 0, 4, 1, 5); }
static inline i16x8 i16x8_zip32_hi(i16x8 a, i16x8 b) { return wasm_i32x4_shuffle(a, b, 2, 6, 3, 7); }
static inline void i8x16_store(void *p, i8x16 v) { wasm_v128_store(p, v); }

/* ---- table lookups (QLUT: kernels/quantize.c) ---- */
static inline i8x16 i8x16_load(const void *p) { return wasm_v128_load(p); }
/* Each byte's low and high 4 bits, as unsigned lanes in [0, 15]. */
static inline i8x16 i8x16_lo_nibble(i8x16 x) { return wasm_v128_and(x, wasm_i8x16_splat(15)); }
static inline i8x16 i8x16_hi_nibble(i8x16 x) { return wasm_u8x16_shr(x, 4); }
/* t[i] per lane, every lane of i in [0, 15]: there the relaxed swizzle is defined (one pshufb / tbl). */
static inline i8x16 i8x16_lut16(i8x16 t, i8x16 i) {
#if defined(__wasm_relaxed_simd__)
  return wasm_i8x16_relaxed_swizzle(t, i);
#else
  return wasm_i8x16_swizzle(t, i);
#endif
}
/* a where m's lane is all ones, b where it is 0 (no other lanes: there the relaxed laneselect is defined, one
 * pblendvb / bsl). */
static inline i8x16 i8x16_select(i8x16 m, i8x16 a, i8x16 b) {
#if defined(__wasm_relaxed_simd__)
  return wasm_i8x16_relaxed_laneselect(a, b, m);
#else
  return wasm_v128_bitselect(a, b, m);
#endif
}

#endif
