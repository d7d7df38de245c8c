/* QCONV and QDEPTHWISE_CONV: integer convolution (QLinearConv, ConvInteger and the fused
 * DQ -> Conv [-> activation] -> Q pattern), NCHW, uint8/int8 input, int8 weights.
 *
 * QCONV: inputs X [B,Cin,H,W] (or [B,Cin,W]) u8/i8, Wp int8 packed (qgemm.h A panels, per group
 *   [Cout/G x Cin/G*KH*KW], uint8 weights stored minus 128), bias? int32 [Cout], mult? f32 [Cout],
 *   wzp? int32 [Cout] (weight zero points minus the storage shift; absent = all 0).
 *   Output Y: u8/i8 (requantized), f32 (dequantized) or i32 (raw accumulators, no mult).
 *   params (17 or 18): group, kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right,
 *   nt (0: derived from the shapes, qconv_nt), x_zp, y_zp, act, p0 (f32), p1 (f32)[, Cout].
 *   Per group and block of nt output columns: im2col of (X - x_zp) into int16 pairs in scratch, then
 *   ep_qgemm. Scratch >= Kp * nt * 4 + nt * 4 bytes (+ nt * 4 for column sums when wzp is present).
 * QDEPTHWISE_CONV: group == Cin == Cout. Inputs X, W int8 [C, KH*KW] (same storage rule), bias?, mult?,
 *   wzp?. params (15): kh, kw, sh, sw, dh, dw, pads (4), x_zp, y_zp, act, p0, p1.
 *   Integer: taps in pairs, 8 outputs per step, through i32x4.dot_i16x8 on a zero-padded int16 plane of
 *   X - x_zp (in sw column phases). Scratch >= Hp * sw * PW * 2 bytes,
 *   PW = round8(max(ceil(Wp/sw), round8(OW) + (kw-1)*dw/sw)): the plane in sw column phases, zeroed once
 *   per run; each channel then writes only the input's interior (so the pads stay zero). */
#include "qconv.h"
#include "gemm.h"
#include "shape/conv_linalg.h"


EP_COLD static int zp_ok(uint32_t dtype, int32_t zp) {
  return dtype == EP_U8 ? (zp >= 0 && zp <= 255) : dtype == EP_I8 ? (zp >= -128 && zp <= 127) : zp == 0;
}

EP_COLD ep_status ep_qconv_check_common(const ep_node *n, const int32_t *p, ep_conv_geom *g, const int32_t *zps,
                                        uint32_t wdtype) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y && n->in[1], EP_E_OP);
  EP_CHECK((x->dtype == EP_U8 || x->dtype == EP_I8) && n->in[1]->dtype == wdtype, EP_E_DTYPE);
  const ep_status s = ep_conv_geom_of(n, p, g);
  if (s) return s;
  EP_CHECK(zp_ok(x->dtype, zps[0]) && zp_ok(y->dtype, zps[1]), EP_E_PARAM);
  const ep_tensor *bias = n->n_in > 2 ? n->in[2] : 0, *mult = n->n_in > 3 ? n->in[3] : 0;
  const ep_tensor *wzp = n->n_in > 4 ? n->in[4] : 0;
  if (bias) EP_CHECK(bias->dtype == EP_I32 && bias->numel == g->Cout, EP_E_SHAPE);
  if (mult) EP_CHECK(mult->dtype == EP_F32 && mult->numel == g->Cout, EP_E_SHAPE);
  if (wzp) EP_CHECK(wzp->dtype == EP_I32 && wzp->numel == g->Cout, EP_E_SHAPE);
  return ep_qgemm_check_epi(zps[2], y->dtype, mult != 0);
}

EP_COLD void ep_qconv_fill_epi(const ep_node *n, const int32_t *zact, ep_qgemm_epi *e) {
  const ep_tensor *bias = n->n_in > 2 ? n->in[2] : 0, *mult = n->n_in > 3 ? n->in[3] : 0;
  const ep_tensor *wzp = n->n_in > 4 ? n->in[4] : 0;
  e->bias = bias ? (const int32_t *)(const void *)bias->data : 0; e->bias_col = 0;
  e->mult = mult ? ep_f32(mult) : 0; e->mult_col = 0;
  e->colsum = 0; e->za_row = wzp ? (const int32_t *)(const void *)wzp->data : 0; e->za = 0;
  e->act = zact[2];
  union { int32_t i; float f; } u0, u1;
  u0.i = zact[3]; u1.i = zact[4];
  e->p0 = u0.f; e->p1 = u1.f;
  e->out_dtype = n->out[0]->dtype; e->yzp = zact[1];
}

/* ---------------------------------------------------------------------------------------------- QCONV */

#define QCONV_NPARAMS 17   /* + 1: word 17 = Cout (the form a run-time shape needs: the packed weights round it up) */
#define QCONV_PANEL_BYTES (256u * 1024u)   /* the int16-pair block's budget (packager/ops/quant.py PANEL_BYTES) */

/* Output columns per block: word 11, or for 0 the packager's rule: the block in QCONV_PANEL_BYTES (at least 8
 * columns), at most the plane rounded up to 8. */
