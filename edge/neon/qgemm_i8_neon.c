/* AArch64 integer GEMM with SDOT (FEAT_DotProd): ep_qgemm for the edge builds.
 *
 * Same contract as the portable kernel (wasm_kernels/src/kernels/qgemm.h), which edge/Makefile compiles
 * with ep_qgemm renamed ep_qgemm_portable: that one runs when the CPU has no dot product (the android
 * armv8-a baseline on an A53/A55-class core without it) and for a column strip whose values do not fit
 * the int8 form below (never for B built by ep_qgemm_pack_b or QCONV's im2col).
 *
 * SDOT multiplies int8 by int8 in groups of 4 depths. A' is int8 already; B' = x - zp is int16 in
 * [-255, 255], but within one column it spans at most 256 consecutive values (one 8-bit range shifted by
 * that column's zero point; the im2col pads hold B' = 0, i.e. x = zp, inside it). So per column n,
 *   c[n] = -128 - min_k B'[k][n]   puts B'[k][n] + c[n] in [-128, 127], and
 *   sum_k A'[m][k] B'[k][n] = sum_k A'[m][k] (B'[k][n] + c[n]) - c[n] * rowsumA'[m]
 * exactly (int32 wraps on the way; the final value fits, qgemm.h's bound). The kernel reads the offsets
 * off the data, so it needs neither zero points nor dtypes, and per-column zero points (QMATMUL's W) work.
 *
 * Per strip of 8 columns: one pass for the per-column min/max over the valid depths, one pass rewriting
 * the strip IN PLACE (ep_qgemm's b is scratch) as int8 quads: the 32-byte slot of pair 2q receives
 * [column][4 depths] for depths 4q..4q+3 (pair 2q+1's slot is left unused). In place because the int8
 * strip needs K * 8 bytes (up to 512 KiB at K = 65536) that neither the plan's scratch nor a stack has,
 * and it is converted once for all row tiles. Then tiles of 8 rows
 * (two A panels) x 8 columns: per quad, one 16-byte load + one TBL per A panel turns the panel's pairs
 * 2q, 2q+1 into [row][4 depths], two B loads, 16 `sdot v.4s, b.16b, a.4b[row]` and 2 sdot against ones
 * for the row sums: 16 accumulators + 2 row sums + 4 operands + 2 constants of the 32 registers.
 * The epilogue is the portable one (ep_qgemm_epi_row), so every output is bit-identical to it. */
#include <arm_neon.h>
#include "qgemm.h"
#include "ep_edge.h"

#if EP_QGEMM_MR != 4 || EP_QGEMM_NR != 8
#error "qgemm_i8_neon.c is written for 4-row A panels and 8-column B strips"
#endif

void ep_qgemm_portable(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
                       const ep_qgemm_epi *e);

/* pi5 is built -mcpu=cortex-a76 (dot product always there); the android baseline compiles these
 * functions for armv8.2-a+dotprod and runs them only after the runtime check (ep_edge_cpu_features). */
#if defined(__ARM_FEATURE_DOTPROD)
#define SDOT_FN static
#else
#define SDOT_FN static __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

static int have_sdot(void) {
#if defined(__ARM_FEATURE_DOTPROD)
  return 1;
#else
  static int cached = -1;  /* racing first calls compute the same value */
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    v = (ep_edge_cpu_features() & EP_CPU_DOTPROD) != 0;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
#endif
}

const char *ep_edge_qgemm_name(void) { return have_sdot() ? "neon-sdot-8x8" : "portable-4x8"; }

/* Offsets of one strip (pair p at s + p * ld2, 8 columns x 2 depths per pair): c = -128 - min over the
 * depths < K, as [c0 c0 c1 c1 c2 c2 c3 c3] (*c03) and columns 4..7 (*c47). 0 when a value is outside
 * [-255, 255] or a column spans more than 256 values (then the strip cannot be int8). */
