/* RECURRENT: the recurrence of ONNX RNN / GRU / LSTM (docs/plan-format.md "Recurrent kernel").
 *
 * The packager computes the input projections of all steps first with one MATMUL (XW = X W^T + bias), so a
 * step here is H_{t-1} R^T (one GEMM per direction, or a matrix-vector product per row for 1-2 rows) plus the
 * gate arithmetic on rows. Inputs: XW [S, B, D*G*H] (layout 1: [B, S, ...]), RT [D, P, H, 16] (R^T per direction in
 * 16-column panels, zero past each segment's end: the segments are all G*H columns, or GRU without
 * linear_before_reset z,r (2H) then h (H); P = the panels of the segments),
 * rbh? [D, H] (GRU linear_before_reset: Rbh stays inside r * (.)), sequence_lens? int32 [B], initial_h?,
 * initial_c? (Y_h's dims), P? [D, 3H]. Outputs: Y [S, D, B, H] (layout 1: [B, S, D, H]), Y_h, Y_c? [D, B, H]
 * (layout 1: [B, D, H]); Y_h / Y_c hold the running state.
 * Params: kind (0 RNN, 1 GRU, 2 LSTM), direction (0 forward, 1 reverse, 2 bidirectional), H, layout, clip (f32,
 * 0 none), linear_before_reset, input_forget, then 6 words per activation per direction: UNARY code, p0, p1,
 * pre, post, shift (y = post * fn(pre * x) + shift: ScaledTanh and Affine need no codes of their own).
 * Scratch: ep_scratch_RECURRENT. */
#include "gemm.h"
#include "ep_shape.h"
#include "shape/conv_linalg.h"
/* Size first (each .wasm has a 200 KB budget) except hr(), where the time goes: its loops are explicit
 * vector code; the gate loops run over G*H floats per row and step. */
EP_COLD_FILE_BEGIN

enum { K_RNN = 0, K_GRU = 1, K_LSTM = 2 };
#define ACT_WORDS 6u
#define FIXED_WORDS 7u

static inline uint32_t n_gates(int32_t kind) { return kind == K_RNN ? 1u : kind == K_GRU ? 3u : 4u; }
static inline uint32_t n_acts(int32_t kind) { return (uint32_t)kind + 1u; }
static inline uint32_t n_dirs(const ep_node *n) { return n->params[1] == 2 ? 2u : 1u; }
#define PW 16u   /* panel width of RT */
static inline uint32_t n_panels(uint32_t cols) { return (cols + PW - 1) / PW; }
/* Columns of RT's first segment (GRU without linear_before_reset: z and r; the h columns follow in their own panels). */
static inline uint32_t seg1(int32_t kind, int32_t lbr, uint32_t H) { return kind == K_GRU && !lbr ? 2 * H : n_gates(kind) * H; }

/* Scratch floats: A packed (GEMM path), the gate rows [B, G*H], one row of H per batch row. */
static uint64_t scratch_floats(uint64_t B, uint64_t H, uint64_t G) {
  return ep_gemm_packed_a_floats(B, H) + B * G * H + B * H;
}

EP_COLD uint32_t ep_scratch_RECURRENT(const ep_node *n) {
  const ep_tensor *xw = n->in[0];
  if (n->n_params < FIXED_WORDS || !xw || xw->rank != 3 || n->params[0] < 0 || n->params[0] > 2) return 0;
  const uint64_t B = (uint64_t)xw->dims[n->params[3] == 1 ? 0 : 1];
  return ep_scratch_u32(scratch_floats(B, (uint64_t)(uint32_t)n->params[2], n_gates(n->params[0])) * 4u);
}

