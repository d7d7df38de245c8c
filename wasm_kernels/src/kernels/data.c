/* Data movement kernels: CONCAT, SPLIT, SLICE, GATHER, TRANSPOSE, COPY, PAD, EXPAND.
 * All are byte-size generic (any dtype of 1, 2, 4 or 8 bytes; the packager limits them to what it supports).
 *
 * Parameter words (docs/plan-format.md, "### CONCAT" and following):
 *   CONCAT    [axis]                       inputs 1..16 -> 1 output, 0 <= axis < rank
 *   SPLIT     [axis] | [axis, size_0..size_{n-1}] | [axis, -1] (equal parts)   1 input -> outputs 1..16;
 *             [axis] with input split: the sizes are its values
 *   SLICE     [start_0..start_{r-1}, step_0..step_{r-1}]   normalized: out[i] = in[start + i*step] per dim
 *             | [start_0.., end_0.., step_0..]  ONNX semantics, resolved against the input's dims
 *             | [] with inputs starts, ends, axes?, steps? (value inputs): the ONNX form from their values
 *   GATHER    [axis, mode]                 mode 0 Gather, 1 GatherElements; indices int32 or int64
 *   TRANSPOSE [perm_0..perm_{r-1}]         out dim i = in dim perm[i]
 *   COPY      []                           byte copy, equal nbytes
 *   PAD       [mode, value_lo, value_hi, begin_0..begin_{r-1}(, end_0..end_{r-1})]   mode 0 constant, 1 reflect,
 *             2 edge, 3 wrap; or [mode, value_lo, value_hi] with inputs pads, value?, axes? (value inputs)
 *   EXPAND    []                           numpy broadcast of the input to the output shape; optional input 1:
 *                                          the target shape (int64), which the shape function reads
 *
 * SLICE, TRANSPOSE and EXPAND share one strided-copy engine (sc_*) whose iteration space is computed from
 * the tensor shapes plus the validated parameters; sc_bounds() re-checks every reachable source offset. */
#include "ep_shape.h"
#include "ep_vec.h"
#include "ep_parallel.h"

#define SC_LIMIT (1ll << 33)  /* any |offset term| beyond this means an inconsistent plan */

/* ---- small copy helpers ------------------------------------------------------------------------ */

/* Byte copy, 16 bytes per vector and the rest word-wise when both pointers and the length allow it (tensors
 * are element-aligned). Vectors: the head split of attention (Transpose / Gather of 32- or 384-float runs) is
 * copies of this; with words, minilm_like's Transposes and Gathers ran at ~6 GB/s. */
static void dcopy(uint8_t *dst, const uint8_t *src, uint64_t n) {
  if ((((uintptr_t)dst | (uintptr_t)src | (uintptr_t)n) & 3u) == 0) {
    int32_t *d = (int32_t *)(void *)dst;
    const int32_t *s = (const int32_t *)(const void *)src;
    uint64_t w = n >> 2, i = 0;
    for (; i + 8 <= w; i += 8) {
      const i32x4 v0 = i32x4_load(s + i), v1 = i32x4_load(s + i + 4);
      i32x4_store(d + i, v0); i32x4_store(d + i + 4, v1);
    }
    for (; i < w; i++) d[i] = s[i];
    return;
  }
  for (uint64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* One element of esize bytes. */
static inline void ecopy1(uint8_t *dst, const uint8_t *src, uint32_t es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: *(uint16_t *)(void *)dst = *(const uint16_t *)(const void *)src; break;
    case 4: *(uint32_t *)(void *)dst = *(const uint32_t *)(const void *)src; break;
    default: *(uint64_t *)(void *)dst = *(const uint64_t *)(const void *)src; break;
  }
}

/* dst[i] = src[i*stride] for i < n (stride in elements, may be 0 or negative). */
static void strided_gather(uint8_t *dst, const uint8_t *src, int64_t n, int64_t stride, uint32_t es) {
#define SG(T) do { T *d = (T *)(void *)dst; const T *s = (const T *)(const void *)src; \
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride]; } while (0)
  switch (es) {
    case 1: SG(uint8_t); break;
    case 2: SG(uint16_t); break;
    case 4: SG(uint32_t); break;
    default: SG(uint64_t); break;
  }
#undef SG
}

