/* Plan reader and executor. The plan is hostile until ep_open() has checked it: every read goes
 * through ep_rd32() with an explicit bound, every tensor must fit its section, every node must pass
 * its kernel's check() against the declared shapes before the first run (version 2: against the
 * shapes ep_resolve() derives, see resolve.c). */
#include "plan_read.h"
#include "ep_shape.h"
#include "control.h"
#include "ep_parallel.h"
EP_COLD_FILE_BEGIN   /* no benchmark model spends time here: smallest code (also in the one-step emcc build) */

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

uint64_t ep_state_layout(const ep_ctx *c, uint8_t *base, ep_state_view *v) {
  const uint64_t nt = c->n_tensors, nn = c->n_nodes;
  uint64_t at = 0;
#define EP_PART(field, type, count) \
  do { if (base) v->field = (type *)(void *)(base + at); at += ((uint64_t)(count) * sizeof(type) + 63u) & ~(uint64_t)63u; } while (0)
  EP_PART(in_dims, int32_t, (uint64_t)c->n_inputs * EP_MAX_RANK);
  EP_PART(in_save, int32_t, (uint64_t)c->n_inputs * EP_MAX_RANK);
  EP_PART(t_dims, int32_t, nt * EP_MAX_RANK);
  EP_PART(t_off, uint32_t, nt);
  EP_PART(t_bytes, uint32_t, nt);
  EP_PART(s_off, uint32_t, nn);
  EP_PART(s_bytes, uint32_t, nn);
  EP_PART(s_step, int32_t, nn);
  EP_PART(order, uint32_t, nt + nn);
  EP_PART(max_off, uint32_t, nt + nn);
  EP_PART(max_bytes, uint32_t, nt + nn);
  EP_PART(values, uint8_t, c->values_bytes);
  EP_PART(seen, uint8_t, c->value_inputs ? c->values_bytes : 0u);
  EP_PART(t_run, uint8_t, nt);
#undef EP_PART
  return at;
}

/* Version 1, or version 2 before a state is set: the tensor entry as written; data NULL when arena is NULL. */
static ep_status decode_entry(const ep_ctx *c, uint32_t id, ep_tensor *t, uint32_t *storage) {
  const uint8_t *e = ep_tensor_entry(c, id);
  const int v2 = c->version == EP_PLAN_VERSION_DYNAMIC;
  t->dtype = e[EP_T_DTYPE];
  t->rank = e[EP_T_RANK];
  *storage = e[EP_T_STORAGE];
  const uint32_t flags = e[EP_T_FLAGS];
  const uint32_t off = ep_rd32(e + EP_T_OFFSET), nbytes = ep_rd32(e + EP_T_NBYTES);
  const uint32_t esize = ep_dtype_size(t->dtype);
  if (esize == 0 || t->rank > EP_MAX_RANK || (flags & ~(v2 ? (uint32_t)EP_TENSOR_DYNAMIC : 0u)) != 0) return EP_E_TENSOR;
  if (ep_rd32(e + EP_T_RESERVED) != 0) return EP_E_TENSOR;
  uint64_t numel = 1;
  int unresolved = 0;
  for (uint32_t i = 0; i < EP_MAX_RANK; i++) {
    const int32_t d = (int32_t)ep_rd32(e + EP_T_DIMS + 4 * i);
    if (i >= t->rank) { if (d != 0) return EP_E_TENSOR; t->dims[i] = 0; continue; }
    if (d < 0 && !(d == -1 && (flags & EP_TENSOR_DYNAMIC))) return EP_E_TENSOR;
    t->dims[i] = d;
    if (d < 0) { unresolved = 1; continue; }
    numel *= (uint64_t)d;
    if (numel > 0xFFFFFFFFull) return EP_E_TENSOR;
  }
  if (unresolved && *storage != EP_STORAGE_ARENA) return EP_E_TENSOR;   /* weights and values have fixed dims */
  t->numel = unresolved ? 0 : numel;
  if (off % esize != 0) return EP_E_TENSOR;
  if (*storage == EP_STORAGE_ARENA) {
    if (v2) {   /* the core places arena tensors: no offset in the plan, and the size only when it is fixed */
      if (off != 0 || nbytes != (unresolved ? 0u : numel * esize)) return EP_E_TENSOR;
      t->data = 0;
      return EP_OK;
    }
    if (numel * esize != nbytes) return EP_E_TENSOR;
    if (!ep_in_bounds(off, nbytes, c->arena_bytes)) return EP_E_BOUNDS;
    t->data = c->arena ? c->arena + off : 0;
  } else if (numel * esize != nbytes) {
    return EP_E_TENSOR;
  } else if (*storage == EP_STORAGE_WEIGHTS) {
    if (!ep_in_bounds(off, nbytes, c->weights_bytes)) return EP_E_BOUNDS;
    t->data = (uint8_t *)(uintptr_t)(c->plan + c->weights_off + off);
  } else if (*storage == EP_STORAGE_VALUES && v2) {
    if (!ep_in_bounds(off, nbytes, c->values_bytes)) return EP_E_BOUNDS;
    t->data = 0;
  } else {
    return EP_E_TENSOR;
  }
  return EP_OK;
}

