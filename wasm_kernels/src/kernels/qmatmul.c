/* QMATMUL: integer MatMul (MatMulInteger, QLinearMatMul, DQ -> MatMul/Gemm [-> act] -> Q).
 *
 * Inputs: X [..., M, K] u8/i8, W [..., K, N] u8/i8 (a weight or a runtime tensor), bias? int32 [N],
 * mult? f32 [N], wzp? int32 [N] (W's zero point per column; absent = 0), xzp? (X's dtype, 1 element:
 * X's zero point as a runtime tensor, DynamicQuantizeLinear's output; overrides param x_zp).
 * Output Y [..., M, N]: u8/i8 (requantized), f32, or i32 (raw, no mult).
 * Y's batch dims equal X's; W's batch dims are all 1 or equal Y's.
 * params (6): x_zp, y_zp, act, p0 (f32), p1 (f32), nb (0: derived from K and N, qmm_nb).
 * X is packed as the broadcast side (qgemm.h A panels, uint8 minus 128, its zero point corrected
 * through column sums), W as the vector side in blocks of nb columns (multiple of 8), zero point
 * subtracted while packing. Scratch >= round16(A panel bytes) + Kp * nb * 4 + nb * 4 bytes. */
#include "qgemm.h"
#include "gemm.h"
#include "shape/conv_linalg.h"

/* Whole file optimized for size (wasm size budget): the time is in ep_qgemm (qgemm.c). */
EP_COLD_FILE_BEGIN

#define QMM_NPARAMS 6

typedef struct { uint64_t batch, M, K, N, wbatch; } qmm_geom;

static uint64_t round16(uint64_t x) { return (x + 15) / 16 * 16; }

/* W columns per packed block: word 5, or for 0 the packager's rule: the int16-pair block in 256 KB (at least 8
 * columns), at most N rounded up to 8 (packager/ops/quant.py). */
static uint32_t qmm_nb(const qmm_geom *g, int32_t word) {
  if (word) return (uint32_t)word;
  const uint64_t kp = (g->K + 1) / 2, n8 = (g->N + EP_QGEMM_NR - 1) / EP_QGEMM_NR * EP_QGEMM_NR;
  uint64_t nb = 256u * 1024u / ((kp ? kp : 1) * 4u) / EP_QGEMM_NR * EP_QGEMM_NR;
  if (nb < EP_QGEMM_NR) nb = EP_QGEMM_NR;
  return (uint32_t)(nb < n8 ? nb : n8);
}

/* X packed as A panels, a block of W - zp as int16 k-pairs, its column sums. */
static uint64_t qmm_scratch(const qmm_geom *g, uint32_t nb) {
  return round16(ep_qgemm_packed_a_bytes(g->M, g->K)) + (g->K + 1) / 2 * (uint64_t)nb * 4u + (uint64_t)nb * 4u;
}

static ep_status qmm_geom_of(const ep_node *n, qmm_geom *g) {
  const ep_tensor *x = n->in[0], *w = n->in[1], *y = n->out[0];
  EP_CHECK(x && w && y, EP_E_OP);
  EP_CHECK((x->dtype == EP_U8 || x->dtype == EP_I8) && (w->dtype == EP_U8 || w->dtype == EP_I8), EP_E_DTYPE);
  const uint32_t r = y->rank;
  EP_CHECK(r >= 2 && x->rank == r && w->rank == r, EP_E_SHAPE);
  g->batch = 1; g->wbatch = 1;
  int w_is_one = 1;
  for (uint32_t i = 0; i + 2 < r; i++) {
    EP_CHECK(x->dims[i] == y->dims[i], EP_E_SHAPE);
    EP_CHECK(w->dims[i] == y->dims[i] || w->dims[i] == 1, EP_E_SHAPE);
    g->batch *= (uint64_t)y->dims[i];
    g->wbatch *= (uint64_t)w->dims[i];
    if (w->dims[i] != 1) w_is_one = 0;
  }
  EP_CHECK(w_is_one || g->wbatch == g->batch, EP_E_SHAPE);
  g->M = (uint64_t)x->dims[r - 2]; g->K = (uint64_t)x->dims[r - 1]; g->N = (uint64_t)w->dims[r - 1];
  EP_CHECK((uint64_t)w->dims[r - 2] == g->K && (uint64_t)y->dims[r - 2] == g->M && (uint64_t)y->dims[r - 1] == g->N,
           EP_E_SHAPE);
  EP_CHECK(g->K <= 65536, EP_E_SHAPE);
  return EP_OK;
}

