/* Elementwise kernels: UNARY, BINARY, WHERE, CAST.
 *
 * UNARY   in: X; out: Y (same shape). params[0] = ep_unary_fn (kernels/activation.h), then that
 *         function's float parameter words. float32, except NOT (bool -> bool), ISNAN/ISINF (float32 -> bool).
 * BINARY  in: A, B; out: C. params[0] = ep_binary_fn (kernels/ep_fns.h). Full numpy broadcasting: A and B
 *         broadcast to exactly C's shape (checked). dtypes: arithmetic and Min/Max on f32 and the
 *         (u)int 8/16/32/64 dtypes (integers wrap; Div truncates toward zero, x/0 gives 0, INT_MIN/-1 wraps);
 *         Pow and PRelu f32; comparisons on those or bool -> bool; And/Or/Xor bool; Mod/Fmod on the numeric
 *         dtypes (integer x mod 0 = 0); Shl/Shr on the integers (shift outside [0, bits): 0, or -1 for Shr of a negative).
 * WHERE   in: Cond (bool), X, Y; out: Z. All three broadcast to Z; X, Y, Z share one dtype (any).
 * CAST    in: X; out: Y (same shape), between every pair of the plan's dtypes (f32, f64, the small floats of
 *         lowp.c, (u)int 2/4/8/16/32/64, bool). params: none, or [saturate, round_mode] (float8 targets; ONNX's
 *         defaults 1, up without them). float -> integer truncates toward zero and saturates at the int64 (uint64)
 *         range, int32's for i32 (NaN -> 0), then wraps to the narrower dtypes; integer -> integer wraps; anything ->
 *         bool is x != 0. Float -> float and integer -> float round to nearest even once (keeping subnormals, inf,
 *         NaN where the format has them; overflow as lowp.h says).
 *         (A plan's float16 weights reach f32 kernels through a prologue CAST, run once in ep_bind.)
 *
 * Broadcasting: check() validates shapes; run() collapses the iteration space (drops size-1
 * dims, merges dims that are contiguous for every operand) so the common cases become one
 * inner loop of contiguous/scalar operands: same shape, scalar, per-channel [C,1,1] and
 * trailing-dim broadcasts all run the vector loops below over long rows. */
#include "ep_kernel.h"
#include "ep_math.h"
#include "ep_math_vec.h"
#include "kernels/activation.h"
#include "kernels/lowp.h"
#include "ep_shape.h"
#include "ep_parallel.h"

/* enum ep_binary_fn: kernels/ep_fns.h (generated from wasm_kernels/spec/ops.json, through activation.h). */

/* ================================ unary ======================================================== */

static const int8_t unary_nparams[EP_UN_COUNT] = EP_UNARY_NPARAMS_INIT;

int32_t ep_unary_nparams(int32_t fn) { return fn >= 0 && fn < EP_UN_COUNT ? unary_nparams[fn] : -1; }
int32_t ep_activation_nparams(int32_t fn) { return ep_act_fusable(fn) ? unary_nparams[fn] : -1; }

static inline float pf(const int32_t *p, uint32_t i) { union { int32_t i; float f; } u; u.i = p[i]; return u.f; }

/* log(1 + exp(-|x|)) + max(x, 0): softplus without overflow; log1p(e) = log(w) + (e - (w-1))/w, w = 1+e. */
static inline f32x4 softplus4(f32x4 x) {
  const f32x4 one = f32x4_splat(1.0f);
  f32x4 e = ep_expf4(f32x4_neg(f32x4_abs(x)));
  f32x4 w = f32x4_add(one, e);
  f32x4 c = f32x4_sub(e, f32x4_sub(w, one));
  f32x4 l = f32x4_add(ep_logf4(w), f32x4_div(c, w));
  return f32x4_add(f32x4_max(x, f32x4_zero()), l);
}

/* out[i] = EXPR(x) over n floats, x an f32x4 of inputs. The < 4 tail goes through the same vector
 * expression on a padded copy (one instance of EXPR: smaller code, identical treatment). in may equal out. */
#define VMAP(EXPR) do { \
    for (uint32_t i_ = 0; i_ < n; i_ += 4) { \
      float t_[4] = {0.0f, 0.0f, 0.0f, 0.0f}; \
      uint32_t r_ = n - i_ < 4 ? n - i_ : 4; \
      const float *s_ = in + i_; float *d_ = out + i_; \
      if (r_ < 4) { ep_memcpy(t_, s_, 4 * r_); s_ = t_; d_ = t_; } \
      f32x4 x = f32x4_load(s_); f32x4_store(d_, (EXPR)); \
      if (r_ < 4) ep_memcpy(out + i_, t_, 4 * r_); \
    } \
  } while (0)

/* The functions no activation fuses (codes from EP_UN_ERF): standalone Erf / Exp (GELU's Erf fuses into its
 * MatMul, Softmax has its own loop) and the rest are rare, so optimized for size: one loop, the function chosen
 * per vector (rare4), rather than a loop per function. Pow's exact exponents get codes of their own. */
enum { UN_POW_ID = EP_UN_COUNT, UN_POW2, UN_POW3, UN_POW4, UN_POW_M1 };