EP_COLD ep_status ep_check_RECURRENT(const ep_node *n) {
  const int32_t *p = n->params;
  EP_CHECK(n->n_params >= FIXED_WORDS, EP_E_PARAM);
  const int32_t kind = p[0];
  EP_CHECK(kind >= 0 && kind <= 2 && p[1] >= 0 && p[1] <= 2 && p[2] >= 1 && p[2] <= 65536 && (p[3] == 0 || p[3] == 1),
           EP_E_PARAM);
  const float clip = ep_param_f32(n, 4);
  EP_CHECK(clip >= 0.0f && (p[5] == 0 || (kind == K_GRU && p[5] == 1)) && (p[6] == 0 || (kind == K_LSTM && p[6] == 1)),
           EP_E_PARAM);
  const uint32_t D = n_dirs(n), A = n_acts(kind), H = (uint32_t)p[2], G = n_gates(kind);
  EP_CHECK(n->n_params == FIXED_WORDS + ACT_WORDS * A * D, EP_E_PARAM);
  for (uint32_t a = 0; a < A * D; a++) {
    const int32_t fn = p[FIXED_WORDS + ACT_WORDS * a];
    EP_CHECK(ep_unary_nparams(fn) >= 0 && ep_unary_in_place(fn), EP_E_PARAM);   /* ISNAN, TAN..: not in place */
  }
  const ep_tensor *xw = n->in[0], *rt = n->in[1];
  const ep_tensor *rb = n->n_in > 2 ? n->in[2] : 0, *sl = n->n_in > 3 ? n->in[3] : 0;
  const ep_tensor *h0 = n->n_in > 4 ? n->in[4] : 0, *c0 = n->n_in > 5 ? n->in[5] : 0, *pp = n->n_in > 6 ? n->in[6] : 0;
  EP_CHECK(xw && rt && n->out[0] && n->out[1] && (n->n_out == 3) == (kind == K_LSTM) && (kind != K_LSTM || n->out[2]),
           EP_E_OP);
  EP_CHECK(xw->dtype == EP_F32 && rt->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(xw->rank == 3 && (uint64_t)xw->dims[2] == (uint64_t)D * G * H, EP_E_SHAPE);
  const uint32_t s1 = seg1(kind, p[5], H), np = n_panels(s1) + n_panels(G * H - s1);
  EP_CHECK(rt->rank == 4 && (uint32_t)rt->dims[0] == D && (uint32_t)rt->dims[1] == np && (uint32_t)rt->dims[2] == H &&
           rt->dims[3] == (int32_t)PW, EP_E_SHAPE);
  EP_CHECK(ep_shape_agrees(n, ep_shape_RECURRENT) == EP_OK, EP_E_SHAPE);
  for (uint32_t k = 0; k < n->n_out; k++) EP_CHECK(n->out[k]->dtype == EP_F32, EP_E_DTYPE);
  const uint32_t B = (uint32_t)xw->dims[p[3] == 1 ? 0 : 1];
  EP_CHECK((rb != 0) == (p[5] == 1), EP_E_PARAM);
  if (rb) EP_CHECK(rb->dtype == EP_F32 && rb->rank == 2 && (uint32_t)rb->dims[0] == D && (uint32_t)rb->dims[1] == H, EP_E_SHAPE);
  if (sl) EP_CHECK(sl->dtype == EP_I32 && sl->numel == B, EP_E_SHAPE);
  if (h0) EP_CHECK(h0->dtype == EP_F32 && ep_same_shape(h0, n->out[1]), EP_E_SHAPE);
  if (c0) EP_CHECK(kind == K_LSTM && c0->dtype == EP_F32 && ep_same_shape(c0, n->out[1]), EP_E_SHAPE);
  if (pp) EP_CHECK(kind == K_LSTM && pp->dtype == EP_F32 && pp->numel == (uint64_t)D * 3u * H, EP_E_SHAPE);
  EP_CHECK(n->scratch_bytes >= ep_scratch_RECURRENT(n), EP_E_PARAM);
  return EP_OK;
}

EP_COLD_FILE_END   /* hr: speed (its accumulators must stay in registers) */

/* C [B, N] (row stride ldc) = A [B, K] (rows rs floats apart) . R^T's N columns in 16-column panels ([K, 16] each).
 * 1-2 rows: four vectors of a panel per row, its K x 16 floats streamed once (a GEMM tile of EP_GEMM_MR rows would
 * mostly multiply zeros); more: the shared micro-kernel per panel (b_padded: panels are zero past N). */
static void hr(uint32_t B, uint32_t N, uint32_t K, const float *a, uint32_t rs, const float *panels, float *c,
               uint32_t ldc, float *packed) {
  const ep_gemm_epi e = {1.0f, 0.0f, 0, EP_BIAS_NONE, 0, 0, 0, EP_ACT_NONE, 0.0f, 0.0f};
  if (B >= 3) ep_gemm_pack_a(B, K, a, rs, 1, packed);
  for (uint32_t j = 0; j < N; j += 2 * PW, panels += (uint64_t)K * 2 * PW) {
    const uint32_t w = N - j < 2 * PW ? N - j : 2 * PW, two = w > PW;   /* two panels at a time: 8 accumulators */
    if (B >= 3) {
      ep_gemm_f32(B, w < PW ? w : PW, K, packed, panels, PW, 1, c + j, ldc, &e);
      if (two) ep_gemm_f32(B, w - PW, K, packed, panels + (uint64_t)K * PW, PW, 1, c + j + PW, ldc, &e);
      continue;
    }
    for (uint32_t b = 0; b < B; b++) {
      const float *h = a + (uint64_t)b * rs, *p0 = panels, *p1 = panels + (two ? (uint64_t)K * PW : 0);
      f32x4 acc[8];
      for (uint32_t i = 0; i < 8; i++) acc[i] = f32x4_zero();
      for (uint32_t k = 0; k < K; k++, p0 += PW, p1 += PW) {
        const f32x4 s = f32x4_splat(h[k]);
        for (uint32_t i = 0; i < 4; i++) acc[i] = f32x4_fma(acc[i], s, f32x4_load(p0 + 4 * i));
        for (uint32_t i = 0; i < 4; i++) acc[4 + i] = f32x4_fma(acc[4 + i], s, f32x4_load(p1 + 4 * i));
      }
      float t[2 * PW];
      for (uint32_t i = 0; i < 8; i++) f32x4_store(t + 4 * i, acc[i]);
      ep_memcpy(c + (uint64_t)b * ldc + j, t, w * 4u);
    }
  }
}

EP_COLD_FILE_BEGIN

/* An activation on a gate's row: clip (gate inputs only), then post * fn(pre * x) + shift. */
static void act(float *x, uint32_t n, const int32_t *w, float clip) {
  union { int32_t i; float f; } pre = {w[3]}, post = {w[4]}, shift = {w[5]};
  if (clip > 0.0f || pre.f != 1.0f) {
    EP_COMPACT_LOOP
    for (uint32_t i = 0; i < n; i++) {
      float v = x[i];
      if (clip > 0.0f) v = v < -clip ? -clip : v > clip ? clip : v;
      x[i] = v * pre.f;
    }
  }
  ep_apply_unary(x, n, w[0], w + 1);
  if (post.f != 1.0f || shift.f != 0.0f) {
    EP_COMPACT_LOOP
    for (uint32_t i = 0; i < n; i++) x[i] = x[i] * post.f + shift.f;
  }
}

static void add_row(float *g, const float *x, uint32_t n) {
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) f32x4_store(g + i, f32x4_add(f32x4_load(g + i), f32x4_load(x + i)));
  for (; i < n; i++) g[i] += x[i];
}

