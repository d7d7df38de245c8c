/* The Winograd F(2x2,3x3) input transform V = B^T d B on a 4x4 tile of vectors d[4][4], written once for the
 * float (winograd.c, f32x4) and the exact integer (qwinograd.c, i16x8) kernels: SUB and ADD are the vector
 * type's subtraction and addition; d is overwritten, o[4*i+j] receives V[i][j]. */
#ifndef EP_WINOGRAD_BT_H
#define EP_WINOGRAD_BT_H
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
