/* QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, DYNAMIC_QUANTIZE_LINEAR and QADD (ONNX semantics: division
 * by the scale, round half to even, saturation to the 8-bit range).
 *
 * QUANTIZE_LINEAR: X f32, scale f32, zp? (Y's dtype) -> Y u8/i8 or (u)int4/2 (X's shape). params: [axis].
 *   Per tensor when scale has 1 element, else per axis: scale and zp have dims[axis] elements.
 *   y = saturate(round(x / scale) + zp)
 * DEQUANTIZE_LINEAR: X u8/i8/i32 or (u)int4/2, scale f32, zp? (X's dtype) -> Y f32. params: [axis]. y = (x - zp) * scale
 * (float8 / float4 quantization is BINARY and CAST: packager/ops/quant.py.)
 * DYNAMIC_QUANTIZE_LINEAR: X f32 -> Y u8, Y_scale f32 [1 element], Y_zero_point u8 [1 element]. No params.
 *   scale = (max(0, max x) - min(0, min x)) / 255, zp = saturate(round(-min(0, min x) / scale)).
 *   An all-zero X gives scale 0, zp 0, Y 0.
 * QADD: A, B u8/i8, Y u8/i8, all of Y's shape. params: [za, zb, zy, sa, sb, sy (f32), act, p0, p1]:
 *   y = saturate(round(act(sa*(a - za) + sb*(b - zb)) / sy) + zy), activation params in Y's units.
 * QMAXPOOL: X u8/i8 [N,C,H,W] -> Y (same dtype) [N,C,OH,OW]. params: [kh, kw, sh, sw, dh, dw, pt, pl]
 *   (kh..dw 1..65535, pads 0..65535), or those and [pb, pr, ceil_mode], which determine OH, OW (shape/shape_quantize.c). Output (oh, ow) is the max of the taps (oh*sh - pt + i*dh,
 *   ow*sw - pl + j*dw) inside X; a window entirely in the padding gives the dtype's minimum.
 * QLUT: X u8/i8, T u8/i8 [256 elements] -> Y (T's dtype, X's shape). No params. y = T[x as an unsigned byte]. */
#include "qgemm.h"
#include "gemm.h"
#include "ep_shape.h"
#include "kernels/lowp.h"
#include "ep_parallel.h"

/* Whole file optimized for size (wasm size budget): the time is in ep_qgemm (qgemm.c). */
EP_COLD_FILE_BEGIN

static int zp_in_range(uint32_t dtype, int32_t zp) {
  return dtype == EP_U8 ? zp >= 0 && zp <= 255 : dtype == EP_I8 ? zp >= -128 && zp <= 127 : 1;
}

static int32_t elem_i(const uint8_t *p, uint32_t dtype, uint64_t i) {
  switch (dtype) {
    case EP_U8: return p[i];
    case EP_I8: return (int8_t)p[i];
    case EP_I32: return ((const int32_t *)(const void *)p)[i];
    default: return ep_narrow_load(dtype, p[i]);   /* (u)int4, (u)int2 */
  }
}

static int narrow_q(uint32_t dt) { return dt == EP_I4 || dt == EP_U4 || dt == EP_I2 || dt == EP_U2; }

/* A 4/2-bit integer saturated at 8 bits (quantize_run) saturated again to its own range: the same as once. */
static void narrow_saturate(uint8_t *y, uint32_t dt, uint64_t cnt) {
  const int sgn = dt == EP_I4 || dt == EP_I2;
  const int32_t hi = ((dt == EP_I4 || dt == EP_U4 ? 16 : 4) >> sgn) - 1, lo = sgn ? -hi - 1 : 0;
  for (uint64_t i = 0; i < cnt; i++) {
    const int32_t v = sgn ? (int8_t)y[i] : y[i];
    y[i] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
  }
}

