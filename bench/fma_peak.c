/* The ceiling of float32 multiply-add throughput that WebAssembly SIMD128 reaches on this machine's engine:
 * 12 independent f32x4 chains (enough to cover FMA latency on 2 ports). bench/fma_peak.py builds and runs it.
 * `relaxed` uses f32x4.relaxed_madd (one FMA where the CPU has it); `simd` the strict mul + add pair. */
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
