/* Small float formats as codes (lowp.h). One rounding from double straight to the target, so float64 sources round
 * once too. The formats (ONNX's, as ml_dtypes implements them): IEEE-like float16 and bfloat16 (inf, NaN with payload);
 * float8e4m3fn (no inf, NaN S.1111.111); the fnuz formats (no inf, no -0, one NaN 0x80); float8e5m2 (IEEE-like);
 * float4e2m1 (neither inf nor NaN: NaN encodes as the zero of the opposite sign, as the reference); float8e8m0 (an
 * exponent alone, 0xFF NaN). */
#include "lowp.h"

typedef struct {
  uint8_t dtype, mbits, bias, fnuz;
  uint16_t sign, maxcode, inf, nan;   /* inf 0: none; nan: the positive NaN code of formats without inf */
} small_fmt;

static const small_fmt FMTS[] = {
  {EP_F16, 10, 15, 0, 0x8000u, 0x7BFFu, 0x7C00u, 0},
  {EP_BF16, 7, 127, 0, 0x8000u, 0x7F7Fu, 0x7F80u, 0},
  {EP_F8E4M3FN, 3, 7, 0, 0x80u, 0x7Eu, 0, 0x7Fu},
  {EP_F8E4M3FNUZ, 3, 8, 1, 0x80u, 0x7Fu, 0, 0x80u},
  {EP_F8E5M2, 2, 15, 0, 0x80u, 0x7Bu, 0x7Cu, 0},
  {EP_F8E5M2FNUZ, 2, 16, 1, 0x80u, 0x7Fu, 0, 0x80u},
  {EP_F4E2M1, 1, 1, 0, 0x8u, 0x7u, 0, 0x8u},
};

static const small_fmt *fmt_of(uint32_t dt) {
  for (uint32_t k = 0; k < sizeof FMTS / sizeof FMTS[0]; k++) if (FMTS[k].dtype == dt) return &FMTS[k];
  return 0;
}

int ep_small_float(uint32_t dt) { return dt == EP_F8E8M0 || fmt_of(dt) != 0; }

static double pow2(int32_t k) {   /* 2^k for -1022 <= k <= 1023 */
  union { uint64_t u; double d; } b;
  b.u = (uint64_t)(k + 1023) << 52;
  return b.d;
}

double ep_small_float_value(uint32_t dt, uint32_t code) {
  if (dt == EP_F8E8M0) return (code & 0xFFu) == 0xFFu ? (double)__builtin_nan("") : pow2((int32_t)(code & 0xFFu) - 127);
  const small_fmt *f = fmt_of(dt);
  code &= 2u * f->sign - 1u;
  if (f->fnuz && code == f->nan) return (double)__builtin_nan("");
  const uint32_t mag = code & (f->sign - 1u);
  const double s = code & f->sign ? -1.0 : 1.0;
  if (mag > f->maxcode) return f->inf && mag == f->inf ? s * (double)__builtin_inf() : (double)__builtin_nan("");
  const uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1u);
  return s * (double)(e ? m | (1u << f->mbits) : m) * pow2((int32_t)(e ? e : 1u) - f->bias - f->mbits);
}

/* float8e8m0 as onnx.numpy_helper.to_float8e8m0 makes it from float32: the exponent field, rounded by mode. */
static uint32_t e8m0_code(double d, int saturate, int round_mode) {
  union { float f; uint32_t u; } b;
  b.f = (float)d;
  uint32_t e = (b.u >> 23) & 0xFFu;
  if (e == 0xFFu) return 0xFFu;
  int up = 0;
  if (round_mode == EP_ROUND_UP) up = (b.u & 0x7FFFFFu) != 0;
  else if (round_mode == EP_ROUND_NEAREST)
    up = (b.u & 0x400000u) && ((b.u & 0x200000u) || (b.u & 0x1FFFFFu) || e > 0);
  if (up && !(saturate && e == 0xFEu)) e++;
  return e & 0xFFu;
}

uint32_t ep_small_float_code(uint32_t dt, double d, int saturate, int round_mode) {
  if (dt == EP_F8E8M0) return e8m0_code(d, saturate, round_mode);
  const small_fmt *f = fmt_of(dt);
  union { double d; uint64_t u; } b;
  b.d = d;
  const uint32_t sign = (uint32_t)(b.u >> 63) ? f->sign : 0u;
  const int32_t e = (int32_t)((b.u >> 52) & 0x7FFu);
  const uint64_t man = b.u & 0xFFFFFFFFFFFFFull;
  const int sat = f->sign == 0x80u ? saturate : !f->inf;   /* float8 by the attribute; f16/bf16 never; f4 always */
  if (e == 0x7FF && man) {   /* NaN: IEEE-like formats keep the payload's top bits, quieted */
    if (f->inf) return sign | f->inf | (1u << (f->mbits - 1)) | (uint32_t)(man >> (52 - f->mbits));
    return f->fnuz ? f->nan : f->nan ^ sign;
  }
  uint32_t code;
  const int32_t emin = 1 - (int32_t)f->bias, E = e - 1023;
  if (e == 0x7FF || E + (int32_t)f->bias > 255) {
    code = f->maxcode + 1u;   /* infinity or far beyond the range: overflow below */
  } else if (e == 0) {
    code = 0;                 /* double subnormals are far below every format's smallest value */
  } else {
    const uint64_t sig = man | (1ull << 52);
    const int32_t q = (E >= emin ? E : emin) - (int32_t)f->mbits;   /* exponent of the last place kept */
    const uint32_t shift = (uint32_t)(52 - E + q);                  /* >= 52 - mbits > 0 */
    uint64_t n = 0;
    if (shift < 64) {
      const uint64_t rem = sig & ((1ull << shift) - 1u), half = 1ull << (shift - 1);
      n = (sig >> shift) + (rem > half || (rem == half && ((sig >> shift) & 1u)));
    }
    code = E >= emin ? ((uint32_t)(E - emin) << f->mbits) + (uint32_t)n : (uint32_t)n;   /* a carry moves up */
  }
  if (code > f->maxcode) {
    if (sat) code = f->maxcode;
    else return f->inf ? sign | f->inf : f->fnuz ? f->nan : f->nan ^ sign;
  }
  return code == 0 && f->fnuz ? 0u : sign | code;
}

uint8_t ep_narrow_int(uint32_t dt, uint64_t v) {
  const uint32_t bits = dt == EP_I4 || dt == EP_U4 ? 4u : 2u, m = (1u << bits) - 1u, h = 1u << (bits - 1);
  const uint32_t low = (uint32_t)v & m;
  return (uint8_t)(dt == EP_I4 || dt == EP_I2 ? (low ^ h) - h : low);
}