/* Per-axis decomposition shared by Q and DQ: outer x C x inner; C == 1 for per-tensor. */
static ep_status check_axis(const ep_node *n, const ep_tensor *x, uint32_t qdtype, uint64_t *outer, uint64_t *C,
                            uint64_t *inner) {
  EP_CHECK(n->n_params == 1, EP_E_PARAM);
  const ep_tensor *s = n->in[1], *zp = n->n_in > 2 ? n->in[2] : 0;
  EP_CHECK(s && s->dtype == EP_F32, EP_E_DTYPE);
  EP_CHECK(ep_same_shape(x, n->out[0]), EP_E_SHAPE);
  if (zp) EP_CHECK(zp->dtype == qdtype && zp->numel == s->numel, EP_E_SHAPE);
  *outer = 1; *C = 1; *inner = x->numel;
  if (s->numel != 1) {
    const int32_t axis = n->params[0];
    EP_CHECK(axis >= 0 && (uint32_t)axis < x->rank, EP_E_PARAM);
    EP_CHECK(s->numel == (uint64_t)x->dims[axis], EP_E_SHAPE);
    *C = s->numel;
    for (int32_t i = 0; i < axis; i++) *outer *= (uint64_t)x->dims[i];
    *inner = 1;
    for (uint32_t i = (uint32_t)axis + 1; i < x->rank; i++) *inner *= (uint64_t)x->dims[i];
  }
  return EP_OK;
}

/* ------------------------------------------------------------------------------------ QUANTIZE_LINEAR */

ep_status ep_check_QUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y && x->dtype == EP_F32 && (y->dtype == EP_U8 || y->dtype == EP_I8 || narrow_q(y->dtype)), EP_E_DTYPE);
  uint64_t o, c, i;
  return check_axis(n, x, y->dtype, &o, &c, &i);
}

EP_COLD_FILE_END
/* The whole vectors of quantize_run: ep_q_store8's operations with the bounds resolved once (speed-compiled:
 * a model's input Q and any standalone Q run here; a call per 8 bytes from the size-optimized code cost 3x). */
static uint64_t quantize_fast(const float *x, f32x4 sv, const ep_qgemm_epi *e, uint8_t *y, uint64_t cnt) {
  float lo, hi;
  ep_q_bounds(e, &lo, &hi);
  const f32x4 vlo = f32x4_splat(lo), vhi = f32x4_splat(hi);
  const i32x4 zb = ep_q_zbits(e->yzp);
  const int u8 = e->out_dtype == EP_U8;
  const uint64_t n8 = cnt & ~(uint64_t)7;
  for (uint64_t i = 0; i < n8; i += 8)
    i8x16_store_lo8(y + i, ep_q8_pack(f32x4_div(f32x4_load(x + i), sv), f32x4_div(f32x4_load(x + i + 4), sv), vlo, vhi, zb, u8));
  return n8;
}

/* 8-bit DEQUANTIZE_LINEAR's whole vectors, y = f32(x - zp) * s: the scalar loop's values ((float)x - (float)zp
 * is exact for 8-bit values), speed-compiled (a DQ before a GlobalAveragePool ran at ~5 ns per element). */
static uint64_t dequantize_fast(const uint8_t *x, int u8, int32_t zp, float s, float *y, uint64_t cnt) {
  const i32x4 z = i32x4_splat(zp);
  const f32x4 sv = f32x4_splat(s);
  const uint64_t n8 = cnt & ~(uint64_t)7;
  for (uint64_t i = 0; i < n8; i += 8) {
    const i16x8 h = u8 ? i16x8_load_u8(x + i) : i16x8_load_i8((const int8_t *)x + i);
    f32x4_store(y + i, f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_lo(h), z)), sv));
    f32x4_store(y + i + 4, f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_hi(h), z)), sv));
  }
  return n8;
}
EP_COLD_FILE_BEGIN

/* y[0..cnt) = saturate(round(x / s) + zp): the epilogue of ep_q_store8 after the division. */
static void quantize_run(const float *x, float s, int32_t zp, uint32_t dtype, uint8_t *y, uint64_t cnt) {
  ep_qgemm_epi e;
  e.act = EP_ACT_NONE; e.p0 = e.p1 = 0.0f; e.out_dtype = dtype; e.yzp = zp;
  const f32x4 sv = f32x4_splat(s);
  uint64_t i = quantize_fast(x, sv, &e, y, cnt);
  if (i < cnt) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint64_t j = i; j < cnt; j++) t[j - i] = x[j];
    ep_q_store8(f32x4_div(f32x4_load(t), sv), f32x4_div(f32x4_load(t + 4), sv), &e, y + i, (uint32_t)(cnt - i), 1);
  }
}

/* QUANTIZE_LINEAR / DEQUANTIZE_LINEAR over the threads (ep_parallel_range): rows of `inner` elements sharing a
 * scale (per axis), or one row's elements (per tensor); each element is computed alone, so any split gives the same
 * bits (ranges within a row start on a multiple of 8, the vector loops' step). */
