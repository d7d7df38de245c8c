/* Integer GEMM core shared by QCONV and QMATMUL (int8/uint8 operands, int32 accumulation).
 *
 *   C[M x N] = epilogue( A'[M x K] * B'[K x N] )
 *
 * A' (the broadcast side) is int8, PACKED in panels of EP_QGEMM_MR rows and k pairs:
 *   a[((t * Kp + p) * MR + r) * 2 + j] = A'[t*MR + r][2p + j]   (Kp = ceil(K/2); rows past M, k past K: 0)
 * Conv weights are packed so by the packager; a runtime A (MatMul's X) by ep_qgemm_pack_a.
 * B' (the vector side) is int16 pairs, packed at run time with its zero point already subtracted:
 *   b[(p * ldb + n) * 2 + j] = B'[2p + j][n]   (ldb a multiple of NR, zero past N; for odd K the last pair's
 *                                              second depth is anything finite: A is zero there)
 * so one i16x8 holds 4 columns x 2 depths and i32x4.dot_i16x8 does 8 multiply-adds into 4 int32 lanes.
 * |A'| <= 128 and |B'| <= 255, so a pair sum fits easily and K up to 2^16 cannot overflow int32.
 *
 * Epilogue per element (m, n):
 *   acc -= za(m) * colsum[n]                (when colsum: A's zero point, za(m) = za_row ? za_row[m] : za)
 *   acc += bias[m or n]                     (int32, when bias)
 *   int32 output: store acc.
 *   else v = acc * mult[m or n], then the activation (relu / leaky_relu(p0) / clip(p0, p1));
 *   float output: store v;
 *   int8/uint8 output: store saturate(round_half_even(v) + yzp)   (ONNX QuantizeLinear).
 * The output element (m, n) is y[m * rs + (n_off + n) * cs]; cs == 1 stores vectors. */
#ifndef EP_QGEMM_H
#define EP_QGEMM_H
#include <stdint.h>
#include "ep_kernel.h"
#include "ep_vec.h"
#include "activation.h"
#include "ep_parallel.h"

#define EP_QGEMM_MR 4
#define EP_QGEMM_NR 8

typedef struct {
  const int32_t *bias; uint32_t bias_col;      /* per row (0) or per absolute column (1); NULL = none */
  const float *mult; uint32_t mult_col;        /* NULL for int32 output */
  const int32_t *colsum;                        /* per local column, or NULL */
  const int32_t *za_row; int32_t za;
  int32_t act; float p0, p1;                    /* gemm.h activation codes */
  uint32_t out_dtype; int32_t yzp;
  uint8_t *y; uint64_t rs, cs;
} ep_qgemm_epi;

static inline uint64_t ep_qgemm_packed_a_bytes(uint64_t M, uint64_t K) {
  return (M + EP_QGEMM_MR - 1) / EP_QGEMM_MR * EP_QGEMM_MR * ((K + 1) / 2) * 2;
}
static inline uint32_t ep_qgemm_round_nr(uint32_t n) { return (n + EP_QGEMM_NR - 1) / EP_QGEMM_NR * EP_QGEMM_NR; }

/* C block: rows [0, M), local columns [0, N) (absolute n_off + n). b has ldb pair-columns and is scratch:
 * the aarch64 SDOT kernel (edge/neon/qgemm_i8_neon.c) and the relaxed-SIMD build's i7 kernel (qgemm.c) rewrite
 * it in place to int8 quads, so callers build it anew for every call (they do: it is their packing buffer). */
void ep_qgemm(uint32_t M, uint32_t N, uint32_t K, const int8_t *a, int16_t *b, uint32_t ldb, uint32_t n_off,
              const ep_qgemm_epi *e);
/* The epilogue above for one row m's 8 accumulators, local columns n..n+cnt (cnt 1..8); shared with the
 * aarch64 SDOT kernel so both give the same bits. */
void ep_qgemm_epi_row(const ep_qgemm_epi *e, uint32_t m, uint32_t n, uint32_t n_off, uint32_t cnt, i32x4 v0, i32x4 v1);

