/* Plan version 2: shapes resolved at run time. For the dims the host gives its inputs, ep_resolve() derives
 * every tensor's dims node by node through the kernels' shape functions (ep_shape.h), runs the shape
 * arithmetic flagged EP_NODE_RESOLVE into the values region, checks every node with its kernel's check()
 * at those shapes, and plans the arena by lifetime. Everything lives in the host's state buffer: the core
 * still allocates nothing. Resolving the same dims again returns at once. */
#include "plan_read.h"
#include "ep_shape.h"
#include "control.h"
EP_COLD_FILE_BEGIN

uint32_t ep_failed_node(const ep_ctx *c) { return c ? c->failed_node : 0; }

uint32_t ep_plan_version(const ep_ctx *c) { return c && c->opened ? c->version : 0; }

uint32_t ep_state_bytes(const ep_ctx *c) {
  if (!c || !c->opened || c->version != EP_PLAN_VERSION_DYNAMIC) return 0;
  return (uint32_t)ep_state_layout(c, 0, 0);
}

static const uint8_t *input_entry(const ep_ctx *c, uint32_t i) { return ep_tensor_entry(c, (uint32_t)ep_int_at(c, c->inputs_at + i)); }
static int32_t plan_dim(const uint8_t *e, uint32_t k) { return (int32_t)ep_rd32(e + EP_T_DIMS + 4u * k); }

ep_status ep_set_state(ep_ctx *c, uint8_t *state, uint32_t bytes) {
  if (!c || !c->opened || c->version != EP_PLAN_VERSION_DYNAMIC) return EP_E_STATE;
  if (!state || ((uintptr_t)state) % 64 != 0 || bytes < ep_state_bytes(c)) return EP_E_ARENA;
  c->state = state;
  c->state_bytes = bytes;
  c->resolved = 0;
  c->arena = 0;
  c->prologue_arena = 0;
  ep_state_view sv;
  ep_state_layout(c, state, &sv);
  for (uint32_t id = 0; id < c->n_tensors; id++) {   /* described before a resolve: the plan's dims */
    const uint8_t *e = ep_tensor_entry(c, id);
    for (uint32_t k = 0; k < EP_MAX_RANK; k++) sv.t_dims[id * EP_MAX_RANK + k] = k < e[EP_T_RANK] ? plan_dim(e, k) : 0;
    sv.t_run[id] = 0;
  }
  for (uint32_t i = 0; i < c->n_inputs; i++) {   /* fixed dims are known; the others wait for the host */
    const uint8_t *e = input_entry(c, i);
    for (uint32_t k = 0; k < EP_MAX_RANK; k++) sv.in_dims[i * EP_MAX_RANK + k] = k < e[EP_T_RANK] ? plan_dim(e, k) : 0;
  }
  return EP_OK;
}

ep_status ep_input_bound(const ep_ctx *c, uint32_t i, uint32_t k, int32_t *min, int32_t *max) {
  if (!c || !c->opened || !min || !max) return EP_E_STATE;
  if (i >= c->n_inputs || k >= input_entry(c, i)[EP_T_RANK]) return EP_E_BOUNDS;
  *min = 0; *max = 0;
  if (c->version != EP_PLAN_VERSION_DYNAMIC) { *min = *max = plan_dim(input_entry(c, i), k); return EP_OK; }
  uint32_t w = c->bounds_at;
  for (uint32_t j = 0; j < i; j++) w += 2u * input_entry(c, j)[EP_T_RANK];
  *min = ep_int_at(c, w + 2 * k);
  *max = ep_int_at(c, w + 2 * k + 1);
  return EP_OK;
}

ep_status ep_set_input_shape(ep_ctx *c, uint32_t i, uint32_t rank, const int32_t *dims) {
  if (!c || !c->opened || !dims) return EP_E_STATE;
  if (i >= c->n_inputs) return EP_E_BOUNDS;
  const uint8_t *e = input_entry(c, i);
  if (rank != e[EP_T_RANK]) return EP_E_INPUT;
  for (uint32_t k = 0; k < rank; k++) {
    const int32_t fixed = plan_dim(e, k);
    if (dims[k] < 0 || (fixed >= 0 && dims[k] != fixed)) return EP_E_INPUT;
    int32_t lo, hi;
    ep_input_bound(c, i, k, &lo, &hi);
    if (dims[k] < lo || (hi > 0 && dims[k] > hi)) return EP_E_LIMIT;
  }
  if (c->version != EP_PLAN_VERSION_DYNAMIC) return EP_OK;   /* a static plan has exactly these dims */
  if (!c->state) return EP_E_STATE;
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  int32_t *have = sv.in_dims + (uint64_t)i * EP_MAX_RANK;
  for (uint32_t k = 0; k < rank; k++) {
    if (have[k] != dims[k]) c->resolved = 0;
    have[k] = dims[k];
  }
  return EP_OK;
}

