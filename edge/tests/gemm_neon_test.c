/* The NEON 6x16 GEMM (neon/gemm_f32_neon.c) against the portable kernel built for NEON
 * (gemm.c compiled as ep_gemm_f32_portable): same bits for every shape and epilogue.
 * Built static by `make build/aarch64/gemm_neon_test`, run under qemu-aarch64 by tests/test_edge.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gemm.h"

void ep_gemm_f32_portable(uint32_t M, uint32_t N, uint32_t K, const float *a_packed, const float *b, uint32_t ldb,
                          int b_padded, float *c, uint32_t ldc, const ep_gemm_epi *epi);

static uint32_t rng = 1;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)((int32_t)(rng >> 8) % 2001 - 1000) / 500.0f; }

int main(void) {
  const uint32_t Ms[] = {1, 5, 6, 7, 12, 13, 32}, Ns[] = {1, 7, 8, 15, 16, 17, 33, 64, 100}, Ks[] = {1, 2, 3, 9, 64, 300};
  int cases = 0, bad = 0;
  for (unsigned im = 0; im < sizeof Ms / 4; im++)
  for (unsigned in = 0; in < sizeof Ns / 4; in++)
  for (unsigned ik = 0; ik < sizeof Ks / 4; ik++)
  for (int mode = 0; mode < 8; mode++) {
    const uint32_t M = Ms[im], N = Ns[in], K = Ks[ik], ldb = N + 8 + (mode & 1) * 3, ldc = N + (mode & 2);
    float *a = malloc(sizeof(float) * M * K), *ap = malloc(sizeof(float) * (ep_gemm_packed_a_floats(M, K) + 8));
    float *b = malloc(sizeof(float) * K * ldb + 64), *bias = malloc(sizeof(float) * M * ldc + 64);
    float *res = malloc(sizeof(float) * M * ldc + 64);
    float *c1 = malloc(sizeof(float) * M * ldc), *c2 = malloc(sizeof(float) * M * ldc);
    for (uint32_t i = 0; i < M * K; i++) a[i] = frand();
    for (uint32_t i = 0; i < K * ldb; i++) b[i] = frand();
    for (uint32_t i = 0; i < M * ldc; i++) { bias[i] = frand(); res[i] = frand(); }
    ep_gemm_pack_a(M, K, a, K, 1, ap);
    ep_gemm_epi e = {1.0f, 1.0f, NULL, EP_BIAS_NONE, 0, NULL, 0, EP_ACT_NONE, 0.0f, 0.0f};
    switch (mode) {
      case 1: e.bias = bias; e.bias_mode = EP_BIAS_ROW; e.act = EP_ACT_RELU; break;
      case 2: e.bias = bias; e.bias_mode = EP_BIAS_COL; e.beta = 0.5f; e.alpha = 2.0f; break;
      case 3: e.bias = bias; e.bias_mode = EP_BIAS_FULL; e.ld_bias = ldc; e.res = res; e.ld_res = ldc; e.act = EP_ACT_CLIP; e.p0 = -1; e.p1 = 1; break;
      case 4: e.bias = bias; e.bias_mode = EP_BIAS_SCALAR; e.act = EP_ACT_LEAKY_RELU; e.p0 = 0.1f; break;
      case 5: e.res = res; e.ld_res = ldc; e.act = EP_ACT_RELU; break;
      case 6: e.bias = bias; e.bias_mode = EP_BIAS_ROW; e.res = res; e.ld_res = ldc; e.act = EP_ACT_HARDSWISH; break;
      case 7: e.bias = bias; e.bias_mode = EP_BIAS_COL; e.act = EP_ACT_HARDSIGMOID; e.p0 = 0.3f; e.p1 = 0.4f; break;
      default: break;
    }
    memset(c1, 0, sizeof(float) * M * ldc); memset(c2, 0, sizeof(float) * M * ldc);
    ep_gemm_f32(M, N, K, ap, b, ldb, mode & 1, c1, ldc, &e);
    ep_gemm_f32_portable(M, N, K, ap, b, ldb, mode & 1, c2, ldc, &e);
    cases++;
    if (memcmp(c1, c2, sizeof(float) * M * ldc) != 0) {
      if (bad++ < 10) fprintf(stderr, "mismatch M=%u N=%u K=%u mode=%d\n", M, N, K, mode);
    }
    free(a); free(ap); free(b); free(bias); free(res); free(c1); free(c2);
  }
  printf("gemm_neon_test: %d cases, %d mismatches\n", cases, bad);
  return bad != 0;
}
