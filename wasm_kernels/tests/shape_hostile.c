/* Hostile nodes through the shape and scratch functions of the convolution, linear-algebra and pooling kernels,
 * built with ASan + UBSan (make build/asan/shape_hostile): random ranks, dims, dtypes, absent inputs and parameter
 * words (exactly n_params of them, so a read past them is caught), as the core's shape resolution meets them before
 * any check(). Also scratch() without shape(). Prints "<calls> <shapes accepted>"; a sanitizer report aborts. */
#include <stdio.h>
#include <stdlib.h>
#include "shape/conv_linalg.h"

static uint64_t state = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return (uint32_t)(state % n);
}

static const int32_t VALS[] = {0, 1, 2, 3, 4, 6, 8, 9, 16, 36, -1, -2, 255, 256, 65535, 65536, 1 << 20, 1 << 24,
                               (1 << 24) + 1, 0x7FFFFFFF, (int32_t)0x80000000};
static int32_t value(void) { return rnd(3) ? (int32_t)rnd(20) : VALS[rnd(sizeof VALS / sizeof VALS[0])]; }

/* plausible: ranks 2..4 and dims 1..12 (nodes that pass, so that scratch() runs on resolved shapes too) */
static void tensor(ep_tensor *t, int plausible) {
  static const uint32_t DT[] = {EP_F32, EP_U8, EP_I8, EP_I32, EP_I64, EP_F16};
  t->dtype = DT[rnd(6)];
  t->rank = plausible ? 2 + rnd(3) : rnd(7);
  t->numel = 1;
  for (uint32_t i = 0; i < EP_MAX_RANK; i++) {
    const int32_t v = plausible ? 1 + (int32_t)rnd(12) : value();
    t->dims[i] = i < t->rank ? (int32_t)((uint32_t)v & 0x7FFFFFFFu) : 0;
    if (i < t->rank) t->numel *= (uint64_t)t->dims[i];
  }
  t->data = 0;
}

int main(int argc, char **argv) {
  const long iters = argc > 1 ? atol(argv[1]) : 200000;
  static const uint32_t OPS[] = {EP_OP_CONV, EP_OP_DEPTHWISE_CONV, EP_OP_WINOGRAD_CONV, EP_OP_WINOGRAD_CONV_F4,
                                 EP_OP_WINOGRAD_FILTER, EP_OP_CONV_TRANSPOSE, EP_OP_GEMM, EP_OP_MATMUL, EP_OP_POOL,
                                 EP_OP_QCONV, EP_OP_QDEPTHWISE_CONV, EP_OP_QMATMUL, EP_OP_QWINOGRAD_CONV};
  long accepted = 0;
  for (long it = 0; it < iters; it++) {
    ep_tensor in[6], out;
    ep_node n = {0};
    /* each op's current parameter count (MATMUL: 0, 4 or 6; CONV_TRANSPOSE and POOL with 2 spatial dims) */
    static const uint32_t NP[] = {17, 13, 16, 16, 1, 10, 8, 6, 15, 18, 15, 6, 17};
    const uint32_t o = rnd(sizeof OPS / sizeof OPS[0]);
    const int plausible = rnd(2);
    n.op = OPS[o];
    n.n_in = 1 + rnd(6);
    n.n_out = 1;
    for (uint32_t k = 0; k < n.n_in; k++) { tensor(&in[k], plausible); n.in[k] = k < 2 || rnd(2) ? &in[k] : 0; }
    tensor(&out, plausible);
    n.out[0] = &out;
    n.n_params = plausible ? NP[o] : rnd(4) ? 12 + rnd(8) : rnd(24);
    int32_t *p = malloc(n.n_params ? n.n_params * 4u : 1u);
    for (uint32_t i = 0; i < n.n_params; i++) p[i] = plausible && rnd(4) ? (int32_t)rnd(4) : value();
    if (plausible && (n.op == EP_OP_POOL || n.op == EP_OP_CONV_TRANSPOSE)) p[n.op == EP_OP_POOL ? 1 : 0] = 2;
    n.params = p;
    const ep_shape_entry *e = ep_shape_for(n.op);
    if (!e || !e->shape) return 1;
    if (e->scratch) (void)e->scratch(&n);
    if (e->shape(&n) == EP_OK) {
      accepted++;
      if (e->scratch) (void)e->scratch(&n);
    }
    free(p);
  }
  printf("%ld %ld\n", iters, accepted);
  return 0;
}
