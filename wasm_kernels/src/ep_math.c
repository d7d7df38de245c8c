/* Freestanding float math (no libm). Scalar and f32x4 forms share their constants and operation
 * order, so on builds without fused multiply-add they agree bit for bit.
 *   exp:  Cephes-style: n = round(x/ln2), r = x - n*ln2 (two-part ln2), degree-6 polynomial, times 2^n
 *         applied as two factors so subnormal results round once.
 *   log:  Cephes-style: x = m*2^e with m in [sqrt(1/2), sqrt(2)), polynomial in m-1.
 *   tanh: odd polynomial for |x| < 0.625, else 1 - 2/(exp(2|x|)+1).
 *   erf:  x + x*Q(x^2) for |x| < 1, else 1 - exp(-x^2)*R(|x|) (R fitted to erfcx on [1,4]).
 *   sin, cos, pow (scalar only): double arithmetic internally (exact argument reduction for sin/cos,
 *         a double log/exp for pow), rounded once to float.
 * Measured against glibc by tests/test_math.py (tests/test_math.c): <= 2 ulp everywhere. */
#include "ep_math.h"
#include "ep_math_vec.h"

static inline uint32_t fbits(float f) { union { float f; uint32_t u; } c; c.f = f; return c.u; }
static inline float bitsf(uint32_t u) { union { float f; uint32_t u; } c; c.u = u; return c.f; }
static inline uint64_t dbits(double d) { union { double d; uint64_t u; } c; c.d = d; return c.u; }
static inline double bitsd(uint64_t u) { union { double d; uint64_t u; } c; c.u = u; return c.d; }

float ep_nanf(void) { return bitsf(0x7fc00000u); }
float ep_inff(void) { return bitsf(0x7f800000u); }
int ep_isnan(float x) { return x != x; }
float ep_fabsf(float x) { return bitsf(fbits(x) & 0x7fffffffu); }
float ep_sqrtf(float x) { return __builtin_sqrtf(x); }

/* mode 0 trunc, 1 floor, 2 ceil, 3 nearest-even. NaN, inf and |x| >= 2^23 (already integral) pass. */
static float round_mode(float x, int mode) {
  uint32_t u = fbits(x), sign = u & 0x80000000u;
  if ((u & 0x7fffffffu) >= 0x4b000000u) return x;
  float a = bitsf(u & 0x7fffffffu), t;
  if (mode == 3) {
    t = (a + 8388608.0f) - 8388608.0f;   /* the add rounds half to even at integer granularity */
  } else {
    t = (float)(int32_t)a;
    if (mode == 1 && sign && t != a) t += 1.0f;
    if (mode == 2 && !sign && t != a) t += 1.0f;
  }
  return bitsf(fbits(t) | sign);        /* keeps -0 for e.g. ceil(-0.5) */
}
float ep_floorf(float x) { return round_mode(x, 1); }
float ep_ceilf(float x) { return round_mode(x, 2); }
float ep_roundf_even(float x) { return round_mode(x, 3); }

/* ---- exp ------------------------------------------------------------------------------------ */

f32x4 ep_expf4(f32x4 x) { return ep_expf4_body(x); }

float ep_expf(float x) {
  if (x != x) return x + x;
  if (x > EXP_HI) return ep_inff();
  if (x < EXP_LO) return 0.0f;
  float n = ep_roundf_even(x * LOG2EF);
  float r = x - n * LN2_C1;
  r = r - n * LN2_C2;
  float z = r * r;
  float p = ep_horner(r, ep_erf_k + EP_K_EXP_P, 6);
  float y = (p * z + r) + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;   /* two normal factors: one rounding */
  y = y * bitsf((uint32_t)(n1 + 127) << 23);
  return y * bitsf((uint32_t)(n2 + 127) << 23);
}


/* ---- log ------------------------------------------------------------------------------------ */
#define SQRTHF 0.707106781186547524f
static const float log_p[9] = {   /* highest degree first (ep_horner) */
  7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f,
  -1.6668057665E-1f, 2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f,
};

