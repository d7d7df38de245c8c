/* A small coverage-guided fuzzer for the aarch64 (NEON) build of the core, run under qemu-aarch64: libFuzzer has
 * no aarch64 runtime on this toolchain, so this driver stands in for it around the same harness,
 * wasm_kernels/fuzz/fuzz_plan.c (LLVMFuzzerTestOneInput), built with gcc's ASan + UBSan and
 * -fsanitize-coverage=trace-pc on the core only.
 *
 *   fuzz_plan_neon [-seconds N] [-seed S] [-timeout T] [-out DIR] CORPUS_DIR...
 *
 * Every file of the corpus directories is run once (the replay: plans libFuzzer's x86 runs found interesting
 * exercise the NEON kernels' paths too), then mutations of corpus entries (bit and byte flips, interesting
 * 8/16/32-bit values, copies within an entry, splices of two) run until N seconds have passed; an input that
 * reaches a new code block joins the corpus. A sanitizer report, a crash or a run over T seconds writes the input
 * to OUT/crash-<n> (or timeout-<n>) and exits non-zero; the end prints "runs: R corpus: C blocks: B". */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void __sanitizer_set_death_callback(void (*cb)(void));

#define MAP_BITS 16
#define MAX_INPUT (1u << 20)
#define MAX_CORPUS 8192u

static uint8_t cov[1u << MAP_BITS], seen[1u << MAP_BITS];

/* gcc -fsanitize-coverage=trace-pc: called at every basic block of the instrumented (core) files */
void __sanitizer_cov_trace_pc(void) {
  const uintptr_t pc = (uintptr_t)__builtin_return_address(0);
  cov[(pc ^ (pc >> MAP_BITS)) & ((1u << MAP_BITS) - 1)] = 1;
}

typedef struct { uint8_t *p; size_t n; } entry;
static entry corpus[MAX_CORPUS];
static uint32_t ncorpus;
static const uint8_t *cur;
static size_t cur_n;
static const char *out_dir = ".";
static uint64_t rng;

static uint64_t next(void) {   /* xorshift64* */
  rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1DULL;
}

static void save(const char *kind) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s-neon-%ld", out_dir, kind, (long)getpid());
  FILE *f = fopen(path, "wb");
  if (f) { fwrite(cur, 1, cur_n, f); fclose(f); }
  fprintf(stderr, "fuzz_plan_neon: %s input written to %s (%zu bytes)\n", kind, path, cur_n);
}
static void on_death(void) { save("crash"); }
static void on_signal(int sig) {
  save(sig == SIGALRM ? "timeout" : "crash");
  _exit(sig == SIGALRM ? 3 : 2);
}

/* Run one input; 1 when it reached a block no earlier input reached. */
static int run(const uint8_t *p, size_t n, unsigned timeout) {
  cur = p; cur_n = n;
  memset(cov, 0, sizeof cov);
  alarm(timeout);
  LLVMFuzzerTestOneInput(p, n);
  alarm(0);
  int fresh = 0;
  for (size_t i = 0; i < sizeof cov; i++)
    if (cov[i] && !seen[i]) { seen[i] = 1; fresh = 1; }
  return fresh;
}

static void add(const uint8_t *p, size_t n) {
  if (ncorpus >= MAX_CORPUS) return;
  uint8_t *c = malloc(n ? n : 1);
  if (!c) return;
  memcpy(c, p, n);
  corpus[ncorpus++] = (entry){c, n};
}

static size_t mutate(uint8_t *b, size_t n, size_t cap) {
  static const uint32_t interesting[] = {0, 1, 2, 3, 4, 7, 8, 16, 32, 64, 127, 128, 255, 256, 1024, 4096, 65535,
                                         65536, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xfffffffeu};
  const uint32_t k = 1u + (uint32_t)(next() % 6u);
  for (uint32_t m = 0; m < k && n; m++) {
    const size_t at = (size_t)(next() % n);
    switch (next() % 7u) {
      case 0: b[at] ^= (uint8_t)(1u << (next() % 8u)); break;
      case 1: b[at] = (uint8_t)next(); break;
      case 2: b[at] = (uint8_t)(b[at] + 1u - 2u * (uint8_t)(next() & 1u)); break;
      case 3: if (at + 4 <= n) { const uint32_t v = interesting[next() % (sizeof interesting / 4)]; memcpy(b + at, &v, 4); } break;
      case 4: if (at + 2 <= n) { const uint16_t v = (uint16_t)interesting[next() % (sizeof interesting / 4)]; memcpy(b + at, &v, 2); } break;
      case 5: {   /* copy a run of bytes within the input */
        const size_t from = (size_t)(next() % n), len = 1u + (size_t)(next() % 32u);
        if (from + len <= n && at + len <= n) memmove(b + at, b + from, len);
        break;
      }
      default: {  /* splice: the tail of another entry from here on */
        const entry *o = &corpus[next() % ncorpus];
        if (at < o->n) { size_t len = o->n - at; if (at + len > cap) len = cap - at; memcpy(b + at, o->p + at, len); n = at + len; }
        break;
      }
    }
  }
  return n;
}

int main(int argc, char **argv) {
  double seconds = 60;
  unsigned timeout = 10;
  rng = 0x9E3779B97F4A7C15ULL;
  int first_dir = argc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "-seed") && i + 1 < argc) rng = strtoull(argv[++i], NULL, 10) | 1u;
    else if (!strcmp(argv[i], "-timeout") && i + 1 < argc) timeout = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "-out") && i + 1 < argc) out_dir = argv[++i];
    else { first_dir = i; break; }
  }
  __sanitizer_set_death_callback(on_death);
  signal(SIGALRM, on_signal);
  signal(SIGSEGV, on_signal);
  signal(SIGBUS, on_signal);
  signal(SIGFPE, on_signal);
  signal(SIGILL, on_signal);
  signal(SIGABRT, on_signal);   /* sanitizer reports with abort_on_error=1 (UBSan's own runtime has no death callback) */
  uint8_t *buf = malloc(MAX_INPUT);
  if (!buf) return 1;
  unsigned long runs = 0, replayed = 0;
  for (int d = first_dir; d < argc; d++) {
    DIR *dir = opendir(argv[d]);
    if (!dir) { fprintf(stderr, "fuzz_plan_neon: cannot open %s\n", argv[d]); return 1; }
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[d], e->d_name);
      FILE *f = fopen(path, "rb");
      if (!f) continue;
      const size_t n = fread(buf, 1, MAX_INPUT, f);
      fclose(f);
      if (run(buf, n, timeout) || ncorpus < 64) add(buf, n);
      runs++; replayed++;
    }
    closedir(dir);
  }
  if (!ncorpus) { fprintf(stderr, "fuzz_plan_neon: empty corpus\n"); return 1; }
  size_t blocks = 0;
  for (size_t i = 0; i < sizeof seen; i++) blocks += seen[i];
  fprintf(stderr, "replayed %lu inputs: corpus %u, blocks %zu\n", replayed, ncorpus, blocks);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >= seconds) break;
    const entry *src = &corpus[next() % ncorpus];
    memcpy(buf, src->p, src->n);
    const size_t n = mutate(buf, src->n, MAX_INPUT);
    if (run(buf, n, timeout)) add(buf, n);
    runs++;
  }
  blocks = 0;
  for (size_t i = 0; i < sizeof seen; i++) blocks += seen[i];
  printf("runs: %lu corpus: %u blocks: %zu\n", runs, ncorpus, blocks);
  return 0;
}
