/* POOL and GLOBAL_POOL: float32, layout N x C x spatial (1 to 3 spatial dims).
 *
 * POOL   in: X [N, C, s1..sk]   out: Y [N, C, o1..ok]     k = nsp in 1..3
 *   params: [kind, nsp, count_include_pad, p,  then per spatial dim: kernel, stride, dilation, pad_begin, pad_end]
 *   and optionally ceil_mode (0/1): the output size rule of ep_shape_POOL (src/shape/shape_conv.c).
 *   kind 0 max, 1 average, 2 Lp (integer p in 1..64). Output sizes come from Y's shape; the window of output o along a
 *   dim starts at o*stride - pad_begin and takes `kernel` taps `dilation` apart. Taps outside the input are
 *   skipped; the average divides by the taps inside the input (count_include_pad = 0) or inside
 *   [-pad_begin, in + pad_end) (count_include_pad = 1). A window with no tap inside the input gives
 *   -FLT_MAX (max) or 0 (average, Lp), as onnxruntime. Max propagates NaN: a window holding a NaN gives NaN
 *   (numpy and the ONNX reference; onnxruntime's MLAS keeps a NaN only when it is the window's last tap).
 *   scratch: one row of 4 * (W + 8) bytes (W = innermost input dim) per thread slot, at least one; the node runs on
 *   at most as many threads as it holds rows.
 *   Method: the window's rows (outer spatial dims) are combined into one scratch row (contiguous, vectorized),
 *   then a horizontal pass pools that row; strides 1 and 2 run 4 outputs at a time.
 *
 * GLOBAL_POOL  in: X [N, C, ...]  out: Y [N, C, 1, ...]   params: [kind] 0 max, 1 average. */
#include "ep_kernel.h"
#include "ep_vec.h"
#include "ep_math.h"
#include "ep_parallel.h"
#include "shape/conv_linalg.h"

enum { POOL_MAX = 0, POOL_AVG = 1, POOL_LP = 2 };
#define POOL_LIMIT (1 << 24)   /* bound on kernel, stride, dilation, pads: keeps index math far from overflow */

/* olo..ohi: the outputs whose window lies inside the input (none when olo > ohi), found once per node:
 * the per-row division it takes costs as much as pooling a short row. */
typedef struct { int64_t k, s, d, pb, pe, in, out, olo, ohi; } pdim;

static inline float neg_inf(void) { union { uint32_t u; float f; } v; v.u = 0xff800000u; return v.f; }
static inline float lowest(void) { union { uint32_t u; float f; } v; v.u = 0xff7fffffu; return v.f; }   /* -FLT_MAX */
static inline int64_t fdiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
static inline int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }

/* Decode POOL params into 3 dims (missing leading spatial dims are 1-sized, kernel 1). */
EP_COLD static ep_status pool_decode(const ep_node *n, pdim pd[3]) {
  EP_CHECK(n->n_params >= 4, EP_E_PARAM);
  const int32_t *p = n->params;
  int32_t nsp = p[1];
  EP_CHECK(nsp >= 1 && nsp <= 3, EP_E_PARAM);
  /* + 1 word: ceil_mode (0/1), which only the output size depends on (ep_shape_POOL) */
  EP_CHECK(n->n_params == 4u + 5u * (uint32_t)nsp || (n->n_params == 5u + 5u * (uint32_t)nsp &&
           (p[n->n_params - 1] == 0 || p[n->n_params - 1] == 1)), EP_E_PARAM);
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && x->rank == 2u + (uint32_t)nsp && y->rank == x->rank, EP_E_SHAPE);
  for (int i = 0; i < 3; i++) {
    pdim *d = &pd[i];
    int j = i - (3 - nsp);   /* spatial index, < 0: padding dim */
    if (j < 0) { d->k = d->s = d->d = 1; d->pb = d->pe = 0; d->in = d->out = 1; continue; }
    const int32_t *q = p + 4 + 5 * j;
    EP_CHECK(q[0] >= 1 && q[0] <= POOL_LIMIT && q[1] >= 1 && q[1] <= POOL_LIMIT && q[2] >= 1 && q[2] <= POOL_LIMIT, EP_E_PARAM);
    EP_CHECK(q[3] >= 0 && q[3] <= POOL_LIMIT && q[4] >= 0 && q[4] <= POOL_LIMIT, EP_E_PARAM);
    d->k = q[0]; d->s = q[1]; d->d = q[2]; d->pb = q[3]; d->pe = q[4];
    d->in = x->dims[2 + j]; d->out = y->dims[2 + j];
  }
  for (int i = 0; i < 3; i++) {
    pdim *d = &pd[i];
    d->olo = cdiv(d->pb, d->s);
    d->ohi = fdiv(d->in - 1 + d->pb - (d->k - 1) * d->d, d->s);
    if (d->ohi > d->out - 1) d->ohi = d->out - 1;
    if (d->olo < 0) d->olo = 0;
  }
  return EP_OK;
}