static inline f32x4 rare4(int32_t fn, f32x4 x, f32x4 a, f32x4 g) {
  const f32x4 zero = f32x4_zero(), one = f32x4_splat(1.0f);
  switch (fn) {
    case EP_UN_ERF: return ep_erff4(x);
    case EP_UN_EXP: return ep_expf4(x);
    case EP_UN_LOG: return ep_logf4(x);
    case EP_UN_SQRT: return f32x4_sqrt(x);
    case UN_POW_M1:
    case EP_UN_RECIPROCAL: return f32x4_div(one, x);
    case EP_UN_NEG: return f32x4_neg(x);
    case EP_UN_ABS: return f32x4_abs(x);
    case EP_UN_FLOOR: return f32x4_floor(x);
    case EP_UN_CEIL: return f32x4_ceil(x);
    case EP_UN_ROUND: return f32x4_round_even(x);
    case EP_UN_SIGN: return f32x4_select(f32x4_lt(zero, x), one, f32x4_select(f32x4_lt(x, zero), f32x4_neg(one), x));
    case EP_UN_ELU: return f32x4_select(f32x4_lt(x, zero), f32x4_mul(a, f32x4_sub(ep_expf4(x), one)), x);
    case EP_UN_SELU: return f32x4_mul(g, f32x4_select(f32x4_le(x, zero), f32x4_sub(f32x4_mul(a, ep_expf4(x)), a), x));
    case EP_UN_CELU: return f32x4_add(f32x4_max(x, zero), f32x4_min(f32x4_mul(a, f32x4_sub(ep_expf4(f32x4_div(x, a)), one)), zero));
    case EP_UN_SOFTPLUS: return softplus4(x);
    case EP_UN_SOFTSIGN: return f32x4_div(x, f32x4_add(one, f32x4_abs(x)));
    case EP_UN_MISH: return f32x4_mul(x, ep_tanhf4(softplus4(x)));
    case EP_UN_THRESHOLDED_RELU: return f32x4_select(f32x4_lt(a, x), x, zero);
    case UN_POW2: return f32x4_mul(x, x);
    case UN_POW3: return f32x4_mul(f32x4_mul(x, x), x);
    case UN_POW4: return f32x4_mul(f32x4_mul(x, x), f32x4_mul(x, x));
    default: return x;   /* UN_POW_ID */
  }
}

EP_COLD static void unary_f32_rare(const float *in, float *out, uint32_t n, int32_t fn, const int32_t *p) {
  const int32_t np = ep_unary_nparams(fn);
  const float p0 = np > 0 ? pf(p, 0) : 0.0f;
  if (fn == EP_UN_SIN) { for (uint32_t i = 0; i < n; i++) out[i] = ep_sinf(in[i]); return; }
  if (fn == EP_UN_COS) { for (uint32_t i = 0; i < n; i++) out[i] = ep_cosf(in[i]); return; }
  if (fn >= EP_UN_TAN && fn <= EP_UN_ATANH) {   /* one scalar loop through ep_math's table (size) */
    for (uint32_t i = 0; i < n; i++) out[i] = ep_trigf(fn - EP_UN_TAN, in[i]);
    return;
  }
  if (fn == EP_UN_POW) {
    if (p0 == 0.0f) { for (uint32_t i = 0; i < n; i++) out[i] = 1.0f; return; }   /* x^0 = 1 even for NaN */
    if (p0 == 1.0f) { if (in == out) return; fn = UN_POW_ID; }
    else if (p0 == 2.0f) fn = UN_POW2;
    else if (p0 == 3.0f) fn = UN_POW3;
    else if (p0 == 4.0f) fn = UN_POW4;
    else if (p0 == -1.0f) fn = UN_POW_M1;
    else { for (uint32_t i = 0; i < n; i++) out[i] = ep_powf(in[i], p0); return; }
  }
  const f32x4 a = f32x4_splat(p0), g = f32x4_splat(np > 1 ? pf(p, 1) : 0.0f);
  VMAP(rare4(fn, x, a, g));
}

