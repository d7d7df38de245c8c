/* WINOGRAD_CONV and WINOGRAD_CONV_F4: 3x3, stride 1, dilation 1, groups 1 convolution as Winograd F(2x2, 3x3)
 * or F(4x4, 3x3), NCHW. Both share everything but the two transforms; `m` below is the output tile's side (2 or
 * 4), `a` = m + 2 the input tile's, nk = a * a the transformed tile's positions (16 or 36).
 *
 * inputs X [B,Cin,H,W], U (nk transformed filter matrices), bias? [Cout], residual? (Y's shape);
 * output Y [B,Cout,OH,OW] with OH = H + pt + pb - 2, OW = W + pl + pr - 2.
 * U = G g G^T per (cout, cin), computed by the packager (packager/ops/conv.py) for F(2x2), at bind by the
 * WINOGRAD_FILTER prologue (end of this file) for F(4x4): for each of the nk
 * positions k = a*i + j of the transformed tile, the [Cout x Cin] matrix U_k packed in
 * EP_GEMM_MR-row panels (gemm.h); numel = nk * ep_gemm_packed_a_floats(Cout, Cin).
 * params (15 or 16 words): mr, kh, kw, sh, sw, dh, dw (must be 6,3,3,1,1,1,1), pad_top, pad_left, pad_bottom,
 *   pad_right, nt (0: the packager's rule, wg_tiles, from the shapes), act, act_p0 (f32), act_p1 (f32)[, Cout].
 * Output tiles are m x m (TH = ceil(OH/m) x TW = ceil(OW/m), row-major); they are processed in blocks
 * of nt tiles: input transform V_k = B^T d B into nk planes [Cin x ldv] (ldv = round_up(nt, 8)),
 * nk GEMMs M_k = U_k V_k via the shared micro-kernel into [Cout x ldv] planes, then the output
 * transform Y = A^T M A with bias, residual and activation applied before the single store.
 * Scratch (floats): nk * (Cin + Cout) * ldv + slots * a * RW, RW = round_up(m * TW + 4 * m, 4) (the a zero-padded
 * input rows of one tile row, one buffer per thread; slots >= 1: the input transform uses at most that
 * many threads). */
#include "gemm.h"
#include "ep_vec.h"
#include "winograd_bt.h"
#include "ep_parallel.h"
#include "shape/conv_linalg.h"
#include "kernels/lowp.h"

#define WG_NPARAMS 15   /* + 1: word 15 = Cout (the form a run-time shape needs: U rounds it up) */
#define MAXDIM 65535
/* The packager's block sizes (packager/ops/conv.py), for nt = 0: every block streams all nk U_k once, so deep
 * layers (big U) on small planes take the whole plane in one block (up to WG_SINGLE_BLOCK_FLOATS of scratch);
 * otherwise blocks of WG_SCRATCH_FLOATS (at least WG_MIN_TILES tiles), balanced in size. */
#define WG_SCRATCH_FLOATS (128u * 1024u)
#define WG_SINGLE_BLOCK_FLOATS (512u * 1024u)
#define WG_BIG_U_FLOATS (256u * 1024u)
#define WG_MIN_TILES 16u

typedef struct {
  uint32_t B, C, H, W, Cout, OH, OW, pt, pl, pb, pr, nt, TH, TW, ldv, rw;
  uint32_t m, a, nk;   /* output tile side, input tile side, transformed positions */
} wg_geom;

