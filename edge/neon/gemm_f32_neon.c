/* AArch64 NEON f32 GEMM micro-kernel: 6 x 16 tiles, fmla by element.
 *
 * Same contract and packed-A layout as the portable kernel (wasm_kernels/src/kernels/gemm.h):
 * A is packed in panels of EP_GEMM_MR = 6 rows by the packager, so the plan stays one for every
 * target. What the portable 6 x 8 kernel leaves behind on AArch64: it broadcasts each A element
 * with its own load (ld1r) and holds 12 accumulators, sized for the 16 registers of SIMD128.
 * AArch64 has 32: this kernel keeps 24 accumulators (6 rows x 16 columns), loads the 6 A values
 * of a k step with two loads (ldr q + ldr d) and multiplies by lane (fmla v.4s, v.4s, v.s[i]),
 * so each k step is 4 B loads + 2 A loads for 24 fmla (the portable: 2 + 6 for 12).
 *
 * On NEON the portable gemm.c compiles as ep_gemm_f32_portable (wasm_kernels/src/vec/ep_isa.h); this
 * ep_gemm_f32 runs the full 6 x 16 tiles and hands the remaining rows/columns to the portable one
 * (pointers offset to the sub-block). Accumulation order (k ascending, one fused multiply-add per
 * k) and the epilogue's operations are the portable kernel's, so both give the same bits on NEON
 * (tests/test_edge.py checks exactly that under qemu). */
#include <arm_neon.h>
#include "gemm.h"

#if EP_GEMM_MR != 6
#error "gemm_f32_neon.c is written for 6-row packed A panels"
#endif

void ep_gemm_f32_portable(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                          int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *epi);

static inline float32x4_t act4(float32x4_t v, int32_t act, float32x4_t p0, float32x4_t p1) {
  const float32x4_t z = vdupq_n_f32(0.0f);
  /* the vector layer's max/min: a < b ? b : a (NaN-compatible with every other target) */
#define PMAX(a, b) vbslq_f32(vcltq_f32((a), (b)), (b), (a))
#define PMIN(a, b) vbslq_f32(vcltq_f32((b), (a)), (b), (a))
  switch (act) {
    case EP_ACT_RELU: return PMAX(v, z);
    case EP_ACT_LEAKY_RELU: return vaddq_f32(PMAX(v, z), vmulq_f32(p0, PMIN(v, z)));
    case EP_ACT_CLIP: return PMIN(PMAX(v, p0), p1);
    default: return v;   /* the out-of-line activations never reach a tile (ep_gemm_post_split) */
  }
#undef PMAX
#undef PMIN
}

/* Epilogue of one row (16 columns at n) of a tile, then store: the portable epi_vec's operations. */
static inline void epi_row(const ep_gemm_epi *e, uint32_t m, uint32_t n, float32x4_t v[4], float *dst) {
  if (e->alpha != 1.0f) {
    const float32x4_t al = vdupq_n_f32(e->alpha);
    for (int j = 0; j < 4; j++) v[j] = vmulq_f32(v[j], al);
  }
  if (e->bias_mode != EP_BIAS_NONE) {
    float32x4_t bv[4];
    switch (e->bias_mode) {
      case EP_BIAS_ROW: bv[0] = bv[1] = bv[2] = bv[3] = vdupq_n_f32(e->bias[m]); break;
      case EP_BIAS_COL: for (int j = 0; j < 4; j++) bv[j] = vld1q_f32(e->bias + n + 4 * j); break;
      case EP_BIAS_FULL: {
        const float *p = e->bias + (uint64_t)m * e->ld_bias + n;
        for (int j = 0; j < 4; j++) bv[j] = vld1q_f32(p + 4 * j);
        break;
      }
      default: bv[0] = bv[1] = bv[2] = bv[3] = vdupq_n_f32(e->bias[0]); break;
    }
    if (e->beta == 1.0f) {
      for (int j = 0; j < 4; j++) v[j] = vaddq_f32(v[j], bv[j]);
    } else {
      const float32x4_t be = vdupq_n_f32(e->beta);
      for (int j = 0; j < 4; j++) v[j] = vfmaq_f32(v[j], be, bv[j]);
    }
  }
  if (e->res) {
    const float *p = e->res + (uint64_t)m * e->ld_res + n;
    for (int j = 0; j < 4; j++) v[j] = vaddq_f32(v[j], vld1q_f32(p + 4 * j));
  }
  if (e->act != EP_ACT_NONE) {
    const float32x4_t p0 = vdupq_n_f32(e->p0), p1 = vdupq_n_f32(e->p1);
    for (int j = 0; j < 4; j++) v[j] = act4(v[j], e->act, p0, p1);
  }
  for (int j = 0; j < 4; j++) vst1q_f32(dst + 4 * j, v[j]);
}

