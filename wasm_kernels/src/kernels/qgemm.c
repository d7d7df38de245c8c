/* Integer GEMM: register-blocked micro-kernel (EP_QGEMM_MR x EP_QGEMM_NR = 4 x 8) over packed
 * panels, packing of both operands and the requantizing epilogue (see qgemm.h).
 * Per k pair the micro-kernel does 2 loads of B, 4 load-splats of A's row pairs (A widened to int16 per panel)
 * and 8 i32x4.dot_i16x8 (64 multiply-adds): 8 accumulators + 2 B + 1 broadcast registers, inside the 16 every
 * SIMD128 engine has. */
#include "qgemm.h"
#include "gemm.h"

#define MR EP_QGEMM_MR
#define NR EP_QGEMM_NR

EP_COLD ep_status ep_qgemm_check_epi(int32_t act, uint32_t out_dtype, int has_mult) {
  EP_CHECK(ep_gemm_check_act(act) == EP_OK, EP_E_PARAM);
  if (out_dtype == EP_I32) EP_CHECK(!has_mult && act == 0, EP_E_PARAM);
  else EP_CHECK(out_dtype == EP_I8 || out_dtype == EP_U8 || out_dtype == EP_F32, EP_E_DTYPE);
  if (out_dtype != EP_I32) EP_CHECK(has_mult, EP_E_OP);
  return EP_OK;
}

EP_AINLINE f32x4 qact(f32x4 v, int32_t act, f32x4 p0, f32x4 p1) {
  switch (act) {
    case EP_ACT_RELU: return f32x4_max(v, f32x4_zero());
    case EP_ACT_LEAKY_RELU: return f32x4_add(f32x4_max(v, f32x4_zero()), f32x4_mul(p0, f32x4_min(v, f32x4_zero())));
    case EP_ACT_CLIP: return f32x4_min(f32x4_max(v, p0), p1);
    default: return v;
  }
}

EP_COLD void ep_q_store_bytes(uint8_t *dst, const void *src, uint32_t cnt, uint64_t cs, uint32_t esz) {
  const uint8_t *s = (const uint8_t *)src;
  for (uint32_t i = 0; i < cnt; i++)
    for (uint32_t b = 0; b < esz; b++) dst[i * cs * esz + b] = s[i * esz + b];
}

EP_COLD void ep_q_bounds(const ep_qgemm_epi *e, float *lo, float *hi) {
  const int u8 = e->out_dtype == EP_U8;
  const float qlo = (float)((u8 ? 0 : -128) - e->yzp), qhi = (float)((u8 ? 255 : 127) - e->yzp);
  float a = qlo, b = qhi;
  if (e->act == EP_ACT_RELU) a = 0.0f;
  if (e->act == EP_ACT_CLIP) { a = e->p0; b = e->p1; }
  /* each bound clamped into [qlo, qhi] (NaN -> the range's own bound) */
  *lo = a > qlo ? (a < qhi ? a : qhi) : qlo;
  *hi = b < qhi ? (b > qlo ? b : qlo) : qhi;
}

void ep_q_store8(f32x4 v0, f32x4 v1, const ep_qgemm_epi *e, uint8_t *dst, uint32_t cnt, uint64_t cs) {
  const f32x4 p0 = f32x4_splat(e->p0), p1 = f32x4_splat(e->p1);
  if (e->out_dtype == EP_F32 || e->act == EP_ACT_LEAKY_RELU) {
    v0 = qact(v0, e->act, p0, p1);
    v1 = qact(v1, e->act, p0, p1);
  }
  if (e->out_dtype == EP_F32) {
    float t[8];
    if (cnt == 8 && cs == 1) { f32x4_store((float *)(void *)dst, v0); f32x4_store((float *)(void *)dst + 4, v1); return; }
    f32x4_store(t, v0); f32x4_store(t + 4, v1);
    ep_q_store_bytes(dst, t, cnt, cs, 4);
    return;
  }
  float lo, hi;
  ep_q_bounds(e, &lo, &hi);
  const i8x16 q = ep_q8_pack(v0, v1, f32x4_splat(lo), f32x4_splat(hi), ep_q_zbits(e->yzp), e->out_dtype == EP_U8);
  if (cnt == 8 && cs == 1) { i8x16_store_lo8(dst, q); return; }
  uint8_t t[8];
  i8x16_store_lo8(t, q);
  ep_q_store_bytes(dst, t, cnt, cs, 1);
}