/* log(1 + t) for t in [sqrt(1/2) - 1, sqrt(2) - 1], plus ef*ln2. */
static float log_core(float t, float ef) {
  float z = t * t;
  float p = ep_horner(t, log_p, 9);
  float y = (p * t) * z;
  y = y + ef * LN2_C2;
  y = y - 0.5f * z;
  float r = t + y;
  return r + ef * LN2_C1;
}

float ep_logf(float x) {
  uint32_t u = fbits(x);
  if (x != x) return x + x;
  if (x == 0.0f) return -ep_inff();
  if (u >> 31) return ep_nanf();
  if (u == 0x7f800000u) return x;
  float eadj = 0.0f;
  if (u < 0x00800000u) { x *= 8388608.0f; u = fbits(x); eadj = -23.0f; }   /* subnormal */
  int32_t e = (int32_t)(u >> 23) - 126;
  float m = bitsf((u & 0x007fffffu) | 0x3f000000u);                      /* [0.5, 1) */
  float t;
  if (m < SQRTHF) { e -= 1; t = (m + m) - 1.0f; } else { t = m - 1.0f; }
  return log_core(t, (float)e + eadj);
}

f32x4 ep_logf4(f32x4 x) {
  i32x4 sub = f32x4_lt(x, f32x4_splat(1.17549435e-38f));
  f32x4 xs = f32x4_select(sub, f32x4_mul(x, f32x4_splat(8388608.0f)), x);
  f32x4 eadj = f32x4_select(sub, f32x4_splat(-23.0f), f32x4_zero());
  i32x4 u = f32x4_as_i32x4(xs);
  i32x4 e = i32x4_sub(i32x4_shr(u, 23), i32x4_splat(126));
  f32x4 m = i32x4_as_f32x4(i32x4_or(i32x4_and(u, i32x4_splat(0x007fffff)), i32x4_splat(0x3f000000)));
  i32x4 lo = f32x4_lt(m, f32x4_splat(SQRTHF));
  e = i32x4_add(e, lo);                                  /* lo lanes are -1 */
  f32x4 t = f32x4_sub(f32x4_select(lo, f32x4_add(m, m), m), f32x4_splat(1.0f));
  f32x4 ef = f32x4_add(f32x4_from_i32x4(e), eadj);
  f32x4 z = f32x4_mul(t, t);
  f32x4 p = ep_horner4(t, log_p, 9);
  f32x4 y = f32x4_mul(f32x4_mul(p, t), z);
  y = f32x4_add(y, f32x4_mul(ef, f32x4_splat(LN2_C2)));
  y = f32x4_sub(y, f32x4_mul(f32x4_splat(0.5f), z));
  f32x4 r = f32x4_add(t, y);
  r = f32x4_add(r, f32x4_mul(ef, f32x4_splat(LN2_C1)));
  const f32x4 inf = f32x4_splat(ep_inff());
  r = f32x4_select(f32x4_lt(x, f32x4_zero()), f32x4_splat(ep_nanf()), r);
  r = f32x4_select(f32x4_eq(x, f32x4_zero()), f32x4_neg(inf), r);
  r = f32x4_select(f32x4_eq(x, inf), inf, r);
  return f32x4_select(f32x4_eq(x, x), r, x);
}

float ep_log1pf(float x) {
  if (x != x) return x + x;
  if (x > -0.29289321881f && x < 0.41421356237f) return x == 0.0f ? x : log_core(x, 0.0f);   /* exact t */
  float u = 1.0f + x;
  if (u == ep_inff() || u <= 0.0f) return ep_logf(u);   /* +inf; -inf at x = -1; nan below */
  float c = x > 1.0f ? 1.0f - (u - x) : x - (u - 1.0f);   /* Fast2Sum: u + c == 1 + x exactly */
  return ep_logf(u) + c / u;
}

/* ---- tanh ----------------------------------------------------------------------------------- */
static const float tanh_p[5] = {   /* highest degree first (ep_horner) */
  -5.70498872745E-3f, 2.06390887954E-2f, -5.37397155531E-2f, 1.33314422036E-1f, -3.33332819422E-1f,
};
#define TANH_SMALL 0.625f

