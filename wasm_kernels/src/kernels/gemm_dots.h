/* The K loops of the wasm f32 GEMM tiles, one definition for matmul.c (TILE6: dot6x8, dot4x8) and gemm.c (the
 * conv GEMM: dot6x8, the SIMD128 two-pass tiles). Internal header: each includer compiles its own copy with its
 * own flags (gemm.c's source-order scheduling), so each keeps its code generation. A is k-major with
 * EP_GEMM_MR = 6 rows per depth; B rows are ldb floats apart. */
#ifndef EP_GEMM_DOTS_H
#define EP_GEMM_DOTS_H
#include "gemm.h"
#include "ep_vec.h"

/* EP_DOT_X8(r0, rows, K, a, b, ldb, out): out[2r + v] = sum_k a[k * 6 + r0 + r] * b[k * ldb + 4v ..], r < rows,
 * v < 2, summed in k order: the K loop of a rows x 8 tile (rows = 6, 4 or 2, a literal; r0 + rows <= 6), a and b
 * pointer variables, advanced past the K depths. Per depth: the 2 B vectors, then per row a broadcast and its 2
 * multiply-adds (the order gemm.c's source-order scheduling keeps).
 * A macro, not an always-inline function, so that each use compiles to the very code of the loop written out for
 * its shape: clang simplifies a function for all row counts before inlining it, and what is left after inlining
 * differs (in which wasm locals hold what). Expanded, the tests on rows fold while clang emits the code. The
 * accumulators of rows >= `rows` are static (never touched: the code that would is not emitted), so no unused
 * local changes how the others are numbered. */
#define EP_DOT_ACC_6 f32x4 c00 = f32x4_zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, \
  c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define EP_DOT_ACC_4 f32x4 c00 = f32x4_zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, \
  c31 = c00; static f32x4 c40, c41, c50, c51;
#define EP_DOT_ACC_2 f32x4 c00 = f32x4_zero(), c01 = c00, c10 = c00, c11 = c00; \
  static f32x4 c20, c21, c30, c31, c40, c41, c50, c51;
#define EP_DOT_ROW_(r, rows, r0, a, x0, x1)                                                            \
  if ((rows) > (r)) {                                                                                  \
    av_ = f32x4_load_splat((a) + (r0) + (r)); x0 = f32x4_fma(x0, av_, b0_); x1 = f32x4_fma(x1, av_, b1_); \
  }
#define EP_DOT_OUT_(r, rows, out, x0, x1) if ((rows) > (r)) { (out)[2 * (r)] = x0; (out)[2 * (r) + 1] = x1; }
#define EP_DOT_X8(r0, rows, K, a, b, ldb, out)                                                          \
  do {                                                                                                 \
    EP_DOT_ACC_##rows                                                                                  \
    for (uint32_t k_ = 0; k_ < (K); k_++, (a) += EP_GEMM_MR, (b) += (ldb)) {                           \
      const f32x4 b0_ = f32x4_load(b), b1_ = f32x4_load((b) + 4);                                      \
      f32x4 av_;                                                                                       \
      EP_DOT_ROW_(0, rows, r0, a, c00, c01) EP_DOT_ROW_(1, rows, r0, a, c10, c11)                      \
      EP_DOT_ROW_(2, rows, r0, a, c20, c21) EP_DOT_ROW_(3, rows, r0, a, c30, c31)                      \
      EP_DOT_ROW_(4, rows, r0, a, c40, c41) EP_DOT_ROW_(5, rows, r0, a, c50, c51)                      \
    }                                                                                                  \
    EP_DOT_OUT_(0, rows, out, c00, c01) EP_DOT_OUT_(1, rows, out, c10, c11)                            \
    EP_DOT_OUT_(2, rows, out, c20, c21) EP_DOT_OUT_(3, rows, out, c30, c31)                            \
    EP_DOT_OUT_(4, rows, out, c40, c41) EP_DOT_OUT_(5, rows, out, c50, c51)                            \
  } while (0)

#if EP_ISA_WASM_RELAXED   /* src/vec/ep_isa.h */
/* The relaxed builds' 6 x 8 tile: out[2r + v], r < 6. Not inlined: V8 then allocates registers for the loop
 * alone (pointers and counter stay in registers, nothing spills). */
EP_NOINLINE static void dot6x8(uint32_t K, const float *a, const float *b, uint32_t ldb, f32x4 *out) {
  EP_DOT_X8(0, 6, K, a, b, ldb, out);
}
#endif
#endif
