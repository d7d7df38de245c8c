/* Output dims of the windowed kernels: the convolutions (CONV, DEPTHWISE_CONV, WINOGRAD_CONV(_F4), their integer
 * twins), CONV_TRANSPOSE, POOL, and WINOGRAD_FILTER's U. Formulas as ONNX defines them (docs/plan-format.md); the
 * packager resolves auto_pad into the pad words. */
#include "conv_linalg.h"
EP_COLD_FILE_BEGIN

/* y's dims from 64-bit values: EP_E_SHAPE past int32. */
static ep_status set64(ep_tensor *y, uint32_t r, const int64_t *d) {
  int32_t v[EP_MAX_RANK];
  for (uint32_t i = 0; i < r && i < EP_MAX_RANK; i++) {
    if (d[i] < 0 || d[i] > 0x7FFFFFFF) return EP_E_SHAPE;
    v[i] = (int32_t)d[i];
  }
  return y ? ep_shape_set(y, r, v) : EP_E_OP;
}

/* Outputs along one dim of a window of k taps d apart, stride s, pads pb/pe: floor, or ceil (the last window must
 * start inside the input or the begin pad, as ONNX and onnxruntime have it); -1 when the window is larger. */
static int64_t win_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int32_t ceil_mode) {
  const int64_t span = in + pb + pe - (d * (k - 1) + 1);
  if (span < 0) return -1;
  if (!ceil_mode) return span / s + 1;
  const int64_t o = (span + s - 1) / s + 1;
  return (o - 1) * s >= in + pb ? o - 1 : o;
}

/* X [B, C, (H,) W] -> Y [B, cout, (OH,) OW]; w: kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right. */
static ep_status conv_shape(ep_node *n, const int32_t *w, int64_t cout) {
  const ep_tensor *x = n->in[0];
  EP_CHECK(x && (x->rank == 3 || x->rank == 4) && cout >= 1, EP_E_SHAPE);
  for (int i = 0; i < 10; i++) EP_CHECK(w[i] >= (i < 6) && w[i] <= 65535, EP_E_PARAM);
  int64_t d[4] = {x->dims[0], cout, 0, 0};
  for (uint32_t i = 2; i < x->rank; i++) {
    const uint32_t j = i + 2 - x->rank;   /* 0: H, 1: W */
    d[i] = win_out(x->dims[i], w[j], w[2 + j], w[4 + j], w[6 + j], w[8 + j], 0);
  }
  return set64(n->out[0], x->rank, d);
}

/* The output channel count word of the forms that carry it (at `at`), else refused: an older plan runs with the
 * shapes written in it. */
static int64_t word_at(const ep_node *n, uint32_t count, uint32_t at) { return n->n_params == count ? n->params[at] : -1; }

ep_status ep_shape_CONV(ep_node *n) { return n->n_params == 17 ? conv_shape(n, n->params + 2, n->params[16]) : EP_E_PARAM; }
ep_status ep_shape_QCONV(ep_node *n) { return n->n_params == 18 ? conv_shape(n, n->params + 1, n->params[17]) : EP_E_PARAM; }
ep_status ep_shape_WINOGRAD_CONV(ep_node *n) { return conv_shape(n, n->params + 1, word_at(n, 16, 15)); }
ep_status ep_shape_WINOGRAD_CONV_F4(ep_node *n) { return ep_shape_WINOGRAD_CONV(n); }
ep_status ep_shape_QWINOGRAD_CONV(ep_node *n) { return conv_shape(n, n->params, word_at(n, 17, 16)); }
ep_status ep_shape_DEPTHWISE_CONV(ep_node *n) {
  return n->n_params == 13 && n->in[0] ? conv_shape(n, n->params, n->in[0]->dims[1]) : EP_E_PARAM;
}
ep_status ep_shape_QDEPTHWISE_CONV(ep_node *n) {
  return n->n_params == 15 && n->in[0] ? conv_shape(n, n->params, n->in[0]->dims[1]) : EP_E_PARAM;
}

/* POOL's form with ceil_mode (5 + 5 nsp words): per spatial dim kernel, stride, dilation, pad_begin, pad_end. */
ep_status ep_shape_POOL(ep_node *n) {
  const int32_t *p = n->params;
  EP_CHECK(n->n_params >= 10 && p[1] >= 1 && p[1] <= 3 && n->n_params == 5u + 5u * (uint32_t)p[1], EP_E_PARAM);
  const int32_t ceil_mode = p[n->n_params - 1];
  const ep_tensor *x = n->in[0];
  EP_CHECK(x && x->rank == 2u + (uint32_t)p[1], EP_E_SHAPE);
  EP_CHECK(ceil_mode == 0 || ceil_mode == 1, EP_E_PARAM);
  int64_t d[5] = {x->dims[0], x->dims[1]};
  for (uint32_t i = 2; i < x->rank; i++) {
    const int32_t *q = p + 4 + 5 * (i - 2);
    for (int k = 0; k < 5; k++) EP_CHECK(q[k] >= (k < 3) && q[k] <= (1 << 24), EP_E_PARAM);
    d[i] = win_out(x->dims[i], q[0], q[1], q[2], q[3], q[4], ceil_mode);
  }
  return set64(n->out[0], x->rank, d);
}

/* CONV_TRANSPOSE's form with end_adjust (2 + 4 nsp words): o = stride (i - 1) + dilation (k - 1) + 1 - pad_begin
 * + end_adjust; Cout = group * W.dims[1]. */
ep_status ep_shape_CONV_TRANSPOSE(ep_node *n) {
  const int32_t *p = n->params;
  const ep_tensor *x = n->in[0], *w = n->in[1];
  EP_CHECK(n->n_params >= 6 && p[0] >= 1 && p[0] <= 3 && n->n_params == 2u + 4u * (uint32_t)p[0], EP_E_PARAM);
  EP_CHECK(x && w && x->rank == 2u + (uint32_t)p[0] && w->rank == x->rank && p[1] >= 1, EP_E_SHAPE);
  int64_t d[5] = {x->dims[0], (int64_t)p[1] * w->dims[1]};
  for (uint32_t i = 2; i < x->rank; i++) {
    const int32_t *q = p + 2 + 3 * (i - 2), adj = p[2 + 3 * p[0] + (i - 2)];
    EP_CHECK(q[0] >= 1 && q[0] <= (1 << 24) && q[1] >= 1 && q[1] <= (1 << 24), EP_E_PARAM);
    EP_CHECK(q[2] >= -(1 << 24) && q[2] <= (1 << 24) && adj >= -(1 << 24) && adj <= (1 << 24), EP_E_PARAM);
    d[i] = (int64_t)q[0] * (x->dims[i] - 1) + (int64_t)q[1] * (w->dims[i] - 1) + 1 - q[2] + adj;
  }
  return set64(n->out[0], x->rank, d);
}

/* U [(m+2)^2, P] from the taps T [9, P]. */
ep_status ep_shape_WINOGRAD_FILTER(ep_node *n) {
  const ep_tensor *t = n->in[0];
  EP_CHECK(n->n_params == 1 && (n->params[0] == 2 || n->params[0] == 4), EP_E_PARAM);
  EP_CHECK(t && t->rank == 2 && t->dims[0] == 9, EP_E_SHAPE);
  const int64_t a = n->params[0] + 2, d[2] = {a * a, t->dims[1]};
  return set64(n->out[0], 2, d);
}
EP_COLD_FILE_END