float ep_tanhf(float x) {
  float a = ep_fabsf(x);
  if (a < TANH_SMALL) {
    if (x == 0.0f) return x;           /* keeps -0 (the sum below would give +0) */
    float z = x * x;
    float p = ep_horner(z, tanh_p, 5);
    return (p * z) * x + x;
  }
  if (x != x) return x + x;
  float l = 1.0f - 2.0f / (ep_expf(a + a) + 1.0f);
  return bitsf(fbits(l) | (fbits(x) & 0x80000000u));
}

f32x4 ep_tanhf4(f32x4 x) {
  f32x4 a = f32x4_abs(x);
  f32x4 z = f32x4_mul(x, x);
  f32x4 p = ep_horner4(z, tanh_p, 5);
  f32x4 small = f32x4_fma(x, f32x4_mul(p, z), x);
  const f32x4 one = f32x4_splat(1.0f);
  f32x4 l = f32x4_sub(one, f32x4_div(f32x4_splat(2.0f), f32x4_add(ep_expf4(f32x4_add(a, a)), one)));
  l = f32x4_select(f32x4_lt(x, f32x4_zero()), f32x4_neg(l), l);
  small = f32x4_select(f32x4_eq(x, f32x4_zero()), x, small);   /* keeps -0 */
  return f32x4_select(f32x4_lt(a, f32x4_splat(TANH_SMALL)), small, l);
}

/* ---- erf ------------------------------------------------------------------------------------ */

f32x4 ep_erff4(f32x4 x) { return ep_erff4_body(x); }

float ep_erff(float x) {
  float a = ep_fabsf(x);
  if (x != x) return x + x;
  if (a < 1.0f) {
    float z = x * x;
    float q = ep_horner(z, ep_erf_k + EP_K_ERF_Q, 7);
    return x * q + x;
  }
  if (a > 4.0f) a = 4.0f;
  float r = ep_horner(a, ep_erf_k + EP_K_ERF_R, 11);
  float l = 1.0f - ep_expf(-(a * a)) * r;
  return bitsf(fbits(l) | (fbits(x) & 0x80000000u));
}


