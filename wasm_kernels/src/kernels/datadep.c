/* Kernels whose output extent depends on the input's values (plan v2; docs/plan-format.md, "Data-dependent output
 * dims"): NONZERO, NON_MAX_SUPPRESSION, UNIQUE. Each output is placed at its capacity (the shape function's dims);
 * run() writes the data and sets the actual extent in n->out[k]->dims, which the core hands to the later nodes.
 *
 * NONZERO  in: X  out: Y int64 [max(rank, 1), count]  (capacity count = numel)
 * NON_MAX_SUPPRESSION  in: boxes f32 [B, N, 4], scores f32 [B, C, N], max_output?, iou?, score_threshold?
 *   out: int64 [rows, 3]  params: [center_point_box, per_class]  scratch: 8 * N (a heap of candidates, the kept)
 * UNIQUE  in: X  out: Y, indices, inverse_indices, counts  params: [axis (-1: flattened), sorted]  scratch: 8 * n */
#include "ep_kernel.h"
#include "ep_shape.h"
#include "lowp.h"
EP_COLD_FILE_BEGIN   /* scalar bookkeeping, no benchmark model spends time here: smallest code */

static int is_float(uint32_t dt) { return dt == EP_F32 || dt == EP_F64 || dt == EP_F16 || dt == EP_BF16; }

/* Numbers and bool: the dtypes NONZERO and UNIQUE read (not the 8-bit-and-smaller float codes, nor 2/4-bit ints). */
static int plain_dtype(uint32_t dt) { return (dt >= EP_F32 && dt <= EP_U64 && dt != 8) || dt == EP_BF16; }

/* -- NONZERO --------------------------------------------------------------------------------------------------- */

/* An element is zero when every bit but a float's sign bit (the top bit of its last byte) is 0. */
static int nonzero_at(const uint8_t *p, uint32_t es, int fl) {
  for (uint32_t b = 0; b + 1 < es; b++) if (p[b]) return 1;
  return (p[es - 1] & (fl ? 0x7Fu : 0xFFu)) != 0;
}

/* The outputs at the shape function's capacities (src/shape/shape_datadep.c), scratch as its scratch function. */
static ep_status at_capacity(const ep_node *n) {
  const ep_shape_entry *se = ep_shape_for(n->op);
  EP_CHECK(!se->scratch || n->scratch_bytes >= se->scratch(n), EP_E_ARENA);
  return ep_shape_agrees(n, se->shape);
}

ep_status ep_check_NONZERO(const ep_node *n) {
  EP_CHECK(n->n_params == 0 && n->in[0], EP_E_PARAM);
  EP_CHECK(plain_dtype(n->in[0]->dtype) && n->out[0]->dtype == EP_I64, EP_E_DTYPE);
  return at_capacity(n);
}

ep_status ep_run_NONZERO(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  ep_tensor *y = n->out[0];
  const uint32_t es = ep_dtype_size(x->dtype), fl = (uint32_t)is_float(x->dtype);
  const uint32_t numel = (uint32_t)x->numel;   /* < 2^31: the capacity is a dim */
  uint32_t count = 0;
  for (uint32_t i = 0; i < numel; i++) count += (uint32_t)nonzero_at(x->data + i * es, es, (int)fl);
  int64_t *out = ep_i64(y);
  uint32_t j = 0;
  for (uint32_t i = 0; i < numel; i++) {
    if (!nonzero_at(x->data + i * es, es, (int)fl)) continue;
    uint32_t rest = i;
    for (uint32_t d = x->rank; d-- > 0;) {   /* row-major coordinates, the last dim fastest */
      out[d * count + j] = rest % (uint32_t)x->dims[d];
      rest /= (uint32_t)x->dims[d];
    }
    if (!x->rank) out[j] = 0;
    j++;
  }
  y->dims[1] = (int32_t)count;
  y->numel = (uint32_t)y->dims[0] * count;
  return EP_OK;
}

