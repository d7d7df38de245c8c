/* Thread pool of the threaded builds (see ep_parallel.h): the threaded wasm build (EP_THREADS) and the edge
 * builds (EP_THREADS_NATIVE: aarch64 and the x86-64 test builds, Linux). Other builds compile nothing here.
 *
 * Shared state lives in memory every thread sees (wasm: a shared linear memory, every instance sees the same
 * globals; native: the process). A job is published in one of two slots, chosen by its generation's
 * parity, then `ctr` = generation << 32 | next task index is set. A thread claims task i by a
 * compare-exchange of ctr from (gen, i) to (gen, i + 1): it fails once a newer job is published, so a
 * late worker can never run a task of one job with another job's function. A slot is rewritten only two
 * generations later, i.e. after every task of its job has finished (the caller waits for `done`).
 * Idle workers spin briefly, then sleep on `wake` (wasm: memory.atomic.wait32; native: a futex, raw system call,
 * so the Android library still links no libc). While a run is in flight (ep_pool_hot from ep_run) they poll for up
 * to RUN_SPINS between jobs instead: a worker put to sleep at every job is woken by the next one, and the scheduler
 * may place it on the caller's CPU, where the two take turns (docs/benchmarks.md, "Session 17 (helper thr5)"). If
 * such a poll runs out (the caller lost its core, or a long serial stretch), the worker polls briefly for the rest
 * of that run. ep_run wakes sleeping workers at its start. With ep_set_spin(1) (the host's choice) they spin for the
 * whole of a run, unbounded by RUN_SPINS (docs/benchmarks.md, "Session 16 (helper par4)"). The caller notifies only
 * when a worker sleeps (a notify is a call into the engine) and never waits on an atomic (a browser's main
 * thread may not): it runs tasks and spins on `done`. Same tasks, same split, same sums in the same order
 * on every build: outputs do not depend on the thread count. */
#include "ep_parallel.h"

#if defined(EP_THREADS)
#if !defined(__wasm__) || !defined(__wasm_atomics__)
#error "EP_THREADS needs a wasm32 target with -matomics"
#endif
#define WAIT(p, v) __builtin_wasm_memory_atomic_wait32((p), (v), -1)
#define NOTIFY(p) __builtin_wasm_memory_atomic_notify((p), EP_MAX_THREADS)
#define EXPORT(name) __attribute__((export_name(#name)))
#elif defined(EP_THREADS_NATIVE)
#if !defined(__linux__) || !(defined(__aarch64__) || defined(__x86_64__))
#error "EP_THREADS_NATIVE is written for Linux on aarch64 or x86-64 (raw futex system calls)"
#endif
/* futex(2) without libc: the Android library links none (edge/README.md). Private futexes: one process. */
#define FUTEX_WAIT_PRIVATE_ 128
#define FUTEX_WAKE_PRIVATE_ 129
static long futex3(int32_t *addr, long op, long val) {
#if defined(__aarch64__)
  register long x8 __asm__("x8") = 98;   /* __NR_futex */
  register long x0 __asm__("x0") = (long)addr;
  register long x1 __asm__("x1") = op;
  register long x2 __asm__("x2") = val;
  register long x3 __asm__("x3") = 0;    /* no timeout */
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
#else
  long r;
  register long r10 __asm__("r10") = 0;
  __asm__ volatile("syscall" : "=a"(r) : "0"(202L /* __NR_futex */), "D"(addr), "S"(op), "d"(val), "r"(r10)
                   : "rcx", "r11", "memory");
  return r;
#endif
}
#define WAIT(p, v) futex3((p), FUTEX_WAIT_PRIVATE_, (v))
#define NOTIFY(p) futex3((p), FUTEX_WAKE_PRIVATE_, EP_MAX_THREADS)
#define EXPORT(name)
#endif

#if defined(EP_THREADS) || defined(EP_THREADS_NATIVE)

/* Cache lines: what spinning workers poll (wake, hot), the task counter every thread updates per task, and each
 * job slot live on lines of their own, so that no thread's stores invalidate a line another polls in a loop. */
