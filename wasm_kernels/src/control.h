/* If, Loop and Scan (plan v2): nodes whose bodies are node ranges of the same plan, after the main sequence.
 * Their parameter words (docs/plan-format.md, "Sub-plans") name the ranges and the tensors that connect a body
 * to its node. They need the executor, so plan.c (open, run) and resolve.c (shapes) call them here rather
 * than through the kernel table. Internal header. */
#ifndef EP_CONTROL_H
#define EP_CONTROL_H
#include "plan_read.h"

#define EP_MAX_DEPTH 8                 /* bodies nested in bodies, at most */
#define EP_MAX_BODY_STEPS (1u << 18)   /* per top-level control node and run: each Loop/Scan iteration costs 1 + its body's nodes */

static inline int ep_is_control(uint32_t op) { return op == EP_OP_IF || op == EP_OP_LOOP || op == EP_OP_SCAN; }
/* Kernels that set their outputs' extents when they run (kernels/datadep.c): main sequence of a v2 plan only. */
static inline int ep_sets_dims(uint32_t op) { return op == EP_OP_NONZERO || op == EP_OP_NON_MAX_SUPPRESSION || op == EP_OP_UNIQUE; }
/* After main node `from - 1` set its outputs' extents: the later main nodes' dims from them (resolve.c). */
ep_status ep_resolve_after(ep_ctx *c, uint32_t from);

typedef struct {
  uint32_t n_bodies;               /* IF 2, LOOP and SCAN 1 */
  uint32_t begin[2], end[2];       /* node ranges [begin, end) */
  uint32_t n_state, n_scan_in, n_scan_out;   /* IF: outputs in n_scan_out; LOOP: carried, -, scan outputs */
  uint32_t n_body_in, n_body_out;
  const int32_t *body_in;   /* LOOP: iter, cond, carried x N | SCAN: states x N, slices x M */
  const int32_t *body_out;  /* IF: then x K, else x K | LOOP: cond, carried x N, scan x K | SCAN: states x N, scan x K */
  const int32_t *axes;      /* SCAN: in_axis x M, in_reverse x M, out_axis x K, out_reverse x K */
} ep_ctrl;

/* The words' counts and values that need no plan: arity, ranges ordered, axes and directions (kernel check). */
ep_status ep_ctrl_decode(const ep_node *n, ep_ctrl *k);
/* ep_open: the body tensors exist, inputs are arena roots the node may write, all live at `step`. */
ep_status ep_ctrl_open(const ep_ctx *c, const ep_node *n, int32_t step, ep_ctrl *k);
/* ep_resolve: the bodies' input dims from the node's, the bodies resolved, the node's output dims. */
ep_status ep_ctrl_resolve(ep_ctx *c, const ep_state_view *sv, uint32_t idx, ep_node *n, int32_t step, uint32_t depth);
/* ep_run: the node at plan index idx (decoded in n). */
ep_status ep_ctrl_run(ep_ctx *c, uint32_t idx, const ep_node *n, uint32_t depth);

/* Callbacks into the executor and the resolver for a body's node range. */
ep_status ep_run_range(ep_ctx *c, uint32_t begin, uint32_t end, uint32_t depth);
ep_status ep_resolve_range(ep_ctx *c, const ep_state_view *sv, uint32_t begin, uint32_t end, int32_t step, uint32_t depth);
#endif
