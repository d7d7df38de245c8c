/* QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, DYNAMIC_QUANTIZE_LINEAR and QADD (ONNX semantics: division
 * by the scale, round half to even, saturation to the 8-bit range).
 *
 * QUANTIZE_LINEAR: X f32, scale f32, zp? (Y's dtype) -> Y u8/i8 (X's shape). params: [axis].
 *   Per tensor when scale has 1 element, else per axis: scale and zp have dims[axis] elements.
 *   y = saturate(round(x / scale) + zp)
 * DEQUANTIZE_LINEAR: X u8/i8/i32, scale f32, zp? (X's dtype) -> Y f32. params: [axis]. y = (x - zp) * scale
 * DYNAMIC_QUANTIZE_LINEAR: X f32 -> Y u8, Y_scale f32 [1 element], Y_zero_point u8 [1 element]. No params.
 *   scale = (max(0, max x) - min(0, min x)) / 255, zp = saturate(round(-min(0, min x) / scale)).
 *   An all-zero X gives scale 0, zp 0, Y 0.
 * QADD: A, B u8/i8, Y u8/i8, all of Y's shape. params: [za, zb, zy, sa, sb, sy (f32), act, p0, p1]:
 *   y = saturate(round(act(sa*(a - za) + sb*(b - zb)) / sy) + zy), activation params in Y's units.
 * QMAXPOOL: X u8/i8 [N,C,H,W] -> Y (same dtype) [N,C,OH,OW]. params: [kh, kw, sh, sw, dh, dw, pt, pl]
 *   (kh..dw 1..65535, pads 0..65535). Output (oh, ow) is the max of the taps (oh*sh - pt + i*dh,
 *   ow*sw - pl + j*dw) inside X; a window entirely in the padding gives the dtype's minimum. */
#include "qgemm.h"
#include "gemm.h"

/* Whole file optimized for size (wasm size budget): the time is in ep_qgemm (qgemm.c). */
EP_COLD_FILE_BEGIN

static int zp_in_range(uint32_t dtype, int32_t zp) {
  return dtype == EP_U8 ? zp >= 0 && zp <= 255 : dtype == EP_I8 ? zp >= -128 && zp <= 127 : 1;
}

static int32_t elem_i(const uint8_t *p, uint32_t dtype, uint64_t i) {
  switch (dtype) {
    case EP_U8: return p[i];
    case EP_I8: return (int8_t)p[i];
    default: return ((const int32_t *)(const void *)p)[i];
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
  EP_CHECK(x && y && x->dtype == EP_F32 && (y->dtype == EP_U8 || y->dtype == EP_I8), EP_E_DTYPE);
  uint64_t o, c, i;
  return check_axis(n, x, y->dtype, &o, &c, &i);
}

/* y[0..cnt) = saturate(round(x / s) + zp): the epilogue of ep_q_store8 after the division. */
static void quantize_run(const float *x, float s, int32_t zp, uint32_t dtype, uint8_t *y, uint64_t cnt) {
  ep_qgemm_epi e;
  e.act = EP_ACT_NONE; e.p0 = e.p1 = 0.0f; e.out_dtype = dtype; e.yzp = zp;
  const f32x4 sv = f32x4_splat(s);
  uint64_t i = 0;
  for (; i + 8 <= cnt; i += 8)
    ep_q_store8(f32x4_div(f32x4_load(x + i), sv), f32x4_div(f32x4_load(x + i + 4), sv), &e, y + i, 8, 1);
  if (i < cnt) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint64_t j = i; j < cnt; j++) t[j - i] = x[j];
    ep_q_store8(f32x4_div(f32x4_load(t), sv), f32x4_div(f32x4_load(t + 4), sv), &e, y + i, (uint32_t)(cnt - i), 1);
  }
}

ep_status ep_run_QUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *zp = n->n_in > 2 ? n->in[2] : 0;
  const uint32_t dt = n->out[0]->dtype;
  uint64_t outer, C, inner;
  check_axis(n, x, dt, &outer, &C, &inner);
  const float *s = ep_f32(n->in[1]);
  for (uint64_t c = 0; c < C; c++)
    if (zp && !zp_in_range(dt, elem_i(zp->data, dt, c))) return EP_E_PARAM;
  for (uint64_t o = 0; o < outer; o++)
    for (uint64_t c = 0; c < C; c++) {
      const uint64_t at = (o * C + c) * inner;
      quantize_run(ep_f32(x) + at, s[c], zp ? elem_i(zp->data, dt, c) : 0, dt, n->out[0]->data + at, inner);
    }
  return EP_OK;
}