/* dst[a*dstride + b] = src[a + b*sstride] for a < na, b < nb: a tiled 2-D transpose. */
static void tile_transpose(uint8_t *dst, const uint8_t *src, int64_t na, int64_t nb, int64_t dstride,
                           int64_t sstride, uint32_t es) {
#define TT(T) do { T *d = (T *)(void *)dst; const T *s = (const T *)(const void *)src; \
    for (int64_t a0 = 0; a0 < na; a0 += 16) { int64_t a1 = a0 + 16 < na ? a0 + 16 : na; \
      for (int64_t b0 = 0; b0 < nb; b0 += 16) { int64_t b1 = b0 + 16 < nb ? b0 + 16 : nb; \
        for (int64_t a = a0; a < a1; a++) for (int64_t b = b0; b < b1; b++) \
          d[a * dstride + b] = s[a + b * sstride]; } } } while (0)
  switch (es) {
    case 1: TT(uint8_t); break;
    case 2: TT(uint16_t); break;
    case 4: TT(uint32_t); break;
    default: TT(uint64_t); break;
  }
#undef TT
}

static int esize_ok(uint32_t es) { return es == 1 || es == 2 || es == 4 || es == 8; }

/* Contiguous strides (elements) of a tensor. Unsigned products: an empty tensor (a 0 dim) may have other dims
 * whose product overflows; its strides are never used, but signed overflow would be undefined behaviour. */
static void strides_of(const ep_tensor *t, int64_t *st) {
  uint64_t s = 1;
  for (int32_t k = (int32_t)t->rank - 1; k >= 0; k--) { st[k] = (int64_t)s; s *= (uint64_t)t->dims[k]; }
}

/* ---- strided copy engine ------------------------------------------------------------------------ */

typedef struct {
  uint32_t rank, esize, empty;
  int64_t dims[EP_MAX_RANK];   /* output iteration space (coalesced, no size-1 dims) */
  int64_t st[EP_MAX_RANK];     /* source stride per output dim, in elements */
  int64_t base;                /* source offset of output element 0 */
} sc_plan;

/* Build from an output shape with per-dim source strides; drops size-1 dims, merges contiguous runs. */
static void sc_build(sc_plan *p, uint32_t esize, uint32_t rank, const int32_t *dims, const int64_t *st, int64_t base) {
  p->esize = esize; p->base = base; p->empty = 0; p->rank = 0;
  for (uint32_t k = 0; k < rank; k++) {
    if (dims[k] == 0) { p->empty = 1; p->rank = 1; p->dims[0] = 1; p->st[0] = 1; return; }
    if (dims[k] == 1) continue;
    if (p->rank > 0 && p->st[p->rank - 1] == st[k] * dims[k]) {   /* previous dim continues this one */
      p->dims[p->rank - 1] *= dims[k];
      p->st[p->rank - 1] = st[k];
      continue;
    }
    p->dims[p->rank] = dims[k]; p->st[p->rank] = st[k]; p->rank++;
  }
  if (p->rank == 0) { p->rank = 1; p->dims[0] = 1; p->st[0] = 1; }
}

/* Every source offset reachable by the plan lies in [0, src_numel)? Overflow-safe. */
static int sc_bounds(const sc_plan *p, uint64_t src_numel) {
  if (p->empty) return 1;
  if (p->base < 0 || p->base >= SC_LIMIT) return 0;
  int64_t lo = p->base, hi = p->base;
  for (uint32_t k = 0; k < p->rank; k++) {
    int64_t s = p->st[k], d = p->dims[k] - 1;
    int64_t a = s < 0 ? -s : s;
    if (a > SC_LIMIT || d > SC_LIMIT || (a && d > SC_LIMIT / a)) return 0;
    if (s < 0) lo -= a * d; else hi += a * d;
  }
  return lo >= 0 && (uint64_t)hi < src_numel;
}

