/* RESIZE: separable, table-driven resampling (ONNX Resize / Upsample, every mode the packager can tabulate).
 *
 * The packager computes, per dimension, which input indices and weights each output coordinate reads
 * (nearest, linear, cubic, antialias, every coordinate transformation), so the kernel is one generic loop:
 *   y[o_0..o_{r-1}] = sum over taps t_k of  prod_k w_k[o_k][t_k] * x[idx_0[o_0][t_0], ..., idx_{r-1}[o_{r-1}][t_{r-1}]]
 *
 * Parameter words:
 *   [0] flags: bit 0 = weighted (float32 only); without it every K is 0 or 1 and the kernel copies elements
 *       (any dtype), with no weight words in the tables
 *   [1] extrapolation value (f32 bits), written where a table index is -1 (tf_crop_and_resize)
 *   then, for each dim k = 0..rank-1:
 *       K_k        taps per output coordinate; 0 = identity (out_k == in_k, no table follows)
 *       out_k*K_k  int32 input indices in [-1, in_k), row-major [o][t]; -1 marks an extrapolated coordinate
 *       out_k*K_k  f32 weights (weighted mode only)
 * Every index is validated by check() against the tensor shapes. */
#include "ep_kernel.h"
#include "ep_vec.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code (also in the one-step emcc build) */

#define RS_MAX_TAPS 1024

typedef struct {
  uint32_t weighted;
  float extrap;
  uint32_t K[EP_MAX_RANK];
  const int32_t *idx[EP_MAX_RANK];
  const int32_t *w[EP_MAX_RANK];     /* f32 bit patterns */
} rs_tables;

static ep_status rs_parse(const ep_node *n, rs_tables *t) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x, EP_E_OP);
  EP_CHECK(x->dtype == y->dtype, EP_E_DTYPE);
  const uint32_t es = ep_dtype_size(x->dtype);
  EP_CHECK(es == 1 || es == 2 || es == 4 || es == 8, EP_E_DTYPE);
  EP_CHECK(x->rank == y->rank && x->rank >= 1, EP_E_SHAPE);
  EP_CHECK(n->n_params >= 2, EP_E_PARAM);
  const int32_t flags = n->params[0];
  EP_CHECK(flags == 0 || flags == 1, EP_E_PARAM);
  t->weighted = (uint32_t)flags;
  if (t->weighted) EP_CHECK(x->dtype == EP_F32, EP_E_DTYPE);
  t->extrap = ep_param_f32(n, 1);
  int any_extrap = 0;
  uint64_t pos = 2;
  for (uint32_t k = 0; k < x->rank; k++) {
    EP_CHECK(pos < n->n_params, EP_E_PARAM);
    const int32_t K = n->params[pos++];
    const int64_t od = y->dims[k], id = x->dims[k];
    EP_CHECK(K >= 0 && K <= RS_MAX_TAPS, EP_E_PARAM);
    EP_CHECK(t->weighted || K <= 1, EP_E_PARAM);
    t->K[k] = (uint32_t)K;
    t->idx[k] = t->w[k] = 0;
    if (K == 0) { EP_CHECK(od == id, EP_E_SHAPE); continue; }
    const uint64_t cnt = (uint64_t)od * (uint64_t)K;
    const uint64_t words = cnt * (t->weighted ? 2u : 1u);
    EP_CHECK(words <= (uint64_t)n->n_params - pos, EP_E_PARAM);
    t->idx[k] = n->params + pos;
    for (uint64_t i = 0; i < cnt; i++) {
      const int32_t v = t->idx[k][i];
      EP_CHECK(v >= -1 && (int64_t)v < id, EP_E_PARAM);
      if (v < 0) any_extrap = 1;
    }
    pos += cnt;
    if (t->weighted) { t->w[k] = n->params + pos; pos += cnt; }
  }
  EP_CHECK(pos == n->n_params, EP_E_PARAM);
  if (any_extrap) EP_CHECK(x->dtype == EP_F32, EP_E_DTYPE);
  /* Weighted mode walks every combination of outer taps per row; bound the work per output row. */
  if (t->weighted) {
    uint64_t taps = 1;
    for (uint32_t k = 0; k + 1 < x->rank; k++) { taps *= t->K[k] ? t->K[k] : 1; EP_CHECK(taps <= RS_MAX_TAPS * 64u, EP_E_PARAM); }
  }
  return EP_OK;
}