static void unary_f32(const float *in, float *out, uint32_t n, int32_t fn, const int32_t *p) {
  const f32x4 zero = f32x4_zero(), one = f32x4_splat(1.0f), half = f32x4_splat(0.5f);
  switch (fn) {
    case EP_ACT_NONE: if (in != out) VMAP(x); break;
    case EP_ACT_RELU: VMAP(f32x4_max(x, zero)); break;   /* max(x, 0) keeps NaN: x is the first operand */
    case EP_ACT_LEAKY_RELU: { f32x4 a = f32x4_splat(pf(p, 0)); VMAP(f32x4_select(f32x4_lt(x, zero), f32x4_mul(x, a), x)); break; }
    case EP_ACT_CLIP: { f32x4 lo = f32x4_splat(pf(p, 0)), hi = f32x4_splat(pf(p, 1)); VMAP(f32x4_min(f32x4_max(x, lo), hi)); break; }
    case EP_ACT_SIGMOID:
    case EP_ACT_SILU: {   /* SiLU x * sigmoid(x) (the bits of Sigmoid then Mul), sigmoid as 1 * sigmoid(x): one loop */
      const i32x4 silu = i32x4_splat(fn == EP_ACT_SILU ? -1 : 0);
      VMAP(f32x4_mul(f32x4_select(silu, x, one), ep_sigmoidf4_hot(x)));
      break;
    }
    case EP_ACT_HARDSIGMOID: {
      f32x4 a = f32x4_splat(pf(p, 0)), b = f32x4_splat(pf(p, 1));
      VMAP(f32x4_max(f32x4_min(f32x4_fma(b, a, x), one), zero)); break;
    }
    case EP_ACT_HARDSWISH: {
      f32x4 a = f32x4_splat(1.0f / 6.0f);
      VMAP(f32x4_mul(x, f32x4_max(f32x4_min(f32x4_fma(half, a, x), one), zero))); break;
    }
    case EP_ACT_TANH: VMAP(ep_tanhf4(x)); break;
    case EP_ACT_GELU: {
#if EP_ISA_WASM128
      f32x4 k[EP_GELU_NK];   /* GELU's constants in locals for the whole loop (ep_math_vec.h) */
      ep_consts4(k, ep_gelu_k, EP_GELU_NK);
      VMAP(ep_gelu4_k(x, k));
#else
      const f32x4 s = f32x4_splat(0.70710678118654752f);
      VMAP(f32x4_mul(f32x4_mul(half, x), f32x4_add(one, ep_erff4_hot(f32x4_mul(x, s)))));
#endif
      break;
    }
    case EP_ACT_GELU_TANH: {
      f32x4 k = f32x4_splat(0.79788456080286536f), c = f32x4_splat(0.044715f);
      VMAP(f32x4_mul(f32x4_mul(half, x), f32x4_add(one, ep_tanhf4(f32x4_mul(k, f32x4_fma(x, f32x4_mul(c, x), f32x4_mul(x, x)))))));
      break;
    }
    default: unary_f32_rare(in, out, n, fn, p); break;   /* codes >= EP_UN_ERF; others rejected by check() */
  }
}

void ep_apply_activation(float *x, uint32_t count, int32_t fn, const int32_t *fn_params) {
  if (fn != EP_ACT_NONE && ep_act_fusable(fn)) unary_f32(x, x, count, fn, fn_params);
}

void ep_apply_unary(float *x, uint32_t count, int32_t fn, const int32_t *fn_params) {
  if (fn != EP_ACT_NONE && ep_unary_in_place(fn)) unary_f32(x, x, count, fn, fn_params);
}

EP_COLD ep_status ep_check_UNARY(const ep_node *n) {
  EP_CHECK(n->in[0] && n->n_params >= 1, EP_E_PARAM);
  int32_t fn = n->params[0], np = ep_unary_nparams(fn);
  EP_CHECK(np >= 0 && n->n_params == 1u + (uint32_t)np, EP_E_PARAM);
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(ep_same_shape(x, y), EP_E_SHAPE);
  EP_CHECK(x->dtype == (fn == EP_UN_NOT ? EP_BOOL : EP_F32) && y->dtype == (fn == EP_UN_NOT || fn == EP_UN_ISNAN || fn == EP_UN_ISINF ? EP_BOOL : EP_F32), EP_E_DTYPE);
  return EP_OK;
}

/* Elements per range handed to a thread (ep_parallel_range): far more work than handing it out costs. */
#define EW_GRAIN 8192u

typedef struct { const float *in; float *out; int32_t fn; const int32_t *p; } unary_job;

static void unary_range(void *ctx, uint64_t b, uint64_t e) {
  const unary_job *u = (const unary_job *)ctx;
  unary_f32(u->in + b, u->out + b, (uint32_t)(e - b), u->fn, u->p);
}

ep_status ep_run_UNARY(const ep_node *n) {
  int32_t fn = n->params[0];
  uint32_t count = (uint32_t)n->out[0]->numel;
  if (fn == EP_UN_NOT) {
    const uint8_t *a = n->in[0]->data;
    uint8_t *o = n->out[0]->data;
    for (uint32_t i = 0; i < count; i++) o[i] = a[i] == 0;
    return EP_OK;
  }
  if (fn == EP_UN_ISNAN || fn == EP_UN_ISINF) {   /* IsInf's words: detect_positive, detect_negative (0.0 / 1.0) */
    const float *a = ep_f32(n->in[0]);
    uint8_t *o = n->out[0]->data;
    const int pos = fn == EP_UN_ISNAN || ep_param_f32(n, 1) != 0.0f, neg = fn == EP_UN_ISNAN || ep_param_f32(n, 2) != 0.0f;
    for (uint32_t i = 0; i < count; i++) {
      const float v = a[i];
      o[i] = (uint8_t)(fn == EP_UN_ISNAN ? v != v : ((pos && v == ep_inff()) || (neg && v == -ep_inff())));
    }
    return EP_OK;
  }
  /* element by element: any split gives the same bits (ranges start on a vector boundary) */
  unary_job u = {ep_f32(n->in[0]), ep_f32(n->out[0]), fn, n->params + 1};
  ep_parallel_range(count, EW_GRAIN, 4u, unary_range, &u);
  return EP_OK;
}

