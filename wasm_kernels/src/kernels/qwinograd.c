/* QWINOGRAD_CONV: QCONV's 3x3, stride 1, dilation 1, group 1 case as an exact integer Winograd F(2x2, 3x3).
 *
 * inputs X [B,Cin,H,W] u8/i8, U (int32 words, each an int16 pair), bias? int32 [Cout], mult? f32 [Cout];
 * output Y [B,Cout,OH,OW] u8/i8/f32/i32 (QCONV's epilogue), OH = H + pt + pb - 2, OW = W + pl + pr - 2.
 * U = (2G) g (2G)^T per (cout, cin) with the integer 2G = [[2,0,0],[1,1,1],[1,-1,1],[0,0,2]] and g the weights
 * minus their zero point (packager/ops/quant.py): 4x the usual transform, in integers. For each of the 16
 * positions k = 4i + j, the [Cout x Cin] matrix U_k as qgemm.h A panels of int16 (4 rows, Kp = ceil(Cin/2)
 * pairs): numel = 16 * ceil(Cout/4) * 4 * Kp words.
 * params (16 or 17): kh, kw, sh, sw, dh, dw (must be 3,3,1,1,1,1), pad_top, pad_left, pad_bottom, pad_right,
 *   nt (0: derived from the shapes, qwg_geometry), x_zp, y_zp, act, p0 (f32), p1 (f32)[, Cout].
 * Per block of nt 2x2 output tiles (row-major over TH = ceil(OH/2) x TW = ceil(OW/2)): V_k = B^T d B with
 * d = X - x_zp (|V| <= 1020, int16) into 16 planes of qgemm.h B pairs [Kp][ldb][2] (ldb = round8(nt)); then per
 * panel of 4 output channels the 16 products M_k = U_k V_k (int16 x int16 -> int32, i32x4.dot_i16x8) and
 * Y = A^T M A, which is 4x the direct convolution's int32 sum: Y >> 2 is QCONV's accumulator, bit for bit (the
 * int32 arithmetic wraps on the way; the packager only emits this kernel when 4x the sum's bound fits int32).
 * QCONV's epilogue (ep_qepi_row, qgemm.c) then gives QCONV's outputs.
 * The GEMMs run over round8(T) columns: V's columns past a block's T tiles hold stale (finite) values whose
 * products are never stored.
 * Scratch >= 16 * Kp * ldb * 4 (V) + (16 * 4 * ldb + 8) * 4 (M of one panel) + 8 * RW * 2 bytes (two channels'
 * 4 zero-padded input rows, RW = round8(2 * TW + 16)). Threads: the input transform runs on the caller, the
 * products and output transform split by tile columns (qwg_columns). */
#include "qconv.h"
#include "winograd_bt.h"
#include "shape/conv_linalg.h"

#define QWG_NPARAMS 16   /* + 1: word 16 = Cout (the form a run-time shape needs: U rounds it up) */
#define QWG_PANEL_BYTES (256u * 1024u)   /* V planes' budget for nt = 0 (packager/ops/quant.py PANEL_BYTES) */

typedef struct {
  ep_conv_geom g;
  uint32_t nt, ldb, Kp, TH, TW, rw;
} qwg_geom;

EP_COLD static ep_status qwg_geometry(const ep_node *n, qwg_geom *q) {
  const int32_t *p = n->params;
  const ep_status s = ep_qconv_check_common(n, p, &q->g, p + 11, EP_I32);
  if (s) return s;
  const ep_conv_geom *g = &q->g;
  EP_CHECK(n->in[0]->rank == 4, EP_E_SHAPE);
  EP_CHECK(g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1, EP_E_PARAM);
  EP_CHECK((uint64_t)g->C * 9 <= 65536 && g->C >= 1 && g->Cout >= 1, EP_E_SHAPE);   /* QCONV's K bound */
  EP_CHECK(p[10] >= 0 && p[10] <= (1 << 20), EP_E_PARAM);
  EP_CHECK((uint64_t)g->OH * g->OW <= 0x7FFFFFFFull, EP_E_SHAPE);
  EP_CHECK(n->n_params == QWG_NPARAMS || p[16] == (int32_t)g->Cout, EP_E_PARAM);
  q->Kp = (g->C + 1) / 2;
  q->TH = (g->OH + 1) / 2; q->TW = (g->OW + 1) / 2;
  q->nt = (uint32_t)p[10];
  if (!q->nt) {   /* the packager's rule: the 16 V planes of a block (64 bytes per channel pair and tile) in
                   * QWG_PANEL_BYTES, at least 8 tiles, blocks balanced in size */
    const uint32_t tiles = q->TH * q->TW;
    uint32_t nt = QWG_PANEL_BYTES / (16u * q->Kp * 4u) / EP_QGEMM_NR * EP_QGEMM_NR;
    if (nt < EP_QGEMM_NR) nt = EP_QGEMM_NR;
    const uint32_t blocks = (tiles + nt - 1) / nt;
    q->nt = ep_qgemm_round_nr((tiles + blocks - 1) / blocks);
    if (q->nt > tiles) q->nt = tiles;
  }
  q->ldb = ep_qgemm_round_nr(q->nt);
  q->rw = (2 * q->TW + 16 + 7) / 8 * 8;
  return EP_OK;
}

