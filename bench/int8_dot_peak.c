/* The ceiling of int8 GEMM multiply-adds that WebAssembly SIMD reaches on this machine's engine, per dot form:
 * 6 independent i32x4 accumulators fed by 2 vectors loaded per step and 3 held in registers, so the loop is bound
 * by the dot instructions (with 8 accumulators and 4 held operands V8 x64 spills: half the rate).
 * bench/int8_dot_peak.py builds and runs it. Forms (multiply-adds per dot in brackets):
 *   i16     i32x4.dot_i16x8_s + i32x4.add                                  [8]   every SIMD build's kernel
 *   i7add   i32x4.relaxed_dot_i8x16_i7x16_add_s                            [16]  one vpdpbusd / sdot where mapped
 *   i7pair  i16x8.relaxed_dot_i8x16_i7x16_s, then dot_i16x8 with ones + add [16]  qgemm.c's DOT4 today
 *   i7ext   i16x8.relaxed_dot_i8x16_i7x16_s, extadd_pairwise_i16x8_s + add  [16] */
#include <wasm_simd128.h>
#include <stdint.h>

static v128_t buf[64], ops[4];   /* 1 KiB of B operands, read in a rotating order (L1); ones and 3 A operands */

__attribute__((export_name("init"))) void init(void) {
  for (int32_t i = 0; i < 64; i++) buf[i] = wasm_i8x16_splat((int8_t)(i * 7 % 100));
  ops[0] = wasm_i16x8_splat(1);
  for (int32_t i = 1; i < 4; i++) ops[i] = wasm_i8x16_splat((int8_t)(i * 37 - 90));
}

#define KERNEL(name, DOT)                                                                                   \
  __attribute__((export_name(#name))) int32_t name(const int32_t n) {                                      \
    /* operands read from memory: constants would be rematerialized inside the loop */                     \
    const v128_t one16 = ops[0], s0 = ops[1], s1 = ops[2], s2 = ops[3];                                     \
    v128_t c0 = wasm_i32x4_splat(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;                            \
    for (int32_t i = 0; i < n; i++) {                                                                       \
      const v128_t b0 = buf[(2 * i) & 63], b1 = buf[(2 * i + 1) & 63];                                      \
      c0 = DOT(c0, s0, b0); c1 = DOT(c1, s0, b1); c2 = DOT(c2, s1, b0); c3 = DOT(c3, s1, b1);               \
      c4 = DOT(c4, s2, b0); c5 = DOT(c5, s2, b1);                                                           \
    }                                                                                                       \
    (void)one16;                                                                                            \
    const v128_t t = wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_add(c0, c1), wasm_i32x4_add(c2, c3)),         \
                                    wasm_i32x4_add(c4, c5));                                                \
    return wasm_i32x4_extract_lane(t, 0);                                                                   \
  }

#define DOT_I16(c, a, b) wasm_i32x4_add(c, wasm_i32x4_dot_i16x8(a, b))
KERNEL(i16, DOT_I16)

#if defined(__wasm_relaxed_simd__)
#define DOT_I7ADD(c, a, b) wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a, b, c)
#define DOT_I7PAIR(c, a, b) wasm_i32x4_add(c, wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16(a, b), one16))
#define DOT_I7EXT(c, a, b) wasm_i32x4_add(c, wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16(a, b)))
KERNEL(i7add, DOT_I7ADD)
KERNEL(i7pair, DOT_I7PAIR)
KERNEL(i7ext, DOT_I7EXT)
#endif
