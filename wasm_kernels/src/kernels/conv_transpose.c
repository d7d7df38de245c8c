/* CONV_TRANSPOSE: float32, 1 to 3 spatial dims, groups, strides, dilations, pads (negative allowed).
 *   in: X [N, Cin, i1..ik], W [Cin, Cout/group, k1..kk] (ONNX layout, used as is), B? [Cout]
 *   out: Y [N, Cout, o1..ok]; output sizes come from Y's shape (output_padding / output_shape resolved
 *   by the packager), so Y[o] = B + sum over i, kernel taps with o = i*stride - pad_begin + tap*dilation.
 *   params: [nsp, group, then per spatial dim: stride, dilation, pad_begin] and optionally per spatial dim
 *   end_adjust: o = stride (i - 1) + dilation (k - 1) + 1 - pad_begin + end_adjust (ep_shape_CONV_TRANSPOSE).
 *   scratch: when the innermost stride s > 1, 4 * s * (o1*..*o(k-1)) * ceil(ok / s) bytes.
 *   Method: scatter, one output channel at a time. For every (tap, block of 4 input channels) the input
 *   rows are scaled and added into the output positions they reach; the valid input range per tap is
 *   computed up front (no per-element bounds tests). With an innermost stride s > 1 the channel is
 *   accumulated phase-split (ox % s, ox / s) in scratch, so every row update is contiguous and vectorized,
 *   then interleaved into Y. */
#include "ep_kernel.h"
#include "ep_vec.h"
#include "shape/conv_linalg.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code (also in the one-step emcc build) */

#define CT_LIMIT (1 << 24)

typedef struct { int64_t s, d, p, in, out, k; } ctdim;

static inline int64_t fdiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
static inline int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }

static ep_status ct_decode(const ep_node *n, ctdim cd[3]) {
  EP_CHECK(n->n_params >= 2, EP_E_PARAM);
  const int32_t nsp = n->params[0];
  /* + nsp words: end_adjust per spatial dim (the output size rule of ep_shape_CONV_TRANSPOSE) */
  EP_CHECK(nsp >= 1 && nsp <= 3 && (n->n_params == 2u + 3u * (uint32_t)nsp || n->n_params == 2u + 4u * (uint32_t)nsp),
           EP_E_PARAM);
  const ep_tensor *x = n->in[0], *w = n->in[1], *y = n->out[0];
  EP_CHECK(x && w, EP_E_SHAPE);
  EP_CHECK(x->rank == 2u + (uint32_t)nsp && w->rank == x->rank && y->rank == x->rank, EP_E_SHAPE);
  for (int i = 0; i < 3; i++) {
    ctdim *c = &cd[i];
    int j = i - (3 - nsp);
    if (j < 0) { c->s = c->d = 1; c->p = 0; c->in = c->out = c->k = 1; continue; }
    const int32_t *q = n->params + 2 + 3 * j;
    EP_CHECK(q[0] >= 1 && q[0] <= CT_LIMIT && q[1] >= 1 && q[1] <= CT_LIMIT && q[2] >= -CT_LIMIT && q[2] <= CT_LIMIT, EP_E_PARAM);
    c->s = q[0]; c->d = q[1]; c->p = q[2];
    c->in = x->dims[2 + j]; c->out = y->dims[2 + j]; c->k = w->dims[2 + j];
    if (n->n_params == 2u + 4u * (uint32_t)nsp)   /* end_adjust agrees with Y */
      EP_CHECK(c->out == c->s * (c->in - 1) + c->d * (c->k - 1) + 1 - c->p + n->params[2 + 3 * nsp + j], EP_E_SHAPE);
  }
  return EP_OK;
}