SDOT_FN int strip_offsets(const int16_t *s, uint64_t ld2, uint32_t K, int16x8_t *c03, int16x8_t *c47) {
  int16x8_t mn0 = vdupq_n_s16(INT16_MAX), mn1 = mn0, mx0 = vdupq_n_s16(INT16_MIN), mx1 = mx0;
  for (uint32_t p = 0; p < K / 2; p++, s += ld2) {
    const int16x8_t v0 = vld1q_s16(s), v1 = vld1q_s16(s + 8);
    mn0 = vminq_s16(mn0, v0); mx0 = vmaxq_s16(mx0, v0);
    mn1 = vminq_s16(mn1, v1); mx1 = vmaxq_s16(mx1, v1);
  }
  if (K & 1) {  /* last pair: only its first depth counts (the second is anything finite, A is 0 there) */
    const int16x8_t v0 = vtrn1q_s16(vld1q_s16(s), vld1q_s16(s)), v1 = vtrn1q_s16(vld1q_s16(s + 8), vld1q_s16(s + 8));
    mn0 = vminq_s16(mn0, v0); mx0 = vmaxq_s16(mx0, v0);
    mn1 = vminq_s16(mn1, v1); mx1 = vmaxq_s16(mx1, v1);
  }
  /* both depth lanes of a column -> the column's min / max */
  mn0 = vminq_s16(mn0, vrev32q_s16(mn0)); mx0 = vmaxq_s16(mx0, vrev32q_s16(mx0));
  mn1 = vminq_s16(mn1, vrev32q_s16(mn1)); mx1 = vmaxq_s16(mx1, vrev32q_s16(mx1));
  /* |B'| <= 255 (qgemm.h; keeps c in int16) and spans of at most 256 values */
  if (vminvq_s16(vminq_s16(mn0, mn1)) < -255 || vmaxvq_s16(vmaxq_s16(mx0, mx1)) > 255) return 0;
  if (vmaxvq_s16(vmaxq_s16(vsubq_s16(mx0, mn0), vsubq_s16(mx1, mn1))) > 255) return 0;
  const int16x8_t m128 = vdupq_n_s16(-128);
  *c03 = vsubq_s16(m128, mn0);
  *c47 = vsubq_s16(m128, mn1);
  return 1;
}

/* Rewrites the strip in place: pair 2q's 32-byte slot = int8 [column 0..7][depth 4q..4q+3] of B' + c. */
SDOT_FN void strip_to_quads(int16_t *s, uint64_t ld2, uint32_t Kp, int16x8_t c03, int16x8_t c47) {
  /* offsets per quad lane layout: [cA x4, cB x4] */
  const int16x8_t k0 = vreinterpretq_s16_s32(vzip1q_s32(vreinterpretq_s32_s16(c03), vreinterpretq_s32_s16(c03)));
  const int16x8_t k1 = vreinterpretq_s16_s32(vzip2q_s32(vreinterpretq_s32_s16(c03), vreinterpretq_s32_s16(c03)));
  const int16x8_t k2 = vreinterpretq_s16_s32(vzip1q_s32(vreinterpretq_s32_s16(c47), vreinterpretq_s32_s16(c47)));
  const int16x8_t k3 = vreinterpretq_s16_s32(vzip2q_s32(vreinterpretq_s32_s16(c47), vreinterpretq_s32_s16(c47)));
  for (uint32_t p = 0; p < Kp; p += 2) {
    int16_t *d = s + (uint64_t)p * ld2;
    const int32x4_t a0 = vreinterpretq_s32_s16(vld1q_s16(d)), a1 = vreinterpretq_s32_s16(vld1q_s16(d + 8));
    int32x4_t b0 = vdupq_n_s32(0), b1 = b0;  /* past the last pair: A is 0 there */
    if (p + 1 < Kp) { b0 = vreinterpretq_s32_s16(vld1q_s16(d + ld2)); b1 = vreinterpretq_s32_s16(vld1q_s16(d + ld2 + 8)); }
    /* saturating narrow: exact for valid depths; an odd K's filler depth only has to stay finite */
    const int8x16_t q0 = vqmovn_high_s16(vqmovn_s16(vaddq_s16(vreinterpretq_s16_s32(vzip1q_s32(a0, b0)), k0)),
                                         vaddq_s16(vreinterpretq_s16_s32(vzip2q_s32(a0, b0)), k1));
    const int8x16_t q1 = vqmovn_high_s16(vqmovn_s16(vaddq_s16(vreinterpretq_s16_s32(vzip1q_s32(a1, b1)), k2)),
                                         vaddq_s16(vreinterpretq_s16_s32(vzip2q_s32(a1, b1)), k3));
    vst1q_s8((int8_t *)(void *)d, q0);
    vst1q_s8((int8_t *)(void *)d + 16, q1);
  }
}

/* Pairs 2q, 2q+1 of a 4-row panel (16 bytes: [pair][row][2]) -> [row][4 depths], the by-element layout. */
static const uint8_t A_IDX[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};

#define SDOT4(c0, c1, av)                                                              \
  c0##0 = vdotq_laneq_s32(c0##0, b0, av, 0); c1##0 = vdotq_laneq_s32(c1##0, b1, av, 0); \
  c0##1 = vdotq_laneq_s32(c0##1, b0, av, 1); c1##1 = vdotq_laneq_s32(c1##1, b1, av, 1); \
  c0##2 = vdotq_laneq_s32(c0##2, b0, av, 2); c1##2 = vdotq_laneq_s32(c1##2, b1, av, 2); \
  c0##3 = vdotq_laneq_s32(c0##3, b0, av, 3); c1##3 = vdotq_laneq_s32(c1##3, b1, av, 3);

/* One tile: rows m0..m0+mr (mr <= 8; panel a1 only read when mr > 4), strip columns n..n+cnt of quads bq
 * (quad q at bq + q * qstride bytes), offsets c (int32 per column, 0..3 and 4..7). */
