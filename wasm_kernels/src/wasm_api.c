/* WebAssembly exports: one context per instance. The host (web/src, packager/runtime) places the
 * plan at ep_heap_base(), calls ep_wasm_open, grows memory for the arena, then ep_wasm_bind/run. */
#include "edgepack.h"

static ep_ctx g_ctx;
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
