/* REDUCE: float32 reduction over a set of axes.
 *   in: X (rank r <= 8)   out: Y with the kept dims of X, either with reduced dims as 1 (keepdims) or dropped.
 *   params: [kind, mask]  mask bit i set = dim i reduced (mask 0: no dim reduced, the per-element transform
 *   still applies, as ONNX noop_with_empty_axes specifies for ReduceL2/LogSum/...);
 *   or [kind, 0, noop_with_empty_axes] with input axes (int64 values, read per run: ep_reduce_mask).
 *   kind: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 L1, 6 L2, 7 sum-square, 8 log-sum, 9 log-sum-exp.
 *   scratch: log-sum-exp needs 4 * numel(Y) bytes (the per-output maxima); others none.
 *   An empty reduction gives the identity: 0 (sum, L1, L2, sum-square), 1 (prod), -inf (max, log-sum,
 *   log-sum-exp), +inf (min), NaN (mean). Max and min propagate NaN (any NaN in the set gives NaN), on every build.
 *   Method: size-1 dims are dropped and adjacent dims of the same kind merged; X is walked once in memory
 *   order, the innermost merged dim vectorized (kept: Y row op= X row; reduced: Y[o] op= reduce(X row)). */
#include "ep_kernel.h"
#include "ep_vec.h"
#include "ep_math.h"
#include "ep_shape.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code (also in the one-step emcc build) */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SSQ, R_LOGSUM, R_LSE, R_KINDS };
enum { OP_ADD, OP_ABS, OP_SQ, OP_MUL, OP_MAX, OP_MIN, OP_EXP };   /* accumulate f(x) */

static inline float finf(int neg) { union { uint32_t u; float f; } v; v.u = neg ? 0xff800000u : 0x7f800000u; return v.f; }

typedef struct {
  uint32_t m;                 /* merged dims */
  uint64_t size[EP_MAX_RANK];
  int red[EP_MAX_RANK];
  uint64_t ostride[EP_MAX_RANK];
} coll;

