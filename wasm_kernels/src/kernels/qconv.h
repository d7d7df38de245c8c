/* What the integer convolutions (qconv.c: QCONV, QDEPTHWISE_CONV; qwinograd.c: QWINOGRAD_CONV) share. */
#ifndef EP_QCONV_H
#define EP_QCONV_H
#include "qgemm.h"
#include "conv_geom.h"

/* Window params p[0..9], shapes, X u8/i8 and W of dtype wdtype, zero points zps[0..1] (x, y) and the
 * activation zps[2], optional epilogue inputs (bias in[2], mult in[3], wzp in[4], each of Cout). */
ep_status ep_qconv_check_common(const ep_node *n, const int32_t *p, ep_conv_geom *g, const int32_t *zps, uint32_t wdtype);
/* The requantizing epilogue of those inputs; zact = [x_zp, y_zp, act, p0, p1]. y, rs, cs are the caller's. */
void ep_qconv_fill_epi(const ep_node *n, const int32_t *zact, ep_qgemm_epi *e);
/* Padded input row u = iw + pl in [0, len): d[u] = x[iw] - zp inside the row xr, 0 in the pads. */
void ep_qconv_pad_row(int16_t *d, const uint8_t *xr, int u8, int32_t xzp, const ep_conv_geom *g, uint32_t len);
#endif