#define ROW_FMA(r, av, lane, LANEFN)                       \
  c##r##0 = LANEFN(c##r##0, b0, av, lane);                 \
  c##r##1 = LANEFN(c##r##1, b1, av, lane);                 \
  c##r##2 = LANEFN(c##r##2, b2, av, lane);                 \
  c##r##3 = LANEFN(c##r##3, b3, av, lane);
#define ROW_ZERO(r) float32x4_t c##r##0 = z, c##r##1 = z, c##r##2 = z, c##r##3 = z;
#define ROW_OUT(r) { float32x4_t v[4] = {c##r##0, c##r##1, c##r##2, c##r##3}; \
                     epi_row(e, m0 + r, n, v, c + (uint64_t)(m0 + r) * ldc + n); }

/* One 6 x 16 tile: C[m0..m0+6, n..n+16) = epi(A_panel * B[:, n..n+16)). */
static void tile_6x16(uint32_t K, const float *a, const float *b, uint32_t ldb, float *c, uint32_t ldc,
                      uint32_t m0, uint32_t n, const ep_gemm_epi *e) {
  const float32x4_t z = vdupq_n_f32(0.0f);
  ROW_ZERO(0) ROW_ZERO(1) ROW_ZERO(2) ROW_ZERO(3) ROW_ZERO(4) ROW_ZERO(5)
  for (uint32_t k = 0; k < K; k++) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
    const float32x4_t a03 = vld1q_f32(a);
    const float32x2_t a45 = vld1_f32(a + 4);
    ROW_FMA(0, a03, 0, vfmaq_laneq_f32)
    ROW_FMA(1, a03, 1, vfmaq_laneq_f32)
    ROW_FMA(2, a03, 2, vfmaq_laneq_f32)
    ROW_FMA(3, a03, 3, vfmaq_laneq_f32)
    ROW_FMA(4, a45, 0, vfmaq_lane_f32)
    ROW_FMA(5, a45, 1, vfmaq_lane_f32)
    a += EP_GEMM_MR;
    b += ldb;
  }
  ROW_OUT(0) ROW_OUT(1) ROW_OUT(2) ROW_OUT(3) ROW_OUT(4) ROW_OUT(5)
}

void ep_gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                 int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  const uint32_t M6 = M / 6 * 6, N16 = N / 16 * 16;
  /* As the portable driver: the tiles store without an out-of-line activation, which then runs once over each
   * finished panel's rows (a call per vector otherwise). */
  ep_gemm_epi e0;
  ep_gemm_post post;
  e = ep_gemm_post_split(e, &e0, &post);
  if (M6 && N16) {
    /* Block N so the K x nb block of B read by every row panel stays in L2 (512 KiB on an A76). */
    uint32_t nb = K ? (131072u / K) & ~15u : N16;
    if (nb < 16) nb = 16;
    for (uint32_t n0 = 0; n0 < N16; n0 += nb) {
      const uint32_t n1 = N16 - n0 < nb ? N16 : n0 + nb;
      for (uint32_t m0 = 0; m0 < M6; m0 += 6) {
        const float *a = a_packed + (uint64_t)(m0 / 6) * K * 6;
        for (uint32_t n = n0; n < n1; n += 16) tile_6x16(K, a, b + n, ldb, c, ldc, m0, n, e);
        ep_gemm_post_rows(&post, c, ldc, m0, m0 + 6, n0, n1);
      }
    }
  }
  if (N16 < N && M6) {  /* right edge of the full panels */
    const ep_gemm_epi s = ep_gemm_epi_shift(e, 0, N16);
    ep_gemm_f32_portable(M6, N - N16, K, a_packed, b + N16, ldb, b_padded, c + N16, ldc, &s);
    ep_gemm_post_rows(&post, c, ldc, 0, M6, N16, N);
  }
  if (M6 < M) {  /* last partial panel, every column */
    const ep_gemm_epi s = ep_gemm_epi_shift(e, M6, 0);
    ep_gemm_f32_portable(M - M6, N, K, a_packed + (uint64_t)(M6 / 6) * K * 6, b, ldb, b_padded,
                         c + (uint64_t)M6 * ldc, ldc, &s);
    ep_gemm_post_rows(&post, c, ldc, M6, M, 0, N);
  }
}