/* -- NON_MAX_SUPPRESSION ---------------------------------------------------------------------------------------- */

ep_status ep_check_NON_MAX_SUPPRESSION(const ep_node *n) {
  const ep_tensor *b = n->in[0], *s = n->in[1];
  EP_CHECK(b && s && n->n_params == 2 && (n->params[0] == 0 || n->params[0] == 1) && n->params[1] >= -1, EP_E_PARAM);
  EP_CHECK(b->dtype == EP_F32 && s->dtype == EP_F32 && n->out[0]->dtype == EP_I64, EP_E_DTYPE);
  EP_CHECK(b->dims[2] == 4 && s->dims[0] == b->dims[0] && s->dims[2] == b->dims[1], EP_E_SHAPE);   /* ranks: shape fn */
  for (uint32_t k = 2; k < n->n_in; k++)   /* max_output int64, the thresholds float32: one value each */
    EP_CHECK(!n->in[k] || (n->in[k]->dtype == (k == 2 ? EP_I64 : EP_F32) && n->in[k]->numel == 1), EP_E_DTYPE);
  return at_capacity(n);
}

/* onnxruntime's SuppressByIOU: each box's extent on x and y (corners in either order, or center +- half the size),
 * their intersection, IoU > threshold; a box of no area suppresses nothing. */
static int suppresses(const float *p, const float *q, int centers, float iou) {
  float inter = 1, area[2] = {1, 1};
  for (uint32_t a = 0; a < 2; a++) {   /* x: corners' words 1, 3 / center word 0; y: 0, 2 / 1 */
    float lo[2], hi[2];
    for (uint32_t k = 0; k < 2; k++) {
      const float *b = k ? q : p;
      const float u = centers ? b[a] - b[a + 2] / 2 : b[1 - a], v = centers ? b[a] + b[a + 2] / 2 : b[3 - a];
      lo[k] = u <= v ? u : v; hi[k] = u <= v ? v : u;
      area[k] *= hi[k] - lo[k];
    }
    const float l = lo[0] > lo[1] ? lo[0] : lo[1], h = hi[0] < hi[1] ? hi[0] : hi[1];
    if (h <= l) return 0;
    inter *= h - l;
  }
  const float uni = area[0] + area[1] - inter;
  if (inter <= 0.0f || area[0] <= 0.0f || area[1] <= 0.0f || uni <= 0.0f) return 0;
  return inter / uni > iou;
}

/* Candidate a comes before b: higher score, then lower box index (onnxruntime's priority queue). */
static int before(const float *sc, uint32_t a, uint32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); }

static void sift_down(uint32_t *h, uint32_t len, uint32_t i, const float *sc) {
  for (;;) {
    uint32_t best = i;
    const uint32_t l = 2 * i + 1, r = l + 1;
    if (l < len && before(sc, h[l], h[best])) best = l;
    if (r < len && before(sc, h[r], h[best])) best = r;
    if (best == i) return;
    const uint32_t t = h[i]; h[i] = h[best]; h[best] = t;
    i = best;
  }
}