EP_COLD static uint32_t qconv_nt(const ep_conv_geom *g, uint64_t kp, int32_t word) {
  if (word) return (uint32_t)word;
  uint64_t nt = QCONV_PANEL_BYTES / ((kp ? kp : 1) * 4u) / EP_QGEMM_NR * EP_QGEMM_NR;
  const uint64_t n8 = ((uint64_t)g->OH * g->OW + EP_QGEMM_NR - 1) / EP_QGEMM_NR * EP_QGEMM_NR;
  if (nt < EP_QGEMM_NR) nt = EP_QGEMM_NR;
  return (uint32_t)(nt < n8 ? nt : n8);
}

/* Geometry, K and the block width of a QCONV node (either form): 0 or the error. */
EP_COLD static ep_status qconv_dims(const ep_node *n, ep_conv_geom *g, uint64_t *kg, uint32_t *nt) {
  EP_CHECK(n->n_params == QCONV_NPARAMS || n->n_params == QCONV_NPARAMS + 1, EP_E_PARAM);
  const int32_t *p = n->params;
  ep_status s = ep_qconv_check_common(n, p + 1, g, p + 12, EP_I8);
  if (s) return s;
  const int32_t groups = p[0];
  EP_CHECK(groups >= 1 && g->C % (uint32_t)groups == 0 && g->Cout % (uint32_t)groups == 0, EP_E_PARAM);
  EP_CHECK(n->n_params == QCONV_NPARAMS || p[17] == (int32_t)g->Cout, EP_E_PARAM);
  *kg = (uint64_t)(g->C / (uint32_t)groups) * g->kh * g->kw;
  EP_CHECK(*kg <= 65536, EP_E_SHAPE);   /* int32 accumulation bound (qgemm.h) */
  EP_CHECK(p[11] >= 0 && p[11] % EP_QGEMM_NR == 0 && p[11] <= (1 << 24), EP_E_PARAM);
  *nt = qconv_nt(g, (*kg + 1) / 2, p[11]);
  return EP_OK;
}

/* The block of X - x_zp as int16 k-pairs, two tap rows, and column sums when there are weight zero points. */
EP_COLD static uint64_t qconv_scratch(const ep_node *n, uint64_t kg, uint32_t nt) {
  return (kg + 1) / 2 * (uint64_t)nt * 4u + (uint64_t)nt * 4u + (n->n_in > 4 && n->in[4] ? (uint64_t)nt * 4u : 0);
}

EP_COLD uint32_t ep_scratch_QCONV(const ep_node *n) {
  ep_conv_geom g;
  uint64_t kg;
  uint32_t nt;
  return qconv_dims(n, &g, &kg, &nt) ? 0 : ep_scratch_u32(qconv_scratch(n, kg, nt));
}

