/* Long-tail index kernels: AXIS (ArgMax / ArgMin / Hardmax / TopK / CumSum), SCATTER (ScatterElements /
 * ScatterND), GATHER_ND. Data f32, i32, i64, i8, u8 (SCATTER without reduction and GATHER_ND: any dtype, as bytes).
 *
 * AXIS   in: X, K?  out: Y, Indices?   params: [mode, axis, a, b]; X viewed as [outer, n, inner] around axis.
 *   mode 0 ArgMax / 1 ArgMin: Y int64, X's rank with 1 on axis or rank - 1; a = select_last_index. NaN wins.
 *   mode 2 Hardmax: Y = X's shape and dtype, 1 at the row's ArgMax (first index), 0 elsewhere.
 *   mode 3 TopK: Y (values) and Indices (int64) of X's dims with k on axis; a = largest; b = k, or -1: k is K's
 *          value (int64, read by the shape function); sorted, equal values by index, NaN above every number.
 *          scratch: 4 * n bytes (a heap of row indices).
 *   mode 4 CumSum / 5 CumProd: Y = X's shape; a = exclusive, b = reverse; integers wrap. axis -1 with K: the axis
 *          is K's value (int32/int64, one element, negative from the end; a value input read while resolving).
 * SCATTER in: data, indices (i64/i32), updates  out: Y (data's shape)  params: [mode, axis, reduction]
 *   mode 0 ScatterElements along axis; 1 ScatterND (axis 0). reduction 0 none, 1 add, 2 mul, 3 max, 4 min.
 *   Every index is validated before Y is written (EP_E_INDEX); negative indices count from the end.
 * GATHER_ND in: data, indices (i64/i32) [..., q]  out: Y = indices.shape[:-1] + data.shape[b + q:]  params: [b]. */
#include "ep_kernel.h"
#include "ep_math.h"
#include "ep_shape.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code */

enum { AX_ARGMAX, AX_ARGMIN, AX_HARDMAX, AX_TOPK, AX_CUMSUM, AX_CUMPROD, AX_MODES };   /* as in shape/shape_axis.c */
enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN, RED_KINDS };

static int num_dtype(uint32_t dt) { return dt == EP_F32 || dt == EP_I64 || dt == EP_I32 || dt == EP_I8 || dt == EP_U8; }

static int64_t ld_int(const uint8_t *p, uint32_t dt, uint64_t i) {
  switch (dt) {
    case EP_I64: return ((const int64_t *)(const void *)p)[i];
    case EP_I32: return ((const int32_t *)(const void *)p)[i];
    case EP_I8: return (int8_t)p[i];
    default: return p[i];
  }
}