ep_status ep_run_NON_MAX_SUPPRESSION(const ep_node *n) {
  const ep_tensor *bt = n->in[0], *st = n->in[1];
  const ep_tensor *mo = n->n_in > 2 ? n->in[2] : 0, *it = n->n_in > 3 ? n->in[3] : 0, *tt = n->n_in > 4 ? n->in[4] : 0;
  const uint32_t B = (uint32_t)bt->dims[0], N = (uint32_t)bt->dims[1], C = (uint32_t)st->dims[1];
  int64_t limit = mo ? *ep_i64(mo) : 0;
  if (limit < 0) limit = 0;
  if (limit > (int64_t)N) limit = N;
  const float iou = it ? *ep_f32(it) : 0.0f, thr = tt ? *ep_f32(tt) : 0.0f;
  if ((n->params[1] >= 0 && limit > n->params[1]) || !(iou >= 0.0f && iou <= 1.0f)) return EP_E_INDEX;
  uint32_t *heap = (uint32_t *)(void *)n->scratch, *kept = heap + N;
  int64_t *out = ep_i64(n->out[0]);
  uint32_t rows = 0;
  for (uint32_t b = 0; b < B; b++) {
    const float *boxes = ep_f32(bt) + b * N * 4;
    for (uint32_t c = 0; c < C; c++) {
      const float *sc = ep_f32(st) + (b * C + c) * N;
      uint32_t len = 0, nk = 0;
      for (uint32_t i = 0; i < N; i++) if (!tt || sc[i] > thr) heap[len++] = i;
      for (uint32_t i = len / 2; i-- > 0;) sift_down(heap, len, i, sc);
      while (len && nk < (uint32_t)limit) {
        const uint32_t top = heap[0];
        heap[0] = heap[--len];
        sift_down(heap, len, 0, sc);
        uint32_t k = 0;
        while (k < nk && !suppresses(boxes + 4 * top, boxes + 4 * kept[k], n->params[0], iou)) k++;
        if (k < nk) continue;
        kept[nk++] = top;
        out[3 * rows] = b; out[3 * rows + 1] = c; out[3 * rows + 2] = top;
        rows++;
      }
    }
  }
  n->out[0]->dims[0] = (int32_t)rows;
  n->out[0]->numel = 3u * rows;
  return EP_OK;
}

/* -- UNIQUE ----------------------------------------------------------------------------------------------------- */

typedef struct { const uint8_t *x; uint32_t dtype, es, outer, len, inner; } items;   /* numel < 2^31: check() */

/* Element i as a number: floats widened to double, integers to int64 (UNIQUE's dtypes: plain_dtype). */
static int64_t int_at(const uint8_t *p, uint32_t dt) {
  switch (dt) {
    case EP_I8: return *(const int8_t *)p;
    case EP_I16: return *(const int16_t *)(const void *)p;
    case EP_I32: return *(const int32_t *)(const void *)p;
    case EP_U16: return *(const uint16_t *)(const void *)p;
    case EP_U32: return *(const uint32_t *)(const void *)p;
    case EP_I64: return *(const int64_t *)(const void *)p;
    default: return *p;   /* uint8, bool */
  }
}

static double float_at(const uint8_t *p, uint32_t dt) {
  if (dt == EP_F32) return *(const float *)(const void *)p;
  if (dt == EP_F64) return *(const double *)(const void *)p;
  return ep_small_float_value(dt, *(const uint16_t *)(const void *)p);   /* float16, bfloat16 */
}

/* Sign of element i - element j (floats as numbers: -0.0 == 0.0; uint64 by its bits' order). */
static int cmp_elem(const items *it, uint32_t i, uint32_t j) {
  const uint8_t *a = it->x + i * it->es, *b = it->x + j * it->es;
  if (is_float(it->dtype)) {
    const double p = float_at(a, it->dtype), q = float_at(b, it->dtype);
    return (p > q) - (p < q);
  }
  if (it->dtype == EP_U64) {
    const uint64_t p = *(const uint64_t *)(const void *)a, q = *(const uint64_t *)(const void *)b;
    return (p > q) - (p < q);
  }
  const int64_t p = int_at(a, it->dtype), q = int_at(b, it->dtype);
  return (p > q) - (p < q);
}

/* Items (elements, or slices along the axis) a and b, element by element in row-major order. */
static int cmp_item(const items *it, uint32_t a, uint32_t b) {
  for (uint32_t o = 0; o < it->outer; o++)
    for (uint32_t k = 0; k < it->inner; k++) {
      const int c = cmp_elem(it, (o * it->len + a) * it->inner + k, (o * it->len + b) * it->inner + k);
      if (c) return c;
    }
  return 0;
}

