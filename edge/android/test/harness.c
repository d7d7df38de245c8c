/* Loads an edgepack shared library with dlopen (as an app's System.loadLibrary would) and runs a
 * plan through its C API: the test that the Android libedgepack.so works, under qemu-aarch64.
 *
 *   harness LIB.so PLAN [IN.bin[@DxDx..]]... [OUT.bin]...    raw little-endian tensor bytes, manifest order
 *   harness LIB.so --selftest                       CPU features + int8 dot dispatch check
 *   harness LIB.so --threads N PLAN ...             the plan on N threads: the library's own pthreads where it
 *                                                   has ep_edge_set_threads (pi5), else N - 1 pthreads of the
 *                                                   harness enter its ep_worker_main (as Java threads do on
 *                                                   Android); prints "pool=library|host" and, after the run,
 *                                                   "tasks per thread: ..."
 * Prints "vec=<layer> features=0x<mask> gemm=<kernel> qgemm=<int8 kernel>" first. Exit 0 on success.
 * A version-2 plan (shapes resolved at run time) takes each input's dims after '@' (2x16; '@' alone: rank 0)
 * and goes through ep_set_state / ep_set_input_shape / ep_resolve / ep_bind; every run prints
 * "output I dims AxB" ('-' for rank 0). */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "edgepack.h"
#include "ep_edge.h"

#define SYM(type, name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name); if (!p_##name) { fprintf(stderr, "missing symbol %s\n", #name); return 2; }

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  void *p = NULL;
  if (posix_memalign(&p, 64, (size_t)len + 1) || fread(p, 1, (size_t)len, f) != (size_t)len) { fprintf(stderr, "read %s\n", path); exit(2); }
  fclose(f);
  *n = (size_t)len;
  return p;
}

static void (*g_worker_main)(uint32_t);
static void *worker(void *arg) {
  g_worker_main((uint32_t)(uintptr_t)arg);
  return NULL;
}

