/* The instruction set a translation unit is compiled for, read off the compiler's own macros, and what that
 * selects: the vector layer (ep_vec.h includes the one header named here) and the per-ISA micro-kernels.
 * No build passes a -D to choose either (EP_FORCE_SCALAR, the emscripten fallback's "no SIMD", aside).
 *
 *   EP_ISA_WASM_RELAXED  __wasm_relaxed_simd__          vec_wasm128.h with fused f32x4_fma; relaxed GEMM paths
 *   EP_ISA_WASM128       __wasm_simd128__               vec_wasm128.h (also set for the relaxed build)
 *   EP_ISA_NEON          __aarch64__ && __ARM_NEON      vec_neon.h; NEON GEMM + SDOT int8 GEMM (edge/neon/)
 *   EP_ISA_SCALAR        anything else, EP_FORCE_SCALAR  vec_scalar.h (the reference)
 *
 * Micro-kernels. An ISA with its own GEMM defines ep_gemm_f32 / ep_qgemm in its file (NEON: edge/neon/
 * gemm_f32_neon.c, qgemm_i8_neon.c); the portable kernels in kernels/gemm.c and qgemm.c are then compiled
 * under EP_GEMM_F32_PORTABLE / EP_QGEMM_PORTABLE (the _portable names) and serve the ISA kernel's edge tiles
 * (and, for SDOT, CPUs without the dot product). Elsewhere those names are ep_gemm_f32 / ep_qgemm themselves.
 * docs/design.md has the table of kernel family x instruction set. */
#ifndef EP_ISA_H
#define EP_ISA_H

#if defined(EP_FORCE_SCALAR)
#define EP_ISA_SCALAR 1
#elif defined(__wasm_simd128__)
#define EP_ISA_WASM128 1
#if defined(__wasm_relaxed_simd__)
#define EP_ISA_WASM_RELAXED 1
#endif
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define EP_ISA_NEON 1
#else
#define EP_ISA_SCALAR 1
#endif

#ifndef EP_ISA_WASM128
#define EP_ISA_WASM128 0
#endif
#ifndef EP_ISA_WASM_RELAXED
#define EP_ISA_WASM_RELAXED 0
#endif
#ifndef EP_ISA_NEON
#define EP_ISA_NEON 0
#endif
#ifndef EP_ISA_SCALAR
#define EP_ISA_SCALAR 0
#endif

/* The micro-kernels: f32 GEMM (6-row packed A) and int8 GEMM. */
#if EP_ISA_NEON
#define EP_ISA_GEMM_F32 1                          /* edge/neon/gemm_f32_neon.c: 6 x 16 fmla-by-element */
#define EP_ISA_QGEMM 1                             /* edge/neon/qgemm_i8_neon.c: 8 x 8 SDOT (runtime check on android) */
#define EP_GEMM_F32_PORTABLE ep_gemm_f32_portable
#define EP_QGEMM_PORTABLE ep_qgemm_portable
#else
#define EP_ISA_GEMM_F32 0
#define EP_ISA_QGEMM 0
#define EP_GEMM_F32_PORTABLE ep_gemm_f32
#define EP_QGEMM_PORTABLE ep_qgemm
#endif

#endif
