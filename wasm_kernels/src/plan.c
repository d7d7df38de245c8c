/* Plan reader and executor. The plan is hostile until ep_open() has checked it: every read goes
 * through rd32() with an explicit bound, every tensor must fit its section, every node must pass
 * its kernel's check() against the declared shapes before the first run. */
#include "ep_dispatch.h"
#include "ep_plan_layout.h"
#include "ep_shape.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code (also in the one-step emcc build) */

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

/* [off, off+len) inside [0, size)? Overflow-safe. */
static int in_bounds(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

static int32_t int_at(const ep_ctx *c, uint32_t i) { return (int32_t)rd32(c->plan + c->ints_off + 4u * i); }

/* Decode tensor `id` (already range-checked) into t; data left NULL when arena is NULL. */
static ep_status decode_tensor(const ep_ctx *c, uint32_t id, ep_tensor *t, uint32_t *storage) {
  const uint8_t *e = c->plan + c->tensors_off + EP_PLAN_TENSOR_BYTES * id;
  t->dtype = e[EP_T_DTYPE];
  t->rank = e[EP_T_RANK];
  *storage = e[EP_T_STORAGE];
  uint32_t off = rd32(e + EP_T_OFFSET), nbytes = rd32(e + EP_T_NBYTES);
  uint32_t esize = ep_dtype_size(t->dtype);
  if (esize == 0 || t->rank > EP_MAX_RANK || e[EP_T_FLAGS] != 0) return EP_E_TENSOR;
  uint64_t numel = 1;
  for (uint32_t i = 0; i < EP_MAX_RANK; i++) {
    int32_t d = (int32_t)rd32(e + EP_T_DIMS + 4 * i);
    if (i >= t->rank) { if (d != 0) return EP_E_TENSOR; t->dims[i] = 0; continue; }
    if (d < 0) return EP_E_TENSOR;
    t->dims[i] = d;
    numel *= (uint64_t)d;
    if (numel > 0xFFFFFFFFull) return EP_E_TENSOR;
  }
  if (numel * esize != nbytes || off % esize != 0) return EP_E_TENSOR;
  t->numel = numel;
  if (*storage == EP_STORAGE_ARENA) {
    if (!in_bounds(off, nbytes, c->arena_bytes)) return EP_E_BOUNDS;
    t->data = c->arena ? c->arena + off : 0;
  } else if (*storage == EP_STORAGE_WEIGHTS) {
    if (!in_bounds(off, nbytes, c->weights_bytes)) return EP_E_BOUNDS;
    t->data = (uint8_t *)(uintptr_t)(c->plan + c->weights_off + off);
  } else {
    return EP_E_TENSOR;
  }
  return EP_OK;
}

typedef struct {
  ep_node node;
  ep_tensor tensors[2 * EP_MAX_IO];
} node_view;

static uint32_t node_flags(const ep_ctx *c, uint32_t idx) {
  return rd32(c->plan + c->nodes_off + EP_PLAN_NODE_BYTES * idx + EP_N_FLAGS);
}

/* Decode node `idx` with all its tensors; validates ids, arity, params and scratch bounds. */
static ep_status decode_node(const ep_ctx *c, uint32_t idx, node_view *v, const ep_kernel **kout) {
  const uint8_t *e = c->plan + c->nodes_off + EP_PLAN_NODE_BYTES * idx;
  ep_node *n = &v->node;
  n->op = rd16(e + EP_N_OP);
  n->n_in = e[EP_N_N_IN];
  n->n_out = e[EP_N_N_OUT];
  const ep_kernel *k = ep_kernel_for(n->op);
  if (!k || n->n_in < k->min_in || n->n_in > k->max_in || n->n_out < k->min_out || n->n_out > k->max_out) return EP_E_OP;
  uint32_t io_at = rd32(e + EP_N_IO_AT), params_at = rd32(e + EP_N_PARAMS_AT), n_params = rd32(e + EP_N_N_PARAMS);
  if (!in_bounds(io_at, (uint64_t)n->n_in + n->n_out, c->ints_count)) return EP_E_BOUNDS;
  if (!in_bounds(params_at, n_params, c->ints_count)) return EP_E_BOUNDS;
  if ((rd32(e + EP_N_FLAGS) & ~(uint32_t)EP_NODE_PROLOGUE) != 0 || rd32(e + EP_N_RESERVED) != 0) return EP_E_OP;
  n->params = (const int32_t *)(const void *)(c->plan + c->ints_off + 4u * params_at);
  n->n_params = n_params;
  uint32_t s_off = rd32(e + EP_N_SCRATCH_OFF), s_bytes = rd32(e + EP_N_SCRATCH_BYTES);
  if (!in_bounds(s_off, s_bytes, c->arena_bytes) || s_off % 16 != 0) return EP_E_BOUNDS;
  n->scratch = (c->arena && s_bytes) ? c->arena + s_off : 0;
  n->scratch_bytes = s_bytes;
  for (uint32_t i = 0; i < n->n_in + n->n_out; i++) {
    int32_t id = int_at(c, io_at + i);
    int is_out = i >= n->n_in;
    if (id < 0) {
      if (is_out) return EP_E_BOUNDS;
      n->in[i] = 0;  /* absent optional input */
      continue;
    }
    if ((uint32_t)id >= c->n_tensors) return EP_E_BOUNDS;
    uint32_t storage;
    ep_status s = decode_tensor(c, (uint32_t)id, &v->tensors[i], &storage);
    if (s) return s;
    if (is_out) {
      if (storage != EP_STORAGE_ARENA) return EP_E_TENSOR;  /* weights are read-only */
      n->out[i - n->n_in] = &v->tensors[i];
    } else {
      n->in[i] = &v->tensors[i];
    }
  }
  *kout = k;
  return EP_OK;
}

/* Arena bytes [lo, hi) of tensor `id` (already decoded once); empty for weights and absent inputs. */
static void arena_span(const ep_ctx *c, int32_t id, uint64_t *lo, uint64_t *hi) {
  *lo = *hi = 0;
  if (id < 0) return;
  const uint8_t *e = c->plan + c->tensors_off + EP_PLAN_TENSOR_BYTES * (uint32_t)id;
  if (e[EP_T_STORAGE] != EP_STORAGE_ARENA) return;
  *lo = rd32(e + EP_T_OFFSET);
  *hi = *lo + rd32(e + EP_T_NBYTES);
}

static int spans_meet(uint64_t alo, uint64_t ahi, uint64_t blo, uint64_t bhi) { return alo < bhi && blo < ahi; }

/* A node never writes bytes it reads: the memory planner keeps a node's inputs, outputs and scratch
 * apart, and a kernel may re-read an input (a Gather index) after validating it, so a plan whose
 * outputs or scratch overlap the node's inputs (or each other) is refused. */
static ep_status node_disjoint(const ep_ctx *c, uint32_t idx, const ep_node *n) {
  const uint8_t *e = c->plan + c->nodes_off + EP_PLAN_NODE_BYTES * idx;
  const uint32_t io_at = rd32(e + EP_N_IO_AT), s_lo = rd32(e + EP_N_SCRATCH_OFF);
  const uint64_t s_hi = (uint64_t)s_lo + rd32(e + EP_N_SCRATCH_BYTES);
  const uint32_t n_io = (uint32_t)n->n_in + n->n_out;
  for (uint32_t w = 0; w <= n->n_out; w++) {   /* each output, then the scratch (w == n_out) */
    uint64_t wlo = s_lo, whi = s_hi;
    if (w < n->n_out) arena_span(c, int_at(c, io_at + n->n_in + w), &wlo, &whi);
    for (uint32_t j = 0; j < n_io; j++) {
      if (j == n->n_in + w) continue;
      uint64_t lo, hi;
      arena_span(c, int_at(c, io_at + j), &lo, &hi);
      if (spans_meet(wlo, whi, lo, hi)) return EP_E_BOUNDS;
    }
  }
  return EP_OK;
}

ep_status ep_open(ep_ctx *c, const uint8_t *plan, uint32_t len) {
  if (!c) return EP_E_STATE;
  ep_memset(c, 0, sizeof *c);
  if (!plan || len < EP_PLAN_HEADER_BYTES) return EP_E_TRUNCATED;
  if (((uintptr_t)plan) % EP_PLAN_ALIGN != 0) return EP_E_ALIGN;
  if (plan[0] != 'E' || plan[1] != 'P' || plan[2] != 'L' || plan[3] != 'N') return EP_E_MAGIC;
  if (rd32(plan + EP_H_VERSION) != EP_PLAN_VERSION) return EP_E_VERSION;
  if (rd32(plan + EP_H_HEADER_BYTES) != EP_PLAN_HEADER_BYTES || rd32(plan + EP_H_FLAGS) != 0) return EP_E_MAGIC;
  if (rd32(plan + EP_H_PLAN_BYTES) != len) return EP_E_TRUNCATED;
  c->plan = plan;
  c->plan_bytes = len;
  c->n_tensors = rd32(plan + EP_H_N_TENSORS);
  c->n_nodes = rd32(plan + EP_H_N_NODES);
  c->n_inputs = rd32(plan + EP_H_N_INPUTS);
  c->n_outputs = rd32(plan + EP_H_N_OUTPUTS);
  c->tensors_off = rd32(plan + EP_H_TENSORS_OFF);
  c->nodes_off = rd32(plan + EP_H_NODES_OFF);
  c->ints_off = rd32(plan + EP_H_INTS_OFF);
  c->ints_count = rd32(plan + EP_H_INTS_COUNT);
  c->weights_off = rd32(plan + EP_H_WEIGHTS_OFF);
  c->weights_bytes = rd32(plan + EP_H_WEIGHTS_BYTES);
  c->arena_bytes = rd32(plan + EP_H_ARENA_BYTES);
  if (!in_bounds(c->tensors_off, (uint64_t)c->n_tensors * EP_PLAN_TENSOR_BYTES, len) ||
      !in_bounds(c->nodes_off, (uint64_t)c->n_nodes * EP_PLAN_NODE_BYTES, len) ||
      !in_bounds(c->ints_off, (uint64_t)c->ints_count * 4u, len) ||
      !in_bounds(c->weights_off, c->weights_bytes, len))
    return EP_E_BOUNDS;
  if (c->tensors_off % 4 || c->nodes_off % 4 || c->ints_off % 4 || c->weights_off % EP_PLAN_ALIGN) return EP_E_ALIGN;
  if ((uint64_t)c->n_inputs + c->n_outputs > c->ints_count) return EP_E_BOUNDS;
  /* Graph inputs/outputs: valid arena tensors. */
  for (uint32_t i = 0; i < c->n_inputs + c->n_outputs; i++) {
    int32_t id = int_at(c, i);
    if (id < 0 || (uint32_t)id >= c->n_tensors) return EP_E_BOUNDS;
    ep_tensor t; uint32_t storage;
    ep_status s = decode_tensor(c, (uint32_t)id, &t, &storage);
    if (s) return s;
    if (storage != EP_STORAGE_ARENA) return EP_E_TENSOR;
  }
  c->inputs_at = 0;
  c->outputs_at = c->n_inputs;
  /* Every tensor entry well-formed; every node consistent with its kernel. */
  for (uint32_t i = 0; i < c->n_tensors; i++) {
    ep_tensor t; uint32_t storage;
    ep_status s = decode_tensor(c, i, &t, &storage);
    if (s) return s;
  }
  for (uint32_t i = 0; i < c->n_nodes; i++) {
    node_view v; const ep_kernel *k;
    ep_status s = decode_node(c, i, &v, &k);
    if (s) return s;
    s = k->check(&v.node);
    if (!s) s = node_disjoint(c, i, &v.node);
    if (s) return s;
    /* Prologue nodes form a prefix and read only weights: they run once, before any input exists. */
    if (node_flags(c, i) & EP_NODE_PROLOGUE) {
      if (i != c->n_prologue) return EP_E_OP;
      const uint32_t io_at = rd32(c->plan + c->nodes_off + EP_PLAN_NODE_BYTES * i + EP_N_IO_AT);
      for (uint32_t j = 0; j < v.node.n_in; j++) {
        int32_t id = int_at(c, io_at + j);
        ep_tensor t; uint32_t storage;
        if (id < 0) continue;
        if (decode_tensor(c, (uint32_t)id, &t, &storage) || storage != EP_STORAGE_WEIGHTS) return EP_E_OP;
      }
      c->n_prologue++;
    }
  }
  c->opened = 1;
  return EP_OK;
}

uint32_t ep_arena_bytes(const ep_ctx *c) { return c && c->opened ? c->arena_bytes : 0; }

ep_status ep_bind(ep_ctx *c, uint8_t *arena, uint32_t bytes) {
  if (!c || !c->opened) return EP_E_STATE;
  if ((!arena && c->arena_bytes) || bytes < c->arena_bytes || ((uintptr_t)arena) % EP_PLAN_ALIGN != 0) return EP_E_ARENA;
  c->arena = arena;
  for (uint32_t i = 0; i < c->n_prologue; i++) {   /* once per arena: e.g. float16 weights -> float32 */
    node_view v; const ep_kernel *k;
    ep_status s = decode_node(c, i, &v, &k);
    if (!s) s = k->run(&v.node);
    if (s) { c->arena = 0; return s; }
  }
  return EP_OK;
}

ep_status ep_run(ep_ctx *c) {
  if (!c || !c->opened || (!c->arena && c->arena_bytes)) return EP_E_STATE;
  for (uint32_t i = c->n_prologue; i < c->n_nodes; i++) {
    node_view v; const ep_kernel *k;
    ep_status s = decode_node(c, i, &v, &k);
    if (s) return s;
    s = k->run(&v.node);
    if (s) return s;
  }
  return EP_OK;
}

ep_status ep_run_node(ep_ctx *c, uint32_t i) {
  if (!c || !c->opened || (!c->arena && c->arena_bytes)) return EP_E_STATE;
  if (i >= c->n_nodes) return EP_E_BOUNDS;
  if (i < c->n_prologue) return EP_OK;   /* ran in ep_bind */
  node_view v; const ep_kernel *k;
  ep_status s = decode_node(c, i, &v, &k);
  return s ? s : k->run(&v.node);
}

uint32_t ep_num_nodes(const ep_ctx *c) { return c && c->opened ? c->n_nodes : 0; }

uint32_t ep_num_inputs(const ep_ctx *c) { return c && c->opened ? c->n_inputs : 0; }
uint32_t ep_num_outputs(const ep_ctx *c) { return c && c->opened ? c->n_outputs : 0; }
int32_t ep_input_id(const ep_ctx *c, uint32_t i) { return c && c->opened && i < c->n_inputs ? int_at(c, c->inputs_at + i) : -1; }
int32_t ep_output_id(const ep_ctx *c, uint32_t i) { return c && c->opened && i < c->n_outputs ? int_at(c, c->outputs_at + i) : -1; }

uint8_t *ep_tensor_data(const ep_ctx *c, uint32_t id) {
  if (!c || !c->opened || !c->arena || id >= c->n_tensors) return 0;
  ep_tensor t; uint32_t storage;
  if (decode_tensor(c, id, &t, &storage)) return 0;
  return t.data;
}

ep_status ep_tensor_describe(const ep_ctx *c, uint32_t id, ep_tensor_info *out) {
  if (!c || !c->opened || !out) return EP_E_STATE;
  if (id >= c->n_tensors) return EP_E_BOUNDS;
  ep_tensor t; uint32_t storage;
  ep_status s = decode_tensor(c, id, &t, &storage);
  if (s) return s;
  out->dtype = t.dtype;
  out->rank = t.rank;
  for (uint32_t i = 0; i < EP_MAX_RANK; i++) out->dims[i] = t.dims[i];
  out->nbytes = (uint32_t)(t.numel * ep_dtype_size(t.dtype));
  return EP_OK;
}

/* Tests of the kernels' shape functions against a static plan: node by node, each output's dims are
 * derived by the kernel's shape() from the plan's input dims and compared with the plan's, and scratch()
 * with the node's scratch_bytes. *what: 0 ok, 1 dims differ, 2 scratch differs, 3 shape() refused. */
ep_status ep_shapes_consistent(const ep_ctx *c, uint32_t *node, uint32_t *what, uint32_t *checked) {
  if (!c || !c->opened || !node || !what || !checked) return EP_E_STATE;
  *node = 0; *what = 0; *checked = 0;
  for (uint32_t i = 0; i < c->n_nodes; i++) {
    node_view v; const ep_kernel *k;
    ep_status s = decode_node(c, i, &v, &k);
    if (s) return s;
    const ep_shape_entry *se = ep_shape_for(v.node.op);
    if (!se || !se->shape) continue;
    int32_t want[EP_MAX_IO][EP_MAX_RANK];
    for (uint32_t o = 0; o < v.node.n_out; o++) {
      for (uint32_t d = 0; d < EP_MAX_RANK; d++) { want[o][d] = v.node.out[o]->dims[d]; v.node.out[o]->dims[d] = -1; }
    }
    *node = i;
    s = se->shape(&v.node);
    if (s) { *what = 3; return s; }
    for (uint32_t o = 0; o < v.node.n_out; o++)
      for (uint32_t d = 0; d < v.node.out[o]->rank; d++)
        if (v.node.out[o]->dims[d] != want[o][d]) { *what = 1; return EP_E_SHAPE; }
    const uint32_t need = se->scratch ? se->scratch(&v.node) : 0;
    if (need != v.node.scratch_bytes) { *what = 2; return EP_E_ARENA; }
    ++*checked;
  }
  return EP_OK;
}
EP_COLD_FILE_END