static void st_int(uint8_t *p, uint32_t dt, uint64_t i, int64_t v) {
  switch (dt) {
    case EP_I64: ((int64_t *)(void *)p)[i] = v; break;
    case EP_I32: ((int32_t *)(void *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; break;   /* wraps */
    default: p[i] = (uint8_t)(uint64_t)v; break;
  }
}

/* Sign of x[i] - x[j]; NaN (f32) is above every number when nan_hi, below when not; NaN == NaN. */
static int cmpv(const uint8_t *x, uint32_t dt, uint64_t i, uint64_t j, int nan_hi) {
  if (dt == EP_F32) {
    const float a = ((const float *)(const void *)x)[i], b = ((const float *)(const void *)x)[j];
    const int an = a != a, bn = b != b;
    if (an | bn) return an == bn ? 0 : (an ? (nan_hi ? 1 : -1) : (nan_hi ? -1 : 1));
    return (a > b) - (a < b);
  }
  const int64_t a = ld_int(x, dt, i), b = ld_int(x, dt, j);
  return (a > b) - (a < b);
}

/* [outer, n, inner] of t around axis */
static void split3(const ep_tensor *t, uint32_t axis, uint64_t *outer, uint64_t *n, uint64_t *inner) {
  *outer = *inner = 1;
  for (uint32_t k = 0; k < t->rank; k++) {
    if (k < axis) *outer *= (uint64_t)t->dims[k];
    else if (k > axis) *inner *= (uint64_t)t->dims[k];
  }
  *n = (uint64_t)t->dims[axis];
}

ep_status ep_check_AXIS(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && n->n_params == 4 && n->params[0] >= 0 && n->params[0] < AX_MODES, EP_E_PARAM);
  const int32_t mode = n->params[0], a = n->params[2], b = n->params[3], axis = ep_axis_of(n);
  EP_CHECK(axis >= 0 && (a == 0 || a == 1), EP_E_PARAM);
  EP_CHECK(mode == AX_TOPK ? b >= -1 : (mode >= AX_CUMSUM ? (b == 0 || b == 1) : b == 0), EP_E_PARAM);
  EP_CHECK((mode == AX_TOPK) == (n->n_out == 2) && (mode == AX_TOPK || n->n_in == 1 || n->params[1] == -1), EP_E_PARAM);
  EP_CHECK(num_dtype(x->dtype), EP_E_DTYPE);
  EP_CHECK(mode <= AX_ARGMIN ? y->dtype == EP_I64 : y->dtype == x->dtype, EP_E_DTYPE);
  if (mode == AX_TOPK) {
    EP_CHECK(n->out[1]->dtype == EP_I64, EP_E_DTYPE);
    EP_CHECK(b >= 0 || (n->n_in == 2 && n->in[1] && n->in[1]->dtype == EP_I64), EP_E_PARAM);
    EP_CHECK((uint64_t)n->scratch_bytes >= 4u * (uint64_t)x->dims[axis], EP_E_PARAM);
  }
  if (mode <= AX_ARGMIN) EP_CHECK(x->numel == 0 || x->dims[axis] > 0, EP_E_SHAPE);   /* no arg of an empty row */
  if (mode == AX_TOPK && b < 0) {   /* k from K: only Y's dims say it until the value is known */
    for (uint32_t i = 0; i < x->rank; i++)
      EP_CHECK(y->rank == x->rank && ep_same_shape(y, n->out[1]) && (i == (uint32_t)axis ? y->dims[i] <= x->dims[i] : y->dims[i] == x->dims[i]), EP_E_SHAPE);
    return EP_OK;
  }
  EP_CHECK(mode > AX_ARGMIN || y->rank == x->rank || y->rank + 1 == x->rank, EP_E_SHAPE);
  return ep_shape_agrees(n, ep_shape_AXIS);
}

/* TopK's order: row index p before q (p, q in 0..n) */
typedef struct { const uint8_t *x; uint32_t dt; uint64_t base, stride; int largest; } topk_ord;

static int before(const topk_ord *o, int32_t p, int32_t q) {
  const uint64_t ip = o->base + (uint64_t)p * o->stride, iq = o->base + (uint64_t)q * o->stride;
  const int c = o->largest ? cmpv(o->x, o->dt, ip, iq, 1) : cmpv(o->x, o->dt, iq, ip, 1);
  return c > 0 || (c == 0 && p < q);
}

static void sift(const topk_ord *o, int32_t *h, uint64_t len, uint64_t i) {
  for (;;) {
    uint64_t c = 2 * i + 1, best = i;
    if (c < len && before(o, h[c], h[best])) best = c;
    if (c + 1 < len && before(o, h[c + 1], h[best])) best = c + 1;
    if (best == i) return;
    const int32_t t = h[i]; h[i] = h[best]; h[best] = t;
    i = best;
  }
}

ep_status ep_run_AXIS(const ep_node *n) {
  const ep_tensor *xt = n->in[0], *yt = n->out[0];
  const int32_t mode = n->params[0], a = n->params[2], b = n->params[3];
  const uint32_t dt = xt->dtype, es = ep_dtype_size(dt);
  const uint8_t *x = xt->data;
  uint8_t *y = yt->data;
  uint64_t outer, len, inner;
  const int32_t axis = ep_axis_of(n);
  if (axis < 0) return EP_E_PARAM;   /* checked: a run-time axis changes only by a resolve */
  split3(xt, (uint32_t)axis, &outer, &len, &inner);
  const uint64_t k = mode == AX_TOPK ? (uint64_t)yt->dims[axis] : 1;
  for (uint64_t o = 0; o < outer; o++) {
    for (uint64_t i = 0; i < inner; i++) {
      const uint64_t base = o * len * inner + i;
      if (mode == AX_TOPK) {
        int32_t *h = (int32_t *)(void *)n->scratch;
        const topk_ord ord = {x, dt, base, inner, a};
        for (uint64_t j = 0; j < len; j++) h[j] = (int32_t)j;
        for (uint64_t j = len / 2; j-- > 0;) sift(&ord, h, len, j);
        int64_t *ix = ep_i64(n->out[1]);
        for (uint64_t j = 0, m = len; j < k; j++) {
          const uint64_t at = (o * k + j) * inner + i;
          ep_memcpy(y + at * es, x + (base + (uint64_t)h[0] * inner) * es, es);
          ix[at] = h[0];
          h[0] = h[--m];
          sift(&ord, h, m, 0);
        }
      } else if (mode >= AX_CUMSUM) {
        const int prod = mode == AX_CUMPROD;   /* the running value starts at the operation's identity */
        uint64_t acc = (uint64_t)prod;
        float facc = (float)prod;
        for (uint64_t j = 0; j < len; j++) {
          const uint64_t at = base + (b ? len - 1 - j : j) * inner;
          float fv = 0.0f;
          uint64_t v = 0;
          if (dt == EP_F32) fv = ep_f32(xt)[at]; else v = (uint64_t)ld_int(x, dt, at);
          for (int pass = 0; pass < 2; pass++) {   /* exclusive: store, then accumulate */
            if (pass == a) {
              if (prod) { facc *= fv; acc *= v; } else { facc += fv; acc += v; }
            } else {
              if (dt == EP_F32) ep_f32(yt)[at] = facc; else st_int(y, dt, at, (int64_t)acc);
            }
          }
        }
      } else {
        uint64_t best = 0;   /* ArgMax, Hardmax: NaN highest; ArgMin: NaN lowest; so NaN wins either way */
        for (uint64_t j = 1; j < len; j++) {
          const uint64_t pj = base + j * inner, pb = base + best * inner;
          const int c = mode == AX_ARGMIN ? cmpv(x, dt, pb, pj, 0) : cmpv(x, dt, pj, pb, 1);
          if (c > 0 || (c == 0 && a)) best = j;
        }
        if (mode != AX_HARDMAX) { ep_i64(yt)[o * inner + i] = (int64_t)best; continue; }
        for (uint64_t j = 0; j < len; j++) {
          const uint64_t at = base + j * inner;
          if (dt == EP_F32) ep_f32(yt)[at] = j == best ? 1.0f : 0.0f; else st_int(y, dt, at, j == best);
        }
      }
    }
  }
  return EP_OK;
}

/* ================================ SCATTER ====================================================== */

/* y[yi] (reduction)= u[ui] */
static void apply(uint8_t *y, const uint8_t *u, uint32_t dt, uint32_t es, uint64_t yi, uint64_t ui, int32_t red) {
  if (red == RED_NONE) { ep_memcpy(y + yi * es, u + ui * es, es); return; }
  if (dt == EP_F32) {
    float *p = (float *)(void *)y + yi;
    const float v = ((const float *)(const void *)u)[ui];
    *p = red == RED_ADD ? *p + v : red == RED_MUL ? *p * v : red == RED_MAX ? ep_max_nan(*p, v) : ep_min_nan(*p, v);
    return;
  }
  const int64_t p = ld_int(y, dt, yi), v = ld_int(u, dt, ui);
  st_int(y, dt, yi, red == RED_ADD ? (int64_t)((uint64_t)p + (uint64_t)v) : red == RED_MUL ? (int64_t)((uint64_t)p * (uint64_t)v)
                    : red == RED_MAX ? (p > v ? p : v) : (p < v ? p : v));
}

/* Element strides of t (row-major). */
static void strides(const ep_tensor *t, uint64_t *st) {
  uint64_t s = 1;
  for (uint32_t k = t->rank; k-- > 0;) { st[k] = s; s *= (uint64_t)t->dims[k]; }
}

ep_status ep_check_SCATTER(const ep_node *n) {
  const ep_tensor *d = n->in[0], *ix = n->in[1], *u = n->in[2], *y = n->out[0];
  EP_CHECK(d && ix && u && n->n_params == 3 && (n->params[0] == 0 || n->params[0] == 1), EP_E_PARAM);
  const int32_t mode = n->params[0], axis = n->params[1], red = n->params[2];
  EP_CHECK(red >= RED_NONE && red < RED_KINDS && axis >= 0 && (mode ? axis == 0 : (uint32_t)axis < d->rank), EP_E_PARAM);
  EP_CHECK(ix->dtype == EP_I64 || ix->dtype == EP_I32, EP_E_DTYPE);
  EP_CHECK(u->dtype == d->dtype && y->dtype == d->dtype && ep_dtype_size(d->dtype) && (red == RED_NONE || num_dtype(d->dtype)), EP_E_DTYPE);
  EP_CHECK(ep_same_shape(d, y) && d->rank >= 1, EP_E_SHAPE);
  if (mode == 0) {
    EP_CHECK(ep_same_shape(ix, u) && ix->rank == d->rank, EP_E_SHAPE);
    for (uint32_t k = 0; k < d->rank; k++) EP_CHECK((int32_t)k == axis || ix->dims[k] <= d->dims[k], EP_E_SHAPE);
    return EP_OK;
  }
  /* ScatterND: updates = indices.shape[:-1] + data.shape[q:] */
  EP_CHECK(ix->rank >= 1, EP_E_SHAPE);
  const uint32_t q = (uint32_t)ix->dims[ix->rank - 1];
  EP_CHECK(q <= d->rank && u->rank == ix->rank - 1 + d->rank - q, EP_E_SHAPE);
  for (uint32_t k = 0; k < u->rank; k++)
    EP_CHECK(u->dims[k] == (k < ix->rank - 1 ? ix->dims[k] : d->dims[q + k - (ix->rank - 1)]), EP_E_SHAPE);
  return EP_OK;
}

/* Flat data offset of indices tuple m (q values from indices element m*q), into dims [b, b+q) of d; -1 if out of range. */
static int64_t nd_offset(const ep_tensor *d, const ep_tensor *ix, uint64_t m, uint32_t q, uint32_t b, const uint64_t *st) {
  uint64_t off = 0;
  for (uint32_t j = 0; j < q; j++) {
    int64_t v = ep_value_at(ix, m * q + j);
    const int64_t dim = d->dims[b + j];
    if (v < 0) v += dim;
    if (v < 0 || v >= dim) return -1;
    off += (uint64_t)v * st[b + j];
  }
  return (int64_t)off;
}

ep_status ep_run_SCATTER(const ep_node *n) {
  const ep_tensor *d = n->in[0], *ix = n->in[1], *u = n->in[2], *yt = n->out[0];
  const int32_t mode = n->params[0], axis = n->params[1], red = n->params[2];
  const uint32_t dt = d->dtype, es = ep_dtype_size(dt);
  uint64_t dst[EP_MAX_RANK];
  strides(d, dst);
  if (mode == 1) {
    const uint32_t q = (uint32_t)ix->dims[ix->rank - 1];
    const uint64_t tuples = q ? ix->numel / q : 0, slice = tuples ? u->numel / tuples : 0;
    for (uint64_t m = 0; m < tuples; m++) if (nd_offset(d, ix, m, q, 0, dst) < 0) return EP_E_INDEX;
    if (yt->data != d->data) ep_memcpy(yt->data, d->data, (uint32_t)(d->numel * es));
    for (uint64_t m = 0; m < tuples; m++) {
      const uint64_t off = (uint64_t)nd_offset(d, ix, m, q, 0, dst);
      for (uint64_t e = 0; e < slice; e++) apply(yt->data, u->data, dt, es, off + e, m * slice + e, red);
    }
    return EP_OK;
  }
  const int64_t dim = d->dims[axis];
  for (uint64_t e = 0; e < ix->numel; e++) {
    const int64_t v = ep_value_at(ix, e);
    if (v < -dim || v >= dim) return EP_E_INDEX;
  }
  if (yt->data != d->data) ep_memcpy(yt->data, d->data, (uint32_t)(d->numel * es));
  uint32_t c[EP_MAX_RANK] = {0};
  for (uint64_t e = 0; e < ix->numel; e++) {
    int64_t v = ep_value_at(ix, e);
    if (v < 0) v += dim;
    uint64_t off = 0;
    for (uint32_t k = 0; k < d->rank; k++) off += ((int32_t)k == axis ? (uint64_t)v : c[k]) * dst[k];
    apply(yt->data, u->data, dt, es, off, e, red);
    for (uint32_t k = ix->rank; k-- > 0;) {   /* odometer over the indices' shape */
      if (++c[k] < (uint32_t)ix->dims[k]) break;
      c[k] = 0;
    }
  }
  return EP_OK;
}

/* ================================ GATHER_ND ==================================================== */

ep_status ep_check_GATHER_ND(const ep_node *n) {
  const ep_tensor *d = n->in[0], *ix = n->in[1];
  EP_CHECK(d && ix && n->n_params == 1, EP_E_PARAM);
  EP_CHECK(ix->dtype == EP_I64 || ix->dtype == EP_I32, EP_E_DTYPE);
  EP_CHECK(n->out[0]->dtype == d->dtype && ep_dtype_size(d->dtype), EP_E_DTYPE);
  return ep_shape_agrees(n, ep_shape_GATHER_ND);
}

ep_status ep_run_GATHER_ND(const ep_node *n) {
  const ep_tensor *d = n->in[0], *ix = n->in[1], *yt = n->out[0];
  const uint32_t b = (uint32_t)n->params[0], q = (uint32_t)ix->dims[ix->rank - 1], es = ep_dtype_size(d->dtype);
  uint64_t dst[EP_MAX_RANK], batches = 1, tuples = 1;
  strides(d, dst);
  for (uint32_t k = 0; k < b; k++) batches *= (uint64_t)d->dims[k];
  for (uint32_t k = b; k + 1 < ix->rank; k++) tuples *= (uint64_t)ix->dims[k];   /* per batch */
  const uint64_t slice = b + q < d->rank ? dst[b + q] * (uint64_t)d->dims[b + q] : 1, bstride = b ? dst[b - 1] : 0;
  for (uint64_t m = 0; m < batches * tuples; m++) if (nd_offset(d, ix, m, q, b, dst) < 0) return EP_E_INDEX;
  for (uint64_t m = 0; m < batches * tuples; m++) {
    const uint64_t off = (m / (tuples ? tuples : 1)) * bstride + (uint64_t)nd_offset(d, ix, m, q, b, dst);
    ep_memcpy(yt->data + m * slice * es, d->data + off * es, (uint32_t)(slice * es));
  }
  return EP_OK;
}
EP_COLD_FILE_END
