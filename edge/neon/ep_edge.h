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

/* ---- Threads: the plan on N threads (the partitioning of the threaded wasm build, docs/threads.md) ----
 * One pool per process: worker threads 1..N-1 sleep (futex) between jobs; the thread calling ep_run is
 * thread 0 and runs tasks too. Outputs are the same bits for every thread count (tasks keep their sums'
 * order). Sessions on several host threads at once are fine: one uses the pool, the others run serially. */
#define EP_EDGE_MAX_THREADS 16u
/* pi5 library, edgepack-run (static) and the x86-64 test builds: start pthreads up to n - 1 workers (once;
 * they live until the process exits) and run from now on with n threads (clamped to [1, 16]). Returns the
 * count in effect (less than n only when pthread_create failed). Not in the Android library, which links
 * no libc: there the host starts the workers (org.edgepack.Session does, with Java threads) and calls
 * ep_set_threads. */
uint32_t ep_edge_set_threads(uint32_t n);
/* The pool's raw interface (as the threaded wasm build exports it): a worker thread's body, for index in
 * [1, 16) (returns at once for a bad or already running index; otherwise never, until ep_threads_stop);
 * the thread count from now on (clamped to [1, 16], returned); tasks thread `index` has run so far
 * (0 = the callers of ep_run); ep_threads_stop makes every worker return (for good: call it at exit). */
void ep_worker_main(uint32_t index);
uint32_t ep_set_threads(uint32_t n);
uint32_t ep_thread_tasks(uint32_t index);
void ep_threads_stop(void);
#ifdef __cplusplus
}
#endif
#endif
