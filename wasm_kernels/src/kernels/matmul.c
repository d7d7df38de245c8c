/* GEMM (ONNX Gemm with fused epilogue) and MATMUL (batched, broadcast batch dims) on the shared
 * micro-kernel (gemm.h).
 *
 * GEMM: inputs A [M,K] (or [K,M] when transA), B [K,N] (or [N,K] when transB), bias? C, residual? [M,N].
 *   params (8 words): transA, transB, alpha (f32), beta (f32), bias_mode (gemm.h EP_BIAS_*: 1 C has M
 *   elements (shape [M,1]), 2 N elements, 3 M*N, 4 one; 0 when C is absent), act, act_p0, act_p1.
 *   Scratch: A packed in MR-row panels (ep_gemm_packed_a_floats(M, K) floats), then, when transB and M > 1,
 *   B transposed to [K,N]. The packager pre-transposes a constant B when M > 1, so transB = 1 there only
 *   for a runtime B; with M = 1, transB runs as N dot products over B's rows (no scratch used).
 *   Without transB, when the scratch has room for round_up(N, 16) * K more floats, B is multiplied from
 *   16-column panels (pack_b below; the packager reserves the room when M >= 16).
 * MATMUL: inputs A [..., M, K], B [..., K, N] (rank >= 2; the packager turns 1-D operands into
 *   [1,K] / [K,1] views), bias?, residual?; output [..., M, N]; batch dims broadcast numpy-style.
 *   params: none, or 4 words for a fused epilogue: bias_mode (EP_BIAS_NONE, or EP_BIAS_COL: bias has N
 *   elements), act, act_p0, act_p1 (as GEMM's); the residual has Y's shape. Each output element is
 *   act(A*B + bias[n] + residual).
 *   Scratch: ep_gemm_packed_a_floats(M, K) floats (A of one batch, packed), then optionally
 *   round_up(N, 16) * K floats: when the scratch has room for them, B is copied into 16-column panels and
 *   multiplied from there (see pack_b; the packager reserves the room when A has M >= 16 rows).
 * With B panels, A is packed in PR-row groups when the scratch has room for them (panels_room): see PR.
 * ATTENTION: inputs Q [..., Lq, D], Kt [..., D, Lk], V [..., Lk, Dv]; output Y [..., Lq, Dv], the same batch dims on
 *   all four. params: scale_kind (0 none, 1 multiply, 2 divide), scale (f32), block_rows R (0: derived from Lq and Lk).
 *   Y = softmax(scale(Q Kt)) V row by row, R query rows at a time (see ep_run_ATTENTION); scratch:
 *   ep_scratch_ATTENTION. */
#include "gemm.h"
#include "ep_vec.h"
#include "ep_parallel.h"
#include "shape/conv_linalg.h"
#include "ep_softmax.h"


#if EP_ISA_WASM_RELAXED   /* src/vec/ep_isa.h */
#define TILE6 1   /* the relaxed build: matmul_tile (below) on 6-row groups and 8-column panels */
#define PR EP_GEMM_MR
#elif EP_ISA_WASM128
#define TILE6 0
#define PR 4u
#else
#define TILE6 0
#define PR EP_GEMM_MR
#endif

/* B in panels of PW columns (panel j: K x PW row-major, columns past N zero). Read in place, a weight
 * matrix's rows are N floats apart, so each depth step of a tile touches another page; from panels the
 * micro-kernel streams B contiguously: minilm_like's weight MatMuls run 1.9x faster, packing included.
 * PW = 16 = the NEON tile's width (two wasm tiles). */
#define PW (2 * EP_GEMM_NR)
static uint64_t packed_b_floats(uint64_t K, uint64_t N) { return (N + PW - 1) / PW * PW * K; }

EP_COLD static void pack_b(uint32_t K, uint32_t N, const float *b, float *dst) {
  for (uint32_t j = 0; j < N; j += PW) {
    const uint32_t w = N - j < PW ? N - j : PW;
    for (uint32_t k = 0; k < K; k++, dst += PW) {
      const float *src = b + (uint64_t)k * N + j;
      if (w == PW) {   /* written out: minsize would keep a loop of 4 */
        f32x4_store(dst, f32x4_load(src)); f32x4_store(dst + 4, f32x4_load(src + 4));
        f32x4_store(dst + 8, f32x4_load(src + 8)); f32x4_store(dst + 12, f32x4_load(src + 12));
      } else
        for (uint32_t t = 0; t < PW; t++) dst[t] = t < w ? src[t] : 0.0f;   /* the last panel's edge only */
    }
  }
}

/* Rows of A per ep_gemm_f32 call against a B panel. The wasm SIMD128 micro-kernel runs a full 6-row panel in
 * two passes, and its second (2 rows: 4 accumulators) waits on FMA latency; a 4-row call keeps 8 independent
 * accumulators in one pass: minilm_like's weight MatMuls run about 1.2x faster (docs/transformer.md). A is
 * then packed as PR-row groups in the micro-kernel's EP_GEMM_MR-row layout (ep_gemm_f32 reads only rows < M
 * of a panel). NEON and the scalar build have registers for the whole panel. */
static uint64_t packed_rows_floats(uint64_t M, uint64_t K) { return (M + PR - 1) / PR * EP_GEMM_MR * K; }

/* A (M x K) in groups of `rows` rows, each laid out as a packed panel. */
static void pack_rows(uint32_t M, uint32_t K, const float *a, uint64_t rs, uint64_t cs, uint32_t rows, float *dst) {
  if (rows == EP_GEMM_MR || TILE6) { ep_gemm_pack_a(M, K, a, rs, cs, dst); return; }   /* (TILE6: PR = 6) */
  for (uint32_t m0 = 0; m0 < M; m0 += rows) dst = ep_gemm_pack_group(K, a, rs, cs, m0, M - m0 < rows ? M - m0 : rows, dst);
}