/* One A panel of int16 pairs (MR rows, Kp pairs, A's layout with 2-byte elements) times B' columns [0, N)
 * (N a multiple of NR), raw: c[r * ldc + n] = sum_p A'[r] pair p . B' pair p of column n (int32, wrapping). */
void ep_qgemm_raw16(uint32_t Kp, const int16_t *a, const int16_t *b, uint32_t ldb, uint32_t N, int32_t *c, uint32_t ldc);
/* A block of `cols` columns split across the threads (QCONV, QMATMUL): each range packs its own B' columns into its
 * own slice of the block's buffers (ep_qgemm rewrites B' in place, so ranges never share it) and multiplies them.
 * Integer sums, and one epilogue per element: the same bits for any split. Range i is
 * [ep_qgemm_col(cols, parts, i), ep_qgemm_col(cols, parts, i + 1)); bounds are multiples of EP_QGEMM_NR, so a
 * range's slice of a buffer of round_nr(cols) columns starts at its first column. */
static inline uint32_t ep_qgemm_col_parts(uint32_t M, uint32_t cols, uint32_t K) {
  const uint32_t strips = (cols + EP_QGEMM_NR - 1) / EP_QGEMM_NR, t = ep_num_threads();
  if (!EP_PARALLEL || t <= 1 || (uint64_t)M * cols * K < 65536u) return 1u;   /* too small to hand out */
  return strips < 2u * t ? strips : 2u * t;
}
static inline uint32_t ep_qgemm_col(uint32_t cols, uint32_t parts, uint32_t i) {
  const uint32_t c = ep_chunk((cols + EP_QGEMM_NR - 1) / EP_QGEMM_NR, parts, i) * EP_QGEMM_NR;
  return c < cols ? c : cols;
}
/* B' from K rows of a uint8/int8 matrix (element (k, n) at x[k * rs + n], n < N): b = x - zp, with the
 * zero point per column (zp_col[n]) or scalar (zp_col NULL). colsum (if not NULL) gets sum_k B'[k][n]. */
void ep_qgemm_pack_b(int16_t *b, uint32_t ldb, uint32_t K, uint32_t N, const uint8_t *x, uint64_t rs, int is_u8,
                     int32_t zp, const int32_t *zp_col, int32_t *colsum);
/* A' panels from a uint8/int8 matrix (element (m, k) at x[m * rs + k]); uint8 is stored minus 128. */
void ep_qgemm_pack_a(uint32_t M, uint32_t K, const uint8_t *x, uint64_t rs, int is_u8, int8_t *dst);
/* Column sums of a packed B block (for A zero points): colsum[n] = sum_k B'[k][n]. */
void ep_qgemm_colsum(const int16_t *b, uint32_t ldb, uint32_t K, uint32_t N, int32_t *colsum);

/* The requantization of 8 scaled values f (= acc * mult) to 8 int8/uint8 lanes of the result: clamp to
 * [lo, hi] (the activation's bounds intersected with [qmin - zp, qmax - zp], see ep_q_bounds), then round half
 * to even by adding 1.5 * 2^23 (the float add rounds; |f| <= 2^22 here), and read the integer back from the
 * bits: bits - (0x4B400000 - zp) = round(f) + zp, already inside the 8-bit range. */
#define EP_Q_MAGIC 12582912.0f
static inline i8x16 ep_q8_pack(f32x4 f0, f32x4 f1, f32x4 lo, f32x4 hi, i32x4 zbits, int u8) {
  const f32x4 m = f32x4_splat(EP_Q_MAGIC);
  f0 = f32x4_add(f32x4_min(f32x4_max(f0, lo), hi), m);
  f1 = f32x4_add(f32x4_min(f32x4_max(f1, lo), hi), m);
  const i16x8 h = i16x8_narrow_i32x4(i32x4_sub(f32x4_as_i32x4(f0), zbits), i32x4_sub(f32x4_as_i32x4(f1), zbits));
  return u8 ? u8x16_narrow_i16x8(h, h) : i8x16_narrow_i16x8(h, h);
}
static inline i32x4 ep_q_zbits(int32_t yzp) { return i32x4_splat(0x4B400000 - yzp); }
/* [lo, hi] for ep_q8_pack: output range minus zp, narrowed by relu / clip (e->act); leaky_relu is applied
 * before (it is not a clamp). */
