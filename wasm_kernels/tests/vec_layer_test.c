/* The vector layer (include/ep_vec.h) against plain C, lane by lane, on whichever implementation this build
 * selects (src/vec/ep_isa.h): vec_wasm128.h (SIMD128, relaxed), vec_neon.h, vec_scalar.h. Every operation the
 * kernels use, on inputs that reach the edge cases the layers must agree on: NaN and signed zeros through
 * max/min (the "pseudo" a < b ? b : a), rounding halves, saturating conversions and narrows, wrapping integer
 * sums. Expected values come from scalar C written here, not from vec_scalar.h.
 *
 * No libc (the wasm builds are freestanding): ep_vec_test() returns the number of failed checks and
 * ep_vec_test_report() the names of the first failures; main() (native builds) prints them.
 * tests/test_vec_layer.py builds and runs it: host (scalar), aarch64 under qemu (NEON), wasm32 SIMD128,
 * relaxed SIMD and no SIMD under wasmtime. Compile with -ffp-contract=off (the references' a*b+c unfused). */
#include <stdint.h>
#include "ep_vec.h"

static uint32_t g_fail, g_checks;
static char g_report[512];
static uint32_t g_len;

static void note(const char *op, int lane) {
  g_fail++;
  if (g_len + 40 >= sizeof g_report) return;
  for (const char *c = op; *c && g_len + 8 < sizeof g_report; c++) g_report[g_len++] = *c;
  g_report[g_len++] = '[';
  g_report[g_len++] = (char)('0' + (lane < 0 ? 0 : lane % 10));
  g_report[g_len++] = ']';
  g_report[g_len++] = ' ';
  g_report[g_len] = 0;
}

static uint32_t bits(float f) {
  union { float f; uint32_t u; } c;
  c.f = f;
  return c.u;
}
static float fbits(uint32_t u) {
  union { float f; uint32_t u; } c;
  c.u = u;
  return c.f;
}
/* Same bits; NaN matches any NaN (payloads and signs of generated NaNs differ between ISAs). */
static void check_f(const char *op, int lane, float got, float want) {
  g_checks++;
  if (want != want ? got == got : bits(got) != bits(want)) note(op, lane);
}
static void check_i(const char *op, int lane, int64_t got, int64_t want) {
  g_checks++;
  if (got != want) note(op, lane);
}

#define NF 4
static const float FA[NF][4] = {{1.5f, -2.25f, 0.0f, -0.0f}, {2.5f, -3.5f, 0.5f, -0.5f},
                                {1e30f, -7.75f, 3.0f, 123456.7f}, {-1.5f, 8388607.5f, 1.0f, -16777216.0f}};
static const float FB[NF][4] = {{3.0f, -2.25f, -0.0f, 0.0f}, {-2.5f, 4.0f, 0.25f, 1e-3f},
                                {-1e30f, 7.75f, -3.0f, 2.0f}, {0.0f, -1.0f, 1.0f, 0.75f}};