/* Node i at main step `step` (a body node's: its control node's), `depth` bodies deep: output dims from the shape
 * function (a control node's from its bodies: subplans.c), scratch size, check(), and a resolve-time node run. */
static ep_status resolve_node(ep_ctx *c, const ep_state_view *sv, uint32_t i, int32_t step, uint32_t depth) {
  ep_node_view v; const ep_kernel *k;
  const uint32_t placed = sv->s_bytes[i];
  if (!c->rerun) { sv->s_bytes[i] = 0; sv->s_step[i] = step; }
  c->failed_node = i;
  ep_status s = ep_decode_node(c, i, &v, &k);
  if (s) return s;
  ep_node *n = &v.node;
  if (c->rerun && (ep_rd32(ep_node_entry(c, i) + EP_N_FLAGS) & EP_NODE_RESOLVE)) return EP_OK;   /* values: as resolved */
  const uint32_t io_at = ep_rd32(ep_node_entry(c, i) + EP_N_IO_AT);
  for (uint32_t j = 0; j < n->n_in; j++) {   /* every input is known by now (plan order is topological) */
    const int32_t id = ep_int_at(c, io_at + j);
    if (id >= 0 && sv->t_run[id]) return EP_E_SHAPE;   /* an If output whose dims only its run decides */
    for (uint32_t d = 0; n->in[j] && d < n->in[j]->rank; d++) if (n->in[j]->dims[d] < 0) return EP_E_SHAPE;
  }
  if (ep_is_control(n->op)) {
    if ((s = ep_ctrl_resolve(c, sv, i, n, step, depth))) return s;
    return ep_decode_node(c, i, &v, &k) || k->check(n) ? EP_E_SHAPE : EP_OK;   /* again with the outputs' dims */
  }
  const ep_shape_entry *se = ep_shape_for(n->op);
  if (se && se->shape) {
    s = se->shape(n);
    if (s) return s;
    for (uint32_t o = 0; o < n->n_out; o++) {   /* a fixed dim of the plan must come out as written */
      const uint32_t id = (uint32_t)ep_int_at(c, io_at + n->n_in + o);
      const uint8_t *e = ep_tensor_entry(c, id);
      for (uint32_t d = 0; d < n->out[o]->rank; d++) {
        const int32_t fixed = plan_dim(e, d), got = n->out[o]->dims[d];
        if (got < 0 || (fixed >= 0 && got != fixed)) return EP_E_SHAPE;
        sv->t_dims[id * EP_MAX_RANK + d] = got;
      }
    }
  }
  n->scratch_bytes = se && se->scratch ? se->scratch(n) : 0;
  n->scratch = 0;
  if (c->rerun && n->scratch_bytes > placed) return EP_E_SHAPE;   /* within what was placed */
  if (!c->rerun) sv->s_bytes[i] = n->scratch_bytes;
  s = k->check(n);
  if (s) return s;
  if (ep_rd32(ep_node_entry(c, i) + EP_N_FLAGS) & EP_NODE_RESOLVE) {
    if (n->scratch_bytes) return EP_E_OP;
    s = k->run(n);   /* shape arithmetic: its inputs are weights or values, its outputs values */
    if (s) return s;
  }
  return EP_OK;
}

ep_status ep_resolve_range(ep_ctx *c, const ep_state_view *sv, uint32_t begin, uint32_t end, int32_t step, uint32_t depth) {
  for (uint32_t i = begin; i < end; i++) {
    const ep_status s = resolve_node(c, sv, i, step, depth);
    if (s) return s;
  }
  return EP_OK;
}