EP_COLD ep_status ep_check_POOL(const ep_node *n) {
  pdim pd[3];
  ep_status s = pool_decode(n, pd);
  if (s) return s;
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1], EP_E_SHAPE);
  int32_t kind = n->params[0], cip = n->params[2], p = n->params[3];
  EP_CHECK(kind >= POOL_MAX && kind <= POOL_LP && (cip == 0 || cip == 1), EP_E_PARAM);
  EP_CHECK(kind != POOL_LP || (p >= 1 && p <= 64), EP_E_PARAM);
  EP_CHECK((uint64_t)n->scratch_bytes >= 4u * ((uint64_t)pd[2].in + 8u), EP_E_PARAM);
  return EP_OK;
}

/* A row per thread slot (the packager's size). */
EP_COLD uint32_t ep_scratch_POOL(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  return x && x->rank ? ep_scratch_u32(4u * ((uint64_t)x->dims[x->rank - 1] + 8u) * EP_THREAD_SLOTS) : 0;
}

/* Taps of output o along one dim: valid (inside the input) taps are [k0, k1); cpad counts taps inside
 * [-pad_begin, in + pad_end), the count_include_pad divisor. */
static inline void pool_taps(const pdim *p, int64_t o, int64_t *k0, int64_t *k1, int64_t *cpad) {
  if (o >= p->olo && o <= p->ohi) { *k0 = 0; *k1 = *cpad = p->k; return; }   /* interior: no divisions */
  int64_t st = o * p->s - p->pb;
  int64_t lo = st >= 0 ? 0 : cdiv(-st, p->d);
  int64_t hi = fdiv(p->in - 1 - st, p->d) + 1;
  if (hi > p->k) hi = p->k;
  if (hi < lo) hi = lo;
  int64_t hp = fdiv(p->in + p->pe - 1 - st, p->d) + 1;
  if (hp > p->k) hp = p->k;
  if (hp < 0) hp = 0;
  *k0 = lo; *k1 = hi; *cpad = hp;
}

static inline f32x4 v_abs(f32x4 v) { return f32x4_abs(v); }
static inline float s_abs(float v) { return v < 0 ? -v : v; }

/* dst = f(src rows) combined over n rows `stride` floats apart, f = identity, |x| or x*x by kind; first: dst is
 * not read. Max and average take all rows in one pass (a store per vector, not one per row); the additions stay
 * in row order, so the bits are those of a pass per row. */
static void row_combine(int kind, int p, int first, float *dst, const float *src, int64_t stride, int64_t n, int64_t w) {
  if (kind == POOL_LP) {   /* |x|^p by repeated multiplication (p is a small integer), a pass per row */
    for (int64_t r = 0; r < n; r++, first = 0) {
      const float *s = src + r * stride;
      int64_t i = 0;
      for (; i + 4 <= w; i += 4) {
        f32x4 a = v_abs(f32x4_load(s + i)), v = a;
        for (int k = 1; k < p; k++) v = f32x4_mul(v, a);
        f32x4_store(dst + i, first ? v : f32x4_add(f32x4_load(dst + i), v));
      }
      for (; i < w; i++) {
        float a = s_abs(s[i]), v = a;
        for (int k = 1; k < p; k++) v *= a;
        dst[i] = first ? v : dst[i] + v;
      }
    }
    return;
  }
  const int64_t r0 = first ? 1 : 0;
  const float *a0 = first ? src : dst;
  int64_t i = 0;
  if (kind == POOL_MAX) {
    for (; i + 4 <= w; i += 4) {
      f32x4 acc = f32x4_load(a0 + i);
      for (int64_t r = r0; r < n; r++) acc = f32x4_max_nan(acc, f32x4_load(src + r * stride + i));
      f32x4_store(dst + i, acc);
    }
    for (; i < w; i++) {
      float acc = a0[i];
      for (int64_t r = r0; r < n; r++) acc = ep_max_nan(acc, src[r * stride + i]);
      dst[i] = acc;
    }
  } else {
    for (; i + 4 <= w; i += 4) {
      f32x4 acc = f32x4_load(a0 + i);
      for (int64_t r = r0; r < n; r++) acc = f32x4_add(acc, f32x4_load(src + r * stride + i));
      f32x4_store(dst + i, acc);
    }
    for (; i < w; i++) {
      float acc = a0[i];
      for (int64_t r = r0; r < n; r++) acc += src[r * stride + i];
      dst[i] = acc;
    }
  }
}