/* t[0..8) = src[0..cnt), zero past cnt (partial tiles). */
EP_COLD static void fill8(void *t, const void *src, uint32_t cnt) {
  uint32_t *d = (uint32_t *)t;
  const uint32_t *s = (const uint32_t *)src;
  for (uint32_t i = 0; i < 8; i++) d[i] = i < cnt ? s[i] : 0;
}

/* Epilogue of one row's 8 accumulators (local columns n..n+cnt). */
__attribute__((noinline)) void ep_qgemm_epi_row(const ep_qgemm_epi *e, uint32_t m, uint32_t n, uint32_t n_off, uint32_t cnt,
                                                i32x4 v0, i32x4 v1) {
  const uint32_t na = n_off + n;
  int32_t t[8];
  if (e->colsum) {
    const i32x4 z = i32x4_splat(e->za_row ? e->za_row[m] : e->za);
    v0 = i32x4_sub(v0, i32x4_mul(z, i32x4_load(e->colsum + n)));
    v1 = i32x4_sub(v1, i32x4_mul(z, i32x4_load(e->colsum + n + 4)));
  }
  if (e->bias) {
    i32x4 b0, b1;
    if (!e->bias_col) { b0 = b1 = i32x4_splat(e->bias[m]); }
    else {
      const int32_t *bp = e->bias + na;
      if (cnt < 8) { fill8(t, bp, cnt); bp = t; }
      b0 = i32x4_load(bp); b1 = i32x4_load(bp + 4);
    }
    v0 = i32x4_add(v0, b0); v1 = i32x4_add(v1, b1);
  }
  const uint64_t at = (uint64_t)m * e->rs + (uint64_t)na * e->cs;
  if (!e->mult) {
    i32x4_store(t, v0); i32x4_store(t + 4, v1);
    ep_q_store_bytes((uint8_t *)e->y + 4 * at, t, cnt, e->cs, 4);
    return;
  }
  f32x4 s0, s1;
  if (!e->mult_col) { s0 = s1 = f32x4_splat(e->mult[m]); }
  else {
    const float *mp = e->mult + na;
    float tm[8];
    if (cnt < 8) { fill8(tm, mp, cnt); mp = tm; }
    s0 = f32x4_load(mp); s1 = f32x4_load(mp + 4);
  }
  ep_q_store8(f32x4_mul(f32x4_from_i32x4(v0), s0), f32x4_mul(f32x4_from_i32x4(v1), s1), e, e->y + at * (e->out_dtype == EP_F32 ? 4 : 1), cnt, e->cs);
}

/* acc[r][0..1] = sum over Kp pairs of A'[r] pair . B' pairs of 8 columns. A is int16 pairs when a16 (the int8
 * panels widened by widen_a, or QWINOGRAD_CONV's transformed weights: same layout, 2-byte elements): each row's pair
 * is then broadcast by a 32-bit load-splat, which engines emit as a load (x64: vbroadcastss [mem]), where a lane
 * shuffle of a loaded vector takes a vector ALU slot, and the loop is bound by those slots (8 dots + 8 adds per
 * pair). int8 panels (the scalar build, for its size) take one widening load and 4 shuffles per pair. */
EP_AINLINE void micro(uint32_t Kp, const void *ap, const int a16, const int16_t *b, uint32_t ldb2, i32x4 acc[MR][2]) {
  i32x4 c00 = i32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const int16_t *a = (const int16_t *)ap;
  const int8_t *a8 = (const int8_t *)ap;
  for (uint32_t p = 0; p < Kp; p++) {
    const i16x8 b0 = i16x8_load(b), b1 = i16x8_load(b + 8);
    const i16x8 av = a16 ? i16x8_splat(0) : i16x8_load_i8(a8);
#define EP_QROWSPLAT(r) (a16 ? i16x8_load_pair_splat(a + 2 * (r)) : i16x8_pair_splat(av, r))
    i16x8 s;
    s = EP_QROWSPLAT(0); c00 = i32x4_dot_i16x8_add(c00, b0, s); c01 = i32x4_dot_i16x8_add(c01, b1, s);
    s = EP_QROWSPLAT(1); c10 = i32x4_dot_i16x8_add(c10, b0, s); c11 = i32x4_dot_i16x8_add(c11, b1, s);
    s = EP_QROWSPLAT(2); c20 = i32x4_dot_i16x8_add(c20, b0, s); c21 = i32x4_dot_i16x8_add(c21, b1, s);
    s = EP_QROWSPLAT(3); c30 = i32x4_dot_i16x8_add(c30, b0, s); c31 = i32x4_dot_i16x8_add(c31, b1, s);
#undef EP_QROWSPLAT
    a += 2 * MR;
    a8 += 2 * MR;
    b += ldb2;
  }
  acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11;
  acc[2][0] = c20; acc[2][1] = c21; acc[3][0] = c30; acc[3][1] = c31;
}