ep_status ep_resolve_after(ep_ctx *c, uint32_t from) {
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  c->rerun = 1;
  ep_status s = EP_OK;
  for (uint32_t i = from; i < c->n_main && !s; i++) s = resolve_node(c, &sv, i, (int32_t)i, 0);
  c->rerun = 0;
  for (uint32_t id = 0; id < c->n_tensors && !s; id++) {   /* every tensor within the bytes placed for it */
    const uint8_t *e = ep_tensor_entry(c, id);
    if (e[EP_T_STORAGE] != EP_STORAGE_ARENA) continue;
    uint64_t bytes = ep_dtype_size(e[EP_T_DTYPE]);
    for (uint32_t k = 0; k < e[EP_T_RANK]; k++) bytes *= (uint64_t)(sv.t_dims[id * EP_MAX_RANK + k] < 0 ? 0 : sv.t_dims[id * EP_MAX_RANK + k]);
    if (bytes > sv.t_bytes[id]) s = EP_E_SHAPE;
  }
  return s;
}

/* Every tensor's dims from the inputs' dims, node by node (bodies inside their control nodes). */
static ep_status resolve_shapes(ep_ctx *c, const ep_state_view *sv) {
  c->failed_node = c->n_nodes;
  for (uint32_t id = 0; id < c->n_tensors; id++) {
    const uint8_t *e = ep_tensor_entry(c, id);
    for (uint32_t k = 0; k < EP_MAX_RANK; k++) sv->t_dims[id * EP_MAX_RANK + k] = k < e[EP_T_RANK] ? plan_dim(e, k) : 0;
    sv->t_run[id] = 0;
  }
  for (uint32_t i = 0; i < c->n_nodes; i++) { sv->s_bytes[i] = 0; sv->s_step[i] = (int32_t)i; }
  for (uint32_t i = 0; i < c->n_inputs; i++) {
    const uint32_t id = (uint32_t)ep_int_at(c, c->inputs_at + i);
    for (uint32_t k = 0; k < input_entry(c, i)[EP_T_RANK]; k++) {
      const int32_t d = sv->in_dims[i * EP_MAX_RANK + k];
      if (d < 0) return EP_E_INPUT;   /* the host did not give this input's dims */
      sv->t_dims[id * EP_MAX_RANK + k] = d;
    }
  }
  for (uint32_t i = 0; i < c->n_main; i++) {
    const ep_status s = resolve_node(c, sv, i, (int32_t)i, 0);
    if (s) return s;
  }
  return EP_OK;
}

/* Byte sizes of arena tensors from their resolved dims (aliases no larger than their root). */
static ep_status size_tensors(const ep_ctx *c, const ep_state_view *sv) {
  for (uint32_t id = 0; id < c->n_tensors; id++) {
    const uint8_t *e = ep_tensor_entry(c, id);
    uint64_t bytes = ep_dtype_size(e[EP_T_DTYPE]);
    for (uint32_t k = 0; k < e[EP_T_RANK]; k++) {
      const int32_t d = sv->t_dims[id * EP_MAX_RANK + k];
      if (d < 0) { bytes = 0; break; }   /* never produced: no node reads it (resolve_shapes refused that) */
      bytes *= (uint64_t)d;
      if (bytes > 0xFFFFFFC0ull) return EP_E_LIMIT;
    }
    sv->t_bytes[id] = (uint32_t)bytes;   /* under 4 GiB with room to align: what a wasm32 arena can hold */
  }
  for (uint32_t i = 0; i < c->n_outputs; i++) {   /* every graph output was produced */
    const uint32_t id = (uint32_t)ep_int_at(c, c->outputs_at + i);
    for (uint32_t k = 0; k < ep_tensor_entry(c, id)[EP_T_RANK]; k++) if (sv->t_dims[id * EP_MAX_RANK + k] < 0) return EP_E_SHAPE;
  }
  for (uint32_t id = 0; id < c->n_tensors; id++) {
    if (ep_tensor_entry(c, id)[EP_T_STORAGE] != EP_STORAGE_ARENA) continue;
    const uint32_t r = (uint32_t)ep_life(c, id, 0);
    if (sv->t_bytes[id] > sv->t_bytes[r]) return EP_E_TENSOR;
  }
  return EP_OK;
}

/* A block of the memory plan: an arena root tensor (b < n_tensors) or a node's scratch (b - n_tensors). */
static void block(const ep_ctx *c, const ep_state_view *sv, uint32_t b, uint64_t *size, int32_t *first, int32_t *last, uint32_t **off) {
  if (b < c->n_tensors) {
    *size = sv->t_bytes[b]; *first = ep_life(c, b, 1); *last = ep_life(c, b, 2); *off = &sv->t_off[b];
  } else {
    const uint32_t i = b - c->n_tensors;
    *size = sv->s_bytes[i]; *first = *last = sv->s_step[i]; *off = &sv->s_off[i];
  }
}