#define LINE __attribute__((aligned(64)))
typedef struct {
  ep_task_fn fn;
  void *ctx;
  uint32_t n_tasks, max_threads;
  uint32_t done;          /* tasks finished (atomic) */
} LINE job_slot;

static job_slot g_jobs[2];
static LINE uint64_t g_ctr;     /* generation << 32 | next unclaimed task (atomic) */
static LINE int32_t g_wake;     /* generation of the latest job, futex word of sleeping workers */
static uint32_t g_hot;          /* runs in flight (ep_pool_hot) */
static uint32_t g_runs;         /* runs started (ep_pool_hot) */
static uint32_t g_spin;         /* set by the host (ep_set_spin): workers spin while a run is in flight */
static uint32_t g_threads = 1;  /* caller + running workers, set by the host */
static uint32_t g_quit;
static LINE uint32_t g_busy;    /* a job is in flight: nested parallel_for runs serially */
static uint32_t g_sleepers;     /* workers in WAIT or about to be: the caller notifies only then */
static uint32_t g_tasks_run[EP_MAX_THREADS];   /* per thread, for tests: did the workers take part? */
#if defined(EP_THREADS_NATIVE)
static uint32_t g_running[EP_MAX_THREADS];     /* a worker is in ep_worker_main with this index: a second one returns */
#endif

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#ifndef SPINS
#define SPINS 60000u            /* brief polling, then sleep (poll_wake: TurboFan); a spinning worker slows the caller (docs/benchmarks.md, sessions 16-18) */
#endif
#ifndef HOT_SPINS
#define HOT_SPINS (1u << 25)    /* spin mode: bounded, so a run cut short by a trap cannot keep a core */
#endif
#ifndef RUN_SPINS
#define RUN_SPINS (1u << 19)    /* between the jobs of a run: covers a caller's last task and the serial gaps of small nets */
#endif
#define CHUNK 4096u             /* polls per poll_wake call: the run's end and the thread count are checked between */

/* Diagnostic counters (bench/pool_stats.mjs), in a build with -DEP_POOL_STATS only: jobs, jobs a worker took a task
 * of, notifies, worker sleeps, worker arrivals with no task left, RUN_SPINS polls that ran out. */
#ifdef EP_POOL_STATS
static uint32_t g_stats[6];
#define STAT(k) __atomic_fetch_add(&g_stats[k], 1u, __ATOMIC_RELAXED)
EXPORT(ep_pool_stats) uint32_t ep_pool_stats(uint32_t k) { return k < 6 ? LOAD(&g_stats[k]) : 0u; }
#else
#define STAT(k) ((void)0)
#endif

uint32_t ep_num_threads(void) { return LOAD(&g_threads); }