void ep_q_bounds(const ep_qgemm_epi *e, float *lo, float *hi);

/* Shared checks: activation code; output dtype (i8/u8/f32/i32) against mult presence. */
ep_status ep_qgemm_check_epi(int32_t act, uint32_t out_dtype, int has_mult);
/* Quantized-output epilogue of 8 values (two f32x4 already scaled): activation, round, +zp, saturate,
 * stored as `cnt` (1..8) bytes at dst with stride cs. Shared by QDEPTHWISE_CONV. */
/* float output (out_dtype EP_F32): the activation only, 8 floats. dst is a byte pointer either way. */
void ep_q_store8(f32x4 v0, f32x4 v1, const ep_qgemm_epi *e, uint8_t *dst, uint32_t cnt, uint64_t cs);
/* cnt elements of esz bytes from src to dst with element stride cs. */
void ep_q_store_bytes(uint8_t *dst, const void *src, uint32_t cnt, uint64_t cs, uint32_t esz);

/* Epilogue settings resolved once per call. The common QDQ case (fast) takes a short path: per-row
 * bias and mult, no A zero point, 8-bit output with none/relu/clip (a clamp), contiguous rows. */
/* col: the same with per-column bias and mult and a per-tensor A zero point (QMATMUL's activation x activation
 * MatMuls), whole 8-column tiles only (qgemm.c epi_tile; not in the scalar build, for its size). */
typedef struct { int fast, col, u8; f32x4 lo, hi; i32x4 zb; } ep_qepi_mode;

EP_AINLINE ep_qepi_mode ep_qepi_mode_of(const ep_qgemm_epi *e) {
  ep_qepi_mode f;
  const int q8 = e->mult && e->cs == 1 && e->out_dtype != EP_F32 && e->act != EP_ACT_LEAKY_RELU;
  f.fast = q8 && !e->mult_col && !(e->bias && e->bias_col) && !e->colsum;
  f.col = q8 && e->mult_col && !(e->bias && !e->bias_col) && !e->za_row;
  float lo = 0.0f, hi = 0.0f;
  if (f.fast || f.col) ep_q_bounds(e, &lo, &hi);
  f.lo = f32x4_splat(lo); f.hi = f32x4_splat(hi);
  f.zb = ep_q_zbits(e->yzp);
  f.u8 = e->out_dtype == EP_U8;
  return f;
}

/* The fast case's arithmetic on 8 accumulators (two vectors): (v + bias) * mult, requantized by ep_q8_pack. One
 * definition for every fast epilogue (ep_qepi_row, the GEMM tiles, QWINOGRAD_CONV's output rows, the GEMV), so
 * they give the same bits. */
EP_AINLINE i8x16 ep_qepi_fast8(const ep_qepi_mode *f, i32x4 v0, i32x4 v1, i32x4 bias, f32x4 mult) {
  return ep_q8_pack(f32x4_mul(f32x4_from_i32x4(i32x4_add(v0, bias)), mult),
                    f32x4_mul(f32x4_from_i32x4(i32x4_add(v1, bias)), mult), f->lo, f->hi, f->zb, f->u8);
}

/* ep_qgemm_epi_row with the fast case handled first (QCONV's GEMM, QWINOGRAD_CONV's output transform): out of
 * line, one copy for every caller, as per 8 outputs a call costs little next to the GEMM or transform behind them. */
void ep_qepi_row(const ep_qgemm_epi *e, const ep_qepi_mode *f, uint32_t m, uint32_t n, uint32_t n_off, uint32_t cnt,
                 i32x4 v0, i32x4 v1);
#endif
