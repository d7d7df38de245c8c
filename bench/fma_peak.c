/* The ceilings of one WebAssembly thread on this machine's engine, for bench/fma_peak.py and bench/ceilings.mjs:
 * `peak`: float32 multiply-add throughput, 12 independent f32x4 chains (enough to cover FMA latency on 2 ports);
 * the relaxed build uses f32x4.relaxed_madd (one FMA where the CPU has it), the SIMD128 build the strict mul + add.
 * `stream`: the rate one thread reads memory at, summing a buffer (larger than the last-level cache) into 4
 * accumulators: what a kernel that only streams its weights once (a GEMV) can at best reach. */
#include <wasm_simd128.h>
#include <stdint.h>

#if defined(__wasm_relaxed_simd__)
#define MADD(a, b, c) __builtin_wasm_relaxed_madd_f32x4((a), (b), (c))
#else
#define MADD(a, b, c) wasm_f32x4_add(wasm_f32x4_mul((a), (b)), (c))
#endif

/* n iterations of 12 chained multiply-adds; returns a lane so nothing is optimized away. */
__attribute__((export_name("peak"))) float peak(const int32_t n, const float s) {
  const v128_t b = wasm_f32x4_splat(s), c = wasm_f32x4_splat(0.9999f);
  v128_t a[12];
  for (int32_t k = 0; k < 12; k++) a[k] = wasm_f32x4_splat((float)k);
  for (int32_t i = 0; i < n; i++)
    for (int32_t k = 0; k < 12; k++) a[k] = MADD(a[k], c, b);
  v128_t t = a[0];
  for (int32_t k = 1; k < 12; k++) t = wasm_f32x4_add(t, a[k]);
  return wasm_f32x4_extract_lane(t, 0);
}

/* The sum of n floats at p (n a multiple of 16, p 16-byte aligned), 16 floats per step in 4 accumulators. */
__attribute__((export_name("stream"))) float stream(const float *const p, const int32_t n) {
  v128_t a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
  for (int32_t i = 0; i < n; i += 16) {
    a0 = wasm_f32x4_add(a0, wasm_v128_load(p + i));
    a1 = wasm_f32x4_add(a1, wasm_v128_load(p + i + 4));
    a2 = wasm_f32x4_add(a2, wasm_v128_load(p + i + 8));
    a3 = wasm_f32x4_add(a3, wasm_v128_load(p + i + 12));
  }
  const v128_t t = wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3));
  return wasm_f32x4_extract_lane(t, 0) + wasm_f32x4_extract_lane(t, 2);
}
