/* f32 GEMM driver and register-blocked micro-kernel (EP_GEMM_MR x EP_GEMM_NR = 6 x 8): see gemm.h.
 * 12 f32x4 accumulators + 2 B vectors + 1 broadcast = 15 registers, which fits the 16 vector
 * registers every SIMD128 engine gets on x86-64 and AArch64. The K loop is unrolled by 2; every
 * micro-kernel body is specialised on the row count (1..MR) so edge panels waste nothing. */
#include "gemm.h"
#include "ep_vec.h"

#define MR EP_GEMM_MR
#define NR EP_GEMM_NR

/* WebAssembly engines give SIMD128 code 16 vector registers (V8 keeps one as scratch): a full 6x8 tile
 * is computed in two passes on the SIMD128 build (see accumulate), in one on the relaxed build (dot6x8).
 * NEON has 32 and the scalar build none to spare. */
#if EP_ISA_WASM128   /* src/vec/ep_isa.h */
#define EP_GEMM_TWO_PASS 1
#else
#define EP_GEMM_TWO_PASS 0
#endif
/* The relaxed build has a fused multiply-add, so 12 accumulators + 2 B vectors + a broadcast fit V8's registers
 * when the K loop is a function of its own (dot6x8): full 6 x 8 tiles in one pass, as matmul.c's TILE6. This
 * needs gemm.c compiled with instructions in source order (Makefile SRC_ORDER): LLVM's default scheduler issues
 * the 6 broadcasts before the multiply-adds, 20 live vectors, and V8 spills (1.6x slower). docs/benchmarks.md. */
#if EP_ISA_WASM_RELAXED
#define EP_GEMM_ONE_PASS6 1
#else
#define EP_GEMM_ONE_PASS6 0
#endif

ep_status ep_gemm_check_act(int32_t code) {
  return ep_act_fusable(code) ? EP_OK : EP_E_PARAM;
}

f32x4 ep_gemm_act4(f32x4 v, int32_t act, f32x4 p0, f32x4 p1) {
  float x[4], a[4], b[4];
  int32_t w[2];
  f32x4_store(x, v); f32x4_store(a, p0); f32x4_store(b, p1);
  ep_memcpy(&w[0], &a[0], 4); ep_memcpy(&w[1], &b[0], 4);
  ep_apply_activation(x, 4, act, w);
  return f32x4_load(x);
}

static float act1(float v, int32_t act, float p0, float p1) {
  switch (act) {
    case EP_ACT_RELU: return v < 0.0f ? 0.0f : v;
    case EP_ACT_LEAKY_RELU: return v < 0.0f ? v * p0 : v;
    case EP_ACT_CLIP: v = v < p0 ? p0 : v; return p1 < v ? p1 : v;
    default: {
      if (act < EP_ACT_COUNT_INLINE) return v;
      float t[4];   /* lane 0 through the same vector code as every other element */
      f32x4_store(t, ep_gemm_act4(f32x4_splat(v), act, f32x4_splat(p0), f32x4_splat(p1)));
      return t[0];
    }
  }
}

float ep_gemm_epi_scalar(const ep_gemm_epi *e, float acc, uint32_t m, uint32_t n) {
  float v = e->alpha == 1.0f ? acc : e->alpha * acc;
  switch (e->bias_mode) {
    case EP_BIAS_ROW: v += e->beta * e->bias[m]; break;
    case EP_BIAS_COL: v += e->beta * e->bias[n]; break;
    case EP_BIAS_FULL: v += e->beta * e->bias[(uint64_t)m * e->ld_bias + n]; break;
    case EP_BIAS_SCALAR: v += e->beta * e->bias[0]; break;
    default: break;
  }
  if (e->res) v += e->res[(uint64_t)m * e->ld_res + n];
  return act1(v, e->act, e->p0, e->p1);
}

EP_AINLINE f32x4 act4(f32x4 v, int32_t act, f32x4 p0, f32x4 p1) {
  switch (act) {
    case EP_ACT_RELU: return f32x4_max(v, f32x4_zero());
    /* max(v,0) + alpha*min(v,0): exact for either sign, no compare/select needed */
    case EP_ACT_LEAKY_RELU: return f32x4_add(f32x4_max(v, f32x4_zero()), f32x4_mul(p0, f32x4_min(v, f32x4_zero())));
    case EP_ACT_CLIP: return f32x4_min(f32x4_max(v, p0), p1);
    /* Not reached from EP_ACT_COUNT_INLINE on (ep_gemm_post_split takes those out of the tiles' epilogue), but
     * kept: without this opaque call clang unswitches and unrolls the tile loops on act (docs/benchmarks.md). */
    default: return act < EP_ACT_COUNT_INLINE ? v : ep_gemm_act4(v, act, p0, p1);
  }
}