#if EP_ISA_SCALAR
#define QGEMM_WIDE_PAIRS 1u   /* the scalar build reads int8 A directly: its vector ops are loops, no slots to save */
#else
#define QGEMM_WIDE_PAIRS 2304u   /* int8 A pairs per widened chunk: 36 KB of stack (a wasm worker's stack is 64 KB) */
/* Pairs [0, n) of an int8 A panel as int16, micro's layout. */
EP_NOINLINE static void widen_a(const int8_t *a, uint32_t n, int16_t *w) {
  for (uint32_t p = 0; p < n; p++) i16x8_store(w + 2 * MR * p, i16x8_load_i8(a + 2 * MR * p));
}
#endif

/* One tile's sums over all of K (tile n of panel ap): A widened chunk by chunk into aw, once per panel when K fits
 * one chunk (tile 0 widens it for the others). */
EP_AINLINE void tile_sums(uint32_t Kp, const int8_t *ap, int16_t *aw, const int16_t *b, uint32_t ldb, uint32_t n,
                          i32x4 acc[MR][2]) {
#if EP_ISA_SCALAR
  (void)aw;
  micro(Kp, ap, 0, b + 2 * (uint64_t)n, 2 * ldb, acc);
#else
  for (uint32_t p0 = 0; p0 < Kp; p0 += QGEMM_WIDE_PAIRS) {
    const uint32_t np = Kp - p0 < QGEMM_WIDE_PAIRS ? Kp - p0 : QGEMM_WIDE_PAIRS;
    i32x4 t[MR][2];
    if (n == 0 || np < Kp) widen_a(ap + (uint64_t)p0 * 2 * MR, np, aw);
    micro(np, aw, 1, b + ((uint64_t)p0 * ldb + n) * 2, 2 * ldb, p0 ? t : acc);
    if (p0)
      for (uint32_t r = 0; r < MR; r++) { acc[r][0] = i32x4_add(acc[r][0], t[r][0]); acc[r][1] = i32x4_add(acc[r][1], t[r][1]); }
  }
#endif
}

__attribute__((noinline)) void ep_qepi_row(const ep_qgemm_epi *e, const ep_qepi_mode *f, uint32_t m, uint32_t n,
                                           uint32_t n_off, uint32_t cnt, i32x4 v0, i32x4 v1) {
  if (!f->fast) { ep_qgemm_epi_row(e, m, n, n_off, cnt, v0, v1); return; }
  const i32x4 bv = i32x4_splat(e->bias ? e->bias[m] : 0);
  const f32x4 mv = f32x4_splat(e->mult[m]);
  const i8x16 q = ep_qepi_fast8(f, v0, v1, bv, mv);
  uint8_t *dst = e->y + (uint64_t)m * e->rs + n_off + n;
  if (cnt == NR) {
    i8x16_store_lo8(dst, q);
  } else {
    uint8_t t[8];
    i8x16_store_lo8(t, q);
    ep_q_store_bytes(dst, t, cnt, 1, 1);
  }
}

/* Stores one tile's accumulators: rows m0..m0+mr, local columns n..n+cnt. */
EP_AINLINE void epi_tile(const ep_qgemm_epi *e, const ep_qepi_mode *f, uint32_t m0, uint32_t mr, uint32_t n, uint32_t n_off,
                         uint32_t cnt, i32x4 acc[MR][2]) {
#if !EP_ISA_SCALAR
  if (f->col && cnt == NR) {   /* ep_qgemm_epi_row's arithmetic with the column terms once per tile: the same bits */
    const uint32_t na = n_off + n;
    i32x4 b0 = e->bias ? i32x4_load(e->bias + na) : i32x4_splat(0), b1 = e->bias ? i32x4_load(e->bias + na + 4) : b0;
    if (e->colsum) {
      const i32x4 z = i32x4_splat(e->za);
      b0 = i32x4_sub(b0, i32x4_mul(z, i32x4_load(e->colsum + n)));
      b1 = i32x4_sub(b1, i32x4_mul(z, i32x4_load(e->colsum + n + 4)));
    }
    const f32x4 s0 = f32x4_load(e->mult + na), s1 = f32x4_load(e->mult + na + 4);
    for (uint32_t r = 0; r < mr; r++)
      i8x16_store_lo8(e->y + (uint64_t)(m0 + r) * e->rs + na,
                      ep_q8_pack(f32x4_mul(f32x4_from_i32x4(i32x4_add(acc[r][0], b0)), s0),
                                 f32x4_mul(f32x4_from_i32x4(i32x4_add(acc[r][1], b1)), s1), f->lo, f->hi, f->zb, f->u8));
    return;
  }
#endif
  for (uint32_t r = 0; r < mr; r++) ep_qepi_row(e, f, m0 + r, n, n_off, cnt, acc[r][0], acc[r][1]);
}

