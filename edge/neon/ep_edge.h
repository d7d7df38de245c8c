/* Edge-only additions to the C API (libedgepack.so for pi5 and android exports these too). */
#ifndef EP_EDGE_H
#define EP_EDGE_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define EP_CPU_DOTPROD 1u   /* SDOT/UDOT (FEAT_DotProd, HWCAP_ASIMDDP) */
#define EP_CPU_FP16    2u   /* half-precision arithmetic (HWCAP_ASIMDHP) */
#define EP_CPU_I8MM    4u   /* SMMLA (HWCAP2_I8MM) */
/* CPU features of this process, read from /proc/self/auxv with raw system calls (no libc, so the
 * Android library stays independent of bionic/glibc; getauxval() would need a libc). 0 when
 * unreadable (then only baseline armv8-a code runs) and on non-aarch64 builds. */
uint32_t ep_edge_cpu_features(void);
/* sum(a[i] * b[i]) over n int8 pairs, exact in int32 for n < 2^17. Uses SDOT when
 * (features & EP_CPU_DOTPROD), else widening multiplies. Pass ep_edge_cpu_features() (or a host-provided
 * mask). */
int32_t ep_edge_dot_i8(const int8_t *a, const int8_t *b, uint32_t n, uint32_t features);
/* Which f32 GEMM micro-kernel this build runs ("neon-6x16-fmla" or "portable-6x8"). */
const char *ep_edge_gemm_name(void);
/* Which int8 GEMM (ep_qgemm) runs in this process: "neon-sdot-8x8" (pi5 always; android when the CPU has
 * the dot product, checked once through ep_edge_cpu_features) or "portable-4x8" (widening multiplies). */
const char *ep_edge_qgemm_name(void);
#ifdef __cplusplus
}
#endif
#endif