/* Epilogue for `nv` vectors (1 or 2) of row m starting at column n, stored to dst. */
EP_AINLINE void epi_vec(const ep_gemm_epi *e, uint32_t m, uint32_t n, const uint32_t nv, f32x4 v0, f32x4 v1, float *dst) {
  if (e->alpha != 1.0f) {
    const f32x4 al = f32x4_splat(e->alpha);
    v0 = f32x4_mul(v0, al); v1 = f32x4_mul(v1, al);
  }
  if (e->bias_mode != EP_BIAS_NONE) {
    const f32x4 be = f32x4_splat(e->beta);
    f32x4 b0, b1 = f32x4_zero();
    switch (e->bias_mode) {
      case EP_BIAS_ROW: b0 = b1 = f32x4_splat(e->bias[m]); break;
      case EP_BIAS_COL: b0 = f32x4_load(e->bias + n); if (nv == 2) b1 = f32x4_load(e->bias + n + 4); break;
      case EP_BIAS_FULL: {
        const float *p = e->bias + (uint64_t)m * e->ld_bias + n;
        b0 = f32x4_load(p); if (nv == 2) b1 = f32x4_load(p + 4); break;
      }
      default: b0 = b1 = f32x4_splat(e->bias[0]); break;
    }
    if (e->beta == 1.0f) { v0 = f32x4_add(v0, b0); v1 = f32x4_add(v1, b1); }
    else { v0 = f32x4_fma(v0, be, b0); v1 = f32x4_fma(v1, be, b1); }
  }
  if (e->res) {
    const float *p = e->res + (uint64_t)m * e->ld_res + n;
    v0 = f32x4_add(v0, f32x4_load(p));
    if (nv == 2) v1 = f32x4_add(v1, f32x4_load(p + 4));
  }
  if (e->act != EP_ACT_NONE) {
    const f32x4 p0 = f32x4_splat(e->p0), p1 = f32x4_splat(e->p1);
    v0 = act4(v0, e->act, p0, p1);
    v1 = act4(v1, e->act, p0, p1);
  }
  f32x4_store(dst, v0);
  if (nv == 2) f32x4_store(dst + 4, v1);
}

#include "gemm_dots.h"   /* EP_DOT_X8; dot6x8 (relaxed): out[r][v] of a 6 x 2 array is out[2r + v], the same layout */