static void sc_run(const sc_plan *p, uint8_t *dst, const uint8_t *src) {
  if (p->empty) return;
  const uint32_t r = p->rank, es = p->esize;
  int64_t ost[EP_MAX_RANK];
  { uint64_t s = 1; for (int32_t k = (int32_t)r - 1; k >= 0; k--) { ost[k] = (int64_t)s; s *= (uint64_t)p->dims[k]; } }
  const int64_t nl = p->dims[r - 1], sl = p->st[r - 1];
  int32_t tj = -1;   /* a dim read contiguously while the last is strided: tiled transpose */
  if (sl != 1 && sl != 0)
    for (uint32_t k = 0; k + 1 < r; k++) if (p->st[k] == 1) tj = (int32_t)k;
  int64_t od[EP_MAX_RANK], os[EP_MAX_RANK], odst[EP_MAX_RANK], cnt[EP_MAX_RANK];
  uint32_t on = 0;
  for (uint32_t k = 0; k + 1 < r; k++) {
    if ((int32_t)k == tj) continue;
    od[on] = p->dims[k]; os[on] = p->st[k]; odst[on] = ost[k]; cnt[on] = 0; on++;
  }
  int64_t so = p->base, dof = 0;
  for (;;) {
    uint8_t *d = dst + (uint64_t)dof * es;
    const uint8_t *s = src + (uint64_t)so * es;
    if (sl == 1) dcopy(d, s, (uint64_t)nl * es);
    else if (tj >= 0) tile_transpose(d, s, p->dims[tj], nl, ost[tj], sl, es);
    else strided_gather(d, s, nl, sl, es);
    int32_t k = (int32_t)on - 1;
    for (; k >= 0; k--) {
      so += os[k]; dof += odst[k];
      if (++cnt[k] < od[k]) break;
      so -= os[k] * od[k]; dof -= odst[k] * od[k]; cnt[k] = 0;
    }
    if (k < 0) break;
  }
}

/* ---- COPY ------------------------------------------------------------------------------------- */

ep_status ep_check_COPY(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(n->n_params == 0, EP_E_PARAM);
  EP_CHECK(x->numel * ep_dtype_size(x->dtype) == y->numel * ep_dtype_size(y->dtype), EP_E_SHAPE);
  return EP_OK;
}

ep_status ep_run_COPY(const ep_node *n) {
  dcopy(n->out[0]->data, n->in[0]->data, n->in[0]->numel * ep_dtype_size(n->in[0]->dtype));
  return EP_OK;
}

/* ---- CONCAT / SPLIT --------------------------------------------------------------------------- */

/* `whole` is the concatenation of parts[0..np) along axis: same dtype and rank, equal other dims. */
static ep_status check_parts(const ep_tensor *whole, const ep_tensor *const *parts, uint32_t np, const ep_node *n) {
  EP_CHECK(n->n_params >= 1, EP_E_PARAM);
  const int32_t axis = n->params[0];
  EP_CHECK(axis >= 0 && (uint32_t)axis < whole->rank, EP_E_PARAM);
  EP_CHECK(esize_ok(ep_dtype_size(whole->dtype)), EP_E_DTYPE);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < np; i++) {
    const ep_tensor *t = parts[i];
    EP_CHECK(t, EP_E_OP);
    EP_CHECK(t->dtype == whole->dtype, EP_E_DTYPE);
    EP_CHECK(t->rank == whole->rank, EP_E_SHAPE);
    for (uint32_t k = 0; k < whole->rank; k++)
      if ((int32_t)k != axis) EP_CHECK(t->dims[k] == whole->dims[k], EP_E_SHAPE);
    sum += (uint64_t)t->dims[axis];
  }
  EP_CHECK(sum == (uint64_t)whole->dims[axis], EP_E_SHAPE);
  return EP_OK;
}

/* outer = prod(dims[:axis]), inner = prod(dims[axis+1:]) * esize bytes. */
static void outer_inner(const ep_tensor *t, int32_t axis, uint64_t *outer, uint64_t *inner) {
  uint64_t o = 1, in = ep_dtype_size(t->dtype);
  for (int32_t k = 0; k < axis; k++) o *= (uint64_t)t->dims[k];
  for (uint32_t k = (uint32_t)axis + 1; k < t->rank; k++) in *= (uint64_t)t->dims[k];
  *outer = o; *inner = in;
}

ep_status ep_check_CONCAT(const ep_node *n) {
  EP_CHECK(n->n_params == 1, EP_E_PARAM);
  return check_parts(n->out[0], n->in, n->n_in, n);
}

typedef struct { const ep_node *n; uint64_t outer, inner; } concat_job;