void ep_qgemm_raw16(uint32_t Kp, const int16_t *a, const int16_t *b, uint32_t ldb, uint32_t N, int32_t *c, uint32_t ldc) {
  i32x4 acc[MR][2];
  for (uint32_t n = 0; n < N; n += NR) {
    micro(Kp, a, 1, b + 2 * (uint64_t)n, 2 * ldb, acc);
    for (uint32_t r = 0; r < MR; r++) {
      i32x4_store(c + (uint64_t)r * ldc + n, acc[r][0]);
      i32x4_store(c + (uint64_t)r * ldc + n + 4, acc[r][1]);
    }
  }
}

/* The fast epilogue (ep_qepi_row's first path) of a whole 4 x 8 tile, inline: the accumulators stay in registers
 * (no call per row), and each row's bias and multiplier are load-splats from the panel's 4 (bv, mv): loads, where
 * lane splats of vectors held across the panel were shuffles on the vector ALU the tile loop is bound by. Same
 * operations in the same order as ep_qepi_row: the same bits. */
EP_AINLINE void epi_tile_fast(const ep_qepi_mode *f, const int32_t *bv, const float *mv, uint8_t *dst, uint64_t rs,
                              i32x4 acc[MR][2]) {
#define EP_QROW(r) i8x16_store_lo8(dst + (r) * rs, ep_qepi_fast8(f, acc[r][0], acc[r][1], \
    f32x4_as_i32x4(f32x4_load_splat((const float *)(const void *)(bv + (r)))), f32x4_load_splat(mv + (r))));
  EP_QROW(0) EP_QROW(1) EP_QROW(2) EP_QROW(3)
#undef EP_QROW
}

static const int32_t zero_bias[MR];

/* The dot_i16x8 GEMM (every build; the relaxed build's fallback). */
static void qgemm_i16(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, const int16_t *b, uint32_t ldb, uint32_t n_off,
                      const ep_qgemm_epi *e) {
  const uint32_t Kp = (K + 1) / 2;
  const ep_qepi_mode f = ep_qepi_mode_of(e);
  int16_t aw[QGEMM_WIDE_PAIRS * 2 * MR];
  i32x4 acc[MR][2];
  for (uint32_t m0 = 0; m0 < M; m0 += MR) {
    const int8_t *ap = a + (uint64_t)(m0 / MR) * Kp * 2 * MR;
    const uint32_t mr = M - m0 < MR ? M - m0 : MR;
    const int whole = f.fast && mr == MR;
    const int32_t *const bv = e->bias ? e->bias + m0 : zero_bias;
    const float *const mv = e->mult ? e->mult + m0 : 0;
    uint8_t *const yp = e->y + (uint64_t)m0 * e->rs + n_off;
    for (uint32_t n = 0; n < N; n += NR) {
      tile_sums(Kp, ap, aw, b, ldb, n, acc);
      if (whole && N - n >= NR) epi_tile_fast(&f, bv, mv, yp + n, e->rs, acc);
      else epi_tile(e, &f, m0, mr, n, n_off, N - n < NR ? N - n : NR, acc);
    }
  }
}

/* One column (N = 1: a classifier's matrix-vector product) as 4 rows x 1 pair per dot, instead of 4 x 8 tiles
 * with 7 columns of padding. QGEMV_G panels (4 * G rows) per pass: each B pair is loaded and splatted once for G
 * dots into G independent accumulators, K unrolled by 2. Integer sums: the same results as the tiles. */
#if defined(EP_VEC_SCALAR_H)
#define QGEMV_G 1   /* the scalar build (vector ops as loops): one panel per pass, for size */
#else
#define QGEMV_G 4
#endif
EP_AINLINE void gemv_pass(uint32_t Kp, const int8_t *a, uint64_t ps, const int16_t *b, uint64_t ld2, const int G,
                          i32x4 *r) {
  i32x4 s[QGEMV_G];
  for (int g = 0; g < G; g++) s[g] = i32x4_splat(0);
  uint32_t p = 0;
  for (; p + 2 <= Kp; p += 2, a += 4 * MR, b += 2 * ld2) {
    const i16x8 x = i16x8_load_pair_splat(b), y = i16x8_load_pair_splat(b + ld2);
    for (int g = 0; g < G; g++)
      s[g] = i32x4_dot_i16x8_add(i32x4_dot_i16x8_add(s[g], i16x8_load_i8(a + g * ps), x), i16x8_load_i8(a + g * ps + 2 * MR), y);
  }
  if (p < Kp) {
    const i16x8 x = i16x8_load_pair_splat(b);
    for (int g = 0; g < G; g++) s[g] = i32x4_dot_i16x8_add(s[g], i16x8_load_i8(a + g * ps), x);
  }
  for (int g = 0; g < G; g++) r[g] = s[g];
}

