/* Host accuracy test of src/ep_math.c against libm (computed in double, so the reference is the
 * correctly rounded value in all but astronomically rare cases). Build (tests/test_math.py does it):
 *   cc -std=c11 -O2 -Iinclude -Isrc tests/test_math.c src/ep_math.c -lm -o test_math
 * Sweeps every float bit pattern with a stride (both signs, all exponents incl. subnormals), dense
 * ranges around the branch points, and the IEEE special cases; checks scalar and f32x4 forms.
 * Bounds: 2 ulp for the libm functions (exp, log, log1p, tanh, erf), 2.5 for the composite sigmoid,
 * 1 for sin/cos/pow (double inside), exact for rounding. Prints the worst error per function; exits 1 if any exceeds its bound or a special case is wrong. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ep_math.h"

static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

typedef float (*f1)(float);
typedef f32x4 (*v1)(f32x4);
typedef double (*ref1)(double);

static double sigmoid_d(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
static double floor_d(double x) { return floor(x); }
static double ceil_d(double x) { return ceil(x); }
static double rint_d(double x) { return nearbyint(x); }
static double fabs_d(double x) { return fabs(x); }
static double sqrt_d(double x) { return sqrt(x); }

/* Error of got vs exact ref in units of the float ulp at ref; -1 on a special-value mismatch. */
static double ulp_err(float got, double ref) {
  float rf = (float)ref;
  if (isnan(rf)) return isnan(got) ? 0.0 : -1.0;
  if (isinf(rf) || rf == 0.0f) {
    if (got == rf && signbit(got) == signbit(rf)) return 0.0;
    /* a result that rounds to inf/0 and is computed as the float neighbour is one ulp off */
    if (isinf(rf) && fabsf(got) == 3.40282347e38f && signbit(got) == signbit(rf)) return 1.0;
    if (rf == 0.0f && fabsf(got) == 1.4e-45f && signbit(got) == signbit(rf)) return 1.0;
    if (rf == 0.0f && got == 0.0f) return -1.0;   /* wrong sign of zero */
    return isnan(got) || isinf(got) ? -1.0 : fabs((double)got - ref) / 1.401298464324817e-45;
  }
  if (isnan(got) || isinf(got)) return -1.0;
  int e;
  frexp((double)rf, &e);
  double ulp = ldexp(1.0, (e - 24) < -149 ? -149 : e - 24);
  return fabs((double)got - ref) / ulp;
}

typedef struct { const char *name; f1 f; v1 v; ref1 ref; double bound; double worst; float worst_x; long bad; } check1;

static void one(check1 *c, float x) {
  double ref = c->ref((double)x);
  float got = c->f(x);
  double e = ulp_err(got, ref);
  if (e < 0 || e > c->bound) {
    if (c->bad < 5) printf("  %s(%a = %.9g) = %.9g, want %.9g (%s)\n", c->name, x, x, got, (float)ref, e < 0 ? "special" : "ulp");
    c->bad++;
  }
  if (e > c->worst) { c->worst = e; c->worst_x = x; }
  if (c->v) {
    float lanes[4] = {x, -x, x * 0.5f, 1.0f}, out[4];
    f32x4_store(out, c->v(f32x4_load(lanes)));
    for (int i = 0; i < 4; i++) {
      double r = c->ref((double)lanes[i]);
      double ev = ulp_err(out[i], r);
      if (ev < 0 || ev > c->bound) {
        if (c->bad < 5) printf("  %s4(%a) = %.9g, want %.9g\n", c->name, lanes[i], out[i], (float)r);
        c->bad++;
      }
      if (ev > c->worst) { c->worst = ev; c->worst_x = lanes[i]; }
    }
  }
}

static void sweep(check1 *c, uint32_t stride) {
  for (uint64_t u = 0; u <= 0xffffffffull; u += stride) one(c, bitsf((uint32_t)u));
  static const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 0.625f, -0.625f, 4.0f, -4.0f,
    88.72283172607421875f, 88.72283935546875f, 89.0f, -87.3f, -103.9f, -104.0f, -104.1f, -150.0f,
    1.17549435e-38f, 1.4e-45f, -1.4e-45f, 3.40282347e38f, -3.40282347e38f, 0.70710677f, 1.41421354f,
    1.5707964f, 3.14159274f, 6.28318548f, 1e10f, 8388608.0f, 8388607.5f, 2.5f, -2.5f, 1.5f, -1.5f};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) one(c, specials[i]);
  one(c, bitsf(0x7f800000u)); one(c, bitsf(0xff800000u)); one(c, bitsf(0x7fc00000u)); one(c, bitsf(0xffc00001u));
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 4096) one(c, x);   /* dense around the branch points */
  printf("%-8s worst %.3f ulp at %a (%.9g)%s\n", c->name, c->worst, c->worst_x, c->worst_x, c->bad ? "  FAIL" : "");
}