#if TILE6
/* The relaxed build's B-panel path (MATMUL and GEMM): 6 x 8 tiles, A in 6-row groups, each group against both
 * 8-column halves of a PW-column B panel (row stride PW) while it is in L1. 12 accumulators, 2 B vectors and a
 * broadcast are 15 of the 16 vector registers V8 gives wasm: that fits only with a fused multiply-add (SIMD128's
 * mul + add needs a 16th for the product and spills: that build keeps gemm.c's 4-row calls). The K loop is its
 * own function (dot6x8) so V8 allocates registers for the loop alone: pointers and counter stay in registers.
 * minilm_like, relaxed: 0.93-0.95x time (docs/transformer.md). */
/* A's row groups: 6 rows each, except at the end: 8 or 7 rows left are 4 + 4 or 4 + 3 (dot4x8), 3 or 4 are one
 * group (dot4x8), 5 one (dot6x8 with a zero row). Never more groups than ceil(M / 6), so the 6-row panel scratch
 * (ep_gemm_packed_a_floats) holds them; each group is a K x EP_GEMM_MR panel, rows past the group zero. */
static uint32_t group_rows(uint32_t M, uint32_t m0, uint32_t n6, uint32_t gi) {
  const uint32_t left = M - m0;
  return gi < n6 ? 6u : (left > 6u ? 4u : left);
}
static uint32_t six_groups(uint32_t M) {
  const uint32_t n6 = M / 6u, rem = M % 6u;
  return (rem == 1u || rem == 2u) && n6 ? n6 - 1u : n6;
}

EP_COLD static void pack_groups(uint32_t M, uint32_t K, const float *a, uint64_t rs, uint64_t cs, float *dst) {
  const uint32_t n6 = six_groups(M);
  for (uint32_t m0 = 0, gi = 0, mr; m0 < M; m0 += mr, gi++) {
    mr = group_rows(M, m0, n6, gi);
    dst = ep_gemm_pack_group(K, a, rs, cs, m0, mr, dst);
  }
}

#include "gemm_dots.h"   /* dot6x8: out[2r + v] of rows 0-5; EP_DOT_X8 */

/* The same for rows 0-3 (the last groups). */
EP_NOINLINE static void dot4x8(uint32_t K, const float *a, const float *b, uint32_t ldb, f32x4 *out) {
  EP_DOT_X8(0, 4, K, a, b, ldb, out);
}

/* Rows m0 .. m0+mr of a tile (acc: dot6x8's) at column n of y (C's origin, row stride N) through e: the
 * simple form (MATMUL's: alpha = 1, no bias or a column bias with beta = 1, residual, no activation, relu or
 * clip) in vectors, as gemm.c's epi_vec computes it (same bits); any other epilogue, and the last panel's w < 8
 * columns, element by element (ep_gemm_epi_scalar: the same sums). */
EP_COLD static void tile_store(const ep_gemm_epi *e, uint32_t m0, uint32_t mr, uint32_t n, uint32_t w,
                                   const f32x4 *acc, float *y, uint32_t N) {
  const float *bias = e->bias, *res = e->res;   /* locals: the stores below cannot change them */
  const int32_t act = e->act;
  const uint32_t ld_res = e->ld_res;
  const int col = e->bias_mode == EP_BIAS_COL && e->beta == 1.0f;
  if (w < 8 || e->alpha != 1.0f || !(col || e->bias_mode == EP_BIAS_NONE) || act == EP_ACT_LEAKY_RELU || act > EP_ACT_CLIP) {
    float t[2 * 4];
    EP_COMPACT_LOOP
    for (uint32_t r = 0; r < mr; r++) {
      f32x4_store(t, acc[2 * r]); f32x4_store(t + 4, acc[2 * r + 1]);
      EP_COMPACT_LOOP
      for (uint32_t j = 0; j < w; j++) y[(uint64_t)(m0 + r) * N + n + j] = ep_gemm_epi_scalar(e, t[j], m0 + r, n + j);
    }
    return;
  }
  /* relu as clip(0, inf): pmax/pmin as act4's max(v, 0) (same bits, NaN kept) */
  const f32x4 lo = f32x4_splat(act == EP_ACT_NONE ? -__builtin_inff() : act == EP_ACT_RELU ? 0.0f : e->p0);
  const f32x4 hi = f32x4_splat(act == EP_ACT_CLIP ? e->p1 : __builtin_inff());
  const f32x4 b0 = col ? f32x4_load(bias + n) : f32x4_zero(), b1 = col ? f32x4_load(bias + n + 4) : f32x4_zero();
  EP_COMPACT_LOOP
  for (uint32_t r = 0; r < mr; r++) {
    const uint32_t m = m0 + r;
    f32x4 x0 = acc[2 * r], x1 = acc[2 * r + 1];
    if (col) { x0 = f32x4_add(x0, b0); x1 = f32x4_add(x1, b1); }
    if (res) { x0 = f32x4_add(x0, f32x4_load(res + (uint64_t)m * ld_res + n)); x1 = f32x4_add(x1, f32x4_load(res + (uint64_t)m * ld_res + n + 4)); }
    f32x4_store(y + (uint64_t)m * N + n, f32x4_min(f32x4_max(x0, lo), hi));
    f32x4_store(y + (uint64_t)m * N + n + 4, f32x4_min(f32x4_max(x1, lo), hi));
  }
}
#endif

/* A packed for the path that runs: the tiles' groups (relaxed build, B panels), else PR- or 6-row panels. */
EP_COLD static void pack_a_for(int panels, uint32_t M, uint32_t K, const float *a, uint64_t rs, uint64_t cs, uint32_t rows, float *dst) {
#if TILE6
  if (panels) { pack_groups(M, K, a, rs, cs, dst); return; }
#else
  (void)panels;
#endif
  pack_rows(M, K, a, rs, cs, rows, dst);
}

typedef struct {
  uint32_t M, N, K, rows;
  const float *a, *b;   /* A packed in groups of `rows` rows (pack_rows), packed B */
  float *y;
  const ep_gemm_epi *e;   /* its act is applied by the micro-kernel only when computed inline (see act below) */
  int32_t act, act_w[2];  /* a polynomial activation, applied to the task's columns once computed, or EP_ACT_NONE */
  uint32_t parts;
  int a_outer;            /* A larger than B: each A group (from L1) against all the task's panels (from L2) */
} panels_job;