static void qgemv_i16(uint32_t M, uint32_t K, const int8_t *a, const int16_t *b, uint32_t ldb, uint32_t n_off,
                      const ep_qgemm_epi *e) {
  const uint32_t Kp = (K + 1) / 2, np = (M + MR - 1) / MR;
  const uint64_t ld2 = 2 * (uint64_t)ldb, ps = (uint64_t)Kp * 2 * MR;
  const ep_qepi_mode f = ep_qepi_mode_of(e);
  i32x4 acc[MR][2], s[QGEMV_G];
  for (uint32_t t = 0; t < np;) {
    const uint32_t G = np - t >= QGEMV_G ? QGEMV_G : 1;
    if (G == QGEMV_G) gemv_pass(Kp, a + t * ps, ps, b, ld2, QGEMV_G, s);
    else gemv_pass(Kp, a + t * ps, ps, b, ld2, 1, s);
    for (uint32_t g = 0; g < G; g++, t++) {
      const uint32_t m0 = t * MR;
      if (f.fast && M - m0 >= MR) {   /* ep_qepi_row's fast path on the panel's 4 rows at once: the same bits */
        const i32x4 bv = e->bias ? i32x4_load(e->bias + m0) : i32x4_splat(0);
        uint8_t q[16], *dst = e->y + (uint64_t)m0 * e->rs + n_off;
        i8x16_store_lo8(q, ep_qepi_fast8(&f, s[g], s[g], bv, f32x4_load(e->mult + m0)));
        for (uint32_t i = 0; i < MR; i++) dst[i * e->rs] = q[i];
        continue;
      }
      int32_t r[MR];
      i32x4_store(r, s[g]);
      for (uint32_t i = 0; i < MR; i++) acc[i][0] = acc[i][1] = i32x4_splat(r[i]);
      epi_tile(e, &f, m0, M - m0 < MR ? M - m0 : MR, 0, n_off, 1, acc);
    }
  }
}

#if EP_ISA_WASM_RELAXED   /* src/vec/ep_isa.h */
/* Relaxed SIMD: the relaxed dot of int8 by 7-bit lanes does 16 multiply-adds per instruction, twice
 * dot_i16x8's 8. Its second operand must lie in [0, 127] for the result to be exact and the same on every
 * engine (x86 lowers it to pmaddubsw, which reads that operand as unsigned and whose int16 pair sums cannot
 * saturate then). So, as the aarch64 SDOT kernel does: each 8-column strip of B' whose columns each span at
 * most 127 values is shifted by c[n] = -min into [0, 127] and rewritten in place as int8 quads
 * (qgemm_quads.h); pair 1's slot (unused by quads) keeps c as 8 int32. Then acc = A'(B' + c) - c * rowsum(A')
 * and the same epilogue (epi_tile) as the dot_i16x8 path: bit-identical results. Strips from the first one
 * that does not fit (a span > 127, or K < 3: no pair 1) go to qgemm_i16. Filler lanes face A' = 0, so
 * their value (in or out of [0, 127]) gives 0 on every engine. */
#include "qgemm_quads.h"

/* One strip as quads of B' + c in [0, 127] (qgemm_quads.h); the offsets go to pair 1's slot (K >= 3). */
static int strip_to_i7(int16_t *s, uint64_t ld2, uint32_t K) {
  i32x4 c03, c47;
  if (!ep_qgemm_strip_quads(s, ld2, K, 0, 127, &c03, &c47)) return 0;
  i32x4_store((int32_t *)(void *)(s + ld2), c03);
  i32x4_store((int32_t *)(void *)(s + ld2) + 4, c47);
  return 1;
}

/* lane i of c += the 4 products of a's and b's bytes 4i..4i+3: two spellings, the same sums. The pair form, the
 * i16x8 dot (pair sums, <= 32512 in magnitude) + pairwise widening, is 3 instructions on engines without a native
 * 4-way dot (x86 before VNNI: pmaddubsw + pmaddwd), where the fused i32x4.relaxed_dot_i8x16_i7x16_add is 5 (it
 * rebuilds its ones); the fused form is one vpdpbusd / sdot where the engine maps it. The engine, not the build,
 * decides which is faster: the host times both (ep_qdot_probe) and sets one (ep_qdot_use), web/src/int8_dot_choice.js. */