/* X as [outer, len, inner] around the axis (flattened: [1, numel, 1]). */
static items unique_items(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  items it = {x->data, x->dtype, ep_dtype_size(x->dtype), 1, (uint32_t)x->numel, 1};
  if (n->params[0] >= 0) {
    const uint32_t axis = (uint32_t)n->params[0];
    it.len = (uint32_t)x->dims[axis];
    for (uint32_t d = 0; d < x->rank; d++) {
      if (d < axis) it.outer *= (uint32_t)x->dims[d];
      else if (d > axis) it.inner *= (uint32_t)x->dims[d];
    }
  }
  return it;
}

ep_status ep_check_UNIQUE(const ep_node *n) {
  EP_CHECK(n->in[0] && n->n_params == 2 && (n->params[1] == 0 || n->params[1] == 1), EP_E_PARAM);   /* axis: shape fn */
  EP_CHECK(plain_dtype(n->in[0]->dtype) && n->out[0]->dtype == n->in[0]->dtype, EP_E_DTYPE);
  for (uint32_t o = 1; o < 4; o++) EP_CHECK(n->out[o]->dtype == EP_I64, EP_E_DTYPE);
  return at_capacity(n);
}

ep_status ep_run_UNIQUE(const ep_node *n) {
  const items it = unique_items(n);
  const uint32_t len = (uint32_t)it.len;
  uint32_t *perm = (uint32_t *)(void *)n->scratch, *tmp = perm + len;
  for (uint32_t i = 0; i < len; i++) perm[i] = i;
  for (uint32_t w = 1; w < len; w *= 2) {   /* bottom-up merge sort: stable, so equal items keep index order */
    for (uint32_t lo = 0; lo < len; lo += 2 * w) {
      const uint32_t mid = lo + w < len ? lo + w : len, hi = lo + 2 * w < len ? lo + 2 * w : len;
      uint32_t a = lo, b = mid, k = lo;
      while (a < mid || b < hi) tmp[k++] = b >= hi || (a < mid && cmp_item(&it, perm[a], perm[b]) <= 0) ? perm[a++] : perm[b++];
    }
    for (uint32_t i = 0; i < len; i++) perm[i] = tmp[i];
  }
  uint32_t groups = 0;   /* tmp[item] = its group, numbered in sorted order */
  for (uint32_t k = 0; k < len; k++) {
    if (k && cmp_item(&it, perm[k - 1], perm[k])) groups++;
    tmp[perm[k]] = groups;
  }
  if (len) groups++;
  const int sorted = n->params[1];
  for (uint32_t g = 0; g < groups; g++) perm[g] = sorted ? g : 0xFFFFFFFFu;   /* perm[group] = its output slot */
  int64_t *first = ep_i64(n->out[1]), *inverse = ep_i64(n->out[2]), *counts = ep_i64(n->out[3]);
  for (uint32_t u = 0; u < groups; u++) counts[u] = 0;
  const uint32_t row = it.inner * it.es;
  uint32_t next = 0;
  for (uint32_t i = 0; i < len; i++) {
    const uint32_t g = tmp[i];
    if (perm[g] == 0xFFFFFFFFu) perm[g] = next++;
    const uint32_t u = perm[g];
    if (!counts[u]) {   /* first occurrence: the item goes to slot u */
      first[u] = i;
      for (uint32_t o = 0; o < it.outer; o++)
        ep_memcpy(n->out[0]->data + (o * groups + u) * row, it.x + (o * it.len + i) * row, row);
    }
    counts[u]++;
    inverse[i] = u;
  }
  n->out[0]->dims[n->params[0] < 0 ? 0 : n->params[0]] = (int32_t)groups;
  n->out[0]->numel = (uint64_t)it.outer * groups * it.inner;
  for (uint32_t o = 1; o < 4; o += 2) { n->out[o]->dims[0] = (int32_t)groups; n->out[o]->numel = groups; }
  return EP_OK;
}

EP_COLD_FILE_END
