/* Shared f32 GEMM micro-kernel API (CONV, GEMM, MATMUL).
 *
 *   C[M x N] = epilogue( A[M x K] * B[K x N] )
 *
 * A is PACKED: ceil(M / EP_GEMM_MR) panels of EP_GEMM_MR rows, each panel k-major
 * (panel t, depth k, row r at a[(t * K + k) * EP_GEMM_MR + r]), rows past M zero. Constant A
 * (conv weights) is packed by the packager (packager/ops/conv.py); runtime A by ep_gemm_pack_a.
 * B is row-major with row stride ldb (N contiguous: NCHW spatial positions, or MatMul's B in place).
 * The micro-kernel computes EP_GEMM_MR x EP_GEMM_NR tiles with f32x4 accumulators, A broadcast,
 * B rows loaded as vectors; edge tiles never read outside [0, N) of a B row nor write outside C.
 *
 * Epilogue, applied once per tile while it is in registers (in this order):
 *   v = alpha * acc
 *   v += beta * bias      (bias_mode: 0 none, 1 per row bias[m], 2 per column bias[n],
 *                          3 full bias[m * ld_bias + n], 4 scalar bias[0])
 *   v += res[m * ld_res + n]               (residual, when res != NULL)
 *   v = act(v)            (EP_ACT_* of activation.h: 0 none, 1 relu, 2 leaky_relu(p0 = alpha), 3 clip(p0 = min,
 *                          p1 = max) in registers; 4..9 (sigmoid, hardsigmoid(p0, p1), hardswish, tanh, gelu,
 *                          gelu_tanh) and 43 (silu) through ep_apply_activation, the UNARY kernel's code, once
 *                          over each finished panel's rows: the tiles store v without them)
 * Coordinates m, n are those of C (the driver offsets nothing: pointers are at C's origin). */
#ifndef EP_GEMM_H
#define EP_GEMM_H
#include <stdint.h>
#include "ep_kernel.h"
#include "ep_vec.h"
#include "activation.h"

#define EP_GEMM_MR 6
#define EP_GEMM_NR 8

enum { EP_ACT_COUNT_INLINE = 4 };   /* codes below: computed inline by every epilogue; above: ep_gemm_post_split */
enum { EP_BIAS_NONE = 0, EP_BIAS_ROW = 1, EP_BIAS_COL = 2, EP_BIAS_FULL = 3, EP_BIAS_SCALAR = 4 };

typedef struct {
  float alpha, beta;
  const float *bias;   /* see bias_mode */
  int32_t bias_mode;
  uint32_t ld_bias;
  const float *res;    /* residual of C's shape, or NULL */
  uint32_t ld_res;
  int32_t act;
  float p0, p1;
} ep_gemm_epi;

/* The epilogue of the sub-block of C at (m0, n0), as ep_gemm_f32 sees it (coordinates from its origin):
 * used by every driver that splits a GEMM (threads, the NEON tiles' edge blocks). */
static inline ep_gemm_epi ep_gemm_epi_shift(const ep_gemm_epi *e, uint32_t m0, uint32_t n0) {
  ep_gemm_epi s = *e;
  switch (e->bias_mode) {
    case EP_BIAS_ROW: s.bias = e->bias + m0; break;
    case EP_BIAS_COL: s.bias = e->bias + n0; break;
    case EP_BIAS_FULL: s.bias = e->bias + (uint64_t)m0 * e->ld_bias + n0; break;
    default: break;
  }
  if (e->res) s.res = e->res + (uint64_t)m0 * e->ld_res + n0;
  return s;
}

/* C = epi(A_packed * B). b_padded != 0 promises every B row is readable up to column
 * round_up(N, EP_GEMM_NR) (im2col panels are zero padded), which lets edge tiles use full vectors. */
void ep_gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                 int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *epi);

