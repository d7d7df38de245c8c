/* The Winograd F(2x2,3x3) input transform V = B^T d B on a 4x4 tile of vectors d[4][4], written once for the
 * float (winograd.c, f32x4) and the exact integer (qwinograd.c, i16x8) kernels: SUB and ADD are the vector
 * type's subtraction and addition; d is overwritten, o[4*i+j] receives V[i][j].
 * EP_WINOGRAD_D gathers d for L adjacent tiles (L: the vector's lanes; tile t in lane t): the 4 input rows
 * start at b, rw elements apart, tile t's columns are 2t .. 2t+3; each row's 2L + 2 elements are read as 4
 * vectors (at 0, L, 2, L + 2) and split into even and odd lanes: d[r][c] = row r, column 2t + c. */
#ifndef EP_WINOGRAD_BT_H
#define EP_WINOGRAD_BT_H
#define EP_WINOGRAD_D(T, LOAD, EVEN, ODD, L, b, rw, d) do { \
    for (uint32_t r_ = 0; r_ < 4; r_++) { \
      const __typeof__(b) q_ = (b) + (uint64_t)r_ * (rw); \
      const T a0_ = LOAD(q_), a1_ = LOAD(q_ + (L)), a2_ = LOAD(q_ + 2), a3_ = LOAD(q_ + (L) + 2); \
      d[r_][0] = EVEN(a0_, a1_); d[r_][1] = ODD(a0_, a1_); \
      d[r_][2] = EVEN(a2_, a3_); d[r_][3] = ODD(a2_, a3_); \
    } \
  } while (0)
#define EP_WINOGRAD_BT(T, SUB, ADD, d, o) do { \
    for (uint32_t j_ = 0; j_ < 4; j_++) {   /* B^T d: combine rows */ \
      const T e0_ = SUB(d[0][j_], d[2][j_]), e1_ = ADD(d[1][j_], d[2][j_]); \
      const T e2_ = SUB(d[2][j_], d[1][j_]), e3_ = SUB(d[1][j_], d[3][j_]); \
      d[0][j_] = e0_; d[1][j_] = e1_; d[2][j_] = e2_; d[3][j_] = e3_; \
    } \
    for (uint32_t i_ = 0; i_ < 4; i_++) {   /* (B^T d) B: combine columns */ \
      o[4 * i_ + 0] = SUB(d[i_][0], d[i_][2]); \
      o[4 * i_ + 1] = ADD(d[i_][1], d[i_][2]); \
      o[4 * i_ + 2] = SUB(d[i_][2], d[i_][1]); \
      o[4 * i_ + 3] = SUB(d[i_][1], d[i_][3]); \
    } \
  } while (0)
#endif