static int32_t qdot_fused;
#define DOT4_PAIR(c, a, b) wasm_i32x4_add(c, wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16(a, b), one16))
#define DOT4(c, a, b) (fused ? wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a, b, c) : DOT4_PAIR(c, a, b))
/* A panel's pairs 2q, 2q+1 ([pair][row][2] bytes) -> [row][depths 4q..4q+3]; then row r in every lane. */
#define ROWS(av) wasm_i8x16_shuffle(av, av, 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15)
#define DOT_ROW(av, r, c0, c1) { const v128_t s_ = wasm_i32x4_shuffle(av, av, r, r, r, r); \
    c0 = DOT4(c0, s_, b0); c1 = DOT4(c1, s_, b1); }
#define QUAD(raw) { const v128_t b0 = wasm_v128_load(bq), b1 = wasm_v128_load(bq + 16), av = ROWS(raw); \
    DOT_ROW(av, 0, c00, c01) DOT_ROW(av, 1, c10, c11) DOT_ROW(av, 2, c20, c21) DOT_ROW(av, 3, c30, c31) }

/* acc[r][0..1] = sum over the quads of A'[r] . (B' + c) for one strip; 8 accumulators + 2 B + A + splat. */
EP_AINLINE void micro_i7_form(uint32_t Kp, const int8_t *a, const int8_t *bq, uint64_t qstride, i32x4 acc[MR][2],
                              const int fused) {
  v128_t c00 = wasm_i32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const v128_t one16 = wasm_i16x8_splat(1);
  for (uint32_t q = 0; 2 * q < Kp; q++, bq += qstride)   /* an odd last pair ends the panel: the rest is 0 */
    QUAD(2 * q + 1 < Kp ? wasm_v128_load(a + 16 * q) : wasm_v128_load64_zero(a + 16 * q))
  acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11;
  acc[2][0] = c20; acc[2][1] = c21; acc[3][0] = c30; acc[3][1] = c31;
}

/* micro_i7_form in the form chosen: the test is per tile, outside the loop. */
EP_NOINLINE static void micro_i7(uint32_t Kp, const int8_t *a, const int8_t *bq, uint64_t qstride, i32x4 acc[MR][2],
                                 const int32_t fused) {
  if (fused) micro_i7_form(Kp, a, bq, qstride, acc, 1);
  else micro_i7_form(Kp, a, bq, qstride, acc, 0);
}

__attribute__((export_name("ep_qdot_use"))) void ep_qdot_use(const int32_t fused) { qdot_fused = fused != 0; }

/* reps strips of 64 pairs in one form on fixed inputs, for the host to time and to check: returns a hash of the
 * sums, the same in both forms where the engine computes the fused form exactly (Node 20's Liftoff does not). Each
 * strip's input depends on the last result: nothing is hoisted out of the loop. */
__attribute__((export_name("ep_qdot_probe"))) int32_t ep_qdot_probe(const int32_t fused, const uint32_t reps) {
  static int8_t a[64 * 2 * MR], bq[32 * 32];
  EP_COMPACT_LOOP
  for (uint32_t i = 0; i < sizeof bq; i++) { a[i & 511] = (int8_t)(i * 37u + 11u); bq[i] = (int8_t)((i * 29u + 5u) & 127u); }
  i32x4 acc[MR][2];
  int32_t h = 0;
  for (uint32_t r = 0; r < reps; r++) {
    micro_i7(64, a, bq, 32, acc, fused);
    int32_t t[4];
    wasm_v128_store(t, acc[r & 3][r & 1]);
    const int32_t v = t[r & 3];
    h = h * 31 + v;
    a[r & 255] = (int8_t)v;
  }
  return h;
}

/* Row sums of one A' panel: lane r = sum_k A'[r][k] (the ones vector is the 7-bit operand). In the pair form
 * always: Node 20's baseline compiler (Liftoff) doubles the fused form's sums, until the function tiers up. */
static v128_t panel_rowsum(uint32_t Kp, const int8_t *a) {
  const v128_t ones = wasm_i8x16_splat(1), one16 = wasm_i16x8_splat(1);
  v128_t rs = wasm_i32x4_splat(0);
  for (uint32_t q = 0; q < (Kp + 1) / 2; q++) {
    const v128_t av = 2 * q + 1 < Kp ? wasm_v128_load(a + 16 * q) : wasm_v128_load64_zero(a + 16 * q);
    rs = DOT4_PAIR(rs, ROWS(av), ones);
  }
  return rs;
}

