/* Host driver: open each plan file given with the C core, run it on a fixed input pattern, print the status.
 * Built with ASan/UBSan (make build/asan/run_plan) so hostile-plan tests catch any out-of-bounds access
 * that wasm's bounded linear memory would hide. Exit status: 0 whatever the plan's fate; a sanitizer
 * report aborts with non-zero. A version-2 plan (run-time shapes) runs twice: its run-time dims at 2, then at 3
 * (within their bounds), so the second run re-resolves and re-plans; the status printed is the last one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "edgepack.h"

static int run_one(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); return 2; }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  /* exactly len bytes (rounded to the alignment only) so ASan sees reads past the end */
  uint8_t *plan = aligned_alloc(64, len ? ((size_t)len + 63) / 64 * 64 : 64);
  if (!plan || fread(plan, 1, (size_t)len, f) != (size_t)len) { fprintf(stderr, "read failed\n"); return 2; }
  fclose(f);
  ep_ctx ctx;
  ep_status s = ep_open(&ctx, plan, (uint32_t)len);
  const int v2 = s == EP_OK && ep_plan_version(&ctx) == 2;
  uint8_t *state = NULL;
  if (v2) {
    const uint32_t sb = ep_state_bytes(&ctx);
    state = aligned_alloc(64, sb ? ((size_t)sb + 63) / 64 * 64 : 64);
    s = ep_set_state(&ctx, state, sb);
  }
  for (int32_t round = 0; s == EP_OK && round < (v2 ? 2 : 1); round++) {
    for (uint32_t i = 0; v2 && s == EP_OK && i < ep_num_inputs(&ctx); i++) {
      ep_tensor_info info;
      s = ep_tensor_describe(&ctx, (uint32_t)ep_input_id(&ctx, i), &info);
      int32_t dims[EP_MAX_RANK];
      for (uint32_t k = 0; s == EP_OK && k < info.rank; k++) {
        int32_t lo = 0, hi = 0;
        ep_input_bound(&ctx, i, k, &lo, &hi);
        dims[k] = info.dims[k] >= 0 ? info.dims[k] : 2 + round;
        if (info.dims[k] < 0 && dims[k] < lo) dims[k] = lo;
        if (info.dims[k] < 0 && hi > 0 && dims[k] > hi) dims[k] = hi;
      }
      if (s == EP_OK) s = ep_set_input_shape(&ctx, i, info.rank, dims);
    }
    if (s == EP_OK) s = ep_resolve(&ctx);
    if (s != EP_OK) break;
    uint32_t n = ep_arena_bytes(&ctx);
    uint8_t *arena = aligned_alloc(64, n ? ((size_t)n + 63) / 64 * 64 : 64);
    s = ep_bind(&ctx, arena, n);
    for (uint32_t i = 0; s == EP_OK && i < ep_num_inputs(&ctx); i++) {
      ep_tensor_info info;
      int32_t id = ep_input_id(&ctx, i);
      if (ep_tensor_describe(&ctx, (uint32_t)id, &info) == EP_OK)
        memset(ep_tensor_data(&ctx, (uint32_t)id), 0x01 * (int)(i + 1), info.nbytes);  /* small ints / tiny floats */
    }
    if (s == EP_OK) s = ep_run(&ctx);
    free(arena);
  }
  free(state);
  printf("%d %s\n", (int)s, ep_status_str(s));
  free(plan);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: run_plan PLAN...\n"); return 2; }
  for (int i = 1; i < argc; i++)
    if (run_one(argv[i])) return 2;
  return 0;
}