typedef struct { const ep_node *n; uint64_t C, inner, rows; } qdq_job;

/* Row r's element range [*lo, *hi) within range [b, e) of the job. */
static uint64_t qdq_rows(const qdq_job *j, uint64_t b, uint64_t e, uint64_t *r1, uint64_t *lo, uint64_t *hi) {
  *lo = j->rows == 1 ? b : 0;
  *hi = j->rows == 1 ? e : j->inner;
  *r1 = j->rows == 1 ? 1 : e;
  return j->rows == 1 ? 0 : b;
}

static void qdq_split(const qdq_job *j, ep_range_fn fn) {
  if (j->rows == 1) ep_parallel_range(j->inner, 16384u, 8u, fn, (void *)j);
  else ep_parallel_range(j->rows, 16384u / (j->inner + 1) + 1, 1u, fn, (void *)j);
}

static void quantize_range(void *ctx, uint64_t b, uint64_t e) {
  const qdq_job *j = (const qdq_job *)ctx;
  const ep_node *n = j->n;
  const ep_tensor *zp = n->n_in > 2 ? n->in[2] : 0;
  const uint32_t dt = n->out[0]->dtype;
  uint64_t r1, lo, hi;
  const int narrow = narrow_q(dt), sgn = dt == EP_I8 || dt == EP_I4 || dt == EP_I2;
  for (uint64_t r = qdq_rows(j, b, e, &r1, &lo, &hi); r < r1; r++) {
    const uint64_t c = r % j->C, at = r * j->inner + lo;
    uint8_t *y = n->out[0]->data + at;
    quantize_run(ep_f32(n->in[0]) + at, ep_f32(n->in[1])[c], zp ? elem_i(zp->data, dt, c) : 0, sgn ? EP_I8 : EP_U8, y, hi - lo);
    if (narrow) narrow_saturate(y, dt, hi - lo);
  }
}

ep_status ep_run_QUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *zp = n->n_in > 2 ? n->in[2] : 0;
  const uint32_t dt = n->out[0]->dtype;
  uint64_t outer = 0, C = 1, inner = 0;   /* check() validated the axis */
  check_axis(n, x, dt, &outer, &C, &inner);
  const int narrow = narrow_q(dt);
  for (uint64_t c = 0; c < C; c++)
    if (zp && !narrow && !zp_in_range(dt, elem_i(zp->data, dt, c))) return EP_E_PARAM;
  const qdq_job j = {n, C, inner, outer * C};
  qdq_split(&j, quantize_range);
  return EP_OK;
}

/* ---------------------------------------------------------------------------------- DEQUANTIZE_LINEAR */

ep_status ep_check_DEQUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y && y->dtype == EP_F32 && (x->dtype == EP_U8 || x->dtype == EP_I8 || x->dtype == EP_I32 || narrow_q(x->dtype)),
           EP_E_DTYPE);
  EP_CHECK(n->n_params == 1, EP_E_PARAM);
  uint64_t o, c, i;
  return check_axis(n, x, x->dtype, &o, &c, &i);
}

static void dequantize_range(void *ctx, uint64_t b, uint64_t e) {
  const qdq_job *j = (const qdq_job *)ctx;
  const ep_node *n = j->n;
  const ep_tensor *x = n->in[0], *zp = n->n_in > 2 ? n->in[2] : 0;
  const uint32_t dt = x->dtype;
  const float *s = ep_f32(n->in[1]);
  float *y = ep_f32(n->out[0]);
  uint64_t r1, lo, hi;
  for (uint64_t r = qdq_rows(j, b, e, &r1, &lo, &hi); r < r1; r++) {
    const uint64_t c = r % j->C, at = r * j->inner + lo;
    const float z = zp ? (float)elem_i(zp->data, dt, c) : 0.0f;
    uint64_t i = dt == EP_U8 || dt == EP_I8 ? dequantize_fast(x->data + at, dt == EP_U8, (int32_t)z, s[c], y + at, hi - lo) : 0;
    for (; i < hi - lo; i++) y[at + i] = ((float)elem_i(x->data, dt, at + i) - z) * s[c];
  }
}

ep_status ep_run_DEQUANTIZE_LINEAR(const ep_node *n) {
  uint64_t outer = 0, C = 1, inner = 0;   /* check() validated the axis */
  check_axis(n, n->in[0], n->in[0]->dtype, &outer, &C, &inner);
  const qdq_job j = {n, C, inner, outer * C};
  qdq_split(&j, dequantize_range);
  return EP_OK;
}