/* Output bytes [b, e): every input piece's overlap with them (threads copy disjoint byte ranges of the output). */
static void concat_range(void *ctx, uint64_t b, uint64_t e) {
  const concat_job *j = (const concat_job *)ctx;
  const ep_node *n = j->n;
  const int32_t axis = n->params[0];
  uint64_t d = 0;
  for (uint64_t o = 0; o < j->outer && d < e; o++)
    for (uint32_t i = 0; i < n->n_in && d < e; i++) {
      const uint64_t len = (uint64_t)n->in[i]->dims[axis] * j->inner;
      const uint64_t lo = d > b ? d : b, hi = d + len < e ? d + len : e;
      if (lo < hi) dcopy(n->out[0]->data + lo, n->in[i]->data + o * len + (lo - d), hi - lo);
      d += len;
    }
}

ep_status ep_run_CONCAT(const ep_node *n) {
  concat_job j = {n, 0, 0};
  outer_inner(n->out[0], n->params[0], &j.outer, &j.inner);
  ep_parallel_range(j.outer * (uint64_t)n->out[0]->dims[n->params[0]] * j.inner, 65536u, 64u, concat_range, &j);
  return EP_OK;
}

ep_status ep_check_SPLIT(const ep_node *n) {
  EP_CHECK(n->in[0], EP_E_OP);
  const ep_status s = check_parts(n->in[0], (const ep_tensor *const *)n->out, n->n_out, n);
  return s || (n->n_params == 1 && n->n_in == 1) ? s : ep_shape_agrees(n, ep_shape_SPLIT);   /* sizes: as they say */
}

ep_status ep_run_SPLIT(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  const int32_t axis = n->params[0];
  uint64_t outer, inner;
  outer_inner(x, axis, &outer, &inner);
  const uint8_t *s = x->data;
  for (uint64_t o = 0; o < outer; o++)
    for (uint32_t i = 0; i < n->n_out; i++) {
      const uint64_t b = (uint64_t)n->out[i]->dims[axis] * inner;
      dcopy(n->out[i]->data + o * b, s, b);
      s += b;
    }
  return EP_OK;
}

/* ---- SLICE -------------------------------------------------------------------------------------- */

static ep_status slice_plan(const ep_node *n, sc_plan *p) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(x->dtype == y->dtype && esize_ok(ep_dtype_size(x->dtype)), EP_E_DTYPE);
  EP_CHECK(x->rank == y->rank, EP_E_SHAPE);
  const uint32_t r = x->rank, onnx = n->n_in > 1 || n->n_params == 3 * r;
  int32_t w[3 * EP_MAX_RANK];
  EP_CHECK(onnx ? ep_slice_words(n, w) == EP_OK : n->n_params == 2 * r, EP_E_PARAM);
  const int32_t *pw = onnx ? w : n->params;
  int64_t ist[EP_MAX_RANK], st[EP_MAX_RANK], base = 0;
  strides_of(x, ist);
  int empty = 0;
  for (uint32_t k = 0; k < r; k++) {
    const int64_t step = pw[(onnx ? 2 : 1) * r + k], od = y->dims[k], id = x->dims[k];
    int64_t start = pw[k], len;
    EP_CHECK(step != 0, EP_E_PARAM);
    if (onnx) {   /* [start, end, step] as ONNX gives them: resolved against this run's dims */
      ep_slice_axis(id, start, pw[r + k], step, &start, &len);
      EP_CHECK(len == od, EP_E_SHAPE);
    }
    st[k] = 0;
    if (od == 0) { empty = 1; continue; }
    const int64_t last = start + (od - 1) * step;   /* |step| < 2^31, od < 2^31: no overflow */
    EP_CHECK(start >= 0 && start < id && last >= 0 && last < id, EP_E_PARAM);
    if (od > 1) st[k] = step * ist[k];              /* |step| < id here, so |st| < numel */
    base += start * ist[k];
  }
  if (empty) base = 0;
  sc_build(p, ep_dtype_size(x->dtype), r, y->dims, st, base);
  EP_CHECK(sc_bounds(p, x->numel), EP_E_PARAM);
  return EP_OK;
}

ep_status ep_check_SLICE(const ep_node *n) { sc_plan p; return slice_plan(n, &p); }