ep_status ep_check_QMATMUL(const ep_node *n) {
  EP_CHECK(n->n_params == QMM_NPARAMS, EP_E_PARAM);
  const int32_t *p = n->params;
  qmm_geom g;
  ep_status s = qmm_geom_of(n, &g);
  if (s) return s;
  const uint32_t xd = n->in[0]->dtype, yd = n->out[0]->dtype;
  EP_CHECK(xd == EP_U8 ? p[0] >= 0 && p[0] <= 255 : p[0] >= -128 && p[0] <= 127, EP_E_PARAM);
  EP_CHECK(yd == EP_U8 ? p[1] >= 0 && p[1] <= 255 : yd == EP_I8 ? p[1] >= -128 && p[1] <= 127 : p[1] == 0, EP_E_PARAM);
  const ep_tensor *bias = n->n_in > 2 ? n->in[2] : 0, *mult = n->n_in > 3 ? n->in[3] : 0;
  const ep_tensor *wzp = n->n_in > 4 ? n->in[4] : 0;
  if (bias) EP_CHECK(bias->dtype == EP_I32 && bias->numel == g.N, EP_E_SHAPE);
  if (mult) EP_CHECK(mult->dtype == EP_F32 && mult->numel == g.N, EP_E_SHAPE);
  if (wzp) EP_CHECK(wzp->dtype == EP_I32 && wzp->numel == g.N, EP_E_SHAPE);
  if (n->n_in > 5 && n->in[5]) EP_CHECK(n->in[5]->dtype == xd && n->in[5]->numel == 1, EP_E_SHAPE);
  s = ep_qgemm_check_epi(p[2], yd, mult != 0);
  if (s) return s;
  EP_CHECK(p[5] >= 0 && p[5] % EP_QGEMM_NR == 0 && p[5] <= (1 << 24), EP_E_PARAM);
  EP_CHECK(qmm_scratch(&g, qmm_nb(&g, p[5])) <= n->scratch_bytes, EP_E_PARAM);
  return EP_OK;
}

uint32_t ep_scratch_QMATMUL(const ep_node *n) {
  qmm_geom g;
  if (n->n_params != QMM_NPARAMS || n->params[5] < 0 || qmm_geom_of(n, &g)) return 0;
  return ep_scratch_u32(qmm_scratch(&g, qmm_nb(&g, n->params[5])));
}

/* One block of W's columns [n0, n0 + cols), split into column ranges (qgemm.h, ep_qgemm_col_parts). */
typedef struct {
  const ep_qgemm_epi *e;
  const int8_t *apanel;
  const uint8_t *wb;
  const int32_t *zcol;
  uint8_t *bpanel;      /* Kp * nb * 4 bytes of int16 pairs, then nb column sums */
  uint32_t M, K, N, nb, n0, cols, parts;
  int wu8, za;          /* za: X has a zero point, corrected through W's column sums */
} qmm_block;