/* acc[r][0..nv) = sum_k a[k*MR + r] * b[k*ldb + 0 .. 4*nv) for r < mr. */
EP_AINLINE void accumulate(const uint32_t mr, const uint32_t nv, uint32_t K, const float *a, const float *b,
                           uint32_t ldb, f32x4 acc[MR][2]) {
#if EP_GEMM_ONE_PASS6
  if (mr == 6 && nv == 2) { dot6x8(K, a, b, ldb, &acc[0][0]); return; }
#elif EP_GEMM_TWO_PASS
  if (mr == 6 && nv == 2) {
    /* Rows 0-3, then rows 4-5: 8 then 4 accumulators (+ 2 B vectors, the A vector and a broadcast)
     * stay in registers; the 12 of a one-pass 6x8 tile do not, and V8 spills two or three of them on
     * every step (2x slower). B is read twice, from L1. Same sums in the same order as one pass. */
    const float *ap = a, *bp = b;
    EP_DOT_X8(0, 4, K, ap, bp, ldb, &acc[0][0]);
    EP_DOT_X8(4, 2, K, a, b, ldb, &acc[4][0]);
    return;
  }
#endif
  for (uint32_t r = 0; r < mr; r++) { acc[r][0] = f32x4_zero(); acc[r][1] = f32x4_zero(); }
  if (mr == 6 && nv == 2) {
    /* Rows 0-3 and 2-5 of the packed A column as two vector loads (no over-read past the panel),
     * broadcast by lane shuffles: engines turn a scalar load+splat into 2-3 instructions. */
    for (uint32_t k = 0; k < K; k++) {
      const f32x4 b0 = f32x4_load(b), b1 = f32x4_load(b + 4);
      const f32x4 alo = f32x4_load(a), ahi = f32x4_load(a + 2);
      f32x4 av;
      av = f32x4_lane_splat(alo, 0); acc[0][0] = f32x4_fma(acc[0][0], av, b0); acc[0][1] = f32x4_fma(acc[0][1], av, b1);
      av = f32x4_lane_splat(alo, 1); acc[1][0] = f32x4_fma(acc[1][0], av, b0); acc[1][1] = f32x4_fma(acc[1][1], av, b1);
      av = f32x4_lane_splat(alo, 2); acc[2][0] = f32x4_fma(acc[2][0], av, b0); acc[2][1] = f32x4_fma(acc[2][1], av, b1);
      av = f32x4_lane_splat(alo, 3); acc[3][0] = f32x4_fma(acc[3][0], av, b0); acc[3][1] = f32x4_fma(acc[3][1], av, b1);
      av = f32x4_lane_splat(ahi, 2); acc[4][0] = f32x4_fma(acc[4][0], av, b0); acc[4][1] = f32x4_fma(acc[4][1], av, b1);
      av = f32x4_lane_splat(ahi, 3); acc[5][0] = f32x4_fma(acc[5][0], av, b0); acc[5][1] = f32x4_fma(acc[5][1], av, b1);
      a += MR;
      b += ldb;
    }
    return;
  }
  for (uint32_t k = 0; k < K; k++) {
    const f32x4 b0 = f32x4_load(b), b1 = nv == 2 ? f32x4_load(b + 4) : f32x4_zero();
    for (uint32_t r = 0; r < mr; r++) {
      const f32x4 av = f32x4_load_splat(a + r);
      acc[r][0] = f32x4_fma(acc[r][0], av, b0);
      if (nv == 2) acc[r][1] = f32x4_fma(acc[r][1], av, b1);
    }
    a += MR;
    b += ldb;
  }
}

/* An epilogue that is v = clip(acc + bias[m] + res[m, n], lo, hi) (bias and res may be NULL): see simple_of. */
typedef struct { const float *bias, *res; uint32_t ld_res; float lo, hi; } simple_epi;

/* The simple form of e, or NULL. NaN passes a clip unchanged (pmax/pmin keep their first operand on NaN), as
 * it passes relu and no activation; the sums are epi_vec's, in its order (adding a zero bias changes no bits:
 * an accumulator that starts at +0 is never -0). */
static const simple_epi *simple_of(const ep_gemm_epi *e, simple_epi *s) {
  if (e->alpha != 1.0f) return 0;
  if (e->bias_mode == EP_BIAS_ROW && e->beta == 1.0f) s->bias = e->bias;
  else if (e->bias_mode == EP_BIAS_NONE) s->bias = 0;
  else return 0;
  s->res = e->res;
  s->ld_res = e->ld_res;
  switch (e->act) {
    case EP_ACT_NONE: s->lo = -__builtin_inff(); s->hi = __builtin_inff(); return s;
    case EP_ACT_RELU: s->lo = 0.0f; s->hi = __builtin_inff(); return s;
    case EP_ACT_CLIP: s->lo = e->p0; s->hi = e->p1; return s;
    default: return 0;
  }
}

/* nv vectors of one row of a tile through the simple epilogue: bias bv, residual row res (or NULL). */
EP_AINLINE void simple_row(const uint32_t nv, float *dst, const f32x4 *acc, f32x4 bv, const float *res, f32x4 lo, f32x4 hi) {
  for (uint32_t v = 0; v < nv; v++) {
    f32x4 x = f32x4_add(acc[v], bv);
    if (res) x = f32x4_add(x, f32x4_load(res + 4 * v));
    f32x4_store(dst + 4 * v, f32x4_min(f32x4_max(x, lo), hi));
  }
}

/* The 6 x 8 tile at row m0, column n of C (acc: accumulate's) through the simple epilogue. */
EP_AINLINE void simple_tile6x8(const simple_epi *s, f32x4 acc[MR][2], float *c, uint32_t ldc, uint32_t m0, uint32_t n) {
  const float *bias = s->bias, *res = s->res;   /* locals: the stores below cannot change them */
  const uint32_t ld_res = s->ld_res;
  const f32x4 lo = f32x4_splat(s->lo), hi = f32x4_splat(s->hi);
  for (uint32_t r = 0; r < MR; r++)
    simple_row(2, c + (uint64_t)(m0 + r) * ldc + n, acc[r], bias ? f32x4_load_splat(bias + m0 + r) : f32x4_zero(),
               res ? res + (uint64_t)(m0 + r) * ld_res + n : 0, lo, hi);
}

