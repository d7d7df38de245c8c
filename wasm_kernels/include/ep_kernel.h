/* What a kernel sees: resolved tensor views, its parameter words, its scratch. Internal header. */
#ifndef EP_KERNEL_H
#define EP_KERNEL_H
#include <stdint.h>
#include "edgepack.h"
#include "ep_ops.h"

#define EP_MAX_IO 16  /* inputs (or outputs) per node; Concat/Sum beyond this are split by the packager */

typedef struct {
  uint32_t dtype;            /* EP_F32, ... */
  uint32_t rank;
  int32_t dims[EP_MAX_RANK]; /* dims[0..rank-1], each >= 0 */
  uint64_t numel;            /* product of dims (1 for a scalar) */
  uint8_t *data;             /* NULL at check time; in-bounds pointer at run time */
} ep_tensor;

typedef struct {
  uint32_t op;
  uint32_t n_in, n_out;
  const ep_tensor *in[EP_MAX_IO];   /* NULL for an absent optional input */
  ep_tensor *out[EP_MAX_IO];
  const int32_t *params;            /* n_params words; floats are stored as their bit pattern */
  uint32_t n_params;
  uint8_t *scratch;                 /* scratch_bytes of arena for this node only (NULL at check time) */
  uint32_t scratch_bytes;
} ep_node;

/* check: called once by ep_open with data == NULL; must reject every inconsistency that could
 * make run() read or write out of bounds (shapes, params, dtypes, scratch size).
 * run: may assume check passed; returns EP_E_INDEX etc. for data-dependent errors only. */
typedef ep_status (*ep_kernel_fn)(const ep_node *n);
typedef struct {
  uint8_t min_in, max_in, min_out, max_out;
  ep_kernel_fn check, run;
} ep_kernel;

/* Each kernel family file defines its entries; dispatch.c gathers them by op id. */
#define EP_DECLARE_KERNEL(name) \
  ep_status ep_check_##name(const ep_node *n); \
  ep_status ep_run_##name(const ep_node *n);
#define EP_DECLARE_ALL(n, name) EP_DECLARE_KERNEL(name)
EP_OP_LIST(EP_DECLARE_ALL)
#undef EP_DECLARE_ALL

/* Helpers for kernels. */
static inline float ep_param_f32(const ep_node *n, uint32_t i) {
  union { int32_t i; float f; } u; u.i = n->params[i]; return u.f;
}
static inline float *ep_f32(const ep_tensor *t) { return (float *)(void *)t->data; }
static inline int64_t *ep_i64(const ep_tensor *t) { return (int64_t *)(void *)t->data; }
uint32_t ep_dtype_size(uint32_t dtype);   /* 0 for unknown */
int ep_same_shape(const ep_tensor *a, const ep_tensor *b);
#define EP_CHECK(cond, err) do { if (!(cond)) return (err); } while (0)

/* Forces inlining where a helper's constant arguments (tile sizes, tap counts) must specialise its loops. */
#if defined(__GNUC__) || defined(__clang__)
#define EP_AINLINE static inline __attribute__((always_inline))
#else
#define EP_AINLINE static inline
#endif

/* Cold code (checks, packing of small operands, rarely used dtypes) is optimized for size: each wasm
 * binary has a 200 KB budget, which the hot kernels need. */
#if defined(__clang__)
#define EP_COLD __attribute__((minsize, noinline))
#define EP_NOINLINE __attribute__((noinline))
#define EP_COLD_FILE_BEGIN _Pragma("clang attribute push (__attribute__((minsize)), apply_to = function)")
#define EP_COLD_FILE_END _Pragma("clang attribute pop")
/* Before a loop of hot code that must stay as written (no vectorized or unrolled copies): size budget. */
#define EP_COMPACT_LOOP _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#else
#define EP_COLD
#define EP_NOINLINE
#define EP_COLD_FILE_BEGIN
#define EP_COLD_FILE_END
#define EP_COMPACT_LOOP
#endif

/* Freestanding helpers (no libc). */
void *ep_memcpy(void *dst, const void *src, uint32_t n);
void *ep_memset(void *dst, int c, uint32_t n);
/* count elements of es (1, 2, 4, 8) bytes, each the low es bytes of lo | hi << 32 (kernels/data.c). */
void ep_fill_value(uint8_t *d, uint64_t count, uint32_t es, uint32_t lo, uint32_t hi);
#endif
