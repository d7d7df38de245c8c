/* Parallel-for of the kernel core. Internal header.
 *
 * ep_parallel_for(n_tasks, max_threads, fn, ctx) calls fn(ctx, task, thread) once for every task in
 * [0, n_tasks) and returns when all have finished. `thread` is in [0, min(max_threads, ep_num_threads())):
 * a task may use the scratch slice of that index (kernels size their per-thread slices from the node's
 * scratch_bytes, so a plan stays valid for any thread count). Tasks must write disjoint outputs.
 *
 * Single-threaded builds run the tasks in order on the caller: ep_num_threads() is 1. Threaded builds:
 * edgepack-threads*.wasm (EP_THREADS: workers are wasm instances the host starts) and the edge builds
 * (EP_THREADS_NATIVE, edge/Makefile: workers are OS threads, started by ep_edge_set_threads in
 * edge/neon/ep_threads.c or by the host, e.g. Java threads through JNI). In both the caller publishes
 * the job, runs tasks itself and spins until the workers (ep_worker_main in parallel.c) have finished
 * theirs; a parallel_for issued from inside a task (or while another thread's job is in flight) runs
 * serially. */
#ifndef EP_PARALLEL_H
#define EP_PARALLEL_H
#include <stdint.h>

typedef void (*ep_task_fn)(void *ctx, uint32_t task, uint32_t thread);

#if defined(EP_THREADS) || defined(EP_THREADS_NATIVE)
#define EP_PARALLEL 1   /* a build with threads: code that only splits work compiles away where it is 0 */
#define EP_MAX_THREADS 16
uint32_t ep_num_threads(void);
void ep_parallel_for(uint32_t n_tasks, uint32_t max_threads, ep_task_fn fn, void *ctx);
/* A run starts (1) / ends (0), from ep_run: in between, idle workers poll for the next job (bounded; with
 * ep_set_spin(1) for the whole run) instead of sleeping (runs may overlap: counted). */
void ep_pool_hot(uint32_t on);
/* The pool's host interface (wasm: exports; edge: ep_edge.h). */
void ep_worker_main(uint32_t index);
uint32_t ep_set_threads(uint32_t n);
void ep_set_spin(uint32_t on);
uint32_t ep_thread_tasks(uint32_t index);
void ep_threads_stop(void);
#else
#define EP_PARALLEL 0
#define EP_MAX_THREADS 1
static inline uint32_t ep_num_threads(void) { return 1; }
static inline void ep_parallel_for(uint32_t n_tasks, uint32_t max_threads, ep_task_fn fn, void *ctx) {
  (void)max_threads;
  for (uint32_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
}
static inline void ep_pool_hot(uint32_t on) { (void)on; }
#endif

/* Split [0, n) into `parts` near-equal chunks; chunk i is [ep_chunk(n, parts, i), ep_chunk(n, parts, i + 1)). */
static inline uint32_t ep_chunk(uint32_t n, uint32_t parts, uint32_t i) {
  return (uint32_t)((uint64_t)n * i / parts);
}

/* fn(ctx, begin, end) over disjoint ranges covering [0, n): for kernels whose elements (or rows) are independent.
 * Range bounds are multiples of `align` (but the last end, n); ranges hold at least `grain` elements, so small
 * tensors run in one call on the caller. Single-threaded builds: one call, fn(ctx, 0, n). */
typedef void (*ep_range_fn)(void *ctx, uint64_t begin, uint64_t end);
#if defined(EP_THREADS) || defined(EP_THREADS_NATIVE)
void ep_parallel_range(uint64_t n, uint64_t grain, uint32_t align, ep_range_fn fn, void *ctx);
#else
static inline void ep_parallel_range(uint64_t n, uint64_t grain, uint32_t align, ep_range_fn fn, void *ctx) {
  (void)grain; (void)align;
  fn(ctx, 0, n);
}
#endif
#endif