static void qgemm_tiles(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
                        const ep_qgemm_epi *e) {
  const uint32_t Kp = (K + 1) / 2;
  const uint64_t ld2 = 2 * (uint64_t)ldb;
  uint32_t nq = 0;  /* strips [0, nq) converted */
  if (K >= 3)
    while (nq < N && strip_to_i7(b + 2 * (uint64_t)nq, ld2, K)) nq += NR;
  if (nq > N) nq = N;
  if (nq) {
    const ep_qepi_mode f = ep_qepi_mode_of(e);
    i32x4 acc[MR][2];
    for (uint32_t m0 = 0; m0 < M; m0 += MR) {
      const int8_t *ap = a + (uint64_t)(m0 / MR) * Kp * 2 * MR;
      const uint32_t mr = M - m0 < MR ? M - m0 : MR;
      int32_t rsum[MR];
      wasm_v128_store(rsum, panel_rowsum(Kp, ap));
      const int whole = f.fast && mr == MR;
      const int32_t *const bv = e->bias ? e->bias + m0 : zero_bias;
      const float *const mv = e->mult ? e->mult + m0 : 0;
      uint8_t *const yp = e->y + (uint64_t)m0 * e->rs + n_off;
      for (uint32_t n = 0; n < nq; n += NR) {
        const int16_t *s = b + 2 * (uint64_t)n;
        micro_i7(Kp, ap, (const int8_t *)(const void *)s, 4 * ld2, acc, qdot_fused);
        const v128_t cl = wasm_v128_load(s + ld2), ch = wasm_v128_load(s + ld2 + 8);
        for (uint32_t r = 0; r < MR; r++) {
          const v128_t sr = wasm_i32x4_splat(rsum[r]);
          acc[r][0] = wasm_i32x4_sub(acc[r][0], wasm_i32x4_mul(cl, sr));
          acc[r][1] = wasm_i32x4_sub(acc[r][1], wasm_i32x4_mul(ch, sr));
        }
        if (whole && N - n >= NR) epi_tile_fast(&f, bv, mv, yp + n, e->rs, acc);
        else epi_tile(e, &f, m0, mr, n, n_off, N - n < NR ? N - n : NR, acc);
      }
    }
  }
  if (nq < N) {
    ep_qgemm_epi es = *e;
    if (es.colsum) es.colsum += nq;
    qgemm_i16(M, N - nq, K, a, b + 2 * (uint64_t)nq, ldb, n_off + nq, &es);
  }
}
#else
#define qgemm_tiles qgemm_i16
#endif

/* A block's last 1..4 columns (e.g. 49 = 6 tiles + 1 for a 7x7 map) run as matrix-vector products, one column each,
 * rather than as a tile of 8 that is mostly padding. Integer sums: the tiles' results. */
/* ep_qgemm, or ep_qgemm_portable where the ISA has its own kernel (src/vec/ep_isa.h) */
void EP_QGEMM_PORTABLE(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
              const ep_qgemm_epi *e) {
  const uint32_t tail = N % NR, nt = N > NR && tail && tail <= NR / 2 ? N - tail : N;
  if (nt == 1) qgemv_i16(M, K, a, b, ldb, n_off, e);
  else qgemm_tiles(M, nt, K, a, b, ldb, n_off, e);
  for (uint32_t n = nt; n < N; n++) {
    ep_qgemm_epi es = *e;
    if (es.colsum) es.colsum += n;
    qgemv_i16(M, K, a, b + 2 * (uint64_t)n, ldb, n_off + n, &es);
  }
}

/* Columns [n, ldb) of one pair row (n a multiple of 8): zero, then the columns below N scalar (the matrix-vector
 * products' one column: a pair row costs 2 stores and 1 column). */
EP_COLD static void pack_b_tail(int16_t *d, uint32_t n, uint32_t N, uint32_t ldb, const uint8_t *r0, const uint8_t *r1,
                                int is_u8, int32_t zp, const int32_t *zp_col) {
  for (uint32_t q = n; q < ldb; q += 8) { i16x8_store(d + 2 * q, i16x8_splat(0)); i16x8_store(d + 2 * q + 8, i16x8_splat(0)); }
  EP_COMPACT_LOOP
  for (; n < N; n++) {
    int32_t z = zp_col ? zp_col[n] : zp;
    const int32_t lo = is_u8 ? 0 : -128;   /* a plan's zero point outside the 8-bit range is clamped: |B'| <= 255 */
    z = z < lo ? lo : z > lo + 255 ? lo + 255 : z;
    d[2 * n] = (int16_t)((is_u8 ? (int32_t)r0[n] : (int32_t)(int8_t)r0[n]) - z);
    d[2 * n + 1] = (int16_t)((is_u8 ? (int32_t)r1[n] : (int32_t)(int8_t)r1[n]) - z);
  }
}