/* One output row from the combined scratch row r (r has >= W + 8 floats). */
static void pool_hpass(int kind, int p, int cip, const float *r, const pdim *pw, float *y, int64_t cdh_valid, int64_t cdh_pad) {
  const int64_t K = pw->k, S = pw->s, D = pw->d, PB = pw->pb, OW = pw->out;
  const int64_t olo = pw->olo, ohi = pw->ohi;   /* interior outputs: every tap inside [0, W) */
  int64_t vec_end = olo;   /* outputs [olo, vec_end) done with vectors */
  if ((kind == POOL_MAX || kind == POOL_AVG) && (S == 1 || S == 2) && ohi - olo + 1 >= 4) {
    const f32x4 scale = f32x4_splat(kind == POOL_AVG ? 1.0f / (float)((cip ? cdh_pad : cdh_valid) * K) : 1.0f);
    int64_t o = olo;
    for (; o + 3 <= ohi; o += 4) {
      f32x4 acc;
      const float *b = r + o * S - PB;
      if (S == 1) {
        acc = f32x4_load(b);
        for (int64_t k = 1; k < K; k++) {
          f32x4 v = f32x4_load(b + k * D);
          acc = kind == POOL_MAX ? f32x4_max_nan(acc, v) : f32x4_add(acc, v);
        }
      } else if (D == 1) {   /* stride 2, taps adjacent: taps k and k+1 share two loads */
        f32x4 a = f32x4_load(b), c = f32x4_load(b + 4);
        acc = f32x4_even(a, c);
        if (K > 1) acc = kind == POOL_MAX ? f32x4_max_nan(acc, f32x4_odd(a, c)) : f32x4_add(acc, f32x4_odd(a, c));
        for (int64_t k = 2; k < K; k += 2) {
          a = f32x4_load(b + k); c = f32x4_load(b + k + 4);
          f32x4 e = f32x4_even(a, c);
          acc = kind == POOL_MAX ? f32x4_max_nan(acc, e) : f32x4_add(acc, e);
          if (k + 1 < K) {
            f32x4 od = f32x4_odd(a, c);
            acc = kind == POOL_MAX ? f32x4_max_nan(acc, od) : f32x4_add(acc, od);
          }
        }
      } else {
        acc = f32x4_even(f32x4_load(b), f32x4_load(b + 4));
        for (int64_t k = 1; k < K; k++) {
          f32x4 e = f32x4_even(f32x4_load(b + k * D), f32x4_load(b + k * D + 4));
          acc = kind == POOL_MAX ? f32x4_max_nan(acc, e) : f32x4_add(acc, e);
        }
      }
      if (kind == POOL_AVG) acc = f32x4_mul(acc, scale);
      f32x4_store(y + o, acc);
    }
    vec_end = o;
  }
  for (int64_t o = 0; o < OW; o++) {
    if (o == olo && vec_end > olo) { o = vec_end - 1; continue; }
    int64_t k0, k1, cpad;
    pool_taps(pw, o, &k0, &k1, &cpad);
    const int64_t st = o * S - PB;   /* may be negative: only taps [k0, k1) are read */
    float acc;
    if (kind == POOL_MAX) {
      acc = k1 > k0 ? r[st + k0 * D] : lowest();
      for (int64_t k = k0 + 1; k < k1; k++) acc = ep_max_nan(acc, r[st + k * D]);
    } else {
      acc = 0.0f;
      for (int64_t k = k0; k < k1; k++) acc += r[st + k * D];
      if (kind == POOL_AVG) {
        const int64_t cnt = cip ? cdh_pad * cpad : cdh_valid * (k1 - k0);
        acc = cnt ? acc / (float)cnt : 0.0f;   /* a window with no tap: 0, as onnxruntime */
      }
      else if (p == 2) acc = ep_sqrtf(acc);
      else if (p > 2) acc = ep_powf(acc, 1.0f / (float)p);
    }
    y[o] = acc;
  }
}

/* Threads take chunks of the N*C planes; each pools through a scratch row of its own (slot = thread). */
typedef struct {
  const ep_node *n;
  const pdim *pd;
  uint64_t planes;
  uint32_t parts;
} pool_job;

#define POOL_PAR_MIN 16384u   /* output floats below which one thread pools everything */