ep_status ep_check_RESIZE(const ep_node *n) { rs_tables t; return rs_parse(n, &t); }

static inline float bits_f32(int32_t b) { union { int32_t i; float f; } u; u.i = b; return u.f; }

static void copy_elem(uint8_t *d, const uint8_t *s, uint32_t es) {
  switch (es) {
    case 1: *d = *s; break;
    case 2: *(uint16_t *)(void *)d = *(const uint16_t *)(const void *)s; break;
    case 4: *(uint32_t *)(void *)d = *(const uint32_t *)(const void *)s; break;
    default: *(uint64_t *)(void *)d = *(const uint64_t *)(const void *)s; break;
  }
}

static void copy_bytes(uint8_t *d, const uint8_t *s, uint64_t n) {
  if ((((uintptr_t)d | (uintptr_t)s | (uintptr_t)n) & 3u) == 0) {
    uint32_t *dw = (uint32_t *)(void *)d;
    const uint32_t *sw = (const uint32_t *)(const void *)s;
    for (uint64_t i = 0; i < n / 4; i++) dw[i] = sw[i];
    return;
  }
  for (uint64_t i = 0; i < n; i++) d[i] = s[i];
}

/* Copy mode: every output element is one input element (nearest), or the extrapolation value. */
static void run_copy(const ep_tensor *x, const ep_tensor *y, const rs_tables *t) {
  const uint32_t r = x->rank, L = r - 1, es = ep_dtype_size(x->dtype);
  int64_t xst[EP_MAX_RANK], cnt[EP_MAX_RANK] = {0};
  { uint64_t s = 1; for (int32_t k = (int32_t)r - 1; k >= 0; k--) { xst[k] = (int64_t)s; s *= (uint64_t)x->dims[k]; } }
  const int64_t ol = y->dims[L];
  const uint64_t row_bytes = (uint64_t)ol * es;
  uint8_t *d = y->data, *prev = 0;
  int64_t prev_src = -2;
  for (;;) {
    int64_t src = 0;
    for (uint32_t k = 0; k < L; k++) {
      const int64_t i = t->K[k] ? t->idx[k][cnt[k]] : cnt[k];
      if (i < 0) { src = -1; break; }
      src += i * xst[k];
    }
    if (prev && src == prev_src) {
      copy_bytes(d, prev, row_bytes);              /* same source row as the previous output row */
    } else if (src < 0) {
      for (int64_t c = 0; c < ol; c++) ((float *)(void *)d)[c] = t->extrap;   /* f32 checked */
    } else {
      const uint8_t *s = x->data + (uint64_t)src * es;
      if (!t->K[L]) {
        copy_bytes(d, s, row_bytes);
      } else {
        const int32_t *ix = t->idx[L];
        if (es == 4) {
          uint32_t *dw = (uint32_t *)(void *)d;
          const uint32_t *sw = (const uint32_t *)(const void *)s;
          union { float f; uint32_t u; } e;
          e.f = t->extrap;
          for (int64_t c = 0; c < ol; c++) {
            const int32_t i = ix[c];
            dw[c] = i >= 0 ? sw[i] : e.u;
          }
        } else {
          for (int64_t c = 0; c < ol; c++)
            if (ix[c] >= 0) copy_elem(d + (uint64_t)c * es, s + (uint64_t)ix[c] * es, es);
            /* ix < 0 only with f32 (checked), handled above */
        }
      }
    }
    prev = d; prev_src = src;
    d += row_bytes;
    int32_t k = (int32_t)L - 1;
    for (; k >= 0; k--) { if (++cnt[k] < y->dims[k]) break; cnt[k] = 0; }
    if (k < 0) break;
  }
}