static uint64_t round64(uint64_t x) { return (x + 63u) & ~(uint64_t)63u; }

/* Greedy by size: the largest block first, each at the lowest offset where no block whose lifetime meets its
 * own lies. The prologue's outputs keep their place at the start (pinned, so a new shape needs no rerun). */
static ep_status plan_arena(ep_ctx *c, const ep_state_view *sv) {
  const uint32_t unplaced = 0xFFFFFFFFu;
  uint32_t n = 0;
  uint64_t pinned = 0;
  for (uint32_t id = 0; id < c->n_tensors; id++) sv->t_off[id] = unplaced;
  for (uint32_t i = 0; i < c->n_prologue; i++) {
    const uint8_t *e = ep_node_entry(c, i);
    const uint32_t io_at = ep_rd32(e + EP_N_IO_AT), n_in = e[EP_N_N_IN], n_out = e[EP_N_N_OUT];
    for (uint32_t o = 0; o < n_out; o++) {
      const uint32_t id = (uint32_t)ep_int_at(c, io_at + n_in + o);
      sv->t_off[id] = (uint32_t)pinned;
      pinned = round64(pinned + sv->t_bytes[id]);
    }
  }
  for (uint32_t b = 0; b < c->n_tensors + c->n_nodes; b++) {
    if (b < c->n_tensors) {
      if (ep_tensor_entry(c, b)[EP_T_STORAGE] != EP_STORAGE_ARENA || ep_life(c, b, 0) != (int32_t)b) continue;
      if (sv->t_off[b] != unplaced) continue;   /* pinned prologue output */
    } else if (sv->s_bytes[b - c->n_tensors] == 0) {
      continue;
    }
    sv->order[n++] = b;
  }
  /* shell sort by size, larger first; ties by block id so the plan is the same every time */
  for (uint32_t gap = n / 2; gap > 0; gap /= 2) {
    for (uint32_t j = gap; j < n; j++) {
      const uint32_t b = sv->order[j];
      uint64_t sb; int32_t f, l; uint32_t *o;
      block(c, sv, b, &sb, &f, &l, &o);
      uint32_t k = j;
      for (; k >= gap; k -= gap) {
        uint64_t sa; block(c, sv, sv->order[k - gap], &sa, &f, &l, &o);
        if (sa > sb || (sa == sb && sv->order[k - gap] < b)) break;
        sv->order[k] = sv->order[k - gap];
      }
      sv->order[k] = b;
    }
  }
  uint64_t end = pinned;
  for (uint32_t j = 0; j < n; j++) {
    uint64_t size; int32_t first, last; uint32_t *off;
    block(c, sv, sv->order[j], &size, &first, &last, &off);
    uint64_t at = pinned;
    for (int moved = 1; moved;) {   /* first fit above every placed block it would meet */
      moved = 0;
      for (uint32_t q = 0; q < j; q++) {
        uint64_t qs; int32_t qf, ql; uint32_t *qo;
        block(c, sv, sv->order[q], &qs, &qf, &ql, &qo);
        if (qf > last || ql < first || qs == 0) continue;
        if (*qo < at + size && at < *qo + qs) { at = round64(*qo + qs); moved = 1; }
      }
    }
    if (at + size > 0xFFFFFFC0ull) return EP_E_LIMIT;
    *off = (uint32_t)at;
    if (at + size > end) end = at + size;
  }
  for (uint32_t id = 0; id < c->n_tensors; id++) {   /* aliases share their root's bytes */
    if (ep_tensor_entry(c, id)[EP_T_STORAGE] != EP_STORAGE_ARENA) { sv->t_off[id] = 0; continue; }
    const uint32_t r = (uint32_t)ep_life(c, id, 0);
    sv->t_off[id] = sv->t_off[r] == unplaced ? 0 : sv->t_off[r];   /* a zero-byte root is never placed */
  }
  end = round64(end);
  if (end > 0xFFFFFFC0ull) return EP_E_LIMIT;
  c->arena_bytes = (uint32_t)end;
  return EP_OK;
}

/* Bounded plans promise at most max_arena_bytes: the arena of the layout at the inputs' bounds. The greedy
 * layout of a smaller shape is nearly always smaller, but not always: then that shape takes the bounds' layout,
 * where every block fits as long as it is no larger than at the bounds. */