int main(int argc, char **argv) {
  uint32_t threads = 1;
  if (argc >= 4 && !strcmp(argv[2], "--threads")) {   /* harness LIB --threads N PLAN ...: drop the two */
    threads = (uint32_t)strtoul(argv[3], NULL, 10);
    if (threads < 1 || threads > 16) { fprintf(stderr, "--threads expects 1..16\n"); return 2; }
    for (int i = 2; i + 2 < argc; i++) argv[i] = argv[i + 2];
    argc -= 2;
  }
  if (argc < 3) { fprintf(stderr, "usage: harness LIB.so PLAN|--selftest [IN.bin]... [OUT.bin]...\n"); return 2; }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  SYM(const char *(*)(void), ep_vec_name)
  SYM(uint32_t (*)(void), ep_edge_cpu_features)
  SYM(const char *(*)(void), ep_edge_gemm_name)
  SYM(const char *(*)(void), ep_edge_qgemm_name)
  SYM(int32_t (*)(const int8_t *, const int8_t *, uint32_t, uint32_t), ep_edge_dot_i8)
  uint32_t feat = p_ep_edge_cpu_features();
  printf("vec=%s features=0x%x gemm=%s qgemm=%s\n", p_ep_vec_name(), feat, p_ep_edge_gemm_name(), p_ep_edge_qgemm_name());
  if (!strcmp(argv[2], "--selftest")) {
    int8_t a[301], b[301];
    uint32_t x = 12345;
    for (int i = 0; i < 301; i++) { x = x * 1103515245u + 12345u; a[i] = (int8_t)(x >> 16); x = x * 1103515245u + 12345u; b[i] = (int8_t)(x >> 16); }
    for (uint32_t n = 0; n <= 301; n += 7) {
      int32_t want = 0;
      for (uint32_t i = 0; i < n; i++) want += a[i] * b[i];
      int32_t base = p_ep_edge_dot_i8(a, b, n, 0), fast = p_ep_edge_dot_i8(a, b, n, feat);
      if (base != want || fast != want) { fprintf(stderr, "dot_i8 n=%u: want %d base %d fast %d\n", n, want, base, fast); return 1; }
    }
    printf("dot_i8 ok (%s path)\n", feat & 1 ? "sdot" : "baseline");
    return 0;
  }
  SYM(ep_status (*)(ep_ctx *, const uint8_t *, uint32_t), ep_open)
  SYM(uint32_t (*)(const ep_ctx *), ep_arena_bytes)
  SYM(ep_status (*)(ep_ctx *, uint8_t *, uint32_t), ep_bind)
  SYM(ep_status (*)(ep_ctx *), ep_run)
  SYM(uint32_t (*)(const ep_ctx *), ep_num_inputs)
  SYM(uint32_t (*)(const ep_ctx *), ep_num_outputs)
  SYM(int32_t (*)(const ep_ctx *, uint32_t), ep_input_id)
  SYM(int32_t (*)(const ep_ctx *, uint32_t), ep_output_id)
  SYM(uint8_t *(*)(const ep_ctx *, uint32_t), ep_tensor_data)
  SYM(ep_status (*)(const ep_ctx *, uint32_t, ep_tensor_info *), ep_tensor_describe)
  SYM(const char *(*)(ep_status), ep_status_str)
  SYM(uint32_t (*)(const ep_ctx *), ep_plan_version)
  SYM(uint32_t (*)(const ep_ctx *), ep_state_bytes)
  SYM(ep_status (*)(ep_ctx *, uint8_t *, uint32_t), ep_set_state)
  SYM(ep_status (*)(ep_ctx *, uint32_t, uint32_t, const int32_t *), ep_set_input_shape)
  SYM(ep_status (*)(ep_ctx *), ep_resolve)
  SYM(void (*)(uint32_t), ep_worker_main)
  SYM(uint32_t (*)(uint32_t), ep_set_threads)
  SYM(uint32_t (*)(uint32_t), ep_thread_tasks)
  g_worker_main = p_ep_worker_main;
  uint32_t (*set_threads_pthreads)(uint32_t) = (uint32_t (*)(uint32_t))dlsym(lib, "ep_edge_set_threads");
  if (threads > 1) printf("pool=%s\n", set_threads_pthreads ? "library" : "host");
  if (set_threads_pthreads) {
    if (set_threads_pthreads(threads) != threads) { fprintf(stderr, "ep_edge_set_threads(%u) refused\n", threads); return 2; }
  } else {
    for (uint32_t i = 1; i < threads; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, worker, (void *)(uintptr_t)i) != 0) { fprintf(stderr, "pthread_create failed\n"); return 2; }
      pthread_detach(t);
    }
    if (p_ep_set_threads(threads) != threads) { fprintf(stderr, "ep_set_threads(%u) refused\n", threads); return 2; }
  }
  size_t plen;
  uint8_t *plan = slurp(argv[2], &plen);
  ep_ctx ctx;
  ep_status s = p_ep_open(&ctx, plan, (uint32_t)plen);
  if (s) { printf("open: %s\n", p_ep_status_str(s)); return 3; }
  uint32_t ni = p_ep_num_inputs(&ctx), no = p_ep_num_outputs(&ctx);
  if ((uint32_t)argc != 3 + ni + no) { fprintf(stderr, "plan has %u inputs, %u outputs\n", ni, no); return 2; }
  if (p_ep_plan_version(&ctx) == 2) {   /* the state once, then this run's input dims */
    void *state = NULL;
    uint32_t sb = p_ep_state_bytes(&ctx);
    if (posix_memalign(&state, 64, sb ? sb : 64)) return 2;
    if ((s = p_ep_set_state(&ctx, state, sb))) { printf("state: %s\n", p_ep_status_str(s)); return 3; }
    for (uint32_t i = 0; i < ni; i++) {
      char *at = strchr(argv[3 + i], '@');
      int32_t dims[EP_MAX_RANK];
      uint32_t rank = 0;
      if (!at) { fprintf(stderr, "input %u: a version-2 plan needs its dims (FILE@2x16)\n", i); return 2; }
      *at = 0;
      for (char *q = at + 1; *q && rank < EP_MAX_RANK; rank++) { dims[rank] = (int32_t)strtol(q, &q, 10); if (*q == 'x') q++; }
      if ((s = p_ep_set_input_shape(&ctx, i, rank, dims))) { printf("input %u shape: %s\n", i, p_ep_status_str(s)); return 3; }
    }
    if ((s = p_ep_resolve(&ctx))) { printf("resolve: %s\n", p_ep_status_str(s)); return 3; }
  } else {
    for (uint32_t i = 0; i < ni; i++) { char *at = strchr(argv[3 + i], '@'); if (at) *at = 0; }
  }
  void *arena = NULL;
  uint32_t ab = p_ep_arena_bytes(&ctx);
  if (posix_memalign(&arena, 64, ab ? ab : 64)) return 2;
  if ((s = p_ep_bind(&ctx, arena, ab))) { printf("bind: %s\n", p_ep_status_str(s)); return 3; }
  for (uint32_t i = 0; i < ni; i++) {
    ep_tensor_info info;
    int32_t id = p_ep_input_id(&ctx, i);
    p_ep_tensor_describe(&ctx, (uint32_t)id, &info);
    size_t n;
    void *d = slurp(argv[3 + i], &n);
    if (n != info.nbytes) { fprintf(stderr, "input %u: %zu bytes, want %u\n", i, n, info.nbytes); return 2; }
    memcpy(p_ep_tensor_data(&ctx, (uint32_t)id), d, n);
    free(d);
  }
  if ((s = p_ep_run(&ctx))) { printf("run: %s\n", p_ep_status_str(s)); return 4; }
  for (uint32_t i = 0; i < no; i++) {
    ep_tensor_info info;
    int32_t id = p_ep_output_id(&ctx, i);
    p_ep_tensor_describe(&ctx, (uint32_t)id, &info);
    printf("output %u dims ", i);
    for (uint32_t k = 0; k < info.rank; k++) printf("%s%d", k ? "x" : "", (int)info.dims[k]);
    printf("%s\n", info.rank ? "" : "-");
    FILE *f = fopen(argv[3 + ni + i], "wb");
    if (!f || fwrite(p_ep_tensor_data(&ctx, (uint32_t)id), 1, info.nbytes, f) != info.nbytes) return 2;
    fclose(f);
  }
  if (threads > 1) {
    printf("tasks per thread:");
    for (uint32_t i = 0; i < threads; i++) printf(" %u", p_ep_thread_tasks(i));
    printf("\n");
  }
  printf("ok\n");
  return 0;
}