static void qmm_range(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  const qmm_block *j = (const qmm_block *)ctx;
  const uint32_t c0 = ep_qgemm_col(j->cols, j->parts, task), cols = ep_qgemm_col(j->cols, j->parts, task + 1) - c0;
  if (!cols) return;
  const uint32_t ldb = ep_qgemm_round_nr(cols), n0 = j->n0 + c0;
  int16_t *b = (int16_t *)(void *)(j->bpanel + (uint64_t)(j->K + 1) / 2 * c0 * 4u);
  int32_t *colsum = (int32_t *)(void *)(j->bpanel + (uint64_t)(j->K + 1) / 2 * j->nb * 4u) + c0;
  ep_qgemm_epi e = *j->e;
  e.colsum = j->za ? colsum : 0;
  ep_qgemm_pack_b(b, ldb, j->K, cols, j->wb + n0, j->N, j->wu8, 0, j->zcol ? j->zcol + n0 : 0, e.colsum ? colsum : 0);
  ep_qgemm(j->M, cols, j->K, j->apanel, b, ldb, n0, &e);
}

ep_status ep_run_QMATMUL(const ep_node *n) {
  const int32_t *p = n->params;
  const uint32_t r = n->out[0]->rank;
  qmm_geom g = {n->out[0]->numel / ((uint64_t)n->out[0]->dims[r - 2] * n->out[0]->dims[r - 1] + !n->out[0]->numel),
                (uint64_t)n->in[0]->dims[r - 2], (uint64_t)n->in[0]->dims[r - 1], (uint64_t)n->out[0]->dims[r - 1],
                n->in[1]->numel / ((uint64_t)n->in[1]->dims[r - 2] * n->in[1]->dims[r - 1] + !n->in[1]->numel)};
  const ep_tensor *x = n->in[0], *w = n->in[1];
  const ep_tensor *bias = n->n_in > 2 ? n->in[2] : 0, *mult = n->n_in > 3 ? n->in[3] : 0;
  const ep_tensor *wzp = n->n_in > 4 ? n->in[4] : 0;
  const int32_t *zcol = wzp ? (const int32_t *)(const void *)wzp->data : 0;
  const uint32_t nb = qmm_nb(&g, p[5]), M = (uint32_t)g.M, K = (uint32_t)g.K, N = (uint32_t)g.N;
  const int xu8 = x->dtype == EP_U8, wu8 = w->dtype == EP_U8;
  const ep_tensor *xz = n->n_in > 5 ? n->in[5] : 0;
  const int32_t xzp = xz ? (xu8 ? (int32_t)xz->data[0] : (int32_t)(int8_t)xz->data[0]) : p[0];
  const int32_t za = xzp - (xu8 ? 128 : 0);   /* packed X is x - 128 for uint8 */
  int8_t *apanel = (int8_t *)n->scratch;
  const uint32_t esz = ep_dtype_size(n->out[0]->dtype);
  ep_qgemm_epi e;
  e.bias = bias ? (const int32_t *)(const void *)bias->data : 0; e.bias_col = 1;
  e.mult = mult ? ep_f32(mult) : 0; e.mult_col = 1;
  e.colsum = 0; e.za_row = 0; e.za = za;   /* colsum: per column range (qmm_range) */
  e.act = p[2]; e.p0 = ep_param_f32(n, 3); e.p1 = ep_param_f32(n, 4);
  e.out_dtype = n->out[0]->dtype; e.yzp = p[1];
  e.rs = N; e.cs = 1;
  qmm_block j = {&e, apanel, 0, zcol, n->scratch + round16(ep_qgemm_packed_a_bytes(M, K)), M, K, N, nb, 0, 0, 1, wu8,
                 za != 0};
  for (uint64_t bi = 0; bi < g.batch; bi++) {
    ep_qgemm_pack_a(M, K, x->data + bi * g.M * g.K, K, xu8, apanel);
    j.wb = w->data + (g.wbatch == 1 ? 0 : bi) * g.K * g.N;
    e.y = n->out[0]->data + bi * g.M * g.N * esz;
    for (uint32_t n0 = 0; n0 < N; n0 += nb) {
      j.n0 = n0;
      j.cols = N - n0 < nb ? N - n0 : nb;
      j.parts = ep_qgemm_col_parts(M, j.cols, K);
      ep_parallel_for(j.parts, EP_MAX_THREADS, qmm_range, &j);
    }
  }
  return EP_OK;
}

EP_COLD_FILE_END