ep_status ep_run_SLICE(const ep_node *n) {
  sc_plan p;
  ep_status s = slice_plan(n, &p);
  if (s) return s;
  sc_run(&p, n->out[0]->data, n->in[0]->data);
  return EP_OK;
}

/* ---- TRANSPOSE ---------------------------------------------------------------------------------- */

static ep_status transpose_plan(const ep_node *n, sc_plan *p) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(x->dtype == y->dtype && esize_ok(ep_dtype_size(x->dtype)), EP_E_DTYPE);
  EP_CHECK(x->rank == y->rank, EP_E_SHAPE);
  const uint32_t r = x->rank;
  EP_CHECK(n->n_params == r, EP_E_PARAM);
  int64_t ist[EP_MAX_RANK], st[EP_MAX_RANK];
  strides_of(x, ist);
  uint32_t seen = 0;
  for (uint32_t k = 0; k < r; k++) {
    const int32_t q = n->params[k];
    EP_CHECK(q >= 0 && (uint32_t)q < r && !(seen & (1u << q)), EP_E_PARAM);
    seen |= 1u << q;
    EP_CHECK(y->dims[k] == x->dims[q], EP_E_SHAPE);
    st[k] = ist[q];
  }
  sc_build(p, ep_dtype_size(x->dtype), r, y->dims, st, 0);
  EP_CHECK(sc_bounds(p, x->numel), EP_E_PARAM);
  return EP_OK;
}

ep_status ep_check_TRANSPOSE(const ep_node *n) { sc_plan p; return transpose_plan(n, &p); }

ep_status ep_run_TRANSPOSE(const ep_node *n) {
  sc_plan p;
  ep_status s = transpose_plan(n, &p);
  if (s) return s;
  sc_run(&p, n->out[0]->data, n->in[0]->data);
  return EP_OK;
}

/* ---- EXPAND ------------------------------------------------------------------------------------- */

static ep_status expand_plan(const ep_node *n, sc_plan *p) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(n->n_params == 0, EP_E_PARAM);
  EP_CHECK(x->dtype == y->dtype && esize_ok(ep_dtype_size(x->dtype)), EP_E_DTYPE);
  EP_CHECK(y->rank >= x->rank, EP_E_SHAPE);
  int64_t ist[EP_MAX_RANK], st[EP_MAX_RANK];
  strides_of(x, ist);
  const uint32_t lead = y->rank - x->rank;
  for (uint32_t k = 0; k < y->rank; k++) {
    if (k < lead) { st[k] = 0; continue; }
    const int32_t xd = x->dims[k - lead];
    EP_CHECK(xd == y->dims[k] || xd == 1, EP_E_SHAPE);
    st[k] = xd == 1 ? 0 : ist[k - lead];
  }
  sc_build(p, ep_dtype_size(x->dtype), y->rank, y->dims, st, 0);
  EP_CHECK(sc_bounds(p, x->numel), EP_E_SHAPE);
  return EP_OK;
}

ep_status ep_check_EXPAND(const ep_node *n) {
  const ep_tensor *s = n->n_in > 1 ? n->in[1] : 0;
  if (s) {   /* the target shape: its values, where known, must give the output's dims */
    EP_CHECK(s->dtype == EP_I64 && s->rank == 1 && s->numel <= n->out[0]->rank, EP_E_SHAPE);
    if (s->data) EP_CHECK(ep_shape_agrees(n, ep_shape_EXPAND) == EP_OK, EP_E_SHAPE);
  }
  sc_plan p;
  return expand_plan(n, &p);
}

ep_status ep_run_EXPAND(const ep_node *n) {
  sc_plan p;
  ep_status s = expand_plan(n, &p);
  if (s) return s;
  sc_run(&p, n->out[0]->data, n->in[0]->data);
  return EP_OK;
}

/* ---- GATHER / GatherElements -------------------------------------------------------------------- */

static int idx_dtype_ok(uint32_t dt) { return dt == EP_I64 || dt == EP_I32; }

static inline int64_t idx_at(const ep_tensor *t, uint64_t i) {
  return t->dtype == EP_I64 ? ((const int64_t *)(const void *)t->data)[i]
                            : (int64_t)((const int32_t *)(const void *)t->data)[i];
}

