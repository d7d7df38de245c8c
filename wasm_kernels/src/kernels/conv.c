/* CONV and DEPTHWISE_CONV (NCHW; 1-D convs are rank-3 tensors with H = 1).
 *
 * CONV: inputs X [B,Cin,H,W] (or [B,Cin,W]), Wp packed weights, bias? [Cout], residual? (Y's shape).
 *   Per group g: GEMM with M = Cout/G, N = OH*OW, K = Cin/G*KH*KW. Wp holds, for each group, the
 *   [M x K] weight matrix (ONNX [Cout, Cin/G, KH, KW] order) packed in EP_GEMM_MR-row panels (gemm.h).
 *   params (16 or 17 words): group, mr, kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right,
 *   nt, act, act_p0 (f32), act_p1 (f32)[, Cout].
 *   nt = 0: direct mode with a 1x1, stride 1, unpadded window (B is X itself, [Cin/G x H*W]); with any other
 *   window, nt is derived from the shapes (conv_nt: the packager's rule).
 *   nt > 0: im2col panels of nt output columns (multiple of 8) in scratch: needs Kg * nt * 4 bytes.
 * DEPTHWISE_CONV: inputs X [B,C,H,W] (or [B,C,W]), weights [C,1,KH,KW], bias? [C], residual?.
 *   params (13 words): kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right, act, p0, p1.
 *   Scratch: one zero-padded input plane split into sw column phases, so every output vector reads
 *   contiguous input: Hp * sw * PW floats, Hp = H + pt + pb, PW = dw_phase_width(...), per thread: the node
 *   runs on as many threads as the scratch holds planes (at least one).
 * Activation codes/params as gemm.h (EP_ACT_*), applied with bias and residual in the epilogue. */
#include "gemm.h"
#include "ep_vec.h"
#include "ep_parallel.h"
#include "conv_geom.h"
#include "shape/conv_linalg.h"

#define MAXDIM 65535

/* The grouped convolutions' path without im2col (gc_run, below): not in the scalar wasm build (no vectors for it to
 * use); every other build has it. */
#if defined(__wasm__) && !defined(__wasm_simd128__)
#define GC_DIRECT 0
#else
#define GC_DIRECT 1
#endif

EP_COLD ep_status ep_conv_geom_of(const ep_node *n, const int32_t *p, ep_conv_geom *g) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y && n->in[1], EP_E_OP);
  EP_CHECK((x->rank == 3 || x->rank == 4) && y->rank == x->rank, EP_E_SHAPE);
  for (int i = 0; i < 10; i++) EP_CHECK(p[i] >= (i < 6 ? 1 : 0) && p[i] <= MAXDIM, EP_E_PARAM);
  g->kh = (uint32_t)p[0]; g->kw = (uint32_t)p[1]; g->sh = (uint32_t)p[2]; g->sw = (uint32_t)p[3];
  g->dh = (uint32_t)p[4]; g->dw = (uint32_t)p[5]; g->pt = (uint32_t)p[6]; g->pl = (uint32_t)p[7];
  g->pb = (uint32_t)p[8]; g->pr = (uint32_t)p[9];
  const int r4 = x->rank == 4;
  g->B = (uint32_t)x->dims[0]; g->C = (uint32_t)x->dims[1];
  g->H = r4 ? (uint32_t)x->dims[2] : 1u; g->W = (uint32_t)x->dims[x->rank - 1];
  g->Cout = (uint32_t)y->dims[1];
  g->OH = r4 ? (uint32_t)y->dims[2] : 1u; g->OW = (uint32_t)y->dims[y->rank - 1];
  if (!r4) EP_CHECK(g->kh == 1 && g->sh == 1 && g->dh == 1 && g->pt == 0 && g->pb == 0, EP_E_PARAM);
  EP_CHECK((uint32_t)y->dims[0] == g->B, EP_E_SHAPE);
  const uint64_t hp = (uint64_t)g->H + g->pt + g->pb, wp = (uint64_t)g->W + g->pl + g->pr;
  const uint64_t eh = (uint64_t)g->dh * (g->kh - 1) + 1, ew = (uint64_t)g->dw * (g->kw - 1) + 1;
  EP_CHECK(hp >= eh && wp >= ew, EP_E_SHAPE);
  EP_CHECK(g->OH == (hp - eh) / g->sh + 1 && g->OW == (wp - ew) / g->sw + 1, EP_E_SHAPE);
  return EP_OK;
}

/* The window checks plus float32 tensors. */
EP_COLD static ep_status check_geom(const ep_node *n, const int32_t *p, ep_conv_geom *g) {
  EP_CHECK(n->in[0] && n->out[0] && n->in[1], EP_E_OP);
  EP_CHECK(n->in[0]->dtype == EP_F32 && n->out[0]->dtype == EP_F32 && n->in[1]->dtype == EP_F32, EP_E_DTYPE);
  return ep_conv_geom_of(n, p, g);
}

static ep_status check_epilogue(const ep_node *n, const int32_t *act, uint64_t bias_numel) {
  EP_CHECK(ep_gemm_check_act(act[0]) == EP_OK, EP_E_PARAM);
  if (n->n_in > 2 && n->in[2]) EP_CHECK(n->in[2]->dtype == EP_F32 && n->in[2]->numel == bias_numel, EP_E_SHAPE);
  if (n->n_in > 3 && n->in[3]) EP_CHECK(n->in[3]->dtype == EP_F32 && ep_same_shape(n->in[3], n->out[0]), EP_E_SHAPE);
  return EP_OK;
}

/* ---------------------------------------------------------------------------------------------- CONV */

#define CONV_NPARAMS 16   /* + 1: word 16 = Cout (the form a run-time shape needs: the packed weights round it up) */

/* Columns of the im2col panel: word 12, or for 0 with a window that is not direct (1x1, stride 1, no pads), the
 * packager's rule: CONV_PANEL_FLOATS of panel (at least 64 columns), at most the plane rounded up to 8. 0 = direct. */
#define CONV_PANEL_FLOATS (64u * 1024u)
EP_COLD static uint32_t conv_nt(const ep_conv_geom *g, uint64_t kg, int32_t word) {
  if (word != 0 || (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && !(g->pt | g->pl | g->pb | g->pr)))
    return (uint32_t)word;
  uint64_t nt = CONV_PANEL_FLOATS / (kg ? kg : 1) / EP_GEMM_NR * EP_GEMM_NR;
  const uint64_t n8 = ((uint64_t)g->OH * g->OW + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
  if (nt < 8 * EP_GEMM_NR) nt = 8 * EP_GEMM_NR;
  return (uint32_t)(nt < n8 ? nt : n8);
}

/* The geometry, group and K of a CONV node (any form): 0 or the error. */
EP_COLD static ep_status conv_dims(const ep_node *n, ep_conv_geom *g, uint64_t *kg) {
  EP_CHECK(n->n_params == CONV_NPARAMS || n->n_params == CONV_NPARAMS + 1, EP_E_PARAM);
  const int32_t *p = n->params;
  const ep_status s = check_geom(n, p + 2, g);
  if (s) return s;
  EP_CHECK(p[0] >= 1 && g->C % (uint32_t)p[0] == 0 && g->Cout % (uint32_t)p[0] == 0, EP_E_PARAM);
  EP_CHECK(n->n_params == CONV_NPARAMS || p[16] == (int32_t)g->Cout, EP_E_PARAM);
  *kg = (uint64_t)(g->C / (uint32_t)p[0]) * g->kh * g->kw;
  EP_CHECK(*kg <= 0x7FFFFFFFull, EP_E_SHAPE);
  return EP_OK;
}

EP_COLD uint32_t ep_scratch_CONV(const ep_node *n) {
  ep_conv_geom g;
  uint64_t kg;
  if (conv_dims(n, &g, &kg) || n->params[12] < 0) return 0;
  return ep_scratch_u32(kg * conv_nt(&g, kg, n->params[12]) * 4u);
}

EP_COLD ep_status ep_check_CONV(const ep_node *n) {
  ep_conv_geom g;
  uint64_t kg;
  ep_status s = conv_dims(n, &g, &kg);
  if (s) return s;
  const int32_t *p = n->params, groups = p[0];
  EP_CHECK(p[1] == EP_GEMM_MR, EP_E_PARAM);
  const uint64_t mg = g.Cout / (uint32_t)groups;
  EP_CHECK(n->in[1]->numel == (uint64_t)groups * ep_gemm_packed_a_floats(mg, kg), EP_E_SHAPE);
  EP_CHECK(p[12] >= 0 && p[12] % EP_GEMM_NR == 0, EP_E_PARAM);
  const uint32_t nt = conv_nt(&g, kg, p[12]);
  if (nt == 0) {
    EP_CHECK(g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0,
             EP_E_PARAM);
  } else {
    EP_CHECK(kg * (uint64_t)nt * 4u <= n->scratch_bytes, EP_E_PARAM);
  }
  return check_epilogue(n, p + 13, g.Cout);
}

/* Not inlined: the pads of im2col rows and planes, at many call sites, none in a hot loop. */
EP_NOINLINE static void zero_f32(float *d, uint32_t n) {
  uint32_t i = 0;
  EP_COMPACT_LOOP
  for (; i + 4 <= n; i += 4) f32x4_store(d + i, f32x4_zero());
  EP_COMPACT_LOOP   /* the tails: at most 3 (the compiler's vectorized copies of them are dead weight) */
  for (; i < n; i++) d[i] = 0.0f;
}

static void copy_f32(float *d, const float *s, uint32_t n) {
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) { f32x4 a = f32x4_load(s + i), b = f32x4_load(s + i + 4); f32x4_store(d + i, a); f32x4_store(d + i + 4, b); }
  for (; i + 4 <= n; i += 4) f32x4_store(d + i, f32x4_load(s + i));
  EP_COMPACT_LOOP
  for (; i < n; i++) d[i] = s[i];
}