#define F_BIN(op, expr)                                                              \
  for (int s = 0; s < NF; s++) {                                                     \
    float got[4];                                                                    \
    f32x4_store(got, op(f32x4_load(FA[s]), f32x4_load(FB[s])));                      \
    for (int i = 0; i < 4; i++) {                                                    \
      const float x = FA[s][i], y = FB[s][i];                                        \
      check_f(#op, i, got[i], (expr));                                               \
    }                                                                                \
  }
#define F_UN(op, expr)                                                               \
  for (int s = 0; s < NF; s++) {                                                     \
    float got[4];                                                                    \
    f32x4_store(got, op(f32x4_load(FA[s])));                                         \
    for (int i = 0; i < 4; i++) {                                                    \
      const float x = FA[s][i];                                                      \
      check_f(#op, i, got[i], (expr));                                               \
    }                                                                                \
  }
#define F_CMP(op, expr)                                                              \
  for (int s = 0; s < NF; s++) {                                                     \
    int32_t got[4];                                                                  \
    i32x4_store(got, op(f32x4_load(FA[s]), f32x4_load(FB[s])));                      \
    for (int i = 0; i < 4; i++) {                                                    \
      const float x = FA[s][i], y = FB[s][i];                                        \
      check_i(#op, i, got[i], (expr) ? -1 : 0);                                      \
    }                                                                                \
  }

/* Round x to an integer value (mode 0 trunc, 1 floor, 2 ceil, 3 nearest even), |x| < 2^23 exactly in int64. */
static float round_ref(float x, int mode) {
  if (x != x || x >= 8388608.0f || x <= -8388608.0f) return x;
  const int64_t t = (int64_t)x;   /* toward zero */
  const float ft = (float)t, frac = x - ft;
  float r = ft;
  if (mode == 1 && frac < 0) r = ft - 1.0f;
  if (mode == 2 && frac > 0) r = ft + 1.0f;
  if (mode == 3) {
    if (frac > 0.5f || (frac == 0.5f && (t & 1))) r = ft + 1.0f;
    if (frac < -0.5f || (frac == -0.5f && (t & 1))) r = ft - 1.0f;
  }
  return fbits(bits(r) | (bits(x) & 0x80000000u));   /* -0.25 rounds to -0 */
}

static void test_f32(void) {
  const float nan = fbits(0x7fc00000u);
  F_BIN(f32x4_add, x + y)
  F_BIN(f32x4_sub, x - y)
  F_BIN(f32x4_mul, x * y)
  F_BIN(f32x4_max, x < y ? y : x)
  F_BIN(f32x4_min, y < x ? y : x)
  F_UN(f32x4_abs, fbits(bits(x) & 0x7fffffffu))
  F_UN(f32x4_neg, fbits(bits(x) ^ 0x80000000u))
  F_UN(f32x4_trunc, round_ref(x, 0))
  F_UN(f32x4_floor, round_ref(x, 1))
  F_UN(f32x4_ceil, round_ref(x, 2))
  F_UN(f32x4_round_even, round_ref(x, 3))
  F_CMP(f32x4_lt, x < y)
  F_CMP(f32x4_le, x <= y)
  F_CMP(f32x4_eq, x == y)
  {
    /* max/min with NaN: the pseudo forms keep a when the compare is false (a NaN in b keeps a, in a keeps NaN) */
    const float a[4] = {nan, 1.0f, nan, -0.0f}, b[4] = {1.0f, nan, nan, 0.0f};
    float mx[4], mn[4];
    f32x4_store(mx, f32x4_max(f32x4_load(a), f32x4_load(b)));
    f32x4_store(mn, f32x4_min(f32x4_load(a), f32x4_load(b)));
    for (int i = 0; i < 4; i++) {
      check_f("f32x4_max(nan)", i, mx[i], a[i] < b[i] ? b[i] : a[i]);
      check_f("f32x4_min(nan)", i, mn[i], b[i] < a[i] ? b[i] : a[i]);
    }
    const float n[4] = {1.0f, -7.5f, 1e30f, 3.0f}, d[4] = {3.0f, 0.25f, -7.0f, -0.0f};
    float dv[4];
    f32x4_store(dv, f32x4_div(f32x4_load(n), f32x4_load(d)));
    for (int i = 0; i < 4; i++) check_f("f32x4_div", i, dv[i], n[i] / d[i]);
    const float q[4] = {4.0f, 2.25f, 0.0f, 1e-8f};
    float r[4];
    f32x4_store(r, f32x4_sqrt(f32x4_load(q)));
    const float want[4] = {2.0f, 1.5f, 0.0f, 1e-4f};
    for (int i = 0; i < 3; i++) check_f("f32x4_sqrt", i, r[i], want[i]);
    check_i("f32x4_sqrt", 3, r[3] > 0.99e-4f && r[3] < 1.01e-4f, 1);
  }
  {
    float r[4];
    f32x4_store(r, f32x4_splat(-3.25f));
    for (int i = 0; i < 4; i++) check_f("f32x4_splat", i, r[i], -3.25f);
    f32x4_store(r, f32x4_zero());
    for (int i = 0; i < 4; i++) check_f("f32x4_zero", i, r[i], 0.0f);
    f32x4_store(r, f32x4_load_splat(&FA[0][1]));
    for (int i = 0; i < 4; i++) check_f("f32x4_load_splat", i, r[i], FA[0][1]);
    const f32x4 v = f32x4_load(FA[1]);
    f32x4_store(r, f32x4_lane_splat(v, 2));
    for (int i = 0; i < 4; i++) check_f("f32x4_lane_splat", i, r[i], FA[1][2]);
    f32x4_store(r, f32x4_lane_splat(v, 1));
    for (int i = 0; i < 4; i++) check_f("f32x4_lane_splat", i, r[i], FA[1][1]);
    /* exact sums and maxima: the layers may add in any order */
    check_f("f32x4_hsum", 0, f32x4_hsum(f32x4_load(FA[1])), 2.5f - 3.5f + 0.5f - 0.5f);
    check_f("f32x4_hmax", 0, f32x4_hmax(f32x4_load(FA[1])), 2.5f);
    check_f("f32x4_hmax", 1, f32x4_hmax(f32x4_load(FB[3])), 1.0f);
  }
  {
    /* fma: fused where EP_VEC_FUSED says the ISA can fuse. a*b = 1 + 2^-11 + 2^-24 is not a float: fused
     * gives 2^-24, unfused 0 (or 2^-23); the relaxed build may do either (relaxed_madd is engine-defined). */
    const float a = 1.0f + 1.0f / 4096.0f, c = -(1.0f + 1.0f / 2048.0f);
    float r[4];
    f32x4_store(r, f32x4_fma(f32x4_splat(c), f32x4_splat(a), f32x4_splat(a)));
    const float fused = 1.0f / 16777216.0f, unfused = c + a * a;
    const int need = EP_ISA_NEON ? 1 : EP_ISA_WASM_RELAXED ? 2 : 0;   /* 1 fused, 0 unfused, 2 either */
    for (int i = 0; i < 4; i++)
      check_i("f32x4_fma(fusion)", i, need == 2 ? bits(r[i]) == bits(fused) || bits(r[i]) == bits(unfused)
                                                 : bits(r[i]) == bits(need ? fused : unfused), 1);
    f32x4_store(r, f32x4_fma(f32x4_load(FA[1]), f32x4_load(FB[1]), f32x4_splat(2.0f)));   /* exact either way */
    for (int i = 0; i < 4; i++) check_f("f32x4_fma", i, r[i], FA[1][i] + FB[1][i] * 2.0f);
  }
  {
    const float x[4] = {2.5f, -2.5f, 3e9f, nan}, y[4] = {-3e9f, 7.99f, -0.0f, 1.0f};
    int32_t r[4];
    i32x4_store(r, i32x4_from_f32x4(f32x4_load(x)));
    const int32_t want[4] = {2, -2, 2147483647, 0};
    for (int i = 0; i < 4; i++) check_i("i32x4_from_f32x4", i, r[i], want[i]);
    i32x4_store(r, i32x4_from_f32x4(f32x4_load(y)));
    const int32_t want2[4] = {(-2147483647 - 1), 7, 0, 1};
    for (int i = 0; i < 4; i++) check_i("i32x4_from_f32x4", i, r[i], want2[i]);
    const int32_t iv[4] = {-7, 16777217, 0, 2147483647};
    float f[4];
    f32x4_store(f, f32x4_from_i32x4(i32x4_load(iv)));
    for (int i = 0; i < 4; i++) check_f("f32x4_from_i32x4", i, f[i], (float)iv[i]);
    i32x4_store(r, f32x4_as_i32x4(f32x4_load(FA[0])));
    for (int i = 0; i < 4; i++) check_i("f32x4_as_i32x4", i, r[i], (int32_t)bits(FA[0][i]));
    f32x4_store(f, i32x4_as_f32x4(i32x4_load(iv)));
    for (int i = 0; i < 4; i++) check_f("i32x4_as_f32x4", i, f[i], fbits((uint32_t)iv[i]));
    /* select: lanes of a where the mask is all ones */
    const int32_t m[4] = {-1, 0, 0, -1};
    f32x4_store(f, f32x4_select(i32x4_load(m), f32x4_load(FA[2]), f32x4_load(FB[2])));
    for (int i = 0; i < 4; i++) check_f("f32x4_select", i, f[i], m[i] ? FA[2][i] : FB[2][i]);
  }
  {
    const f32x4 a = f32x4_load(FA[1]), b = f32x4_load(FB[1]);
    float r[4];
#define PERM(op, l0, l1, l2, l3)                                                              \
    f32x4_store(r, op(a, b));                                                                 \
    {                                                                                         \
      const float ab[8] = {FA[1][0], FA[1][1], FA[1][2], FA[1][3], FB[1][0], FB[1][1], FB[1][2], FB[1][3]}; \
      const int l[4] = {l0, l1, l2, l3};                                                      \
      for (int i = 0; i < 4; i++) check_f(#op, i, r[i], ab[l[i]]);                            \
    }
    PERM(f32x4_even, 0, 2, 4, 6)
    PERM(f32x4_odd, 1, 3, 5, 7)
    PERM(f32x4_zip_lo, 0, 4, 1, 5)
    PERM(f32x4_zip_hi, 2, 6, 3, 7)
#undef PERM
  }
}

static const int32_t IA[4] = {2147483647, -5, 123456789, -2147483647 - 1}, IB[4] = {1, -7, -987654321, -1};

static void test_i32(void) {
  int32_t r[4];
  const i32x4 a = i32x4_load(IA), b = i32x4_load(IB);
#define I_BIN(op, expr)                                                                            \
  i32x4_store(r, op(a, b));                                                                        \
  for (int i = 0; i < 4; i++) {                                                                    \
    const uint32_t x = (uint32_t)IA[i], y = (uint32_t)IB[i];                                       \
    check_i(#op, i, r[i], (int32_t)(expr));                                                        \
  }
  I_BIN(i32x4_add, x + y)
  I_BIN(i32x4_sub, x - y)
  I_BIN(i32x4_mul, x * y)
  I_BIN(i32x4_and, x & y)
  I_BIN(i32x4_or, x | y)
  I_BIN(i32x4_xor, x ^ y)
  I_BIN(i32x4_gt, (int32_t)x > (int32_t)y ? 0xffffffffu : 0u)
#undef I_BIN
  i32x4_store(r, i32x4_shl(a, 3));
  for (int i = 0; i < 4; i++) check_i("i32x4_shl", i, r[i], (int32_t)((uint32_t)IA[i] << 3));
  i32x4_store(r, i32x4_shr(a, 5));
  for (int i = 0; i < 4; i++) check_i("i32x4_shr", i, r[i], IA[i] < 0 ? -(int32_t)((-(int64_t)IA[i] + 31) >> 5) : IA[i] >> 5);
  i32x4_store(r, i32x4_splat(-9));
  for (int i = 0; i < 4; i++) check_i("i32x4_splat", i, r[i], -9);
  i32x4_store(r, i32x4_zip_lo(a, b));
  const int32_t zl[4] = {IA[0], IB[0], IA[1], IB[1]}, zh[4] = {IA[2], IB[2], IA[3], IB[3]};
  for (int i = 0; i < 4; i++) check_i("i32x4_zip_lo", i, r[i], zl[i]);
  i32x4_store(r, i32x4_zip_hi(a, b));
  for (int i = 0; i < 4; i++) check_i("i32x4_zip_hi", i, r[i], zh[i]);
}

static const int16_t HA[8] = {32767, -32768, 5, -6, 300, -300, 0, 1};
static const int16_t HB[8] = {2, 3, -32768, 32767, -1, 255, 7, -129};

static void test_i16_i8(void) {
  int16_t h[8];
  int32_t r[4];
  const i16x8 a = i16x8_load(HA), b = i16x8_load(HB);
#define H_CHECK(op, want_expr)                                                     \
  for (int i = 0; i < 8; i++) check_i(#op, i, h[i], (int16_t)(want_expr));
  i16x8_store(h, i16x8_add(a, b));
  H_CHECK(i16x8_add, HA[i] + HB[i])
  i16x8_store(h, i16x8_sub(a, b));
  H_CHECK(i16x8_sub, HA[i] - HB[i])
  i16x8_store(h, i16x8_and(a, b));
  H_CHECK(i16x8_and, HA[i] & HB[i])
  i16x8_store(h, i16x8_min(a, b));
  H_CHECK(i16x8_min, HA[i] < HB[i] ? HA[i] : HB[i])
  i16x8_store(h, i16x8_max(a, b));
  H_CHECK(i16x8_max, HA[i] > HB[i] ? HA[i] : HB[i])
  i16x8_store(h, i16x8_splat(-77));
  H_CHECK(i16x8_splat, -77)
  i16x8_store(h, i16x8_swap_pairs(a));
  H_CHECK(i16x8_swap_pairs, HA[i ^ 1])
  i16x8_store(h, i16x8_dup_even(a));
  H_CHECK(i16x8_dup_even, HA[i & ~1])
  i16x8_store(h, i16x8_zip_lo(a, b));
  H_CHECK(i16x8_zip_lo, (i & 1) ? HB[i / 2] : HA[i / 2])
  i16x8_store(h, i16x8_zip_hi(a, b));
  H_CHECK(i16x8_zip_hi, (i & 1) ? HB[4 + i / 2] : HA[4 + i / 2])
  i16x8_store(h, i16x8_even(a, b));
  H_CHECK(i16x8_even, i < 4 ? HA[2 * i] : HB[2 * (i - 4)])
  i16x8_store(h, i16x8_odd(a, b));
  H_CHECK(i16x8_odd, i < 4 ? HA[2 * i + 1] : HB[2 * (i - 4) + 1])
  i16x8_store(h, i16x8_zip32_lo(a, b));   /* 32-bit pairs interleaved: a01 b01 a23 b23 */
  H_CHECK(i16x8_zip32_lo, ((i / 2) & 1 ? HB : HA)[(i / 4) * 2 + (i & 1)])
  i16x8_store(h, i16x8_zip32_hi(a, b));
  H_CHECK(i16x8_zip32_hi, ((i / 2) & 1 ? HB : HA)[4 + (i / 4) * 2 + (i & 1)])
  i16x8_store(h, i16x8_pair_splat(a, 2));
  H_CHECK(i16x8_pair_splat, HA[4 + (i & 1)])
  i16x8_store(h, i16x8_load_pair_splat(&HB[2]));
  H_CHECK(i16x8_load_pair_splat, HB[2 + (i & 1)])
#undef H_CHECK
  check_i("i16x8_any_gt", 0, i16x8_any_gt(a, b) != 0, 1);
  check_i("i16x8_any_gt", 1, i16x8_any_gt(i16x8_splat(3), i16x8_splat(3)) != 0, 0);
  const int8_t s8[8] = {-128, -1, 0, 1, 127, 64, -64, 5};
  i16x8_store(h, i16x8_load_i8(s8));
  for (int i = 0; i < 8; i++) check_i("i16x8_load_i8", i, h[i], s8[i]);
  i16x8_store(h, i16x8_load_u8((const uint8_t *)(const void *)s8));
  for (int i = 0; i < 8; i++) check_i("i16x8_load_u8", i, h[i], (uint8_t)s8[i]);
  i32x4_store(r, i32x4_widen_lo(a));
  for (int i = 0; i < 4; i++) check_i("i32x4_widen_lo", i, r[i], HA[i]);
  i32x4_store(r, i32x4_widen_hi(a));
  for (int i = 0; i < 4; i++) check_i("i32x4_widen_hi", i, r[i], HA[4 + i]);
  /* dot: pairs multiplied and added to acc, wrapping (-32768 * -32768 twice overflows int32) */
  const int16_t d1[8] = {-32768, -32768, 3, 4, 300, -300, 7, 0}, d2[8] = {-32768, -32768, 5, 6, 300, 300, -1, 9};
  const int32_t acc[4] = {1, -1, 2147483647, 0};
  i32x4_store(r, i32x4_dot_i16x8_add(i32x4_load(acc), i16x8_load(d1), i16x8_load(d2)));
  for (int i = 0; i < 4; i++)
    check_i("i32x4_dot_i16x8_add", i, r[i], (int32_t)((uint32_t)acc[i] + (uint32_t)(d1[2 * i] * d2[2 * i]) +
                                                      (uint32_t)(d1[2 * i + 1] * d2[2 * i + 1])));
  /* saturating narrows */
  const int32_t w1[4] = {40000, -40000, 12, -32768}, w2[4] = {32767, 2147483647, -2147483647 - 1, 0};
  i16x8_store(h, i16x8_narrow_i32x4(i32x4_load(w1), i32x4_load(w2)));
  for (int i = 0; i < 8; i++) {
    const int32_t v = i < 4 ? w1[i] : w2[i - 4];
    check_i("i16x8_narrow_i32x4", i, h[i], v < -32768 ? -32768 : v > 32767 ? 32767 : v);
  }
  int8_t o[16];
  i8x16_store(o, i8x16_narrow_i16x8(a, b));
  for (int i = 0; i < 16; i++) {
    const int v = i < 8 ? HA[i] : HB[i - 8];
    check_i("i8x16_narrow_i16x8", i, o[i], v < -128 ? -128 : v > 127 ? 127 : v);
  }
  i8x16_store(o, u8x16_narrow_i16x8(a, b));
  for (int i = 0; i < 16; i++) {
    const int v = i < 8 ? HA[i] : HB[i - 8];
    check_i("u8x16_narrow_i16x8", i, (uint8_t)o[i], v < 0 ? 0 : v > 255 ? 255 : v);
  }
  int8_t lo[16];
  for (int i = 0; i < 16; i++) lo[i] = 99;
  i8x16_store_lo8(lo, i8x16_narrow_i16x8(a, b));
  for (int i = 0; i < 16; i++) {
    const int v = i < 8 ? (HA[i] < -128 ? -128 : HA[i] > 127 ? 127 : HA[i]) : 99;   /* the upper 8 untouched */
    check_i("i8x16_store_lo8", i, lo[i], v);
  }
}

/* The table-lookup operations (QLUT): nibbles of every byte value, a 16-entry lookup with in-range indices, a
 * select by whole-lane masks. */
static void test_i8_lut(void) {
  int8_t t[16], x[16], m[16], o[16];
  for (int i = 0; i < 16; i++) { t[i] = (int8_t)(100 - 13 * i); m[i] = (i % 3) ? -1 : 0; }
  for (int base = 0; base < 256; base += 16) {
    for (int i = 0; i < 16; i++) x[i] = (int8_t)(uint8_t)(base + (i * 7) % 16);
    const i8x16 v = i8x16_load(x), lo = i8x16_lo_nibble(v), hi = i8x16_hi_nibble(v);
    i8x16_store(o, lo);
    for (int i = 0; i < 16; i++) check_i("i8x16_lo_nibble", i, o[i], (uint8_t)x[i] & 15);
    i8x16_store(o, hi);
    for (int i = 0; i < 16; i++) check_i("i8x16_hi_nibble", i, o[i], (uint8_t)x[i] >> 4);
    i8x16_store(o, i8x16_lut16(i8x16_load(t), lo));
    for (int i = 0; i < 16; i++) check_i("i8x16_lut16", i, o[i], t[(uint8_t)x[i] & 15]);
    i8x16_store(o, i8x16_select(i8x16_load(m), v, i8x16_load(t)));
    for (int i = 0; i < 16; i++) check_i("i8x16_select", i, o[i], m[i] ? x[i] : t[i]);
  }
}

#if defined(__wasm__)
#define EXPORT(name) __attribute__((export_name(#name)))
#else
#define EXPORT(name)
#endif

EXPORT(ep_vec_test) uint32_t ep_vec_test(void) {
  g_fail = g_checks = g_len = 0;
  g_report[0] = 0;
  test_f32();
  test_i32();
  test_i16_i8();
  test_i8_lut();
  return g_fail;
}
EXPORT(ep_vec_test_checks) uint32_t ep_vec_test_checks(void) { return g_checks; }
EXPORT(ep_vec_test_report) const char *ep_vec_test_report(void) { return g_report; }
EXPORT(ep_vec_test_layer) const char *ep_vec_test_layer(void) { return EP_VEC_NAME; }

#if !defined(__wasm__)
#include <stdio.h>
int main(void) {
  const uint32_t f = ep_vec_test();
  printf("vec=%s checks=%u failed=%u %s\n", EP_VEC_NAME, ep_vec_test_checks(), f, g_report);
  return f ? 1 : 0;
}
#endif
