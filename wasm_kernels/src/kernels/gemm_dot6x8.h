/* The 6 x 8 tile's K loop of the relaxed builds, shared by matmul.c (TILE6) and gemm.c (the conv GEMM). Internal
 * header: each includer compiles its own copy with its own flags (gemm.c's source-order scheduling), so the two
 * keep their code generation. A is k-major with EP_GEMM_MR = 6 rows per depth; B rows are ldb floats apart.
 * out[2r + v] = sum_k a[k * 6 + r] * b[k * ldb + 4v ..], r < 6, summed in k order. Not inlined: V8 then allocates
 * registers for the loop alone (pointers and counter stay in registers, nothing spills). */
#ifndef EP_GEMM_DOT6X8_H
#define EP_GEMM_DOT6X8_H
#include "gemm.h"
#include "ep_vec.h"

EP_NOINLINE static void dot6x8(uint32_t K, const float *a, const float *b, uint32_t ldb, f32x4 *out) {
  f32x4 c00 = f32x4_zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  f32x4 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (uint32_t k = 0; k < K; k++, a += EP_GEMM_MR, b += ldb) {
    const f32x4 b0 = f32x4_load(b), b1 = f32x4_load(b + 4);
    f32x4 av;
    av = f32x4_load_splat(a); c00 = f32x4_fma(c00, av, b0); c01 = f32x4_fma(c01, av, b1);
    av = f32x4_load_splat(a + 1); c10 = f32x4_fma(c10, av, b0); c11 = f32x4_fma(c11, av, b1);
    av = f32x4_load_splat(a + 2); c20 = f32x4_fma(c20, av, b0); c21 = f32x4_fma(c21, av, b1);
    av = f32x4_load_splat(a + 3); c30 = f32x4_fma(c30, av, b0); c31 = f32x4_fma(c31, av, b1);
    av = f32x4_load_splat(a + 4); c40 = f32x4_fma(c40, av, b0); c41 = f32x4_fma(c41, av, b1);
    av = f32x4_load_splat(a + 5); c50 = f32x4_fma(c50, av, b0); c51 = f32x4_fma(c51, av, b1);
  }
  out[0] = c00; out[1] = c01; out[2] = c10; out[3] = c11; out[4] = c20; out[5] = c21;
  out[6] = c30; out[7] = c31; out[8] = c40; out[9] = c41; out[10] = c50; out[11] = c51;
}
#endif
