/* Output dims of GEMM, MATMUL (numpy matmul with batch broadcasting), QMATMUL and ATTENTION (docs/plan-format.md). */
#include "conv_linalg.h"
EP_COLD_FILE_BEGIN

/* Y [M, N] of A [M, K] (transA: [K, M]) times B [K, N] (transB: [N, K]). */
ep_status ep_shape_GEMM(ep_node *n) {
  const ep_tensor *a = n->in[0], *b = n->in[1];
  const int32_t *p = n->params;
  EP_CHECK(n->n_params == 8 && (p[0] == 0 || p[0] == 1) && (p[1] == 0 || p[1] == 1), EP_E_PARAM);
  EP_CHECK(a && b && a->rank == 2 && b->rank == 2 && a->dims[1 - p[0]] == b->dims[p[1]], EP_E_SHAPE);
  const int32_t d[2] = {a->dims[p[0]], b->dims[1 - p[1]]};
  return n->out[0] ? ep_shape_set(n->out[0], 2, d) : EP_E_OP;
}

/* Y [..., M, N] of A [..., M, K] and B [..., K, N], batch dims right-aligned and broadcast; with B in panels
 * (6 words: word 5 = N) B is shared and Y has A's batch dims. */
ep_status ep_shape_MATMUL(ep_node *n) {
  const ep_tensor *a = n->in[0], *b = n->in[1];
  ep_tensor *y = n->out[0];
  const uint32_t np = n->n_params;
  EP_CHECK(np == 0 || np == 4 || (np == 6 && n->params[4] == 1 && n->params[5] >= 1), EP_E_PARAM);
  EP_CHECK(a && b && y && a->rank >= 2 && b->rank >= 2, EP_E_SHAPE);
  const uint32_t r = np == 6 ? a->rank : a->rank > b->rank ? a->rank : b->rank;
  int32_t d[EP_MAX_RANK];
  for (uint32_t i = 0; i + 2 < r; i++) {
    const int32_t da = i + a->rank >= r ? a->dims[i + a->rank - r] : 1, db = i + b->rank >= r ? b->dims[i + b->rank - r] : 1;
    EP_CHECK(np == 6 || da == db || da == 1 || db == 1, EP_E_SHAPE);
    d[i] = np == 6 || db == 1 ? da : db;
  }
  d[r - 2] = a->dims[a->rank - 2];
  if (np == 6) {
    d[r - 1] = n->params[5];
  } else {
    EP_CHECK(b->dims[b->rank - 2] == a->dims[a->rank - 1], EP_E_SHAPE);
    d[r - 1] = b->dims[b->rank - 1];
  }
  return ep_shape_set(y, r, d);
}

/* Y: X's dims but the last, W's last; X and W of one rank (>= 2). */
static ep_status rows_of(ep_node *n, const ep_tensor *x, const ep_tensor *w) {
  EP_CHECK(x && w && n->out[0] && x->rank >= 2 && w->rank == x->rank, EP_E_SHAPE);
  int32_t d[EP_MAX_RANK];
  for (uint32_t i = 0; i + 1 < x->rank; i++) d[i] = x->dims[i];
  d[x->rank - 1] = w->dims[x->rank - 1];
  return ep_shape_set(n->out[0], x->rank, d);
}

/* Y [..., M, N] of X [..., M, K] and W [..., K, N]: Y has X's batch dims. */
ep_status ep_shape_QMATMUL(ep_node *n) {
  const ep_tensor *x = n->in[0], *w = n->in[1];
  const ep_status s = rows_of(n, x, w);
  return s ? s : w->dims[x->rank - 2] == x->dims[x->rank - 1] ? EP_OK : EP_E_SHAPE;
}

/* Y [..., Lq, Dv] of Q [..., Lq, D], Kt [..., D, Lk] and V [..., Lk, Dv] (check() requires the same batch dims). */
ep_status ep_shape_ATTENTION(ep_node *n) { return rows_of(n, n->in[0], n->in[2]); }

EP_COLD_FILE_END
