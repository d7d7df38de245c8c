/* BATCHNORM, LAYERNORM, SOFTMAX: float32.
 *
 * BATCHNORM  inference form, X [N, C, ...] -> Y (same shape), per channel y = x * a[c] + b[c].
 *   3 inputs: X, a [C], b [C] (folded at package time from scale/B/mean/var/epsilon);   params: none.
 *   5 inputs: X, scale [C], B [C], mean [C], var [C] (not constant at package time);    params: [epsilon].
 * LAYERNORM  X -> Y, normalized over the trailing dims from `axis`: rows = prod(dims[:axis]), D = prod(dims[axis:]).
 *   inputs: X, scale? (D elements), bias? (D elements); outputs: Y, Mean? (rows), InvStdDev? (rows).
 *   params: [axis, epsilon]. y = (x - mean) * 1/sqrt(var + eps) * scale + bias, var = mean((x - mean)^2).
 * SOFTMAX    X -> Y (same shape), along the dims [a0, a1): outer = prod(dims[:a0]), L = prod(dims[a0:a1]),
 *   inner = prod(dims[a1:]).  params: [kind, a0, a1], kind 0 softmax, 1 log-softmax.
 *   (ONNX opset < 13 coerces to 2-D at axis: a1 = rank; opset >= 13: a1 = axis + 1.) */
#include "ep_kernel.h"
#include "ep_vec.h"
#include "ep_math.h"
#include "ep_math_vec.h"
#include "ep_parallel.h"
#include "ep_softmax.h"

static inline float neg_inf(void) { union { uint32_t u; float f; } v; v.u = 0xff800000u; return v.f; }

/* ---- BATCHNORM ---- */

