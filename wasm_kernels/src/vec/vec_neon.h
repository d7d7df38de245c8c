/* AArch64 NEON implementation of the vector layer (ep_vec.h picks it when __aarch64__ && __ARM_NEON).
 * Same names and the same lane semantics as vec_scalar.h (the reference) and vec_wasm128.h:
 *  - f32x4_max/min are the "pseudo" min/max of the other layers (a < b ? b : a), not vmaxq/vminq,
 *    so NaN handling is identical on every target (vmaxq would propagate NaN where wasm pmax does not);
 *  - f32x4_fma is fused (vfmaq_f32): EP_VEC_FUSED is defined, as for relaxed SIMD;
 *  - masks are i32x4 lanes of all ones / zero.
 * All AArch64 cores have NEON; nothing here needs more than armv8-a. */
#ifndef EP_VEC_NEON_H
#define EP_VEC_NEON_H
#include <arm_neon.h>
#include <stdint.h>
#define EP_VEC_NAME "neon"
#define EP_VEC_NEON 1
#define EP_VEC_FUSED 1
typedef float32x4_t f32x4;
typedef int32x4_t i32x4;
typedef int16x8_t i16x8;
typedef int8x16_t i8x16;

static inline f32x4 f32x4_load(const float *p) { return vld1q_f32(p); }
static inline void f32x4_store(float *p, f32x4 v) { vst1q_f32(p, v); }
static inline f32x4 f32x4_splat(float x) { return vdupq_n_f32(x); }
static inline f32x4 f32x4_load_splat(const float *p) { return vld1q_dup_f32(p); }
static inline f32x4 f32x4_zero(void) { return vdupq_n_f32(0.0f); }
static inline f32x4 f32x4_add(f32x4 a, f32x4 b) { return vaddq_f32(a, b); }
static inline f32x4 f32x4_sub(f32x4 a, f32x4 b) { return vsubq_f32(a, b); }
static inline f32x4 f32x4_mul(f32x4 a, f32x4 b) { return vmulq_f32(a, b); }
static inline f32x4 f32x4_div(f32x4 a, f32x4 b) { return vdivq_f32(a, b); }
/* a < b ? b : a  /  b < a ? b : a  (wasm pmax/pmin; scalar layer's x < y ? y : x) */
static inline f32x4 f32x4_max(f32x4 a, f32x4 b) { return vbslq_f32(vcltq_f32(a, b), b, a); }
static inline f32x4 f32x4_min(f32x4 a, f32x4 b) { return vbslq_f32(vcltq_f32(b, a), b, a); }
/* NaN-propagating max/min (reductions, MaxPool): vmaxq/vminq return NaN when either lane is NaN. */
static inline f32x4 f32x4_max_nan(f32x4 a, f32x4 b) { return vmaxq_f32(a, b); }
static inline f32x4 f32x4_min_nan(f32x4 a, f32x4 b) { return vminq_f32(a, b); }
static inline f32x4 f32x4_fma(f32x4 acc, f32x4 a, f32x4 b) { return vfmaq_f32(acc, a, b); }
static inline float f32x4_hsum(f32x4 v) { return vaddvq_f32(v); }
static inline float f32x4_hmax(f32x4 v) {
  /* same pairing and comparison as the wasm layer: (a > b ? a : b) of the pairs, then of the halves */
  float a = vgetq_lane_f32(v, 0), b = vgetq_lane_f32(v, 1), c = vgetq_lane_f32(v, 2), d = vgetq_lane_f32(v, 3);
  a = a > b ? a : b; c = c > d ? c : d; return a > c ? a : c;
}
/* Broadcast lane L of v to all lanes (L a constant): vfmaq(acc, x, lane_splat) becomes fmla by element. */
#define f32x4_lane_splat(v, L) vdupq_laneq_f32((v), (L))

static inline i32x4 i32x4_load(const int32_t *p) { return vld1q_s32(p); }
static inline void i32x4_store(int32_t *p, i32x4 v) { vst1q_s32(p, v); }
static inline i32x4 i32x4_splat(int32_t x) { return vdupq_n_s32(x); }
/* Integer lanes wrap, as wasm's i32x4/i16x8 ops and vec_scalar.h do: gcc writes vaddq_s32 & co. as C vector
 * arithmetic on signed lanes, where overflow is undefined, so the arithmetic goes through the unsigned forms. */