static ep_status resolve_and_plan(ep_ctx *c, const ep_state_view *sv) {
  ep_status s = resolve_shapes(c, sv);
  if (!s) s = size_tensors(c, sv);
  if (!s) s = plan_arena(c, sv);
  return s;
}

static ep_status bounded_layout(ep_ctx *c, const ep_state_view *sv) {
  const uint32_t nt = c->n_tensors;
  for (uint32_t j = 0; j < c->n_inputs * EP_MAX_RANK; j++) sv->in_save[j] = sv->in_dims[j];
  for (uint32_t i = 0; i < c->n_inputs; i++)
    for (uint32_t k = 0; k < input_entry(c, i)[EP_T_RANK]; k++) {
      int32_t lo, hi;
      if (ep_input_bound(c, i, k, &lo, &hi) == EP_OK && hi > 0) sv->in_dims[i * EP_MAX_RANK + k] = hi;
    }
  ep_status s = resolve_and_plan(c, sv);
  if (!s && c->arena_bytes > c->max_arena_bytes) s = EP_E_LIMIT;
  for (uint32_t b = 0; b < nt + c->n_nodes; b++) {
    sv->max_off[b] = b < nt ? sv->t_off[b] : sv->s_off[b - nt];
    sv->max_bytes[b] = b < nt ? sv->t_bytes[b] : sv->s_bytes[b - nt];
  }
  for (uint32_t j = 0; j < c->n_inputs * EP_MAX_RANK; j++) sv->in_dims[j] = sv->in_save[j];
  if (!s) s = resolve_shapes(c, sv);
  if (!s) s = size_tensors(c, sv);
  if (s) return s;
  for (uint32_t b = 0; b < nt + c->n_nodes; b++) {
    uint32_t *off = b < nt ? &sv->t_off[b] : &sv->s_off[b - nt];
    const uint32_t bytes = b < nt ? sv->t_bytes[b] : sv->s_bytes[b - nt];
    if (bytes > sv->max_bytes[b]) return EP_E_LIMIT;
    *off = sv->max_off[b];
  }
  c->arena_bytes = c->max_arena_bytes;
  return EP_OK;
}

uint8_t *ep_input_values(const ep_ctx *c, uint32_t i) {
  if (!c || !c->opened || !c->state || c->version != EP_PLAN_VERSION_DYNAMIC || i >= c->n_inputs) return 0;
  const uint8_t *e = input_entry(c, i);
  if (e[EP_T_STORAGE] != EP_STORAGE_VALUES) return 0;
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  return sv.values + ep_rd32(e + EP_T_OFFSET);
}

/* Value inputs' bytes against their copy at the last resolve (copy: take them as the new copy). 1 if any differs. */
static int value_inputs_changed(const ep_ctx *c, const ep_state_view *sv, int copy) {
  int changed = 0;
  for (uint32_t i = 0; c->value_inputs && i < c->n_inputs; i++) {
    const uint8_t *e = input_entry(c, i);
    if (e[EP_T_STORAGE] != EP_STORAGE_VALUES) continue;
    const uint32_t off = ep_rd32(e + EP_T_OFFSET), n = ep_rd32(e + EP_T_NBYTES);
    for (uint32_t b = off; b < off + n; b++) {
      if (sv->seen[b] != sv->values[b]) changed = 1;
      if (copy) sv->seen[b] = sv->values[b];
    }
  }
  return changed;
}

ep_status ep_resolve(ep_ctx *c) {
  if (!c || !c->opened) return EP_E_STATE;
  if (c->version != EP_PLAN_VERSION_DYNAMIC) return EP_OK;
  if (!c->state) return EP_E_STATE;
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  if (c->resolved && !value_inputs_changed(c, &sv, 0)) {   /* dims a run set: back to the capacities */
    const ep_status s = c->run_set_dims ? ep_resolve_after(c, 0) : EP_OK;
    c->run_set_dims = 0;
    return s;
  }
  c->resolved = 0;
  c->arena_bytes = 0;
  ep_status s = resolve_and_plan(c, &sv);
  if (!s && c->max_arena_bytes && c->arena_bytes > c->max_arena_bytes) s = bounded_layout(c, &sv);
  if (s) { c->arena_bytes = 0; return s; }
  value_inputs_changed(c, &sv, 1);
  c->resolved = 1;
  c->run_set_dims = 0;
  return EP_OK;
}
EP_COLD_FILE_END
