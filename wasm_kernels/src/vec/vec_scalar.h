/* Portable scalar implementation of the vector layer: four plain floats per "vector".
 * It is the reference every other implementation is tested against. */
#ifndef EP_VEC_SCALAR_H
#define EP_VEC_SCALAR_H
#include <stdint.h>
#define EP_VEC_NAME "scalar"
typedef struct { float v[4]; } f32x4;
typedef struct { int32_t v[4]; } i32x4;
typedef struct { int16_t v[8]; } i16x8;
typedef struct { int8_t v[16]; } i8x16;

static inline f32x4 f32x4_load(const float *p) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = p[i]; return r; }
static inline void f32x4_store(float *p, f32x4 a) { for (int i = 0; i < 4; i++) p[i] = a.v[i]; }
static inline f32x4 f32x4_splat(float x) { f32x4 r = {{x, x, x, x}}; return r; }
static inline f32x4 f32x4_zero(void) { return f32x4_splat(0.0f); }
#define EP_SCALAR_BIN(name, expr) \
  static inline f32x4 name(f32x4 a, f32x4 b) { f32x4 r; for (int i = 0; i < 4; i++) { float x = a.v[i], y = b.v[i]; r.v[i] = (expr); } return r; }
EP_SCALAR_BIN(f32x4_add, x + y)
EP_SCALAR_BIN(f32x4_sub, x - y)
EP_SCALAR_BIN(f32x4_mul, x * y)
EP_SCALAR_BIN(f32x4_div, x / y)
EP_SCALAR_BIN(f32x4_max, x < y ? y : x)
EP_SCALAR_BIN(f32x4_min, y < x ? y : x)
#undef EP_SCALAR_BIN
static inline f32x4 f32x4_fma(f32x4 acc, f32x4 a, f32x4 b) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = acc.v[i] + a.v[i] * b.v[i]; return r; }
static inline float f32x4_hsum(f32x4 a) { return a.v[0] + a.v[1] + a.v[2] + a.v[3]; }
static inline float f32x4_hmax(f32x4 a) { float m = a.v[0]; for (int i = 1; i < 4; i++) m = a.v[i] > m ? a.v[i] : m; return m; }
#define f32x4_lane_splat(a, L) f32x4_splat((a).v[L])

static inline i32x4 i32x4_load(const int32_t *p) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = p[i]; return r; }
static inline void i32x4_store(int32_t *p, i32x4 a) { for (int i = 0; i < 4; i++) p[i] = a.v[i]; }
static inline i32x4 i32x4_splat(int32_t x) { i32x4 r = {{x, x, x, x}}; return r; }
static inline i32x4 i32x4_add(i32x4 a, i32x4 b) { i32x4 r; for (int i = 0; i < 4; i++) r.v[i] = a.v[i] + b.v[i]; return r; }
static inline i16x8 i16x8_load_i8(const int8_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; }
static inline i16x8 i16x8_load_u8(const uint8_t *p) { i16x8 r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; }
static inline i32x4 i32x4_dot_i16x8_add(i32x4 acc, i16x8 a, i16x8 b) {
  for (int i = 0; i < 4; i++) acc.v[i] += (int32_t)a.v[2 * i] * b.v[2 * i] + (int32_t)a.v[2 * i + 1] * b.v[2 * i + 1];
  return acc;
}
static inline f32x4 f32x4_from_i32x4(i32x4 a) { f32x4 r; for (int i = 0; i < 4; i++) r.v[i] = (float)a.v[i]; return r; }

/* ---- linalg additions (also in vec_wasm128.h) ---- */
/* Even lanes of the 8-lane concatenation a:b = {a0, a2, b0, b2} (stride-2 deinterleave). */
static inline f32x4 f32x4_even(f32x4 a, f32x4 b) { f32x4 r = {{a.v[0], a.v[2], b.v[0], b.v[2]}}; return r; }
#endif
