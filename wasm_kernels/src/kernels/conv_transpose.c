/* CONV_TRANSPOSE: float32, 1 to 3 spatial dims, groups, strides, dilations, pads (negative allowed).
 *   in: X [N, Cin, i1..ik], W [Cin, Cout/group, k1..kk] (ONNX layout, used as is), B? [Cout]
 *   out: Y [N, Cout, o1..ok]; output sizes come from Y's shape (output_padding / output_shape resolved
 *   by the packager), so Y[o] = B + sum over i, kernel taps with o = i*stride - pad_begin + tap*dilation.
 *   params: [nsp, group, then per spatial dim: stride, dilation, pad_begin]
 *   Method: scatter. For every (output channel, tap, input channel) the input plane is multiplied by one
 *   weight and added into the output positions it reaches; the valid input range per tap is computed
 *   up front (no per-element bounds tests). Contiguous (stride 1) rows are vectorized. */
#include "ep_kernel.h"
#include "ep_vec.h"

#define CT_LIMIT (1 << 24)

typedef struct { int64_t s, d, p, in, out, k; } ctdim;

static inline int64_t fdiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
static inline int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }

static ep_status ct_decode(const ep_node *n, ctdim cd[3]) {
  EP_CHECK(n->n_params >= 2, EP_E_PARAM);
  const int32_t nsp = n->params[0];
  EP_CHECK(nsp >= 1 && nsp <= 3 && n->n_params == 2u + 3u * (uint32_t)nsp, EP_E_PARAM);
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
  }
  return EP_OK;
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
  return EP_OK;
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
  const int64_t sx = cd[2].s;
  for (int64_t b = 0; b < N; b++) {
    for (int64_t oc = 0; oc < Cout; oc++) {
      float *yp = y + (b * Cout + oc) * O;
      const float v = bias ? bias[oc] : 0.0f;
      for (int64_t i = 0; i < O; i++) yp[i] = v;
    }
    if (I == 0 || K == 0) continue;
    for (int64_t g = 0; g < G; g++) {
      for (int64_t ocl = 0; ocl < Cog; ocl++) {
        float *yp = y + (b * Cout + g * Cog + ocl) * O;
        for (int64_t kz = 0; kz < cd[0].k; kz++) {
          int64_t z0, z1; ct_range(&cd[0], kz, &z0, &z1);
          for (int64_t ky = 0; ky < cd[1].k; ky++) {
            int64_t y0, y1; ct_range(&cd[1], ky, &y0, &y1);
            for (int64_t kx = 0; kx < cd[2].k; kx++) {
              int64_t x0, x1; ct_range(&cd[2], kx, &x0, &x1);
              if (z0 >= z1 || y0 >= y1 || x0 >= x1) continue;
              const int64_t tap = (kz * cd[1].k + ky) * cd[2].k + kx;
              const int64_t xoff = kx * cd[2].d - cd[2].p;   /* ox = ix*sx + xoff */
              for (int64_t icl = 0; icl < Cig; icl++) {
                const int64_t ic = g * Cig + icl;
                const float wv = w[(ic * Cog + ocl) * K + tap];
                const float *xp = x + (b * Cin + ic) * I;
                const f32x4 vw = f32x4_splat(wv);
                for (int64_t iz = z0; iz < z1; iz++) {
                  const int64_t oz = iz * cd[0].s + kz * cd[0].d - cd[0].p;
                  for (int64_t iy = y0; iy < y1; iy++) {
                    const int64_t oy = iy * cd[1].s + ky * cd[1].d - cd[1].p;
                    const float *xr = xp + (iz * IY + iy) * IX;
                    float *yr = yp + (oz * OY + oy) * OX;
                    int64_t ix = x0;
                    if (sx == 1) {
                      float *yb = yr + x0 + xoff;   /* in bounds: x0 + xoff >= 0 by ct_range */
                      const float *xb = xr + x0;
                      const int64_t cnt = x1 - x0;
                      int64_t j = 0;
                      for (; j + 4 <= cnt; j += 4) f32x4_store(yb + j, f32x4_fma(f32x4_load(yb + j), f32x4_load(xb + j), vw));
                      ix = x0 + j;
                    }
                    for (; ix < x1; ix++) yr[ix * sx + xoff] += wv * xr[ix];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return EP_OK;
}