#if EP_GEMM_TWO_PASS && !EP_GEMM_ONE_PASS6
/* The full 6 x 16 tile at row m0, column n of C, with the simple epilogue, in three passes of 8 accumulators
 * each: rows 0-3 of columns 0-7, rows 0-3 of columns 8-15, rows 4-5 of all 16. Two 6x8 tiles' rows 4-5
 * pass has only 4 FMA chains (latency-bound: FMA latency x 2 ports wants 8 in flight); this one has 8.
 * Same sums in the same order. Not inlined: the engine allocates registers over the whole function. */
EP_NOINLINE static void tile6x16(uint32_t K, const float *a, const float *b, uint32_t ldb, float *c, uint32_t ldc,
                                 const simple_epi *s, uint32_t m0, uint32_t n) {
  const float *bias = s->bias, *res = s->res;   /* locals: the stores below cannot change them */
  const uint32_t ld_res = s->ld_res;
  const f32x4 lo = f32x4_splat(s->lo), hi = f32x4_splat(s->hi);
  b += n;
  for (uint32_t h = 0; h < 2; h++) {
    const float *ap = a, *bp = b + 8 * h;
    f32x4 acc[4][2];
    EP_DOT_X8(0, 4, K, ap, bp, ldb, &acc[0][0]);
    const uint32_t nh = n + 8 * h;
    for (uint32_t r = 0; r < 4; r++)
      simple_row(2, c + (uint64_t)(m0 + r) * ldc + nh, acc[r], bias ? f32x4_load_splat(bias + m0 + r) : f32x4_zero(),
                 res ? res + (uint64_t)(m0 + r) * ld_res + nh : 0, lo, hi);
  }
  f32x4 c40 = f32x4_zero(), c41 = c40, c42 = c40, c43 = c40, c50 = c40, c51 = c40, c52 = c40, c53 = c40;
  for (uint32_t k = 0; k < K; k++, a += MR, b += ldb) {
    const f32x4 b0 = f32x4_load(b), b1 = f32x4_load(b + 4), b2 = f32x4_load(b + 8), b3 = f32x4_load(b + 12);
    f32x4 av = f32x4_load_splat(a + 4);
    c40 = f32x4_fma(c40, av, b0); c41 = f32x4_fma(c41, av, b1); c42 = f32x4_fma(c42, av, b2); c43 = f32x4_fma(c43, av, b3);
    av = f32x4_load_splat(a + 5);
    c50 = f32x4_fma(c50, av, b0); c51 = f32x4_fma(c51, av, b1); c52 = f32x4_fma(c52, av, b2); c53 = f32x4_fma(c53, av, b3);
  }
  const f32x4 acc[2][4] = {{c40, c41, c42, c43}, {c50, c51, c52, c53}};
  for (uint32_t r = 4; r < 6; r++)
    simple_row(4, c + (uint64_t)(m0 + r) * ldc + n, acc[r - 4], bias ? f32x4_load_splat(bias + m0 + r) : f32x4_zero(),
               res ? res + (uint64_t)(m0 + r) * ld_res + n : 0, lo, hi);
}
#endif

/* Rows [m0, m0 + mr) of a tile (nv vectors wide) through epi_vec. A call, not inlined: odd row counts, the
 * 4-column tails and rows_x16 inlined one epilogue per row, row count and width, of a GEMM whose time is in the K
 * loops. Full panels of 6, 4 and 2 rows keep theirs inline: the edge panels of even channel counts (M % 6 is then 2
 * or 4; short K in Winograd's GEMMs) and matmul.c's 4-row groups on the SIMD128 build (PR). */
typedef struct { f32x4 v[MR][2]; } gemm_tile;

/* The first mr rows of acc as a copy whose address the calls below may take: acc itself never escapes, so the
 * compiler keeps it in locals through the K loops. */
EP_AINLINE gemm_tile tile_of(const uint32_t mr, f32x4 acc[MR][2]) {
  gemm_tile t;
  for (uint32_t r = 0; r < mr; r++) { t.v[r][0] = acc[r][0]; t.v[r][1] = acc[r][1]; }
  return t;
}