static void pool_task(void *ctx, uint32_t task, uint32_t thread) {
  const pool_job *j = (const pool_job *)ctx;
  const ep_node *n = j->n;
  const pdim *pd = j->pd;
  const int kind = n->params[0], cip = n->params[2], p = n->params[3];
  const int64_t ID = pd[0].in, IH = pd[1].in, IW = pd[2].in, OD = pd[0].out, OH = pd[1].out, OW = pd[2].out;
  const float *x = ep_f32(n->in[0]);
  float *y = ep_f32(n->out[0]);
  float *row = (float *)(void *)n->scratch + (uint64_t)thread * (uint64_t)(IW + 8);
  const int64_t nc0 = (int64_t)(j->planes * task / j->parts), nc1 = (int64_t)(j->planes * (task + 1) / j->parts);
  for (int64_t nc = nc0; nc < nc1; nc++) {
    const float *xp = x + nc * ID * IH * IW;
    float *yp = y + nc * OD * OH * OW;
    for (int64_t od = 0; od < OD; od++) {
      int64_t d0, d1, dpad;
      pool_taps(&pd[0], od, &d0, &d1, &dpad);
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0, h1, hpad;
        pool_taps(&pd[1], oh, &h0, &h1, &hpad);
        int first = 1;
        for (int64_t kd = d0; kd < d1; kd++) {
          int64_t id = od * pd[0].s - pd[0].pb + kd * pd[0].d;
          if (h1 > h0) {
            const int64_t ih = oh * pd[1].s - pd[1].pb + h0 * pd[1].d;
            row_combine(kind, p, first, row, xp + (id * IH + ih) * IW, pd[1].d * IW, h1 - h0, IW);
            first = 0;
          }
        }
        if (first) { const float fill = kind == POOL_MAX ? lowest() : 0.0f; for (int64_t i = 0; i < IW; i++) row[i] = fill; }
        for (int64_t i = IW; i < IW + 8; i++) row[i] = 0.0f;   /* lanes read past the row are discarded; keep them defined */
        pool_hpass(kind, p, cip, row, &pd[2], yp + (od * OH + oh) * OW, (d1 - d0) * (h1 - h0), dpad * hpad);
      }
    }
  }
}

ep_status ep_run_POOL(const ep_node *n) {
  pdim pd[3];
  pool_decode(n, pd);
  const ep_tensor *xt = n->in[0];
  const uint64_t planes = (uint64_t)xt->dims[0] * xt->dims[1];
  /* as many threads as the scratch holds rows (a plan sized for one thread runs on one) */
  const uint64_t slots = n->scratch_bytes / (4u * ((uint64_t)pd[2].in + 8u));
  uint32_t threads = ep_num_threads();
  if (threads > slots) threads = (uint32_t)slots;
  if (planes * pd[0].out * pd[1].out * pd[2].out < POOL_PAR_MIN) threads = 1;
  pool_job j = {n, pd, planes, threads <= 1 ? 1u : (planes < 4u * threads ? (uint32_t)planes : 4u * threads)};
  ep_parallel_for(j.parts, threads, pool_task, &j);
  return EP_OK;
}

/* ---- GLOBAL_POOL ---- */

EP_COLD ep_status ep_check_GLOBAL_POOL(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && n->n_params == 1 && (n->params[0] == POOL_MAX || n->params[0] == POOL_AVG), EP_E_PARAM);
  EP_CHECK(x->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(x->rank >= 2 && y->rank == x->rank && x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1], EP_E_SHAPE);
  for (uint32_t i = 2; i < y->rank; i++) EP_CHECK(y->dims[i] == 1, EP_E_SHAPE);
  return EP_OK;
}

ep_status ep_run_GLOBAL_POOL(const ep_node *n) {
  const ep_tensor *xt = n->in[0];
  const uint64_t rows = (uint64_t)xt->dims[0] * (uint64_t)xt->dims[1];
  if (rows == 0) return EP_OK;
  const uint64_t S = xt->numel / rows;
  const float *x = ep_f32(xt);
  float *y = ep_f32(n->out[0]);
  const int kind = n->params[0];
  for (uint64_t r = 0; r < rows; r++) {
    const float *p = x + r * S;
    uint64_t i = 0;
    float acc;
    if (kind == POOL_MAX) {
      acc = neg_inf();
      if (S >= 8) {
        f32x4 a = f32x4_load(p), b = f32x4_load(p + 4);
        for (i = 8; i + 8 <= S; i += 8) { a = f32x4_max_nan(a, f32x4_load(p + i)); b = f32x4_max_nan(b, f32x4_load(p + i + 4)); }
        float t[4];
        f32x4_store(t, f32x4_max_nan(a, b));
        acc = ep_max_nan(ep_max_nan(t[0], t[1]), ep_max_nan(t[2], t[3]));
      }
      for (; i < S; i++) acc = ep_max_nan(acc, p[i]);
    } else {
      f32x4 a = f32x4_zero(), b = f32x4_zero();
      for (; i + 8 <= S; i += 8) { a = f32x4_add(a, f32x4_load(p + i)); b = f32x4_add(b, f32x4_load(p + i + 4)); }
      acc = f32x4_hsum(f32x4_add(a, b));
      for (; i < S; i++) acc += p[i];
      acc = acc / (float)S;
    }
    y[r] = acc;
  }
  return EP_OK;
}
