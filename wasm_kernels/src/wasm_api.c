/* WebAssembly exports: one context per instance. The host (web/src, packager/runtime) places the
 * plan at ep_heap_base(), calls ep_wasm_open, grows memory for the arena, then ep_wasm_bind/run.
 * Version 2 plans (run-time shapes): the host places the state (ep_state_bytes) after the plan, sets it,
 * writes each input's dims into ep_dims_buffer() and calls ep_set_input_shape, writes each value input at
 * ep_input_values(i), then calls ep_resolve, and binds
 * an arena of ep_arena_bytes (the same address again, grown when a larger shape needs more). */
#include "edgepack.h"

static ep_ctx g_ctx;
static int32_t g_dims[EP_MAX_RANK];
extern unsigned char __heap_base;

#define EXPORT(name) __attribute__((export_name(#name)))
EXPORT(ep_heap_base) uint32_t ep_wasm_heap_base(void) { return (uint32_t)(uintptr_t)&__heap_base; }
EXPORT(ep_open) int32_t ep_wasm_open(uint32_t plan, uint32_t len) { return ep_open(&g_ctx, (const uint8_t *)(uintptr_t)plan, len); }
EXPORT(ep_arena_bytes) uint32_t ep_wasm_arena_bytes(void) { return ep_arena_bytes(&g_ctx); }
EXPORT(ep_bind) int32_t ep_wasm_bind(uint32_t arena, uint32_t len) { return ep_bind(&g_ctx, (uint8_t *)(uintptr_t)arena, len); }
EXPORT(ep_run) int32_t ep_wasm_run(void) { return ep_run(&g_ctx); }
EXPORT(ep_run_node) int32_t ep_wasm_run_node(uint32_t i) { return ep_run_node(&g_ctx, i); }
EXPORT(ep_num_nodes) uint32_t ep_wasm_num_nodes(void) { return ep_num_nodes(&g_ctx); }
EXPORT(ep_num_inputs) uint32_t ep_wasm_num_inputs(void) { return ep_num_inputs(&g_ctx); }
EXPORT(ep_num_outputs) uint32_t ep_wasm_num_outputs(void) { return ep_num_outputs(&g_ctx); }
EXPORT(ep_input_id) int32_t ep_wasm_input_id(uint32_t i) { return ep_input_id(&g_ctx, i); }
EXPORT(ep_output_id) int32_t ep_wasm_output_id(uint32_t i) { return ep_output_id(&g_ctx, i); }
EXPORT(ep_tensor_data) uint32_t ep_wasm_tensor_data(uint32_t id) { return (uint32_t)(uintptr_t)ep_tensor_data(&g_ctx, id); }
EXPORT(ep_tensor_nbytes) uint32_t ep_wasm_tensor_nbytes(uint32_t id) {
  ep_tensor_info info;
  return ep_tensor_describe(&g_ctx, id, &info) == EP_OK ? info.nbytes : 0;
}
EXPORT(ep_status_str) uint32_t ep_wasm_status_str(int32_t s) { return (uint32_t)(uintptr_t)ep_status_str((ep_status)s); }
EXPORT(ep_vec_name) uint32_t ep_wasm_vec_name(void) { return (uint32_t)(uintptr_t)ep_vec_name(); }
EXPORT(ep_plan_version) uint32_t ep_wasm_plan_version(void) { return ep_plan_version(&g_ctx); }
EXPORT(ep_state_bytes) uint32_t ep_wasm_state_bytes(void) { return ep_state_bytes(&g_ctx); }
EXPORT(ep_set_state) int32_t ep_wasm_set_state(uint32_t state, uint32_t len) { return ep_set_state(&g_ctx, (uint8_t *)(uintptr_t)state, len); }
EXPORT(ep_dims_buffer) uint32_t ep_wasm_dims_buffer(void) { return (uint32_t)(uintptr_t)g_dims; }
EXPORT(ep_set_input_shape) int32_t ep_wasm_set_input_shape(uint32_t i, uint32_t rank) {
  return rank > EP_MAX_RANK ? EP_E_INPUT : ep_set_input_shape(&g_ctx, i, rank, g_dims);
}
EXPORT(ep_resolve) int32_t ep_wasm_resolve(void) { return ep_resolve(&g_ctx); }
EXPORT(ep_input_values) uint32_t ep_wasm_input_values(uint32_t i) { return (uint32_t)(uintptr_t)ep_input_values(&g_ctx, i); }
EXPORT(ep_failed_node) uint32_t ep_wasm_failed_node(void) { return ep_failed_node(&g_ctx); }
/* Rank and dims of a tensor as resolved (dims written to ep_dims_buffer()); -1 on a bad id. */
EXPORT(ep_tensor_dims) int32_t ep_wasm_tensor_dims(uint32_t id) {
  ep_tensor_info info;
  if (ep_tensor_describe(&g_ctx, id, &info) != EP_OK) return -1;
  for (uint32_t k = 0; k < EP_MAX_RANK; k++) g_dims[k] = info.dims[k];
  return (int32_t)info.rank;
}