EP_NOINLINE static void epi_rows(const ep_gemm_epi *e, const uint32_t mr, const uint32_t m0, const uint32_t n,
                                 const uint32_t nv, const gemm_tile *t, float *c, const uint32_t ldc) {
  const f32x4 (*acc)[2] = t->v;
  for (uint32_t r = 0; r < mr; r++) epi_vec(e, m0 + r, n, nv, acc[r][0], acc[r][1], c + (uint64_t)(m0 + r) * ldc + n);
}

/* Panels of 1 or 2 rows (M = 1: a matrix-vector product; the last panel when M % 6 is 1 or 2, as in RegNet's
 * 8-channel groups and 104- or 440-channel layers) over the 16-column blocks of [n0, n1): 4 or 8 independent FMA
 * chains instead of 2 or 4 (a 2 x 8 tile waits on FMA latency), the epilogue through epi_rows (a call per 16
 * columns, after K multiply-adds). Same sums in the same order. Returns where it stopped. Not inlined: it would
 * change how the panel code around it is register-allocated. */
EP_AINLINE uint32_t rows_x16(const uint32_t rows, uint32_t m0, uint32_t n0, uint32_t n1, uint32_t K, const float *a,
                             const float *b, uint32_t ldb, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  uint32_t n = n0;
  for (; n + 2 * NR <= n1; n += 2 * NR) {
    f32x4 s0 = f32x4_zero(), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
    const float *ap = a, *bp = b + n;
    for (uint32_t k = 0; k < K; k++, ap += MR, bp += ldb) {
      const f32x4 b0 = f32x4_load(bp), b1 = f32x4_load(bp + 4), b2 = f32x4_load(bp + 8), b3 = f32x4_load(bp + 12);
      f32x4 av = f32x4_load_splat(ap);
      s0 = f32x4_fma(s0, av, b0); s1 = f32x4_fma(s1, av, b1); s2 = f32x4_fma(s2, av, b2); s3 = f32x4_fma(s3, av, b3);
      if (rows == 2) {
        av = f32x4_load_splat(ap + 1);
        t0 = f32x4_fma(t0, av, b0); t1 = f32x4_fma(t1, av, b1); t2 = f32x4_fma(t2, av, b2); t3 = f32x4_fma(t3, av, b3);
      }
    }
    const gemm_tile lo = {{{s0, s1}, {t0, t1}}}, hi = {{{s2, s3}, {t2, t3}}};
    epi_rows(e, rows, m0, n, 2, &lo, c, ldc);
    epi_rows(e, rows, m0, n + NR, 2, &hi, c, ldc);
  }
  return n;
}
EP_NOINLINE static uint32_t row1_x16(uint32_t m0, uint32_t n0, uint32_t n1, uint32_t K, const float *a, const float *b,
                                     uint32_t ldb, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  return rows_x16(1, m0, n0, n1, K, a, b, ldb, c, ldc, e);
}
EP_NOINLINE static uint32_t row2_x16(uint32_t m0, uint32_t n0, uint32_t n1, uint32_t K, const float *a, const float *b,
                                     uint32_t ldb, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  return rows_x16(2, m0, n0, n1, K, a, b, ldb, c, ldc, e);
}

/* Columns [n, n + cnt) of a tile (cnt < NR) through the scalar epilogue: the end of a padded B. */
EP_NOINLINE static void epi_partial(const ep_gemm_epi *e, const uint32_t mr, const uint32_t m0, const uint32_t n,
                                    const uint32_t cnt, const gemm_tile *t, float *c, const uint32_t ldc) {
  const f32x4 (*acc)[2] = t->v;
  float tmp[2 * 4];
  for (uint32_t r = 0; r < mr; r++) {
    f32x4_store(tmp, acc[r][0]); f32x4_store(tmp + 4, acc[r][1]);
    float *dst = c + (uint64_t)(m0 + r) * ldc;
    for (uint32_t j = 0; j < cnt; j++) dst[n + j] = ep_gemm_epi_scalar(e, tmp[j], m0 + r, n + j);
  }
}

/* The last 1..3 columns [n, n1) of a panel of mr rows: one column at a time, vectorized down the panel's rows
 * (0-3 and 2-5: two loads that stay inside the panel) instead of 6 scalar multiply-adds per depth; even and odd
 * depths in two chains each, so the loop is not bound by FMA latency (a 7x7 plane's 49th column). The loop does
 * not depend on mr: one copy for every row count. */
