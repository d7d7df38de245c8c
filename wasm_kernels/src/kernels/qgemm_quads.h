/* B' strips as int8 quads, for the GEMM kernels with a 4-way int8 dot: the aarch64 SDOT kernel
 * (edge/neon/qgemm_i8_neon.c) and the relaxed-SIMD build's i7 dot (qgemm.c). Written once against the vector
 * layer; only those two include it.
 *
 * A strip is 8 columns of ep_qgemm's B' block (pair p at s + p * ld2 int16: [column][2 depths] x 8). Per column,
 * the offset c[n] = lo - min_k B'[k][n] over the depths k < K moves the column into [lo, lo + span]; when every
 * column fits, the strip is rewritten IN PLACE (ep_qgemm's b is scratch) as int8 quads: the 32-byte slot of pair
 * 2q receives [column 0..7][depths 4q..4q+3] of B' + c (pair 2q+1's slot is left unused). In place because an
 * int8 copy would need K * 8 bytes (512 KiB at K = 65536) that neither the plan's scratch nor a stack has.
 * Then A'(B' + c) - c[n] * rowsumA[m] = A'B' exactly in int32 (wrapping arithmetic, exact result).
 * Filler lanes (an odd K's last depth, the depths past the last pair) saturate somewhere in int8: A' is 0 there. */
#ifndef EP_QGEMM_QUADS_H
#define EP_QGEMM_QUADS_H
#include <stdint.h>
#include "ep_vec.h"

/* 1 with c of columns 0..3 in *c03 and 4..7 in *c47 (int32) when every column spans at most `span` values and
 * |B'| <= 255 (qgemm.h; c stays in int16); else 0 and the strip is untouched. lo + span <= 127. */
static inline int ep_qgemm_strip_quads(int16_t *s, uint64_t ld2, uint32_t K, int16_t lo, int16_t span, i32x4 *c03,
                                       i32x4 *c47) {
  const uint32_t Kp = (K + 1) / 2;
  i16x8 mn0 = i16x8_splat(INT16_MAX), mn1 = mn0, mx0 = i16x8_splat(INT16_MIN), mx1 = mx0;
  for (uint32_t p = 0; p < Kp; p++) {
    i16x8 v0 = i16x8_load(s + p * ld2), v1 = i16x8_load(s + p * ld2 + 8);
    if (2 * p + 1 == K) { v0 = i16x8_dup_even(v0); v1 = i16x8_dup_even(v1); }  /* odd K: 2nd depth is filler */
    mn0 = i16x8_min(mn0, v0); mx0 = i16x8_max(mx0, v0);
    mn1 = i16x8_min(mn1, v1); mx1 = i16x8_max(mx1, v1);
  }
  /* both depth lanes of a column -> the column's min / max: [m0 m0 m1 m1 m2 m2 m3 m3] */
  mn0 = i16x8_min(mn0, i16x8_swap_pairs(mn0)); mx0 = i16x8_max(mx0, i16x8_swap_pairs(mx0));
  mn1 = i16x8_min(mn1, i16x8_swap_pairs(mn1)); mx1 = i16x8_max(mx1, i16x8_swap_pairs(mx1));
  const i16x8 lim = i16x8_splat(255), sp = i16x8_splat(span);
  if (i16x8_any_gt(i16x8_splat(-255), i16x8_min(mn0, mn1)) || i16x8_any_gt(i16x8_max(mx0, mx1), lim) ||
      i16x8_any_gt(i16x8_sub(mx0, mn0), sp) || i16x8_any_gt(i16x8_sub(mx1, mn1), sp))
    return 0;
  const i16x8 l = i16x8_splat(lo), c0 = i16x8_sub(l, mn0), c1 = i16x8_sub(l, mn1);
  /* offsets in the quad layout [c x4, c' x4] */
  const i16x8 k0 = i16x8_zip32_lo(c0, c0), k1 = i16x8_zip32_hi(c0, c0), k2 = i16x8_zip32_lo(c1, c1), k3 = i16x8_zip32_hi(c1, c1);
  for (uint32_t p = 0; p < Kp; p += 2) {
    int16_t *d = s + p * ld2;
    const i16x8 a0 = i16x8_load(d), a1 = i16x8_load(d + 8);
    i16x8 b0 = i16x8_splat(0), b1 = b0;  /* past the last pair: A is 0 there */
    if (p + 1 < Kp) { b0 = i16x8_load(d + ld2); b1 = i16x8_load(d + ld2 + 8); }
    const i8x16 q0 = i8x16_narrow_i16x8(i16x8_add(i16x8_zip32_lo(a0, b0), k0), i16x8_add(i16x8_zip32_hi(a0, b0), k1));
    const i8x16 q1 = i8x16_narrow_i16x8(i16x8_add(i16x8_zip32_lo(a1, b1), k2), i16x8_add(i16x8_zip32_hi(a1, b1), k3));
    i8x16_store(d, q0);
    i8x16_store(d + 8, q1);
  }
  const i16x8 c = i16x8_even(c0, c1);  /* one offset per column */
  *c03 = i32x4_widen_lo(c);
  *c47 = i32x4_widen_hi(c);
  return 1;
}
#endif