/* ---- sigmoid: (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|): no overflow, no cancellation ---------- */
float ep_sigmoidf(float x) {
  float e = ep_expf(-ep_fabsf(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

f32x4 ep_sigmoidf4(f32x4 x) { return ep_sigmoidf4_body(x); }

/* ---- sin, cos: exact reduction modulo pi/2 in integers, then double polynomials -------------- */
/* Bits of 2/pi, preceded by one zero word so that windows may start up to 31 bits before the point. */
static const uint32_t two_over_pi[11] = {
  0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u,
  0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u,
};

/* |x| >= pi/4, finite: returns r in [-pi/4, pi/4] and the quadrant q with x = q*pi/2 + r. */
EP_COLD static double reduce_pio2(float x, int32_t *q) {
  uint32_t u = fbits(x);
  int32_t e = (int32_t)((u >> 23) & 0xff) - 150;          /* x = m * 2^e, m 24-bit */
  uint64_t m = (u & 0x007fffffu) | 0x00800000u;
  /* x*2/pi mod 4 needs the bits k = e-1 .. e+94 of 2/pi; bit k sits at o = k + 31 in the table. */
  uint32_t o = (uint32_t)(e + 30), i = o >> 5, s = o & 31;
  uint32_t w0 = two_over_pi[i], w1 = two_over_pi[i + 1], w2 = two_over_pi[i + 2];
  if (s) {
    w0 = (w0 << s) | (w1 >> (32 - s));
    w1 = (w1 << s) | (w2 >> (32 - s));
    w2 = (w2 << s) | (two_over_pi[i + 3] >> (32 - s));
  }
  /* Low 96 bits of m*W hold x*2/pi mod 4 with 94 fraction bits; keep the top 64 (62 fraction bits). */
  uint64_t v = ((m * w0) << 32) + m * w1 + ((m * w2) >> 32);
  uint64_t qq = (v + (1ull << 61)) >> 62;
  int64_t f = (int64_t)(v - (qq << 62));
  double r = (double)f * (1.0 / 4611686018427387904.0) * 1.5707963267948966;
  int32_t qi = (int32_t)(qq & 3);
  if (u >> 31) { r = -r; qi = -qi; }
  *q = qi & 3;
  return r;
}

/* Highest degree first (ep_horner_d); x - c and x + -c are the same operation (compilers emit either). */
static const double sin_p[6] = {   /* Taylor to r^13: error < 2e-14 on [-pi/4, pi/4] */
  -1.0 / 6227020800.0, 1.0 / 39916800.0, -1.0 / 362880.0, 1.0 / 5040.0, -1.0 / 120.0, 1.0 / 6.0,
};
static const double cos_p[7] = {   /* Taylor to r^14 */
  -1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5,
};
static double sin_poly(double r) {
  double z = r * r;
  double p = ep_horner_d(z, sin_p, 6);
  return r - r * z * p;
}
static double cos_poly(double r) {
  double z = r * r;
  double p = ep_horner_d(z, cos_p, 7);
  return 1.0 + z * p;
}

EP_COLD float ep_sinf(float x) {
  uint32_t a = fbits(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) return x - x;                 /* inf, nan -> nan */
  if (a < 0x39800000u) return x;                       /* |x| < 2^-12: sin x rounds to x; keeps -0 */
  if (a < 0x3f490fdbu) return (float)sin_poly((double)x);
  int32_t q;
  double r = reduce_pio2(x, &q);
  switch (q) {
    case 0: return (float)sin_poly(r);
    case 1: return (float)cos_poly(r);
    case 2: return (float)-sin_poly(r);
    default: return (float)-cos_poly(r);
  }
}

EP_COLD float ep_cosf(float x) {
  uint32_t a = fbits(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) return x - x;
  if (a < 0x3f490fdbu) return (float)cos_poly((double)x);
  int32_t q;
  double r = reduce_pio2(x, &q);
  switch (q) {
    case 0: return (float)cos_poly(r);
    case 1: return (float)-sin_poly(r);
    case 2: return (float)-cos_poly(r);
    default: return (float)sin_poly(r);
  }
}

/* ---- pow: double log and exp, one rounding to float ----------------------------------------- */
static double log_d(double x) {        /* x > 0 finite (a float's value, so normal as a double) */
  uint64_t u = dbits(x);
  int32_t e = (int32_t)((u >> 52) & 0x7ff) - 1023;
  double m = bitsd((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);   /* [1, 2) */
  if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
  double s = (m - 1.0) / (m + 1.0), z = s * s;   /* log m = 2 atanh s, |s| <= 0.1716 */
  static const double atanh_p[10] = {
    1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3,
  };
  double p = ep_horner_d(z, atanh_p, 10);
  return (double)e * 0.6931471805599453 + 2.0 * s * (1.0 + z * p);
}

static double exp_d(double t) {        /* t in [-110, 90] */
  double n = (t * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
  double r = t - n * 6.93147180369123816490e-01 - n * 1.90821492927058770002e-10;
  static const double exp_p[14] = {   /* 1/k!, k = 13 .. 0 */
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
    1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0,
  };
  double p = ep_horner_d(r, exp_p, 14);
  return p * bitsd((uint64_t)((int64_t)n + 1023) << 52);
}

/* 0: not an integer, 1: odd integer, 2: even integer */
static int int_kind(float y) {
  if (ep_floorf(y) != y) return 0;
  if (ep_fabsf(y) >= 16777216.0f) return 2;
  return ((int32_t)y & 1) ? 1 : 2;
}

EP_COLD float ep_powf(float x, float y) {
  float ay = ep_fabsf(y), ax = ep_fabsf(x);
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (x != x || y != y) return x + y;
  const float inf = ep_inff();
  if (ay == inf) {
    if (ax == 1.0f) return 1.0f;
    return (ax < 1.0f) == (y < 0.0f) ? inf : 0.0f;
  }
  int k = int_kind(y);
  float sign = (fbits(x) >> 31) && k == 1 ? -1.0f : 1.0f;   /* x^odd keeps the sign of x (incl. -0, -inf) */
  if (ax == 0.0f) return sign * (y < 0.0f ? inf : 0.0f);
  if (ax == inf) return sign * (y < 0.0f ? 0.0f : inf);
  if (x < 0.0f && k == 0) return ep_nanf();
  double t = (double)y * log_d((double)ax);
  if (t > 89.0) return sign * inf;
  if (t < -105.0) return sign * 0.0f;
  return sign * (float)exp_d(t);
}

/* ---- fmod, exact; the inverse and hyperbolic functions in double (one rounding to float) -------- */
/* C fmodf: |x| reduced by |y| * 2^k, k descending: each subtraction is exact (Sterbenz), so is the result. */
EP_COLD float ep_fmodf(float x, float y) {
  double a = (double)ep_fabsf(x), b = (double)ep_fabsf(y);
  if (x != x || y != y || a == (double)ep_inff() || b == 0.0) return ep_nanf();
  if (a < b) return x;   /* includes y = inf */
  double t = b;
  while (t * 2.0 <= a) t *= 2.0;
  for (; t >= b; t *= 0.5) if (a >= t) a -= t;
  return bitsf(fbits((float)a) | (fbits(x) & 0x80000000u));
}

static double atan_d(double x) {        /* x >= 0, inf allowed */
  static const double atan_p[15] = {    /* (-1)^k / (2k+1), k = 14 .. 0 (ep_horner_d's limit): |t| <= tan(pi/8), error < 2e-13 */
    1.0 / 29, -1.0 / 27, 1.0 / 25, -1.0 / 23, 1.0 / 21, -1.0 / 19, 1.0 / 17,
    -1.0 / 15, 1.0 / 13, -1.0 / 11, 1.0 / 9, -1.0 / 7, 1.0 / 5, -1.0 / 3, 1.0,
  };
  const int inv = x > 1.0;
  if (inv) x = 1.0 / x;
  double off = 0.0;
  if (x > 0.41421356237309503) { off = 0.78539816339744831; x = (x - 1.0) / (x + 1.0); }
  const double r = off + x * ep_horner_d(x * x, atan_p, 15);
  return inv ? 1.5707963267948966 - r : r;
}

/* which: 0 tan, 1 asin, 2 acos, 3 atan, 4 sinh, 5 cosh, 6 asinh, 7 acosh, 8 atanh (UNARY's codes TAN..ATANH).
 * Each of atan_d, log_d and exp_d is called from one place (size): a case sets its argument and a factor. */
EP_COLD float ep_trigf(int32_t which, float x) {
  if (x != x) return x;
  const double a = (double)ep_fabsf(x), s = x < 0.0f ? -1.0 : 1.0, inf = (double)ep_inff();
  if (a < 0x1p-12 && which != 2 && which != 5 && which != 7) return x;   /* f(x) rounds to x */
  double arg, mul = s;
  switch (which) {
    case 0: {
      if (a == inf) return ep_nanf();
      int32_t q = 0;
      const double r = a < 0.78539816339744831 ? (double)x : reduce_pio2(x, &q);
      return (float)((q & 1) ? -cos_poly(r) / sin_poly(r) : sin_poly(r) / cos_poly(r));
    }
    case 1: case 2: case 3:
      if (which != 3 && a > 1.0) return ep_nanf();
      if (which == 2) { arg = __builtin_sqrt((1.0 - (double)x) / (1.0 + (double)x)); mul = 2.0; }   /* acos = 2 atan(...) */
      else arg = which == 1 ? a / __builtin_sqrt((1.0 - a) * (1.0 + a)) : a;
      return (float)(mul * atan_d(arg));
    case 4: case 5: {
      if (a > 90.0) return (float)((which == 4 ? s : 1.0) * inf);
      const double e = exp_d(a);
      return (float)(which == 4 ? s * 0.5 * (e - 1.0 / e) : 0.5 * (e + 1.0 / e));
    }
    default:
      if (which == 7 ? x < 1.0f : (which == 8 && a > 1.0)) return ep_nanf();
      if (a == inf || (which == 8 && a == 1.0)) return (float)(s * inf);
      if (which == 8) { arg = (1.0 + a) / (1.0 - a); mul = 0.5 * s; }
      else arg = a + __builtin_sqrt(a * a + (which == 6 ? 1.0 : -1.0));
      return (float)(mul * log_d(arg));
  }
}