/* ================================ broadcasting walker ========================================== */

#define MAX_OPS 3
typedef struct {
  uint32_t rank;                    /* >= 1 after collapsing */
  uint32_t dims[EP_MAX_RANK];
  uint64_t strides[MAX_OPS][EP_MAX_RANK];   /* element strides, 0 where broadcast */
} bcast;

/* Each input broadcasts to out's shape: same rank as the widest input, and the broadcast of all inputs is
 * exactly out's shape (the shape function's, ep_shape_BINARY). */
static ep_status bcast_check(const ep_node *n) {
  uint32_t r = 0;
  for (uint32_t k = 0; k < n->n_in; k++) {
    EP_CHECK(n->in[k], EP_E_SHAPE);
    if (n->in[k]->rank > r) r = n->in[k]->rank;
  }
  EP_CHECK(n->out[0]->rank == r, EP_E_SHAPE);
  return ep_shape_agrees(n, ep_shape_BINARY);
}

EP_COLD static void bcast_setup(bcast *p, const ep_tensor *out, const ep_tensor *const *ins, uint32_t nin) {
  /* Per out dim (outer -> inner), per operand stride; size-1 out dims are dropped. */
  uint32_t r = out->rank, m = 0;
  uint32_t dims[EP_MAX_RANK];
  uint64_t st[MAX_OPS][EP_MAX_RANK];
  uint64_t run[MAX_OPS] = {1, 1, 1};
  for (uint32_t ii = r; ii-- > 0;) {       /* inner to outer, so contiguous strides accumulate */
    uint32_t d = (uint32_t)out->dims[ii];
    uint64_t s[MAX_OPS];
    for (uint32_t k = 0; k < nin; k++) {
      const ep_tensor *t = ins[k];
      uint32_t lead = r - t->rank;
      uint32_t td = ii < lead ? 1 : (uint32_t)t->dims[ii - lead];
      s[k] = td == 1 ? 0 : run[k];
      run[k] *= td;
    }
    if (d == 1) continue;
    /* merge with the previous (inner) kept dim when every operand is contiguous across both */
    int merge = m > 0;
    for (uint32_t k = 0; k < nin && merge; k++) merge = s[k] == st[k][m - 1] * dims[m - 1];
    if (merge) { dims[m - 1] *= d; continue; }
    dims[m] = d;
    for (uint32_t k = 0; k < nin; k++) st[k][m] = s[k];
    m++;
  }
  if (m == 0) { dims[0] = 1; for (uint32_t k = 0; k < nin; k++) st[k][0] = 0; m = 1; }
  p->rank = m;
  for (uint32_t i = 0; i < m; i++) {      /* store outer -> inner */
    p->dims[i] = dims[m - 1 - i];
    for (uint32_t k = 0; k < nin; k++) p->strides[k][i] = st[k][m - 1 - i];
  }
}

/* Calls row(ctx, o, in, inner_strides (0 or 1), count) for every innermost row. */
typedef void (*row_fn)(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t count);

typedef struct {
  const ep_tensor *out;
  const ep_tensor *const *ins;
  uint32_t nin;
  row_fn row;
  const void *ctx;
  bcast p;
  uint64_t rows;
} walk_job;

/* Rows [b, e) of the walk, or (one row) elements [b, e) of it: the threads' share (ep_parallel_range). */
static void walk_range(void *ctx, uint64_t b, uint64_t e) {
  const walk_job *w = (const walk_job *)ctx;
  const bcast *p = &w->p;
  const uint32_t r = p->rank, inner = p->dims[r - 1], nin = w->nin;
  uint32_t osz = ep_dtype_size(w->out->dtype), isz[MAX_OPS], st[MAX_OPS];
  for (uint32_t k = 0; k < nin; k++) { isz[k] = ep_dtype_size(w->ins[k]->dtype); st[k] = (uint32_t)p->strides[k][r - 1]; }
  const uint8_t *ip[MAX_OPS];
  if (EP_PARALLEL && w->rows == 1) {
    for (uint32_t k = 0; k < nin; k++) ip[k] = w->ins[k]->data + b * st[k] * isz[k];
    w->row(w->ctx, w->out->data + b * osz, ip, st, (uint32_t)(e - b));
    return;
  }
  uint32_t idx[EP_MAX_RANK] = {0};
  uint64_t off[MAX_OPS] = {0, 0, 0}, q = b;
  for (uint32_t d = r - 1; EP_PARALLEL && d-- > 0;) {     /* the odometer at row b (single-threaded: b is 0) */
    idx[d] = (uint32_t)(q % p->dims[d]);
    q /= p->dims[d];
    for (uint32_t k = 0; k < nin; k++) off[k] += idx[d] * p->strides[k][d];
  }
  uint8_t *o = w->out->data + b * inner * osz;
  for (uint64_t rw = b; rw < e; rw++) {
    for (uint32_t k = 0; k < nin; k++) ip[k] = w->ins[k]->data + off[k] * isz[k];
    w->row(w->ctx, o, ip, st, inner);
    o += (uint64_t)inner * osz;
    for (uint32_t d = r - 1; d-- > 0;) {   /* odometer over the outer dims */
      for (uint32_t k = 0; k < nin; k++) off[k] += p->strides[k][d];
      if (++idx[d] < p->dims[d]) break;
      for (uint32_t k = 0; k < nin; k++) off[k] -= p->strides[k][d] * p->dims[d];
      idx[d] = 0;
    }
  }
}

