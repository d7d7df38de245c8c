/* The NEON SDOT integer GEMM (neon/qgemm_i8_neon.c's ep_qgemm) against the portable kernel built for NEON
 * (qgemm.c compiled as ep_qgemm_portable): the same output bytes for every shape, operand dtype, zero point
 * (scalar, per column, A's through colsum), bias / mult per row or column, activation, output dtype and
 * stride, plus B blocks that do not fit the int8 form (the per-strip fallback) and garbage in odd K's
 * filler depth. Built static by `make build/aarch64/qgemm_sdot_test_{pi5,android}`, run under
 * qemu-aarch64 by tests/test_int8_edge.py; prints which kernel ep_qgemm dispatched to. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qgemm.h"
#include "gemm.h"
#include "ep_edge.h"

void ep_qgemm_portable(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
                       const ep_qgemm_epi *e);

static uint32_t rng = 7;
static uint32_t next(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }
static int32_t irand(int32_t lo, int32_t hi) { return lo + (int32_t)(next() % (uint32_t)(hi - lo + 1)); }

int main(void) {
  const uint32_t Ms[] = {1, 3, 4, 5, 8, 9, 12, 13, 33}, Ns[] = {1, 5, 8, 9, 16, 17, 40};
  const uint32_t Ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 27, 64, 301};
  const uint32_t outs[] = {EP_I32, EP_F32, EP_I8, EP_U8};
  long cases = 0, bad = 0;
  for (unsigned im = 0; im < sizeof Ms / 4; im++)
  for (unsigned in = 0; in < sizeof Ns / 4; in++)
  for (unsigned ik = 0; ik < sizeof Ks / 4; ik++)
  for (int mode = 0; mode < 12; mode++) {
    const uint32_t M = Ms[im], N = Ns[in], K = Ks[ik], ldb = ep_qgemm_round_nr(N), Kp = (K + 1) / 2;
    const uint32_t n_off = (uint32_t)(mode % 3) * 5, cs = mode % 5 == 4 ? 2 : 1;
    const uint32_t od = outs[mode % 4];
    const int x_u8 = mode & 1, a_u8 = (mode >> 1) & 1, raw_b = mode == 11;
    const uint64_t rs = (uint64_t)(n_off + N) * cs + 3, ybytes = (uint64_t)M * rs * 4 + 64;
    uint8_t *xa = malloc((uint64_t)M * K), *xb = malloc((uint64_t)K * N);
    int8_t *ap = malloc(ep_qgemm_packed_a_bytes(M, K));
    int16_t *b1 = malloc((uint64_t)Kp * ldb * 4), *b2 = malloc((uint64_t)Kp * ldb * 4);
    int32_t *colsum = malloc(4 * ldb), *zcol = malloc(4 * N), *bias = malloc(4 * (n_off + N + M + 8)), *za_row = malloc(4 * M);
    float *mult = malloc(4 * (n_off + N + M + 8));
    uint8_t *y1 = malloc(ybytes), *y2 = malloc(ybytes);
    for (uint64_t i = 0; i < (uint64_t)M * K; i++) xa[i] = (uint8_t)next();
    for (uint64_t i = 0; i < (uint64_t)K * N; i++) xb[i] = (uint8_t)next();
    /* saturating cases: large values with small zero points */
    if (mode == 6) for (uint64_t i = 0; i < (uint64_t)K * N; i++) xb[i] = x_u8 ? 255 : 0x80;
    for (uint32_t n = 0; n < N; n++) zcol[n] = x_u8 ? irand(0, 255) : irand(-128, 127);
    for (uint32_t i = 0; i < n_off + N + M + 8; i++) { bias[i] = irand(-50000, 50000); mult[i] = (float)irand(1, 2000) * 1e-5f; }
    for (uint32_t m = 0; m < M; m++) za_row[m] = irand(-128, 127);
    ep_qgemm_pack_a(M, K, xa, K, a_u8, ap);
    const int32_t zp = x_u8 ? irand(0, 255) : irand(-128, 127);
    const int per_col = mode == 3 || mode == 8;
    if (raw_b) {  /* arbitrary |B'| <= 255: strips span more than 256 values -> the portable fallback */
      for (uint64_t i = 0; i < (uint64_t)Kp * ldb * 2; i++) b1[i] = (int16_t)irand(-255, 255);
      for (uint32_t p = 0; p < Kp; p++)
        for (uint32_t n = N; n < ldb; n++) b1[(p * ldb + n) * 2] = b1[(p * ldb + n) * 2 + 1] = 0;
      if (N > 8) for (uint32_t p = 0; p < Kp; p++) for (uint32_t n = 0; n < 8; n++)   /* first strip in range */
        for (int j = 0; j < 2; j++) b1[(p * ldb + n) * 2 + j] = (int16_t)(b1[(p * ldb + n) * 2 + j] / 2 + 10);
    } else {
      ep_qgemm_pack_b(b1, ldb, K, N, xb, N, x_u8, zp, per_col ? zcol : 0, 0);
    }
    memcpy(b2, b1, (uint64_t)Kp * ldb * 4);
    if (K & 1)   /* odd K: the filler depth is anything finite (A is 0 there), different in each copy */
      for (uint32_t n = 0; n < ldb; n++) { b1[((Kp - 1) * ldb + n) * 2 + 1] = (int16_t)irand(-30000, 30000); b2[((Kp - 1) * ldb + n) * 2 + 1] = 7; }
    ep_qgemm_colsum(b2, ldb, K, ldb, colsum);
    ep_qgemm_epi e;
    memset(&e, 0, sizeof e);
    e.out_dtype = od;
    e.yzp = od == EP_U8 ? irand(0, 255) : od == EP_I8 ? irand(-128, 127) : 0;
    if (mode % 3 != 1) { e.bias = bias; e.bias_col = mode % 2; }
    if (od != EP_I32) {
      e.mult = mult; e.mult_col = (mode >> 2) & 1;
      static const int32_t acts[] = {EP_ACT_NONE, EP_ACT_RELU, EP_ACT_LEAKY_RELU, EP_ACT_CLIP};
      e.act = acts[(mode + ik) % 4];
      e.p0 = e.act == EP_ACT_LEAKY_RELU ? 0.1f : -20.0f; e.p1 = 30.0f;
    }
    if ((mode / 2) % 3 != 0) { e.colsum = colsum; if (mode & 4) e.za_row = za_row; else e.za = irand(-128, 127); }
    e.rs = rs; e.cs = cs;
    memset(y1, 0xA5, ybytes); memset(y2, 0xA5, ybytes);
    e.y = y1;
    ep_qgemm(M, N, K, ap, b1, ldb, n_off, &e);
    e.y = y2;
    ep_qgemm_portable(M, N, K, ap, b2, ldb, n_off, &e);
    cases++;
    if (memcmp(y1, y2, ybytes)) {
      if (bad < 10) printf("mismatch M=%u N=%u K=%u mode=%d out=%u\n", M, N, K, mode, od);
      bad++;
    }
    free(xa); free(xb); free(ap); free(b1); free(b2); free(colsum); free(zcol); free(bias); free(za_row); free(mult);
    free(y1); free(y2);
  }
  printf("qgemm=%s features=0x%x: %ld cases, %ld mismatches\n", ep_edge_qgemm_name(), ep_edge_cpu_features(), cases, bad);
  return bad != 0;
}