/* ---------------------------------------------------------------------------- DYNAMIC_QUANTIZE_LINEAR */

ep_status ep_check_DYNAMIC_QUANTIZE_LINEAR(const ep_node *n) {
  EP_CHECK(n->n_params == 0 && n->n_out == 3, EP_E_OP);
  const ep_tensor *x = n->in[0], *y = n->out[0], *s = n->out[1], *z = n->out[2];
  EP_CHECK(x && y && s && z, EP_E_OP);
  EP_CHECK(x->dtype == EP_F32 && y->dtype == EP_U8 && s->dtype == EP_F32 && z->dtype == EP_U8, EP_E_DTYPE);
  EP_CHECK(ep_same_shape(x, y) && s->numel == 1 && z->numel == 1, EP_E_SHAPE);
  return EP_OK;
}

ep_status ep_run_DYNAMIC_QUANTIZE_LINEAR(const ep_node *n) {
  const float *x = ep_f32(n->in[0]);
  const uint64_t cnt = n->in[0]->numel;
  float lo = 0.0f, hi = 0.0f;
  for (uint64_t i = 0; i < cnt; i++) { lo = x[i] < lo ? x[i] : lo; hi = x[i] > hi ? x[i] : hi; }
  const float scale = (hi - lo) / 255.0f;
  int32_t zp = 0;
  if (scale > 0.0f) {   /* false for NaN too */
    float z = 0.0f - lo / scale;
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    f32x4 r = f32x4_round_even(f32x4_splat(z));
    float t[4];
    f32x4_store(t, r);
    zp = (int32_t)t[0];
  }
  ep_f32(n->out[1])[0] = scale;
  n->out[2]->data[0] = (uint8_t)zp;
  if (!(scale > 0.0f)) { ep_memset(n->out[0]->data, 0, (uint32_t)cnt); return EP_OK; }
  quantize_run(x, scale, zp, EP_U8, n->out[0]->data, cnt);
  return EP_OK;
}

/* --------------------------------------------------------------------------------------------- QADD */

ep_status ep_check_QADD(const ep_node *n) {
  EP_CHECK(n->n_params == 9, EP_E_PARAM);
  const ep_tensor *a = n->in[0], *b = n->in[1], *y = n->out[0];
  const int32_t *p = n->params;
  EP_CHECK(a && b && y, EP_E_OP);
  for (int i = 0; i < 2; i++) EP_CHECK(n->in[i]->dtype == EP_U8 || n->in[i]->dtype == EP_I8, EP_E_DTYPE);
  EP_CHECK(y->dtype == EP_U8 || y->dtype == EP_I8, EP_E_DTYPE);
  EP_CHECK(ep_same_shape(a, y) && ep_same_shape(b, y), EP_E_SHAPE);
  EP_CHECK(zp_in_range(a->dtype, p[0]) && zp_in_range(b->dtype, p[1]) && zp_in_range(y->dtype, p[2]), EP_E_PARAM);
  EP_CHECK(ep_gemm_check_act(p[6]) == EP_OK, EP_E_PARAM);
  return EP_OK;
}

static f32x4 load8_f32(const uint8_t *p, uint32_t dtype, int hi, int32_t zp) {
  const i16x8 h = dtype == EP_U8 ? i16x8_load_u8(p) : i16x8_load_i8((const int8_t *)p);
  return f32x4_from_i32x4(i32x4_sub(hi ? i32x4_widen_hi(h) : i32x4_widen_lo(h), i32x4_splat(zp)));
}

EP_COLD_FILE_END
/* The whole vectors of QADD with a clamping activation (none / relu / clip): ep_q_store8's operations, with the
 * bounds resolved once. Optimized for speed (the rest of the file is for size): a residual Add runs per block. */
