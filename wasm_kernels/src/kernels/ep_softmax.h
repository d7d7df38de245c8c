/* The softmax of one contiguous row (norm.c): SOFTMAX's kernel and ATTENTION's score blocks (matmul.c) share it,
 * so fused and unfused attention give the same bits. y may be x. */
#ifndef EP_SOFTMAX_H
#define EP_SOFTMAX_H
#include <stdint.h>

void ep_softmax_row(int logsm, const float *x, float *y, uint64_t L);

#endif