void ep_qgemm_pack_b(int16_t *b, uint32_t ldb, uint32_t K, uint32_t N, const uint8_t *x, uint64_t rs, int is_u8,
                     int32_t zp, const int32_t *zp_col, int32_t *colsum) {
  const uint32_t Kp = (K + 1) / 2;
  const i16x8 zv = i16x8_splat((int16_t)zp);
  for (uint32_t p = 0; p < Kp; p++) {
    const uint8_t *r0 = x + (uint64_t)(2 * p) * rs;
    /* odd K: the last pair repeats row K-1, which A's zero padding cancels (colsum skips it) */
    const uint8_t *r1 = 2 * p + 1 < K ? r0 + rs : r0;
    int16_t *d = b + (uint64_t)p * ldb * 2;
    uint32_t n = 0;
    if (!zp_col) {
      for (; n + 8 <= N; n += 8) {
        const i16x8 v0 = i16x8_sub(is_u8 ? i16x8_load_u8(r0 + n) : i16x8_load_i8((const int8_t *)r0 + n), zv);
        const i16x8 v1 = i16x8_sub(is_u8 ? i16x8_load_u8(r1 + n) : i16x8_load_i8((const int8_t *)r1 + n), zv);
        i16x8_store(d + 2 * n, i16x8_zip_lo(v0, v1));
        i16x8_store(d + 2 * n + 8, i16x8_zip_hi(v0, v1));
      }
    }
    pack_b_tail(d, n, N, ldb, r0, r1, is_u8, zp, zp_col);
  }
  if (colsum) ep_qgemm_colsum(b, ldb, K, ldb, colsum);
}

/* Column sums of packed B, accumulated a k-pair row at a time: 4 columns' pairs per i32x4 dot with ones (QMATMUL
 * calls it per run for its W: a scalar loop here cost about as much as packing W). An odd K's last pair repeats
 * row K-1: only its first element counts. */
EP_COLD void ep_qgemm_colsum(const int16_t *b, uint32_t ldb, uint32_t K, uint32_t N, int32_t *colsum) {
  const uint32_t Kp = (K + 1) / 2;
  const i16x8 ones = i16x8_splat(1);
  for (uint32_t n = 0; n < N; n++) colsum[n] = 0;
  for (uint32_t p = 0; p < Kp; p++) {
    const int16_t *d = b + (uint64_t)p * ldb * 2;
    uint32_t n = 0;
    if (2 * p + 1 < K)
      for (; n + 4 <= N; n += 4) i32x4_store(colsum + n, i32x4_dot_i16x8_add(i32x4_load(colsum + n), i16x8_load(d + 2 * n), ones));
    const int odd = 2 * p + 1 == K;
    for (; n < N; n++) colsum[n] += (int32_t)d[2 * n] + (odd ? 0 : d[2 * n + 1]);
  }
}

EP_COLD void ep_qgemm_pack_a(uint32_t M, uint32_t K, const uint8_t *x, uint64_t rs, int is_u8, int8_t *dst) {
  const uint32_t Kp = (K + 1) / 2;
  const uint8_t flip = is_u8 ? 0x80u : 0u;   /* u - 128 as int8 is u ^ 0x80 */
  for (uint32_t m0 = 0; m0 < M; m0 += MR) {
    uint32_t p = 0;
    if (m0 + MR <= M)   /* full panel, whole pairs: no per-element bounds test (QMATMUL packs X every run) */
      for (; 2 * p + 1 < K; p++)
        for (uint32_t r = 0; r < MR; r++, dst += 2) {
          const uint8_t *s = x + (uint64_t)(m0 + r) * rs + 2 * p;
          dst[0] = (int8_t)(s[0] ^ flip);
          dst[1] = (int8_t)(s[1] ^ flip);
        }
    for (; p < Kp; p++) {
      for (uint32_t r = 0; r < MR; r++) {
        for (uint32_t j = 0; j < 2; j++) {
          const uint32_t k = 2 * p + j;
          int32_t v = 0;
          if (m0 + r < M && k < K) {
            const uint8_t u = x[(uint64_t)(m0 + r) * rs + k];
            v = is_u8 ? (int32_t)u - 128 : (int32_t)(int8_t)u;
          }
          *dst++ = (int8_t)v;
        }
      }
    }
  }
}