/* Claim and run tasks of generation gen until none are left (or a newer job replaced it). */
static void run_tasks(uint32_t gen, uint32_t thread) {
  job_slot *j = &g_jobs[gen & 1u];
  uint32_t ran = 0;
  for (;;) {
    uint64_t c = LOAD(&g_ctr);
    if ((uint32_t)(c >> 32) != gen) break;
    /* Read after c: if the CAS below succeeds, ctr held gen throughout, so the slot was not rewritten. */
    const uint32_t i = (uint32_t)c, n = LOAD(&j->n_tasks), mt = LOAD(&j->max_threads);
    if (i >= n || thread >= mt) break;
    if (!__atomic_compare_exchange_n(&g_ctr, &c, c + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) continue;
    j->fn(j->ctx, i, thread);
    ran++;
  }
  /* Counted once per thread and job, not per task (fewer stores to a shared line). The slot stays gen's: its
   * caller waits for these tasks before it can publish the job that rewrites it. */
  if (thread) STAT(ran ? 1 : 4);
  if (ran) {
    g_tasks_run[thread] += ran;
    __atomic_fetch_add(&j->done, ran, __ATOMIC_SEQ_CST);
  }
}

void ep_parallel_for(uint32_t n_tasks, uint32_t max_threads, ep_task_fn fn, void *ctx) {
  uint32_t t = LOAD(&g_threads);
  if (max_threads < t) t = max_threads;
#if defined(EP_THREADS_NATIVE)
  /* Several host threads may run sessions at once: one owns the pool (compare-exchange), the others run serially. */
  uint32_t idle = 0u;
  if (t <= 1 || n_tasks <= 1 || !__atomic_compare_exchange_n(&g_busy, &idle, 1u, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    for (uint32_t i = 0; i < n_tasks; i++) fn(ctx, i, 0);
    return;
  }
#else
  if (t <= 1 || n_tasks <= 1 || LOAD(&g_busy)) {
    for (uint32_t i = 0; i < n_tasks; i++) fn(ctx, i, 0);
    return;
  }
  STORE(&g_busy, 1u);
#endif
  const uint32_t gen = (uint32_t)(LOAD(&g_ctr) >> 32) + 1u;
  job_slot *j = &g_jobs[gen & 1u];
  j->fn = fn;
  j->ctx = ctx;
  STORE(&j->n_tasks, n_tasks);
  STORE(&j->max_threads, t);
  STORE(&j->done, 0u);
  STORE(&g_ctr, (uint64_t)gen << 32);
  STORE(&g_wake, (int32_t)gen);
  STAT(0);
  if (LOAD(&g_sleepers)) { STAT(2); NOTIFY(&g_wake); }   /* after the store: a worker counted later sees the new gen in WAIT */
  run_tasks(gen, 0);
  while (LOAD(&j->done) != n_tasks) {}
  STORE(&g_busy, 0u);
}

typedef struct {
  ep_range_fn fn;
  void *ctx;
  uint64_t n, units;   /* units of `align` elements, split near-equally into the tasks */
  uint32_t align, parts;
} range_job;

static void range_task(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const range_job *r = (const range_job *)ctx;
  const uint64_t u0 = r->units * task / r->parts, u1 = r->units * (task + 1u) / r->parts;
  const uint64_t b = u0 * r->align, e = u1 * r->align < r->n ? u1 * r->align : r->n;
  if (b < e) r->fn(r->ctx, b, e);
}

void ep_parallel_range(uint64_t n, uint64_t grain, uint32_t align, ep_range_fn fn, void *ctx) {
  const uint32_t t = ep_num_threads();
  const uint64_t units = (n + align - 1) / (align ? align : 1u);
  /* two ranges per thread: some balancing when a thread is slowed, few hand-outs (these kernels stream memory) */
  uint64_t parts = grain ? n / grain : n;
  if (parts > 2u * t) parts = 2u * t;
  if (parts > units) parts = units;
  if (t <= 1 || parts <= 1) {
    fn(ctx, 0, n);
    return;
  }
  range_job r = {fn, ctx, n, units, align ? align : 1u, (uint32_t)parts};
  ep_parallel_for(r.parts, EP_MAX_THREADS, range_task, &r);
}

/* ---- the host's interface (web/src/threads.js; edge: ep_edge.h) ---- */
#if defined(EP_THREADS)
#define WORKER_STACK (64u * 1024u)
static uint8_t g_stacks[EP_MAX_THREADS][WORKER_STACK] __attribute__((aligned(16)));

/* Top of worker `index`'s stack (the host sets the worker instance's __stack_pointer to it first). */
EXPORT(ep_worker_stack_top) uint32_t ep_worker_stack_top(uint32_t index) {
  return index < EP_MAX_THREADS ? (uint32_t)(uintptr_t)(g_stacks[index] + WORKER_STACK) : 0u;
}
#endif

/* Polls `wake` up to `spins` times while it holds `seen`; returns its last value. A function of its own, entered
 * afresh: V8 compiles a wasm function with TurboFan for its later calls only (no on-stack replacement), so a loop
 * inside ep_worker_main, which never returns, would poll in Liftoff, slower per poll, for the worker's life. */
__attribute__((noinline)) static int32_t poll_wake(int32_t seen, uint32_t spins) {
  int32_t g = LOAD(&g_wake);
  for (uint32_t s = 0; g == seen && s < spins; s++) g = LOAD(&g_wake);
  return g;
}

/* A worker's life: wait for jobs, run their tasks, return when ep_threads_stop() is called. */
EXPORT(ep_worker_main) void ep_worker_main(uint32_t index) {
  if (index == 0 || index >= EP_MAX_THREADS) return;
#if defined(EP_THREADS_NATIVE)
  uint32_t free_ = 0u;   /* one worker per index: two would share a scratch slice */
  if (!__atomic_compare_exchange_n(&g_running[index], &free_, 1u, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return;
#endif
  int32_t seen = LOAD(&g_wake);
  uint32_t cold_run = ~0u;   /* the run in which a RUN_SPINS poll ran out: brief polls until it ends */
  while (!LOAD(&g_quit)) {
    int32_t g = poll_wake(seen, SPINS);
    /* in a run this worker takes part in (index < threads): keep polling, in chunks, while the run lasts */
    const uint32_t spin = LOAD(&g_spin), chunks = (spin ? HOT_SPINS : RUN_SPINS) / CHUNK;
    uint32_t k = 0;
    for (; g == seen && k < chunks && LOAD(&g_hot) && index < LOAD(&g_threads) && (spin || LOAD(&g_runs) != cold_run); k++)
      g = poll_wake(seen, CHUNK);
    if (k == chunks && g == seen) { cold_run = LOAD(&g_runs); STAT(5); }
    if (g == seen) {
      __atomic_fetch_add(&g_sleepers, 1u, __ATOMIC_SEQ_CST);
      STAT(3);
      WAIT(&g_wake, seen);
      __atomic_fetch_sub(&g_sleepers, 1u, __ATOMIC_SEQ_CST);
      continue;
    }
    seen = g;
    run_tasks((uint32_t)g, index);
  }
#if defined(EP_THREADS_NATIVE)
  STORE(&g_running[index], 0u);
#endif
}

void ep_pool_hot(uint32_t on) {
  if (!on) {
    __atomic_fetch_sub(&g_hot, 1u, __ATOMIC_SEQ_CST);
    return;
  }
  /* The first run to start wakes sleeping workers (a notify ends WAIT) if any takes part: they poll until its first
   * job, their wake-up overlapping its first nodes, not the first split one's. */
  __atomic_fetch_add(&g_runs, 1u, __ATOMIC_SEQ_CST);
  if (__atomic_fetch_add(&g_hot, 1u, __ATOMIC_SEQ_CST) == 0u && LOAD(&g_threads) > 1u && LOAD(&g_sleepers)) NOTIFY(&g_wake);
}

/* 1: workers spin for the whole of each run; 0 (the default): in a run they sleep when no job comes within RUN_SPINS
 * polls, between runs within SPINS. */
EXPORT(ep_set_spin) void ep_set_spin(uint32_t on) { STORE(&g_spin, on ? 1u : 0u); }

/* Threads taking part from now on: the caller + workers already in ep_worker_main (1..EP_MAX_THREADS). */
EXPORT(ep_set_threads) uint32_t ep_set_threads(uint32_t n) {
  n = n < 1 ? 1 : n > EP_MAX_THREADS ? EP_MAX_THREADS : n;
  STORE(&g_threads, n);
  return n;
}

/* Tasks thread `index` has run so far (0 = the caller). */
EXPORT(ep_thread_tasks) uint32_t ep_thread_tasks(uint32_t index) {
  return index < EP_MAX_THREADS ? LOAD(&g_tasks_run[index]) : 0u;
}

/* Make every worker return from ep_worker_main; only the caller's thread runs tasks afterwards. */
EXPORT(ep_threads_stop) void ep_threads_stop(void) {
  STORE(&g_threads, 1u);
  STORE(&g_quit, 1u);
  __atomic_fetch_add(&g_wake, 1, __ATOMIC_SEQ_CST);
  NOTIFY(&g_wake);
}
#endif