ep_status ep_run_RECURRENT(const ep_node *n) {
  const int32_t *p = n->params;
  const int32_t kind = p[0], dir = p[1], lay = p[3], lbr = p[5], coupled = p[6];
  const float clip = ep_param_f32(n, 4);
  const ep_tensor *xt = n->in[0];
  const uint32_t D = n_dirs(n), H = (uint32_t)p[2], G = n_gates(kind), GH = G * H, A = n_acts(kind);
  const uint32_t S = (uint32_t)xt->dims[lay ? 1 : 0], B = (uint32_t)xt->dims[lay ? 0 : 1];
  const float *xw = ep_f32(xt), *rt = ep_f32(n->in[1]);
  const float *rb = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  const int32_t *sl = n->n_in > 3 && n->in[3] ? (const int32_t *)(const void *)n->in[3]->data : 0;
  const ep_tensor *h0 = n->n_in > 4 ? n->in[4] : 0, *c0 = n->n_in > 5 ? n->in[5] : 0;
  const float *pp = n->n_in > 6 && n->in[6] ? ep_f32(n->in[6]) : 0;
  float *y = ep_f32(n->out[0]), *hs = ep_f32(n->out[1]), *cs = kind == K_LSTM ? ep_f32(n->out[2]) : 0;
  const uint32_t hbytes = (uint32_t)n->out[1]->numel * 4u;
  if (sl)
    for (uint32_t b = 0; b < B; b++) EP_CHECK(sl[b] >= 0 && (uint32_t)sl[b] <= S, EP_E_INDEX);
  if (h0) ep_memcpy(hs, h0->data, hbytes); else ep_memset(hs, 0, hbytes);
  if (cs) { if (c0) ep_memcpy(cs, c0->data, hbytes); else ep_memset(cs, 0, hbytes); }
  float *packed = (float *)(void *)n->scratch;
  float *gates = packed + ep_gemm_packed_a_floats(B, H), *tmp = gates + (uint64_t)B * GH;
  /* strides (floats) of the state rows, XW rows and Y rows of one direction across batch rows */
  const uint32_t hrs = lay ? D * H : H;
  const uint64_t xrs = lay ? (uint64_t)S * D * GH : (uint64_t)D * GH, yrs = lay ? (uint64_t)S * D * H : H;
  for (uint32_t s = 0; s < S; s++) {
    for (uint32_t d = 0; d < D; d++) {
      const uint32_t t = (dir == 1 || d == 1) ? S - 1 - s : s;
      const int32_t *w = p + FIXED_WORDS + ACT_WORDS * A * d;   /* f, g, h of this direction */
      float *hd = hs + (lay ? d * H : (uint64_t)d * B * H), *cd = cs ? cs + (hd - hs) : 0;
      const float *xd = xw + (lay ? (uint64_t)t * D * GH : (uint64_t)t * B * D * GH) + (uint64_t)d * GH;
      float *yd = y + (lay ? ((uint64_t)t * D + d) * H : ((uint64_t)t * D + d) * B * H);
      const uint32_t s1 = seg1(kind, lbr, H), p1 = n_panels(s1);
      const float *rtd = rt + (uint64_t)d * (p1 + n_panels(GH - s1)) * H * PW;
      /* GRU without linear_before_reset multiplies r * H_{t-1} by Rh: z and r first, h after them */
      hr(B, s1, H, hd, hrs, rtd, gates, GH, packed);
      for (uint32_t b = 0; b < B; b++) {
        float *g = gates + (uint64_t)b * GH, *hb = hd + (uint64_t)b * hrs, *yb = yd + b * yrs;
        const float *x = xd + b * xrs;
        if (sl && t >= (uint32_t)sl[b]) { ep_memset(yb, 0, H * 4u); continue; }
        if (kind == K_RNN) {
          add_row(g, x, H);
          act(g, H, w, clip);
          ep_memcpy(hb, g, H * 4u);
          ep_memcpy(yb, hb, H * 4u);
        } else if (kind == K_LSTM) {
          float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H, *cb = cd + (uint64_t)b * hrs;
          const float *pd = pp ? pp + (uint64_t)d * 3 * H : 0;
          add_row(g, x, GH);
          if (pd) for (uint32_t i = 0; i < H; i++) { gi[i] += pd[i] * cb[i]; gf[i] += pd[2 * H + i] * cb[i]; }
          act(gi, H, w, clip);
          if (coupled) for (uint32_t i = 0; i < H; i++) gf[i] = 1.0f - gi[i];
          else act(gf, H, w, clip);
          act(gc, H, w + ACT_WORDS, clip);
          for (uint32_t i = 0; i < H; i++) cb[i] = gf[i] * cb[i] + gi[i] * gc[i];
          if (pd) for (uint32_t i = 0; i < H; i++) go[i] += pd[H + i] * cb[i];
          act(go, H, w, clip);
          float *tc = tmp + (uint64_t)b * H;
          ep_memcpy(tc, cb, H * 4u);
          act(tc, H, w + 2 * ACT_WORDS, 0.0f);
          for (uint32_t i = 0; i < H; i++) hb[i] = go[i] * tc[i];
          ep_memcpy(yb, hb, H * 4u);
        } else {
          add_row(g, x, 2 * H);
          act(g, 2 * H, w, clip);   /* z and r share f */
          if (lbr) {
            const float *rbd = rb + (uint64_t)d * H, *gr = g + H;
            float *gh = g + 2 * H;
            for (uint32_t i = 0; i < H; i++) gh[i] = x[2 * H + i] + gr[i] * (gh[i] + rbd[i]);
          } else {
            float *rh = tmp + (uint64_t)b * H;
            for (uint32_t i = 0; i < H; i++) rh[i] = g[H + i] * hb[i];
          }
        }
      }
      if (kind == K_GRU) {
        if (!lbr) hr(B, H, H, tmp, H, rtd + (uint64_t)p1 * H * PW, gates + 2 * H, GH, packed);
        for (uint32_t b = 0; b < B; b++) {
          if (sl && t >= (uint32_t)sl[b]) continue;
          float *g = gates + (uint64_t)b * GH, *hb = hd + (uint64_t)b * hrs, *gh = g + 2 * H;
          if (!lbr) add_row(gh, xd + b * xrs + 2 * H, H);
          act(gh, H, w + ACT_WORDS, clip);
          for (uint32_t i = 0; i < H; i++) hb[i] = (1.0f - g[i]) * gh[i] + g[i] * hb[i];
          ep_memcpy(yd + b * yrs, hb, H * 4u);
        }
      }
    }
  }
  return EP_OK;
}
EP_COLD_FILE_END
