/* Kernel table: op id -> arity and the check/run pair of its family file. */
#include "ep_dispatch.h"
#include "ep_ops_table.h"

/* min_in, max_in, min_out, max_out per op, generated from wasm_kernels/spec/ops.json (ep_ops_table.h).
 * Variadic ops (Concat, Split) take up to EP_MAX_IO. */
#define K(name, a, b, c, d) [EP_OP_##name] = {a, b, c, d, ep_check_##name, ep_run_##name},
static const ep_kernel kernels[EP_OP_COUNT] = {
  EP_KERNEL_ROWS(K)
};
#undef K

const ep_kernel *ep_kernel_for(uint32_t op) {
  if (op == 0 || op >= EP_OP_COUNT || kernels[op].run == 0) return 0;
  return &kernels[op];
}
