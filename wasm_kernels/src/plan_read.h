/* Reading a plan's tables: shared by the reader/executor (plan.c) and the run-time shape resolver
 * (resolve.c). Internal header. */
#ifndef EP_PLAN_READ_H
#define EP_PLAN_READ_H
#include "ep_dispatch.h"
#include "ep_plan_layout.h"

static inline uint32_t ep_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
/* [off, off+len) inside [0, size)? Overflow-safe. */
static inline int ep_in_bounds(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }
static inline int32_t ep_int_at(const ep_ctx *c, uint32_t i) { return (int32_t)ep_rd32(c->plan + c->ints_off + 4u * i); }
static inline const uint8_t *ep_tensor_entry(const ep_ctx *c, uint32_t id) {
  return c->plan + c->tensors_off + EP_PLAN_TENSOR_BYTES * id;
}
static inline const uint8_t *ep_node_entry(const ep_ctx *c, uint32_t idx) {
  return c->plan + c->nodes_off + EP_PLAN_NODE_BYTES * idx;
}
/* v2 lifetime entry of tensor id: root, first, last */
static inline int32_t ep_life(const ep_ctx *c, uint32_t id, uint32_t field) {
  return (int32_t)ep_rd32(c->plan + c->life_off + EP_PLAN_LIFE_BYTES * id + 4u * field);
}

/* The v2 state buffer (ep_set_state): where each part lives. */
typedef struct {
  int32_t *in_dims;     /* n_inputs x EP_MAX_RANK: dims set by ep_set_input_shape (-1 = not set) */
  int32_t *in_save;     /* n_inputs x EP_MAX_RANK: in_dims kept while a bounded plan lays out its bounds */
  int32_t *t_dims;      /* n_tensors x EP_MAX_RANK: resolved dims */
  uint32_t *t_off;      /* n_tensors: arena offset */
  uint32_t *t_bytes;    /* n_tensors: byte size */
  uint32_t *s_off;      /* n_nodes: scratch offset */
  uint32_t *s_bytes;    /* n_nodes: scratch bytes */
  int32_t *s_step;      /* n_nodes: the main step whose lifetime the node's scratch has (a body's: its control node's) */
  uint32_t *order;      /* n_tensors + n_nodes: the memory planner's work list */
  uint32_t *max_off;    /* n_tensors + n_nodes: bounded plans, each block's offset at the bounds (tensors, then scratch) */
  uint32_t *max_bytes;  /* n_tensors + n_nodes: and its size there */
  uint8_t *values;      /* values_bytes: tensors computed while resolving (storage EP_STORAGE_VALUES) and value inputs */
  uint8_t *seen;        /* values_bytes when the plan has value inputs (else none): their values at the last resolve */
  uint8_t *t_run;       /* n_tensors: 1 = an If output whose dims its branch sets at run time (subplans.c) */
} ep_state_view;
/* Total bytes of the state; fills *v from base when base is not NULL. */
uint64_t ep_state_layout(const ep_ctx *c, uint8_t *base, ep_state_view *v);

typedef struct {
  ep_node node;
  ep_tensor tensors[2 * EP_MAX_IO];
} ep_node_view;

/* Decode node idx with all its tensors (v2: dims from the state when one is set, data NULL until resolved);
 * validates ids, arity and parameter bounds. */
ep_status ep_decode_node(const ep_ctx *c, uint32_t idx, ep_node_view *v, const ep_kernel **kout);
ep_status ep_decode_tensor(const ep_ctx *c, uint32_t id, ep_tensor *t, uint32_t *storage);
ep_status ep_run_prologue(ep_ctx *c);
#endif