/* Every output element is computed alone, so the rows (or one row's elements) split across threads freely. */
static void bcast_walk(const ep_tensor *out, const ep_tensor *const *ins, uint32_t nin, row_fn row, const void *ctx) {
  if (out->numel == 0) return;
  walk_job w = {out, ins, nin, row, ctx, {0}, 0};
  bcast_setup(&w.p, out, ins, nin);
  const uint32_t inner = w.p.dims[w.p.rank - 1];
  w.rows = out->numel / inner;
  if (EP_PARALLEL && w.rows == 1) ep_parallel_range(inner, EW_GRAIN, 4u, walk_range, &w);
  else ep_parallel_range(w.rows, (EW_GRAIN + inner - 1) / inner, 1u, walk_range, &w);
}

/* ================================ binary ======================================================= */

/* Vector row for f32 ops: contiguous/contiguous, contiguous/scalar, scalar/contiguous (row_bin_f32 turns a
 * scalar/scalar row into one element and copies). The < 4 tail goes through EXPR on a padded copy. */
#define DEF_BIN_F32(NAME, EXPR) \
  static void NAME(float *o, const float *a, const float *b, uint32_t sa, uint32_t sb, uint32_t n) { \
    uint32_t i = 0; \
    if (sa && sb) { for (; i + 4 <= n; i += 4) { f32x4 va = f32x4_load(a + i), vb = f32x4_load(b + i); f32x4_store(o + i, (EXPR)); } } \
    else if (sa) { f32x4 vb = f32x4_splat(b[0]); for (; i + 4 <= n; i += 4) { f32x4 va = f32x4_load(a + i); f32x4_store(o + i, (EXPR)); } } \
    else { f32x4 va = f32x4_splat(a[0]); for (; i + 4 <= n; i += 4) { f32x4 vb = f32x4_load(b + i); f32x4_store(o + i, (EXPR)); } } \
    if (i < n) { \
      float ta[4] = {0.0f, 0.0f, 0.0f, 0.0f}, tb[4] = {0.0f, 0.0f, 0.0f, 0.0f}, to[4]; uint32_t r = n - i; \
      EP_COMPACT_LOOP for (uint32_t k = 0; k < r; k++) { ta[k] = a[sa ? i + k : 0]; tb[k] = b[sb ? i + k : 0]; } \
      f32x4 va = f32x4_load(ta), vb = f32x4_load(tb); f32x4_store(to, (EXPR)); \
      EP_COMPACT_LOOP for (uint32_t k = 0; k < r; k++) o[i + k] = to[k]; \
    } \
  }

DEF_BIN_F32(bin_add_f32, f32x4_add(va, vb))
DEF_BIN_F32(bin_sub_f32, f32x4_sub(va, vb))
DEF_BIN_F32(bin_mul_f32, f32x4_mul(va, vb))
DEF_BIN_F32(bin_div_f32, f32x4_div(va, vb))
/* NaN in either operand gives NaN (numpy minimum/maximum): min(a, b) keeps a NaN a; the select adds b's. */
DEF_BIN_F32(bin_min_f32, f32x4_select(f32x4_eq(vb, vb), f32x4_min(va, vb), vb))
DEF_BIN_F32(bin_max_f32, f32x4_select(f32x4_eq(vb, vb), f32x4_max(va, vb), vb))
DEF_BIN_F32(bin_prelu_f32, f32x4_select(f32x4_lt(va, f32x4_zero()), f32x4_mul(va, vb), va))

static void bin_pow_f32(float *o, const float *a, const float *b, uint32_t sa, uint32_t sb, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) o[i] = ep_powf(a[sa ? i : 0], b[sb ? i : 0]);
}

typedef void (*bin_f32_fn)(float *, const float *, const float *, uint32_t, uint32_t, uint32_t);

static void row_bin_f32(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t count) {
  bin_f32_fn f = *(const bin_f32_fn *)ctx;
  float *of = (float *)(void *)o;
  if (st[0] || st[1]) { f(of, (const float *)(const void *)in[0], (const float *)(const void *)in[1], st[0], st[1], count); return; }
  /* Both operands one value along the row: one result, copied (one fill loop instead of one per op). */
  f(of, (const float *)(const void *)in[0], (const float *)(const void *)in[1], 0, 0, 1);
  const f32x4 v = f32x4_splat(of[0]);
  uint32_t i = 1;
  for (; i + 4 <= count; i += 4) f32x4_store(of + i, v);
  EP_COMPACT_LOOP for (; i < count; i++) of[i] = of[0];
}