EP_NOINLINE static void cols_tail(const uint32_t mr, const uint32_t m0, uint32_t n, const uint32_t n1, const uint32_t K,
                                  const float *a, const float *b, const uint32_t ldb, float *c, const uint32_t ldc,
                                  const ep_gemm_epi *e) {
  for (; n < n1; n++) {
    f32x4 lo = f32x4_zero(), hi = f32x4_zero(), lo1 = lo, hi1 = lo;
    const float *ap = a, *bp = b + n;
    uint32_t k = 0;
    for (; k + 2 <= K; k += 2, ap += 2 * MR, bp += 2 * (uint64_t)ldb) {
      const f32x4 bv = f32x4_load_splat(bp), bv1 = f32x4_load_splat(bp + ldb);
      lo = f32x4_fma(lo, f32x4_load(ap), bv);
      hi = f32x4_fma(hi, f32x4_load(ap + 2), bv);
      lo1 = f32x4_fma(lo1, f32x4_load(ap + MR), bv1);
      hi1 = f32x4_fma(hi1, f32x4_load(ap + MR + 2), bv1);
    }
    if (k < K) {
      const f32x4 bv = f32x4_load_splat(bp);
      lo = f32x4_fma(lo, f32x4_load(ap), bv);
      hi = f32x4_fma(hi, f32x4_load(ap + 2), bv);
    }
    lo = f32x4_add(lo, lo1);
    hi = f32x4_add(hi, hi1);
    float s[MR];
    f32x4_store(s + 2, hi);
    f32x4_store(s, lo);
    for (uint32_t r = 0; r < mr; r++)
      c[(uint64_t)(m0 + r) * ldc + n] = ep_gemm_epi_scalar(e, s[r], m0 + r, n);
  }
}

/* One panel of `rows` rows (a: its packed K x MR block) across columns [n0, n1) of C, computed as mr rows: mr is
 * rows rounded up to even (the packed panel's rows past M are zero, and each row's sums are those of any row
 * count: k ascending, one multiply-add per depth). Odd row counts (odd channel counts: rare) thus share the
 * even bodies' code instead of three more specialisations; their stores go through epi_rows. */
EP_AINLINE void panel(const uint32_t mr, const uint32_t rows, uint32_t m0, uint32_t n0, uint32_t n1, uint32_t K,
                      const float *a, const float *b, uint32_t ldb, int b_padded, float *c, uint32_t ldc,
                      const ep_gemm_epi *e, const simple_epi *simple) {
  f32x4 acc[MR][2];
  uint32_t n = n0;
  if (mr == 2) n = (rows == 1 ? row1_x16 : row2_x16)(m0, n0, n1, K, a, b, ldb, c, ldc, e);
  if (mr == MR && simple && rows == MR) {   /* full panels only: the few edge panels are not worth the code */
    /* The convolutions' epilogue, decided once per call: epi_vec re-reads and re-tests the descriptor per row
     * (the stores to C may alias it), which weighs on short K. */
#if EP_GEMM_TWO_PASS && !EP_GEMM_ONE_PASS6
    for (; n + 2 * NR <= n1; n += 2 * NR) tile6x16(K, a, b, ldb, c, ldc, simple, m0, n);
#endif
    for (; n + NR <= n1; n += NR) {
      accumulate(mr, 2, K, a, b + n, ldb, acc);
      simple_tile6x8(simple, acc, c, ldc, m0, n);
    }
  }
  /* With B readable up to the next multiple of NR (b_padded), a last tile of 5..7 columns is a full one with a
   * partial store. */
  for (; n + NR <= n1 || (b_padded && n + 4 < n1); n += NR) {
    accumulate(mr, 2, K, a, b + n, ldb, acc);
    if (n + NR > n1) { const gemm_tile t = tile_of(mr, acc); epi_partial(e, rows, m0, n, n1 - n, &t, c, ldc); return; }
    if (rows != mr) { const gemm_tile t = tile_of(mr, acc); epi_rows(e, rows, m0, n, 2, &t, c, ldc); }
    else for (uint32_t r = 0; r < mr; r++) epi_vec(e, m0 + r, n, 2, acc[r][0], acc[r][1], c + (uint64_t)(m0 + r) * ldc + n);
  }
  if (n == n1) return;
  const uint32_t left = n1 - n;
  if (b_padded || left >= 4) {
    accumulate(mr, 1, K, a, b + n, ldb, acc);
    const gemm_tile t = tile_of(mr, acc);
    if (b_padded) { epi_partial(e, rows, m0, n, left, &t, c, ldc); return; }
    epi_rows(e, rows, m0, n, 1, &t, c, ldc);
    n += 4;
  }
  if (n < n1) cols_tail(rows, m0, n, n1, K, a, b, ldb, c, ldc, e);
}