ep_status ep_check_GATHER(const ep_node *n) {
  const ep_tensor *x = n->in[0], *ix = n->in[1], *y = n->out[0];
  EP_CHECK(x && ix, EP_E_OP);
  EP_CHECK(n->n_params == 2, EP_E_PARAM);
  const int32_t axis = n->params[0], mode = n->params[1];
  EP_CHECK(mode == 0 || mode == 1, EP_E_PARAM);
  EP_CHECK(axis >= 0 && (uint32_t)axis < x->rank, EP_E_PARAM);
  EP_CHECK(x->dtype == y->dtype && esize_ok(ep_dtype_size(x->dtype)), EP_E_DTYPE);
  EP_CHECK(idx_dtype_ok(ix->dtype), EP_E_DTYPE);
  if (mode == 1) {   /* GatherElements: indices of x's rank, within x's dims off the axis */
    EP_CHECK(ix->rank == x->rank, EP_E_SHAPE);
    for (uint32_t a = 0; a < x->rank; a++) if ((int32_t)a != axis) EP_CHECK(ix->dims[a] <= x->dims[a], EP_E_SHAPE);
  }
  return ep_shape_agrees(n, ep_shape_GATHER) ? EP_E_SHAPE : EP_OK;   /* y's dims */
}

ep_status ep_run_GATHER(const ep_node *n) {
  const ep_tensor *x = n->in[0], *ix = n->in[1], *y = n->out[0];
  const int32_t axis = n->params[0], mode = n->params[1];
  const uint32_t es = ep_dtype_size(x->dtype);
  const int64_t nax = x->dims[axis];
  /* Validate every index before writing anything. */
  for (uint64_t i = 0; i < ix->numel; i++) {
    const int64_t v = idx_at(ix, i);
    if (v < -nax || v >= nax) return EP_E_INDEX;
  }
  if (mode == 0) {
    uint64_t outer, inner;
    outer_inner(x, axis, &outer, &inner);   /* inner in bytes */
    uint8_t *d = y->data;
    for (uint64_t o = 0; o < outer; o++) {
      const uint8_t *s = x->data + o * (uint64_t)nax * inner;
      for (uint64_t i = 0; i < ix->numel; i++) {
        int64_t v = idx_at(ix, i);
        if (v < 0) v += nax;
        if (inner == es) ecopy1(d, s + (uint64_t)v * inner, es);
        else dcopy(d, s + (uint64_t)v * inner, inner);
        d += inner;
      }
    }
    return EP_OK;
  }
  /* GatherElements: y[c] = x[c with c[axis] = idx[c]]. */
  if (y->numel == 0) return EP_OK;
  const uint32_t r = x->rank;
  int64_t xst[EP_MAX_RANK], cnt[EP_MAX_RANK] = {0};
  strides_of(x, xst);
  int64_t base = 0;   /* x offset of the current coordinate, axis coordinate excluded */
  for (uint64_t i = 0; i < y->numel; i++) {
    int64_t v = idx_at(ix, i);
    if (v < 0) v += nax;
    ecopy1(y->data + i * es, x->data + (uint64_t)(base + v * xst[axis]) * es, es);
    for (int32_t k = (int32_t)r - 1; k >= 0; k--) {
      if (k != axis) base += xst[k];
      if (++cnt[k] < ix->dims[k]) break;
      if (k != axis) base -= xst[k] * ix->dims[k];
      cnt[k] = 0;
    }
  }
  return EP_OK;
}

/* ---- PAD ---------------------------------------------------------------------------------------- */

enum { PAD_CONSTANT = 0, PAD_REFLECT = 1, PAD_EDGE = 2, PAD_WRAP = 3 };

/* Source index for output coordinate o (begin = leading pad, n = input extent); -1 = constant. */
static inline int64_t pad_map(int64_t o, int64_t begin, int64_t n, int32_t mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_REFLECT: {
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      int64_t m = i % p;
      if (m < 0) m += p;
      return m >= n ? p - m : m;
    }
    case PAD_WRAP: { int64_t m = i % n; return m < 0 ? m + n : m; }
    default: return -1;
  }
}