/* Integer and boolean rows (shape arithmetic, masks): optimized for size, no benchmark model spends time here. */
EP_COLD_FILE_BEGIN
/* float Mod (sign of the divisor, numpy mod) and Fmod (sign of the dividend), exact: ep_fmodf */
static void row_mod_f32(const void *ctx, uint8_t *o8, const uint8_t *const *in, const uint32_t *st, uint32_t n) {
  const int32_t fn = *(const int32_t *)ctx;
  float *o = (float *)(void *)o8;
  const float *a = (const float *)(const void *)in[0], *b = (const float *)(const void *)in[1];
  for (uint32_t i = 0; i < n; i++) {
    const float x = a[st[0] ? i : 0], y = b[st[1] ? i : 0];
    float r = ep_fmodf(x, y);
    if (fn == EP_BIN_MOD && r != 0.0f && ((r < 0.0f) != (y < 0.0f))) r += y;
    o[i] = r;
  }
}
/* float32 comparisons -> bool (0/1 bytes). */
static void row_cmp_f32(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t n) {
  const int32_t fn = *(const int32_t *)ctx;
  const float *a = (const float *)(const void *)in[0], *b = (const float *)(const void *)in[1];
  for (uint32_t i = 0; i < n; i++) {
    const float x = a[st[0] ? i : 0], y = b[st[1] ? i : 0];
    int r;
    switch (fn) {
      case EP_BIN_EQUAL: r = x == y; break;
      case EP_BIN_LESS: r = x < y; break;
      case EP_BIN_GREATER: r = x > y; break;
      case EP_BIN_LESS_EQUAL: r = x <= y; break;
      default: r = x >= y; break;
    }
    o[i] = (uint8_t)r;
  }
}

EP_COLD_FILE_END

static void row_int(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t n);
static int int_dtype(uint32_t dt);

EP_COLD ep_status ep_check_BINARY(const ep_node *n) {
  EP_CHECK(n->n_params == 1, EP_E_PARAM);
  int32_t fn = n->params[0];
  EP_CHECK(fn >= 0 && fn < EP_BIN_COUNT, EP_E_PARAM);
  const ep_tensor *a = n->in[0], *b = n->in[1], *c = n->out[0];
  EP_CHECK(a && b, EP_E_SHAPE);
  EP_CHECK(a->dtype == b->dtype, EP_E_DTYPE);
  uint32_t dt = a->dtype;
  const int num = dt == EP_F32 || int_dtype(dt);
  if (fn <= EP_BIN_MAX || fn == EP_BIN_MOD || fn == EP_BIN_FMOD) EP_CHECK(num && c->dtype == dt, EP_E_DTYPE);
  else if (fn >= EP_BIN_SHL) EP_CHECK(num && dt != EP_F32 && c->dtype == dt, EP_E_DTYPE);
  else if (fn <= EP_BIN_PRELU) EP_CHECK(dt == EP_F32 && c->dtype == dt, EP_E_DTYPE);
  else if (fn <= EP_BIN_GREATER_EQUAL) EP_CHECK((num || dt == EP_BOOL) && c->dtype == EP_BOOL, EP_E_DTYPE);
  else EP_CHECK(dt == EP_BOOL && c->dtype == EP_BOOL, EP_E_DTYPE);
  return bcast_check(n);
}

ep_status ep_run_BINARY(const ep_node *n) {
  int32_t fn = n->params[0];
  const ep_tensor *ins[2] = {n->in[0], n->in[1]};
  uint32_t dt = ins[0]->dtype;
  if (dt == EP_F32 && fn <= EP_BIN_PRELU) {
    static const bin_f32_fn table[] = {bin_add_f32, bin_sub_f32, bin_mul_f32, bin_div_f32,
                                       bin_min_f32, bin_max_f32, bin_pow_f32, bin_prelu_f32};
    bcast_walk(n->out[0], ins, 2, row_bin_f32, &table[fn]);
  } else if (dt == EP_F32 && fn >= EP_BIN_MOD) {
    bcast_walk(n->out[0], ins, 2, row_mod_f32, &n->params[0]);
  } else if (dt == EP_F32) {
    bcast_walk(n->out[0], ins, 2, row_cmp_f32, &n->params[0]);
  } else {
    const int32_t c2[2] = {fn, (int32_t)dt};
    bcast_walk(n->out[0], ins, 2, row_int, c2);
  }
  return EP_OK;
}

/* ================================ where ======================================================== */

EP_COLD_FILE_BEGIN  /* WHERE and CAST: masks, shapes, and the one-off widening of float16 weights at bind */

static void row_where(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t n) {
  uint32_t es = *(const uint32_t *)ctx;
  const uint8_t *c = in[0], *x = in[1], *y = in[2];
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *src = c[st[0] ? i : 0] ? x + (st[1] ? i : 0) * es : y + (st[2] ? i : 0) * es;
    switch (es) {
      case 4: ((uint32_t *)(void *)o)[i] = *(const uint32_t *)(const void *)src; break;
      case 8: ((uint64_t *)(void *)o)[i] = *(const uint64_t *)(const void *)src; break;
      case 2: ((uint16_t *)(void *)o)[i] = *(const uint16_t *)(const void *)src; break;
      default: o[i] = *src; break;
    }
  }
}