#define EP_WRAP32(op, a, b) vreinterpretq_s32_u32(op(vreinterpretq_u32_s32(a), vreinterpretq_u32_s32(b)))
#define EP_WRAP16(op, a, b) vreinterpretq_s16_u16(op(vreinterpretq_u16_s16(a), vreinterpretq_u16_s16(b)))
static inline i32x4 i32x4_add(i32x4 a, i32x4 b) { return EP_WRAP32(vaddq_u32, a, b); }
static inline i16x8 i16x8_load_i8(const int8_t *p) { return vmovl_s8(vld1_s8(p)); }
static inline i16x8 i16x8_load_u8(const uint8_t *p) { return vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p))); }
/* acc[i] += a[2i]*b[2i] + a[2i+1]*b[2i+1]: widening multiplies of both halves, then pairwise add. */
static inline i32x4 i32x4_dot_i16x8_add(i32x4 acc, i16x8 a, i16x8 b) {
  const int32x4_t lo = vmull_s16(vget_low_s16(a), vget_low_s16(b));
  const int32x4_t hi = vmull_high_s16(a, b);
  return EP_WRAP32(vaddq_u32, acc, EP_WRAP32(vpaddq_u32, lo, hi));
}
static inline f32x4 f32x4_from_i32x4(i32x4 v) { return vcvtq_f32_s32(v); }

/* ---- Elementwise/math family additions (same names as in vec_scalar.h / vec_wasm128.h) ---- */
static inline f32x4 f32x4_abs(f32x4 a) { return vabsq_f32(a); }
static inline f32x4 f32x4_neg(f32x4 a) { return vnegq_f32(a); }
static inline f32x4 f32x4_sqrt(f32x4 a) { return vsqrtq_f32(a); }
static inline f32x4 f32x4_floor(f32x4 a) { return vrndmq_f32(a); }
static inline f32x4 f32x4_ceil(f32x4 a) { return vrndpq_f32(a); }
static inline f32x4 f32x4_trunc(f32x4 a) { return vrndq_f32(a); }
static inline f32x4 f32x4_round_even(f32x4 a) { return vrndnq_f32(a); }
static inline i32x4 f32x4_lt(f32x4 a, f32x4 b) { return vreinterpretq_s32_u32(vcltq_f32(a, b)); }
static inline i32x4 f32x4_le(f32x4 a, f32x4 b) { return vreinterpretq_s32_u32(vcleq_f32(a, b)); }
static inline i32x4 f32x4_eq(f32x4 a, f32x4 b) { return vreinterpretq_s32_u32(vceqq_f32(a, b)); }
static inline f32x4 f32x4_select(i32x4 mask, f32x4 a, f32x4 b) { return vbslq_f32(vreinterpretq_u32_s32(mask), a, b); }
static inline i32x4 i32x4_sub(i32x4 a, i32x4 b) { return EP_WRAP32(vsubq_u32, a, b); }
static inline i32x4 i32x4_and(i32x4 a, i32x4 b) { return vandq_s32(a, b); }
static inline i32x4 i32x4_or(i32x4 a, i32x4 b) { return vorrq_s32(a, b); }
static inline i32x4 i32x4_xor(i32x4 a, i32x4 b) { return veorq_s32(a, b); }
/* Shift counts are run-time values in the layer's API: vshlq by a splat (negative = arithmetic right). */
static inline i32x4 i32x4_shl(i32x4 a, int n) { return vshlq_s32(a, vdupq_n_s32(n)); }
static inline i32x4 i32x4_shr(i32x4 a, int n) { return vshlq_s32(a, vdupq_n_s32(-n)); }
static inline i32x4 i32x4_gt(i32x4 a, i32x4 b) { return vreinterpretq_s32_u32(vcgtq_s32(a, b)); }
/* fcvtzs: truncating, saturating, NaN -> 0 (the scalar layer's exact semantics) */
static inline i32x4 i32x4_from_f32x4(f32x4 a) { return vcvtq_s32_f32(a); }
static inline i32x4 f32x4_as_i32x4(f32x4 a) { return vreinterpretq_s32_f32(a); }
static inline f32x4 i32x4_as_f32x4(i32x4 a) { return vreinterpretq_f32_s32(a); }

/* ---- nn family additions ---- */
/* Even / odd lanes of the 8-float sequence a:b (stride-2 pooling). */
static inline f32x4 f32x4_even(f32x4 a, f32x4 b) { return vuzp1q_f32(a, b); }
static inline f32x4 f32x4_odd(f32x4 a, f32x4 b) { return vuzp2q_f32(a, b); }
/* ---- additions (winograd): interleave ---- */
/* Lanes of a and b interleaved: zip_lo = (a0,b0,a1,b1), zip_hi = (a2,b2,a3,b3). */
static inline f32x4 f32x4_zip_lo(f32x4 a, f32x4 b) { return vzip1q_f32(a, b); }
static inline f32x4 f32x4_zip_hi(f32x4 a, f32x4 b) { return vzip2q_f32(a, b); }
static inline i32x4 i32x4_zip_lo(i32x4 a, i32x4 b) { return vzip1q_s32(a, b); }
static inline i32x4 i32x4_zip_hi(i32x4 a, i32x4 b) { return vzip2q_s32(a, b); }

