/* CPU feature detection without libc, and the int8 dot-product dispatch point. See ep_edge.h.
 * Why not getauxval(AT_HWCAP): that is a libc function; the Android library links no libc at all
 * (readelf -d shows no NEEDED entry), so it reads /proc/self/auxv through openat/read/close system
 * calls itself. The kernel writes that file for every process; Android apps may read their own. */
#include "ep_edge.h"
#include "vec/ep_isa.h"   /* EP_ISA_GEMM_F32, EP_ISA_QGEMM: which micro-kernels this build links */

#if defined(__aarch64__)
#include <arm_neon.h>

static long sys4(long nr, long a, long b, long c, long d) {
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
}
#define SYS_openat 56
#define SYS_close 57
#define SYS_read 63
#define AT_FDCWD_ (-100)
#define AT_HWCAP_ 16
#define AT_HWCAP2_ 26
#define HWCAP_ASIMDHP_ (1ul << 10)
#define HWCAP_ASIMDDP_ (1ul << 20)
#define HWCAP2_I8MM_ (1ul << 13)

uint32_t ep_edge_cpu_features(void) {
  static const char path[] = "/proc/self/auxv";
  long fd = sys4(SYS_openat, AT_FDCWD_, (long)path, 0 /* O_RDONLY */, 0);
  if (fd < 0) return 0;
  uint64_t buf[64];  /* (type, value) pairs; auxv has ~20-40 entries */
  uint64_t hwcap = 0, hwcap2 = 0;
  uint32_t have = 0;  /* bytes in buf */
  int done = 0;
  while (!done) {
    long r = sys4(SYS_read, fd, (long)((uint8_t *)buf + have), (long)(sizeof buf - have), 0);
    if (r <= 0) break;
    have += (uint32_t)r;
    uint32_t pairs = have / 16;
    for (uint32_t i = 0; i < pairs; i++) {
      if (buf[2 * i] == 0) { done = 1; break; }  /* AT_NULL */
      if (buf[2 * i] == AT_HWCAP_) hwcap = buf[2 * i + 1];
      if (buf[2 * i] == AT_HWCAP2_) hwcap2 = buf[2 * i + 1];
    }
    /* keep a trailing partial pair */
    uint32_t rest = have - pairs * 16;
    uint8_t *b8 = (uint8_t *)buf;
    for (uint32_t i = 0; i < rest; i++) b8[i] = b8[pairs * 16 + i];
    have = rest;
  }
  sys4(SYS_close, fd, 0, 0, 0);
  uint32_t f = 0;
  if (hwcap & HWCAP_ASIMDDP_) f |= EP_CPU_DOTPROD;
  if (hwcap & HWCAP_ASIMDHP_) f |= EP_CPU_FP16;
  if (hwcap2 & HWCAP2_I8MM_) f |= EP_CPU_I8MM;
  return f;
}

/* SDOT path: compiled for armv8.2-a+dotprod whatever the library's baseline; only called when the
 * CPU reports the feature. */
__attribute__((target("arch=armv8.2-a+dotprod")))
static int32_t dot_i8_sdot(const int8_t *a, const int8_t *b, uint32_t n) {
  int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
  uint32_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = vdotq_s32(acc0, vld1q_s8(a + i), vld1q_s8(b + i));
    acc1 = vdotq_s32(acc1, vld1q_s8(a + i + 16), vld1q_s8(b + i + 16));
  }
  for (; i + 16 <= n; i += 16) acc0 = vdotq_s32(acc0, vld1q_s8(a + i), vld1q_s8(b + i));
  int32_t s = vaddvq_s32(vaddq_s32(acc0, acc1));
  for (; i < n; i++) s += (int32_t)a[i] * b[i];
  return s;
}

static int32_t dot_i8_base(const int8_t *a, const int8_t *b, uint32_t n) {
  int32x4_t acc = vdupq_n_s32(0);
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const int8x16_t x = vld1q_s8(a + i), y = vld1q_s8(b + i);
    const int16x8_t lo = vmull_s8(vget_low_s8(x), vget_low_s8(y));
    const int16x8_t hi = vmull_high_s8(x, y);
    acc = vpadalq_s16(acc, lo);
    acc = vpadalq_s16(acc, hi);
  }
  int32_t s = vaddvq_s32(acc);
  for (; i < n; i++) s += (int32_t)a[i] * b[i];
  return s;
}

int32_t ep_edge_dot_i8(const int8_t *a, const int8_t *b, uint32_t n, uint32_t features) {
  return (features & EP_CPU_DOTPROD) ? dot_i8_sdot(a, b, n) : dot_i8_base(a, b, n);
}
#else
uint32_t ep_edge_cpu_features(void) { return 0; }
int32_t ep_edge_dot_i8(const int8_t *a, const int8_t *b, uint32_t n, uint32_t features) {
  (void)features;
  int32_t s = 0;
  for (uint32_t i = 0; i < n; i++) s += (int32_t)a[i] * b[i];
  return s;
}
#endif

const char *ep_edge_gemm_name(void) {
#if EP_ISA_GEMM_F32
  return "neon-6x16-fmla";
#else
  return "portable";
#endif
}

#if !EP_ISA_QGEMM  /* else neon/qgemm_i8_neon.c says which path its dispatch takes */
const char *ep_edge_qgemm_name(void) { return "portable-4x8"; }
#endif