ep_status ep_check_REDUCE(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  uint32_t mask;
  EP_CHECK(x && n->n_params >= 2 && n->params[0] >= 0 && n->params[0] < R_KINDS, EP_E_PARAM);
  EP_CHECK(x->dtype == EP_F32 && y->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(ep_reduce_mask(n, &mask) == EP_OK, EP_E_PARAM);
  EP_CHECK(ep_shape_agrees(n, ep_shape_REDUCE) == EP_OK, EP_E_SHAPE);   /* y: x without (or with 1 at) the masked dims */
  if (n->params[0] == R_LSE) EP_CHECK((uint64_t)n->scratch_bytes >= 4u * y->numel, EP_E_PARAM);
  return EP_OK;
}

static void collapse(const ep_tensor *x, uint32_t mask, coll *c) {
  c->m = 0;
  for (uint32_t i = 0; i < x->rank; i++) {
    uint64_t d = (uint64_t)x->dims[i];
    int r = (int)((mask >> i) & 1u);
    if (d == 1) continue;
    if (c->m && c->red[c->m - 1] == r) { c->size[c->m - 1] *= d; continue; }
    c->size[c->m] = d; c->red[c->m] = r; c->m++;
  }
  if (c->m == 0) { c->size[0] = 1; c->red[0] = 0; c->m = 1; }
  uint64_t st = 1;
  for (uint32_t k = c->m; k-- > 0;) {
    c->ostride[k] = c->red[k] ? 0 : st;
    if (!c->red[k]) st *= c->size[k];
  }
}

static inline float op1(int op, float acc, float v, float sh) {
  switch (op) {
    case OP_ADD: return acc + v;
    case OP_ABS: return acc + (v < 0 ? -v : v);
    case OP_SQ: return acc + v * v;
    case OP_MUL: return acc * v;
    case OP_MAX: return ep_max_nan(acc, v);   /* NaN propagates (numpy, ONNX reference) */
    case OP_MIN: return ep_min_nan(acc, v);
    default: return acc + ep_expf(v - sh);
  }
}

static inline f32x4 opv(int op, f32x4 acc, f32x4 v, f32x4 sh) {
  switch (op) {
    case OP_ADD: return f32x4_add(acc, v);
    case OP_ABS: return f32x4_add(acc, f32x4_abs(v));
    case OP_SQ: return f32x4_fma(acc, v, v);
    case OP_MUL: return f32x4_mul(acc, v);
    case OP_MAX: return f32x4_max_nan(acc, v);
    case OP_MIN: return f32x4_min_nan(acc, v);
    default: return f32x4_add(acc, ep_expf4(f32x4_sub(v, sh)));
  }
}

static inline float identity(int op) {
  return op == OP_MUL ? 1.0f : op == OP_MAX ? finf(1) : op == OP_MIN ? finf(0) : 0.0f;
}

/* The log-sum-exp shift: the maximum, or 0 where it is not finite (so inf and -inf come out right). */
static inline float lse_shift(float m) { return (m - m == 0.0f) ? m : 0.0f; }

/* acc (op)= f(x[0..len)) -> scalar */
static float reduce_row(int op, const float *x, uint64_t len, float acc, float sh) {
  uint64_t i = 0;
  if (len >= 8) {
    const f32x4 vsh = f32x4_splat(sh), id = f32x4_splat(identity(op));
    f32x4 a = id, b = id;
    for (; i + 8 <= len; i += 8) { a = opv(op, a, f32x4_load(x + i), vsh); b = opv(op, b, f32x4_load(x + i + 4), vsh); }
    float t[8];
    f32x4_store(t, a); f32x4_store(t + 4, b);
    for (int k = 0; k < 8; k++) {
      /* lanes already hold f(x); combine them with the plain reduction */
      switch (op) {
        case OP_MUL: acc *= t[k]; break;
        case OP_MAX: acc = ep_max_nan(acc, t[k]); break;
        case OP_MIN: acc = ep_min_nan(acc, t[k]); break;
        default: acc += t[k];
      }
    }
  }
  for (; i < len; i++) acc = op1(op, acc, x[i], sh);
  return acc;
}

/* y[0..len) (op)= f(x[0..len)), shift per element from sh (log-sum-exp) */
static void accum_row(int op, float *y, const float *x, uint64_t len, const float *sh) {
  uint64_t i = 0;
  f32x4 zero = f32x4_zero();
  for (; i + 4 <= len; i += 4) {
    f32x4 s = zero;
    if (op == OP_EXP) {
      float t[4];
      for (int k = 0; k < 4; k++) t[k] = lse_shift(sh[i + k]);
      s = f32x4_load(t);
    }
    f32x4_store(y + i, opv(op, f32x4_load(y + i), f32x4_load(x + i), s));
  }
  for (; i < len; i++) y[i] = op1(op, y[i], x[i], op == OP_EXP ? lse_shift(sh[i]) : 0.0f);
}

static void traverse(int op, const float *x, float *y, const float *shift, const coll *c, uint64_t total) {
  const uint32_t last = c->m - 1;
  const uint64_t inner = c->size[last];
  uint64_t idx[EP_MAX_RANK] = {0};
  uint64_t ob = 0;
  for (uint64_t xo = 0; xo < total; xo += inner) {
    if (c->red[last]) {
      float sh = op == OP_EXP ? lse_shift(shift[ob]) : 0.0f;
      y[ob] = reduce_row(op, x + xo, inner, y[ob], sh);
    } else {
      accum_row(op, y + ob, x + xo, inner, shift ? shift + ob : 0);
    }
    /* advance the odometer over dims [0, last) */
    for (uint32_t k = last; k-- > 0;) {
      ob += c->ostride[k];
      if (++idx[k] < c->size[k]) break;
      ob -= c->ostride[k] * c->size[k];
      idx[k] = 0;
    }
  }
}

ep_status ep_run_REDUCE(const ep_node *n) {
  const ep_tensor *xt = n->in[0], *yt = n->out[0];
  const int kind = n->params[0];
  const float *x = ep_f32(xt);
  float *y = ep_f32(yt);
  const uint64_t on = yt->numel;
  if (on == 0) return EP_OK;
  const uint64_t count = xt->numel / on;
  int op = kind == R_MAX ? OP_MAX : kind == R_MIN ? OP_MIN : kind == R_PROD ? OP_MUL : kind == R_L1 ? OP_ABS
         : (kind == R_L2 || kind == R_SSQ) ? OP_SQ : kind == R_LSE ? OP_MAX : OP_ADD;
  coll c;
  uint32_t mask;
  if (ep_reduce_mask(n, &mask)) return EP_E_PARAM;   /* checked: the axes' values can only have changed by a resolve */
  collapse(xt, mask, &c);
  float *m = 0;
  if (kind == R_LSE) {   /* pass 1: maxima into scratch */
    m = (float *)(void *)n->scratch;
    for (uint64_t i = 0; i < on; i++) m[i] = finf(1);
    if (xt->numel) traverse(OP_MAX, x, m, 0, &c, xt->numel);
    op = OP_EXP;
  }
  const float id = identity(op);
  for (uint64_t i = 0; i < on; i++) y[i] = id;
  if (xt->numel) traverse(op, x, y, m, &c, xt->numel);
  switch (kind) {
    case R_MEAN: { const float inv = 1.0f / (float)count; for (uint64_t i = 0; i < on; i++) y[i] = count ? y[i] * inv : y[i] / 0.0f; break; }
    case R_L2: for (uint64_t i = 0; i < on; i++) y[i] = ep_sqrtf(y[i]); break;
    case R_LOGSUM: for (uint64_t i = 0; i < on; i++) y[i] = ep_logf(y[i]); break;
    case R_LSE: for (uint64_t i = 0; i < on; i++) y[i] = lse_shift(m[i]) + ep_logf(y[i]); break;
    default: break;
  }
  return EP_OK;
}
EP_COLD_FILE_END