/* ---------------------------------------------------------------------------------- DEQUANTIZE_LINEAR */

ep_status ep_check_DEQUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  EP_CHECK(x && y && y->dtype == EP_F32 && (x->dtype == EP_U8 || x->dtype == EP_I8 || x->dtype == EP_I32), EP_E_DTYPE);
  uint64_t o, c, i;
  return check_axis(n, x, x->dtype, &o, &c, &i);
}

ep_status ep_run_DEQUANTIZE_LINEAR(const ep_node *n) {
  const ep_tensor *x = n->in[0], *zp = n->n_in > 2 ? n->in[2] : 0;
  const uint32_t dt = x->dtype;
  uint64_t outer, C, inner;
  check_axis(n, x, dt, &outer, &C, &inner);
  const float *s = ep_f32(n->in[1]);
  float *y = ep_f32(n->out[0]);
  for (uint64_t o = 0; o < outer; o++)
    for (uint64_t c = 0; c < C; c++) {
      const uint64_t at = (o * C + c) * inner;
      const float z = zp ? (float)elem_i(zp->data, dt, c) : 0.0f;
      uint64_t i = 0;
      for (; i < inner; i++) y[at + i] = ((float)elem_i(x->data, dt, at + i) - z) * s[c];
    }
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
  for (uint64_t i = 0; i < cnt; i += 8) {
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
  EP_CHECK(n->n_params == 8, EP_E_PARAM);
  for (int i = 0; i < 8; i++) EP_CHECK(n->params[i] >= (i < 6 ? 1 : 0) && n->params[i] <= 65535, EP_E_PARAM);
  EP_CHECK((x->dtype == EP_U8 || x->dtype == EP_I8) && y->dtype == x->dtype, EP_E_DTYPE);
  EP_CHECK(x->rank == 4 && y->rank == 4 && x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1], EP_E_SHAPE);
  return EP_OK;
}

EP_COLD_FILE_END

/* Outside the size-optimized region: a 3x3 stride-2 max pool of resnet18 took a tenth of its int8 time. The taps
 * inside X are a clamped [i0, i1) x [j0, j1) range per output (no per-tap test); int8 values are compared as
 * uint8 after flipping the sign bit (v ^ 0x80 keeps their order), so the window's start value 0 is the dtype's
 * minimum. */
static void tap_range(int64_t base, int64_t k, int64_t d, int64_t len, int64_t *t0, int64_t *t1) {
  if (base >= 0 && base + (k - 1) * d < len) { *t0 = 0; *t1 = k; return; }   /* interior: every tap */
  int64_t a = base >= 0 ? 0 : (-base + d - 1) / d, b = base <= len - 1 ? (len - 1 - base) / d + 1 : 0;
  *t0 = a;
  *t1 = b < k ? b : k;
}

ep_status ep_run_QMAXPOOL(const ep_node *n) {
  const ep_tensor *x = n->in[0], *y = n->out[0];
  const int32_t *p = n->params;
  const int64_t H = x->dims[2], W = x->dims[3], OH = y->dims[2], OW = y->dims[3];
  const uint8_t flip = x->dtype == EP_U8 ? 0 : 0x80;
  uint8_t *d = y->data;
  for (uint64_t bc = 0; bc < (uint64_t)x->dims[0] * x->dims[1]; bc++) {
    const uint8_t *xc = x->data + bc * (uint64_t)(H * W);
    for (int64_t oh = 0; oh < OH; oh++) {
      const int64_t hb = oh * p[2] - p[6];
      int64_t i0, i1;
      tap_range(hb, p[0], p[4], H, &i0, &i1);
      for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t wb = ow * p[3] - p[7];
        int64_t j0, j1;
        tap_range(wb, p[1], p[5], W, &j0, &j1);
        uint8_t m = 0;
        for (int64_t i = i0; i < i1; i++) {
          const uint8_t *r = xc + (hb + i * p[4]) * W + wb;
          EP_NO_VECTORIZE for (int64_t j = j0; j < j1; j++) {
            const uint8_t v = r[j * p[5]] ^ flip;
            m = v > m ? v : m;
          }
        }
        *d++ = m ^ flip;
      }
    }
  }
  return EP_OK;
}
