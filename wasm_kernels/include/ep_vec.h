/* The vector layer: the only ISA-specific surface the kernels see.
 * One implementation per instruction set in src/vec/, chosen at compile time by src/vec/ep_isa.h from the
 * compiler's macros: vec_wasm128.h (WebAssembly SIMD128, relaxed FMA where enabled), vec_neon.h (AArch64
 * NEON), vec_scalar.h (portable C, the reference).
 * Every kernel is written once against these names. Lanes: f32x4, i32x4, i16x8, i8x16.
 * EP_VEC_FMA(acc, a, b) = acc + a*b; fused where the ISA has it (relaxed SIMD, NEON), else mul+add.
 * wasm_kernels/tests/vec_layer_test.c checks the operations on every build. */
#ifndef EP_VEC_H
#define EP_VEC_H
#include <stdint.h>
#include "../src/vec/ep_isa.h"
#if EP_ISA_WASM128
#include "../src/vec/vec_wasm128.h"
#elif EP_ISA_NEON
#include "../src/vec/vec_neon.h"
#else
#include "../src/vec/vec_scalar.h"
#endif
#endif
