/* Shape functions of the int8 family of kernels/quantize.c. QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, QADD:
 * ep_shape_first. */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

/* Y has X's dims; Y_scale and Y_zero_point are one element (of the plan's rank, 0 or 1). */
ep_status ep_shape_DYNAMIC_QUANTIZE_LINEAR(ep_node *n) {
  static const int32_t ones[EP_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
  ep_status s = ep_shape_first(n);
  for (uint32_t o = 1; o < n->n_out && !s; o++) s = ep_shape_set(n->out[o], n->out[o]->rank, ones);
  return s;
}

/* [kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, ceil_mode] (the 11-word form; the 8-word one has no end pads):
 * per spatial dim o = floor(span / s) + 1, span = in + pad_begin + pad_end - ((k - 1) * d + 1), or with
 * ceil_mode the ceiling, less one when the last window would start past the input and its leading pad. */
ep_status ep_shape_QMAXPOOL(ep_node *n) {
  const ep_tensor *x = n->in[0];
  const int32_t *p = n->params;
  if (!x || x->rank != 4 || n->n_params != 11 || (p[10] & ~1)) return EP_E_SHAPE;
  for (int w = 0; w < 10; w++) if (p[w] < (w < 6) || p[w] > 65535) return EP_E_PARAM;
  int32_t d[4] = {x->dims[0], x->dims[1], 0, 0};
  for (int i = 0; i < 2; i++) {
    const int64_t s = p[2 + i], lead = x->dims[2 + i] + (int64_t)p[6 + i];
    const int64_t span = lead + p[8 + i] - ((int64_t)(p[i] - 1) * p[4 + i] + 1);
    if (span < 0) return EP_E_SHAPE;
    int64_t o = p[10] ? (span + s - 1) / s + 1 : span / s + 1;
    if (p[10] && (o - 1) * s >= lead) o--;
    if (o > INT32_MAX) return EP_E_SHAPE;
    d[2 + i] = (int32_t)o;
  }
  return ep_shape_set(n->out[0], 4, d);
}
EP_COLD_FILE_END