/* Weighted mode (float32): per output row, walk every combination of taps of the outer dims. */
static void run_weighted(const ep_tensor *x, const ep_tensor *y, const rs_tables *t) {
  const uint32_t r = x->rank, L = r - 1;
  int64_t xst[EP_MAX_RANK], cnt[EP_MAX_RANK] = {0};
  { uint64_t s = 1; for (int32_t k = (int32_t)r - 1; k >= 0; k--) { xst[k] = (int64_t)s; s *= (uint64_t)x->dims[k]; } }
  const int64_t ol = y->dims[L];
  const uint32_t KL = t->K[L];
  const float *xf = (const float *)(const void *)x->data;
  float *d = (float *)(void *)y->data;
  int last_extrap = 0;
  for (uint64_t i = 0; KL && i < (uint64_t)ol * KL; i++) if (t->idx[L][i] < 0) last_extrap = 1;
  for (;;) {
    /* Extrapolated row? (any outer coordinate with an index of -1) */
    int extrap = 0;
    for (uint32_t k = 0; k < L && !extrap; k++)
      if (t->K[k]) for (uint32_t q = 0; q < t->K[k]; q++) if (t->idx[k][cnt[k] * t->K[k] + q] < 0) extrap = 1;
    if (extrap) {
      for (int64_t c = 0; c < ol; c++) d[c] = t->extrap;
    } else {
      for (int64_t c = 0; c < ol; c++) d[c] = 0.0f;
      uint32_t tap[EP_MAX_RANK] = {0};
      for (;;) {
        int64_t src = 0;
        float wt = 1.0f;
        for (uint32_t k = 0; k < L; k++) {
          if (!t->K[k]) { src += cnt[k] * xst[k]; continue; }
          const int64_t e = cnt[k] * t->K[k] + tap[k];
          src += (int64_t)t->idx[k][e] * xst[k];
          wt *= bits_f32(t->w[k][e]);
        }
        const float *s = xf + src;
        if (!KL) {
          const f32x4 wv = f32x4_splat(wt);
          int64_t c = 0;
          for (; c + 4 <= ol; c += 4) f32x4_store(d + c, f32x4_fma(f32x4_load(d + c), f32x4_load(s + c), wv));
          for (; c < ol; c++) d[c] += wt * s[c];
        } else if (KL == 2 && !last_extrap) {   /* the common (bi)linear case, no branches */
          const int32_t *ix = t->idx[L];
          const float *w = (const float *)(const void *)t->w[L];
          for (int64_t c = 0; c < ol; c++)
            d[c] += wt * (s[ix[2 * c]] * w[2 * c] + s[ix[2 * c + 1]] * w[2 * c + 1]);
        } else {
          const int32_t *ix = t->idx[L];
          const int32_t *w = t->w[L];
          for (int64_t c = 0; c < ol; c++) {
            float acc = 0.0f;
            for (uint32_t q = 0; q < KL; q++) {
              const int32_t i = ix[c * KL + q];
              if (i >= 0) acc += s[i] * bits_f32(w[c * KL + q]);
            }
            d[c] += wt * acc;
          }
        }
        int32_t k = (int32_t)L - 1;
        for (; k >= 0; k--) {
          if (t->K[k] && ++tap[k] < t->K[k]) break;
          tap[k] = 0;
        }
        if (k < 0) break;
      }
      if (last_extrap) {   /* extrapolated columns */
        const int32_t *ix = t->idx[L];
        for (int64_t c = 0; c < ol; c++)
          for (uint32_t q = 0; q < KL; q++) if (ix[c * KL + q] < 0) { d[c] = t->extrap; break; }
      }
    }
    d += ol;
    int32_t k = (int32_t)L - 1;
    for (; k >= 0; k--) { if (++cnt[k] < y->dims[k]) break; cnt[k] = 0; }
    if (k < 0) break;
  }
}

ep_status ep_run_RESIZE(const ep_node *n) {
  rs_tables t;
  ep_status s = rs_parse(n, &t);
  if (s) return s;
  if (n->out[0]->numel == 0) return EP_OK;
  if (t.weighted) run_weighted(n->in[0], n->out[0], &t);
  else run_copy(n->in[0], n->out[0], &t);
  return EP_OK;
}
EP_COLD_FILE_END