EP_COLD ep_status ep_check_QCONV(const ep_node *n) {
  ep_conv_geom g;
  uint64_t kg;
  uint32_t nt;
  ep_status s = qconv_dims(n, &g, &kg, &nt);
  if (s) return s;
  const uint32_t groups = (uint32_t)n->params[0];
  EP_CHECK(n->in[1]->numel == (uint64_t)groups * ep_qgemm_packed_a_bytes(g.Cout / groups, kg), EP_E_SHAPE);
  EP_CHECK(qconv_scratch(n, kg, nt) <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

/* Tap row (c fixed by xc; kernel position i, jj) over output columns [n0, n0+cols) into t[0..ldb):
 * (x - zp) where the tap is inside the input, 0 in the pads and past cols. */
static void gather_tap(int16_t *t, const uint8_t *xc, int u8, int32_t zp, const ep_conv_geom *g, uint32_t i, uint32_t jj,
                       uint32_t n0, uint32_t cols, uint32_t ldb) {
  uint32_t oh = n0 / g->OW, ow = n0 % g->OW, q = 0;
  const i16x8 zv = i16x8_splat((int16_t)zp);
  while (q < cols) {
    const uint32_t run = g->OW - ow < cols - q ? g->OW - ow : cols - q;
    const int64_t ih = (int64_t)oh * g->sh - g->pt + (int64_t)i * g->dh;
    int16_t *d = t + q;
    uint32_t a = 0, b = 0;   /* valid outputs [a, b) of this run */
    const int64_t iw0 = (int64_t)ow * g->sw - g->pl + (int64_t)jj * g->dw;
    if (ih >= 0 && ih < (int64_t)g->H) {
      const int64_t lo = iw0 >= 0 ? 0 : (-iw0 + g->sw - 1) / g->sw;
      const int64_t hi = iw0 < (int64_t)g->W ? ((int64_t)g->W - 1 - iw0) / g->sw + 1 : 0;
      a = (uint32_t)(lo < run ? lo : run);
      b = (uint32_t)(hi < run ? hi : run);
      if (b < a) b = a;
    }
    uint32_t u = 0;
    EP_COMPACT_LOOP
    for (; u < a; u++) d[u] = 0;
    if (a < b) {
      const uint8_t *src = xc + (uint64_t)ih * g->W + (iw0 + (int64_t)a * g->sw);
      if (g->sw == 1)
        for (; u + 8 <= b; u += 8, src += 8)
          i16x8_store(d + u, i16x8_sub(u8 ? i16x8_load_u8(src) : i16x8_load_i8((const int8_t *)src), zv));
      else if (g->sw == 2)   /* 16 bytes, the even ones kept; u + 8 < b: byte 15 is the in-row tap of u + 8, minus 1 */
        for (; u + 9 <= b; u += 8, src += 16)
          i16x8_store(d + u, i16x8_sub(i16x8_even(u8 ? i16x8_load_u8(src) : i16x8_load_i8((const int8_t *)src),
                                                  u8 ? i16x8_load_u8(src + 8) : i16x8_load_i8((const int8_t *)src + 8)), zv));
      EP_COMPACT_LOOP
      for (; u < b; u++, src += g->sw) d[u] = (int16_t)((u8 ? (int32_t)*src : (int32_t)(int8_t)*src) - zp);
    }
    EP_COMPACT_LOOP
    for (; u < run; u++) d[u] = 0;
    q += run; ow = 0; oh++;
  }
  EP_COMPACT_LOOP
  for (; q < ldb; q++) t[q] = 0;
}

/* One block of QCONV's output columns [n0, n0 + cols) for one image and group, split into column ranges. */
typedef struct {
  const ep_conv_geom *g;
  const uint8_t *xg;
  const int8_t *a;
  const ep_qgemm_epi *e;
  uint8_t *scratch;
  uint64_t hw;
  uint32_t nt, Kp, kg, mg, n0, cols, parts;
  int32_t xzp;
  int u8, direct;
} qconv_block;

/* Range `task` of the block: its columns gathered (or copied, for a 1x1 conv) as int16 pairs into its slice of the
 * panel, the tap rows and the column sums, then the GEMM on them. */
static void qconv_range(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const qconv_block *j = (const qconv_block *)ctx;
  const ep_conv_geom *g = j->g;
  const uint32_t c0 = ep_qgemm_col(j->cols, j->parts, task), cols = ep_qgemm_col(j->cols, j->parts, task + 1) - c0;
  if (!cols) return;
  const uint32_t ldb = ep_qgemm_round_nr(cols), Kp = j->Kp, kg = j->kg, n0 = j->n0 + c0;
  int16_t *panel = (int16_t *)(void *)(j->scratch + (uint64_t)Kp * c0 * 4u);
  int16_t *tmp = (int16_t *)(void *)(j->scratch + (uint64_t)Kp * j->nt * 4u + c0 * 4u);   /* two tap rows */
  int32_t *colsum = (int32_t *)(void *)(j->scratch + (uint64_t)Kp * j->nt * 4u + (uint64_t)j->nt * 4u + c0 * 4u);
  if (j->direct) {
    ep_qgemm_pack_b(panel, ldb, kg, cols, j->xg + n0, j->hw, j->u8, j->xzp, 0, 0);
  } else {
    for (uint32_t pp = 0; pp < Kp; pp++) {
      for (uint32_t h = 0; h < 2; h++) {
        const uint32_t k = 2 * pp + h;
        if (k >= kg) { for (uint32_t q = 0; q < ldb; q++) tmp[ldb + q] = 0; continue; }
        const uint32_t c = k / (g->kh * g->kw), i = k / g->kw % g->kh, jj = k % g->kw;
        gather_tap(tmp + h * ldb, j->xg + (uint64_t)c * j->hw, j->u8, j->xzp, g, i, jj, n0, cols, ldb);
      }
      int16_t *dst = panel + (uint64_t)pp * ldb * 2;
      for (uint32_t q = 0; q < ldb; q += 8) {
        const i16x8 v0 = i16x8_load(tmp + q), v1 = i16x8_load(tmp + ldb + q);
        i16x8_store(dst + 2 * q, i16x8_zip_lo(v0, v1));
        i16x8_store(dst + 2 * q + 8, i16x8_zip_hi(v0, v1));
      }
    }
  }
  ep_qgemm_epi e = *j->e;
  if (e.za_row) { ep_qgemm_colsum(panel, ldb, kg, ldb, colsum); e.colsum = colsum; }
  ep_qgemm(j->mg, cols, kg, j->a, panel, ldb, n0, &e);
}

ep_status ep_run_QCONV(const ep_node *n) {
  const int32_t *p = n->params;
  ep_conv_geom g;
  (void)ep_conv_geom_of(n, p + 1, &g);
  const uint32_t G = (uint32_t)p[0];
  const uint32_t cg = g.C / G, mg = g.Cout / G, kg = cg * g.kh * g.kw, Kp = (kg + 1) / 2, nt = qconv_nt(&g, Kp, p[11]);
  const uint64_t hw = (uint64_t)g.H * g.W, ohw = (uint64_t)g.OH * g.OW;
  const uint64_t wstride = ep_qgemm_packed_a_bytes(mg, kg);
  const uint8_t *x = n->in[0]->data;
  const int8_t *w = (const int8_t *)n->in[1]->data;
  const uint32_t esz = ep_dtype_size(n->out[0]->dtype);
  ep_qgemm_epi e;
  ep_qconv_fill_epi(n, p + 12, &e);
  qconv_block j = {&g, 0, 0, 0, n->scratch, hw, nt, Kp, kg, mg, 0, 0, 1, p[12], n->in[0]->dtype == EP_U8,
                   g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && !(g.pt | g.pl | g.pb | g.pr)};
  for (uint32_t b = 0; b < g.B; b++) {
    for (uint32_t gi = 0; gi < G; gi++) {
      j.xg = x + ((uint64_t)b * g.C + (uint64_t)gi * cg) * hw;
      ep_qgemm_epi eg = e;
      eg.y = n->out[0]->data + ((uint64_t)b * g.Cout + (uint64_t)gi * mg) * ohw * esz;
      eg.rs = ohw; eg.cs = 1;
      if (eg.bias) eg.bias += (uint64_t)gi * mg;
      if (eg.mult) eg.mult += (uint64_t)gi * mg;
      if (eg.za_row) eg.za_row += (uint64_t)gi * mg;
      j.a = w + gi * wstride;
      j.e = &eg;
      for (uint32_t n0 = 0; n0 < ohw; n0 += nt) {
        j.n0 = n0;
        j.cols = ohw - n0 < nt ? (uint32_t)(ohw - n0) : nt;
        j.parts = ep_qgemm_col_parts(mg, j.cols, kg);
        ep_parallel_for(j.parts, EP_MAX_THREADS, qconv_range, &j);
      }
    }
  }
  return EP_OK;
}

/* ------------------------------------------------------------------------------------ QDEPTHWISE_CONV */

#define QDW_NPARAMS 15

EP_COLD static uint64_t qdw_phase_width(const ep_conv_geom *g) {
  const uint64_t wp = (uint64_t)g->W + g->pl + g->pr;
  uint64_t pw = (wp + g->sw - 1) / g->sw;
  const uint64_t need = ((uint64_t)g->OW + 7) / 8 * 8 + (uint64_t)(g->kw - 1) * g->dw / g->sw;
  if (need > pw) pw = need;
  return (pw + 7) / 8 * 8;
}

EP_COLD uint32_t ep_scratch_QDEPTHWISE_CONV(const ep_node *n) {
  ep_conv_geom g;
  if (n->n_params != QDW_NPARAMS || ep_conv_geom_of(n, n->params, &g)) return 0;
  /* one padded plane per thread slot (as DEPTHWISE_CONV: docs/plan-format.md "Threads") */
  return ep_scratch_u32(((uint64_t)g.H + g.pt + g.pb) * g.sw * qdw_phase_width(&g) * 2u * EP_THREAD_SLOTS);
}

EP_COLD ep_status ep_check_QDEPTHWISE_CONV(const ep_node *n) {
  EP_CHECK(n->n_params == QDW_NPARAMS, EP_E_PARAM);
  const int32_t *p = n->params;
  ep_conv_geom g;
  ep_status s = ep_qconv_check_common(n, p, &g, p + 10, EP_I8);
  if (s) return s;
  EP_CHECK(g.Cout == g.C, EP_E_SHAPE);
  EP_CHECK(n->in[1]->numel == (uint64_t)g.C * g.kh * g.kw, EP_E_SHAPE);
  EP_CHECK((uint64_t)g.kh * g.kw <= 256, EP_E_PARAM);   /* the tap pairs' weight table */
  const uint64_t hp = (uint64_t)g.H + g.pt + g.pb;
  EP_CHECK(hp * g.sw * qdw_phase_width(&g) * 2u <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

EP_COLD void ep_qconv_pad_row(int16_t *d, const uint8_t *xr, int u8, int32_t xzp, const ep_conv_geom *g, uint32_t len) {
  const uint32_t a = g->pl < len ? g->pl : len, b = g->pl + g->W < len ? g->pl + g->W : len;
  uint32_t u = 0;
  for (; u < a; u++) d[u] = 0;
  const uint8_t *src = xr;
  const i16x8 z = i16x8_splat((int16_t)xzp);
  for (; u + 8 <= b; u += 8, src += 8)
    i16x8_store(d + u, i16x8_sub(u8 ? i16x8_load_u8(src) : i16x8_load_i8((const int8_t *)src), z));
  for (; u < b; u++, src++) d[u] = (int16_t)((u8 ? (int32_t)*src : (int32_t)(int8_t)*src) - xzp);
  for (; u < len; u++) d[u] = 0;
}

/* Lane masks: qdw_keep + 8 - n keeps lanes [0, n) of an i16x8 and zeroes the others. */
static const int16_t qdw_keep[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* Channel xc (H rows of W), minus the zero point, into the interior of the phased plane: padded column
 * u = pl + iw of row ih goes to row ih + pt, phase u % sw, index u / sw. The pads are never written (zero from
 * the one zeroing per run), except by a row's masked last vector, which writes zeros there. `avail` bytes are
 * readable from xc; a last vector is read whole (its lanes past the row masked) when they are readable and
 * its store stays inside the phase. Bytes load sign-extended; uint8 input keeps their low 8 bits (one code
 * path for both types). */
EP_NOINLINE static void qdw_fill(int16_t *plane, const uint8_t *xc, uint64_t avail, int u8, int32_t xzp,
                                 const ep_conv_geom *g, uint32_t pw) {
  const uint32_t W = g->W, pl = g->pl, sw = g->sw;
  const int32_t bm = u8 ? 0xFF : -1;
  const i16x8 z = i16x8_splat((int16_t)xzp), m = i16x8_splat((int16_t)bm);
#define QDW_LD(o) i16x8_sub(i16x8_and(i16x8_load_i8((const int8_t *)xr + (o)), m), z)
#define QDW_MASK(v, n) i16x8_and(v, i16x8_load(qdw_keep + 8 - (n)))
  for (uint32_t ih = 0; ih < g->H; ih++, avail -= W) {
    const uint8_t *xr = xc + (uint64_t)ih * W;
    int16_t *dst = plane + (uint64_t)(ih + g->pt) * sw * pw;
    uint32_t iw = 0;
    if (sw == 1) {
      EP_COMPACT_LOOP
      for (; iw + 8 <= W; iw += 8) i16x8_store(dst + pl + iw, QDW_LD(iw));
      if (iw == W) continue;
      if (W >= 8) { i16x8_store(dst + pl + W - 8, QDW_LD(W - 8)); continue; }   /* overlapping tail */
      if (avail >= 8 && pl + 8 <= pw) { i16x8_store(dst + pl, QDW_MASK(QDW_LD(0), W)); continue; }
    }
    uint32_t ph = (pl + iw) % sw, q = (pl + iw) / sw;
    EP_COMPACT_LOOP
    for (; iw < W; iw++) {
      dst[(uint64_t)ph * pw + q] = (int16_t)(((int32_t)(int8_t)xr[iw] & bm) - xzp);
      if (++ph == sw) { ph = 0; q++; }
    }
  }
#undef QDW_MASK
#undef QDW_LD
}

/* wv[t] = the tap pair (2t, 2t+1) of one channel's weights minus zp, repeated in the 4 lanes' pairs
 * (clamped: only a hostile plan's zero point leaves [-255, 255]); an odd last tap pairs with 0. */
EP_COLD static void dw_weight_pairs(i16x8 *wv, const int8_t *w, uint32_t kk, int32_t wz) {
  wz = wz < -512 ? -512 : wz > 512 ? 512 : wz;
  for (uint32_t t = 0; t < (kk + 1) / 2; t++)
    wv[t] = i16x8_zip_lo(i16x8_splat((int16_t)(w[2 * t] - wz)), i16x8_splat((int16_t)(2 * t + 1 < kk ? w[2 * t + 1] - wz : 0)));
}

/* 8 outputs at r: taps in pairs (t, t+1), the two rows' vectors interleaved (zip) so that one
 * i32x4.dot_i16x8 applies both taps' weights to 4 outputs; an odd last tap pairs with itself at weight 0. */
EP_AINLINE void dw_taps(const int16_t *r, const uint64_t *off, const i16x8 *wv, const uint32_t kk, i32x4 *a0, i32x4 *a1) {
  i32x4 s0 = *a0, s1 = *a1;
  for (uint32_t t = 0; t < (kk + 1) / 2; t++) {
    const i16x8 v0 = i16x8_load(r + off[2 * t]);
    const i16x8 v1 = 2 * t + 1 < kk ? i16x8_load(r + off[2 * t + 1]) : v0;
    s0 = i32x4_dot_i16x8_add(s0, i16x8_zip_lo(v0, v1), wv[t]);
    s1 = i32x4_dot_i16x8_add(s1, i16x8_zip_hi(v0, v1), wv[t]);
  }
  *a0 = s0; *a1 = s1;
}

/* The 3x3 channel loops below are left out of the emscripten scalar fallback (EP_FORCE_SCALAR) for its size:
 * its general loop computes the same bytes. */
#if !defined(EP_FORCE_SCALAR)
/* 3x3, stride 1 and dilation 1 along the row, the fast epilogue, OW >= 8 (most of MobileNet's depthwise time):
 * no interleaving. A plain load of 8 int16 at column c holds the pairs (x[c + 2k], x[c + 2k + 1]), k = 0..3: two
 * adjacent taps of output c + 2k (taps j, j + 1) and of output c + 2k + 1 (taps j - 1, j). So per kernel row the
 * loads at ow and ow + 2, dotted with (w0, w1) and (w2, 0), give the even outputs ow, ow + 2, ow + 4, ow + 6 (e);
 * dotted with (0, w0) and (w1, w2), the odd ones (o). Per 8 outputs: 6 loads, 12 dots, 2 zips (e, o back in
 * order) instead of 9 loads, 10 dots, 10 zips, and a loop with nothing else in it: the same int32 sums.
 * wv[2 * (i * ne + m) + 0..1] = kernel row i's (w[2m], w[2m + 1]) and (w[2m - 1], w[2m]), m < ne = kw / 2 + 1
 * (taps outside [0, kw) are 0): for 3x3, row i's (w0, w1), (0, w0), (w2, 0), (w1, w2). */
EP_COLD static void dw_weights_eo(i16x8 *wv, const int8_t *w, uint32_t kh, uint32_t kw, int32_t wz) {
  wz = wz < -512 ? -512 : wz > 512 ? 512 : wz;
#define QDW_TAP(k) i16x8_splat((int16_t)((uint32_t)(k) < kw ? w[k] - wz : 0))
  for (uint32_t i = 0; i < kh; i++, w += kw)
    for (uint32_t j = 0; j <= kw; j += 2, wv += 2) {
      wv[0] = i16x8_zip_lo(QDW_TAP(j), QDW_TAP(j + 1));
      wv[1] = i16x8_zip_lo(QDW_TAP(j - 1), QDW_TAP(j));
    }
#undef QDW_TAP
}

/* The channel loops' one signature (qdw_task calls them through a pointer): kh and s2 serve dw5_channel. */
typedef void dw_channel_fn(const int16_t *p, uint64_t rstep, uint64_t drs, const i16x8 *wv, uint32_t kh, int s2,
                           i32x4 bias, f32x4 mult, f32x4 lo, f32x4 hi, i32x4 zb, int u8, uint8_t *y, uint32_t OH,
                           uint32_t OW);

EP_NOINLINE static void dw3_channel_eo(const int16_t *p, uint64_t rstep, uint64_t drs, const i16x8 *wv, uint32_t kh,
                                       int s2, i32x4 bias, f32x4 mult, f32x4 lo, f32x4 hi, i32x4 zb, int u8, uint8_t *y,
                                       uint32_t OH, uint32_t OW) {
  (void)kh; (void)s2;
  const i16x8 w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3], w4 = wv[4], w5 = wv[5];
  const i16x8 w6 = wv[6], w7 = wv[7], w8 = wv[8], w9 = wv[9], w10 = wv[10], w11 = wv[11];
  for (uint32_t oh = 0; oh < OH; oh++, p += rstep, y += OW) {
    for (uint32_t ow = 0;; ow += 8) {
      if (ow + 8 > OW && OW >= 8) ow = OW - 8;   /* the last vector overlaps the previous one: same bytes stored twice */
      const int16_t *r = p + ow;
      i16x8 v = i16x8_load(r), u = i16x8_load(r + 2);
      i32x4 e = i32x4_dot_i16x8_add(bias, v, w0), o = i32x4_dot_i16x8_add(bias, v, w1);
      e = i32x4_dot_i16x8_add(e, u, w2); o = i32x4_dot_i16x8_add(o, u, w3);
      v = i16x8_load(r + drs); u = i16x8_load(r + drs + 2);
      e = i32x4_dot_i16x8_add(e, v, w4); o = i32x4_dot_i16x8_add(o, v, w5);
      e = i32x4_dot_i16x8_add(e, u, w6); o = i32x4_dot_i16x8_add(o, u, w7);
      v = i16x8_load(r + 2 * drs); u = i16x8_load(r + 2 * drs + 2);
      e = i32x4_dot_i16x8_add(e, v, w8); o = i32x4_dot_i16x8_add(o, v, w9);
      e = i32x4_dot_i16x8_add(e, u, w10); o = i32x4_dot_i16x8_add(o, u, w11);
      i8x16_store_lo8(y + ow, ep_q8_pack(f32x4_mul(f32x4_from_i32x4(i32x4_zip_lo(e, o)), mult),
                                         f32x4_mul(f32x4_from_i32x4(i32x4_zip_hi(e, o)), mult), lo, hi, zb, u8));
      if (ow + 8 >= OW) break;
    }
  }
}

/* 3x3, stride 2 and dilation 1 along the row: the plane is filled unphased (as for stride 1, rows 2 * pw long), so
 * a plain load of 8 int16 at column 2 * ow holds (x[2(ow + k)], x[2(ow + k) + 1]), k = 0..3: taps 0 and 1 of
 * outputs ow..ow+3 in order, and the load at 2 * ow + 2 their tap 2 (paired with weight 0). Per 8 outputs: 12
 * loads, 12 dots, no interleaving (the phased plane's pairs: 9 loads, 10 dots, 10 zips; and its fill splits
 * even and odd columns). The weights: dw_weights_eo's even pairs, wv[0], wv[2] (row 0), wv[4], wv[6], ... */
EP_NOINLINE static void dw3s2_channel(const int16_t *p, uint64_t rstep, uint64_t drs, const i16x8 *wv, uint32_t kh,
                                      int s2, i32x4 bias, f32x4 mult, f32x4 lo, f32x4 hi, i32x4 zb, int u8, uint8_t *y,
                                      uint32_t OH, uint32_t OW) {
  (void)kh; (void)s2;
  const i16x8 w0 = wv[0], w1 = wv[2], w2 = wv[4], w3 = wv[6], w4 = wv[8], w5 = wv[10];
  for (uint32_t oh = 0; oh < OH; oh++, p += rstep, y += OW) {
    for (uint32_t ow = 0;; ow += 8) {
      if (ow + 8 > OW && OW >= 8) ow = OW - 8;   /* the last vector overlaps the previous one: same bytes stored twice */
      const int16_t *r = p + 2 * ow;
      i32x4 a0 = i32x4_dot_i16x8_add(bias, i16x8_load(r), w0), a1 = i32x4_dot_i16x8_add(bias, i16x8_load(r + 8), w0);
      a0 = i32x4_dot_i16x8_add(a0, i16x8_load(r + 2), w1); a1 = i32x4_dot_i16x8_add(a1, i16x8_load(r + 10), w1);
      r += drs;
      a0 = i32x4_dot_i16x8_add(a0, i16x8_load(r), w2); a1 = i32x4_dot_i16x8_add(a1, i16x8_load(r + 8), w2);
      a0 = i32x4_dot_i16x8_add(a0, i16x8_load(r + 2), w3); a1 = i32x4_dot_i16x8_add(a1, i16x8_load(r + 10), w3);
      r += drs;
      a0 = i32x4_dot_i16x8_add(a0, i16x8_load(r), w4); a1 = i32x4_dot_i16x8_add(a1, i16x8_load(r + 8), w4);
      a0 = i32x4_dot_i16x8_add(a0, i16x8_load(r + 2), w5); a1 = i32x4_dot_i16x8_add(a1, i16x8_load(r + 10), w5);
      i8x16_store_lo8(y + ow, ep_q8_pack(f32x4_mul(f32x4_from_i32x4(a0), mult), f32x4_mul(f32x4_from_i32x4(a1), mult),
                                         lo, hi, zb, u8));
      if (ow + 8 >= OW) break;
    }
  }
}

/* 5 wide, any height, dilation 1 along the row (EfficientNet's and MobileNetV3's 5x5): the two loops above with
 * kernel rows of 3 loads. Stride 1 (s2 = 0): the loads at ow, ow + 2, ow + 4 dotted with dw_weights_eo's even and
 * odd pairs, 15 loads and 30 dots per 8 outputs of a 5x5 (the general loop's pairs: 26 loads, 26 dots, 26 zips);
 * stride 2 (the unphased plane): the loads at 2 * ow + 2m and 8 columns on, with the even pairs. The weights are
 * read from wv (30 of them: more than the registers). */
EP_NOINLINE static void dw5_channel(const int16_t *p, uint64_t rstep, uint64_t drs, const i16x8 *wv, uint32_t kh,
                                    int s2, i32x4 bias, f32x4 mult, f32x4 lo, f32x4 hi, i32x4 zb, int u8, uint8_t *y,
                                    uint32_t OH, uint32_t OW) {
  const uint32_t o1 = s2 ? 8u : 0u, w1 = s2 ? 0u : 1u;   /* a1's loads and weights: 8 columns on, or the odd pairs */
  for (uint32_t oh = 0; oh < OH; oh++, p += rstep, y += OW) {
    for (uint32_t ow = 0;; ow += 8) {
      if (ow + 8 > OW && OW >= 8) ow = OW - 8;   /* the last vector overlaps the previous one: same bytes stored twice */
      const int16_t *r = p + (s2 ? 2 * ow : ow);
      const i16x8 *w = wv;
      i32x4 a0 = bias, a1 = bias;
      uint32_t i = kh;   /* >= 1 */
      EP_COMPACT_LOOP
      do {
        const int16_t *r1 = r + o1;
        a0 = i32x4_dot_i16x8_add(i32x4_dot_i16x8_add(i32x4_dot_i16x8_add(a0, i16x8_load(r), w[0]), i16x8_load(r + 2), w[2]),
                                 i16x8_load(r + 4), w[4]);
        a1 = i32x4_dot_i16x8_add(i32x4_dot_i16x8_add(i32x4_dot_i16x8_add(a1, i16x8_load(r1), w[w1]), i16x8_load(r1 + 2),
                                                     w[w1 + 2]), i16x8_load(r1 + 4), w[w1 + 4]);
        r += drs; w += 6;
      } while (--i);
      if (!s2) { const i32x4 e = a0; a0 = i32x4_zip_lo(e, a1); a1 = i32x4_zip_hi(e, a1); }   /* even, odd: in order */
      i8x16_store_lo8(y + ow, ep_q8_pack(f32x4_mul(f32x4_from_i32x4(a0), mult), f32x4_mul(f32x4_from_i32x4(a1), mult),
                                         lo, hi, zb, u8));
      if (ow + 8 >= OW) break;
    }
  }
}

#define EP_QDW_CHANNELS 1
#else
#define EP_QDW_CHANNELS 0
#endif

/* Size-optimized: the 3x3 fast-epilogue channels of strides 1 and 2 (every benchmark model's depthwise time) run
 * in dw3_channel_eo / dw3s2_channel and the plane fill in qdw_fill; the general loop here serves the other kernels
 * (dilated or strided along the row otherwise, 5x5, ...) and epilogues. */
/* QDEPTHWISE_CONV's settings, shared by the threads; each task runs a range of channels in its own padded plane. */
typedef struct {
  const ep_node *n;
  ep_conv_geom g;
  ep_qgemm_epi e;
  uint64_t off[256];
  uint64_t plane_bytes, nbc;
  uint32_t parts;
} qdw_job;

static void qdw_task(void *ctx, uint32_t task, uint32_t thread) {
  const qdw_job *d = (const qdw_job *)ctx;
  const ep_node *n = d->n;
  const ep_conv_geom *g = &d->g;
  const ep_qgemm_epi *e = &d->e;
  const uint64_t *off = d->off;
  const int32_t *p = n->params;
  const uint32_t pw = (uint32_t)qdw_phase_width(g), kk = g->kh * g->kw, hp = g->H + g->pt + g->pb;
  const uint64_t hw = (uint64_t)g->H * g->W, ohw = (uint64_t)g->OH * g->OW, rstride = (uint64_t)g->sw * pw;
  const int u8 = n->in[0]->dtype == EP_U8;
  const int32_t xzp = p[10];
  const uint8_t *x = n->in[0]->data;
  const int8_t *w = (const int8_t *)n->in[1]->data;
  const uint32_t esz = ep_dtype_size(n->out[0]->dtype);
  int16_t *plane = (int16_t *)(void *)(n->scratch + thread * d->plane_bytes);
  const uint64_t xbytes = d->nbc * hw, bc0 = d->nbc * task / d->parts, bc1 = d->nbc * (task + 1u) / d->parts;
  const int fast = e->mult && e->out_dtype != EP_F32 && e->act != EP_ACT_LEAKY_RELU;
  float lo = 0.0f, hi = 0.0f;
  ep_q_bounds(e, &lo, &hi);
  const f32x4 vlo = f32x4_splat(lo), vhi = f32x4_splat(hi);
  const i32x4 zb = ep_q_zbits(e->yzp);
  i16x8 wv[128];
  /* the channel loops: 3x3 and 5 wide (wv holds 6 pairs per kernel row), dilation 1 along the row, stride 1 or 2 */
  const int k5 = g->kw == 5, ch = EP_QDW_CHANNELS && fast && esz == 1 && g->dw == 1 && (g->sw == 1 || g->sw == 2) &&
                                  ((g->kh == 3 && g->kw == 3) || (k5 && g->kh <= 21));
  const int s2 = ch && g->sw == 2;
  ep_conv_geom g1 = *g;   /* stride 2's unphased fill: stride 1's layout in rows of rstride */
  g1.sw = 1;
  for (uint64_t q = 0; q < (uint64_t)hp * rstride; q += 8) i16x8_store(plane + q, i16x8_splat(0));   /* the pads */
  for (uint64_t bc = bc0, c = bc0 % g->C; bc < bc1; bc++, c = c + 1 == g->C ? 0 : c + 1) {
    const int32_t wz = e->za_row ? e->za_row[c] : 0;
    /* rows shorter than 8 (7x7 maps) store 8 bytes in the channel loops, the spill landing in the next row or
     * channel (written afterwards, by this task): not in the task's last channel */
    const int whole = g->OW >= 8 || bc + 1 < bc1;
    (void)whole; (void)s2; (void)k5; (void)g1; (void)vlo; (void)vhi; (void)zb;   /* unused without EP_QDW_CHANNELS */
#if EP_QDW_CHANNELS
    if (ch && whole) dw_weights_eo(wv, w + (uint64_t)c * kk, g->kh, g->kw, wz);
    else
#endif
    dw_weight_pairs(wv, w + (uint64_t)c * kk, kk, wz);
    const i32x4 bias = i32x4_splat(e->bias ? e->bias[c] : 0);
    const f32x4 mult = f32x4_splat(e->mult ? e->mult[c] : 1.0f);
    const uint8_t *xc = x + bc * hw;
    uint8_t *yc = n->out[0]->data + bc * ohw * esz;
#if EP_QDW_CHANNELS
    if (s2 && !whole)   /* the last channel of a map under 8 wide goes phased: the unphased rows are not its pads */
      for (uint64_t q = 0; q < (uint64_t)hp * rstride; q += 8) i16x8_store(plane + q, i16x8_splat(0));
    if (ch && whole) {   /* stride 1's plane is g's; stride 2's unphased */
      qdw_fill(plane, xc, xbytes - bc * hw, u8, xzp, &g1, (uint32_t)rstride);
      dw_channel_fn *const fn = k5 ? dw5_channel : s2 ? dw3s2_channel : dw3_channel_eo;
      fn(plane, (uint64_t)g->sh * rstride, (uint64_t)g->dh * rstride, wv, g->kh, s2, bias, mult, vlo, vhi, zb,
         e->out_dtype == EP_U8, yc, g->OH, g->OW);
      continue;
    }
#endif
    qdw_fill(plane, xc, xbytes - bc * hw, u8, xzp, g, pw);
    for (uint32_t oh = 0; oh < g->OH; oh++) {
      const int16_t *rbase = plane + (uint64_t)oh * g->sh * rstride;
      for (uint32_t ow = 0; ow < g->OW; ow += 8) {
        /* with the fast epilogue a row's last vector ends at OW, overlapping the previous one: the outputs
         * are a pure function of the plane, so overlapped bytes are stored twice with one value */
        if (fast && ow + 8 > g->OW && g->OW >= 8) ow = g->OW - 8;
        i32x4 a0 = bias, a1 = bias;
        dw_taps(rbase + ow, off, wv, kk, &a0, &a1);
        const uint32_t cnt = g->OW - ow < 8 ? g->OW - ow : 8;
        uint8_t *dst = yc + ((uint64_t)oh * g->OW + ow) * esz;
        if (!e->mult) {   /* int32 output (ConvInteger) */
          int32_t tmp[8];
          i32x4_store(tmp, a0); i32x4_store(tmp + 4, a1);
          ep_q_store_bytes(dst, tmp, cnt, 1, 4);
        } else {
          ep_q_store8(f32x4_mul(f32x4_from_i32x4(a0), mult), f32x4_mul(f32x4_from_i32x4(a1), mult), e, dst, cnt, 1);
        }
      }
    }
  }
}

EP_COLD ep_status ep_run_QDEPTHWISE_CONV(const ep_node *n) {
  qdw_job d;
  d.n = n;
  (void)ep_conv_geom_of(n, n->params, &d.g);
  const ep_conv_geom *g = &d.g;
  ep_qconv_fill_epi(n, n->params + 10, &d.e);
  const uint64_t pw = qdw_phase_width(g), rstride = (uint64_t)g->sw * pw;
  for (uint32_t i = 0; i < g->kh; i++)
    for (uint32_t j = 0; j < g->kw; j++)
      d.off[i * g->kw + j] = (uint64_t)i * g->dh * rstride + ((j * g->dw) % g->sw) * pw + (j * g->dw) / g->sw;
  /* as many threads as the scratch holds planes (check() ensured one); channels in near-equal ranges */
  d.plane_bytes = ((uint64_t)g->H + g->pt + g->pb) * rstride * 2u;
  const uint64_t slots = d.plane_bytes ? n->scratch_bytes / d.plane_bytes : 1u;   /* 0: an empty input */
  const uint32_t threads = ep_num_threads() < slots ? ep_num_threads() : slots > 1 ? (uint32_t)slots : 1u;
  d.nbc = (uint64_t)g->B * g->C;
  d.parts = threads <= 1 ? 1u : (uint32_t)(d.nbc < 2u * threads ? d.nbc : 2u * threads);
  ep_parallel_for(d.parts, threads, qdw_task, &d);
  return EP_OK;
}
