/* If, Loop and Scan in the core: validating their words against the plan (ep_open), resolving their bodies'
 * shapes (ep_resolve) and running them (ep_run). A body is a node range after the main sequence; its tensors
 * are tensors of the same table (outer-scope values too), all live at the step of the main node that holds
 * it, so no two of them share bytes. The node moves values in and out of its bodies by copying. */
#include "control.h"
EP_COLD_FILE_BEGIN

static int32_t root_of(const ep_ctx *c, int32_t id) { return ep_life(c, (uint32_t)id, 0); }

/* Tensor id exists and, in the arena, lives at `step`; a body input the node writes (writes) is an arena root. */
static ep_status live_at(const ep_ctx *c, int32_t id, int32_t step, int writes) {
  if (id < 0 || (uint32_t)id >= c->n_tensors) return EP_E_BOUNDS;
  if (ep_tensor_entry(c, (uint32_t)id)[EP_T_STORAGE] != EP_STORAGE_ARENA) return writes ? EP_E_TENSOR : EP_OK;
  const int32_t r = root_of(c, id);
  if (writes && r != id) return EP_E_TENSOR;   /* the node writes body inputs: they own their bytes */
  if (ep_life(c, (uint32_t)r, 1) > step || ep_life(c, (uint32_t)r, 2) < step) return EP_E_BOUNDS;
  return EP_OK;
}

ep_status ep_ctrl_open(const ep_ctx *c, const ep_node *n, int32_t step, ep_ctrl *k) {
  ep_status s = ep_ctrl_decode(n, k);
  if (s) return s;
  for (uint32_t b = 0; b < k->n_bodies; b++)
    if (k->begin[b] < c->n_main || k->end[b] > c->n_nodes) return EP_E_BOUNDS;
  for (uint32_t j = 0; j < k->n_body_in; j++) {
    if (n->op == EP_OP_LOOP && j < 2 && k->body_in[j] == -1) continue;   /* iteration number or condition unused */
    if ((s = live_at(c, k->body_in[j], step, 1))) return s;
  }
  for (uint32_t j = 0; j < k->n_body_out; j++)
    if ((s = live_at(c, k->body_out[j], step, 0))) return s;
  return EP_OK;
}

/* -- resolving ------------------------------------------------------------------------------------------- */

static int32_t *dims_of(const ep_state_view *sv, int32_t id) { return sv->t_dims + (uint64_t)EP_MAX_RANK * (uint32_t)id; }

/* Tensor id takes the dims of a value (rank, dims, dtype): the same rank (a fixed dim of the plan must agree),
 * or fixed dims in the plan with as many elements (Scan-8's batch of 1, squeezed by the packager). */
static ep_status take_dims(const ep_ctx *c, const ep_state_view *sv, int32_t id, uint32_t rank, const int32_t *dims, uint32_t dtype) {
  const uint8_t *e = ep_tensor_entry(c, (uint32_t)id);
  if (e[EP_T_DTYPE] != dtype) return EP_E_DTYPE;
  if (e[EP_T_STORAGE] != EP_STORAGE_ARENA) return EP_E_TENSOR;
  int32_t *to = dims_of(sv, id);
  uint64_t want = 1, have = 1;
  for (uint32_t k = 0; k < rank; k++) want *= (uint64_t)dims[k];
  if (e[EP_T_RANK] == rank) {
    for (uint32_t k = 0; k < rank; k++) {
      const int32_t fixed = (int32_t)ep_rd32(e + EP_T_DIMS + 4 * k);
      if (fixed >= 0 && fixed != dims[k]) return EP_E_SHAPE;
      to[k] = dims[k];
    }
    return EP_OK;
  }
  for (uint32_t k = 0; k < e[EP_T_RANK]; k++) {
    const int32_t fixed = (int32_t)ep_rd32(e + EP_T_DIMS + 4 * k);
    if (fixed < 0) return EP_E_SHAPE;
    have *= (uint64_t)fixed;
  }
  return want == have ? EP_OK : EP_E_SHAPE;
}

static ep_status value(const ep_ctx *c, int32_t id, ep_tensor *t) {
  uint32_t storage;
  const ep_status s = ep_decode_tensor(c, (uint32_t)id, t, &storage);
  if (s) return s;
  for (uint32_t k = 0; k < t->rank; k++) if (t->dims[k] < 0) return EP_E_SHAPE;   /* never produced */
  return EP_OK;
}