static uint64_t qadd_fast(const ep_node *n, const ep_qgemm_epi *ea, f32x4 sa, f32x4 sb, f32x4 sy) {
  const int32_t *p = n->params;
  const uint32_t da = n->in[0]->dtype, db = n->in[1]->dtype;
  const uint8_t *xa = n->in[0]->data, *xb = n->in[1]->data;
  uint8_t *y = n->out[0]->data;
  float lo, hi;
  ep_q_bounds(ea, &lo, &hi);
  const f32x4 vlo = f32x4_splat(lo), vhi = f32x4_splat(hi);
  const i32x4 zb = ep_q_zbits(ea->yzp), za4 = i32x4_splat(p[0]), zb4 = i32x4_splat(p[1]);
  const int u8 = ea->out_dtype == EP_U8;
  const uint64_t cnt = n->in[0]->numel & ~(uint64_t)7;
  for (uint64_t i = 0; i < cnt; i += 8) {
    const i16x8 ha = da == EP_U8 ? i16x8_load_u8(xa + i) : i16x8_load_i8((const int8_t *)xa + i);
    const i16x8 hb = db == EP_U8 ? i16x8_load_u8(xb + i) : i16x8_load_i8((const int8_t *)xb + i);
    const f32x4 v0 = f32x4_div(f32x4_add(f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_lo(ha), za4)), sa),
                                         f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_lo(hb), zb4)), sb)), sy);
    const f32x4 v1 = f32x4_div(f32x4_add(f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_hi(ha), za4)), sa),
                                         f32x4_mul(f32x4_from_i32x4(i32x4_sub(i32x4_widen_hi(hb), zb4)), sb)), sy);
    i8x16_store_lo8(y + i, ep_q8_pack(v0, v1, vlo, vhi, zb, u8));
  }
  return cnt;
}
EP_COLD_FILE_BEGIN

ep_status ep_run_QADD(const ep_node *n) {
  const int32_t *p = n->params;
  const ep_tensor *a = n->in[0], *b = n->in[1];
  ep_qgemm_epi e;
  e.act = EP_ACT_NONE; e.p0 = e.p1 = 0.0f; e.out_dtype = n->out[0]->dtype; e.yzp = p[2];
  const f32x4 sa = f32x4_splat(ep_param_f32(n, 3)), sb = f32x4_splat(ep_param_f32(n, 4));
  const f32x4 sy = f32x4_splat(ep_param_f32(n, 5));
  ep_qgemm_epi ea = e;   /* the activation runs on the sum after the division (params in Y units) */
  ea.act = p[6]; ea.p0 = ep_param_f32(n, 7); ea.p1 = ep_param_f32(n, 8);
  const uint64_t cnt = a->numel;
  uint8_t ta[8], tb[8];
  for (uint64_t i = ea.act == EP_ACT_LEAKY_RELU ? 0 : qadd_fast(n, &ea, sa, sb, sy); i < cnt; i += 8) {
    const uint8_t *pa = a->data + i, *pb = b->data + i;
    const uint32_t k = cnt - i < 8 ? (uint32_t)(cnt - i) : 8;
    if (k < 8) {
      for (uint32_t j = 0; j < 8; j++) { ta[j] = j < k ? pa[j] : 0; tb[j] = j < k ? pb[j] : 0; }
      pa = ta; pb = tb;
    }
    f32x4 v[2];
    for (int h = 0; h < 2; h++)
      v[h] = f32x4_div(f32x4_add(f32x4_mul(load8_f32(pa, a->dtype, h, p[0]), sa),
                                 f32x4_mul(load8_f32(pb, b->dtype, h, p[1]), sb)), sy);
    ep_q_store8(v[0], v[1], &ea, n->out[0]->data + i, k, 1);
  }
  return EP_OK;
}

/* ----------------------------------------------------------------------------------------- QMAXPOOL */

ep_status ep_check_QMAXPOOL(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y, EP_E_OP);
  EP_CHECK(n->n_params == 8 || n->n_params == 11, EP_E_PARAM);
  for (int i = 0; i < 8; i++) EP_CHECK(n->params[i] >= (i < 6 ? 1 : 0) && n->params[i] <= 65535, EP_E_PARAM);
  EP_CHECK((x->dtype == EP_U8 || x->dtype == EP_I8) && y->dtype == x->dtype, EP_E_DTYPE);
  EP_CHECK(x->rank == 4 && y->rank == 4 && x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1], EP_E_SHAPE);
  return n->n_params == 8 ? EP_OK : ep_shape_agrees(n, ep_shape_QMAXPOOL);   /* end pads, ceil_mode: as they say */
}