ep_status ep_decode_tensor(const ep_ctx *c, uint32_t id, ep_tensor *t, uint32_t *storage) {
  ep_status s = decode_entry(c, id, t, storage);
  if (s || c->version != EP_PLAN_VERSION_DYNAMIC || !c->state) return s;
  /* version 2 with a state: dims as resolved so far, data where it lives now */
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  const int32_t *d = sv.t_dims + (uint64_t)EP_MAX_RANK * id;
  uint64_t numel = 1;
  int unresolved = 0;
  for (uint32_t i = 0; i < t->rank; i++) {
    t->dims[i] = d[i];
    if (d[i] < 0) unresolved = 1; else numel *= (uint64_t)d[i];
  }
  t->numel = unresolved || numel > 0xFFFFFFFFull ? 0 : numel;
  const uint8_t *e = ep_tensor_entry(c, id);
  if (*storage == EP_STORAGE_VALUES) t->data = sv.values + ep_rd32(e + EP_T_OFFSET);
  else if (*storage == EP_STORAGE_ARENA) t->data = c->resolved && c->arena ? c->arena + sv.t_off[id] : 0;
  return EP_OK;
}

static uint32_t node_flags(const ep_ctx *c, uint32_t idx) { return ep_rd32(ep_node_entry(c, idx) + EP_N_FLAGS); }