/* ---- additions (int8 family: qgemm, qconv, quantize) ---- */
static inline i16x8 i16x8_load(const int16_t *p) { return vld1q_s16(p); }
static inline void i16x8_store(int16_t *p, i16x8 v) { vst1q_s16(p, v); }
static inline i16x8 i16x8_splat(int16_t x) { return vdupq_n_s16(x); }
static inline i16x8 i16x8_sub(i16x8 a, i16x8 b) { return EP_WRAP16(vsubq_u16, a, b); }
static inline i16x8 i16x8_and(i16x8 a, i16x8 b) { return vandq_s16(a, b); }
static inline i16x8 i16x8_zip_lo(i16x8 a, i16x8 b) { return vzip1q_s16(a, b); }
static inline i16x8 i16x8_zip_hi(i16x8 a, i16x8 b) { return vzip2q_s16(a, b); }
static inline i16x8 i16x8_even(i16x8 a, i16x8 b) { return vuzp1q_s16(a, b); }
static inline i16x8 i16x8_odd(i16x8 a, i16x8 b) { return vuzp2q_s16(a, b); }
#define i16x8_pair_splat(v, L) vreinterpretq_s16_s32(vdupq_laneq_s32(vreinterpretq_s32_s16(v), (L)))
static inline i16x8 i16x8_load_pair_splat(const int16_t *p) { return vreinterpretq_s16_s32(vld1q_dup_s32((const int32_t *)(const void *)p)); }
static inline i32x4 i32x4_mul(i32x4 a, i32x4 b) { return EP_WRAP32(vmulq_u32, a, b); }
static inline i16x8 i16x8_narrow_i32x4(i32x4 a, i32x4 b) { return vcombine_s16(vqmovn_s32(a), vqmovn_s32(b)); }
static inline i8x16 i8x16_narrow_i16x8(i16x8 a, i16x8 b) { return vcombine_s8(vqmovn_s16(a), vqmovn_s16(b)); }
static inline i8x16 u8x16_narrow_i16x8(i16x8 a, i16x8 b) { return vreinterpretq_s8_u8(vcombine_u8(vqmovun_s16(a), vqmovun_s16(b))); }
static inline i32x4 i32x4_widen_lo(i16x8 a) { return vmovl_s16(vget_low_s16(a)); }
static inline i32x4 i32x4_widen_hi(i16x8 a) { return vmovl_high_s16(a); }
static inline void i8x16_store_lo8(void *p, i8x16 v) { vst1_s8((int8_t *)p, vget_low_s8(v)); }


/* ---- additions (int8 quads: the 4-way dot kernels' B packing, kernels/qgemm_quads.h) ---- */
static inline i16x8 i16x8_add(i16x8 a, i16x8 b) { return EP_WRAP16(vaddq_u16, a, b); }
static inline i16x8 i16x8_min(i16x8 a, i16x8 b) { return vminq_s16(a, b); }
static inline i16x8 i16x8_max(i16x8 a, i16x8 b) { return vmaxq_s16(a, b); }
static inline int i16x8_any_gt(i16x8 a, i16x8 b) { return vmaxvq_u16(vcgtq_s16(a, b)) != 0; }
static inline i16x8 i16x8_swap_pairs(i16x8 a) { return vrev32q_s16(a); }
static inline i16x8 i16x8_dup_even(i16x8 a) { return vtrn1q_s16(a, a); }
static inline i16x8 i16x8_zip32_lo(i16x8 a, i16x8 b) { return vreinterpretq_s16_s32(vzip1q_s32(vreinterpretq_s32_s16(a), vreinterpretq_s32_s16(b))); }
static inline i16x8 i16x8_zip32_hi(i16x8 a, i16x8 b) { return vreinterpretq_s16_s32(vzip2q_s32(vreinterpretq_s32_s16(a), vreinterpretq_s32_s16(b))); }
static inline void i8x16_store(void *p, i8x16 v) { vst1q_s8((int8_t *)p, v); }

/* ---- table lookups (QLUT: kernels/quantize.c) ---- */
static inline i8x16 i8x16_load(const void *p) { return vld1q_s8((const int8_t *)p); }
/* Each byte's low and high 4 bits, as unsigned lanes in [0, 15]. */
static inline i8x16 i8x16_lo_nibble(i8x16 x) { return vandq_s8(x, vdupq_n_s8(15)); }
static inline i8x16 i8x16_hi_nibble(i8x16 x) { return vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(x), 4)); }
/* t[i] per lane, every lane of i in [0, 15]. */
static inline i8x16 i8x16_lut16(i8x16 t, i8x16 i) { return vqtbl1q_s8(t, vreinterpretq_u8_s8(i)); }
/* a where m's lane is all ones, b where it is 0. */
static inline i8x16 i8x16_select(i8x16 m, i8x16 a, i8x16 b) { return vbslq_s8(vreinterpretq_u8_s8(m), a, b); }

#endif
