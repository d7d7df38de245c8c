/* The vector layer: the only ISA-specific surface the kernels see.
 * One implementation per instruction set, chosen at compile time:
 *   EP_VEC_WASM128  WebAssembly SIMD128 (src/vec/vec_wasm128.h)
 *   EP_VEC_NEON     AArch64 NEON        (edge/neon/vec_neon.h)
 *   otherwise       portable scalar     (src/vec/vec_scalar.h)
 * Every kernel is written once against these names. Lanes: f32x4, i32x4, i16x8, i8x16.
 * EP_VEC_FMA(acc, a, b) = acc + a*b; fused where the ISA has it (relaxed SIMD, NEON), else mul+add. */
#ifndef EP_VEC_H
#define EP_VEC_H
#include <stdint.h>

#if defined(__wasm_simd128__) && !defined(EP_FORCE_SCALAR)
#include "../src/vec/vec_wasm128.h"
#elif defined(__aarch64__) && defined(__ARM_NEON) && !defined(EP_FORCE_SCALAR)
#include "../../edge/neon/vec_neon.h"
#else
#include "../src/vec/vec_scalar.h"
#endif

#endif