ep_status ep_decode_node(const ep_ctx *c, uint32_t idx, ep_node_view *v, const ep_kernel **kout) {
  const uint8_t *e = ep_node_entry(c, idx);
  const int v2 = c->version == EP_PLAN_VERSION_DYNAMIC;
  ep_node *n = &v->node;
  n->op = rd16(e + EP_N_OP);
  n->n_in = e[EP_N_N_IN];
  n->n_out = e[EP_N_N_OUT];
  const ep_kernel *k = ep_kernel_for(n->op);
  if (!k || n->n_in < k->min_in || n->n_in > k->max_in || n->n_out < k->min_out || n->n_out > k->max_out) return EP_E_OP;
  const uint32_t io_at = ep_rd32(e + EP_N_IO_AT), params_at = ep_rd32(e + EP_N_PARAMS_AT), n_params = ep_rd32(e + EP_N_N_PARAMS);
  if (!ep_in_bounds(io_at, (uint64_t)n->n_in + n->n_out, c->ints_count)) return EP_E_BOUNDS;
  if (!ep_in_bounds(params_at, n_params, c->ints_count)) return EP_E_BOUNDS;
  const uint32_t known = v2 ? (uint32_t)(EP_NODE_PROLOGUE | EP_NODE_RESOLVE) : (uint32_t)EP_NODE_PROLOGUE;
  if ((ep_rd32(e + EP_N_FLAGS) & ~known) != 0 || ep_rd32(e + EP_N_RESERVED) != 0) return EP_E_OP;
  n->params = (const int32_t *)(const void *)(c->plan + c->ints_off + 4u * params_at);
  n->n_params = n_params;
  const uint32_t s_off = ep_rd32(e + EP_N_SCRATCH_OFF), s_bytes = ep_rd32(e + EP_N_SCRATCH_BYTES);
  if (v2) {   /* the core sizes and places scratch from the resolved shapes */
    if (s_off != 0 || s_bytes != 0) return EP_E_BOUNDS;
    n->scratch = 0;
    n->scratch_bytes = 0;
    if (c->state) {
      ep_state_view sv;
      ep_state_layout(c, c->state, &sv);
      n->scratch_bytes = sv.s_bytes[idx];
      n->scratch = c->resolved && c->arena && n->scratch_bytes ? c->arena + sv.s_off[idx] : 0;
    }
  } else {
    if (!ep_in_bounds(s_off, s_bytes, c->arena_bytes) || s_off % 16 != 0) return EP_E_BOUNDS;
    n->scratch = (c->arena && s_bytes) ? c->arena + s_off : 0;
    n->scratch_bytes = s_bytes;
  }
  for (uint32_t i = 0; i < n->n_in + n->n_out; i++) {
    const int32_t id = ep_int_at(c, io_at + i);
    const int is_out = i >= n->n_in;
    if (id < 0) {
      if (is_out) return EP_E_BOUNDS;
      n->in[i] = 0;  /* absent optional input */
      continue;
    }
    if ((uint32_t)id >= c->n_tensors) return EP_E_BOUNDS;
    uint32_t storage;
    const ep_status s = ep_decode_tensor(c, (uint32_t)id, &v->tensors[i], &storage);
    if (s) return s;
    if (is_out) {
      if (storage == EP_STORAGE_WEIGHTS) return EP_E_TENSOR;  /* weights are read-only */
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
  const uint8_t *e = ep_tensor_entry(c, (uint32_t)id);
  if (e[EP_T_STORAGE] != EP_STORAGE_ARENA) return;
  *lo = ep_rd32(e + EP_T_OFFSET);
  *hi = *lo + ep_rd32(e + EP_T_NBYTES);
}

static int spans_meet(uint64_t alo, uint64_t ahi, uint64_t blo, uint64_t bhi) { return alo < bhi && blo < ahi; }

/* A node never writes bytes it reads: the memory planner keeps a node's inputs, outputs and scratch
 * apart, and a kernel may re-read an input (a Gather index) after validating it, so a plan whose
 * outputs or scratch overlap the node's inputs (or each other) is refused. */
static ep_status node_disjoint(const ep_ctx *c, uint32_t idx, const ep_node *n) {
  const uint8_t *e = ep_node_entry(c, idx);
  const uint32_t io_at = ep_rd32(e + EP_N_IO_AT), s_lo = ep_rd32(e + EP_N_SCRATCH_OFF);
  const uint64_t s_hi = (uint64_t)s_lo + ep_rd32(e + EP_N_SCRATCH_BYTES);
  const uint32_t n_io = (uint32_t)n->n_in + n->n_out;
  for (uint32_t w = 0; w <= n->n_out; w++) {   /* each output, then the scratch (w == n_out) */
    uint64_t wlo = s_lo, whi = s_hi;
    if (w < n->n_out) arena_span(c, ep_int_at(c, io_at + n->n_in + w), &wlo, &whi);
    for (uint32_t j = 0; j < n_io; j++) {
      if (j == n->n_in + w) continue;
      uint64_t lo, hi;
      arena_span(c, ep_int_at(c, io_at + j), &lo, &hi);
      if (spans_meet(wlo, whi, lo, hi)) return EP_E_BOUNDS;
    }
  }
  return EP_OK;
}

/* Version 2: the arena root of tensor id (itself when it owns its bytes), or -1 outside the arena. */
static int32_t root_of(const ep_ctx *c, int32_t id) { return id < 0 ? -1 : ep_life(c, (uint32_t)id, 0); }

/* Version 2, per node: lifetimes cover the step (a body node's: its main control node's), outputs have roots of
 * their own (a VIEW's may be its input's), resolve-time nodes read only what exists while resolving and write the
 * values region. The core's planner gives tensors whose lifetimes meet disjoint bytes, so these rules keep a
 * node's writes off its reads. */
static ep_status check_node_v2(const ep_ctx *c, uint32_t idx, int32_t step, const ep_node *n) {
  const uint8_t *e = ep_node_entry(c, idx);
  const uint32_t io_at = ep_rd32(e + EP_N_IO_AT), flags = node_flags(c, idx);
  const int resolve = (flags & EP_NODE_RESOLVE) != 0;
  if (resolve && (flags & EP_NODE_PROLOGUE)) return EP_E_OP;
  if ((ep_is_control(n->op) || ep_sets_dims(n->op)) && (flags || idx < c->n_prologue)) return EP_E_OP;
  const ep_shape_entry *se = ep_shape_for(n->op);
  for (uint32_t j = 0; j < (uint32_t)n->n_in + n->n_out; j++) {
    const int32_t id = ep_int_at(c, io_at + j);
    if (id < 0) continue;
    const uint8_t *t = ep_tensor_entry(c, (uint32_t)id);
    const uint32_t storage = t[EP_T_STORAGE];
    const int is_out = j >= n->n_in;
    if (is_out && (t[EP_T_FLAGS] & EP_TENSOR_DYNAMIC) && !(se && se->shape) && !ep_is_control(n->op)) return EP_E_OP;
    if (resolve) {   /* SHAPE reads only dims, so its input may be anything */
      if (is_out ? storage != EP_STORAGE_VALUES
                 : (storage == EP_STORAGE_ARENA && n->op != EP_OP_SHAPE)) return EP_E_OP;
      continue;
    }
    if (is_out && storage == EP_STORAGE_VALUES) return EP_E_OP;
    if (storage != EP_STORAGE_ARENA) continue;
    const int32_t r = root_of(c, id);
    if (ep_life(c, (uint32_t)r, 1) > step || ep_life(c, (uint32_t)r, 2) < step) return EP_E_BOUNDS;
    if (!is_out) continue;
    for (uint32_t k = 0; k < (uint32_t)n->n_in + n->n_out; k++) {   /* a write never shares bytes with another operand */
      if (k == j) continue;
      const int32_t other = root_of(c, ep_int_at(c, io_at + k));
      if (other == r && !(n->op == EP_OP_VIEW && k == 0)) return EP_E_BOUNDS;
    }
  }
  return EP_OK;
}

/* Version 2 tables: lifetimes (each arena tensor names a root that owns bytes: itself, or a tensor that is
 * its own root; roots' lifetimes inside [-1, n_nodes]) and the input bounds in the int pool. */
static ep_status open_v2_tables(ep_ctx *c) {
  if (c->life_off % 4 || !ep_in_bounds(c->life_off, (uint64_t)c->n_tensors * EP_PLAN_LIFE_BYTES, c->plan_bytes)) return EP_E_BOUNDS;
  uint64_t words = 0;
  for (uint32_t i = 0; i < c->n_inputs; i++) words += 2u * ep_tensor_entry(c, (uint32_t)ep_int_at(c, i))[EP_T_RANK];
  if (!ep_in_bounds(c->bounds_at, words, c->ints_count)) return EP_E_BOUNDS;
  for (uint32_t i = 0, w = c->bounds_at; i < c->n_inputs; i++) {
    const uint8_t *t = ep_tensor_entry(c, (uint32_t)ep_int_at(c, i));
    for (uint32_t k = 0; k < t[EP_T_RANK]; k++, w += 2) {
      const int32_t lo = ep_int_at(c, w), hi = ep_int_at(c, w + 1);
      if (lo < 0 || hi < 0 || (hi && lo > hi)) return EP_E_BOUNDS;
    }
  }
  for (uint32_t id = 0; id < c->n_tensors; id++) {
    const int32_t r = ep_life(c, id, 0), first = ep_life(c, id, 1), last = ep_life(c, id, 2);
    const uint32_t storage = ep_tensor_entry(c, id)[EP_T_STORAGE];
    if (storage != EP_STORAGE_ARENA) { if (r != -1 || first != 0 || last != 0) return EP_E_BOUNDS; continue; }
    if (r < 0 || (uint32_t)r >= c->n_tensors || ep_tensor_entry(c, (uint32_t)r)[EP_T_STORAGE] != EP_STORAGE_ARENA ||
        ep_life(c, (uint32_t)r, 0) != r) return EP_E_BOUNDS;
    if (r != (int32_t)id) { if (first != 0 || last != 0) return EP_E_BOUNDS; continue; }
    if (first < -1 || last > (int32_t)c->n_nodes || first > last) return EP_E_BOUNDS;
  }
  for (uint32_t i = 0; i < c->n_inputs + c->n_outputs; i++) {   /* inputs live from the start, outputs to the end */
    const int32_t id = ep_int_at(c, i), r = root_of(c, id);
    if (i < c->n_inputs && ep_tensor_entry(c, (uint32_t)id)[EP_T_STORAGE] == EP_STORAGE_VALUES) continue;
    if (i < c->n_inputs ? (r != id || ep_life(c, (uint32_t)r, 1) != -1) : ep_life(c, (uint32_t)r, 2) != (int32_t)c->n_nodes)
      return EP_E_BOUNDS;
  }
  return EP_OK;
}

/* The bodies of control node n (held by main step `step`, `depth` bodies deep): each begins where the previous
 * body ended (depth first: a node's bodies, then the bodies inside them), so that every node after the main
 * sequence belongs to exactly one body, after its control node, and the walk is linear in the plan's size. */
static ep_status open_bodies(const ep_ctx *c, const ep_node *n, int32_t step, uint32_t depth, uint32_t *cursor) {
  ep_ctrl k;
  ep_status s = ep_ctrl_open(c, n, step, &k);
  if (s) return s;
  if (depth + 1 >= EP_MAX_DEPTH) return EP_E_OP;
  for (uint32_t b = 0; b < k.n_bodies; b++) {
    if (k.begin[b] != *cursor) return EP_E_BOUNDS;
    *cursor = k.end[b];
  }
  for (uint32_t b = 0; b < k.n_bodies; b++) {
    for (uint32_t i = k.begin[b]; i < k.end[b]; i++) {
      ep_node_view v; const ep_kernel *kk;
      if ((s = ep_decode_node(c, i, &v, &kk))) return s;
      if ((node_flags(c, i) & EP_NODE_PROLOGUE) || ep_sets_dims(v.node.op)) return EP_E_OP;   /* not in a body */
      if ((s = check_node_v2(c, i, step, &v.node))) return s;
      if (ep_is_control(v.node.op) && (s = open_bodies(c, &v.node, step, depth + 1, cursor))) return s;
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
  const uint32_t version = ep_rd32(plan + EP_H_VERSION);
  if (version != EP_PLAN_VERSION && version != EP_PLAN_VERSION_DYNAMIC) return EP_E_VERSION;
  const int v2 = version == EP_PLAN_VERSION_DYNAMIC;
  const uint32_t header = v2 ? EP_PLAN_HEADER_BYTES_V2 : EP_PLAN_HEADER_BYTES;
  if (len < header) return EP_E_TRUNCATED;
  if (ep_rd32(plan + EP_H_HEADER_BYTES) != header || ep_rd32(plan + EP_H_FLAGS) != 0) return EP_E_MAGIC;
  if (ep_rd32(plan + EP_H_PLAN_BYTES) != len) return EP_E_TRUNCATED;
  c->version = version;
  c->plan = plan;
  c->plan_bytes = len;
  c->n_tensors = ep_rd32(plan + EP_H_N_TENSORS);
  c->n_nodes = ep_rd32(plan + EP_H_N_NODES);
  c->n_main = c->n_nodes;
  c->n_inputs = ep_rd32(plan + EP_H_N_INPUTS);
  c->n_outputs = ep_rd32(plan + EP_H_N_OUTPUTS);
  c->tensors_off = ep_rd32(plan + EP_H_TENSORS_OFF);
  c->nodes_off = ep_rd32(plan + EP_H_NODES_OFF);
  c->ints_off = ep_rd32(plan + EP_H_INTS_OFF);
  c->ints_count = ep_rd32(plan + EP_H_INTS_COUNT);
  c->weights_off = ep_rd32(plan + EP_H_WEIGHTS_OFF);
  c->weights_bytes = ep_rd32(plan + EP_H_WEIGHTS_BYTES);
  c->arena_bytes = ep_rd32(plan + EP_H_ARENA_BYTES);
  if (!ep_in_bounds(c->tensors_off, (uint64_t)c->n_tensors * EP_PLAN_TENSOR_BYTES, len) ||
      !ep_in_bounds(c->nodes_off, (uint64_t)c->n_nodes * EP_PLAN_NODE_BYTES, len) ||
      !ep_in_bounds(c->ints_off, (uint64_t)c->ints_count * 4u, len) ||
      !ep_in_bounds(c->weights_off, c->weights_bytes, len) || c->n_nodes >= 0x7FFFFFFFu)
    return EP_E_BOUNDS;
  if (c->tensors_off % 4 || c->nodes_off % 4 || c->ints_off % 4 || c->weights_off % EP_PLAN_ALIGN) return EP_E_ALIGN;
  if ((uint64_t)c->n_inputs + c->n_outputs > c->ints_count) return EP_E_BOUNDS;
  if (v2) {   /* the version-2 header words, before any tensor entry is read */
    for (uint32_t off = EP_H_RESERVED2; off < EP_PLAN_HEADER_BYTES_V2; off += 4) if (ep_rd32(plan + off)) return EP_E_MAGIC;
    c->life_off = ep_rd32(plan + EP_H_LIFE_OFF);
    c->bounds_at = ep_rd32(plan + EP_H_BOUNDS_AT);
    c->values_bytes = ep_rd32(plan + EP_H_VALUES_BYTES);
    c->max_arena_bytes = ep_rd32(plan + EP_H_MAX_ARENA_BYTES);
    if (c->arena_bytes != 0 || c->values_bytes > (16u << 20)) return EP_E_BOUNDS;
    const uint32_t n_main = ep_rd32(plan + EP_H_N_MAIN);   /* 0: no bodies */
    if (n_main > c->n_nodes) return EP_E_BOUNDS;
    c->n_main = n_main ? n_main : c->n_nodes;
  }
  /* Graph inputs/outputs: valid arena tensors. */
  for (uint32_t i = 0; i < c->n_inputs + c->n_outputs; i++) {
    const int32_t id = ep_int_at(c, i);
    if (id < 0 || (uint32_t)id >= c->n_tensors) return EP_E_BOUNDS;
    ep_tensor t; uint32_t storage;
    const ep_status s = decode_entry(c, (uint32_t)id, &t, &storage);
    if (s) return s;
    /* a version-2 input may be a value input: its values, in the values region, decide shapes */
    if (storage == EP_STORAGE_VALUES && v2 && i < c->n_inputs) { c->value_inputs++; continue; }
    if (storage != EP_STORAGE_ARENA) return EP_E_TENSOR;
  }
  c->inputs_at = 0;
  c->outputs_at = c->n_inputs;
  /* Every tensor entry well-formed; every node consistent with its kernel. */
  for (uint32_t i = 0; i < c->n_tensors; i++) {
    ep_tensor t; uint32_t storage;
    const ep_status s = decode_entry(c, i, &t, &storage);
    if (s) return s;
  }
  if (v2) {
    const ep_status s = open_v2_tables(c);
    if (s) return s;
  }
  uint32_t cursor = c->n_main;   /* where the next body must begin */
  for (uint32_t i = 0; i < c->n_main; i++) {
    ep_node_view v; const ep_kernel *k;
    ep_status s = ep_decode_node(c, i, &v, &k);
    if (s) return s;
    if (v2) s = check_node_v2(c, i, (int32_t)i, &v.node);   /* shapes are checked per resolve (resolve.c) */
    else s = ep_is_control(v.node.op) || ep_sets_dims(v.node.op) ? EP_E_OP : k->check(&v.node);
    if (!s && !v2) s = node_disjoint(c, i, &v.node);
    if (!s && ep_is_control(v.node.op)) s = open_bodies(c, &v.node, (int32_t)i, 0, &cursor);
    if (s) return s;
    /* Prologue nodes form a prefix and read only weights: they run once, before any input exists. */
    if (node_flags(c, i) & EP_NODE_PROLOGUE) {
      if (i != c->n_prologue) return EP_E_OP;
      const uint32_t io_at = ep_rd32(ep_node_entry(c, i) + EP_N_IO_AT);
      for (uint32_t j = 0; j < v.node.n_in; j++) {
        const int32_t id = ep_int_at(c, io_at + j);
        ep_tensor t; uint32_t storage;
        if (id < 0) continue;
        if (decode_entry(c, (uint32_t)id, &t, &storage) || storage != EP_STORAGE_WEIGHTS) return EP_E_OP;
      }
      if (v2) {   /* its outputs are fixed and live for the whole run: the core pins them at the arena's start */
        for (uint32_t o = 0; o < v.node.n_out; o++) {
          const int32_t id = ep_int_at(c, io_at + v.node.n_in + o);
          if (root_of(c, id) != id || ep_life(c, (uint32_t)id, 1) != -1 || ep_life(c, (uint32_t)id, 2) != (int32_t)c->n_nodes ||
              (ep_tensor_entry(c, (uint32_t)id)[EP_T_FLAGS] & EP_TENSOR_DYNAMIC)) return EP_E_OP;
          const uint64_t end = (uint64_t)c->prologue_bytes + ((v.node.out[o]->numel * ep_dtype_size(v.node.out[o]->dtype) + 63u) & ~63ull);
          if (end > 0xFFFFFFFFull) return EP_E_BOUNDS;
          c->prologue_bytes = (uint32_t)end;
        }
      }
      c->n_prologue++;
    }
  }
  if (cursor != c->n_nodes) return EP_E_BOUNDS;   /* every node after the main sequence is in exactly one body */
  if (v2 && ep_state_layout(c, 0, 0) > 0x7FFFFFFFull) return EP_E_BOUNDS;
  c->opened = 1;
  return EP_OK;
}

uint32_t ep_arena_bytes(const ep_ctx *c) {
  if (!c || !c->opened) return 0;
  if (c->version == EP_PLAN_VERSION_DYNAMIC && !c->resolved) return 0;
  return c->arena_bytes;
}

ep_status ep_run_prologue(ep_ctx *c) {
  for (uint32_t i = 0; i < c->n_prologue; i++) {   /* once per arena: e.g. float16 weights -> float32 */
    ep_node_view v; const ep_kernel *k;
    ep_status s = ep_decode_node(c, i, &v, &k);
    if (!s) s = k->run(&v.node);
    if (s) return s;
  }
  return EP_OK;
}

ep_status ep_bind(ep_ctx *c, uint8_t *arena, uint32_t bytes) {
  if (!c || !c->opened) return EP_E_STATE;
  if (c->version == EP_PLAN_VERSION_DYNAMIC && !c->resolved) return EP_E_STATE;
  if ((!arena && c->arena_bytes) || bytes < c->arena_bytes || ((uintptr_t)arena) % EP_PLAN_ALIGN != 0) return EP_E_ARENA;
  c->arena = arena;
  c->bound_bytes = bytes;
  /* v2 pins the prologue's outputs at the arena's start for every shape: rerun only in a new arena */
  if (c->version == EP_PLAN_VERSION_DYNAMIC && c->prologue_arena == arena) return EP_OK;
  const ep_status s = ep_run_prologue(c);
  if (s) { c->arena = 0; c->prologue_arena = 0; return s; }
  c->prologue_arena = arena;
  return EP_OK;
}

static ep_status runnable(const ep_ctx *c) {
  if (!c || !c->opened || (!c->arena && c->arena_bytes)) return EP_E_STATE;
  if (c->version == EP_PLAN_VERSION_DYNAMIC &&
      (!c->resolved || c->prologue_arena != c->arena || c->bound_bytes < c->arena_bytes)) return EP_E_STATE;
  return EP_OK;
}

/* A main node that sets its outputs' extents (kernels/datadep.c): its outputs start at their capacities (the
 * shape function: an earlier run left its own counts), the kernel writes data and extents, then the later nodes
 * take dims from them within what was placed for the capacities (resolve.c). */
static ep_status run_sets_dims(ep_ctx *c, uint32_t i, ep_node_view *v, const ep_kernel *k) {
  ep_node *n = &v->node;
  ep_status s = ep_shape_for(n->op)->shape(n);
  if (s || (s = k->check(n)) || (s = k->run(n))) return s;
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  const uint32_t io_at = ep_rd32(ep_node_entry(c, i) + EP_N_IO_AT);
  for (uint32_t o = 0; o < n->n_out; o++) {
    const uint32_t id = (uint32_t)ep_int_at(c, io_at + n->n_in + o);
    if (n->out[o]->numel * ep_dtype_size(n->out[o]->dtype) > sv.t_bytes[id]) return EP_E_SHAPE;
    for (uint32_t d = 0; d < n->out[o]->rank; d++) sv.t_dims[id * EP_MAX_RANK + d] = n->out[o]->dims[d];
  }
  c->run_set_dims = 1;
  return ep_resolve_after(c, i + 1);
}

/* Node i, `depth` bodies deep (0: the main sequence). */
static ep_status run_one(ep_ctx *c, uint32_t i, uint32_t depth) {
  if (node_flags(c, i) & EP_NODE_RESOLVE) return EP_OK;   /* ran in ep_resolve */
  ep_node_view v; const ep_kernel *k;
  const ep_status s = ep_decode_node(c, i, &v, &k);
  if (s) return s;
  if (ep_is_control(v.node.op)) return ep_ctrl_run(c, i, &v.node, depth);
  if (!ep_sets_dims(v.node.op)) return k->run(&v.node);
  return run_sets_dims(c, i, &v, k);
}

ep_status ep_run_range(ep_ctx *c, uint32_t begin, uint32_t end, uint32_t depth) {
  for (uint32_t i = begin; i < end; i++) {
    const ep_status s = run_one(c, i, depth);
    if (s) {   /* a failing body stops the run with its status; the innermost failing node is named */
      if (c->failed_node >= c->n_nodes) c->failed_node = i;
      return s;
    }
  }
  return EP_OK;
}

ep_status ep_run_node(ep_ctx *c, uint32_t i) {
  const ep_status ok = runnable(c);
  if (ok) return ok;
  if (i >= c->n_nodes) return EP_E_BOUNDS;
  if (i < c->n_prologue || i >= c->n_main) return EP_OK;   /* ran in ep_bind, or runs inside its control node */
  return run_one(c, i, 0);
}

ep_status ep_run(ep_ctx *c) {
  const ep_status ok = runnable(c);
  if (ok) return ok;
  c->failed_node = c->n_nodes;
  ep_pool_hot(1);   /* the pool's workers poll between the jobs of the run, not sleep (parallel.c) */
  const ep_status s = ep_run_range(c, c->n_prologue, c->n_main, 0);
  ep_pool_hot(0);
  return s;
}

uint32_t ep_num_nodes(const ep_ctx *c) { return c && c->opened ? c->n_nodes : 0; }

uint32_t ep_num_inputs(const ep_ctx *c) { return c && c->opened ? c->n_inputs : 0; }
uint32_t ep_num_outputs(const ep_ctx *c) { return c && c->opened ? c->n_outputs : 0; }
int32_t ep_input_id(const ep_ctx *c, uint32_t i) { return c && c->opened && i < c->n_inputs ? ep_int_at(c, c->inputs_at + i) : -1; }
int32_t ep_output_id(const ep_ctx *c, uint32_t i) { return c && c->opened && i < c->n_outputs ? ep_int_at(c, c->outputs_at + i) : -1; }

uint8_t *ep_tensor_data(const ep_ctx *c, uint32_t id) {
  if (!c || !c->opened || !c->arena || id >= c->n_tensors) return 0;
  ep_tensor t; uint32_t storage;
  if (ep_decode_tensor(c, id, &t, &storage)) return 0;
  return t.data;
}

ep_status ep_tensor_describe(const ep_ctx *c, uint32_t id, ep_tensor_info *out) {
  if (!c || !c->opened || !out) return EP_E_STATE;
  if (id >= c->n_tensors) return EP_E_BOUNDS;
  ep_tensor t; uint32_t storage;
  const ep_status s = ep_decode_tensor(c, id, &t, &storage);
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
  if (!c || !c->opened || !node || !what || !checked || c->version != EP_PLAN_VERSION) return EP_E_STATE;
  *node = 0; *what = 0; *checked = 0;
  for (uint32_t i = 0; i < c->n_nodes; i++) {
    ep_node_view v; const ep_kernel *k;
    ep_status s = ep_decode_node(c, i, &v, &k);
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