static float sigmoid_s(float x) { return ep_sigmoidf(x); }

/* pow against the double pow, over a grid of bases and exponents plus the C99 Annex F table. */
static long check_pow(void) {
  long bad = 0; double worst = 0;
  static const float sx[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 3.0f, -3.0f, 1e-40f, -1e-40f,
    3e38f, -3e38f, 1.0f / 0.0f, -1.0f / 0.0f, 0.0f / 0.0f, 0.9999999f, 1.0000001f, 10.0f, 1e-3f};
  static const float sy[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 0.5f, -0.5f, 1.5f, 1e9f,
    -1e9f, 16777217.0f, 1.0f / 0.0f, -1.0f / 0.0f, 0.0f / 0.0f, 127.9f, -149.5f, 33.0f, 1e-8f};
  for (size_t i = 0; i < sizeof sx / sizeof *sx; i++)
    for (size_t j = 0; j < sizeof sy / sizeof *sy; j++) {
      float x = sx[i], y = sy[j], got = ep_powf(x, y);
      double ref = pow((double)x, (double)y);
      double e = ulp_err(got, ref);
      if (e < 0 || e > 1.0) { if (bad < 10) printf("  pow(%g, %g) = %g, want %g\n", x, y, got, (float)ref); bad++; }
    }
  uint32_t seed = 12345;
  for (long k = 0; k < 4000000; k++) {
    seed = seed * 1664525u + 1013904223u; uint32_t a = seed;
    seed = seed * 1664525u + 1013904223u; uint32_t b = seed;
    float x = bitsf(a & 0x7fffffffu);
    float y = bitsf((b & 0x807fffffu) | ((0x70u + (b >> 27)) << 23));   /* |y| in about [2^-15, 2^16] */
    if (k & 1) x = bitsf((a & 0x007fffffu) | (((a >> 23) % 8 + 123) << 23));    /* bases near 1 */
    if (k % 7 == 0) { y = (float)(int32_t)((b >> 8) % 64) - 32.0f; x = bitsf(a); }   /* integer exponents, any sign */
    float got = ep_powf(x, y);
    double ref = pow((double)x, (double)y);
    double e = ulp_err(got, ref);
    if (e < 0 || e > 1.0) { if (bad < 10) printf("  pow(%a, %a) = %a, want %a\n", x, y, got, (float)ref); bad++; }
    if (e > worst) worst = e;
  }
  printf("%-8s worst %.3f ulp%s\n", "pow", worst, bad ? "  FAIL" : "");
  return bad;
}

int main(int argc, char **argv) {
  uint32_t stride = argc > 1 ? (uint32_t)atoi(argv[1]) : 1021;
  check1 checks[] = {
    {"exp", ep_expf, ep_expf4, exp, 2.0, 0, 0, 0},
    {"log", ep_logf, ep_logf4, log, 2.0, 0, 0, 0},
    {"log1p", ep_log1pf, 0, log1p, 2.0, 0, 0, 0},
    {"tanh", ep_tanhf, ep_tanhf4, tanh, 2.0, 0, 0, 0},
    {"erf", ep_erff, ep_erff4, erf, 2.0, 0, 0, 0},
    {"sigmoid", sigmoid_s, ep_sigmoidf4, sigmoid_d, 2.5, 0, 0, 0},
    {"sin", ep_sinf, 0, sin, 1.0, 0, 0, 0},
    {"cos", ep_cosf, 0, cos, 1.0, 0, 0, 0},
    {"floor", ep_floorf, f32x4_floor, floor_d, 0.0, 0, 0, 0},
    {"ceil", ep_ceilf, f32x4_ceil, ceil_d, 0.0, 0, 0, 0},
    {"round", ep_roundf_even, f32x4_round_even, rint_d, 0.0, 0, 0, 0},
    {"fabs", ep_fabsf, f32x4_abs, fabs_d, 0.0, 0, 0, 0},
    {"sqrt", ep_sqrtf, f32x4_sqrt, sqrt_d, 0.5, 0, 0, 0},
  };
  long bad = 0;
  for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) { sweep(&checks[i], stride); bad += checks[i].bad; }
  bad += check_pow();
  printf(bad ? "FAILED: %ld bad values\n" : "ok\n", bad);
  return bad ? 1 : 0;
}