SDOT_FN void tile(uint32_t Kp, const int8_t *a0, const int8_t *a1, const int8_t *bq, uint64_t qstride, int32x4_t cl,
                  int32x4_t ch, const ep_qgemm_epi *e, uint32_t m0, uint32_t mr, uint32_t n, uint32_t n_off, uint32_t cnt) {
  const uint8x16_t idx = vld1q_u8(A_IDX);
  const int8x16_t ones = vdupq_n_s8(1);
  const int32x4_t z = vdupq_n_s32(0);
  int32x4_t u0 = z, u1 = z, u2 = z, u3 = z, v0 = z, v1 = z, v2 = z, v3 = z;  /* rows 0..3: cols 0..3 (u), 4..7 (v) */
  int32x4_t w0 = z, w1 = z, w2 = z, w3 = z, x0 = z, x1 = z, x2 = z, x3 = z;  /* rows 4..7 */
  int32x4_t rs0 = z, rs1 = z;                                                /* row sums of A' */
  const uint32_t Kq = Kp / 2;
  const int two = mr > 4;
  for (uint32_t q = 0; q < Kq; q++, bq += qstride) {
    const int8x16_t b0 = vld1q_s8(bq), b1 = vld1q_s8(bq + 16);
    const int8x16_t av = vqtbl1q_s8(vld1q_s8(a0 + 16 * q), idx);
    SDOT4(u, v, av)
    rs0 = vdotq_s32(rs0, av, ones);
    if (two) {
      const int8x16_t aw = vqtbl1q_s8(vld1q_s8(a1 + 16 * q), idx);
      SDOT4(w, x, aw)
      rs1 = vdotq_s32(rs1, aw, ones);
    }
  }
  if (Kp & 1) {  /* last quad has one pair: its second half is 0 (the panel ends there) */
    const int8x16_t b0 = vld1q_s8(bq), b1 = vld1q_s8(bq + 16);
    const int8x16_t av = vqtbl1q_s8(vcombine_s8(vld1_s8(a0 + 16 * Kq), vdup_n_s8(0)), idx);
    SDOT4(u, v, av)
    rs0 = vdotq_s32(rs0, av, ones);
    if (two) {
      const int8x16_t aw = vqtbl1q_s8(vcombine_s8(vld1_s8(a1 + 16 * Kq), vdup_n_s8(0)), idx);
      SDOT4(w, x, aw)
      rs1 = vdotq_s32(rs1, aw, ones);
    }
  }
  const int32x4_t lo[8] = {u0, u1, u2, u3, w0, w1, w2, w3}, hi[8] = {v0, v1, v2, v3, x0, x1, x2, x3};
  int32_t rsum[8];
  vst1q_s32(rsum, rs0);
  vst1q_s32(rsum + 4, rs1);
  for (uint32_t r = 0; r < mr; r++) {
    const int32x4_t s = vdupq_n_s32(rsum[r]);
    ep_qgemm_epi_row(e, m0 + r, n, n_off, cnt, vmlsq_s32(lo[r], cl, s), vmlsq_s32(hi[r], ch, s));
  }
}

SDOT_FN void qgemm_sdot(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
                        const ep_qgemm_epi *e) {
  const uint32_t Kp = (K + 1) / 2;
  const uint64_t ld2 = 2 * (uint64_t)ldb, panel = 2 * (uint64_t)EP_QGEMM_MR * Kp;
  for (uint32_t n = 0; n < N; n += EP_QGEMM_NR) {
    const uint32_t cnt = N - n < EP_QGEMM_NR ? N - n : EP_QGEMM_NR;
    int16_t *s = b + 2 * (uint64_t)n;
    int16x8_t c03, c47;
    if (!strip_offsets(s, ld2, K, &c03, &c47)) {
      ep_qgemm_epi es = *e;
      if (es.colsum) es.colsum += n;
      ep_qgemm_portable(M, cnt, K, a, s, ldb, n_off + n, &es);
      continue;
    }
    strip_to_quads(s, ld2, Kp, c03, c47);
    const int16x8_t c = vuzp1q_s16(c03, c47);  /* one offset per column */
    const int32x4_t cl = vmovl_s16(vget_low_s16(c)), ch = vmovl_high_s16(c);
    for (uint32_t m0 = 0; m0 < M; m0 += 8) {
      const int8_t *a0 = a + (uint64_t)(m0 / EP_QGEMM_MR) * panel;
      const uint32_t mr = M - m0 < 8 ? M - m0 : 8;
      tile(Kp, a0, a0 + panel, (const int8_t *)(const void *)s, 4 * ld2, cl, ch, e, m0, mr, n, n_off, cnt);
    }
  }
}

void ep_qgemm(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
              const ep_qgemm_epi *e) {
  if (K == 0 || !have_sdot()) ep_qgemm_portable(M, N, K, a, b, ldb, n_off, e);
  else qgemm_sdot(M, N, K, a, b, ldb, n_off, e);
}
