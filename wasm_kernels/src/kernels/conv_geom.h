/* Convolution window geometry shared by the float (conv.c) and integer (qconv.c) convolutions. */
#ifndef EP_CONV_GEOM_H
#define EP_CONV_GEOM_H
#include <stdint.h>
#include "ep_kernel.h"

typedef struct {
  uint32_t B, C, H, W, Cout, OH, OW;
  uint32_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
} ep_conv_geom;

/* Decodes window params p[0..9] (kh, kw, sh, sw, dh, dw, pad_top, pad_left, pad_bottom, pad_right) and
 * the X/Y shapes into g, checking X, W and Y are present, X/Y rank 3 or 4, params in range and the output
 * size matching ONNX's formula (dtypes are the caller's). Run functions call it again only to decode. */
ep_status ep_conv_geom_of(const ep_node *n, const int32_t *p, ep_conv_geom *g);
#endif
