/* The plan's small float formats (float16, bfloat16, the float8s, float4e2m1, float8e8m0) as codes: one encoder and
 * one decoder for all, parameterized by a per-format table (lowp.c), and the 4/2-bit integers' storage. CAST converts
 * through them, WINOGRAD_FILTER reads float16 weights with them, QUANTIZE_LINEAR / DEQUANTIZE_LINEAR the 4/2-bit
 * integers. */
#ifndef EP_LOWP_H
#define EP_LOWP_H
#include "ep_kernel.h"

/* CAST's round_mode word (float8e8m0 targets only; ONNX Cast-24 `round_mode`). */
enum { EP_ROUND_UP = 0, EP_ROUND_DOWN = 1, EP_ROUND_NEAREST = 2 };

/* 1 for float16, bfloat16, the float8 formats, float4e2m1 and float8e8m0. */
int ep_small_float(uint32_t dt);
/* The value of `code` in small float dtype `dt` (exact: every one is a double). */
double ep_small_float_value(uint32_t dt, uint32_t code);
/* d rounded to nearest even in small float dtype `dt` (float8e8m0: by round_mode). saturate (float8 targets, ONNX
 * Cast's attribute): a finite value beyond the range, or an infinity, becomes the largest finite value of its sign;
 * otherwise it becomes infinity where the format has one, NaN where it has not. bfloat16 and float16 never saturate,
 * float4e2m1 always does (it has neither). */
uint32_t ep_small_float_code(uint32_t dt, double d, int saturate, int round_mode);
/* v wrapped to an integer dtype of 2 or 4 bits, as it is stored: int4/int2 sign-extended to the byte (an Int8Array
 * reads it), uint4/uint2 zero-extended. */
uint8_t ep_narrow_int(uint32_t dt, uint64_t v);
/* The value of a stored 4/2-bit element, from its low bits only (ml_dtypes writes int4 -1 as 0x0F, a JS Int8Array
 * as 0xFF: both read as -1). */
static inline int32_t ep_narrow_load(uint32_t dt, uint8_t b) {
  const uint8_t v = ep_narrow_int(dt, b);
  return dt == EP_I4 || dt == EP_I2 ? (int32_t)(int8_t)v : (int32_t)v;
}

#endif