ep_status ep_check_PAD(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(x->dtype == y->dtype && esize_ok(ep_dtype_size(x->dtype)), EP_E_DTYPE);
  EP_CHECK(x->rank == y->rank, EP_E_SHAPE);
  int32_t w[3 + 2 * EP_MAX_RANK];
  EP_CHECK(n->n_params >= 1 && ep_pad_words(n, w) == EP_OK, EP_E_PARAM);   /* also the values of pads, axes? */
  const int32_t mode = n->params[0];
  EP_CHECK(mode >= PAD_CONSTANT && mode <= PAD_WRAP, EP_E_PARAM);
  for (uint32_t k = 0; k < x->rank; k++)
    if (mode != PAD_CONSTANT && y->dims[k] > 0) EP_CHECK(x->dims[k] > 0, EP_E_SHAPE);  /* nothing to repeat */
  return n->n_params == 3 + x->rank && n->n_in < 2 ? EP_OK : ep_shape_agrees(n, ep_shape_PAD);   /* as they say */
}

void ep_fill_value(uint8_t *d, uint64_t count, uint32_t es, uint32_t lo, uint32_t hi) {
  switch (es) {
    case 1: for (uint64_t i = 0; i < count; i++) d[i] = (uint8_t)lo; break;
    case 2: for (uint64_t i = 0; i < count; i++) ((uint16_t *)(void *)d)[i] = (uint16_t)lo; break;
    case 4: for (uint64_t i = 0; i < count; i++) ((uint32_t *)(void *)d)[i] = lo; break;
    default: {
      const uint64_t v = (uint64_t)lo | (uint64_t)hi << 32;
      for (uint64_t i = 0; i < count; i++) ((uint64_t *)(void *)d)[i] = v;
    }
  }
}

ep_status ep_run_PAD(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  if (y->numel == 0) return EP_OK;
  int32_t w[3 + 2 * EP_MAX_RANK];
  if (ep_pad_words(n, w)) return EP_E_PARAM;   /* checked: the value inputs change only by a resolve */
  const int32_t mode = w[0];
  const uint32_t lo = (uint32_t)w[1], hi = (uint32_t)w[2];
  const int32_t *begin = w + 3;
  const uint32_t es = ep_dtype_size(x->dtype);
  if (x->rank == 0) { dcopy(y->data, x->data, es); return EP_OK; }
  const uint32_t r = x->rank, L = r - 1;
  int64_t xst[EP_MAX_RANK], cnt[EP_MAX_RANK] = {0};
  strides_of(x, xst);
  const int64_t ol = y->dims[L], nl = x->dims[L], bl = begin[L];
  /* Columns [c0, c1) of each output row map straight onto input columns. */
  int64_t c0 = bl < 0 ? 0 : bl, c1 = bl + nl;
  if (c0 > ol) c0 = ol;
  if (c1 > ol) c1 = ol;
  if (c1 < c0) c1 = c0;
  uint8_t *d = y->data;
  for (;;) {
    int64_t src = 0;
    int outside = 0;
    for (uint32_t k = 0; k < L; k++) {
      const int64_t i = pad_map(cnt[k], begin[k], x->dims[k], mode);
      if (i < 0) { outside = 1; break; }
      src += i * xst[k];
    }
    if (outside) {
      ep_fill_value(d, (uint64_t)ol, es, lo, hi);
    } else {
      const uint8_t *s = x->data + (uint64_t)src * es;
      for (int64_t c = 0; c < c0; c++) {
        const int64_t i = pad_map(c, bl, nl, mode);
        if (i < 0) ep_fill_value(d + (uint64_t)c * es, 1, es, lo, hi); else ecopy1(d + (uint64_t)c * es, s + (uint64_t)i * es, es);
      }
      if (c1 > c0) dcopy(d + (uint64_t)c0 * es, s + (uint64_t)(c0 - bl) * es, (uint64_t)(c1 - c0) * es);
      for (int64_t c = c1; c < ol; c++) {
        const int64_t i = pad_map(c, bl, nl, mode);
        if (i < 0) ep_fill_value(d + (uint64_t)c * es, 1, es, lo, hi); else ecopy1(d + (uint64_t)c * es, s + (uint64_t)i * es, es);
      }
    }
    d += (uint64_t)ol * es;
    int32_t k = (int32_t)L - 1;
    for (; k >= 0; k--) {
      if (++cnt[k] < y->dims[k]) break;
      cnt[k] = 0;
    }
    if (k < 0) break;
  }
  return EP_OK;
}