/* One panel row: out[t] = x row value at iw = iw0 + t*sw (zero outside [0, W)), t in [0, run). */
static void gather_row(float *out, const float *src, int64_t iw0, uint32_t sw, uint32_t W, uint32_t run) {
  /* [lo, hi): the outputs whose input column is inside the row (no 64-bit divisions at stride 1: grouped
   * convolutions call this once per output row of every tap of every channel) */
  int64_t lo = iw0 >= 0 ? 0 : sw == 1 ? -iw0 : (-iw0 + sw - 1) / sw;
  int64_t hi = iw0 > (int64_t)W - 1 ? 0 : sw == 1 ? (int64_t)W - iw0 : ((int64_t)W - 1 - iw0) / sw + 1;
  if (lo > run) lo = run;
  if (hi > run) hi = run;
  if (hi < lo) hi = lo;
  if (lo) zero_f32(out, (uint32_t)lo);   /* (a call: pads are the rare case) */
  if (sw == 1) {
    copy_f32(out + lo, src + iw0 + lo, (uint32_t)(hi - lo));
  } else if (sw == 2) {
    /* 4 outputs from 8 contiguous inputs (the 8th must still be inside the row) */
    int64_t t = lo;
    const float *s = src + iw0;
    for (; t + 4 <= hi && iw0 + 2 * t + 8 <= (int64_t)W; t += 4)
      f32x4_store(out + t, f32x4_even(f32x4_load(s + 2 * t), f32x4_load(s + 2 * t + 4)));
    EP_COMPACT_LOOP
    for (; t < hi; t++) out[t] = s[2 * t];
  } else {
    const float *s = src + iw0 + lo * (int64_t)sw;
    EP_COMPACT_LOOP
    for (int64_t t = lo; t < hi; t++, s += sw) out[t] = *s;
  }
  if (hi < run) zero_f32(out + hi, (uint32_t)(run - hi));
}

/* Small planes at column stride 1 (the grouped and the deep layers' 7x7 to 28x28 planes): each channel is first
 * copied into a zero-padded plane on the stack, so that every run of a panel row is a plain copy from it, without
 * the per-run bounds, pads and divisions of gather_row (which dominate runs of 7 or 14 columns). Same values. */
#define IM2COL_PAD_FLOATS 1024u

/* d[0, n) = s[0, n) (runs of 7-28 floats): a vector loop without unrolled copies */
EP_AINLINE void copy_run(float *d, const float *s, uint32_t n) {
  uint32_t t = 0;
  EP_COMPACT_LOOP
  for (; t + 4 <= n; t += 4) f32x4_store(d + t, f32x4_load(s + t));
  EP_COMPACT_LOOP
  for (; t < n; t++) d[t] = s[t];
}

/* im2col (as below) through the padded plane pp (hp x wp floats). */
EP_NOINLINE static void im2col_padded(float *row, uint32_t ldp, const float *x, uint32_t cg, const ep_conv_geom *g,
                                      uint32_t n0, uint32_t cols, uint32_t pad, float *pp, uint32_t hp, uint32_t wp) {
  zero_f32(pp, hp * wp);   /* the pads; the interior is overwritten per channel */
  for (uint32_t c = 0; c < cg; c++) {
    const float *xc = x + (uint64_t)c * g->H * g->W;
    for (uint32_t h = 0; h < g->H; h++) copy_run(pp + (uint64_t)(h + g->pt) * wp + g->pl, xc + (uint64_t)h * g->W, g->W);
    for (uint32_t i = 0; i < g->kh; i++) {
      for (uint32_t j = 0; j < g->kw; j++, row += ldp) {
        uint32_t oh = n0 / g->OW, ow = n0 % g->OW, jj = 0;
        while (jj < cols) {
          const uint32_t run = g->OW - ow < cols - jj ? g->OW - ow : cols - jj;
          copy_run(row + jj, pp + (uint64_t)(oh * g->sh + i * g->dh) * wp + ow + j * g->dw, run);
          jj += run; ow = 0; oh++;
        }
        zero_f32(row + cols, pad);
      }
    }
  }
}

/* im2col for output columns [n0, n0 + cols) of one group into panel rows of stride ldp, then `pad` zero
 * columns (the panel's padded tail, when this call fills the last columns). */
static void im2col(float *panel, uint32_t ldp, const float *x, uint32_t cg, const ep_conv_geom *g, uint32_t n0,
                   uint32_t cols, uint32_t pad) {
  float *row = panel;
  const uint32_t hp = g->H + g->pt + g->pb, wp = g->W + g->pl + g->pr;
  if (g->sw == 1 && (uint64_t)hp * wp <= IM2COL_PAD_FLOATS) {
    float pp[IM2COL_PAD_FLOATS];
    im2col_padded(row, ldp, x, cg, g, n0, cols, pad, pp, hp, wp);
    return;
  }
  for (uint32_t c = 0; c < cg; c++) {
    const float *xc = x + (uint64_t)c * g->H * g->W;
    for (uint32_t i = 0; i < g->kh; i++) {
      for (uint32_t j = 0; j < g->kw; j++, row += ldp) {
        uint32_t oh = n0 / g->OW, ow = n0 % g->OW, jj = 0;
        while (jj < cols) {
          const uint32_t run = g->OW - ow < cols - jj ? g->OW - ow : cols - jj;
          const int64_t ih = (int64_t)oh * g->sh - g->pt + (int64_t)i * g->dh;
          if (ih < 0 || ih >= (int64_t)g->H) zero_f32(row + jj, run);
          else gather_row(row + jj, xc + (uint64_t)ih * g->W, (int64_t)ow * g->sw - g->pl + (int64_t)j * g->dw, g->sw, g->W, run);
          jj += run; ow = 0; oh++;
        }
        zero_f32(row + cols, pad);
      }
    }
  }
}

/* One column tile of one group, for the core's threads. Two splits:
 * - by columns (small weights; one task when single-threaded): task t gathers its own columns and multiplies
 *   them at once, so threads do not wait for each other between the copy and the GEMM, and a 3-channel input
 *   (a stem conv) splits evenly; every task reads all the weights, which is cheap only while they stay in cache;
 * - else by input channels for the copy, then a GEMM split by weight panels (each weight read once). */
