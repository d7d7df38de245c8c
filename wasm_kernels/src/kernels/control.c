/* Kernel entries of IF, LOOP and SCAN: check() validates the parameter words against the node's arity and
 * tensors; run() is never reached through the table (the executor runs them: src/subplans.c). */
#include "../control.h"
EP_COLD_FILE_BEGIN

ep_status ep_ctrl_decode(const ep_node *n, ep_ctrl *k) {
  const int32_t *p = n->params;
  ep_memset(k, 0, sizeof *k);
  uint32_t head, want;
  if (n->op == EP_OP_IF) {
    head = 4; k->n_bodies = 2;   /* its outputs: n->n_out */
    EP_CHECK(n->n_in == 1 && n->n_params >= head, EP_E_PARAM);
    k->n_body_out = 2u * n->n_out;
    want = head + k->n_body_out;
  } else if (n->op == EP_OP_LOOP) {
    head = 4; k->n_bodies = 1;
    EP_CHECK(n->n_params >= head && p[2] >= 0 && p[3] >= 0, EP_E_PARAM);
    k->n_state = (uint32_t)p[2]; k->n_scan_out = (uint32_t)p[3];
    EP_CHECK(n->n_in == 2 + k->n_state && n->n_out == k->n_state + k->n_scan_out, EP_E_PARAM);
    k->n_body_in = 2 + k->n_state;
    k->n_body_out = 1 + k->n_state + k->n_scan_out;
    want = head + k->n_body_in + k->n_body_out;
  } else if (n->op == EP_OP_SCAN) {
    head = 5; k->n_bodies = 1;
    EP_CHECK(n->n_params >= head && p[2] >= 0 && p[3] >= 1 && p[4] >= 0, EP_E_PARAM);
    k->n_state = (uint32_t)p[2]; k->n_scan_in = (uint32_t)p[3]; k->n_scan_out = (uint32_t)p[4];
    EP_CHECK(n->n_in == k->n_state + k->n_scan_in && n->n_out == k->n_state + k->n_scan_out, EP_E_PARAM);
    k->n_body_in = k->n_state + k->n_scan_in;
    k->n_body_out = k->n_state + k->n_scan_out;
    want = head + k->n_body_in + k->n_body_out + 2u * (k->n_scan_in + k->n_scan_out);
  } else {
    return EP_E_OP;
  }
  EP_CHECK(n->n_params == want, EP_E_PARAM);
  for (uint32_t b = 0; b < k->n_bodies; b++) {
    EP_CHECK(p[2 * b] >= 0 && p[2 * b + 1] >= p[2 * b], EP_E_PARAM);
    k->begin[b] = (uint32_t)p[2 * b];
    k->end[b] = (uint32_t)p[2 * b + 1];
  }
  k->body_in = p + head;
  k->body_out = k->body_in + k->n_body_in;
  k->axes = k->body_out + k->n_body_out;
  for (uint32_t j = 0; j < k->n_scan_in + k->n_scan_out; j++) {
    EP_CHECK(k->axes[j] >= 0 && k->axes[j] < EP_MAX_RANK, EP_E_PARAM);
    const int32_t rev = k->axes[k->n_scan_in + k->n_scan_out + j];
    EP_CHECK(rev == 0 || rev == 1, EP_E_PARAM);
  }
  return EP_OK;
}

/* With the tensors as resolved: condition and trip count scalars, carried values as their outputs, axes in rank. */
static ep_status check_io(const ep_node *n) {
  ep_ctrl k;
  const ep_status s = ep_ctrl_decode(n, &k);
  if (s) return s;
  const ep_tensor *cond = n->op == EP_OP_IF ? n->in[0] : n->op == EP_OP_LOOP ? n->in[1] : 0;
  EP_CHECK(n->op != EP_OP_IF || cond, EP_E_SHAPE);
  if (cond) EP_CHECK(cond->dtype == EP_BOOL && cond->numel == 1, EP_E_DTYPE);
  if (n->op == EP_OP_LOOP && n->in[0]) EP_CHECK(n->in[0]->dtype == EP_I64 && n->in[0]->numel == 1, EP_E_DTYPE);
  const uint32_t first = n->op == EP_OP_LOOP ? 2 : 0;
  for (uint32_t j = 0; j < k.n_state; j++) {
    const ep_tensor *a = n->in[first + j];
    EP_CHECK(a && a->dtype == n->out[j]->dtype && ep_same_shape(a, n->out[j]), EP_E_SHAPE);
  }
  if (n->op == EP_OP_SCAN) {
    for (uint32_t j = 0; j < k.n_scan_in; j++) {
      const ep_tensor *x = n->in[k.n_state + j];
      EP_CHECK(x && (uint32_t)k.axes[j] < x->rank, EP_E_SHAPE);
    }
    for (uint32_t j = 0; j < k.n_scan_out; j++) EP_CHECK((uint32_t)k.axes[k.n_scan_in + j] < n->out[k.n_state + j]->rank, EP_E_SHAPE);
  }
  return EP_OK;
}

ep_status ep_check_IF(const ep_node *n) { return check_io(n); }
ep_status ep_check_LOOP(const ep_node *n) { return check_io(n); }
ep_status ep_check_SCAN(const ep_node *n) { return check_io(n); }
ep_status ep_run_IF(const ep_node *n) { (void)n; return EP_E_OP; }
ep_status ep_run_LOOP(const ep_node *n) { (void)n; return EP_E_OP; }
ep_status ep_run_SCAN(const ep_node *n) { (void)n; return EP_E_OP; }
EP_COLD_FILE_END