/* Phase-row length along the innermost dim: ceil(out / stride). */
static inline int64_t ct_q(const ctdim *c) { return (c->out + c->s - 1) / c->s; }
/* Scratch: the phase-split accumulator of one output channel when the innermost stride is > 1. */
static uint64_t ct_scratch(const ctdim cd[3]) {
  return cd[2].s > 1 ? 4u * (uint64_t)cd[2].s * (uint64_t)(cd[0].out * cd[1].out) * (uint64_t)ct_q(&cd[2]) : 0;
}

ep_status ep_check_CONV_TRANSPOSE(const ep_node *n) {
  ctdim cd[3];
  ep_status s = ct_decode(n, cd);
  if (s) return s;
  const ep_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : 0, *y = n->out[0];
  EP_CHECK(x->dtype == EP_F32 && w->dtype == EP_F32 && y->dtype == EP_F32 && (!b || b->dtype == EP_F32), EP_E_DTYPE);
  const int32_t g = n->params[1];
  EP_CHECK(g >= 1 && x->dims[1] % g == 0, EP_E_PARAM);
  EP_CHECK(w->dims[0] == x->dims[1] && y->dims[0] == x->dims[0], EP_E_SHAPE);
  EP_CHECK((uint64_t)y->dims[1] == (uint64_t)g * (uint64_t)w->dims[1], EP_E_SHAPE);
  EP_CHECK(!b || b->numel == (uint64_t)y->dims[1], EP_E_SHAPE);
  EP_CHECK(ct_scratch(cd) <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

uint32_t ep_scratch_CONV_TRANSPOSE(const ep_node *n) {
  ctdim cd[3];
  return ct_decode(n, cd) ? 0 : ep_scratch_u32(ct_scratch(cd));
}

/* Valid input indices [lo, hi) along a dim for kernel tap t. */
static inline void ct_range(const ctdim *c, int64_t t, int64_t *lo, int64_t *hi) {
  const int64_t off = t * c->d - c->p;   /* o = i*s + off */
  int64_t a = cdiv(-off, c->s), z = fdiv(c->out - 1 - off, c->s) + 1;
  if (a < 0) a = 0;
  if (z > c->in) z = c->in;
  if (z < a) z = a;
  *lo = a; *hi = z;
}

/* brow[j] += sum_t wv[t] * xr[t][j], j < cnt */
static void ct_axpy(float *brow, const float *const *xr, const float *wv, int nb, int64_t cnt) {
  f32x4 vw[4];
  for (int t = 0; t < nb; t++) vw[t] = f32x4_splat(wv[t]);
  int64_t j = 0;
  if (nb == 4) {
    for (; j + 4 <= cnt; j += 4) {
      f32x4 a = f32x4_load(brow + j);
      a = f32x4_fma(a, f32x4_load(xr[0] + j), vw[0]);
      a = f32x4_fma(a, f32x4_load(xr[1] + j), vw[1]);
      a = f32x4_fma(a, f32x4_load(xr[2] + j), vw[2]);
      a = f32x4_fma(a, f32x4_load(xr[3] + j), vw[3]);
      f32x4_store(brow + j, a);
    }
  } else {
    for (; j + 4 <= cnt; j += 4) {
      f32x4 a = f32x4_load(brow + j);
      for (int t = 0; t < nb; t++) a = f32x4_fma(a, f32x4_load(xr[t] + j), vw[t]);
      f32x4_store(brow + j, a);
    }
  }
  for (; j < cnt; j++) {
    float a = brow[j];
    for (int t = 0; t < nb; t++) a += wv[t] * xr[t][j];
    brow[j] = a;
  }
}

ep_status ep_run_CONV_TRANSPOSE(const ep_node *n) {
  ctdim cd[3];
  ct_decode(n, cd);
  const ep_tensor *xt = n->in[0], *wt = n->in[1], *bt = n->n_in > 2 ? n->in[2] : 0, *yt = n->out[0];
  const float *x = ep_f32(xt), *w = ep_f32(wt), *bias = bt ? ep_f32(bt) : 0;
  float *y = ep_f32(yt);
  const int64_t N = xt->dims[0], Cin = xt->dims[1], Cout = yt->dims[1], G = n->params[1];
  const int64_t Cig = Cin / G, Cog = wt->dims[1];
  const int64_t I = cd[0].in * cd[1].in * cd[2].in, O = cd[0].out * cd[1].out * cd[2].out;
  const int64_t K = cd[0].k * cd[1].k * cd[2].k;
  const int64_t IY = cd[1].in, IX = cd[2].in, OY = cd[1].out, OX = cd[2].out;
  const int64_t sx = cd[2].s, Q = ct_q(&cd[2]), ROWS = cd[0].out * cd[1].out, PH = ROWS * Q;
  for (int64_t b = 0; b < N; b++) {
    for (int64_t g = 0; g < G; g++) {
      for (int64_t ocl = 0; ocl < Cog; ocl++) {
        const int64_t oc = g * Cog + ocl;
        float *yp = y + (b * Cout + oc) * O;
        const float bv = bias ? bias[oc] : 0.0f;
        /* accumulate into Y directly (stride 1) or into a phase-split copy [ox % sx][row][ox / sx] */
        float *buf = sx == 1 ? yp : (float *)(void *)n->scratch;
        const int64_t buf_n = sx == 1 ? O : sx * PH;
        for (int64_t i = 0; i < buf_n; i++) buf[i] = sx == 1 ? bv : 0.0f;
        if (I == 0 || K == 0 || O == 0) continue;
        for (int64_t kz = 0; kz < cd[0].k; kz++) {
          int64_t z0, z1; ct_range(&cd[0], kz, &z0, &z1);
          for (int64_t ky = 0; ky < cd[1].k; ky++) {
            int64_t y0, y1; ct_range(&cd[1], ky, &y0, &y1);
            for (int64_t kx = 0; kx < cd[2].k; kx++) {
              int64_t x0, x1; ct_range(&cd[2], kx, &x0, &x1);
              if (z0 >= z1 || y0 >= y1 || x0 >= x1) continue;
              const int64_t tap = (kz * cd[1].k + ky) * cd[2].k + kx;
              const int64_t off = kx * cd[2].d - cd[2].p;               /* ox = ix*sx + off */
              const int64_t qoff = fdiv(off, sx), phx = off - qoff * sx; /* ox = (ix + qoff)*sx + phx */
              float *bph = buf + phx * PH;
              for (int64_t ic0 = 0; ic0 < Cig; ic0 += 4) {
                const int nb = (int)(Cig - ic0 < 4 ? Cig - ic0 : 4);
                float wv[4];
                const float *xp[4];
                for (int t = 0; t < nb; t++) {
                  const int64_t ic = g * Cig + ic0 + t;
                  wv[t] = w[(ic * Cog + ocl) * K + tap];
                  xp[t] = x + (b * Cin + ic) * I;
                }
                for (int64_t iz = z0; iz < z1; iz++) {
                  const int64_t oz = iz * cd[0].s + kz * cd[0].d - cd[0].p;
                  for (int64_t iy = y0; iy < y1; iy++) {
                    const int64_t oy = iy * cd[1].s + ky * cd[1].d - cd[1].p;
                    const float *xr[4];
                    for (int t = 0; t < nb; t++) xr[t] = xp[t] + (iz * IY + iy) * IX + x0;
                    ct_axpy(bph + (oz * OY + oy) * Q + x0 + qoff, xr, wv, nb, x1 - x0);
                  }
                }
              }
            }
          }
        }
        if (sx > 1) {   /* interleave the phases back into Y, adding the bias */
          for (int64_t r = 0; r < ROWS; r++) {
            float *yr = yp + r * OX;
            for (int64_t ox = 0; ox < OX; ox++) yr[ox] = bv + buf[(ox % sx) * PH + r * Q + ox / sx];
          }
        }
      }
    }
  }
  return EP_OK;
}
EP_COLD_FILE_END