/* The generic window walk, one output at a time: for strides the vector path does not take. */
static void qmaxpool_plane(const uint8_t *xc, uint8_t *d, const int32_t *p, int64_t H, int64_t W, int64_t OH, int64_t OW, int u8) {
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      int32_t m = u8 ? 0 : -128;
      for (int64_t i = 0; i < p[0]; i++) {
        const int64_t ih = oh * p[2] - p[6] + i * p[4];
        if (ih < 0 || ih >= H) continue;
        for (int64_t j = 0; j < p[1]; j++) {
          const int64_t iw = ow * p[3] - p[7] + j * p[5];
          if (iw < 0 || iw >= W) continue;
          const int32_t v = u8 ? (int32_t)xc[ih * W + iw] : (int32_t)(int8_t)xc[ih * W + iw];
          m = v > m ? v : m;
        }
      }
      *d++ = (uint8_t)m;
    }
}
EP_COLD_FILE_END

/* Row-separable max, 8 values per step, for horizontal strides 1 and 2: per output row, the max over the
 * window's input rows into one padded int16 row (padding = the dtype's minimum), then over the kw taps
 * along it (stride 2 by even/odd deinterleave). 2-3x the speed of fp32's MaxPool instead of half of it. */
#define QMP_ROW 4096
static int qmaxpool_rows(const uint8_t *xc, uint8_t *d, const int32_t *p, int64_t H, int64_t W, int64_t OH, int64_t OW, int u8) {
  const int64_t sw = p[3], dw = p[5], pl = p[7];
  const int64_t span = (OW - 1) * sw + (int64_t)(p[1] - 1) * dw + 1, used = span > pl + W ? span : pl + W;
  if ((sw != 1 && sw != 2) || used + 24 > QMP_ROW) return 0;
  int16_t row[QMP_ROW];
  const uint32_t len = (uint32_t)(used + 23) & ~7u;   /* the last 8 outputs' taps read up to span + 14 */
  const i16x8 low = i16x8_splat(u8 ? 0 : -128);
  const int16_t bmask = u8 ? 0xFF : -1;
  const i16x8 bm = i16x8_splat(bmask);
  for (int64_t oh = 0; oh < OH; oh++, d += OW) {
    for (uint32_t q = 0; q < len; q += 8) i16x8_store(row + q, low);
    for (int64_t i = 0; i < p[0]; i++) {
      const int64_t ih = oh * p[2] - p[6] + i * p[4];
      if (ih < 0 || ih >= H) continue;
      const uint8_t *src = xc + ih * W;
      int16_t *r = row + pl;
      int64_t iw = 0;
      for (; iw + 8 <= W; iw += 8)   /* bytes load sign-extended; uint8 keeps their low 8 bits: one code path */
        i16x8_store(r + iw, i16x8_max(i16x8_load(r + iw), i16x8_and(i16x8_load_i8((const int8_t *)src + iw), bm)));
      EP_COMPACT_LOOP
      for (; iw < W; iw++) {
        const int16_t v = (int16_t)((int16_t)(int8_t)src[iw] & bmask);
        r[iw] = v > r[iw] ? v : r[iw];
      }
    }
    for (int64_t ow = 0; ow < OW; ow += 8) {
      i16x8 m = low;
      for (int64_t j = 0; j < p[1]; j++) {
        const int16_t *t = row + ow * sw + j * dw;
        m = i16x8_max(m, sw == 1 ? i16x8_load(t) : i16x8_even(i16x8_load(t), i16x8_load(t + 8)));
      }
      const i8x16 q = u8 ? u8x16_narrow_i16x8(m, m) : i8x16_narrow_i16x8(m, m);
      if (ow + 8 <= OW) { i8x16_store_lo8(d + ow, q); continue; }
      uint8_t t8[8];
      i8x16_store_lo8(t8, q);
      EP_COMPACT_LOOP
      for (int64_t k = ow; k < OW; k++) d[k] = t8[k - ow];
    }
  }
  return 1;
}

/* Planes [b, e) (batch x channel): each alone, so the threads split them freely. */
static void qmaxpool_range(void *ctx, uint64_t b, uint64_t e) {
  const ep_node *n = (const ep_node *)ctx;
  const ep_tensor *x = n->in[0], *y = n->out[0];
  const int64_t H = x->dims[2], W = x->dims[3], OH = y->dims[2], OW = y->dims[3];
  const int u8 = x->dtype == EP_U8;
  for (uint64_t bc = b; bc < e; bc++) {
    const uint8_t *xc = x->data + bc * (uint64_t)(H * W);
    uint8_t *d = y->data + bc * (uint64_t)(OH * OW);
    if (!qmaxpool_rows(xc, d, n->params, H, W, OH, OW, u8)) qmaxpool_plane(xc, d, n->params, H, W, OH, OW, u8);
  }
}

