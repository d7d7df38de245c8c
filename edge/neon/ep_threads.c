/* ep_edge_set_threads: the core's pool (wasm_kernels/src/parallel.c, EP_THREADS_NATIVE) with pthreads as its
 * workers. Linked where a libc is: the pi5 library (glibc), edgepack-run (static glibc) and the x86-64 test
 * builds. The Android library links no libc (edge/README.md): there Java threads enter ep_worker_main. */
#include <pthread.h>
#include <stdint.h>
#include "ep_edge.h"

#if defined(EP_GLIBC_2_17_SYMBOLS)
/* The pi5 shared library (edge/Makefile sets this for that object only; a static link has no versions): bind to
 * the symbol versions every aarch64 glibc has (2.17, the first for aarch64). glibc 2.34 moved these into
 * libc.so.6 with new default versions, which would make the library refuse to load on older systems (Raspberry
 * Pi OS bullseye: 2.31). With libpthread.so.0 also NEEDED, older glibcs find them there, newer ones in libc. */
__asm__(".symver pthread_create, pthread_create@GLIBC_2.17");
__asm__(".symver pthread_detach, pthread_detach@GLIBC_2.17");
__asm__(".symver pthread_attr_setstacksize, pthread_attr_setstacksize@GLIBC_2.17");
#endif

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   /* two callers must not start the same index */
static uint32_t g_started = 1;                               /* caller + workers started so far */

static void *worker(void *arg) {
  ep_worker_main((uint32_t)(uintptr_t)arg);
  return 0;
}

uint32_t ep_edge_set_threads(uint32_t n) {
  if (n < 1) n = 1;
  if (n > EP_EDGE_MAX_THREADS) n = EP_EDGE_MAX_THREADS;
  pthread_mutex_lock(&g_lock);
  while (g_started < n) {
    pthread_t t;
    pthread_attr_t a;
    /* Kernels use little stack (the wasm workers have 64 KB); 256 KB instead of glibc's 8 MB default. */
    if (pthread_attr_init(&a) != 0) break;
    pthread_attr_setstacksize(&a, 256u * 1024u);
    const int r = pthread_create(&t, &a, worker, (void *)(uintptr_t)g_started);
    pthread_attr_destroy(&a);
    if (r != 0) break;
    pthread_detach(t);
    g_started++;
  }
  const uint32_t have = n < g_started ? n : g_started;
  pthread_mutex_unlock(&g_lock);
  return ep_set_threads(have);
}