/* Rows m0 .. m0+mr of Y (A's group at a) at B panel j. */
static void panel_tile(const panels_job *g, const float *a, uint32_t m0, uint32_t mr, uint32_t j) {
  const float *b = g->b + (uint64_t)j * PW * g->K;
#if TILE6
  for (uint32_t h = 0; h < PW && j * PW + h < g->N; h += 8) {   /* both halves of the panel: A group from L1 */
    const uint32_t n0 = j * PW + h, w = g->N - n0 < 8 ? g->N - n0 : 8;
    f32x4 acc[2 * EP_GEMM_MR];
    if (mr > 4) dot6x8(g->K, a, b + h, PW, acc);
    else dot4x8(g->K, a, b + h, PW, acc);
    tile_store(g->e, m0, mr, n0, w, acc, g->y, g->N);
  }
#else
  const uint32_t n0 = j * PW, w = g->N - n0 < PW ? g->N - n0 : PW;
  const ep_gemm_epi e = ep_gemm_epi_shift(g->e, m0, n0);
  ep_gemm_f32(mr, w, g->K, a, b, PW, 1, g->y + (uint64_t)m0 * g->N + n0, g->N, &e);
#endif
}

/* Chunk t of the B panels: each panel against every row group of A (or, a_outer, each group against every panel).
 * A streamed once per panel is what a weight matrix wants (A small, B large); attention's P*V (A = the scores,
 * 1500 x 1500 per head in Whisper, B = V, 64 columns) wants A read once. */
static void panels_task(void *ctx, uint32_t t, uint32_t thread) {
  (void)thread;
  const panels_job *g = (const panels_job *)ctx;
  const uint32_t np = (g->N + PW - 1) / PW, j0 = ep_chunk(np, g->parts, t), j1 = ep_chunk(np, g->parts, t + 1);
#if TILE6
  const uint32_t n6 = six_groups(g->M);
#define GROUP_ROWS(m0, gi) group_rows(g->M, m0, n6, gi)
#else
#define GROUP_ROWS(m0, gi) (g->M - (m0) < g->rows ? g->M - (m0) : g->rows)
#endif
  if (g->a_outer) {
    const float *a = g->a;
    for (uint32_t m0 = 0, gi = 0, mr; m0 < g->M; m0 += mr, gi++, a += (uint64_t)g->K * EP_GEMM_MR) {
      mr = GROUP_ROWS(m0, gi);
      for (uint32_t j = j0; j < j1; j++) panel_tile(g, a, m0, mr, j);
    }
  } else {
    for (uint32_t j = j0; j < j1; j++) {
      const float *a = g->a;
      for (uint32_t m0 = 0, gi = 0, mr; m0 < g->M; m0 += mr, gi++, a += (uint64_t)g->K * EP_GEMM_MR) {
        mr = GROUP_ROWS(m0, gi);
        panel_tile(g, a, m0, mr, j);
      }
    }
  }
#undef GROUP_ROWS
  /* The task's columns, done: the polynomial activation over each row's part in one call (see gemm_panels). */
  const uint32_t lo = j0 * PW, hi = j1 * PW < g->N ? j1 * PW : g->N;
  if (g->act != EP_ACT_NONE && lo < hi)
    for (uint32_t m = 0; m < g->M; m++) ep_apply_activation(g->y + (uint64_t)m * g->N + lo, hi - lo, g->act, g->act_w);
}

/* y = epi(A * B) with A packed by pack_rows and B packed into bp (pack_b): chunks of panels are the threads' tasks. */
static void gemm_panels(uint32_t M, uint32_t N, uint32_t K, uint32_t rows, const float *ap, const float *bp, float *y,
                        const ep_gemm_epi *e) {
  const uint32_t threads = ep_num_threads(), np = (N + PW - 1) / PW;
  /* The micro-kernel would run a polynomial activation (GELU's erf, ...) one vector per call through
   * ep_gemm_act4 (1.23x slower than unfused, on minilm_like); per 16-column row block, its constants are set up
   * every 4 vectors; once per row of each task's columns, after the task's GEMM, it costs least (and no extra
   * kernel node nor pass over the tensor from another kernel). Same function as UNARY, same bits. */
  ep_gemm_epi inner = *e;
  panels_job job = {M, N, K, rows, ap, bp, y, &inner, EP_ACT_NONE, {0, 0}, threads <= 1 ? 1u : (np < 4 * threads ? np : 4 * threads),
                    (uint64_t)M * K > packed_b_floats(K, N)};
  if (e->act >= EP_ACT_COUNT_INLINE) {
    job.act = e->act;
    ep_memcpy(&job.act_w[0], &e->p0, 4);
    ep_memcpy(&job.act_w[1], &e->p1, 4);
    inner.act = EP_ACT_NONE;
  }
  ep_parallel_for(job.parts, EP_MAX_THREADS, panels_task, &job);
}

/* B's panels go after A's in the node's scratch when the packager left room for them (else NULL). A is packed
 * in PR-row groups when there is room for that layout too (plans from before it reserved only EP_GEMM_MR-row
 * panels): *rows says which. */
EP_COLD static float *panels_room(const ep_node *n, uint32_t M, uint32_t N, uint32_t K, uint32_t *rows) {
  const uint64_t b_floats = packed_b_floats(K, N), r_floats = packed_rows_floats(M, K), a_floats = ep_gemm_packed_a_floats(M, K);
  float *s = (float *)(void *)n->scratch;
  *rows = PR;
  if ((r_floats + b_floats) * 4u <= n->scratch_bytes) return s + r_floats;
  *rows = EP_GEMM_MR;
  return (a_floats + b_floats) * 4u <= n->scratch_bytes ? s + a_floats : 0;
}

/* ---------------------------------------------------------------------------------------------- GEMM */

#define GEMM_NPARAMS 8

typedef struct { uint32_t M, N, K; } mnk;