/* ep_gemm_f32, or ep_gemm_f32_portable where the ISA has its own kernel (src/vec/ep_isa.h); on the wasm SIMD
 * builds the part of it that reads B in place (ep_gemm_f32 below copies some of B first). */
#if EP_ISA_WASM128
EP_NOINLINE static void gemm_in_place(
#else
void EP_GEMM_F32_PORTABLE(
#endif
                 uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                 int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  /* Block N so a K x nb block of B (re-read once per row panel) stays in L2 (128 KB: 2% faster than 512 KB). */
  uint32_t nb = K ? (32768u / K) & ~(uint32_t)(NR - 1) : N;
  if (nb < NR) nb = NR;
  /* An out-of-line activation runs once over each panel's rows while they are in cache (ep_gemm_post_split). */
  ep_gemm_epi e0;
  ep_gemm_post post;
  e = ep_gemm_post_split(e, &e0, &post);
  simple_epi se;
  const simple_epi *simple = simple_of(e, &se);
  for (uint32_t n0 = 0; n0 < N; n0 += nb) {
    const uint32_t n1 = N - n0 < nb ? N : n0 + nb;
    for (uint32_t m0 = 0; m0 < M; m0 += MR) {
      const float *a = a_packed + (uint64_t)(m0 / MR) * K * MR;
      const uint32_t rows = M - m0 >= MR ? MR : M - m0;
      switch (rows + 1) {
        case 7: case 6: panel(6, rows, m0, n0, n1, K, a, b, ldb, b_padded, c, ldc, e, simple); break;
        case 5: case 4: panel(4, rows, m0, n0, n1, K, a, b, ldb, b_padded, c, ldc, e, simple); break;
        default: panel(2, rows, m0, n0, n1, K, a, b, ldb, b_padded, c, ldc, e, simple); break;
      }
      ep_gemm_post_rows(&post, c, ldc, m0, M - m0 < MR ? M : m0 + MR, n0, n1);
    }
  }
}

#if EP_ISA_WASM128
/* B read in place with rows a multiple of 4 KB apart (a 1x1 convolution reads its input plane in place, rows
 * H*W floats apart: 32x32, 64x64, 128x128 planes): every depth of a tile falls in the same L1 set, more depths
 * than the set has ways, so the tiles read B from L2. At short K the copy is cheap: B is copied PB_FLOATS at a
 * time into a dense K x w block on the stack, which every row panel then reads from L1. Speed only: not on the
 * scalar build. */
#define PB_FLOATS 3072u
/* B's columns [0, w) (w a multiple of 4) as a dense K x w block at dst. */
EP_NOINLINE static void pack_block(uint32_t K, uint32_t w, const float *b, uint32_t ldb, float *dst) {
  EP_COMPACT_LOOP
  for (uint32_t k = 0; k < K; k++, b += ldb)
    EP_COMPACT_LOOP
    for (uint32_t j = 0; j < w; j += 4, dst += 4) f32x4_store(dst, f32x4_load(b + j));
}

/* ep_gemm_f32 on the wasm SIMD builds: gemm_in_place, through copied blocks of B where that pays (above). */
EP_COLD void ep_gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                 int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  /* (a row bias, the convolutions', needs no shift to a block's columns; a residual does) */
  if (K - 1u < PB_FLOATS / (2 * NR) && M > MR && !(ldb & 1023u) && e->bias_mode <= EP_BIAS_ROW) {
    const uint32_t pw = (PB_FLOATS / K) & ~(uint32_t)(2 * NR - 1);
    float blk[PB_FLOATS];
    ep_gemm_epi es;
    ep_memcpy(&es, e, sizeof es);
    for (uint32_t n0 = 0; n0 < N; n0 += pw) {   /* whole blocks copied, the rest read in place */
      const float *bb = b + n0;
      uint32_t w = N - n0, lb = ldb;
      if (w >= pw) { pack_block(K, pw, bb, ldb, blk); bb = blk; w = lb = pw; }
      if (e->res) es.res = e->res + n0;
      gemm_in_place(M, w, K, a_packed, bb, lb, b_padded, c + n0, ldc, &es);
    }
    return;
  }
  gemm_in_place(M, N, K, a_packed, b, ldb, b_padded, c, ldc, e);
}
#endif