typedef struct {
  float *panel, *y;
  const float *xg, *a;
  const ep_conv_geom *g;
  const ep_gemm_epi *e;
  uint32_t ldp, cg, mg, kg, n0, cols, ldc, parts;
} conv_tile_job;

#define CONV_COLSPLIT_A_FLOATS (32u * 1024u)   /* packed weights up to 128 KB: L2 resident, cheap to re-read */

static void colsplit_task(void *ctx, uint32_t t, uint32_t thread) {
  (void)thread;
  const conv_tile_job *j = (const conv_tile_job *)ctx;
  const uint32_t blocks = j->ldp / EP_GEMM_NR;   /* chunks start on a micro-tile boundary */
  const uint32_t c0 = ep_chunk(blocks, j->parts, t) * EP_GEMM_NR;
  uint32_t c1 = ep_chunk(blocks, j->parts, t + 1) * EP_GEMM_NR;
  if (c1 > j->cols) c1 = j->cols;
  if (c1 <= c0) return;
  /* the task's columns as a panel of their own (rows of c1 - c0 padded floats): no cache line is shared with
   * another thread's columns, which would bounce between the cores while one writes and the other reads */
  const uint32_t ld = (c1 - c0 + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
  float *panel = j->panel + (uint64_t)c0 * j->kg;
  im2col(panel, ld, j->xg, j->cg, j->g, j->n0 + c0, c1 - c0, ld - (c1 - c0));
  const ep_gemm_epi e = ep_gemm_epi_shift(j->e, 0, c0);
  ep_gemm_f32(j->mg, c1 - c0, j->kg, j->a, panel, ld, 1, j->y + c0, j->ldc, &e);
}

static void im2col_task(void *ctx, uint32_t t, uint32_t thread) {
  (void)thread;
  const conv_tile_job *j = (const conv_tile_job *)ctx;
  const uint32_t c0 = ep_chunk(j->cg, j->parts, t), c1 = ep_chunk(j->cg, j->parts, t + 1);
  const uint64_t rows = (uint64_t)j->g->kh * j->g->kw;
  im2col(j->panel + c0 * rows * j->ldp, j->ldp, j->xg + (uint64_t)c0 * j->g->H * j->g->W, c1 - c0, j->g, j->n0,
         j->cols, j->ldp - j->cols);
}

static void conv_tile(conv_tile_job *j, uint32_t threads) {
  const uint32_t blocks = j->ldp / EP_GEMM_NR;
  if (threads <= 1 || (ep_gemm_packed_a_floats(j->mg, j->kg) <= CONV_COLSPLIT_A_FLOATS && blocks >= threads)) {
    j->parts = threads <= 1 ? 1u : blocks < 2 * threads ? blocks : 2 * threads;
    ep_parallel_for(j->parts, EP_MAX_THREADS, colsplit_task, j);
    return;
  }
  j->parts = j->cg < 2 * threads ? j->cg : 2 * threads;
  ep_parallel_for(j->parts, EP_MAX_THREADS, im2col_task, j);
  ep_gemm_f32_mt(j->mg, j->cols, j->kg, j->a, j->panel, j->ldp, 1, j->y, j->ldc, j->e);
}

/* ---- Grouped convolutions without im2col (1 < group, any window, stride, dilation and pads). im2col copies
 * Cin/G * KH * KW floats per output column, as many as a group of 8 output channels then multiplies with them. Here
 * each input channel of a group is copied once into a zero-padded plane split into SH row phases x SW column phases
 * (padded pixel (r, u) at phase (r % SH, u % SW), row r / SH, column u / SW of PW = ceil(Wp / SW)), so output pixel
 * (oh, ow) at tap (i, j) reads phase (i*DH % SH, j*DW % SW) at row oh + i*DH / SH, column ow + j*DW / SW: the output
 * plane's pixels, as "virtual" columns v = oh * PW + ow of that phase, are contiguous. A tile is 4 output channels x
 * 8 virtual columns (tap k reads its 8 from planes + off[k]) stored to a virtual output block, whose OW valid
 * columns per row are then copied to Y. The sums are the GEMM's (k ascending, one multiply-add per depth, then bias,
 * residual, activation). The planes and the block of R output rows at a time fit one thread's share of CONV's
 * scratch (the im2col panel it replaces). GC_DIRECT (top of this file) says which builds have it. */
#if GC_DIRECT
#define GC_A_FLOATS 4096u   /* the largest group weights (K x mg rounded to 4) the path takes; off[] holds its K */

static void dw_post(float *y, const float *res, uint64_t n, int32_t act, float p0, float p1);

typedef struct {
  const ep_node *n;
  const ep_conv_geom *g;
  uint32_t G, cg, mg, kg, R, nch, pw, rh, ldv, parts, items;
  uint64_t slice;   /* scratch floats per thread */
  uint32_t off[GC_A_FLOATS / 4];
} gc_job;

/* One row's 8 columns: acc + bias, clamped. */
EP_NOINLINE static void gc_row(float *y, f32x4 c0, f32x4 c1, float bias, f32x4 lo, f32x4 hi) {
  const f32x4 bv = f32x4_splat(bias);
  f32x4_store(y, f32x4_min(f32x4_max(f32x4_add(c0, bv), lo), hi));
  f32x4_store(y + 4, f32x4_min(f32x4_max(f32x4_add(c1, bv), lo), hi));
}

/* rows (<= 4) output channels x 8 virtual columns at y (channel stride ld). The weights are read in place from
 * the GEMM's packed panels (EP_GEMM_MR rows, k-major): rows 0-1 at a01, rows 2-3 at a23, each pair within one panel
 * (MR is even and tiles start on even rows), so no per-group repacking; a pair's row past mg is a panel's zero row. */
_Static_assert(EP_GEMM_MR % 2 == 0, "row pairs of a tile must not straddle two panels");
EP_NOINLINE static void gc_tile(float *y, uint32_t ld, uint32_t rows, const float *a01, const float *a23,
                                const float *b, const uint32_t *off, uint32_t K, const float *bias, f32x4 lo,
                                f32x4 hi) {
  f32x4 c0 = f32x4_zero(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (uint32_t k = 0; k < K; k++, a01 += EP_GEMM_MR, a23 += EP_GEMM_MR) {
    const float *p = b + off[k];
    const f32x4 b0 = f32x4_load(p), b1 = f32x4_load(p + 4);
    f32x4 w = f32x4_load_splat(a01);
    c0 = f32x4_fma(c0, w, b0); c1 = f32x4_fma(c1, w, b1);
    w = f32x4_load_splat(a01 + 1);
    c2 = f32x4_fma(c2, w, b0); c3 = f32x4_fma(c3, w, b1);
    w = f32x4_load_splat(a23);
    c4 = f32x4_fma(c4, w, b0); c5 = f32x4_fma(c5, w, b1);
    w = f32x4_load_splat(a23 + 1);
    c6 = f32x4_fma(c6, w, b0); c7 = f32x4_fma(c7, w, b1);
  }
  gc_row(y, c0, c1, bias ? bias[0] : 0.0f, lo, hi);
  if (rows > 1) gc_row(y + ld, c2, c3, bias ? bias[1] : 0.0f, lo, hi);
  if (rows > 2) gc_row(y + 2 * ld, c4, c5, bias ? bias[2] : 0.0f, lo, hi);
  if (rows > 3) gc_row(y + 3 * ld, c6, c7, bias ? bias[3] : 0.0f, lo, hi);
}

/* Row m (even) of a group's packed weights pa: its panel, its lane. */
static inline const float *gc_rows(const float *pa, uint32_t m, uint32_t K) {
  return pa + (uint64_t)(m / EP_GEMM_MR) * K * EP_GEMM_MR + m % EP_GEMM_MR;
}

/* Input row xr (W floats) into the phases of padded row base (column u = pl + iw to phase u % sw, index u / sw;
 * phases ps floats apart). */
static void gc_fill_row(float *base, const float *xr, const ep_conv_geom *g, uint64_t ps) {
  const uint32_t W = g->W, sw = g->sw;
  uint32_t iw = 0;
  if (sw == 1) { copy_run(base + g->pl, xr, W); return; }
  if (sw == 2) {   /* even columns to one phase, odd to the other */
    float *ev = base + (g->pl & 1u) * ps + g->pl / 2, *od = base + ((g->pl + 1u) & 1u) * ps + (g->pl + 1u) / 2;
    EP_COMPACT_LOOP
    for (; iw + 8 <= W; iw += 8) {
      const f32x4 a = f32x4_load(xr + iw), b = f32x4_load(xr + iw + 4);
      f32x4_store(ev + iw / 2, f32x4_even(a, b));
      f32x4_store(od + iw / 2, f32x4_odd(a, b));
    }
  }
  uint32_t ph = (g->pl + iw) % sw, q = (g->pl + iw) / sw;
  EP_COMPACT_LOOP
  for (; iw < W; iw++) {
    base[ph * ps + q] = xr[iw];
    if (++ph == sw) { ph = 0; q++; }
  }
}

/* Work items (image, group, chunk of R output rows), each with its own planes in the thread's slice. Built for
 * size: per item it only calls (the planes' rows, the tiles, the copies to Y). */
EP_COLD static void gc_task(void *ctx, uint32_t t, uint32_t thread) {
  const gc_job *j = (const gc_job *)ctx;
  const ep_node *n = j->n;
  const ep_conv_geom *g = j->g;
  const int32_t *p = n->params;
  const uint32_t OW = g->OW, K = j->kg, mg = j->mg, pw = j->pw, rh = j->rh;
  const uint64_t hw = (uint64_t)g->H * g->W, ohw = (uint64_t)g->OH * OW, ps = (uint64_t)rh * pw;
  const float *x = ep_f32(n->in[0]), *w = ep_f32(n->in[1]);
  const float *bias = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  const float *res = n->n_in > 3 && n->in[3] ? ep_f32(n->in[3]) : 0;
  float *planes = (float *)(void *)n->scratch + thread * j->slice;
  const uint64_t cs = ps * g->sh * g->sw;   /* one input channel's phases */
  float *yv = planes + cs * j->cg;          /* the virtual output block, mg rows of ldv */
  const int32_t act = p[13];
  const float p0 = ep_param_f32(n, 14), p1 = ep_param_f32(n, 15), inf = __builtin_inff();
  /* none, relu and clip without a residual are a clamp in the tiles; anything else goes through dw_post */
  const int simple = !res && (act == EP_ACT_NONE || act == EP_ACT_RELU || act == EP_ACT_CLIP);
  const f32x4 lo = f32x4_splat(simple && act == EP_ACT_RELU ? 0.0f : simple && act == EP_ACT_CLIP ? p0 : -inf);
  const f32x4 hi = f32x4_splat(simple && act == EP_ACT_CLIP ? p1 : inf);
  /* the pads: written by no item when the whole plane is one chunk; else each chunk's are its own */
  if (j->nch == 1) zero_f32(planes, (uint32_t)(cs * j->cg));
  for (uint32_t it = ep_chunk(j->items, j->parts, t); it < ep_chunk(j->items, j->parts, t + 1); it++) {
    const uint32_t b = it / (j->G * j->nch), gi = it / j->nch % j->G, oh0 = it % j->nch * j->R;
    const uint32_t rows = g->OH - oh0 < j->R ? g->OH - oh0 : j->R, nv = (rows - 1) * pw + OW;
    const float *pa = w + gi * ep_gemm_packed_a_floats(mg, K);
    if (j->nch > 1) zero_f32(planes, (uint32_t)(cs * j->cg));
    const float *xg = x + ((uint64_t)b * g->C + (uint64_t)gi * j->cg) * hw;
    EP_COMPACT_LOOP
    for (uint32_t c = 0; c < j->cg; c++)
      for (uint32_t r = 0; r < rh * g->sh; r++) {   /* padded rows oh0 * sh + r */
        const int64_t ih = (int64_t)oh0 * g->sh + r - g->pt;
        if (ih >= 0 && ih < (int64_t)g->H)
          gc_fill_row(planes + c * cs + (uint64_t)(r % g->sh) * g->sw * ps + (uint64_t)(r / g->sh) * pw,
                      xg + c * hw + (uint64_t)ih * g->W, g, ps);
      }
    EP_COMPACT_LOOP
    for (uint32_t v = 0; v < nv; v += EP_GEMM_NR)
      for (uint32_t m = 0; m < mg; m += 4)
        gc_tile(yv + (uint64_t)m * j->ldv + v, j->ldv, mg - m < 4 ? mg - m : 4, gc_rows(pa, m, K),
                gc_rows(pa, mg - m > 2 ? m + 2 : m, K), planes + v, j->off, K, bias ? bias + (uint64_t)gi * mg + m : 0,
                lo, hi);
    const uint64_t yoff = ((uint64_t)b * g->Cout + (uint64_t)gi * mg) * ohw + (uint64_t)oh0 * OW;
    float *y = ep_f32(n->out[0]) + yoff;
    EP_COMPACT_LOOP
    for (uint32_t m = 0; m < mg; m++) {
      for (uint32_t r = 0; r < rows; r++) copy_run(y + m * ohw + r * OW, yv + (uint64_t)m * j->ldv + r * pw, OW);
      if (!simple) dw_post(y + m * ohw, res ? res + yoff + m * ohw : 0, (uint64_t)rows * OW, act, p0, p1);
    }
  }
}

/* The grouped path for node n (group G > 1), if it applies (its weights fit GC_A_FLOATS and the planes of one output
 * row fit a thread's share of the scratch): 1 when done. */
EP_COLD static int gc_run(const ep_node *n, const ep_conv_geom *g, uint32_t G, uint32_t kg) {
  gc_job j;
  j.cg = g->C / G; j.mg = g->Cout / G; j.kg = kg;
  if ((uint64_t)kg * ((j.mg + 3) / 4 * 4) > GC_A_FLOATS) return 0;
  j.pw = (g->W + g->pl + g->pr + g->sw - 1) / g->sw;
  const uint64_t halo = (uint64_t)(g->kh - 1) * g->dh / g->sh, phases = (uint64_t)j.cg * g->sh * g->sw * j.pw;
  /* per output row: every channel's phase rows and a block row (rounded up to 8 per channel: + 8 mg); plus the
   * halo rows, and the reads of a last tile past the planes (into the block, or this slack) */
  const uint64_t fixed = phases * halo + 8u * j.mg + j.pw + EP_GEMM_NR, per_row = phases + (uint64_t)j.mg * j.pw;
  uint32_t threads = ep_num_threads();
  uint64_t r;
  for (;; threads = 1) {
    j.slice = n->scratch_bytes / 4u / threads;
    r = j.slice > fixed ? (j.slice - fixed) / per_row : 0;
    if (r > 0 || threads == 1) break;
  }
  if (r == 0) return 0;
  j.nch = (uint32_t)((g->OH + r - 1) / r);
  j.R = (g->OH + j.nch - 1) / j.nch;   /* balanced chunks */
  j.rh = j.R + (uint32_t)halo;
  j.ldv = (j.R * j.pw + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
  const uint32_t ps = j.rh * j.pw;
  EP_COMPACT_LOOP
  for (uint32_t c = 0, k = 0; c < j.cg; c++)
    for (uint32_t i = 0; i < g->kh; i++)
      for (uint32_t q = 0; q < g->kw; q++, k++)
        j.off[k] = (c * g->sh * g->sw + i * g->dh % g->sh * g->sw + q * g->dw % g->sw) * ps +
                   i * g->dh / g->sh * j.pw + q * g->dw / g->sw;
  j.n = n; j.g = g; j.G = G;
  j.items = g->B * G * j.nch;
  j.parts = threads <= 1 ? 1u : j.items < 4 * threads ? j.items : 4 * threads;
  ep_parallel_for(j.parts, threads, gc_task, &j);
  return 1;
}
#endif

ep_status ep_run_CONV(const ep_node *n) {
  const int32_t *p = n->params;
  ep_conv_geom g;
  check_geom(n, p + 2, &g);
  const uint32_t G = (uint32_t)p[0];
  const uint32_t cg = g.C / G, mg = g.Cout / G, kg = cg * g.kh * g.kw, nt = conv_nt(&g, kg, p[12]);
  const uint64_t hw = (uint64_t)g.H * g.W, ohw = (uint64_t)g.OH * g.OW;
  const uint64_t wstride = ep_gemm_packed_a_floats(mg, kg);
  const float *x = ep_f32(n->in[0]), *w = ep_f32(n->in[1]);
  const float *bias = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  const float *res = n->n_in > 3 && n->in[3] ? ep_f32(n->in[3]) : 0;
  float *y = ep_f32(n->out[0]);
#if GC_DIRECT
  if (nt && G > 1 && gc_run(n, &g, G, kg)) return EP_OK;
#endif
  float *panel = (float *)(void *)n->scratch;
  for (uint32_t b = 0; b < g.B; b++) {
    for (uint32_t gi = 0; gi < G; gi++) {
      const float *xg = x + ((uint64_t)b * g.C + (uint64_t)gi * cg) * hw;
      const uint64_t yoff = ((uint64_t)b * g.Cout + (uint64_t)gi * mg) * ohw;
      ep_gemm_epi e = {1.0f, 1.0f, bias ? bias + (uint64_t)gi * mg : 0, bias ? EP_BIAS_ROW : EP_BIAS_NONE, 0,
                       res ? res + yoff : 0, (uint32_t)ohw, p[13], ep_param_f32(n, 14), ep_param_f32(n, 15)};
      const float *a = w + gi * wstride;
      if (nt == 0) {
        ep_gemm_f32_mt(mg, (uint32_t)ohw, kg, a, xg, (uint32_t)hw, 0, y + yoff, (uint32_t)ohw, &e);
        continue;
      }
      const uint32_t threads = ep_num_threads();
      for (uint32_t n0 = 0; n0 < ohw; n0 += nt) {
        const uint32_t cols = ohw - n0 < nt ? (uint32_t)(ohw - n0) : nt;
        const uint32_t ldp = (cols + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
        ep_gemm_epi e2 = e;
        if (res) e2.res = e.res + n0;
        conv_tile_job job = {panel, y + yoff + n0, xg, a, &g, &e2, ldp, cg, mg, kg, n0, cols, (uint32_t)ohw, 1};
        conv_tile(&job, threads);
      }
    }
  }
  return EP_OK;
}

/* ------------------------------------------------------------------------------------ DEPTHWISE_CONV */

#define DW_NPARAMS 13
#define DW_VEC 4   /* up to 4 f32x4 accumulators (16 outputs) per step */

/* Width of one column phase of the padded plane: covers every vector read (round4(OW) + max offset). */
EP_COLD static uint64_t dw_phase_width(const ep_conv_geom *g) {
  const uint64_t wp = (uint64_t)g->W + g->pl + g->pr;
  uint64_t pw = (wp + g->sw - 1) / g->sw;
  const uint64_t need = ((uint64_t)g->OW + 3) / 4 * 4 + (uint64_t)(g->kw - 1) * g->dw / g->sw;
  if (need > pw) pw = need;
  return (pw + 3) / 4 * 4;
}

#define DW_LANES_TAPS 49
/* The channels-as-lanes path's plane (4 channels interleaved, below), where its geometry allows that path. */
EP_COLD static uint64_t dw_lanes_plane_floats(const ep_conv_geom *g) {
  if (!((uint64_t)g->kh * g->kw <= DW_LANES_TAPS && g->C >= 4 && g->W >= 4 && g->OW >= 4)) return 0;
  return ((uint64_t)g->H + g->pt + g->pb) * ((uint64_t)g->W + g->pl + g->pr) * 4u;
}

/* One thread slot: the larger of the padded column-phased plane and the lanes plane (so every thread of a threaded
 * run can take the lanes path), whichever path the build takes: the same plans run everywhere. */
EP_COLD static uint64_t dw_slot_floats(const ep_conv_geom *g) {
  const uint64_t phased = ((uint64_t)g->H + g->pt + g->pb) * g->sw * dw_phase_width(g), lanes = dw_lanes_plane_floats(g);
  return phased > lanes ? phased : lanes;
}

/* EP_THREAD_SLOTS slots: the packager's dw_scratch_bytes. */
EP_COLD uint32_t ep_scratch_DEPTHWISE_CONV(const ep_node *n) {
  ep_conv_geom g;
  if (n->n_params != DW_NPARAMS || check_geom(n, n->params, &g)) return 0;
  return ep_scratch_u32(dw_slot_floats(&g) * 4u * EP_THREAD_SLOTS);
}

EP_COLD ep_status ep_check_DEPTHWISE_CONV(const ep_node *n) {
  EP_CHECK(n->n_params == DW_NPARAMS, EP_E_PARAM);
  const int32_t *p = n->params;
  ep_conv_geom g;
  ep_status s = check_geom(n, p, &g);
  if (s) return s;
  EP_CHECK(g.Cout == g.C, EP_E_SHAPE);
  EP_CHECK(n->in[1]->numel == (uint64_t)g.C * g.kh * g.kw, EP_E_SHAPE);
  EP_CHECK(dw_slot_floats(&g) * 4u <= n->scratch_bytes, EP_E_PARAM);   /* at least one slot */
  return check_epilogue(n, p + 10, g.C);
}

/* Channel xc (H rows of W) into the interior of the phased plane: padded column u = pl + iw of row ih goes
 * to row ih + pt, phase u % sw, index u / sw. The pads (and the columns past the row) are never written, so
 * they stay zero from the one zeroing per task: the per-channel cost is the copy alone. */
EP_NOINLINE static void dw_fill(float *plane, const float *xc, const ep_conv_geom *g, uint32_t pw) {
  const uint32_t W = g->W, pl = g->pl, sw = g->sw;
  for (uint32_t ih = 0; ih < g->H; ih++) {
    const float *xr = xc + (uint64_t)ih * W;
    float *dst = plane + (uint64_t)(ih + g->pt) * sw * pw;
    uint32_t iw = 0;
    if (sw == 1) {
      EP_COMPACT_LOOP
      for (; iw + 4 <= W; iw += 4) f32x4_store(dst + pl + iw, f32x4_load(xr + iw));
      if (iw < W && W >= 4) { f32x4_store(dst + pl + W - 4, f32x4_load(xr + W - 4)); continue; }   /* overlapping tail */
    } else if (sw == 2) {   /* even columns to one phase, odd to the other, one pass */
      float *ev = dst + (pl & 1u) * pw + pl / 2, *od = dst + ((pl + 1u) & 1u) * pw + (pl + 1u) / 2;
      /* 8 columns per step; a last step that would pass the row starts earlier, at an even column (same
       * parity), overlapping the previous one; an odd W leaves its last column to the scalar loop */
      EP_COMPACT_LOOP
      while (W >= 8 && iw + 1 < W) {
        if (iw + 8 > W) iw = (W - 8) & ~1u;
        const f32x4 a = f32x4_load(xr + iw), b = f32x4_load(xr + iw + 4);
        f32x4_store(ev + iw / 2, f32x4_even(a, b));
        f32x4_store(od + iw / 2, f32x4_odd(a, b));
        iw += 8;
      }
    }
    uint32_t ph = (pl + iw) % sw, q = (pl + iw) / sw;
    EP_COMPACT_LOOP
    for (; iw < W; iw++) {
      dst[(uint64_t)ph * pw + q] = xr[iw];
      if (++ph == sw) { ph = 0; q++; }
    }
  }
}

/* The epilogue inside the tap loops: a clamp (none, relu and clip are clamps; NaN passes pmax/pmin unchanged, as
 * it passes gemm.c's act4). A residual or another activation goes through dw_post after the channel instead, so the
 * tap loops have no branches: TurboFan otherwise splits a step into blocks and hoists and spills its loads. */
static inline f32x4 dw_clamp(f32x4 r, f32x4 lo, f32x4 hi) { return f32x4_min(f32x4_max(r, lo), hi); }

/* y = act(y + res) over one channel's n outputs (res may be NULL): the epilogues the tap loops leave out. The
 * residual first, in a pass of its own (the same sums), then the activation, its code chosen once per channel. */
EP_NOINLINE static void dw_post(float *y, const float *res, uint64_t n, int32_t act, float p0, float p1) {
  uint64_t i = 0;
  if (res) {
    EP_COMPACT_LOOP   /* (memory-bound: unrolled copies buy nothing) */
    for (; i + 4 <= n; i += 4) f32x4_store(y + i, f32x4_add(f32x4_load(y + i), f32x4_load(res + i)));
    EP_COMPACT_LOOP
    for (; i < n; i++) y[i] += res[i];
  }
  const ep_gemm_epi e = {1.0f, 1.0f, 0, EP_BIAS_NONE, 0, 0, 0, act, p0, p1};
  ep_gemm_epi tiles;
  ep_gemm_post post;
  if (ep_gemm_post_split(&e, &tiles, &post) != &e) {   /* out of line (sigmoid, SiLU...): UNARY's code */
    ep_gemm_post_rows(&post, y, 0, 0, 1, 0, (uint32_t)n);
    return;
  }
  if (act == EP_ACT_NONE) return;
  const f32x4 v0 = f32x4_splat(p0), v1 = f32x4_splat(p1);
  EP_COMPACT_LOOP
  for (i = 0; i + 4 <= n; i += 4) {
    const f32x4 r = f32x4_load(y + i);
    switch (act) {   /* as the GEMM tiles' epilogue (gemm.c act4) */
      case EP_ACT_RELU: f32x4_store(y + i, f32x4_max(r, f32x4_zero())); break;
      case EP_ACT_CLIP: f32x4_store(y + i, f32x4_min(f32x4_max(r, v0), v1)); break;
      case EP_ACT_LEAKY_RELU:
        f32x4_store(y + i, f32x4_add(f32x4_max(r, f32x4_zero()), f32x4_mul(v0, f32x4_min(r, f32x4_zero()))));
        break;
      default: break;
    }
  }
  EP_COMPACT_LOOP
  for (; i < n; i++) y[i] = ep_gemm_epi_scalar(&e, y[i], 0, (uint32_t)i);
}

/* nv (1, 2) vectors at column ow of `rows` (1, 2) output rows of a 3x3 window: r0 is the window's first input row
 * (phased), rs the distance between its rows, o1/o2 the column offsets of kernel columns 1 and 2 (column 0 is at
 * offset 0). rows = 2 (stride 1, dilation 1): the second output row's window starts one input row lower, so
 * kernel row i adds input row i to the first and row i + 1 to the second, with the same three weights.
 * One loop iteration per kernel row: V8 issues a block's loads before its arithmetic, and a whole 3x3 step in one
 * block (18-36 loads) kept every loaded vector live at once and spilled them (2-3x slower); a kernel row's 6-12
 * loads, 3 weights and the accumulators fit the 15 registers. Taps are summed in row-major order. */
EP_AINLINE void dw_vecs3(const uint32_t rows, const uint32_t nv, float *dst, uint32_t OW, const float *r0, uint64_t rs,
                         uint32_t o1, uint32_t o2, const float *wc, f32x4 bias, f32x4 lo, f32x4 hi) {
  f32x4 a[2] = {bias, bias}, b[2] = {bias, bias};
  const float *r = r0, *wk = wc;
  EP_COMPACT_LOOP
  for (uint32_t i = 0; i < 3; i++, r += rs, wk += 3) {
    const f32x4 w0 = f32x4_load_splat(wk), w1 = f32x4_load_splat(wk + 1), w2 = f32x4_load_splat(wk + 2);
    for (uint32_t v = 0; v < nv; v++) {
      a[v] = f32x4_fma(a[v], f32x4_load(r + 4 * v), w0);
      a[v] = f32x4_fma(a[v], f32x4_load(r + o1 + 4 * v), w1);
      a[v] = f32x4_fma(a[v], f32x4_load(r + o2 + 4 * v), w2);
      if (rows == 2) {
        b[v] = f32x4_fma(b[v], f32x4_load(r + rs + 4 * v), w0);
        b[v] = f32x4_fma(b[v], f32x4_load(r + rs + o1 + 4 * v), w1);
        b[v] = f32x4_fma(b[v], f32x4_load(r + rs + o2 + 4 * v), w2);
      }
    }
  }
  for (uint32_t v = 0; v < nv; v++) {
    f32x4_store(dst + 4 * v, dw_clamp(a[v], lo, hi));
    if (rows == 2) f32x4_store(dst + OW + 4 * v, dw_clamp(b[v], lo, hi));
  }
}

/* `rows` output rows (OW >= 4) of a 3x3 window, 8 outputs per step, then either one 8-step or single vectors, the
 * last one ending at OW and overlapping the previous one: the outputs are a pure function of the plane (a residual is added after the
 * channel, by dw_post), so the overlapped lanes are stored twice with one value. */
EP_AINLINE void dw_rows3(const uint32_t rows, float *dst, const float *r0, uint64_t rs, uint32_t o1, uint32_t o2,
                         const float *wc, f32x4 bias, uint32_t OW, f32x4 lo, f32x4 hi) {
  uint32_t ow = 0;
  if (OW >= 8)
    for (; OW - ow > 4; ow += 8) {   /* 5-7 left: a last 8-step ending at OW (14 wide: 2 steps instead of 3) */
      if (ow > OW - 8) ow = OW - 8;
      dw_vecs3(rows, 2, dst + ow, OW, r0 + ow, rs, o1, o2, wc, bias, lo, hi);
    }
  for (; ow < OW; ow += 4) {
    if (ow > OW - 4) ow = OW - 4;
    dw_vecs3(rows, 1, dst + ow, OW, r0 + ow, rs, o1, o2, wc, bias, lo, hi);
  }
}

EP_NOINLINE static void dw_row3(float *dst, const float *r0, uint64_t rs, uint32_t o1, uint32_t o2, const float *wc,
                                f32x4 bias, uint32_t OW, f32x4 lo, f32x4 hi) {
  dw_rows3(1, dst, r0, rs, o1, o2, wc, bias, OW, lo, hi);
}

EP_NOINLINE static void dw_rows3x2(float *dst, const float *r0, uint64_t rs, uint32_t o1, uint32_t o2, const float *wc,
                                   f32x4 bias, uint32_t OW, f32x4 lo, f32x4 hi) {
  dw_rows3(2, dst, r0, rs, o1, o2, wc, bias, OW, lo, hi);
}

/* ---- Channels as lanes (any window up to 7x7 taps, any stride and dilation, any pads): 4 channels per vector. The
 * 4 channels are interleaved into one zero-padded plane (pixel (h, w) is the vector at (h * Wp + w) * 4, no column
 * phases), so every tap of every output pixel is one full vector load: no row tails, no per-row calls. Four output
 * pixels per step (4 independent accumulators, one kernel row per loop iteration: per tap 1 weight + 4 input
 * loads), then a 4x4 transpose stores 4 columns of each channel; a row's last step ends at OW, overlapping the
 * previous one (outputs are a pure function of the plane). Same sums in the same order as the phased path: bias,
 * then the taps in row-major order. Needs C >= 4, W >= 4, OW >= 4 and the interleaved plane (Hp * Wp * 4 floats)
 * in one thread's share of the scratch: the packager sizes each of the EP_THREAD_SLOTS slots for it, and a node
 * runs on as many threads as hold one (a plan from before that change: one thread, or the phased path). 3x3 at
 * stride 1 or 2 (dilation 1) has its own instances with the window as constants; other windows (5x5 and 7x7, dilated, stride 2 or mixed)
 * take one generic instance, whose 4 accumulators replace the phased path's single chain of dependent FMAs per
 * vector. Faster at every plane size measured (docs/depthwise.md), so there is no size threshold. */
#if defined(__wasm__) && !defined(__wasm_simd128__)
/* Not in the scalar wasm build (vector ops as loops, for engines without SIMD): the phased path only, for size. */
#define DW_LANES 0
#else
#define DW_LANES 1
#endif
/* The phased 3x3 row kernels (dw_row3, dw_rows3x2) serve the builds without the lanes path and the threads of a
 * run whose plan predates lanes-sized slots (each thread's scratch too small for the interleaved plane). In the
 * wasm SIMD builds only the C % 4 channels left over by the lanes path would reach them: the generic phased loop
 * serves those (same sums in the same order), for 2 KB less code. */
#if defined(__wasm__) && DW_LANES
#define DW_ROWS3 0
#else
#define DW_ROWS3 1
#endif
EP_AINLINE void dw_t4(f32x4 *a, f32x4 *b, f32x4 *c, f32x4 *d) {   /* 4x4 transpose in place */
  const f32x4 ac0 = f32x4_zip_lo(*a, *c), ac1 = f32x4_zip_hi(*a, *c), bd0 = f32x4_zip_lo(*b, *d), bd1 = f32x4_zip_hi(*b, *d);
  *a = f32x4_zip_lo(ac0, bd0); *b = f32x4_zip_hi(ac0, bd0); *c = f32x4_zip_lo(ac1, bd1); *d = f32x4_zip_hi(ac1, bd1);
}

/* Channels xc, xc + hw, .. (H x W each) into the interior of the interleaved plane; pads stay zero. */
EP_NOINLINE static void dw_lanes_fill(float *plane, const float *xc, uint64_t hw, const ep_conv_geom *g, uint32_t wp) {
  const uint32_t W = g->W;
  for (uint32_t ih = 0; ih < g->H; ih++) {
    const float *xr = xc + (uint64_t)ih * W;
    float *dst = plane + ((uint64_t)(ih + g->pt) * wp + g->pl) * 4;
    EP_COMPACT_LOOP
    for (uint32_t iw = 0; iw < W; iw += 4) {
      if (iw > W - 4) iw = W - 4;
      f32x4 a = f32x4_load(xr + iw), b = f32x4_load(xr + hw + iw), c = f32x4_load(xr + 2 * hw + iw), d = f32x4_load(xr + 3 * hw + iw);
      dw_t4(&a, &b, &c, &d);
      f32x4_store(dst + 4 * iw, a); f32x4_store(dst + 4 * iw + 4, b);
      f32x4_store(dst + 4 * iw + 8, c); f32x4_store(dst + 4 * iw + 12, d);
    }
  }
}

/* The window of the lanes path: kernel size, strides, dilations. */
typedef struct { uint32_t kh, kw, sh, sw, dh, dw; } dw_win;

/* All output rows of 4 channels (yc, yc + ohw, ..); wt: the taps' weight vectors (tap-major). */
EP_AINLINE void dw_lanes_plane(const dw_win k, float *yc, uint64_t ohw, const float *plane, uint32_t wp,
                               const float *wt, f32x4 bias, uint32_t OH, uint32_t OW, f32x4 lo, f32x4 hi) {
  const uint64_t rs = (uint64_t)wp * 4;
  for (uint32_t oh = 0; oh < OH; oh++) {
    float *dst = yc + (uint64_t)oh * OW;
    for (uint32_t ow = 0; ow < OW; ow += 4) {
      if (ow > OW - 4) ow = OW - 4;
      f32x4 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
      const float *r = plane + (uint64_t)oh * k.sh * rs + (uint64_t)ow * k.sw * 4, *wk = wt;
      EP_COMPACT_LOOP
      for (uint32_t i = 0; i < k.kh; i++, r += k.dh * rs) {
        const float *c = r;
        if (k.sw == k.dw) {   /* pixel m + 1 at tap j reads what pixel m reads at tap j + 1: one new load per tap */
          const uint32_t s = 4 * k.sw;
          f32x4 x0 = f32x4_load(c), x1 = f32x4_load(c + s), x2 = f32x4_load(c + 2 * s);
          c += 3 * s;
          for (uint32_t j = 0; j < k.kw; j++, wk += 4, c += s) {
            const f32x4 w = f32x4_load(wk), x3 = f32x4_load(c);
            a0 = f32x4_fma(a0, x0, w);
            a1 = f32x4_fma(a1, x1, w);
            a2 = f32x4_fma(a2, x2, w);
            a3 = f32x4_fma(a3, x3, w);
            x0 = x1; x1 = x2; x2 = x3;
          }
          continue;
        }
        for (uint32_t j = 0; j < k.kw; j++, wk += 4, c += 4 * k.dw) {
          const f32x4 w = f32x4_load(wk);
          a0 = f32x4_fma(a0, f32x4_load(c), w);
          a1 = f32x4_fma(a1, f32x4_load(c + 4 * k.sw), w);
          a2 = f32x4_fma(a2, f32x4_load(c + 8 * k.sw), w);
          a3 = f32x4_fma(a3, f32x4_load(c + 12 * k.sw), w);
        }
      }
      a0 = dw_clamp(a0, lo, hi); a1 = dw_clamp(a1, lo, hi); a2 = dw_clamp(a2, lo, hi); a3 = dw_clamp(a3, lo, hi);
      dw_t4(&a0, &a1, &a2, &a3);
      f32x4_store(dst + ow, a0); f32x4_store(dst + ohw + ow, a1);
      f32x4_store(dst + 2 * ohw + ow, a2); f32x4_store(dst + 3 * ohw + ow, a3);
    }
  }
}

EP_NOINLINE static void dw_lanes_s1(const dw_win *k, float *yc, uint64_t ohw, const float *plane, uint32_t wp,
                                    const float *wt, f32x4 bias, uint32_t OH, uint32_t OW, f32x4 lo, f32x4 hi) {
  (void)k;
  dw_lanes_plane((dw_win){3, 3, 1, 1, 1, 1}, yc, ohw, plane, wp, wt, bias, OH, OW, lo, hi);
}

EP_NOINLINE static void dw_lanes_s2(const dw_win *k, float *yc, uint64_t ohw, const float *plane, uint32_t wp,
                                    const float *wt, f32x4 bias, uint32_t OH, uint32_t OW, f32x4 lo, f32x4 hi) {
  (void)k;
  dw_lanes_plane((dw_win){3, 3, 2, 2, 1, 1}, yc, ohw, plane, wp, wt, bias, OH, OW, lo, hi);
}

/* Hot, but EP_COLD for its minsize: clang would otherwise unswitch the plane's loop nest on the row loop's
 * k.sw == k.dw test (a second copy of the whole nest); the test once per kernel row costs nothing measurable. */
EP_COLD static void dw_lanes_any(const dw_win *k, float *yc, uint64_t ohw, const float *plane, uint32_t wp,
                                     const float *wt, f32x4 bias, uint32_t OH, uint32_t OW, f32x4 lo, f32x4 hi) {
  dw_lanes_plane(*k, yc, ohw, plane, wp, wt, bias, OH, OW, lo, hi);
}

typedef struct {
  const ep_node *n;
  ep_conv_geom g;
  uint32_t pw, parts;
  uint64_t plane_floats;
  uint64_t slot_floats;   /* scratch per thread (>= plane_floats) */
  uint64_t lanes_floats;  /* the interleaved plane of the lanes path; 0 when the node does not take it */
  dw_win win;
  void (*lanes)(const dw_win *, float *, uint64_t, const float *, uint32_t, const float *, f32x4, uint32_t, uint32_t,
                f32x4, f32x4);
} dw_job;

/* Channels (of all images) [bc0, bc1) of the output: chunk t. A row's tail may be stored as whole
 * vectors when they stay inside this chunk's output (the lanes past the row land in a later row of it). */
static void dw_task(void *ctx, uint32_t t, uint32_t thread) {
  const dw_job *d = (const dw_job *)ctx;
  const ep_node *n = d->n;
  const ep_conv_geom g = d->g;
  const int32_t *p = n->params;
  const uint32_t pw = d->pw, kk = g.kh * g.kw;
  const uint64_t hw = (uint64_t)g.H * g.W, ohw = (uint64_t)g.OH * g.OW, rstride = (uint64_t)g.sw * pw;
  const uint64_t nbc = (uint64_t)g.B * g.C;
  const uint64_t bc0 = nbc * t / d->parts, bc1 = nbc * (t + 1) / d->parts;
  const float *x = ep_f32(n->in[0]), *w = ep_f32(n->in[1]);
  const float *bias = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  const float *res = n->n_in > 3 && n->in[3] ? ep_f32(n->in[3]) : 0;
  float *y = ep_f32(n->out[0]);
  float *plane = (float *)(void *)n->scratch + thread * d->slot_floats;
  const int32_t act = p[10];
  const float p0 = ep_param_f32(n, 11), p1 = ep_param_f32(n, 12), inf = __builtin_inff();
  /* None, relu and clip without a residual are a clamp in the tap loops; anything else is left to dw_post. */
  const int simple = !res && (act == EP_ACT_NONE || act == EP_ACT_RELU || act == EP_ACT_CLIP);
  const f32x4 lo = f32x4_splat(simple && act == EP_ACT_RELU ? 0.0f : simple && act == EP_ACT_CLIP ? p0 : -inf);
  const f32x4 hi = f32x4_splat(simple && act == EP_ACT_CLIP ? p1 : inf);
  /* The pads: dw_fill / dw_lanes_fill write only the interior. zeroed: which plane layout is zeroed (0 none,
   * 1 phased, 2 interleaved): the C % 4 channels left over by the lanes path take the phased one. */
  uint32_t zeroed = 0;
  /* Kernel column j reads phase (j*dw) % sw at shift (j*dw) / sw of a phased row. */
#define DW_OFF(j) ((((j) * g.dw) % g.sw) * pw + ((j) * g.dw) / g.sw)
  for (uint64_t bc = bc0; bc < bc1; bc++) {
    const uint32_t c = (uint32_t)(bc % g.C);
    if (DW_LANES && d->lanes_floats && c + 4 <= g.C && bc + 4 <= bc1) {
      const uint32_t wp = g.W + g.pl + g.pr;
      if (zeroed != 2) { zero_f32(plane, (uint32_t)d->lanes_floats); zeroed = 2; }
      float wt[4 * DW_LANES_TAPS];
      for (uint32_t k = 0; k < kk; k++)
        for (uint32_t l = 0; l < 4; l++) wt[4 * k + l] = w[(uint64_t)(c + l) * kk + k];
      const f32x4 bv = bias ? f32x4_load(bias + c) : f32x4_zero();
      float *yc = y + bc * ohw;
      dw_lanes_fill(plane, x + bc * hw, hw, &g, wp);
      d->lanes(&d->win, yc, ohw, plane, wp, wt, bv, g.OH, g.OW, lo, hi);
      if (!simple) dw_post(yc, res ? res + bc * ohw : 0, 4 * ohw, act, p0, p1);   /* the 4 channels are contiguous */
      bc += 3;
      continue;
    }
    if (zeroed != 1) { zero_f32(plane, (uint32_t)d->plane_floats); zeroed = 1; }
    const float *wc = w + (uint64_t)c * kk;
    const f32x4 bv = f32x4_splat(bias ? bias[c] : 0.0f);
    float *yc = y + bc * ohw;
    dw_fill(plane, x + bc * hw, &g, pw);
    const uint32_t ow_last = g.OW >= 4 ? g.OW - 4 : 0;
    if (DW_ROWS3 && g.kh == 3 && g.kw == 3 && g.OW >= 4) {
      const uint32_t o1 = DW_OFF(1u), o2 = DW_OFF(2u);
      uint32_t oh = 0;
      if (g.sh == 1 && g.dh == 1)
        for (; oh + 2 <= g.OH; oh += 2)
          dw_rows3x2(yc + (uint64_t)oh * g.OW, plane + (uint64_t)oh * rstride, rstride, o1, o2, wc, bv, g.OW, lo, hi);
      for (; oh < g.OH; oh++) {
        const float *r0 = plane + (uint64_t)oh * g.sh * rstride;
        dw_row3(yc + (uint64_t)oh * g.OW, r0, g.dh * rstride, o1, o2, wc, bv, g.OW, lo, hi);
      }
    } else {
    /* Any other window (or rows under 4 outputs): one vector of outputs at a time, taps walked in order; a
     * row's last vector overlaps the previous one (see dw_row3), or is stored partially when OW < 4. */
    for (uint32_t oh = 0; oh < g.OH; oh++) {
      const float *rbase = plane + (uint64_t)oh * g.sh * rstride;
      float *dst = yc + (uint64_t)oh * g.OW;
      for (uint32_t ow = 0; ow < g.OW; ow += 4) {
        if (ow > ow_last) ow = ow_last;
        f32x4 a0 = bv;
        for (uint32_t i = 0; i < g.kh; i++) {
          const float *r = rbase + (uint64_t)i * g.dh * rstride + ow;
          for (uint32_t j = 0; j < g.kw; j++) a0 = f32x4_fma(a0, f32x4_load(r + DW_OFF(j)), f32x4_splat(wc[i * g.kw + j]));
        }
        if (g.OW >= 4) {
          f32x4_store(dst + ow, dw_clamp(a0, lo, hi));
        } else {
          float tmp[4];
          f32x4_store(tmp, dw_clamp(a0, lo, hi));
          for (uint32_t t = 0; t < g.OW; t++) dst[t] = tmp[t];
        }
      }
    }
    }
    if (!simple) dw_post(yc, res ? res + bc * ohw : 0, ohw, act, p0, p1);
  }
#undef DW_OFF
}

ep_status ep_run_DEPTHWISE_CONV(const ep_node *n) {
  dw_job d;
  check_geom(n, n->params, &d.g);
  d.n = n;
  d.pw = (uint32_t)dw_phase_width(&d.g);
  d.plane_floats = ((uint64_t)d.g.H + d.g.pt + d.g.pb) * d.g.sw * d.pw;
  /* One slot per thread (check() ensured one), each sized for the path the node takes: the lanes path, faster on
   * fewer threads than the phased one on more, wherever it applies. */
  const ep_conv_geom *g = &d.g;
  d.lanes_floats = DW_LANES ? dw_lanes_plane_floats(g) : 0;   /* check() ensured one slot holds it */
  const uint64_t slot = d.lanes_floats > d.plane_floats ? d.lanes_floats : d.plane_floats;
  const uint64_t slots = n->scratch_bytes / (slot * 4u);
  const uint32_t threads = ep_num_threads() < slots ? ep_num_threads() : slots > 1 ? (uint32_t)slots : 1u;
  const uint64_t nbc = (uint64_t)d.g.B * d.g.C;
  d.parts = threads <= 1 ? 1u : (uint32_t)(nbc < 4u * threads ? nbc : 4u * threads);
  d.slot_floats = n->scratch_bytes / 4u / threads;
  d.win = (dw_win){g->kh, g->kw, g->sh, g->sw, g->dh, g->dw};
  const int k3 = g->kh == 3 && g->kw == 3 && g->dh == 1 && g->dw == 1 && g->sh == g->sw;
  d.lanes = !DW_LANES ? 0 : k3 && g->sw == 1 ? dw_lanes_s1 : k3 && g->sw == 2 ? dw_lanes_s2 : dw_lanes_any;
  ep_parallel_for(d.parts, threads, dw_task, &d);
  return EP_OK;
}