EP_COLD static ep_status gemm_dims(const ep_node *n, mnk *d) {
  const ep_tensor *a = n->in[0], *b = n->in[1], *y = n->out[0];
  const int32_t *p = n->params;
  EP_CHECK(a && b && y, EP_E_OP);
  EP_CHECK(a->dtype == EP_F32 && b->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(a->rank == 2 && b->rank == 2 && y->rank == 2, EP_E_SHAPE);
  EP_CHECK((p[0] == 0 || p[0] == 1) && (p[1] == 0 || p[1] == 1), EP_E_PARAM);
  d->M = (uint32_t)a->dims[p[0] ? 1 : 0];
  d->K = (uint32_t)a->dims[p[0] ? 0 : 1];
  d->N = (uint32_t)b->dims[p[1] ? 0 : 1];
  EP_CHECK((uint32_t)b->dims[p[1] ? 1 : 0] == d->K, EP_E_SHAPE);
  EP_CHECK((uint32_t)y->dims[0] == d->M && (uint32_t)y->dims[1] == d->N, EP_E_SHAPE);
  return EP_OK;
}

EP_COLD ep_status ep_check_GEMM(const ep_node *n) {
  EP_CHECK(n->n_params == GEMM_NPARAMS, EP_E_PARAM);
  mnk d;
  ep_status s = gemm_dims(n, &d);
  if (s) return s;
  const int32_t *p = n->params;
  const ep_tensor *c = n->n_in > 2 ? n->in[2] : 0, *r = n->n_in > 3 ? n->in[3] : 0;
  const int32_t mode = p[4];
  if (!c) {
    EP_CHECK(mode == EP_BIAS_NONE, EP_E_PARAM);
  } else {
    EP_CHECK(c->dtype == EP_F32, EP_E_DTYPE);
    const uint64_t want = mode == EP_BIAS_ROW ? d.M : mode == EP_BIAS_COL ? d.N :
                          mode == EP_BIAS_FULL ? (uint64_t)d.M * d.N : mode == EP_BIAS_SCALAR ? 1u : 0u;
    EP_CHECK(mode >= EP_BIAS_ROW && mode <= EP_BIAS_SCALAR && c->numel == want, EP_E_SHAPE);
  }
  if (r) EP_CHECK(r->dtype == EP_F32 && ep_same_shape(r, n->out[0]), EP_E_SHAPE);
  EP_CHECK(ep_gemm_check_act(p[5]) == EP_OK, EP_E_PARAM);
  const uint64_t need = p[1] && d.M == 1 ? 0u : (ep_gemm_packed_a_floats(d.M, d.K) + (p[1] ? (uint64_t)d.K * d.N : 0u)) * 4u;
  EP_CHECK(need <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

typedef struct {
  uint32_t N, K, parts;
  const float *a, *b;
  float *y;
  const ep_gemm_epi *e;
} gemv_job;

/* Outputs of chunk t of a GEMV with B as [N, K] rows: one dot product over contiguous K per output. The chunk's
 * rows are taken four at a time, one from each quarter of it, so four weight streams far apart are in flight: one
 * wasm thread reads memory faster from four such streams than from one (and slower from adjacent rows, whose
 * accesses interleave within a few pages): docs/transformer.md, session 19. Two accumulators per row. */
static void gemv_task(void *ctx, uint32_t t, uint32_t thread) {
  (void)thread;
  const gemv_job *g = (const gemv_job *)ctx;
  const uint32_t n0 = ep_chunk(g->N, g->parts, t), n1 = ep_chunk(g->N, g->parts, t + 1), K = g->K;
  const uint32_t Q = (n1 - n0) / 4u;
  const uint64_t qs = (uint64_t)Q * K;   /* floats between the four streams */
  const float *a = g->a;
  for (uint32_t i = 0; i < Q; i++) {
    const float *b = g->b + (uint64_t)(n0 + i) * K;
    f32x4 s[8];
    for (uint32_t j = 0; j < 8; j++) s[j] = f32x4_zero();
    uint32_t k = 0;
    for (; k + 8 <= K; k += 8) {
      const f32x4 x0 = f32x4_load(a + k), x1 = f32x4_load(a + k + 4);
      s[0] = f32x4_fma(s[0], x0, f32x4_load(b + k));
      s[1] = f32x4_fma(s[1], x1, f32x4_load(b + k + 4));
      s[2] = f32x4_fma(s[2], x0, f32x4_load(b + qs + k));
      s[3] = f32x4_fma(s[3], x1, f32x4_load(b + qs + k + 4));
      s[4] = f32x4_fma(s[4], x0, f32x4_load(b + 2 * qs + k));
      s[5] = f32x4_fma(s[5], x1, f32x4_load(b + 2 * qs + k + 4));
      s[6] = f32x4_fma(s[6], x0, f32x4_load(b + 3 * qs + k));
      s[7] = f32x4_fma(s[7], x1, f32x4_load(b + 3 * qs + k + 4));
    }
    for (uint32_t j = 0; j < 4; j++) {
      const float *bj = b + j * qs;
      float acc = f32x4_hsum(f32x4_add(s[2 * j], s[2 * j + 1]));
      EP_COMPACT_LOOP for (uint32_t kk = k; kk < K; kk++) acc += a[kk] * bj[kk];
      const uint32_t n = n0 + i + j * Q;
      g->y[n] = ep_gemm_epi_scalar(g->e, acc, 0, n);
    }
  }
  for (uint32_t n = n0 + 4 * Q; n < n1; n++) {   /* the chunk's last 0-3 rows */
    const float *b = g->b + (uint64_t)n * K;
    f32x4 s0 = f32x4_zero();
    uint32_t k = 0;
    for (; k + 4 <= K; k += 4) s0 = f32x4_fma(s0, f32x4_load(a + k), f32x4_load(b + k));
    float acc = f32x4_hsum(s0);
    EP_COMPACT_LOOP for (; k < K; k++) acc += a[k] * b[k];
    g->y[n] = ep_gemm_epi_scalar(g->e, acc, 0, n);
  }
}

EP_COLD ep_status ep_run_GEMM(const ep_node *n) {   /* size: its hot loops are in the callees */
  mnk d = {0};   /* check() already validated the dims; zero-init keeps -Wmaybe-uninitialized quiet */
  gemm_dims(n, &d);
  const int32_t *p = n->params;
  const ep_tensor *c = n->n_in > 2 ? n->in[2] : 0, *r = n->n_in > 3 ? n->in[3] : 0;
  float *ap = (float *)(void *)n->scratch;
  const float *a = ep_f32(n->in[0]), *b = ep_f32(n->in[1]);
  const ep_gemm_epi e = {ep_param_f32(n, 2), ep_param_f32(n, 3), c ? ep_f32(c) : 0, c ? p[4] : EP_BIAS_NONE, d.N,
                         r ? ep_f32(r) : 0, d.N, p[5], ep_param_f32(n, 6), ep_param_f32(n, 7)};
  if (p[1] && d.M == 1) {
    /* A classifier's row times B^T (the packager keeps a constant B as [N, K] for M = 1): A's K floats are
     * contiguous with or without transA, and so is every B row: dot products, nothing to pack. */
    const uint32_t threads = ep_num_threads();
    gemv_job g = {d.N, d.K, threads <= 1 || d.N < 64 ? 1u : 4u * threads, a, b, ep_f32(n->out[0]), &e};
    ep_parallel_for(g.parts, EP_MAX_THREADS, gemv_task, &g);
    return EP_OK;
  }
  uint32_t rows = EP_GEMM_MR;
  float *bp = p[1] ? 0 : panels_room(n, d.M, d.N, d.K, &rows);   /* (with transB the room after A holds B^T) */
  if (p[0]) pack_a_for(bp != 0, d.M, d.K, a, 1, d.M, rows, ap);
  else pack_a_for(bp != 0, d.M, d.K, a, d.K, 1, rows, ap);
  if (p[1]) {  /* runtime B^T: transpose [N,K] -> [K,N] */
    float *bt = ap + ep_gemm_packed_a_floats(d.M, d.K);
    for (uint32_t nn = 0; nn < d.N; nn++)
      for (uint32_t k = 0; k < d.K; k++) bt[(uint64_t)k * d.N + nn] = b[(uint64_t)nn * d.K + k];
    b = bt;
  }
  if (bp) {
    pack_b(d.K, d.N, b, bp);
    gemm_panels(d.M, d.N, d.K, rows, ap, bp, ep_f32(n->out[0]), &e);
  } else {
    ep_gemm_f32_mt(d.M, d.N, d.K, ap, b, d.N, 0, ep_f32(n->out[0]), d.N, &e);
  }
  return EP_OK;
}

/* The packager's scratch (packager/ops/linalg.py): A packed, and B's panels from M >= 16 on, with A then in
 * 4-row groups (the SIMD128 build's layout, the largest). */
static uint64_t a_and_b_floats(uint64_t M, uint64_t K, uint64_t N) {
  const uint64_t b = M >= 16 ? packed_b_floats(K, N) : 0;
  return (b ? (M + 3) / 4 * EP_GEMM_MR * K : ep_gemm_packed_a_floats(M, K)) + b;
}

EP_COLD uint32_t ep_scratch_GEMM(const ep_node *n) {
  mnk d;
  if (n->n_params != GEMM_NPARAMS || gemm_dims(n, &d)) return 0;
  if (n->params[1]) return d.M == 1 ? 0 : ep_scratch_u32((ep_gemm_packed_a_floats(d.M, d.K) + (uint64_t)d.K * d.N) * 4u);
  return ep_scratch_u32(a_and_b_floats(d.M, d.K, d.N) * 4u);
}

/* -------------------------------------------------------------------------------------------- MATMUL */

/* Dims of t right-aligned to rank r (leading 1s). */
static int32_t dim_at(const ep_tensor *t, uint32_t r, uint32_t i) {
  const uint32_t lead = r - t->rank;
  return i < lead ? 1 : t->dims[i - lead];
}

#define MATMUL_NPARAMS 4
/* The epilogue's 4 words + B's layout: 1 = a constant B stored by the packager as PW-column panels, tensor
 * [ceil(N / PW), K, PW] (pack_b's layout, columns past N zero), shared by every batch of A: no copy per run. */
#define MATMUL_NPARAMS_PANELS 5   /* + 1: word 5 = N (the form a run-time shape needs: the panels round it up) */

EP_COLD uint32_t ep_scratch_MATMUL(const ep_node *n) {
  const ep_tensor *a = n->in[0], *b = n->in[1];
  if (!a || !b || a->rank < 2 || b->rank < 2) return 0;
  const uint64_t M = (uint64_t)a->dims[a->rank - 2], K = (uint64_t)a->dims[a->rank - 1];
  if (n->n_params >= MATMUL_NPARAMS_PANELS) return ep_scratch_u32((M + 3) / 4 * EP_GEMM_MR * K * 4u);
  return ep_scratch_u32(a_and_b_floats(M, K, (uint64_t)b->dims[b->rank - 1]) * 4u);
}

EP_COLD ep_status ep_check_MATMUL(const ep_node *n) {
  EP_CHECK(n->n_params == 0 || n->n_params == MATMUL_NPARAMS || n->n_params == MATMUL_NPARAMS_PANELS ||
           n->n_params == MATMUL_NPARAMS_PANELS + 1, EP_E_PARAM);
  const ep_tensor *a = n->in[0], *b = n->in[1], *y = n->out[0];
  const ep_tensor *c = n->n_in > 2 ? n->in[2] : 0, *res = n->n_in > 3 ? n->in[3] : 0;
  EP_CHECK(a && b && y, EP_E_OP);
  if (n->n_params == 0) EP_CHECK(!c && !res, EP_E_PARAM);
  else {
    const int32_t *p = n->params;
    EP_CHECK(p[0] == (c ? EP_BIAS_COL : EP_BIAS_NONE) && ep_gemm_check_act(p[1]) == EP_OK, EP_E_PARAM);
    if (c) EP_CHECK(c->dtype == EP_F32 && y->rank >= 1 && c->numel == (uint64_t)y->dims[y->rank - 1], EP_E_SHAPE);
    if (res) EP_CHECK(res->dtype == EP_F32 && ep_same_shape(res, y), EP_E_SHAPE);
  }
  EP_CHECK(a->dtype == EP_F32 && b->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  if (n->n_params >= MATMUL_NPARAMS_PANELS) {
    EP_CHECK(n->params[4] == 1, EP_E_PARAM);
    EP_CHECK(a->rank >= 2 && y->rank == a->rank && b->rank == 3, EP_E_SHAPE);
    const int32_t M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], N = y->dims[y->rank - 1];
    EP_CHECK(n->n_params == MATMUL_NPARAMS_PANELS || n->params[5] == N, EP_E_PARAM);
    EP_CHECK(y->dims[y->rank - 2] == M && N >= 1, EP_E_SHAPE);
    for (uint32_t i = 0; i + 2 < a->rank; i++) EP_CHECK(y->dims[i] == a->dims[i], EP_E_SHAPE);
    EP_CHECK(b->dims[0] == (N + (int32_t)PW - 1) / (int32_t)PW && b->dims[1] == K && b->dims[2] == (int32_t)PW, EP_E_SHAPE);
    EP_CHECK(ep_gemm_packed_a_floats((uint32_t)M, (uint32_t)K) * 4u <= n->scratch_bytes, EP_E_PARAM);
    return EP_OK;
  }
  /* Y's dims: the broadcast batch dims of A and B, then M, N (A's K = B's K) */
  EP_CHECK(ep_shape_agrees(n, ep_shape_MATMUL) == EP_OK, EP_E_SHAPE);
  const int32_t M = a->dims[a->rank - 2], K = a->dims[a->rank - 1];
  EP_CHECK(ep_gemm_packed_a_floats((uint32_t)M, (uint32_t)K) * 4u <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

ep_status ep_run_MATMUL(const ep_node *n) {
  const ep_tensor *ta = n->in[0], *tb = n->in[1], *ty = n->out[0];
  const uint32_t r = ty->rank;
  const uint32_t M = (uint32_t)ty->dims[r - 2], N = (uint32_t)ty->dims[r - 1], K = (uint32_t)ta->dims[ta->rank - 1];
  const uint64_t a_mat = (uint64_t)M * K, b_mat = (uint64_t)K * N, y_mat = (uint64_t)M * N;
  uint64_t batches = 1;
  for (uint32_t i = 0; i + 2 < r; i++) batches *= (uint64_t)ty->dims[i];
  const float *a = ep_f32(ta), *b = ep_f32(tb);
  float *y = ep_f32(ty), *ap = (float *)(void *)n->scratch;
  const ep_tensor *c = n->n_in > 2 ? n->in[2] : 0, *res = n->n_in > 3 ? n->in[3] : 0;
  const int32_t *p = n->params;
  const int fused = n->n_params >= MATMUL_NPARAMS;
  ep_gemm_epi e = {1.0f, 1.0f, c ? ep_f32(c) : 0, c ? EP_BIAS_COL : EP_BIAS_NONE, N, 0, N,
                   fused ? p[1] : EP_ACT_NONE, fused ? ep_param_f32(n, 2) : 0.0f, fused ? ep_param_f32(n, 3) : 0.0f};
  /* B stored in panels (MATMUL_NPARAMS_PANELS): used in place, shared by every batch (check: A's batches are Y's). */
  const int given = n->n_params >= MATMUL_NPARAMS_PANELS;
  uint32_t rows = EP_GEMM_MR;
  const float *bp = given ? b : panels_room(n, M, N, K, &rows);
  if (given && packed_rows_floats(M, K) * 4u <= n->scratch_bytes) rows = PR;
  uint64_t packed = ~(uint64_t)0, packed_b = given ? 0 : ~(uint64_t)0;
  for (uint64_t bi = 0; bi < batches; bi++) {
    /* Offsets of A and B for batch index bi (broadcast dims contribute nothing). */
    uint64_t rem = bi, ao = 0, bo = 0, as = 1, bs = 1;
    for (uint32_t i = r - 2; i-- > 0;) {
      const uint64_t dy = (uint64_t)ty->dims[i], idx = rem % dy;
      rem /= dy;
      const int32_t da = dim_at(ta, r, i), db = given ? 1 : dim_at(tb, r, i);
      if (da != 1) ao += idx * as;
      if (db != 1) bo += idx * bs;
      as *= (uint64_t)da;
      bs *= (uint64_t)db;
    }
    if (res) e.res = ep_f32(res) + bi * y_mat;
    if (ao != packed) { pack_a_for(bp != 0, M, K, a + ao * a_mat, K, 1, rows, ap); packed = ao; }
    if (!bp) { ep_gemm_f32_mt(M, N, K, ap, b + bo * b_mat, N, 0, y + bi * y_mat, N, &e); continue; }
    if (bo != packed_b) { pack_b(K, N, b + bo * b_mat, (float *)bp); packed_b = bo; }
    gemm_panels(M, N, K, rows, ap, bp, y + bi * y_mat, &e);
  }
  return EP_OK;
}

/* ----------------------------------------------------------------------------------------- ATTENTION */

#define ATT_MAX_ROWS 4096u

/* A block's rows packed for either build's groups (4-row groups as 6-row panels are the largest layout). */
static uint64_t att_rows_floats(uint64_t R, uint64_t K) { return (R + 3) / 4 * EP_GEMM_MR * K; }

/* Query rows per block: word 2, or for 0 (a dynamic plan's) the packager's rule (fuse_attention.block_rows): a
 * multiple of 12 (whole 6- and 4-row tile groups) near 32768 scores, at least 1, at most Lq. */
EP_COLD static uint32_t att_block_rows(int32_t word, uint32_t Lq, uint32_t Lk) {
  if (word) return (uint32_t)word;
  uint32_t r = 32768u / (Lk ? Lk : 1u) / 12u * 12u;
  r = r < 12u ? 12u : r > ATT_MAX_ROWS / 12u * 12u ? ATT_MAX_ROWS / 12u * 12u : r;   /* Lk < 8 would ask for more */
  r = r < Lq ? r : Lq;
  return r ? r : 1u;
}

/* Kt's panels, V's panels, the block's Q packed, the block's scores, the scores packed: for Q [..., Lq, D],
 * Kt [..., D, Lk], V [..., Lk, Dv] and block_rows R (word 2, 0: derived). A malformed node gets 0: check() refuses it. */
EP_COLD uint32_t ep_scratch_ATTENTION(const ep_node *n) {
  const ep_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
  if (n->n_params < 3 || !k) return 0;
  const uint32_t r = q->rank;
  const uint64_t D = (uint64_t)q->dims[r - 1], Lk = (uint64_t)k->dims[r - 1], Dv = (uint64_t)v->dims[r - 1];
  const uint64_t R = att_block_rows(n->params[2], (uint32_t)q->dims[r - 2], (uint32_t)Lk);
  return ep_scratch_u32((packed_b_floats(D, Lk) + packed_b_floats(Lk, Dv) + att_rows_floats(R, D) + R * Lk +
                         att_rows_floats(R, Lk)) * 4u);
}

/* The optional 4th input: an additive float32 mask broadcast to the scores [..., Lq, Lk]: Y's rank, each dim 1 or
 * the scores', the last Lk: rows are read in place, a dim of 1 repeats them. */
static const ep_tensor *att_mask(const ep_node *n) { return n->n_in > 3 ? n->in[3] : NULL; }

EP_COLD ep_status ep_check_ATTENTION(const ep_node *n) {
  const ep_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *y = n->out[0], *m = att_mask(n);
  EP_CHECK(q && k && v && y && (n->n_params == 3 || n->n_params == 6), EP_E_PARAM);
  const int32_t *p = n->params;
  EP_CHECK(p[0] >= 0 && p[0] <= 2 && p[2] >= 0 && (uint32_t)p[2] <= ATT_MAX_ROWS && (n->n_params == 3 || (uint32_t)p[3] <= 1u), EP_E_PARAM);
  EP_CHECK(q->dtype == EP_F32 && k->dtype == EP_F32 && v->dtype == EP_F32 && y->dtype == EP_F32 && (!m || m->dtype == EP_F32), EP_E_DTYPE);
  const uint32_t r = y->rank;
  EP_CHECK(r >= 2 && q->rank == r && k->rank == r && v->rank == r && (!m || m->rank == r), EP_E_SHAPE);
  for (uint32_t i = 0; i + 2 < r; i++)
    EP_CHECK(q->dims[i] == y->dims[i] && k->dims[i] == y->dims[i] && v->dims[i] == y->dims[i], EP_E_SHAPE);
  const int32_t D = q->dims[r - 1], Lk = k->dims[r - 1], Dv = v->dims[r - 1];
  EP_CHECK(q->dims[r - 2] == y->dims[r - 2] && k->dims[r - 2] == D && v->dims[r - 2] == Lk && y->dims[r - 1] == Dv && Lk > 0, EP_E_SHAPE);
  /* the mask's dims against the scores' [..., Lq, Lk]: each 1 or the scores', the last exactly Lk */
  for (uint32_t a = 0; m && a < r; a++)
    EP_CHECK(m->dims[a] == (a + 1 < r ? y->dims[a] : Lk) || (m->dims[a] == 1 && a + 1 < r), EP_E_SHAPE);
  EP_CHECK(ep_scratch_ATTENTION(n) <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

/* The mask's row for score row g of Y's rows (g = batch index * Lq + query row): g split over Y's dims but the
 * last (last fastest), each index modulo the mask's dim there (0 where it is 1) times the mask's stride. Sizes
 * fit 32 bits (plan.c). */
static inline const float *att_mask_row(const ep_tensor *m, const ep_tensor *y, uint32_t g) {
  uint32_t off = 0, st = (uint32_t)m->dims[m->rank - 1];
  for (int32_t a = (int32_t)m->rank - 2; a >= 0; a--) {
    const uint32_t yd = (uint32_t)y->dims[a], md = (uint32_t)m->dims[a];
    off += g % yd % md * st;
    g /= yd;
    st *= md;
  }
  return ep_f32(m) + off;
}

typedef struct {
  float *s;
  const ep_tensor *m, *y;   /* the mask (or NULL) and Y */
  uint32_t g, L;            /* the block's first row among Y's rows; Lk */
  int64_t lim;              /* key j of the block's row b is masked (fill added) when j > lim + b: never when lim >= L */
  int32_t kind;
  float scale, fill;
} att_rows_job;

/* Score rows [b, e) of a block: the graph's scale (its own operation: x * s or x / s), the mask's row added, the
 * causal fill added past the row's diagonal (as the graph adds its triangular constant), then each row's softmax.
 * Rows are independent, so the threads split them as SOFTMAX's do. */
EP_COLD static void att_softmax(void *ctx, uint64_t b, uint64_t e) {
  const att_rows_job *j = (const att_rows_job *)ctx;
  const uint32_t L = j->L;
  const int32_t kind = j->kind;
  const float scale = j->scale;
  for (float *s = j->s + b * L; b < e; b++, s += L) {
    const float *m = j->m ? att_mask_row(j->m, j->y, j->g + (uint32_t)b) : NULL;
    uint32_t i = 0;
#if !EP_ISA_SCALAR   /* speed only: the element loop below does the same */
    const f32x4 vs = f32x4_splat(scale);
    for (; (kind || m) && i + 4 <= L; i += 4) {
      f32x4 x = f32x4_load(s + i);
      if (kind == 1) x = f32x4_mul(x, vs);
      if (kind == 2) x = f32x4_div(x, vs);
      f32x4_store(s + i, m ? f32x4_add(x, f32x4_load(m + i)) : x);
    }
#endif
    EP_COMPACT_LOOP for (; (kind || m) && i < L; i++) {
      float x = s[i];
      if (kind == 1) x *= scale;
      if (kind == 2) x /= scale;
      s[i] = m ? x + m[i] : x;
    }
    EP_COMPACT_LOOP for (int64_t c = j->lim + (int64_t)b + 1 < 0 ? 0 : j->lim + (int64_t)b + 1; c < (int64_t)L; c++) s[c] += j->fill;
    ep_softmax_row(0, s, s, L);
  }
}

/* out[0, N) = x[0, K) times B (K rows of N floats, ldb apart): each row of B scaled by its x and added, 32 columns
 * (8 accumulators) at a time, then 4, then one. The same sums in the same order as the tiles' (over k, per column).
 * One query row (a decoder's token step) against the KV cache needs no packing: B is read where it is. */
static void row_times(const float *x, uint32_t K, const float *B, uint32_t ldb, uint32_t N, float *out) {
  uint32_t j = 0;
#if !EP_ISA_SCALAR   /* speed only (the scalar build's size): the element loop below does the same */
  for (; j + 32 <= N; j += 32) {
    f32x4 s[8];
    for (uint32_t v = 0; v < 8; v++) s[v] = f32x4_zero();
    for (uint32_t k = 0; k < K; k++) {
      const float *b = B + (uint64_t)k * ldb + j;
      const f32x4 xk = f32x4_splat(x[k]);
      for (uint32_t v = 0; v < 8; v++) s[v] = f32x4_fma(s[v], xk, f32x4_load(b + 4 * v));
    }
    for (uint32_t v = 0; v < 8; v++) f32x4_store(out + j + 4 * v, s[v]);
  }
  for (; j + 4 <= N; j += 4) {
    f32x4 s0 = f32x4_zero();
    for (uint32_t k = 0; k < K; k++) s0 = f32x4_fma(s0, f32x4_splat(x[k]), f32x4_load(B + (uint64_t)k * ldb + j));
    f32x4_store(out + j, s0);
  }
#endif
  EP_COMPACT_LOOP for (; j < N; j++) {
    float acc = 0.0f;
    for (uint32_t k = 0; k < K; k++) acc += x[k] * B[(uint64_t)k * ldb + j];
    out[j] = acc;
  }
}

/* Per batch: Kt and V into panels once; per block of R query rows: scores = Q_block Kt into the scratch (R x Lk,
 * cache-resident where the unfused graph writes and rereads Lq x Lk per head), scale, mask + softmax, then
 * block x V straight into Y. Same tiles and sums as MATMUL, same softmax row as SOFTMAX. */
EP_COLD ep_status ep_run_ATTENTION(const ep_node *n) {   /* size: its loops are in the callees */
  const ep_tensor *ty = n->out[0];
  const uint32_t r = ty->rank, Lq = (uint32_t)ty->dims[r - 2], Dv = (uint32_t)ty->dims[r - 1];
  const uint32_t D = (uint32_t)n->in[0]->dims[r - 1], Lk = (uint32_t)n->in[1]->dims[r - 1];
  const uint32_t R = att_block_rows(n->params[2], Lq, Lk);
  uint64_t batches = 1;
  for (uint32_t i = 0; i + 2 < r; i++) batches *= (uint64_t)ty->dims[i];
  if (!Lq || !Dv) return EP_OK;
  float *kp = (float *)(void *)n->scratch, *vp = kp + packed_b_floats(D, Lk), *qa = vp + packed_b_floats(Lk, Dv);
  float *s = qa + att_rows_floats(R, D), *sa = s + (uint64_t)R * Lk;
  /* causal (words 3-5): key j of query row i masked when j > i + Lk - Lq + diag, the diagonal aligned to the
   * last query row as a prompt after a KV cache has it; without, the limit Lk + i masks nothing */
  const int causal = n->n_params > 3 && n->params[3];
  const int64_t lim = causal ? (int64_t)Lk - (int64_t)Lq + n->params[4] : (int64_t)Lk;
  att_rows_job rj = {s, att_mask(n), ty, 0, Lk, 0, n->params[0], ep_param_f32(n, 1), causal ? ep_param_f32(n, 5) : 0.0f};
  const ep_gemm_epi es = {1.0f, 1.0f, 0, EP_BIAS_NONE, Lk, 0, Lk, EP_ACT_NONE, 0.0f, 0.0f};
  const ep_gemm_epi ev = {1.0f, 1.0f, 0, EP_BIAS_NONE, Dv, 0, Dv, EP_ACT_NONE, 0.0f, 0.0f};
  for (uint64_t bi = 0; bi < batches; bi++) {
    const float *q = ep_f32(n->in[0]) + bi * Lq * D;
    float *y = ep_f32(ty) + bi * Lq * Dv;
    if (Lq == 1) {   /* one query row: scores = q Kt, then P V, with Kt and V read in place */
      row_times(q, D, ep_f32(n->in[1]) + bi * D * Lk, Lk, Lk, s);
      rj.g = (uint32_t)bi;
      rj.lim = lim;
      att_softmax(&rj, 0, 1);
      row_times(s, Lk, ep_f32(n->in[2]) + bi * Lk * Dv, Dv, Dv, y);
      continue;
    }
    pack_b(D, Lk, ep_f32(n->in[1]) + bi * D * Lk, kp);
    pack_b(Lk, Dv, ep_f32(n->in[2]) + bi * Lk * Dv, vp);
    for (uint32_t m0 = 0; m0 < Lq; m0 += R) {
      const uint32_t mr = Lq - m0 < R ? Lq - m0 : R;
      pack_a_for(1, mr, D, q + (uint64_t)m0 * D, D, 1, PR, qa);
      gemm_panels(mr, Lk, D, PR, qa, kp, s, &es);
      rj.g = (uint32_t)bi * Lq + m0;
      rj.lim = lim + m0;
      ep_parallel_range(mr, 4096u / Lk + 1u, 1u, att_softmax, &rj);
      pack_a_for(1, mr, Lk, s, Lk, 1, PR, sa);
      gemm_panels(mr, Dv, Lk, PR, sa, vp, y + (uint64_t)m0 * Dv, &ev);
    }
  }
  return EP_OK;
}