ep_status ep_run_QMAXPOOL(const ep_node *n) {
  const ep_tensor *x = n->in[0];
  ep_parallel_range((uint64_t)x->dims[0] * x->dims[1], 16384u / (uint64_t)(x->dims[2] * x->dims[3] + 1) + 1u, 1u,
                    qmaxpool_range, (void *)n);
  return EP_OK;
}

/* --------------------------------------------------------------------------------------------- QLUT */

EP_COLD_FILE_BEGIN
ep_status ep_check_QLUT(const ep_node *n) {
  const ep_tensor *x = n->in[0], *t = n->in[1], *y = n->out[0];
  EP_CHECK(n->n_params == 0, EP_E_PARAM);
  EP_CHECK(x && t && y, EP_E_OP);
  EP_CHECK(x->dtype == EP_U8 || x->dtype == EP_I8, EP_E_DTYPE);
  EP_CHECK((t->dtype == EP_U8 || t->dtype == EP_I8) && y->dtype == t->dtype, EP_E_DTYPE);
  EP_CHECK(t->numel == 256 && ep_same_shape(x, y), EP_E_SHAPE);
  return EP_OK;
}
EP_COLD_FILE_END

/* QLUT's 16-byte path where swizzles and selects are single instructions (relaxed SIMD: pshufb / pblendvb; NEON:
 * tbl / bsl). The SIMD128 build's swizzle and bitselect are 2-3 instructions each in V8: 8 bytes at a time through
 * scalar lookups is faster there (docs/int8.md, QLUT). */
#if EP_ISA_WASM_RELAXED || EP_ISA_NEON
#define QLUT_VEC 1
#else
#define QLUT_VEC 0
#endif
#if QLUT_VEC
/* qlut_bit[b][h]: all ones where bit b of h is set, the select masks looked up by the high nibble (a compare of
 * shifted bytes is compiled to i8x16 shifts, several instructions each in V8). Not const: read in the loop,
 * not folded into constants. */
static int8_t qlut_bit[4][16] = {
    {0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1}, {0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1, 0, 0, -1, -1},
    {0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1}, {0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1}};
#endif

/* Speed-compiled: a SiLU or HardSwish of a QDQ model runs here over whole activation maps. QLUT_VEC: 16 bytes per
 * step, the table's 16 slices looked up by the low nibble (16 in-range swizzles: defined on every engine), then a
 * select tree on the high nibble's bits (15 selects); the table is read in the loop (16 vectors held across it
 * spill in V8). Y may be X (a step's bytes are read before they are written). Left out of the emscripten scalar
 * fallback (EP_FORCE_SCALAR) for its size: the byte loop computes the same. */
ep_status ep_run_QLUT(const ep_node *n) {
  const uint8_t *x = n->in[0]->data, *t = n->in[1]->data;
  uint8_t *y = n->out[0]->data;
  const uint64_t cnt = n->in[0]->numel;
  uint64_t i = 0;
#if QLUT_VEC
  for (; i + 16 <= cnt; i += 16) {
    const i8x16 v = i8x16_load(x + i), lo = i8x16_lo_nibble(v), hi = i8x16_hi_nibble(v);
    i8x16 r[8], m = i8x16_lut16(i8x16_load(qlut_bit[0]), hi);
    for (uint32_t k = 0; k < 8; k++) r[k] = i8x16_select(m, i8x16_lut16(i8x16_load(t + 32 * k + 16), lo), i8x16_lut16(i8x16_load(t + 32 * k), lo));
    for (uint32_t b = 1, w = 4; b < 4; b++, w /= 2) {
      m = i8x16_lut16(i8x16_load(qlut_bit[b]), hi);
      for (uint32_t k = 0; k < w; k++) r[k] = i8x16_select(m, r[2 * k + 1], r[2 * k]);
    }
    i8x16_store(y + i, r[0]);
  }
#elif !defined(EP_FORCE_SCALAR)
  for (; i + 8 <= cnt; i += 8) {
    uint64_t v, r = 0;
    __builtin_memcpy(&v, x + i, 8);
    for (uint32_t k = 0; k < 8; k++) r |= (uint64_t)t[(v >> (8 * k)) & 255] << (8 * k);
    __builtin_memcpy(y + i, &r, 8);
  }
#endif
  EP_COMPACT_LOOP
  for (; i < cnt; i++) y[i] = t[x[i]];
  return EP_OK;
}
