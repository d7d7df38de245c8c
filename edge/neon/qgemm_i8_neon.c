/* AArch64 integer GEMM with SDOT (FEAT_DotProd): ep_qgemm for the edge builds.
 *
 * Same contract as the portable kernel (wasm_kernels/src/kernels/qgemm.h), which compiles as
 * ep_qgemm_portable on NEON (wasm_kernels/src/vec/ep_isa.h): that one runs when the CPU has no dot product (the android
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
 * Per strip of 8 columns: the min/max pass and the in-place rewrite as int8 quads are shared with the
 * relaxed-SIMD build (wasm_kernels/src/kernels/qgemm_quads.h, lo = -128, span 255); a strip is converted once
 * for all row tiles. Then tiles of 8 rows
 * (two A panels) x 8 columns: per quad, one 16-byte load + one TBL per A panel turns the panel's pairs
 * 2q, 2q+1 into [row][4 depths], two B loads, 16 `sdot v.4s, b.16b, a.4b[row]` and 2 sdot against ones
 * for the row sums: 16 accumulators + 2 row sums + 4 operands + 2 constants of the 32 registers.
 * The epilogue is the portable one (ep_qgemm_epi_row), so every output is bit-identical to it. */
#include <arm_neon.h>
#include "qgemm.h"
#include "qgemm_quads.h"
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
    int32x4_t cl, ch;
    if (!ep_qgemm_strip_quads(s, ld2, K, -128, 255, &cl, &ch)) {
      ep_qgemm_epi es = *e;
      if (es.colsum) es.colsum += n;
      ep_qgemm_portable(M, cnt, K, a, s, ldb, n_off + n, &es);
      continue;
    }
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