static int same(const ep_tensor *a, const ep_tensor *b) { return a->dtype == b->dtype && ep_same_shape(a, b); }

/* A body output the node copies out must have its dims for the whole run (not an If output chosen per run). */
static ep_status body_value(const ep_ctx *c, const ep_state_view *sv, int32_t id, ep_tensor *t) {
  if (sv->t_run[id]) return EP_E_SHAPE;
  return value(c, id, t);
}

/* Tensor id of node idx's operand j (inputs first, then outputs). */
static int32_t io_id(const ep_ctx *c, uint32_t idx, uint32_t j) { return ep_int_at(c, ep_rd32(ep_node_entry(c, idx) + EP_N_IO_AT) + j); }

static ep_status resolve_if(ep_ctx *c, const ep_state_view *sv, uint32_t idx, ep_node *n, const ep_ctrl *k, int32_t step, uint32_t depth) {
  ep_status s;
  for (uint32_t b = 0; b < 2; b++)   /* both branches, so that either can run */
    if ((s = ep_resolve_range(c, sv, k->begin[b], k->end[b], step, depth + 1))) return s;
  const ep_tensor *cond = n->in[0];
  if (!cond || cond->dtype != EP_BOOL || cond->numel != 1) return EP_E_DTYPE;
  const int known = cond->data != 0;   /* a weight, or a value computed while resolving */
  const int pick_else = known && !cond->data[0];
  for (uint32_t o = 0; o < n->n_out; o++) {
    ep_tensor a, b;
    if ((s = body_value(c, sv, k->body_out[o], &a)) || (s = body_value(c, sv, k->body_out[n->n_out + o], &b))) return s;
    if (a.dtype != b.dtype || a.rank != b.rank) return EP_E_SHAPE;
    int32_t dims[EP_MAX_RANK];
    int differ = 0;
    for (uint32_t d = 0; d < a.rank; d++) {
      differ |= a.dims[d] != b.dims[d];
      dims[d] = known ? (pick_else ? b.dims[d] : a.dims[d]) : (a.dims[d] > b.dims[d] ? a.dims[d] : b.dims[d]);
    }
    const int32_t out = io_id(c, idx, n->n_in + o);
    if ((s = take_dims(c, sv, out, a.rank, dims, a.dtype))) return s;
    /* branches of different dims and a condition only known at run time: the output gets the chosen branch's
     * dims when the node runs (room for the larger), so nothing may read it while resolving (resolve.c) */
    if (differ && !known) sv->t_run[out] = 1;
  }
  return EP_OK;
}

/* LOOP's trip count and condition when known while resolving; *known 0 otherwise. */
static void loop_limits(const ep_node *n, int *known, int64_t *trips) {
  const ep_tensor *m = n->in[0], *cond = n->in[1];
  *known = (!m || m->data) && (!cond || cond->data);
  *trips = 0;
  if (!*known) return;
  if (cond && !cond->data[0]) return;
  if (!m) { *known = 0; return; }   /* until the condition: only the run knows */
  *trips = *(const int64_t *)(const void *)m->data;
  if (*trips < 0) *trips = 0;
}