/* Byte offsets of the scratch parts: V planes, the M planes of one panel, the row buffers; and the total. */
EP_COLD static uint64_t qwg_scratch(const qwg_geom *q, uint64_t *m_off, uint64_t *rows_off) {
  *m_off = 16ull * q->Kp * q->ldb * 4u;
  *rows_off = *m_off + (16ull * EP_QGEMM_MR * q->ldb + 8) * 4u;   /* + 8: the output transform's 4-lane reads */
  return *rows_off + 8ull * q->rw * 2u;
}

EP_COLD uint32_t ep_scratch_QWINOGRAD_CONV(const ep_node *n) {
  qwg_geom q;
  uint64_t m_off, rows_off;
  if ((n->n_params != QWG_NPARAMS && n->n_params != QWG_NPARAMS + 1) || qwg_geometry(n, &q)) return 0;
  return ep_scratch_u32(qwg_scratch(&q, &m_off, &rows_off));
}

EP_COLD ep_status ep_check_QWINOGRAD_CONV(const ep_node *n) {
  EP_CHECK(n->n_params == QWG_NPARAMS || n->n_params == QWG_NPARAMS + 1, EP_E_PARAM);
  qwg_geom q;
  const ep_status s = qwg_geometry(n, &q);
  if (s) return s;
  uint64_t m_off, rows_off;
  EP_CHECK(n->in[1]->numel == 16ull * ((q.g.Cout + 3) / 4 * 4) * q.Kp, EP_E_SHAPE);
  EP_CHECK(qwg_scratch(&q, &m_off, &rows_off) <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

/* The 4 padded rows ih0.. of one channel: buf[r * rw + u] = x[ih0 + r][u - pl] - zp for u < Wp = pl + W + pr,
 * 0 in the pads. Columns from Wp on keep stale values: they only reach outputs past OW (an odd OW's last tile;
 * the exact integer transform cancels column Wp out of output column OW - 1) or lanes past the tile row. */
EP_COLD static void qwg_fill_rows(int16_t *buf, uint32_t rw, const uint8_t *xc, int u8, int32_t zp, const ep_conv_geom *g,
                                  int64_t ih0) {
  const uint32_t len = g->W + g->pl + g->pr;   /* <= rw */
  for (uint32_t r = 0; r < 4; r++) {
    const int64_t ih = ih0 + r;
    if (ih >= 0 && ih < (int64_t)g->H) ep_qconv_pad_row(buf + r * rw, xc + (uint64_t)ih * g->W, u8, zp, g, len);
    else for (uint32_t u = 0; u < len; u++) buf[r * rw + u] = 0;
  }
}

/* o[k] = (B^T d B)[k] of 8 tiles whose 4 input rows start at b (tile t's columns 2t..2t+3). */
__attribute__((noinline)) static void qwg_tiles8(const int16_t *b, uint32_t rw, i16x8 o[16]) {
  i16x8 d[4][4];
  EP_WINOGRAD_D(i16x8, i16x8_load, i16x8_even, i16x8_odd, 8, b, rw, d);
  EP_WINOGRAD_BT(i16x8, i16x8_sub, i16x8_add, d, o);
}

/* Input transform of tiles [tx0, tx1) of one tile row for the channel pair of buffers b0, b1 (the same buffer
 * for an odd Cin's last pair: U is zero there); v points at V_0's pair row at the column of tile tx0. */
EP_COLD static void qwg_input_pair(int16_t *v, uint64_t vplane, const int16_t *b0, const int16_t *b1, uint32_t rw, uint32_t tx0,
                           uint32_t tx1) {
  for (uint32_t tx = tx0; tx < tx1; tx += 8) {
    i16x8 o0[16], o1[16];
    qwg_tiles8(b0 + 2 * tx, rw, o0);
    qwg_tiles8(b1 + 2 * tx, rw, o1);
    int16_t *dst = v + 2 * (uint64_t)(tx - tx0);
    const uint32_t cnt = tx1 - tx < 8 ? tx1 - tx : 8;
    for (uint32_t k = 0; k < 16; k++) {
      const i16x8 lo = i16x8_zip_lo(o0[k], o1[k]), hi = i16x8_zip_hi(o0[k], o1[k]);
      int16_t *d = dst + k * vplane;
      if (cnt == 8) { i16x8_store(d, lo); i16x8_store(d + 8, hi); continue; }
      int16_t t[16];
      i16x8_store(t, lo); i16x8_store(t + 8, hi);
      EP_COMPACT_LOOP
      for (uint32_t i = 0; i < 2 * cnt; i++) d[i] = t[i];
    }
  }
}

/* Output transform of tiles [tx0, tx1) of tile row ty for output channel co: m points at M_0's row co at the
 * column of tile tx0 (planes mplane words apart); 4 tiles per step, then QCONV's epilogue per output row. */
__attribute__((noinline)) static void qwg_output_row(const int32_t *m, uint64_t mplane, const qwg_geom *q, const ep_qgemm_epi *e,
                           const ep_qepi_mode *f, uint32_t co, uint32_t ty, uint32_t tx0, uint32_t tx1) {
  const uint32_t OW = q->g.OW, oh = 2 * ty;
  /* the fast epilogue's per-row constants once per call (ep_qepi_row's operations: the same bits) */
  const i32x4 bv = i32x4_splat(f->fast && e->bias ? e->bias[co] : 0);
  const f32x4 mv = f32x4_splat(f->fast ? e->mult[co] : 0.0f);
  for (uint32_t tx = tx0; tx < tx1; tx += 4) {
    const int32_t *src = m + (tx - tx0);
    i32x4 s[16];
    for (uint32_t k = 0; k < 16; k++) s[k] = i32x4_load(src + k * mplane);
    i32x4 a0[4], a1[4];   /* A^T M: rows; then columns */
    for (uint32_t j = 0; j < 4; j++) {
      a0[j] = i32x4_add(i32x4_add(s[j], s[4 + j]), s[8 + j]);
      a1[j] = i32x4_sub(i32x4_sub(s[4 + j], s[8 + j]), s[12 + j]);
    }
    const i32x4 y00 = i32x4_shr(i32x4_add(i32x4_add(a0[0], a0[1]), a0[2]), 2);
    const i32x4 y01 = i32x4_shr(i32x4_sub(i32x4_sub(a0[1], a0[2]), a0[3]), 2);
    const i32x4 y10 = i32x4_shr(i32x4_add(i32x4_add(a1[0], a1[1]), a1[2]), 2);
    const i32x4 y11 = i32x4_shr(i32x4_sub(i32x4_sub(a1[1], a1[2]), a1[3]), 2);
    const uint32_t ow = 2 * tx, tiles = tx1 - tx < 4 ? tx1 - tx : 4;
    const uint32_t cnt = 2 * tiles < OW - ow ? 2 * tiles : OW - ow;
    const i32x4 v[4] = {i32x4_zip_lo(y00, y01), i32x4_zip_hi(y00, y01), i32x4_zip_lo(y10, y11), i32x4_zip_hi(y10, y11)};
    const uint32_t rows = oh + 1 < q->g.OH ? 2 : 1;
    for (uint32_t i = 0; i < rows; i++) {
      if (f->fast && cnt == 8) {   /* inline: a call per 8 outputs was a quarter of the small layers' time */
        i8x16_store_lo8(e->y + (uint64_t)co * e->rs + (oh + i) * OW + ow, ep_qepi_fast8(f, v[2 * i], v[2 * i + 1], bv, mv));
        continue;
      }
      ep_qepi_row(e, f, co, (oh + i) * OW + ow, 0, cnt, v[2 * i], v[2 * i + 1]);
    }
  }
}

/* The products and output transform of one block of T tiles, split by tile columns across the threads: each range
 * runs every panel's 16 GEMMs on its columns of V into its columns of M, then the output rows of its tiles. Wrapping
 * int32 sums, one epilogue: the same bits for any split. */
typedef struct {
  const qwg_geom *q;
  const int16_t *U, *V;
  int32_t *M;
  const ep_qgemm_epi *e;
  const ep_qepi_mode *f;
  uint64_t vplane, mplane, upanel;
  uint32_t panels, t0, T, parts;
} qwg_job;

static void qwg_columns(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const qwg_job *j = (const qwg_job *)ctx;
  const qwg_geom *q = j->q;
  const uint32_t c0 = ep_qgemm_col(j->T, j->parts, task), c1 = ep_qgemm_col(j->T, j->parts, task + 1);
  if (c1 <= c0) return;
  const uint32_t N = ep_qgemm_round_nr(c1 - c0), end = j->t0 + c1;
  for (uint32_t pi = 0; pi < j->panels; pi++) {
    for (uint32_t k = 0; k < 16; k++)
      ep_qgemm_raw16(q->Kp, j->U + ((uint64_t)k * j->panels + pi) * j->upanel, j->V + k * j->vplane + 2u * c0, q->ldb, N,
                     j->M + k * j->mplane + c0, q->ldb);
    const uint32_t mr = q->g.Cout - 4 * pi < 4 ? q->g.Cout - 4 * pi : 4;
    for (uint32_t r = 0; r < mr; r++) {
      for (uint32_t t = j->t0 + c0; t < end;) {
        const uint32_t ty = t / q->TW, tx0 = t % q->TW;
        const uint32_t tx1 = q->TW - tx0 < end - t ? q->TW : tx0 + (end - t);
        qwg_output_row(j->M + (uint64_t)r * q->ldb + (t - j->t0), j->mplane, q, j->e, j->f, 4 * pi + r, ty, tx0, tx1);
        t += tx1 - tx0;
      }
    }
  }
}

EP_COLD ep_status ep_run_QWINOGRAD_CONV(const ep_node *n) {
  qwg_geom q;
  (void)qwg_geometry(n, &q);
  const ep_conv_geom *g = &q.g;
  uint64_t m_off, rows_off;
  (void)qwg_scratch(&q, &m_off, &rows_off);
  int16_t *V = (int16_t *)(void *)n->scratch;
  int32_t *M = (int32_t *)(void *)(n->scratch + m_off);
  int16_t *rows = (int16_t *)(void *)(n->scratch + rows_off);
  const uint64_t vplane = 2ull * q.Kp * q.ldb, mplane = (uint64_t)EP_QGEMM_MR * q.ldb;
  const uint64_t hw = (uint64_t)g->H * g->W, ohw = (uint64_t)g->OH * g->OW;
  const uint32_t panels = (g->Cout + 3) / 4, ntiles = q.TH * q.TW;
  const uint64_t upanel = (uint64_t)q.Kp * 2 * EP_QGEMM_MR;   /* int16 per panel */
  const int16_t *U = (const int16_t *)(const void *)n->in[1]->data;
  const int u8 = n->in[0]->dtype == EP_U8;
  const int32_t xzp = n->params[11];
  const uint32_t esz = ep_dtype_size(n->out[0]->dtype);
  ep_qgemm_epi e;
  ep_qconv_fill_epi(n, n->params + 11, &e);
  e.rs = ohw; e.cs = 1;
  const ep_qepi_mode f = ep_qepi_mode_of(&e);
  for (uint32_t b = 0; b < g->B; b++) {
    const uint8_t *xb = n->in[0]->data + (uint64_t)b * g->C * hw;
    e.y = n->out[0]->data + (uint64_t)b * g->Cout * ohw * esz;
    for (uint32_t t0 = 0; t0 < ntiles; t0 += q.nt) {
      const uint32_t T = ntiles - t0 < q.nt ? ntiles - t0 : q.nt;
      for (uint32_t p = 0; p < q.Kp; p++) {
        const uint32_t c = 2 * p;
        int16_t *r0 = rows, *r1 = c + 1 < g->C ? rows + 4 * q.rw : rows;
        for (uint32_t t = t0; t < t0 + T;) {   /* one tile row segment at a time */
          const uint32_t ty = t / q.TW, tx0 = t % q.TW;
          const uint32_t tx1 = q.TW - tx0 < t0 + T - t ? q.TW : tx0 + (t0 + T - t);
          const int64_t ih0 = (int64_t)2 * ty - g->pt;
          qwg_fill_rows(r0, q.rw, xb + (uint64_t)c * hw, u8, xzp, g, ih0);
          if (r1 != r0) qwg_fill_rows(r1, q.rw, xb + (uint64_t)(c + 1) * hw, u8, xzp, g, ih0);
          qwg_input_pair(V + ((uint64_t)p * q.ldb + (t - t0)) * 2, vplane, r0, r1, q.rw, tx0, tx1);
          t += tx1 - tx0;
        }
      }
      const qwg_job j = {&q, U, V, M, &e, &f, vplane, mplane, upanel, panels, t0, T,
                         ep_qgemm_col_parts(g->Cout, T, 16u * g->C)};
      ep_parallel_for(j.parts, EP_MAX_THREADS, qwg_columns, (void *)&j);
    }
  }
  return EP_OK;
}