EP_COLD ep_status ep_check_WHERE(const ep_node *n) {
  EP_CHECK(n->n_params == 0, EP_E_PARAM);
  const ep_tensor *c = n->in[0], *x = n->in[1], *y = n->in[2], *z = n->out[0];
  EP_CHECK(c && x && y, EP_E_SHAPE);
  EP_CHECK(c->dtype == EP_BOOL && x->dtype == z->dtype && y->dtype == z->dtype, EP_E_DTYPE);
  uint32_t es = ep_dtype_size(z->dtype);
  EP_CHECK(es != 0, EP_E_DTYPE);
  return bcast_check(n);
}

ep_status ep_run_WHERE(const ep_node *n) {
  const ep_tensor *ins[3] = {n->in[0], n->in[1], n->in[2]};
  uint32_t es = ep_dtype_size(n->out[0]->dtype);
  bcast_walk(n->out[0], ins, 3, row_where, &es);
  return EP_OK;
}

/* ================================ cast ========================================================= */

static int int_dtype(uint32_t dt) {
  return dt == EP_I64 || dt == EP_U64 || dt == EP_I32 || dt == EP_U32 || dt == EP_I16 || dt == EP_U16 ||
         dt == EP_I8 || dt == EP_U8 || dt == EP_I4 || dt == EP_U4 || dt == EP_I2 || dt == EP_U2;
}

/* Any integer or bool element widened to 64 bits: signed dtypes sign-extend, unsigned ones zero-extend, so
 * every dtype but uint64 keeps its value as an int64; uint64 keeps its bits (callers order it unsigned). */
static int64_t load_int(const uint8_t *p, uint32_t dt, uint32_t i) {
  switch (dt) {
    case EP_I64: case EP_U64: return ((const int64_t *)(const void *)p)[i];
    case EP_I32: return ((const int32_t *)(const void *)p)[i];
    case EP_U32: return ((const uint32_t *)(const void *)p)[i];
    case EP_I16: return ((const int16_t *)(const void *)p)[i];
    case EP_U16: return ((const uint16_t *)(const void *)p)[i];
    case EP_I8: return (int8_t)p[i];
    case EP_U8: return p[i];
    case EP_BOOL: return p[i] != 0;
    default: return ep_narrow_load(dt, p[i]);   /* (u)int4, (u)int2 */
  }
}

/* The low bits of v in an integer dtype (wrapping, as the narrow types would), or bool as v != 0. */
static void store_int(uint8_t *p, uint32_t dt, uint32_t i, uint64_t v) {
  switch (ep_dtype_size(dt)) {
    case 8: ((uint64_t *)(void *)p)[i] = v; break;
    case 4: ((uint32_t *)(void *)p)[i] = (uint32_t)v; break;
    case 2: ((uint16_t *)(void *)p)[i] = (uint16_t)v; break;
    default: p[i] = dt == EP_BOOL ? v != 0 : dt == EP_U8 || dt == EP_I8 ? (uint8_t)v : ep_narrow_int(dt, v); break;
  }
}

/* Every integer (and bool) BINARY function through 64 bits, one instance for all dtypes: ctx = {fn, dtype}.
 * Only uint64 needs unsigned order, division and shifts; the other dtypes' values are exact in int64.
 * Add/Sub/Mul wrap; Div truncates toward zero (x/0 = 0, INT_MIN/-1 wraps, no trap); Mod takes the divisor's
 * sign (numpy), Fmod the dividend's (x mod 0 = 0); Shl/Shr by a count outside [0, bits) give 0 (Shr of a
 * negative: -1). Comparisons and And/Or/Xor store bool; BitAnd/BitOr/BitXor the dtype. */
static void row_int(const void *ctx, uint8_t *o, const uint8_t *const *in, const uint32_t *st, uint32_t n) {
  const int32_t fn = ((const int32_t *)ctx)[0];
  const uint32_t dt = (uint32_t)((const int32_t *)ctx)[1], bits = 8u * ep_dtype_size(dt);
  const int u64 = dt == EP_U64;
  const uint32_t odt = fn >= EP_BIN_EQUAL && fn <= EP_BIN_XOR ? EP_BOOL : dt;
  for (uint32_t i = 0; i < n; i++) {
    const int64_t x = load_int(in[0], dt, st[0] ? i : 0), y = load_int(in[1], dt, st[1] ? i : 0);
    const uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    const int lt = u64 ? ux < uy : x < y, eq = x == y;
    uint64_t r;
    switch (fn) {
      case EP_BIN_ADD: r = ux + uy; break;
      case EP_BIN_SUB: r = ux - uy; break;
      case EP_BIN_MUL: r = ux * uy; break;
      case EP_BIN_DIV: r = y == 0 ? 0 : u64 ? ux / uy : y == -1 ? 0 - ux : (uint64_t)(x / y); break;
      case EP_BIN_MIN: r = lt ? ux : uy; break;
      case EP_BIN_MAX: r = lt ? uy : ux; break;
      case EP_BIN_EQUAL: r = (uint64_t)eq; break;
      case EP_BIN_LESS: r = (uint64_t)lt; break;
      case EP_BIN_GREATER: r = (uint64_t)(!lt && !eq); break;
      case EP_BIN_LESS_EQUAL: r = (uint64_t)(lt || eq); break;
      case EP_BIN_GREATER_EQUAL: r = (uint64_t)!lt; break;
      case EP_BIN_AND: case EP_BIN_BIT_AND: r = ux & uy; break;
      case EP_BIN_OR: case EP_BIN_BIT_OR: r = ux | uy; break;
      case EP_BIN_XOR: case EP_BIN_BIT_XOR: r = ux ^ uy; break;
      case EP_BIN_SHL: r = uy >= bits ? 0 : ux << uy; break;   /* a negative count is a huge unsigned one */
      case EP_BIN_SHR:
        r = u64 ? (uy >= 64 ? 0 : ux >> uy) : uy >= bits ? (x < 0 ? ~0ull : 0) : (uint64_t)(x >> y);
        break;
      default:   /* MOD, FMOD: C remainder without the x % 0 and INT64_MIN % -1 traps */
        if (u64) { r = uy == 0 ? 0 : ux % uy; break; }
        {
          int64_t m = (y == 0 || y == -1) ? 0 : x % y;
          if (fn == EP_BIN_MOD && m != 0 && ((m < 0) != (y < 0))) m += y;
          r = (uint64_t)m;
        }
        break;
    }
    store_int(o, odt, i, r);
  }
}

