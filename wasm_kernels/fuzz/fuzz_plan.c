/* libFuzzer harness for the plan reader and executor (the plan is hostile input).
 *
 *   make -C wasm_kernels fuzz        60 s, seeds from fuzz/corpus/ (committed)
 *   make -C wasm_kernels fuzz-long   10 minutes
 *
 * Each input is one plan: copied into an exactly-sized, 64-byte aligned buffer (so ASan sees any read
 * past its end), opened with ep_open(); when the core accepts it, an exactly-sized arena is bound and
 * every input tensor filled with a fixed pattern, then ep_run(). The arena is capped at MAX_ARENA: work
 * per node is bounded by the sizes of its tensors, so with -timeout=10 a timeout is a real hang (a loop
 * whose trip count does not come from the tensor sizes), not a legitimately large model.
 * A version-2 plan (run-time shapes) gets a state buffer and two rounds: each input's run-time dims set to
 * small extents (two different sets, so the second round re-resolves and re-plans), value inputs' values written
 * (a pattern that differs per round), resolve, bind, run. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edgepack.h"

#define MAX_PLAN (1u << 20)
#define MAX_ARENA (1u << 20)

/* Every input's data (values: the value inputs' values, written before resolving, else the arena's) filled
 * with a fixed pattern shifted by `seed`. */
static void fill_inputs(ep_ctx *ctx, int values, uint32_t seed) {
  for (uint32_t i = 0; i < ep_num_inputs(ctx); i++) {
    ep_tensor_info info;
    const int32_t id = ep_input_id(ctx, i);
    if (id < 0 || ep_tensor_describe(ctx, (uint32_t)id, &info) != EP_OK) continue;
    uint8_t *p = values ? ep_input_values(ctx, i) : ep_tensor_data(ctx, (uint32_t)id);
    if (!p || (!values && ep_input_values(ctx, i))) continue;
    const uint32_t esz = info.dtype == EP_I64 ? 8 : (info.dtype == EP_F32 || info.dtype == EP_I32) ? 4
                       : info.dtype == EP_F16 ? 2 : 1;
    memset(p, 0, info.nbytes);
    for (uint32_t k = 0; k + esz <= info.nbytes; k += esz) {
      const uint32_t v = (k / esz + i + seed) % 3u;   /* 0, 1, 2: valid indices for small axes */
      if (info.dtype == EP_F32) { const float f = 0.5f * (float)v - 0.25f; memcpy(p + k, &f, 4); }
      else p[k] = (uint8_t)v;                    /* little-endian low byte of an int */
    }
  }
}

/* Version 2, round r: every run-time dim of every input set to a small extent within its bounds. */
static int set_dims(ep_ctx *ctx, uint32_t r) {
  for (uint32_t i = 0; i < ep_num_inputs(ctx); i++) {
    ep_tensor_info info;
    const int32_t id = ep_input_id(ctx, i);
    if (id < 0 || ep_tensor_describe(ctx, (uint32_t)id, &info) != EP_OK) return 0;
    int32_t dims[EP_MAX_RANK];
    for (uint32_t k = 0; k < info.rank; k++) {
      int32_t lo = 0, hi = 0;
      dims[k] = info.dims[k];
      if (dims[k] >= 0 || ep_input_bound(ctx, i, k, &lo, &hi) != EP_OK) continue;
      dims[k] = (int32_t)(1 + (i + k + r) % 4u);
      if (dims[k] < lo) dims[k] = lo;
      if (hi > 0 && dims[k] > hi) dims[k] = hi;
    }
    if (ep_set_input_shape(ctx, i, info.rank, dims) != EP_OK) return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_PLAN) return 0;
  void *plan = NULL;
  if (posix_memalign(&plan, 64, size ? size : 1) != 0) return 0;
  if (size) memcpy(plan, data, size);
  ep_ctx ctx;
  if (ep_open(&ctx, (const uint8_t *)plan, (uint32_t)size) == EP_OK) {
    const int v2 = ep_plan_version(&ctx) == 2;
    const uint32_t sb = ep_state_bytes(&ctx);
    void *state = NULL;
    if (v2 && (sb > MAX_ARENA || posix_memalign(&state, 64, sb ? sb : 1) != 0 ||
               ep_set_state(&ctx, (uint8_t *)state, sb) != EP_OK)) {
      free(state);
      free(plan);
      return 0;
    }
    for (uint32_t round = 0; round < (v2 ? 2u : 1u); round++) {
      if (v2) fill_inputs(&ctx, 1, round);   /* value inputs: values that decide shapes, different per round */
      if (v2 && (!set_dims(&ctx, round) || ep_resolve(&ctx) != EP_OK)) break;
      const uint32_t n = ep_arena_bytes(&ctx);
      void *arena = NULL;
      if (n > MAX_ARENA || posix_memalign(&arena, 64, n ? n : 1) != 0) break;
      memset(arena, 0, n);
      if (ep_bind(&ctx, (uint8_t *)arena, n) == EP_OK) {
        fill_inputs(&ctx, 0, 0);
        (void)ep_run(&ctx);
      }
      free(arena);
    }
    free(state);
  }
  free(plan);
  return 0;
}