/* One GEMM split into mparts x nparts tasks (row panels x column tiles, near-equal chunks): gemm_mt.c.
 * Each task is an ep_gemm_f32 on its sub-block of C, so disjoint tasks write disjoint parts of C. */
typedef struct {
  uint32_t M, N, K;
  const float *a;
  const float *b;
  uint32_t ldb;
  int b_padded;
  float *c;
  uint32_t ldc;
  const ep_gemm_epi *e;
  uint32_t mparts, nparts;
} ep_gemm_job;
/* How to split an M x N x K GEMM for `threads` threads (1 x 1 when small or single-threaded). */
void ep_gemm_split(uint32_t M, uint32_t N, uint32_t K, uint32_t threads, uint32_t *mparts, uint32_t *nparts);
/* Run task `task` in [0, mparts * nparts) of g. */
void ep_gemm_f32_part(const ep_gemm_job *g, uint32_t task);
/* ep_gemm_f32 split across the core's threads (ep_parallel.h); plain ep_gemm_f32 when single-threaded. */
void ep_gemm_f32_mt(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                    int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *epi);

/* Pack A (M x K, element (m, k) at a[m * rs + k * cs]) into panels; dst holds ep_gemm_packed_a_floats(M, K). */
void ep_gemm_pack_a(uint32_t M, uint32_t K, const float *a, uint64_t rs, uint64_t cs, float *dst);
/* Rows m0 .. m0+mr (mr <= EP_GEMM_MR) of the same A as one K x EP_GEMM_MR panel, rows past mr zero; returns the
 * panel's end. */
float *ep_gemm_pack_group(uint32_t K, const float *a, uint64_t rs, uint64_t cs, uint32_t m0, uint32_t mr, float *dst);
static inline uint64_t ep_gemm_packed_a_floats(uint64_t M, uint64_t K) {
  return (M + EP_GEMM_MR - 1) / EP_GEMM_MR * EP_GEMM_MR * K;
}

/* Activation parameters common to CONV, DEPTHWISE_CONV and GEMM: code, p0, p1 (3 words). */
ep_status ep_gemm_check_act(int32_t code);
/* An activation from EP_ACT_COUNT_INLINE on (sigmoid, hardswish, GELU, SiLU...) costs a polynomial: the kernels
 * store their tiles without it and run it once over the finished rows, its function chosen once per row instead
 * of once per vector (ep_apply_activation: UNARY's code, so the same bits). post->act is EP_ACT_NONE when there
 * is nothing left for ep_gemm_post_rows to do. */
typedef struct { int32_t act; int32_t w[2]; } ep_gemm_post;
/* The epilogue the tiles apply: e, or e without its out-of-line activation in *tmp (which post then holds). */
static inline const ep_gemm_epi *ep_gemm_post_split(const ep_gemm_epi *e, ep_gemm_epi *tmp, ep_gemm_post *post) {
  post->act = EP_ACT_NONE;
  if (e->act < EP_ACT_COUNT_INLINE) return e;
  post->act = e->act;
  ep_memcpy(&post->w[0], &e->p0, 4); ep_memcpy(&post->w[1], &e->p1, 4);
  *tmp = *e;
  tmp->act = EP_ACT_NONE;
  return tmp;
}
/* post's activation over rows [m0, m1) x columns [n0, n1) of C (row stride ldc). */
void ep_gemm_post_rows(const ep_gemm_post *post, float *c, uint32_t ldc, uint32_t m0, uint32_t m1, uint32_t n0, uint32_t n1);
/* An activation from EP_ACT_COUNT_INLINE on, on one vector (p0/p1 splatted): ep_gemm_epi_scalar's, lane 0 through
 * the vector code of UNARY. */
f32x4 ep_gemm_act4(f32x4 v, int32_t act, f32x4 p0, f32x4 p1);
/* Apply the epilogue to one scalar at (m, n). */
float ep_gemm_epi_scalar(const ep_gemm_epi *e, float acc, uint32_t m, uint32_t n);
#endif