void ep_gemm_post_rows(const ep_gemm_post *p, float *c, uint32_t ldc, uint32_t m0, uint32_t m1, uint32_t n0, uint32_t n1) {
  if (p->act == EP_ACT_NONE) return;
  for (uint32_t m = m0; m < m1; m++) ep_apply_activation(c + (uint64_t)m * ldc + n0, n1 - n0, p->act, p->w);
}

#if !EP_ISA_SCALAR
/* The groups the vector packer serves: the SIMD128 build's MATMUL and ATTENTION pack 4-row groups (matmul.c's PR),
 * the others 6-row ones (the relaxed tiles' groups but the last, ep_gemm_pack_a's panels). */
#define PACK4_ROWS (EP_GEMM_TWO_PASS && !EP_GEMM_ONE_PASS6 ? 4u : MR)
/* Depths [0, K) (K a multiple of 4) of a PACK4_ROWS-row group of a row-major A (cs = 1): a 6 x 4 block at a time
 * transposed in registers (a 4 x 4 transpose of rows 0-3; rows 4-5 interleaved, each pair stored twice, the stray
 * lanes overwritten by the next depth's rows 0-3) instead of one float per load and store. Speed only. */
EP_NOINLINE static void pack_group4(uint32_t K, const float *a, uint64_t rs, float *dst) {
  const float *p0 = a, *p1 = p0 + rs, *p2 = p1 + rs, *p3 = p2 + rs, *p4 = p3 + rs, *p5 = p4 + rs;
  EP_COMPACT_LOOP
  for (uint32_t k = 0; k < K; k += 4, dst += 4 * MR) {
    const f32x4 r0 = f32x4_load(p0 + k), r1 = f32x4_load(p1 + k), r2 = f32x4_load(p2 + k), r3 = f32x4_load(p3 + k);
    const f32x4 v4 = PACK4_ROWS == MR ? f32x4_load(p4 + k) : f32x4_zero(), v5 = PACK4_ROWS == MR ? f32x4_load(p5 + k) : v4;
    const f32x4 u = f32x4_zip_lo(v4, v5), h = f32x4_zip_hi(v4, v5);   /* rows 4-5 at depths 0, 1 | 2, 3 */
    const f32x4 lo02 = f32x4_zip_lo(r0, r2), lo13 = f32x4_zip_lo(r1, r3), hi02 = f32x4_zip_hi(r0, r2), hi13 = f32x4_zip_hi(r1, r3);
    f32x4_store(dst + 4, u); f32x4_store(dst + 8, u); f32x4_store(dst + 16, h); f32x4_store(dst + 20, h);
    f32x4_store(dst, f32x4_zip_lo(lo02, lo13)); f32x4_store(dst + 6, f32x4_zip_hi(lo02, lo13));
    f32x4_store(dst + 12, f32x4_zip_lo(hi02, hi13)); f32x4_store(dst + 18, f32x4_zip_hi(hi02, hi13));
  }
}
#endif

EP_COLD float *ep_gemm_pack_group(uint32_t K, const float *a, uint64_t rs, uint64_t cs, uint32_t m0, uint32_t mr, float *dst) {
  uint32_t k = 0;
#if !EP_ISA_SCALAR
  if (cs == 1 && mr == PACK4_ROWS) { k = K & ~3u; pack_group4(k, a + (uint64_t)m0 * rs, rs, dst); dst += (uint64_t)k * MR; }
#endif
  for (; k < K; k++, dst += MR)
    for (uint32_t r = 0; r < MR; r++) dst[r] = r < mr ? a[(uint64_t)(m0 + r) * rs + (uint64_t)k * cs] : 0.0f;
  return dst;
}

void ep_gemm_pack_a(uint32_t M, uint32_t K, const float *a, uint64_t rs, uint64_t cs, float *dst) {
  for (uint32_t m0 = 0; m0 < M; m0 += MR) dst = ep_gemm_pack_group(K, a, rs, cs, m0, M - m0 < MR ? M - m0 : MR, dst);
}