static ep_status resolve_loop(ep_ctx *c, const ep_state_view *sv, uint32_t idx, ep_node *n, const ep_ctrl *k, int32_t step, uint32_t depth) {
  ep_status s;
  static const int32_t none[1] = {0};
  if (n->in[0] && (n->in[0]->dtype != EP_I64 || n->in[0]->numel != 1)) return EP_E_DTYPE;
  if (n->in[1] && (n->in[1]->dtype != EP_BOOL || n->in[1]->numel != 1)) return EP_E_DTYPE;
  if (k->body_in[0] >= 0 && (s = take_dims(c, sv, k->body_in[0], 0, none, EP_I64))) return s;
  if (k->body_in[1] >= 0 && (s = take_dims(c, sv, k->body_in[1], 0, none, EP_BOOL))) return s;
  for (uint32_t j = 0; j < k->n_state; j++) {
    const ep_tensor *v = n->in[2 + j];
    if (!v) return EP_E_SHAPE;
    if ((s = take_dims(c, sv, k->body_in[2 + j], v->rank, v->dims, v->dtype))) return s;
  }
  if ((s = ep_resolve_range(c, sv, k->begin[0], k->end[0], step, depth + 1))) return s;
  ep_tensor t, u;
  if ((s = body_value(c, sv, k->body_out[0], &t))) return s;
  if (t.dtype != EP_BOOL || t.numel != 1) return EP_E_DTYPE;
  for (uint32_t j = 0; j < k->n_state; j++) {   /* carried values keep their dims from one iteration to the next */
    if ((s = body_value(c, sv, k->body_out[1 + j], &t)) || (s = value(c, k->body_in[2 + j], &u))) return s;
    if (!same(&t, &u)) return EP_E_SHAPE;
    const ep_tensor *v = n->in[2 + j];
    if ((s = take_dims(c, sv, io_id(c, idx, n->n_in + j), v->rank, v->dims, v->dtype))) return s;
  }
  if (k->n_scan_out == 0) return EP_OK;
  int known; int64_t trips;
  loop_limits(n, &known, &trips);
  if (!known) return EP_E_SHAPE;   /* scan outputs as long as a trip count only known at run time */
  if (trips > (int64_t)EP_MAX_BODY_STEPS) return EP_E_LIMIT;
  for (uint32_t j = 0; j < k->n_scan_out; j++) {
    if ((s = body_value(c, sv, k->body_out[1 + k->n_state + j], &t))) return s;
    if (t.rank + 1 > EP_MAX_RANK) return EP_E_SHAPE;
    int32_t dims[EP_MAX_RANK];
    dims[0] = (int32_t)trips;
    for (uint32_t d = 0; d < t.rank; d++) dims[d + 1] = t.dims[d];
    if ((s = take_dims(c, sv, io_id(c, idx, n->n_in + k->n_state + j), t.rank + 1, dims, t.dtype))) return s;
  }
  return EP_OK;
}

static ep_status resolve_scan(ep_ctx *c, const ep_state_view *sv, uint32_t idx, ep_node *n, const ep_ctrl *k, int32_t step, uint32_t depth) {
  ep_status s;
  const uint32_t N = k->n_state, M = k->n_scan_in, K = k->n_scan_out;
  int32_t len = -1;
  for (uint32_t j = 0; j < N; j++) {
    const ep_tensor *v = n->in[j];
    if (!v) return EP_E_SHAPE;
    if ((s = take_dims(c, sv, k->body_in[j], v->rank, v->dims, v->dtype))) return s;
  }
  for (uint32_t j = 0; j < M; j++) {   /* each slice: the scan input without its scan axis */
    const ep_tensor *x = n->in[N + j];
    const uint32_t axis = (uint32_t)k->axes[j];
    if (!x || axis >= x->rank) return EP_E_SHAPE;
    if (len >= 0 && x->dims[axis] != len) return EP_E_SHAPE;
    len = x->dims[axis];
    int32_t dims[EP_MAX_RANK];
    for (uint32_t d = 0, q = 0; d < x->rank; d++) if (d != axis) dims[q++] = x->dims[d];
    if ((s = take_dims(c, sv, k->body_in[N + j], x->rank - 1, dims, x->dtype))) return s;
  }
  if ((uint32_t)len > EP_MAX_BODY_STEPS) return EP_E_LIMIT;
  if ((s = ep_resolve_range(c, sv, k->begin[0], k->end[0], step, depth + 1))) return s;
  ep_tensor t, u;
  for (uint32_t j = 0; j < N; j++) {
    if ((s = body_value(c, sv, k->body_out[j], &t)) || (s = value(c, k->body_in[j], &u))) return s;
    if (!same(&t, &u)) return EP_E_SHAPE;
    const ep_tensor *v = n->in[j];
    if ((s = take_dims(c, sv, io_id(c, idx, n->n_in + j), v->rank, v->dims, v->dtype))) return s;
  }
  for (uint32_t j = 0; j < K; j++) {   /* each scan output: the body's, stacked along its axis */
    if ((s = body_value(c, sv, k->body_out[N + j], &t))) return s;
    const uint32_t axis = (uint32_t)k->axes[M + j];
    if (t.rank + 1 > EP_MAX_RANK || axis > t.rank) return EP_E_SHAPE;
    int32_t dims[EP_MAX_RANK];
    for (uint32_t d = 0, q = 0; d <= t.rank; d++) dims[d] = d == axis ? len : t.dims[q++];
    if ((s = take_dims(c, sv, io_id(c, idx, n->n_in + N + j), t.rank + 1, dims, t.dtype))) return s;
  }
  return EP_OK;
}