/* CAST between every pair of the plan's dtypes. A float source is read as a double (exact), an integer one as 64
 * bits. float -> integer truncates toward zero (NaN -> 0), saturating at the int64 (uint64 for uint64) range and at
 * int32's for int32, then wraps to the narrower dtypes; integer -> integer wraps; anything -> bool is x != 0; into a
 * float dtype rounds to nearest even once (the small formats: lowp.c, with params [saturate, round_mode]). */
static int float_dtype(uint32_t dt) { return dt == EP_F32 || dt == EP_F64 || ep_small_float(dt); }

static double load_float(const uint8_t *p, uint32_t dt, uint32_t i) {
  switch (dt) {
    case EP_F64: return ((const double *)(const void *)p)[i];
    case EP_F32: return (double)((const float *)(const void *)p)[i];
    default: return ep_small_float_value(dt, ep_dtype_size(dt) == 2 ? ((const uint16_t *)(const void *)p)[i] : p[i]);
  }
}

static void store_float(uint8_t *p, uint32_t dt, uint32_t i, double d, const int32_t *mode) {
  switch (dt) {
    case EP_F64: ((double *)(void *)p)[i] = d; break;
    case EP_F32: ((float *)(void *)p)[i] = (float)d; break;
    default: {
      const uint32_t c = ep_small_float_code(dt, d, mode[0], mode[1]);
      if (ep_dtype_size(dt) == 2) ((uint16_t *)(void *)p)[i] = (uint16_t)c;
      else p[i] = (uint8_t)c;
    }
  }
}

static uint64_t f64_to_int(double d, uint32_t dt) {
  if (d != d) return 0;
  if (dt == EP_U64 && d >= 9223372036854775808.0) return d >= 18446744073709551616.0 ? ~0ull : (uint64_t)d;
  const int64_t v = d >= 9223372036854775808.0 ? INT64_MAX : d < -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
  if (dt == EP_I32) return (uint64_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v);
  return (uint64_t)v;
}

EP_COLD ep_status ep_check_CAST(const ep_node *n) {
  EP_CHECK(n->n_params == 0 || (n->n_params == 2 && (uint32_t)n->params[0] <= 1u && (uint32_t)n->params[1] <= EP_ROUND_NEAREST),
           EP_E_PARAM);
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_SHAPE);
  EP_CHECK(ep_same_shape(x, y), EP_E_SHAPE);
  EP_CHECK(ep_dtype_size(x->dtype) && ep_dtype_size(y->dtype), EP_E_DTYPE);   /* every dtype of the plan */
  return EP_OK;
}

ep_status ep_run_CAST(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  const uint32_t count = (uint32_t)y->numel, sd = x->dtype, dd = y->dtype;
  const uint8_t *src = x->data;
  uint8_t *dst = y->data;
  if (sd == dd) { ep_memcpy(dst, src, count * ep_dtype_size(sd)); return EP_OK; }
  static const int32_t ONNX_DEFAULT[2] = {1, EP_ROUND_UP};   /* saturate, round_mode */
  const int32_t *mode = n->n_params == 2 ? n->params : ONNX_DEFAULT;
  const int sf = float_dtype(sd), df = float_dtype(dd);
  for (uint32_t i = 0; i < count; i++) {
    if (sf) {
      const double d = load_float(src, sd, i);
      if (df) store_float(dst, dd, i, d, mode);
      else if (dd == EP_BOOL) dst[i] = d != 0.0;
      else store_int(dst, dd, i, f64_to_int(d, dd));
    } else {
      const int64_t v = load_int(src, sd, i);
      if (!df) { store_int(dst, dd, i, (uint64_t)v); continue; }
      if (dd == EP_F32) ((float *)(void *)dst)[i] = sd == EP_U64 ? (float)(uint64_t)v : (float)v;
      else store_float(dst, dd, i, sd == EP_U64 ? (double)(uint64_t)v : (double)v, mode);   /* exact via f64 below 2^53 */
    }
  }
  return EP_OK;
}
EP_COLD_FILE_END
