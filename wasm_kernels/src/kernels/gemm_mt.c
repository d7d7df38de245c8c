/* ep_gemm_f32 split into tasks for the core's threads (gemm.h, ep_parallel.h). A file of its own: on NEON
 * gemm.c's kernel is ep_gemm_f32_portable (src/vec/ep_isa.h) and the NEON kernel is ep_gemm_f32;
 * every part here goes through ep_gemm_f32, so each target runs its best kernel on it. */
#include "gemm.h"
#include "ep_parallel.h"

void ep_gemm_split(uint32_t M, uint32_t N, uint32_t K, uint32_t threads, uint32_t *mparts, uint32_t *nparts) {
  const uint32_t panels = (M + EP_GEMM_MR - 1) / EP_GEMM_MR, tiles = (N + EP_GEMM_NR - 1) / EP_GEMM_NR;
  /* about 4 tasks per thread (dynamic balancing); below 32 k multiply-adds a task costs more to hand out than to run */
  const uint32_t target = threads <= 1 || (uint64_t)M * N * K < 32768u ? 1u : 4u * threads;
  *mparts = panels < target ? panels : target;
  if (*mparts < 1) *mparts = 1;
  const uint32_t want_n = (target + *mparts - 1) / *mparts;
  *nparts = tiles < want_n ? tiles : want_n;
  if (*nparts < 1) *nparts = 1;
}

void ep_gemm_f32_part(const ep_gemm_job *g, uint32_t task) {
  const uint32_t panels = (g->M + EP_GEMM_MR - 1) / EP_GEMM_MR, tiles = (g->N + EP_GEMM_NR - 1) / EP_GEMM_NR;
  const uint32_t mi = task / g->nparts, ni = task % g->nparts;
  const uint32_t m0 = ep_chunk(panels, g->mparts, mi) * EP_GEMM_MR, n0 = ep_chunk(tiles, g->nparts, ni) * EP_GEMM_NR;
  uint32_t m1 = ep_chunk(panels, g->mparts, mi + 1) * EP_GEMM_MR, n1 = ep_chunk(tiles, g->nparts, ni + 1) * EP_GEMM_NR;
  if (m1 > g->M) m1 = g->M;
  if (n1 > g->N) n1 = g->N;
  if (m1 <= m0 || n1 <= n0) return;
  const ep_gemm_epi e = ep_gemm_epi_shift(g->e, m0, n0);
  /* n0 is a multiple of EP_GEMM_NR: a padded B stays readable up to round_up(n1 - n0) past it */
  ep_gemm_f32(m1 - m0, n1 - n0, g->K, g->a + (uint64_t)(m0 / EP_GEMM_MR) * g->K * EP_GEMM_MR, g->b + n0, g->ldb,
              g->b_padded, g->c + (uint64_t)m0 * g->ldc + n0, g->ldc, &e);
}

static void gemm_task(void *ctx, uint32_t task, uint32_t thread) {
  (void)thread;
  ep_gemm_f32_part((const ep_gemm_job *)ctx, task);
}

void ep_gemm_f32_mt(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                    int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *e) {
  ep_gemm_job g = {M, N, K, a_packed, b, ldb, b_padded, c, ldc, e, 1, 1};
  ep_gemm_split(M, N, K, ep_num_threads(), &g.mparts, &g.nparts);
  if (g.mparts * g.nparts <= 1) {
    ep_gemm_f32(M, N, K, a_packed, b, ldb, b_padded, c, ldc, e);
    return;
  }
  ep_parallel_for(g.mparts * g.nparts, EP_MAX_THREADS, gemm_task, &g);
}