ep_status ep_ctrl_resolve(ep_ctx *c, const ep_state_view *sv, uint32_t idx, ep_node *n, int32_t step, uint32_t depth) {
  ep_ctrl k;
  const ep_status s = ep_ctrl_decode(n, &k);
  if (s) return s;
  if (depth >= EP_MAX_DEPTH) return EP_E_OP;
  if (n->op == EP_OP_IF) return resolve_if(c, sv, idx, n, &k, step, depth);
  if (n->op == EP_OP_LOOP) return resolve_loop(c, sv, idx, n, &k, step, depth);
  return resolve_scan(c, sv, idx, n, &k, step, depth);
}

/* -- running --------------------------------------------------------------------------------------------- */

static uint32_t bytes_of(const ep_tensor *t) { return (uint32_t)(t->numel * ep_dtype_size(t->dtype)); }

/* dst = src, byte for byte (the dims were checked while resolving; equal bytes checked again here). */
static ep_status copy(const ep_tensor *dst, const ep_tensor *src) {
  const uint32_t n = bytes_of(src);
  if (n != bytes_of(dst) || (n && (!dst->data || !src->data))) return EP_E_SHAPE;
  if (dst->data != src->data && n) ep_memcpy(dst->data, src->data, n);
  return EP_OK;
}

static ep_status get(const ep_ctx *c, int32_t id, ep_tensor *t) {
  uint32_t storage;
  return ep_decode_tensor(c, (uint32_t)id, t, &storage);
}

/* Slice `at` of x along axis (outer x len x inner) to or from the packed tensor s: to_slice 1 reads x. */
static ep_status strided(const ep_tensor *x, uint32_t axis, uint32_t at, const ep_tensor *s, int to_slice) {
  const uint32_t es = ep_dtype_size(x->dtype);
  uint64_t outer = 1, inner = es;
  for (uint32_t d = 0; d < axis; d++) outer *= (uint64_t)x->dims[d];
  for (uint32_t d = axis + 1; d < x->rank; d++) inner *= (uint64_t)x->dims[d];
  const uint64_t len = (uint64_t)x->dims[axis];
  if (axis >= x->rank || at >= len || s->dtype != x->dtype || outer * inner != (uint64_t)bytes_of(s)) return EP_E_SHAPE;
  for (uint64_t o = 0; o < outer; o++) {
    uint8_t *xp = x->data + (o * len + at) * inner, *sp = s->data + o * inner;
    if (to_slice) ep_memcpy(sp, xp, (uint32_t)inner); else ep_memcpy(xp, sp, (uint32_t)inner);
  }
  return EP_OK;
}

/* One iteration of a body of `nodes` nodes: a hostile trip count (or a long body run many times) stops here. */
static ep_status tick(ep_ctx *c, const ep_ctrl *k) {
  const uint32_t cost = 1u + (k->end[0] - k->begin[0]);
  if (c->iterations_left < cost) return EP_E_LIMIT;
  c->iterations_left -= cost;
  return EP_OK;
}

static ep_status run_if(ep_ctx *c, const ep_node *n, const ep_ctrl *k, uint32_t idx, uint32_t depth) {
  const uint32_t b = n->in[0]->data[0] ? 0 : 1;
  ep_status s = ep_run_range(c, k->begin[b], k->end[b], depth + 1);
  if (s) return s;
  ep_state_view sv;
  ep_state_layout(c, c->state, &sv);
  for (uint32_t o = 0; o < n->n_out; o++) {
    ep_tensor src, dst;
    const int32_t out = io_id(c, idx, n->n_in + o);
    if ((s = get(c, k->body_out[b * n->n_out + o], &src))) return s;
    if (sv.t_run[out]) {   /* its dims are the branch's: room for them was planned for the larger branch */
      if (bytes_of(&src) > sv.t_bytes[out] || src.rank != n->out[o]->rank) return EP_E_SHAPE;
      for (uint32_t d = 0; d < src.rank; d++) dims_of(&sv, out)[d] = src.dims[d];
    }
    if ((s = get(c, out, &dst)) || (s = copy(&dst, &src))) return s;
  }
  return EP_OK;
}