EP_COLD ep_status ep_check_BATCHNORM(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(n->n_in == 3 || n->n_in == 5, EP_E_OP);
  EP_CHECK(n->n_params == (n->n_in == 3 ? 0u : 1u), EP_E_PARAM);
  EP_CHECK(x && x->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(x->rank >= 2 && ep_same_shape(x, y), EP_E_SHAPE);
  for (uint32_t i = 1; i < n->n_in; i++) {
    const ep_tensor *t = n->in[i];
    EP_CHECK(t != 0, EP_E_SHAPE);
    EP_CHECK(t->dtype == EP_F32, EP_E_DTYPE);
    EP_CHECK(t->numel == (uint64_t)x->dims[1], EP_E_SHAPE);
  }
  return EP_OK;
}

ep_status ep_run_BATCHNORM(const ep_node *n) {
  const ep_tensor *xt = n->in[0];
  const float *x = ep_f32(xt);
  float *y = ep_f32(n->out[0]);
  const uint64_t N = (uint64_t)xt->dims[0], C = (uint64_t)xt->dims[1];
  if (N * C == 0) return EP_OK;
  const uint64_t S = xt->numel / (N * C);
  const float eps = n->n_in == 5 ? ep_param_f32(n, 0) : 0.0f;
  for (uint64_t b = 0; b < N; b++) {
    for (uint64_t c = 0; c < C; c++) {
      float a, o;
      if (n->n_in == 3) {
        a = ep_f32(n->in[1])[c];
        o = ep_f32(n->in[2])[c];
      } else {
        a = ep_f32(n->in[1])[c] / ep_sqrtf(ep_f32(n->in[4])[c] + eps);
        o = ep_f32(n->in[2])[c] - ep_f32(n->in[3])[c] * a;
      }
      const float *xp = x + (b * C + c) * S;
      float *yp = y + (b * C + c) * S;
      const f32x4 va = f32x4_splat(a), vo = f32x4_splat(o);
      uint64_t i = 0;
      for (; i + 8 <= S; i += 8) {
        f32x4_store(yp + i, f32x4_fma(vo, f32x4_load(xp + i), va));
        f32x4_store(yp + i + 4, f32x4_fma(vo, f32x4_load(xp + i + 4), va));
      }
      for (; i + 4 <= S; i += 4) f32x4_store(yp + i, f32x4_fma(vo, f32x4_load(xp + i), va));
      for (; i < S; i++) yp[i] = xp[i] * a + o;
    }
  }
  return EP_OK;
}

/* ---- LAYERNORM ---- */

EP_COLD static ep_status ln_sizes(const ep_node *n, uint64_t *rows, uint64_t *D) {
  const ep_tensor *x = n->in[0];
  EP_CHECK(x && n->n_params == 2, EP_E_PARAM);
  int32_t axis = n->params[0];
  EP_CHECK(axis >= 0 && (uint32_t)axis < x->rank, EP_E_PARAM);
  uint64_t r = 1, d = 1;
  for (uint32_t i = 0; i < x->rank; i++) {
    if (i < (uint32_t)axis) r *= (uint64_t)x->dims[i]; else d *= (uint64_t)x->dims[i];
  }
  *rows = r; *D = d;
  return EP_OK;
}

EP_COLD ep_status ep_check_LAYERNORM(const ep_node *n) {
  uint64_t rows, D;
  ep_status s = ln_sizes(n, &rows, &D);
  if (s) return s;
  const ep_tensor *x = n->in[0];
  EP_CHECK(x->dtype == EP_F32, EP_E_DTYPE);
  for (uint32_t i = 1; i < n->n_in; i++) {
    const ep_tensor *t = n->in[i];
    if (!t) continue;
    EP_CHECK(t->dtype == EP_F32, EP_E_DTYPE);
    EP_CHECK(t->numel == D, EP_E_SHAPE);
  }
  EP_CHECK(n->out[0]->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(ep_same_shape(x, n->out[0]), EP_E_SHAPE);
  for (uint32_t i = 1; i < n->n_out; i++) {
    EP_CHECK(n->out[i]->dtype == EP_F32, EP_E_DTYPE);
    EP_CHECK(n->out[i]->numel == rows, EP_E_SHAPE);
  }
  return EP_OK;
}

ep_status ep_run_LAYERNORM(const ep_node *n) {
  uint64_t rows = 0, D = 0;
  ln_sizes(n, &rows, &D);
  const float eps = ep_param_f32(n, 1);
  const float *x = ep_f32(n->in[0]);
  const float *g = n->n_in > 1 && n->in[1] ? ep_f32(n->in[1]) : 0;
  const float *bb = n->n_in > 2 && n->in[2] ? ep_f32(n->in[2]) : 0;
  float *y = ep_f32(n->out[0]);
  float *mean_out = n->n_out > 1 ? ep_f32(n->out[1]) : 0;
  float *inv_out = n->n_out > 2 ? ep_f32(n->out[2]) : 0;
  const float invD = 1.0f / (float)D;
  for (uint64_t r = 0; r < rows; r++) {
    const float *xp = x + r * D;
    float *yp = y + r * D;
    uint64_t i = 0;
    f32x4 s0 = f32x4_zero(), s1 = f32x4_zero();
    for (; i + 8 <= D; i += 8) { s0 = f32x4_add(s0, f32x4_load(xp + i)); s1 = f32x4_add(s1, f32x4_load(xp + i + 4)); }
    float sum = f32x4_hsum(f32x4_add(s0, s1));
    EP_COMPACT_LOOP for (; i < D; i++) sum += xp[i];   /* tails (< 8 elements) stay loops: size */
    const float mean = sum * invD;
    const f32x4 vm = f32x4_splat(mean);
    s0 = f32x4_zero(); s1 = f32x4_zero();
    for (i = 0; i + 8 <= D; i += 8) {
      f32x4 a = f32x4_sub(f32x4_load(xp + i), vm), b = f32x4_sub(f32x4_load(xp + i + 4), vm);
      s0 = f32x4_fma(s0, a, a); s1 = f32x4_fma(s1, b, b);
    }
    float ss = f32x4_hsum(f32x4_add(s0, s1));
    EP_COMPACT_LOOP for (; i < D; i++) { float d = xp[i] - mean; ss += d * d; }
    const float inv = 1.0f / ep_sqrtf(ss * invD + eps);
    const f32x4 vi = f32x4_splat(inv);
    i = 0;
    if (g && bb) {
      for (; i + 4 <= D; i += 4)
        f32x4_store(yp + i, f32x4_fma(f32x4_load(bb + i), f32x4_mul(f32x4_sub(f32x4_load(xp + i), vm), vi), f32x4_load(g + i)));
      EP_COMPACT_LOOP for (; i < D; i++) yp[i] = (xp[i] - mean) * inv * g[i] + bb[i];
    } else if (g) {
      for (; i + 4 <= D; i += 4)
        f32x4_store(yp + i, f32x4_mul(f32x4_mul(f32x4_sub(f32x4_load(xp + i), vm), vi), f32x4_load(g + i)));
      EP_COMPACT_LOOP for (; i < D; i++) yp[i] = (xp[i] - mean) * inv * g[i];
    } else {
      for (; i + 4 <= D; i += 4) {
        f32x4 v = f32x4_mul(f32x4_sub(f32x4_load(xp + i), vm), vi);
        f32x4_store(yp + i, bb ? f32x4_add(v, f32x4_load(bb + i)) : v);
      }
      EP_COMPACT_LOOP for (; i < D; i++) yp[i] = (xp[i] - mean) * inv + (bb ? bb[i] : 0.0f);
    }
    if (mean_out) mean_out[r] = mean;
    if (inv_out) inv_out[r] = inv;
  }
  return EP_OK;
}

/* ---- SOFTMAX ---- */

EP_COLD static ep_status sm_sizes(const ep_node *n, uint64_t *outer, uint64_t *L, uint64_t *inner) {
  const ep_tensor *x = n->in[0];
  EP_CHECK(x && n->n_params == 3 && (n->params[0] == 0 || n->params[0] == 1), EP_E_PARAM);
  int32_t a0 = n->params[1], a1 = n->params[2];
  EP_CHECK(a0 >= 0 && a0 < a1 && (uint32_t)a1 <= x->rank, EP_E_PARAM);
  uint64_t o = 1, l = 1, in = 1;
  for (uint32_t i = 0; i < x->rank; i++) {
    uint64_t d = (uint64_t)x->dims[i];
    if (i < (uint32_t)a0) o *= d; else if (i < (uint32_t)a1) l *= d; else in *= d;
  }
  *outer = o; *L = l; *inner = in;
  return EP_OK;
}

EP_COLD ep_status ep_check_SOFTMAX(const ep_node *n) {
  uint64_t o, l, in;
  ep_status s = sm_sizes(n, &o, &l, &in);
  if (s) return s;
  EP_CHECK(n->in[0]->dtype == EP_F32 && n->out[0]->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(ep_same_shape(n->in[0], n->out[0]), EP_E_SHAPE);
  return EP_OK;
}

/* One contiguous row of L. Several accumulators keep the max/sum chains from serializing. */
void ep_softmax_row(int logsm, const float *x, float *y, uint64_t L) {
  uint64_t i = 0;
  float m = neg_inf();
  if (L >= 16) {
    f32x4 m0 = f32x4_load(x), m1 = f32x4_load(x + 4), m2 = f32x4_load(x + 8), m3 = f32x4_load(x + 12);
    for (i = 16; i + 16 <= L; i += 16) {
      m0 = f32x4_max(m0, f32x4_load(x + i)); m1 = f32x4_max(m1, f32x4_load(x + i + 4));
      m2 = f32x4_max(m2, f32x4_load(x + i + 8)); m3 = f32x4_max(m3, f32x4_load(x + i + 12));
    }
    m = f32x4_hmax(f32x4_max(f32x4_max(m0, m1), f32x4_max(m2, m3)));
  }
  /* tails (< 4 vectors or elements) stay loops: size */
  EP_COMPACT_LOOP for (; i + 4 <= L; i += 4) { float t = f32x4_hmax(f32x4_load(x + i)); m = t > m ? t : m; }
  EP_COMPACT_LOOP for (; i < L; i++) m = x[i] > m ? x[i] : m;
  const f32x4 vmax = f32x4_splat(m);
  f32x4 s0 = f32x4_zero(), s1 = f32x4_zero();
  float sum = 0.0f;
  for (i = 0; i + 8 <= L; i += 8) {
    f32x4 e0 = ep_expf4_nonpos_hot(f32x4_sub(f32x4_load(x + i), vmax));   /* x - max <= 0 (or NaN) */
    f32x4 e1 = ep_expf4_nonpos_hot(f32x4_sub(f32x4_load(x + i + 4), vmax));
    s0 = f32x4_add(s0, e0); s1 = f32x4_add(s1, e1);
    if (!logsm) { f32x4_store(y + i, e0); f32x4_store(y + i + 4, e1); }
  }
  for (; i + 4 <= L; i += 4) {   /* at most one vector per row: the call keeps the code small */
    f32x4 e = ep_expf4(f32x4_sub(f32x4_load(x + i), vmax));
    s0 = f32x4_add(s0, e);
    if (!logsm) f32x4_store(y + i, e);
  }
  EP_COMPACT_LOOP for (; i < L; i++) { float e = ep_expf(x[i] - m); sum += e; if (!logsm) y[i] = e; }
  sum += f32x4_hsum(f32x4_add(s0, s1));
  if (logsm) {
    const float sh = m + ep_logf(sum);
    const f32x4 vsh = f32x4_splat(sh);
    for (i = 0; i + 4 <= L; i += 4) f32x4_store(y + i, f32x4_sub(f32x4_load(x + i), vsh));
    EP_COMPACT_LOOP for (; i < L; i++) y[i] = x[i] - sh;
  } else {
    const float r = 1.0f / sum;
    const f32x4 vr = f32x4_splat(r);
    for (i = 0; i + 4 <= L; i += 4) f32x4_store(y + i, f32x4_mul(f32x4_load(y + i), vr));
    EP_COMPACT_LOOP for (; i < L; i++) y[i] *= r;
  }
}

/* 4 interleaved columns (stride `inner`) of length L, vectorized across the columns. */
/* Softmax off the last axis: rare, optimized for size. */
EP_COLD static void softmax_cols4(int logsm, const float *x, float *y, uint64_t L, uint64_t inner) {
  f32x4 vm = f32x4_splat(neg_inf());
  for (uint64_t l = 0; l < L; l++) vm = f32x4_max(vm, f32x4_load(x + l * inner));
  f32x4 vs = f32x4_zero();
  for (uint64_t l = 0; l < L; l++) {
    f32x4 e = ep_expf4(f32x4_sub(f32x4_load(x + l * inner), vm));   /* softmax off the last axis: rare, kept small */
    vs = f32x4_add(vs, e);
    if (!logsm) f32x4_store(y + l * inner, e);
  }
  if (logsm) {
    float s[4], m[4];
    f32x4_store(s, vs); f32x4_store(m, vm);
    for (int j = 0; j < 4; j++) s[j] = m[j] + ep_logf(s[j]);
    const f32x4 vsh = f32x4_load(s);
    for (uint64_t l = 0; l < L; l++) f32x4_store(y + l * inner, f32x4_sub(f32x4_load(x + l * inner), vsh));
  } else {
    const f32x4 vr = f32x4_div(f32x4_splat(1.0f), vs);
    for (uint64_t l = 0; l < L; l++) f32x4_store(y + l * inner, f32x4_mul(f32x4_load(y + l * inner), vr));
  }
}

/* One strided column (scalar). */
EP_COLD static void softmax_col(int logsm, const float *x, float *y, uint64_t L, uint64_t inner) {
  float m = neg_inf(), sum = 0.0f;
  for (uint64_t l = 0; l < L; l++) m = x[l * inner] > m ? x[l * inner] : m;
  for (uint64_t l = 0; l < L; l++) { float e = ep_expf(x[l * inner] - m); sum += e; if (!logsm) y[l * inner] = e; }
  if (logsm) { const float sh = m + ep_logf(sum); for (uint64_t l = 0; l < L; l++) y[l * inner] = x[l * inner] - sh; }
  else { const float r = 1.0f / sum; for (uint64_t l = 0; l < L; l++) y[l * inner] *= r; }
}

typedef struct { const float *x; float *y; uint64_t L, inner; int logsm; } sm_job;

/* Blocks [b, e) of the outer dims: each block alone, so any split across threads gives the same bits. */
static void softmax_range(void *ctx, uint64_t b, uint64_t e) {
  const sm_job *s = (const sm_job *)ctx;
  const uint64_t L = s->L, inner = s->inner;
  for (uint64_t o = b; o < e; o++) {
    const float *xb = s->x + o * L * inner;
    float *yb = s->y + o * L * inner;
    if (inner == 1) { ep_softmax_row(s->logsm, xb, yb, L); continue; }
    uint64_t j = 0;
    for (; j + 4 <= inner; j += 4) softmax_cols4(s->logsm, xb + j, yb + j, L, inner);
    for (; j < inner; j++) softmax_col(s->logsm, xb + j, yb + j, L, inner);
  }
}

ep_status ep_run_SOFTMAX(const ep_node *n) {
  uint64_t outer = 0, L = 0, inner = 0;
  sm_sizes(n, &outer, &L, &inner);
  if (L == 0 || inner == 0) return EP_OK;   /* an empty tensor */
  sm_job s = {ep_f32(n->in[0]), ep_f32(n->out[0]), L, inner, n->params[0]};
  ep_parallel_range(outer, 4096u / (L * inner) + 1u, 1u, softmax_range, &s);
  return EP_OK;
}