static uint64_t wg_round8(uint64_t x) { return (x + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR; }

/* Tiles per block for word 11 = 0 (the rule above). */
EP_COLD static uint32_t wg_tiles(const wg_geom *g) {
  const uint64_t tiles = (uint64_t)g->TH * g->TW, per_tile = (uint64_t)g->nk * ((uint64_t)g->C + g->Cout);
  const uint64_t rows = (uint64_t)g->a * g->rw;
  if ((uint64_t)g->nk * g->C * g->Cout >= WG_BIG_U_FLOATS && per_tile * wg_round8(tiles) + rows <= WG_SINGLE_BLOCK_FLOATS)
    return (uint32_t)tiles;
  uint64_t nt = rows < WG_SCRATCH_FLOATS ? (WG_SCRATCH_FLOATS - rows) / per_tile / EP_GEMM_NR * EP_GEMM_NR : 0;
  if (nt < WG_MIN_TILES) nt = WG_MIN_TILES;
  const uint64_t blocks = (tiles + nt - 1) / nt;
  nt = wg_round8((tiles + blocks - 1) / blocks);
  return (uint32_t)(nt < tiles ? nt : tiles);
}

EP_COLD static ep_status wg_geometry(const ep_node *n, uint32_t m, wg_geom *g) {
  const int32_t *p = n->params;
  const ep_tensor *x = n->in[0], *u = n->in[1], *y = n->out[0];
  EP_CHECK(x && u && y, EP_E_OP);
  EP_CHECK(x->dtype == EP_F32 && u->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(x->rank == 4 && y->rank == 4, EP_E_SHAPE);
  EP_CHECK(p[0] == EP_GEMM_MR && p[1] == 3 && p[2] == 3 && p[3] == 1 && p[4] == 1 && p[5] == 1 && p[6] == 1, EP_E_PARAM);
  for (int i = 7; i < 11; i++) EP_CHECK(p[i] >= 0 && p[i] <= MAXDIM, EP_E_PARAM);
  EP_CHECK(p[11] >= 0 && p[11] <= (1 << 20), EP_E_PARAM);
  g->pt = (uint32_t)p[7]; g->pl = (uint32_t)p[8]; g->pb = (uint32_t)p[9]; g->pr = (uint32_t)p[10];
  g->B = (uint32_t)x->dims[0]; g->C = (uint32_t)x->dims[1]; g->H = (uint32_t)x->dims[2]; g->W = (uint32_t)x->dims[3];
  g->Cout = (uint32_t)y->dims[1]; g->OH = (uint32_t)y->dims[2]; g->OW = (uint32_t)y->dims[3];
  EP_CHECK((uint32_t)y->dims[0] == g->B && g->C >= 1 && g->Cout >= 1, EP_E_SHAPE);
  EP_CHECK(g->H <= MAXDIM && g->W <= MAXDIM && g->C <= 0x7FFFFFFu && g->Cout <= 0x7FFFFFFu, EP_E_SHAPE);
  const uint64_t hp = (uint64_t)g->H + g->pt + g->pb, wp = (uint64_t)g->W + g->pl + g->pr;
  EP_CHECK(hp >= 3 && wp >= 3 && g->OH == hp - 2 && g->OW == wp - 2, EP_E_SHAPE);
  EP_CHECK((uint64_t)g->OH * g->OW <= 0x7FFFFFFFull, EP_E_SHAPE);
  EP_CHECK(n->n_params == WG_NPARAMS || p[15] == (int32_t)g->Cout, EP_E_PARAM);
  g->m = m; g->a = m + 2; g->nk = g->a * g->a;
  g->TH = (g->OH + m - 1) / m; g->TW = (g->OW + m - 1) / m;
  /* the vector input transforms read 4 tiles at a time: up to 4m columns past the last tile's start */
  g->rw = (m * g->TW + 4 * m + 3) / 4 * 4;
  g->nt = p[11] ? (uint32_t)p[11] : wg_tiles(g);
  g->ldv = (g->nt + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
  return EP_OK;
}

static uint64_t wg_scratch_floats(const wg_geom *g) {
  return (uint64_t)g->nk * ((uint64_t)g->C + g->Cout) * g->ldv + (uint64_t)g->a * g->rw;
}

/* The blocks' V and M planes and EP_THREAD_SLOTS row buffers (the packager's size). */
EP_COLD static uint32_t wg_scratch(const ep_node *n, uint32_t m) {
  wg_geom g;
  if ((n->n_params != WG_NPARAMS && n->n_params != WG_NPARAMS + 1) || wg_geometry(n, m, &g)) return 0;
  return ep_scratch_u32((wg_scratch_floats(&g) + (EP_THREAD_SLOTS - 1u) * g.a * g.rw) * 4u);
}
EP_COLD uint32_t ep_scratch_WINOGRAD_CONV(const ep_node *n) { return wg_scratch(n, 2); }
EP_COLD uint32_t ep_scratch_WINOGRAD_CONV_F4(const ep_node *n) { return wg_scratch(n, 4); }

EP_COLD static ep_status wg_check(const ep_node *n, uint32_t m) {
  EP_CHECK(n->n_params == WG_NPARAMS || n->n_params == WG_NPARAMS + 1, EP_E_PARAM);
  wg_geom g;
  const ep_status s = wg_geometry(n, m, &g);
  if (s) return s;
  EP_CHECK(n->in[1]->numel == (uint64_t)g.nk * ep_gemm_packed_a_floats(g.Cout, g.C), EP_E_SHAPE);
  EP_CHECK(wg_scratch_floats(&g) * 4u <= n->scratch_bytes, EP_E_PARAM);
  EP_CHECK(ep_gemm_check_act(n->params[12]) == EP_OK, EP_E_PARAM);
  if (n->n_in > 2 && n->in[2]) EP_CHECK(n->in[2]->dtype == EP_F32 && n->in[2]->numel == g.Cout, EP_E_SHAPE);
  if (n->n_in > 3 && n->in[3]) EP_CHECK(n->in[3]->dtype == EP_F32 && ep_same_shape(n->in[3], n->out[0]), EP_E_SHAPE);
  return EP_OK;
}

EP_COLD ep_status ep_check_WINOGRAD_CONV(const ep_node *n) { return wg_check(n, 2); }
EP_COLD ep_status ep_check_WINOGRAD_CONV_F4(const ep_node *n) { return wg_check(n, 4); }

/* buf[r * rw + u] = x[ih0 + r][u - pl] for r < a, u in [u0, u1), zero outside the input. */
EP_COLD static void wg_fill_rows(float *buf, uint32_t rw, const float *xc, const wg_geom *g, int64_t ih0, uint32_t u0, uint32_t u1) {
  for (uint32_t r = 0; r < g->a; r++) {
    float *d = buf + (uint64_t)r * rw;
    const int64_t ih = ih0 + r;
    if (ih < 0 || ih >= (int64_t)g->H) {
      uint32_t u = u0;
      for (; u + 4 <= u1; u += 4) f32x4_store(d + u, f32x4_zero());
      for (; u < u1; u++) d[u] = 0.0f;
      continue;
    }
    const float *s = xc + (uint64_t)ih * g->W;
    /* input column iw = u - pl valid for u in [pl, pl + W) */
    uint32_t lo = g->pl > u0 ? g->pl : u0, hi = g->pl + g->W < u1 ? g->pl + g->W : u1;
    if (lo > u1) lo = u1;
    if (hi < lo) hi = lo;
    for (uint32_t u = u0; u < lo; u++) d[u] = 0.0f;
    uint32_t u = lo;
    for (; u + 4 <= hi; u += 4) f32x4_store(d + u, f32x4_load(s + (u - g->pl)));
    for (; u < hi; u++) d[u] = s[u - g->pl];
    for (u = hi; u < u1; u++) d[u] = 0.0f;
  }
}

/* The last cnt (< 4) tiles' lanes of the nk transformed vectors o (cold: the end of a tile row segment). */
EP_COLD static void wg_store_partial(float *dst, uint64_t plane, const f32x4 *o, uint32_t nk, uint32_t cnt) {
  float tmp[4];
  for (uint32_t k = 0; k < nk; k++) {
    f32x4_store(tmp, o[k]);
    for (uint32_t t = 0; t < cnt; t++) dst[k * plane + t] = tmp[t];
  }
}

/* F(2x2, 3x3) input transform of tiles [tx0, tx1) of one tile row for one channel: buf holds its 4 padded rows;
 * v points at V_0[c][column of tile tx0], planes `vplane` floats apart. 4 tiles per step. */
static void wg2_input_row(float *v, uint64_t vplane, const float *buf, uint32_t rw, uint32_t tx0, uint32_t tx1) {
  for (uint32_t tx = tx0; tx < tx1; tx += 4) {
    const float *b = buf + 2 * tx;
    f32x4 d[4][4];
    EP_WINOGRAD_D(f32x4, f32x4_load, f32x4_even, f32x4_odd, 4, b, rw, d);
    f32x4 o[16];
    EP_WINOGRAD_BT(f32x4, f32x4_sub, f32x4_add, d, o);
    float *dst = v + (tx - tx0);
    if (tx + 4 <= tx1) {
      for (uint32_t k = 0; k < 16; k++) f32x4_store(dst + k * vplane, o[k]);
    } else {
      wg_store_partial(dst, vplane, o, 16, tx1 - tx);
    }
  }
}

static inline f32x4 wg_act(f32x4 r, int32_t act, f32x4 p0, f32x4 p1) {
  switch (act) {
    case EP_ACT_RELU: return f32x4_max(r, f32x4_zero());
    case EP_ACT_CLIP: return f32x4_min(f32x4_max(r, p0), p1);
    case EP_ACT_LEAKY_RELU: return f32x4_add(f32x4_max(r, f32x4_zero()), f32x4_mul(p0, f32x4_min(r, f32x4_zero())));
    default: return r;   /* none; the out-of-line activations come after the rows are done (wg_post) */
  }
}

typedef struct {
  const float *bias, *res;   /* res: this image's residual [Cout, OH, OW] or NULL */
  int32_t act;               /* in the transform: the activations computed in registers */
  float p0, p1;
  ep_gemm_post post;         /* an out-of-line activation (sigmoid, SiLU...), applied to the finished rows */
} wg_epi;

/* Output row oh of channel co (this image's y), its residual row, and the channel's epilogue constants. */
typedef struct {
  float *y0;
  const float *r0;
  f32x4 bv, p0, p1;
} wg_out;

static inline wg_out wg_out_at(float *y, const wg_geom *g, const wg_epi *e, uint32_t co, uint32_t oh) {
  const uint64_t at = (uint64_t)co * g->OH * g->OW + (uint64_t)oh * g->OW;
  const wg_out o = {y + at, e->res ? e->res + at : 0, f32x4_splat(e->bias ? e->bias[co] : 0.0f), f32x4_splat(e->p0),
                    f32x4_splat(e->p1)};
  return o;
}

/* s[k] = the first cnt (< 4) lanes at src + k * mplane, 0 past them (cold: the end of a segment). */
EP_COLD static void wg_load_partial(f32x4 *s, const float *src, uint64_t mplane, uint32_t nk, uint32_t cnt) {
  float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t k = 0; k < nk; k++) {
    for (uint32_t t = 0; t < cnt; t++) tmp[t] = src[k * mplane + t];
    s[k] = f32x4_load(tmp);
  }
}

/* Edge tiles (cold): the scalar epilogue of y = {y00, y01, y10, y11}, stores clipped to the output. */
EP_COLD static void wg_store_edge(float *y0, const f32x4 *y, const wg_geom *g, const ep_gemm_epi *se, uint32_t co,
                                  uint32_t oh, uint32_t ow, uint32_t cnt, int two_rows) {
  float t[4][4];
  for (uint32_t i = 0; i < 4; i++) f32x4_store(t[i], y[i]);
  for (uint32_t l = 0; l < cnt; l++) {
    const uint32_t c0 = ow + 2 * l;
    const uint64_t n0 = (uint64_t)oh * g->OW + c0;
    y0[c0] = ep_gemm_epi_scalar(se, t[0][l], co, (uint32_t)n0);
    if (c0 + 1 < g->OW) y0[c0 + 1] = ep_gemm_epi_scalar(se, t[1][l], co, (uint32_t)n0 + 1);
    if (two_rows) {
      y0[g->OW + c0] = ep_gemm_epi_scalar(se, t[2][l], co, (uint32_t)n0 + g->OW);
      if (c0 + 1 < g->OW) y0[g->OW + c0 + 1] = ep_gemm_epi_scalar(se, t[3][l], co, (uint32_t)n0 + g->OW + 1);
    }
  }
}

/* F(2x2, 3x3) output transform of tiles [tx0, tx1) of tile row ty for output channel co; m points at
 * M_0[co][column of tile tx0], planes `mplane` floats apart; y is this image's output. */
static void wg2_output_row(const float *m, uint64_t mplane, float *y, const wg_geom *g, uint32_t co, uint32_t ty,
                          uint32_t tx0, uint32_t tx1, const wg_epi *e, const ep_gemm_epi *se) {
  const uint32_t oh = 2 * ty;
  const int two_rows = oh + 1 < g->OH;
  const wg_out o = wg_out_at(y, g, e, co, oh);
  for (uint32_t tx = tx0; tx < tx1; tx += 4) {
    const float *src = m + (tx - tx0);
    const uint32_t cnt = tx1 - tx < 4 ? tx1 - tx : 4;
    f32x4 s[16];
    if (cnt == 4) {
      for (uint32_t k = 0; k < 16; k++) s[k] = f32x4_load(src + k * mplane);
    } else {
      wg_load_partial(s, src, mplane, 16, cnt);
    }
    /* A^T M: rows; then columns */
    f32x4 a0[4], a1[4];
    for (uint32_t j = 0; j < 4; j++) {
      a0[j] = f32x4_add(f32x4_add(s[j], s[4 + j]), s[8 + j]);
      a1[j] = f32x4_sub(f32x4_sub(s[4 + j], s[8 + j]), s[12 + j]);
    }
    const f32x4 y00 = f32x4_add(f32x4_add(a0[0], a0[1]), a0[2]), y01 = f32x4_sub(f32x4_sub(a0[1], a0[2]), a0[3]);
    const f32x4 y10 = f32x4_add(f32x4_add(a1[0], a1[1]), a1[2]), y11 = f32x4_sub(f32x4_sub(a1[1], a1[2]), a1[3]);
    const uint32_t ow = 2 * tx;
    if (cnt == 4 && ow + 8 <= g->OW && two_rows) {
      f32x4 v[4] = {f32x4_add(f32x4_zip_lo(y00, y01), o.bv), f32x4_add(f32x4_zip_hi(y00, y01), o.bv),
                    f32x4_add(f32x4_zip_lo(y10, y11), o.bv), f32x4_add(f32x4_zip_hi(y10, y11), o.bv)};
      if (o.r0) {
        v[0] = f32x4_add(v[0], f32x4_load(o.r0 + ow)); v[1] = f32x4_add(v[1], f32x4_load(o.r0 + ow + 4));
        v[2] = f32x4_add(v[2], f32x4_load(o.r0 + g->OW + ow)); v[3] = f32x4_add(v[3], f32x4_load(o.r0 + g->OW + ow + 4));
      }
      if (e->act != EP_ACT_NONE)
        for (uint32_t i = 0; i < 4; i++) v[i] = wg_act(v[i], e->act, o.p0, o.p1);
      f32x4_store(o.y0 + ow, v[0]); f32x4_store(o.y0 + ow + 4, v[1]);
      f32x4_store(o.y0 + g->OW + ow, v[2]); f32x4_store(o.y0 + g->OW + ow + 4, v[3]);
      continue;
    }
    const f32x4 yv[4] = {y00, y01, y10, y11};
    wg_store_edge(o.y0, yv, g, se, co, oh, ow, cnt, two_rows);
  }
}

/* F(4x4, 3x3) (Lavin's points 0, +-1, +-2, inf). B^T d of one column of 6 vectors: 6 rows out. */
static inline void wg4_bt(f32x4 *r, f32x4 d0, f32x4 d1, f32x4 d2, f32x4 d3, f32x4 d4, f32x4 d5) {
  const f32x4 c4 = f32x4_splat(4.0f), m4 = f32x4_splat(-4.0f), m5 = f32x4_splat(-5.0f);
  const f32x4 t1 = f32x4_fma(d4, m4, d2), t2 = f32x4_fma(d3, m4, d1);     /* d4 - 4 d2, d3 - 4 d1 */
  const f32x4 t3 = f32x4_sub(d4, d2), x = f32x4_sub(d3, d1), t4 = f32x4_add(x, x);
  r[0] = f32x4_fma(f32x4_fma(d4, c4, d0), m5, d2);
  r[1] = f32x4_add(t1, t2); r[2] = f32x4_sub(t1, t2);
  r[3] = f32x4_add(t3, t4); r[4] = f32x4_sub(t3, t4);
  r[5] = f32x4_fma(f32x4_fma(d5, c4, d1), m5, d3);
}

/* A^T m of 6 vectors: 4 out. */
static inline void wg4_at(f32x4 *o, f32x4 m0, f32x4 m1, f32x4 m2, f32x4 m3, f32x4 m4, f32x4 m5) {
  const f32x4 s12 = f32x4_add(m1, m2), d12 = f32x4_sub(m1, m2), s34 = f32x4_add(m3, m4), d34 = f32x4_sub(m3, m4);
  o[0] = f32x4_add(f32x4_add(m0, s12), s34);
  o[1] = f32x4_fma(d12, f32x4_splat(2.0f), d34);
  o[2] = f32x4_fma(s12, f32x4_splat(4.0f), s34);
  o[3] = f32x4_fma(f32x4_add(d12, m5), f32x4_splat(8.0f), d34);
}

/* F(4x4, 3x3) input transform of tiles [tx0, tx1) of one tile row for one channel (buf: its 6 padded rows),
 * 4 tiles per step, lane l = tile tx + l: columns 4 (tx + l) + c of a row are deinterleaved from 5 loads.
 * Row by row (d B into a small buffer), then column by column (B^T of it straight to the V planes): few live
 * vectors, so nothing spills. */
static void wg4_input_row(float *v, uint64_t vplane, const float *buf, uint32_t rw, uint32_t tx0, uint32_t tx1) {
  for (uint32_t tx = tx0; tx < tx1; tx += 4) {
    const float *b = buf + 4 * tx;
    f32x4 db[6][6];   /* db[r]: row r of d B */
    EP_COMPACT_LOOP
    for (uint32_t r = 0; r < 6; r++) {
      const float *q = b + (uint64_t)r * rw;
      const f32x4 v0 = f32x4_load(q), v1 = f32x4_load(q + 4), v2 = f32x4_load(q + 8), v3 = f32x4_load(q + 12);
      const f32x4 v4 = f32x4_load(q + 16);
      const f32x4 e01 = f32x4_even(v0, v1), o01 = f32x4_odd(v0, v1), e23 = f32x4_even(v2, v3), o23 = f32x4_odd(v2, v3);
      const f32x4 e12 = f32x4_even(v1, v2), o12 = f32x4_odd(v1, v2), e34 = f32x4_even(v3, v4), o34 = f32x4_odd(v3, v4);
      wg4_bt(db[r], f32x4_even(e01, e23), f32x4_even(o01, o23), f32x4_odd(e01, e23), f32x4_odd(o01, o23),
             f32x4_even(e12, e34), f32x4_even(o12, o34));
    }
    float *dst = v + (tx - tx0);
    const int full = tx + 4 <= tx1;
    EP_COMPACT_LOOP
    for (uint32_t j = 0; j < 6; j++) {
      f32x4 o[6];
      wg4_bt(o, db[0][j], db[1][j], db[2][j], db[3][j], db[4][j], db[5][j]);
      float *dj = dst + j * vplane;
      if (full) {
        for (uint32_t i = 0; i < 6; i++) f32x4_store(dj + 6 * i * vplane, o[i]);
      } else {
        wg_store_partial(dj, 6 * vplane, o, 6, tx1 - tx);
      }
    }
  }
}

/* Output row r (4 tiles' columns w[l] = 4 (tx + l) .. + 3) of an F(4x4) group whose first row is o's: the fused
 * epilogue, vector stores for the lanes whose 4 columns lie inside the output, scalar ones (cold) for the rest. */
static void wg4_store_row(const wg_out *o, uint32_t r, const f32x4 w[4], uint32_t cnt, uint32_t ow, const wg_geom *g,
                          const wg_epi *e, const ep_gemm_epi *se, uint32_t co, uint32_t oh) {
  float *yr = o->y0 + (uint64_t)r * g->OW;
  const float *rr = o->r0 ? o->r0 + (uint64_t)r * g->OW : 0;
  for (uint32_t l = 0; l < cnt; l++) {
    const uint32_t c0 = ow + 4 * l;
    if (c0 + 4 <= g->OW) {
      f32x4 v = f32x4_add(w[l], o->bv);
      if (rr) v = f32x4_add(v, f32x4_load(rr + c0));
      if (e->act != EP_ACT_NONE) v = wg_act(v, e->act, o->p0, o->p1);
      f32x4_store(yr + c0, v);
      continue;
    }
    float t[4];
    f32x4_store(t, w[l]);
    for (uint32_t c = 0; c < 4 && c0 + c < g->OW; c++)
      yr[c0 + c] = ep_gemm_epi_scalar(se, t[c], co, (oh + r) * g->OW + c0 + c);
  }
}

/* F(4x4, 3x3) output transform of tiles [tx0, tx1) of tile row ty for output channel co (as wg2_output_row):
 * M A row by row into a small buffer, A^T of it column by column; each output row of the 4 tiles is then a 4x4
 * transpose into 16 consecutive floats. */
static void wg4_output_row(const float *m, uint64_t mplane, float *y, const wg_geom *g, uint32_t co, uint32_t ty,
                           uint32_t tx0, uint32_t tx1, const wg_epi *e, const ep_gemm_epi *se) {
  const uint32_t oh = 4 * ty;
  const wg_out o = wg_out_at(y, g, e, co, oh);
  for (uint32_t tx = tx0; tx < tx1; tx += 4) {
    const float *src = m + (tx - tx0);
    const uint32_t cnt = tx1 - tx < 4 ? tx1 - tx : 4;
    f32x4 ma[6][4];   /* ma[i]: row i of M A */
    EP_COMPACT_LOOP
    for (uint32_t i = 0; i < 6; i++) {
      f32x4 s[6];
      if (cnt == 4) {
        for (uint32_t j = 0; j < 6; j++) s[j] = f32x4_load(src + (6 * i + j) * mplane);
      } else {
        wg_load_partial(s, src + 6 * i * mplane, mplane, 6, cnt);
      }
      wg4_at(ma[i], s[0], s[1], s[2], s[3], s[4], s[5]);
    }
    f32x4 yv[4][4];   /* yv[c][r]: output row r, column c of each tile */
    for (uint32_t c = 0; c < 4; c++) wg4_at(yv[c], ma[0][c], ma[1][c], ma[2][c], ma[3][c], ma[4][c], ma[5][c]);
    const uint32_t ow = 4 * tx;
    EP_COMPACT_LOOP
    for (uint32_t r = 0; r < 4 && oh + r < g->OH; r++) {
      const f32x4 e01 = f32x4_even(yv[0][r], yv[1][r]), o01 = f32x4_odd(yv[0][r], yv[1][r]);
      const f32x4 e23 = f32x4_even(yv[2][r], yv[3][r]), o23 = f32x4_odd(yv[2][r], yv[3][r]);
      const f32x4 w[4] = {f32x4_even(e01, e23), f32x4_even(o01, o23), f32x4_odd(e01, e23), f32x4_odd(o01, o23)};
      wg4_store_row(&o, r, w, cnt, ow, g, e, se, co, oh);
    }
  }
}

/* One block of tiles [t0, t0 + T) of one image, in three parallel phases: input transform (tasks are
 * channel chunks, each thread with its own a-row buffer), the nk GEMMs (tasks are (k, row/column part)),
 * output transform (tasks are output-channel chunks). */
typedef struct {
  wg_geom g;
  const float *xb, *u;
  float *yb, *V, *M, *rows;
  uint64_t vplane, mplane, upanel;
  uint32_t t0, T, N, parts;
  ep_gemm_job gemm;          /* k = 0's; the others differ by their U, V and M offsets */
  const wg_epi *e;
  const ep_gemm_epi *se;
} wg_block;

static void wg_input_task(void *ctx, uint32_t task, uint32_t thread) {
  const wg_block *b = (const wg_block *)ctx;
  const wg_geom *g = &b->g;
  float *rows = b->rows + (uint64_t)thread * g->a * g->rw;
  const uint64_t hw = (uint64_t)g->H * g->W;
  const uint32_t c0 = ep_chunk(g->C, b->parts, task), c1 = ep_chunk(g->C, b->parts, task + 1);
  for (uint32_t c = c0; c < c1; c++) {
    if (b->N > b->T)   /* columns the GEMM reads past the block: zero (never stored) */
      for (uint32_t k = 0; k < g->nk; k++)
        for (uint32_t t = b->T; t < b->N; t++) b->V[k * b->vplane + (uint64_t)c * g->ldv + t] = 0.0f;
    for (uint32_t t = b->t0; t < b->t0 + b->T;) {   /* one tile row segment at a time */
      const uint32_t ty = t / g->TW, tx0 = t % g->TW;
      const uint32_t tx1 = g->TW - tx0 < b->t0 + b->T - t ? g->TW : tx0 + (b->t0 + b->T - t);
      wg_fill_rows(rows, g->rw, b->xb + (uint64_t)c * hw, g, (int64_t)g->m * ty - g->pt, g->m * tx0, g->m * tx1 + 4 * g->m);
      float *v = b->V + (uint64_t)c * g->ldv + (t - b->t0);
      if (g->m == 4) wg4_input_row(v, b->vplane, rows, g->rw, tx0, tx1);
      else wg2_input_row(v, b->vplane, rows, g->rw, tx0, tx1);
      t += tx1 - tx0;
    }
  }
}

static void wg_gemm_task(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const wg_block *b = (const wg_block *)ctx;
  const uint32_t per = b->gemm.mparts * b->gemm.nparts, k = task / per;
  ep_gemm_job j = b->gemm;
  j.a += k * b->upanel;
  j.b += k * b->vplane;
  j.c += k * b->mplane;
  ep_gemm_f32_part(&j, task % per);
}

static void wg_output_task(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const wg_block *b = (const wg_block *)ctx;
  const wg_geom *g = &b->g;
  const uint32_t c0 = ep_chunk(g->Cout, b->parts, task), c1 = ep_chunk(g->Cout, b->parts, task + 1);
  for (uint32_t co = c0; co < c1; co++) {
    for (uint32_t t = b->t0; t < b->t0 + b->T;) {
      const uint32_t ty = t / g->TW, tx0 = t % g->TW;
      const uint32_t tx1 = g->TW - tx0 < b->t0 + b->T - t ? g->TW : tx0 + (b->t0 + b->T - t);
      const float *m = b->M + (uint64_t)co * g->ldv + (t - b->t0);
      if (g->m == 4) wg4_output_row(m, b->mplane, b->yb, g, co, ty, tx0, tx1, b->e, b->se);
      else wg2_output_row(m, b->mplane, b->yb, g, co, ty, tx0, tx1, b->e, b->se);
      /* the out-of-line activation over the rows just written, once per row segment */
      const uint32_t r0 = g->m * ty, r1 = r0 + g->m < g->OH ? r0 + g->m : g->OH, c1 = g->m * tx1;
      ep_gemm_post_rows(&b->e->post, b->yb + (uint64_t)co * g->OH * g->OW, g->OW, r0, r1, g->m * tx0,
                        c1 < g->OW ? c1 : g->OW);
      t += tx1 - tx0;
    }
  }
}

/* The nk GEMMs store plain sums: the bias, residual and activation come in the output transform. */
static const ep_gemm_epi WG_NO_EPI = {1.0f, 1.0f, 0, EP_BIAS_NONE, 0, 0, 0, EP_ACT_NONE, 0.0f, 0.0f};

/* Block-parallel split: task i is the block of `share` tiles starting at i * share, run start to end by one
 * thread in that thread's slice of V and M (planes of stride `share`); the 4-row buffers stay per thread. */
#define WG_MIN_SHARE 16u   /* tiles per block: below that U is streamed too often */
typedef struct {
  const wg_block *blk;
  uint32_t share;
  uint64_t slice;   /* floats of V and M per thread */
} wg_blocks_job;

static void wg_blocks_task(void *ctx, uint32_t task, uint32_t thread) {
  const wg_blocks_job *j = (const wg_blocks_job *)ctx;
  wg_block b = *j->blk;
  const uint32_t ntiles = b.g.TH * b.g.TW;
  b.g.ldv = j->share;
  b.vplane = (uint64_t)b.g.C * j->share;
  b.mplane = (uint64_t)b.g.Cout * j->share;
  b.V += thread * j->slice;
  b.M = b.V + b.g.nk * b.vplane;
  b.t0 = task * j->share;
  b.T = ntiles - b.t0 < j->share ? ntiles - b.t0 : j->share;
  b.N = (b.T + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
  b.parts = 1;
  b.gemm = (ep_gemm_job){b.g.Cout, b.N, b.g.C, b.u, b.V, b.g.ldv, 1, b.M, b.g.ldv, &WG_NO_EPI, 1, 1};
  wg_input_task(&b, 0, thread);
  for (uint32_t k = 0; k < b.g.nk; k++) wg_gemm_task(&b, k, thread);
  wg_output_task(&b, 0, thread);
}

static ep_status wg_run(const ep_node *n, uint32_t m) {
  wg_block blk;
  wg_geom *g = &blk.g;
  *g = (wg_geom){0};   /* check() validated the geometry; zero-init keeps -Wmaybe-uninitialized quiet */
  wg_geometry(n, m, g);
  const float *x = ep_f32(n->in[0]);
  const float *bias = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  const float *res = n->n_in > 3 && n->in[3] ? ep_f32(n->in[3]) : 0;
  float *y = ep_f32(n->out[0]);
  blk.u = ep_f32(n->in[1]);
  blk.V = (float *)(void *)n->scratch;
  blk.vplane = (uint64_t)g->C * g->ldv;
  blk.mplane = (uint64_t)g->Cout * g->ldv;
  blk.M = blk.V + g->nk * blk.vplane;
  blk.rows = blk.M + g->nk * blk.mplane;
  blk.upanel = ep_gemm_packed_a_floats(g->Cout, g->C);
  const uint64_t hw = (uint64_t)g->H * g->W, ohw = (uint64_t)g->OH * g->OW;
  const uint32_t ntiles = g->TH * g->TW;
  /* one a-row buffer per thread: as many input-transform threads as the scratch holds buffers */
  const uint64_t slots = (n->scratch_bytes / 4u - (uint64_t)(blk.rows - blk.V)) / ((uint64_t)g->a * g->rw);
  const uint32_t threads = ep_num_threads(), in_threads = threads < slots ? threads : slots > 1 ? (uint32_t)slots : 1u;
  for (uint32_t b = 0; b < g->B; b++) {
    blk.xb = x + (uint64_t)b * g->C * hw;
    blk.yb = y + (uint64_t)b * g->Cout * ohw;
    const ep_gemm_epi full = {1.0f, 1.0f, bias, bias ? EP_BIAS_ROW : EP_BIAS_NONE, 0,
                              res ? res + (uint64_t)b * g->Cout * ohw : 0, (uint32_t)ohw, n->params[12],
                              ep_param_f32(n, 13), ep_param_f32(n, 14)};
    ep_gemm_epi tiles;
    wg_epi e;
    blk.se = ep_gemm_post_split(&full, &tiles, &e.post);   /* the edge tiles' scalar epilogue */
    e.bias = bias; e.res = full.res; e.act = blk.se->act; e.p0 = full.p0; e.p1 = full.p1;
    blk.e = &e;
    /* Multi-block layers (small U, the packager chose to re-read it) on several threads: each thread runs whole
     * blocks of its own, a share of the scratch each, so its V and M planes stay in its core's cache and no
     * phase waits for another thread. Else the phases of one block are split across the threads. */
    const uint32_t share = g->ldv / in_threads / EP_GEMM_NR * EP_GEMM_NR;
    if (in_threads > 1 && g->nt < ntiles && share >= WG_MIN_SHARE) {
      wg_blocks_job job = {&blk, share, (uint64_t)g->nk * ((uint64_t)g->C + g->Cout) * share};
      ep_parallel_for((ntiles + share - 1) / share, in_threads, wg_blocks_task, &job);
      continue;
    }
    for (blk.t0 = 0; blk.t0 < ntiles; blk.t0 += g->nt) {
      blk.T = ntiles - blk.t0 < g->nt ? ntiles - blk.t0 : g->nt;
      blk.N = (blk.T + EP_GEMM_NR - 1) / EP_GEMM_NR * EP_GEMM_NR;
      blk.parts = in_threads <= 1 ? 1u : (g->C < 4u * in_threads ? g->C : 4u * in_threads);
      ep_parallel_for(blk.parts, in_threads, wg_input_task, &blk);
      blk.gemm = (ep_gemm_job){g->Cout, blk.N, g->C, blk.u, blk.V, g->ldv, 1, blk.M, g->ldv, &WG_NO_EPI, 1, 1};
      /* the nk GEMMs are nk tasks already: split each only for more than 4 threads */
      ep_gemm_split(g->Cout, blk.N, g->C, (threads + 3) / 4, &blk.gemm.mparts, &blk.gemm.nparts);
      ep_parallel_for(g->nk * blk.gemm.mparts * blk.gemm.nparts, EP_MAX_THREADS, wg_gemm_task, &blk);
      blk.parts = threads <= 1 ? 1u : (g->Cout < 4u * threads ? g->Cout : 4u * threads);
      ep_parallel_for(blk.parts, EP_MAX_THREADS, wg_output_task, &blk);
    }
  }
  return EP_OK;
}

ep_status ep_run_WINOGRAD_CONV(const ep_node *n) { return wg_run(n, 2); }
ep_status ep_run_WINOGRAD_CONV_F4(const ep_node *n) { return wg_run(n, 4); }

/* WINOGRAD_FILTER (a prologue kernel): U = G g G^T from the 9 taps of 3x3 filters, so that a plan can carry
 * the taps (9 floats a filter) instead of U ((m+2)^2: 4x more for F(4x4)) and pay the transform once at bind.
 * input T [9, P] (float32, or float16 weights widened here): T[3a + b] = the [Cout x Cin] matrix of tap (a, b),
 * packed like U (any P: the transform is elementwise); output U [(m+2)^2, P]; params (1 word): m = 2 or 4. */
static const float WG_G2[4][3] = {{1.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.0f, 0.0f, 1.0f}};
static const float WG_G4[6][3] = {{1.0f / 4, 0.0f, 0.0f}, {-1.0f / 6, -1.0f / 6, -1.0f / 6}, {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                  {1.0f / 24, 1.0f / 12, 1.0f / 6}, {1.0f / 24, -1.0f / 12, 1.0f / 6}, {0.0f, 0.0f, 1.0f}};

EP_COLD ep_status ep_check_WINOGRAD_FILTER(const ep_node *n) {
  EP_CHECK(n->n_params == 1 && (n->params[0] == 2 || n->params[0] == 4), EP_E_PARAM);
  const ep_tensor *t = n->in[0], *u = n->out[0];
  EP_CHECK(t && u, EP_E_OP);
  EP_CHECK((t->dtype == EP_F32 || t->dtype == EP_F16) && u->dtype == EP_F32, EP_E_DTYPE);
  const int64_t a = n->params[0] + 2;
  EP_CHECK(t->rank == 2 && u->rank == 2 && t->dims[0] == 9 && u->dims[0] == a * a && u->dims[1] == t->dims[1], EP_E_SHAPE);
  return EP_OK;
}

/* Cold: runs once per bind, and memory-bound (9 floats in, up to 36 out). */
EP_COLD ep_status ep_run_WINOGRAD_FILTER(const ep_node *n) {
  const uint32_t m = (uint32_t)n->params[0], a = m + 2;
  const float(*G)[3] = m == 4 ? WG_G4 : WG_G2;
  const uint64_t P = (uint64_t)n->in[0]->dims[1];
  const int half = n->in[0]->dtype == EP_F16;
  const float *t = half ? 0 : ep_f32(n->in[0]);
  const uint16_t *th = (const uint16_t *)(const void *)n->in[0]->data;
  float *u = ep_f32(n->out[0]);
  for (uint64_t p = 0; p < P; p += 4) {
    const uint32_t cnt = P - p < 4 ? (uint32_t)(P - p) : 4u;
    const int full = cnt == 4;
    f32x4 g[9];
    for (uint32_t k = 0; k < 9; k++) {
      if (full && !half) { g[k] = f32x4_load(t + k * P + p); continue; }
      float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (uint32_t l = 0; l < cnt; l++) {
        if (!half) { tmp[l] = t[k * P + p + l]; continue; }
        tmp[l] = (float)ep_small_float_value(EP_F16, th[k * P + p + l]);
      }
      g[k] = f32x4_load(tmp);
    }
    for (uint32_t i = 0; i < a; i++) {
      f32x4 gi[3];   /* row i of G g */
      for (uint32_t b = 0; b < 3; b++)
        gi[b] = f32x4_fma(f32x4_fma(f32x4_mul(f32x4_splat(G[i][0]), g[b]), f32x4_splat(G[i][1]), g[3 + b]),
                          f32x4_splat(G[i][2]), g[6 + b]);
      for (uint32_t j = 0; j < a; j++) {
        const f32x4 v = f32x4_fma(f32x4_fma(f32x4_mul(f32x4_splat(G[j][0]), gi[0]), f32x4_splat(G[j][1]), gi[1]),
                                  f32x4_splat(G[j][2]), gi[2]);
        float *dst = u + (a * i + j) * P + p;
        if (full) { f32x4_store(dst, v); continue; }
        float tmp[4];
        f32x4_store(tmp, v);
        for (uint32_t l = 0; l < cnt; l++) dst[l] = tmp[l];
      }
    }
  }
  return EP_OK;
}