static ep_status run_loop(ep_ctx *c, const ep_node *n, const ep_ctrl *k, uint32_t depth) {
  const uint32_t N = k->n_state, K = k->n_scan_out;
  int64_t trips = n->in[0] ? *(const int64_t *)(const void *)n->in[0]->data : -1;   /* -1: no limit but the cap */
  if (n->in[0] && trips < 0) trips = 0;
  uint8_t cond = n->in[1] ? n->in[1]->data[0] : 1;
  ep_status s;
  ep_tensor t, u;
  for (uint32_t j = 0; j < N; j++)
    if ((s = get(c, k->body_in[2 + j], &t)) || (s = copy(&t, n->in[2 + j]))) return s;
  int64_t i = 0;
  for (; cond && (trips < 0 || i < trips); i++) {
    if ((s = tick(c, k))) return s;
    if (k->body_in[0] >= 0) { if ((s = get(c, k->body_in[0], &t))) return s; *(int64_t *)(void *)t.data = i; }
    if (k->body_in[1] >= 0) { if ((s = get(c, k->body_in[1], &t))) return s; t.data[0] = cond; }
    if ((s = ep_run_range(c, k->begin[0], k->end[0], depth + 1))) return s;
    if ((s = get(c, k->body_out[0], &t))) return s;
    cond = t.data[0] != 0;
    for (uint32_t j = 0; j < K; j++) {
      const ep_tensor *y = n->out[N + j];
      if (y->rank == 0 || i >= y->dims[0]) return EP_E_SHAPE;   /* more iterations than resolved */
      if ((s = get(c, k->body_out[1 + N + j], &t)) || (s = strided(y, 0, (uint32_t)i, &t, 0))) return s;
    }
    for (uint32_t j = 0; j < N; j++)
      if ((s = get(c, k->body_out[1 + j], &t)) || (s = get(c, k->body_in[2 + j], &u)) || (s = copy(&u, &t))) return s;
  }
  for (uint32_t j = 0; j < K; j++) if (i != n->out[N + j]->dims[0]) return EP_E_SHAPE;   /* stopped early */
  for (uint32_t j = 0; j < N; j++)
    if ((s = get(c, k->body_in[2 + j], &t)) || (s = copy(n->out[j], &t))) return s;
  return EP_OK;
}

static ep_status run_scan(ep_ctx *c, const ep_node *n, const ep_ctrl *k, uint32_t depth) {
  const uint32_t N = k->n_state, M = k->n_scan_in, K = k->n_scan_out;
  const ep_tensor *x0 = n->in[N];
  const uint32_t len = (uint32_t)x0->dims[k->axes[0]];
  ep_status s;
  ep_tensor t, u;
  for (uint32_t j = 0; j < N; j++)
    if ((s = get(c, k->body_in[j], &t)) || (s = copy(&t, n->in[j]))) return s;
  for (uint32_t i = 0; i < len; i++) {
    if ((s = tick(c, k))) return s;
    for (uint32_t j = 0; j < M; j++) {
      const ep_tensor *x = n->in[N + j];
      const uint32_t at = k->axes[M + K + j] ? len - 1 - i : i;
      if ((s = get(c, k->body_in[N + j], &t)) || (s = strided(x, (uint32_t)k->axes[j], at, &t, 1))) return s;
    }
    if ((s = ep_run_range(c, k->begin[0], k->end[0], depth + 1))) return s;
    for (uint32_t j = 0; j < K; j++) {
      const ep_tensor *y = n->out[N + j];
      const uint32_t at = k->axes[2 * M + K + j] ? len - 1 - i : i;
      if ((s = get(c, k->body_out[N + j], &t)) || (s = strided(y, (uint32_t)k->axes[M + j], at, &t, 0))) return s;
    }
    for (uint32_t j = 0; j < N; j++)
      if ((s = get(c, k->body_out[j], &t)) || (s = get(c, k->body_in[j], &u)) || (s = copy(&u, &t))) return s;
  }
  for (uint32_t j = 0; j < N; j++)
    if ((s = get(c, k->body_in[j], &t)) || (s = copy(n->out[j], &t))) return s;
  return EP_OK;
}

ep_status ep_ctrl_run(ep_ctx *c, uint32_t idx, const ep_node *n, uint32_t depth) {
  ep_ctrl k;
  const ep_status s = ep_ctrl_decode(n, &k);
  if (s) return s;
  if (depth >= EP_MAX_DEPTH) return EP_E_OP;
  if (depth == 0) c->iterations_left = EP_MAX_BODY_STEPS;
  if (n->op == EP_OP_IF) return run_if(c, n, &k, idx, depth);
  if (n->op == EP_OP_LOOP) return run_loop(c, n, &k, depth);
  return run_scan(c, n, &k, depth);
}
EP_COLD_FILE_END
