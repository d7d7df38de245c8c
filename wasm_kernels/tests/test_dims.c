/* Host unit test of the plan v2 kernels (src/kernels/dims.c: SHAPE, VIEW, RANGE, CONSTANT_OF_SHAPE), EXPAND with
 * its shape input, and the shape functions of the parameter forms the packager writes for run-time shapes (SLICE's
 * ONNX form, PAD's end pads, SPLIT's sizes, QMAXPOOL's 11 words). Nodes and tensors are built by hand, as the core
 * decodes them; each case calls shape() (and check()/run() where the kernel is new) and compares dims, values and
 * status codes, errors included. Build (tests/test_dims_kernels.py does it): link with the host libedgepack.so.
 * Prints each failure; exits 1 if any. */
#include <stdio.h>
#include <string.h>
#include "ep_shape.h"

static int failures, cases;

#define EXPECT(cond, ...) do { cases++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
  printf(__VA_ARGS__); printf("\n"); } } while (0)

static ep_tensor tensor(uint32_t dtype, uint32_t rank, const int32_t *dims, void *data) {
  ep_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype; t.rank = rank; t.numel = 1; t.data = data;
  for (uint32_t i = 0; i < rank; i++) { t.dims[i] = dims[i]; t.numel *= (uint64_t)dims[i]; }
  return t;
}

static ep_node node(uint32_t op, uint32_t n_in, const ep_tensor **in, uint32_t n_out, ep_tensor **out,
                    const int32_t *params, uint32_t n_params) {
  ep_node n;
  memset(&n, 0, sizeof n);
  n.op = op; n.n_in = n_in; n.n_out = n_out; n.params = params; n.n_params = n_params;
  for (uint32_t i = 0; i < n_in; i++) n.in[i] = in[i];
  for (uint32_t i = 0; i < n_out; i++) n.out[i] = out[i];
  return n;
}

/* shape() of op on the given inputs into an output of rank `rank`: status, and dims into got. */
static ep_status shape1(uint32_t op, uint32_t n_in, const ep_tensor **in, uint32_t rank, const int32_t *params,
                        uint32_t n_params, ep_tensor *got) {
  static const int32_t none[EP_MAX_RANK] = {-1, -1, -1, -1, -1, -1, -1, -1};
  *got = tensor(EP_F32, rank, none, 0);
  ep_tensor *outs[1] = {got};
  ep_node n = node(op, n_in, in, 1, outs, params, n_params);
  return ep_shape_for(op)->shape(&n);
}

static int dims_are(const ep_tensor *t, uint32_t rank, const int32_t *want) {
  if (t->rank != rank) return 0;
  for (uint32_t i = 0; i < rank; i++) if (t->dims[i] != want[i]) return 0;
  return 1;
}

#define DIMS(...) ((const int32_t[]){__VA_ARGS__})
#define NDIMS(...) (sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
/* shape() must give exactly these dims */
#define SHAPE_OK(op, n_in, in, params, np, ...) do { ep_tensor g_; \
  ep_status s_ = shape1(op, n_in, in, NDIMS(__VA_ARGS__), params, np, &g_); \
  EXPECT(s_ == EP_OK && dims_are(&g_, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__)), "%s: status %d, dims %d %d %d %d", #op, \
         s_, g_.dims[0], g_.dims[1], g_.dims[2], g_.dims[3]); } while (0)
/* shape() into a rank-`rank` output must refuse with `err` */
#define SHAPE_ERR(op, n_in, in, params, np, rank, err) do { ep_tensor g_; \
  ep_status s_ = shape1(op, n_in, in, rank, params, np, &g_); \
  EXPECT(s_ == (err), "%s: status %d, want %d", #op, s_, err); } while (0)

static void test_shape(void) {
  int32_t xd[4] = {2, 3, 5, 7};
  ep_tensor x = tensor(EP_F32, 4, xd, 0);   /* data never read */
  const ep_tensor *in[1] = {&x};
  const int32_t all[2] = {0, INT32_MAX}, mid[2] = {1, -1}, wide[2] = {-10, 10}, back[2] = {3, 1}, last[2] = {-1, 4};
  SHAPE_OK(EP_OP_SHAPE, 1, in, all, 2, 4);
  SHAPE_OK(EP_OP_SHAPE, 1, in, mid, 2, 2);
  SHAPE_OK(EP_OP_SHAPE, 1, in, wide, 2, 4);
  SHAPE_OK(EP_OP_SHAPE, 1, in, back, 2, 0);
  SHAPE_OK(EP_OP_SHAPE, 1, in, last, 2, 1);
  SHAPE_ERR(EP_OP_SHAPE, 1, in, all, 1, 1, EP_E_SHAPE);
  int64_t v[4] = {-1, -1, -1, -1};
  ep_tensor y = tensor(EP_I64, 1, DIMS(2), v);
  ep_tensor *outs[1] = {&y};
  ep_node n = node(EP_OP_SHAPE, 1, in, 1, outs, mid, 2);
  EXPECT(ep_check_SHAPE(&n) == EP_OK, "SHAPE check");
  EXPECT(ep_run_SHAPE(&n) == EP_OK && v[0] == 3 && v[1] == 5 && v[2] == -1, "SHAPE run: %lld %lld", (long long)v[0], (long long)v[1]);
  y.dims[0] = 3; y.numel = 3;
  EXPECT(ep_check_SHAPE(&n) == EP_E_SHAPE, "SHAPE check: wrong count");
  y = tensor(EP_F32, 1, DIMS(2), 0);
  EXPECT(ep_check_SHAPE(&n) == EP_E_DTYPE, "SHAPE check: float output");
  n.n_params = 1;
  EXPECT(ep_check_SHAPE(&n) == EP_E_PARAM, "SHAPE check: one word");
  ep_tensor s = tensor(EP_F32, 0, DIMS(0), 0);   /* a scalar's shape is empty */
  in[0] = &s;
  SHAPE_OK(EP_OP_SHAPE, 1, in, all, 2, 0);
}

static void test_view(void) {
  int32_t xd[3] = {2, 3, 4};
  ep_tensor x = tensor(EP_F32, 3, xd, 0);
  int64_t tv[4];
  ep_tensor t = tensor(EP_I64, 1, DIMS(2), tv);
  const ep_tensor *in[2] = {&x, &t};
  const int32_t reshape[3] = {0, 0, 0}, reshape_z[3] = {0, 1, 0};
#define TARGET(...) do { const int64_t v_[] = {__VA_ARGS__}; memcpy(tv, v_, sizeof v_); \
  t = tensor(EP_I64, 1, DIMS((int32_t)(sizeof v_ / 8)), tv); } while (0)
  TARGET(0, -1);  SHAPE_OK(EP_OP_VIEW, 2, in, reshape, 3, 2, 12);
  TARGET(-1, 0);  SHAPE_OK(EP_OP_VIEW, 2, in, reshape, 3, 8, 3);
  TARGET(4, -1, 3);  SHAPE_OK(EP_OP_VIEW, 2, in, reshape, 3, 4, 2, 3);
  TARGET(24);  SHAPE_OK(EP_OP_VIEW, 2, in, reshape, 3, 24);
  TARGET(0, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape_z, 3, 2, EP_E_SHAPE);   /* allowzero: 0 and -1 */
  TARGET(-1, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);
  TARGET(5, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);
  TARGET(5, 5);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);        /* count changes */
  TARGET(2, 3, 4, 0);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 4, EP_E_SHAPE);  /* 0 past the input's rank */
  TARGET(-2, -12);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);
  TARGET(2147483648LL, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);
  TARGET(0, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 3, EP_E_SHAPE);      /* values != output rank */
  SHAPE_ERR(EP_OP_VIEW, 1, in, reshape, 3, 2, EP_E_SHAPE);                       /* no shape input */
  t.data = 0;  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);          /* values unknown */
  int32_t zd[2] = {0, 3};
  ep_tensor z = tensor(EP_F32, 2, zd, 0);
  in[0] = &z;
  TARGET(0, 3);  SHAPE_OK(EP_OP_VIEW, 2, in, reshape_z, 3, 0, 3);
  TARGET(0, -1);  SHAPE_ERR(EP_OP_VIEW, 2, in, reshape, 3, 2, EP_E_SHAPE);      /* -1 of an empty tensor */
  in[0] = &x;
  const int32_t fl1[3] = {1, 1, 0}, fl0[3] = {1, 0, 0}, fl3[3] = {1, 3, 0}, flm[3] = {1, -1, 0}, fl4[3] = {1, 4, 0},
                flm4[3] = {1, -4, 0};
  SHAPE_OK(EP_OP_VIEW, 1, in, fl1, 3, 2, 12);
  SHAPE_OK(EP_OP_VIEW, 1, in, fl0, 3, 1, 24);
  SHAPE_OK(EP_OP_VIEW, 1, in, fl3, 3, 24, 1);
  SHAPE_OK(EP_OP_VIEW, 1, in, flm, 3, 6, 4);
  SHAPE_ERR(EP_OP_VIEW, 1, in, fl4, 3, 2, EP_E_SHAPE);
  SHAPE_ERR(EP_OP_VIEW, 1, in, flm4, 3, 2, EP_E_SHAPE);
  int32_t sd[4] = {1, 3, 1, 4};
  ep_tensor q = tensor(EP_F32, 4, sd, 0);
  in[0] = &q;
  const int32_t sq_all[3] = {2, 0, 0}, sq0[4] = {2, 0, 1, 0}, sqm2[4] = {2, 0, 1, -2}, sq1[4] = {2, 0, 1, 1},
                sqdup[5] = {2, 0, 2, 0, -4}, sq9[3] = {2, 0, 9}, sqshort[3] = {2, 0, 1}, sq4[4] = {2, 0, 1, 4};
  SHAPE_OK(EP_OP_VIEW, 1, in, sq_all, 3, 3, 4);
  SHAPE_OK(EP_OP_VIEW, 1, in, sq0, 4, 3, 1, 4);
  SHAPE_OK(EP_OP_VIEW, 1, in, sqm2, 4, 1, 3, 4);
  SHAPE_ERR(EP_OP_VIEW, 1, in, sq1, 4, 3, EP_E_SHAPE);       /* extent 3 */
  SHAPE_ERR(EP_OP_VIEW, 1, in, sqdup, 5, 2, EP_E_SHAPE);     /* the same axis twice */
  SHAPE_ERR(EP_OP_VIEW, 1, in, sq9, 3, 3, EP_E_SHAPE);       /* n_axes > 8 */
  SHAPE_ERR(EP_OP_VIEW, 1, in, sqshort, 3, 3, EP_E_SHAPE);   /* words missing */
  SHAPE_ERR(EP_OP_VIEW, 1, in, sq4, 4, 3, EP_E_SHAPE);       /* axis out of range */
  SHAPE_ERR(EP_OP_VIEW, 1, in, sq_all, 3, 3, EP_E_SHAPE);    /* the plan's rank differs */
  int32_t ud[2] = {3, 4};
  ep_tensor u = tensor(EP_F32, 2, ud, 0);
  in[0] = &u;
  const int32_t us[5] = {3, 0, 2, 0, 3}, usm[4] = {3, 0, 1, -1}, us4[4] = {3, 0, 1, 3}, bad_mode[3] = {4, 0, 0};
  SHAPE_OK(EP_OP_VIEW, 1, in, us, 5, 1, 3, 4, 1);
  SHAPE_OK(EP_OP_VIEW, 1, in, usm, 4, 3, 4, 1);
  SHAPE_ERR(EP_OP_VIEW, 1, in, us4, 4, 3, EP_E_SHAPE);
  SHAPE_ERR(EP_OP_VIEW, 1, in, bad_mode, 3, 2, EP_E_SHAPE);
  /* check and run */
  float a[12], b[12];
  for (int i = 0; i < 12; i++) { a[i] = (float)i; b[i] = -1.0f; }
  ep_tensor xa = tensor(EP_F32, 2, ud, (uint8_t *)a), yb = tensor(EP_F32, 4, DIMS(1, 3, 4, 1), (uint8_t *)b);
  const ep_tensor *vin[1] = {&xa};
  ep_tensor *vout[1] = {&yb};
  ep_node n = node(EP_OP_VIEW, 1, vin, 1, vout, us, 5);
  EXPECT(ep_check_VIEW(&n) == EP_OK, "VIEW check");
  EXPECT(ep_run_VIEW(&n) == EP_OK && b[0] == 0.0f && b[11] == 11.0f, "VIEW run copies");
  yb.data = xa.data;
  EXPECT(ep_run_VIEW(&n) == EP_OK, "VIEW run in place");
  yb = tensor(EP_F32, 4, DIMS(1, 4, 3, 1), (uint8_t *)b);
  EXPECT(ep_check_VIEW(&n) == EP_E_SHAPE, "VIEW check: dims not the axes'");
  yb = tensor(EP_F32, 4, DIMS(1, 3, 5, 1), (uint8_t *)b);
  EXPECT(ep_check_VIEW(&n) == EP_E_SHAPE, "VIEW check: count differs");
  yb = tensor(EP_I32, 4, DIMS(1, 3, 4, 1), (uint8_t *)b);
  EXPECT(ep_check_VIEW(&n) == EP_E_DTYPE, "VIEW check: dtype differs");
  yb = tensor(EP_F32, 2, DIMS(4, 3), 0);
  n.params = reshape; n.n_params = 3;
  EXPECT(ep_check_VIEW(&n) == EP_E_SHAPE, "VIEW check: Reshape without its shape input");
  int64_t target[2] = {4, -1};
  ep_tensor tt = tensor(EP_I64, 1, DIMS(2), 0);
  const ep_tensor *rin[2] = {&xa, &tt};
  n = node(EP_OP_VIEW, 2, rin, 1, vout, reshape, 3);
  EXPECT(ep_check_VIEW(&n) == EP_OK, "VIEW check: Reshape, values unknown");
  tt.data = (uint8_t *)target;
  EXPECT(ep_check_VIEW(&n) == EP_OK, "VIEW check: Reshape, values known");
  target[0] = 6;
  EXPECT(ep_check_VIEW(&n) == EP_E_SHAPE, "VIEW check: Reshape, values give other dims");
  n.params = fl1;
  EXPECT(ep_check_VIEW(&n) == EP_E_OP, "VIEW check: Flatten with a shape input");
}

static void test_range(void) {
  int64_t s64, l64, d64;
  ep_tensor s = tensor(EP_I64, 0, DIMS(0), (uint8_t *)&s64), l = tensor(EP_I64, 0, DIMS(0), (uint8_t *)&l64),
            d = tensor(EP_I64, 0, DIMS(0), (uint8_t *)&d64);
  const ep_tensor *in[3] = {&s, &l, &d};
#define R64(a, b, c) (s64 = (a), l64 = (b), d64 = (c))
  R64(1, 10, 3);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 3);
  R64(10, 1, -3);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 3);
  R64(0, 0, 1);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 0);
  R64(5, 1, 1);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 0);
  R64(INT64_MIN, INT64_MIN + 5, 2);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 3);
  R64(INT64_MAX, INT64_MIN, INT64_MIN);  SHAPE_OK(EP_OP_RANGE, 3, in, 0, 0, 2);
  R64(INT64_MIN, INT64_MAX, 1);  SHAPE_ERR(EP_OP_RANGE, 3, in, 0, 0, 1, EP_E_SHAPE);   /* 2^64 - 1 elements */
  R64(0, 5, 0);  SHAPE_ERR(EP_OP_RANGE, 3, in, 0, 0, 1, EP_E_SHAPE);
  d.data = 0;  SHAPE_ERR(EP_OP_RANGE, 3, in, 0, 0, 1, EP_E_SHAPE);
  d.data = (uint8_t *)&d64;
  int64_t vals[3];
  R64(10, 1, -3);
  ep_tensor y = tensor(EP_I64, 1, DIMS(3), (uint8_t *)vals);
  ep_tensor *outs[1] = {&y};
  ep_node n = node(EP_OP_RANGE, 3, in, 1, outs, 0, 0);
  EXPECT(ep_check_RANGE(&n) == EP_OK, "RANGE check");
  EXPECT(ep_run_RANGE(&n) == EP_OK && vals[0] == 10 && vals[1] == 7 && vals[2] == 4, "RANGE run int64");
  y.dims[0] = 4; y.numel = 4;
  EXPECT(ep_check_RANGE(&n) == EP_E_SHAPE, "RANGE check: length differs from the values'");
  y = tensor(EP_F32, 1, DIMS(3), 0);
  EXPECT(ep_check_RANGE(&n) == EP_E_DTYPE, "RANGE check: dtype differs");
  float fs = 1.0f, fl = 2.5f, fd = 0.5f, fv[3];
  ep_tensor a = tensor(EP_F32, 0, DIMS(0), (uint8_t *)&fs), b = tensor(EP_F32, 0, DIMS(0), (uint8_t *)&fl),
            c = tensor(EP_F32, 0, DIMS(0), (uint8_t *)&fd);
  const ep_tensor *fin[3] = {&a, &b, &c};
  SHAPE_OK(EP_OP_RANGE, 3, fin, 0, 0, 3);
  fin[2] = &d;
  SHAPE_ERR(EP_OP_RANGE, 3, fin, 0, 0, 1, EP_E_SHAPE);   /* mixed dtypes */
  fin[2] = &c;
  y = tensor(EP_F32, 1, DIMS(3), (uint8_t *)fv);
  n = node(EP_OP_RANGE, 3, fin, 1, outs, 0, 0);
  EXPECT(ep_check_RANGE(&n) == EP_OK && ep_run_RANGE(&n) == EP_OK && fv[0] == 1.0f && fv[1] == 1.5f && fv[2] == 2.0f,
         "RANGE run float32");
  fd = 0.0f / 0.0f;
  SHAPE_ERR(EP_OP_RANGE, 3, fin, 0, 0, 1, EP_E_SHAPE);
  fd = 0.0f;
  SHAPE_ERR(EP_OP_RANGE, 3, fin, 0, 0, 1, EP_E_SHAPE);
  fd = 1e-9f; fl = 1e9f;
  SHAPE_ERR(EP_OP_RANGE, 3, fin, 0, 0, 1, EP_E_SHAPE);   /* too many elements */
  int32_t i0 = -2, i1 = 3, i2 = 2, iv[3];
  ep_tensor p = tensor(EP_I32, 0, DIMS(0), (uint8_t *)&i0), q = tensor(EP_I32, 0, DIMS(0), (uint8_t *)&i1),
            r = tensor(EP_I32, 0, DIMS(0), (uint8_t *)&i2);
  const ep_tensor *iin[3] = {&p, &q, &r};
  y = tensor(EP_I32, 1, DIMS(3), (uint8_t *)iv);
  n = node(EP_OP_RANGE, 3, iin, 1, outs, 0, 0);
  EXPECT(ep_check_RANGE(&n) == EP_OK && ep_run_RANGE(&n) == EP_OK && iv[0] == -2 && iv[1] == 0 && iv[2] == 2, "RANGE run int32");
}

static void test_constant_of_shape(void) {
  int64_t sv[3] = {2, 3, 0};
  ep_tensor s = tensor(EP_I64, 1, DIMS(2), (uint8_t *)sv);
  const ep_tensor *in[1] = {&s};
  const int32_t one5[2] = {0x3fc00000, 0};   /* 1.5f */
  SHAPE_OK(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, 3);
  s = tensor(EP_I64, 1, DIMS(3), (uint8_t *)sv);
  SHAPE_OK(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, 3, 0);
  s = tensor(EP_I64, 1, DIMS(0), (uint8_t *)sv);
  { ep_tensor g; EXPECT(shape1(EP_OP_CONSTANT_OF_SHAPE, 1, in, 0, one5, 2, &g) == EP_OK && g.numel == 1, "a scalar"); }
  s = tensor(EP_I64, 1, DIMS(2), (uint8_t *)sv);
  SHAPE_ERR(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 3, EP_E_SHAPE);   /* values != rank */
  sv[1] = -3;  SHAPE_ERR(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, EP_E_SHAPE);
  sv[1] = 1LL << 31;  SHAPE_ERR(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, EP_E_SHAPE);
  sv[0] = 65536; sv[1] = 65536;  SHAPE_ERR(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, EP_E_SHAPE);   /* 2^32 elements */
  s.data = 0;  SHAPE_ERR(EP_OP_CONSTANT_OF_SHAPE, 1, in, one5, 2, 2, EP_E_SHAPE);
  sv[0] = 2; sv[1] = 3; s.data = (uint8_t *)sv;
  float f[6];
  ep_tensor y = tensor(EP_F32, 2, DIMS(2, 3), (uint8_t *)f);
  ep_tensor *outs[1] = {&y};
  ep_node n = node(EP_OP_CONSTANT_OF_SHAPE, 1, in, 1, outs, one5, 2);
  EXPECT(ep_check_CONSTANT_OF_SHAPE(&n) == EP_OK && ep_run_CONSTANT_OF_SHAPE(&n) == EP_OK && f[0] == 1.5f && f[5] == 1.5f,
         "CONSTANT_OF_SHAPE float32");
  int64_t iv[6];
  const int32_t m7[2] = {-7, -1};
  y = tensor(EP_I64, 2, DIMS(2, 3), (uint8_t *)iv);
  n.params = m7;
  EXPECT(ep_check_CONSTANT_OF_SHAPE(&n) == EP_OK && ep_run_CONSTANT_OF_SHAPE(&n) == EP_OK && iv[0] == -7 && iv[5] == -7,
         "CONSTANT_OF_SHAPE int64");
  y = tensor(EP_I64, 2, DIMS(3, 2), (uint8_t *)iv);
  EXPECT(ep_check_CONSTANT_OF_SHAPE(&n) == EP_E_SHAPE, "CONSTANT_OF_SHAPE check: dims differ from the values");
  y = tensor(99, 2, DIMS(2, 3), (uint8_t *)iv);
  EXPECT(ep_check_CONSTANT_OF_SHAPE(&n) == EP_E_DTYPE, "CONSTANT_OF_SHAPE check: unknown dtype");
  y = tensor(EP_I64, 2, DIMS(2, 3), (uint8_t *)iv);
  n.n_params = 1;
  EXPECT(ep_check_CONSTANT_OF_SHAPE(&n) == EP_E_PARAM, "CONSTANT_OF_SHAPE check: one word");
}

static void test_expand(void) {
  int32_t xd[2] = {3, 1};
  float xv[3] = {1, 2, 3}, yv[24];
  ep_tensor x = tensor(EP_F32, 2, xd, (uint8_t *)xv);
  int64_t sv[3] = {2, 1, 4};
  ep_tensor s = tensor(EP_I64, 1, DIMS(3), (uint8_t *)sv);
  const ep_tensor *in[2] = {&x, &s};
  SHAPE_OK(EP_OP_EXPAND, 2, in, 0, 0, 2, 3, 4);
  SHAPE_ERR(EP_OP_EXPAND, 2, in, 0, 0, 4, EP_E_SHAPE);   /* rank not max(2, 3) */
  SHAPE_ERR(EP_OP_EXPAND, 1, in, 0, 0, 3, EP_E_SHAPE);   /* no shape input: the plan's dims */
  sv[2] = -4;  SHAPE_ERR(EP_OP_EXPAND, 2, in, 0, 0, 3, EP_E_SHAPE);
  sv[2] = 4; sv[1] = 2;  SHAPE_ERR(EP_OP_EXPAND, 2, in, 0, 0, 3, EP_E_SHAPE);   /* 3 vs 2 */
  sv[1] = 1;
  s = tensor(EP_I64, 1, DIMS(1), (uint8_t *)sv);
  SHAPE_OK(EP_OP_EXPAND, 2, in, 0, 0, 3, 2);   /* the input's dims win over 1 */
  sv[0] = 0;
  SHAPE_OK(EP_OP_EXPAND, 2, in, 0, 0, 3, 0);
  sv[0] = 2;
  s = tensor(EP_I64, 1, DIMS(3), (uint8_t *)sv);
  ep_tensor y = tensor(EP_F32, 3, DIMS(2, 3, 4), (uint8_t *)yv);
  ep_tensor *outs[1] = {&y};
  ep_node n = node(EP_OP_EXPAND, 2, in, 1, outs, 0, 0);
  EXPECT(ep_check_EXPAND(&n) == EP_OK && ep_run_EXPAND(&n) == EP_OK && yv[0] == 1 && yv[4] == 2 && yv[23] == 3, "EXPAND run");
  y = tensor(EP_F32, 3, DIMS(1, 3, 4), (uint8_t *)yv);
  EXPECT(ep_check_EXPAND(&n) == EP_E_SHAPE, "EXPAND check: dims differ from the shape's values");
  s = tensor(EP_I32, 1, DIMS(3), (uint8_t *)sv);
  EXPECT(ep_check_EXPAND(&n) == EP_E_SHAPE, "EXPAND check: shape not int64");
}

static void test_forms(void) {
  /* SLICE, ONNX form: x [5, 6]; axis 0 -1::-2 (4, 2, 0), axis 1 -100:4 (0..3) */
  float xv[30], yv[12];
  for (int i = 0; i < 30; i++) xv[i] = (float)i;
  ep_tensor x = tensor(EP_F32, 2, DIMS(5, 6), (uint8_t *)xv);
  const ep_tensor *in[1] = {&x};
  const int32_t sl[6] = {-1, -100, INT32_MIN, 4, -2, 1}, sl0[6] = {0, 0, 5, 6, 0, 1};
  SHAPE_OK(EP_OP_SLICE, 1, in, sl, 6, 3, 4);
  SHAPE_ERR(EP_OP_SLICE, 1, in, sl, 4, 2, EP_E_SHAPE);    /* the normalized form: dims from the plan */
  SHAPE_ERR(EP_OP_SLICE, 1, in, sl0, 6, 2, EP_E_PARAM);   /* step 0 */
  ep_tensor y = tensor(EP_F32, 2, DIMS(3, 4), (uint8_t *)yv);
  ep_tensor *outs[1] = {&y};
  ep_node n = node(EP_OP_SLICE, 1, in, 1, outs, sl, 6);
  EXPECT(ep_check_SLICE(&n) == EP_OK && ep_run_SLICE(&n) == EP_OK && yv[0] == 24 && yv[3] == 27 && yv[4] == 12 &&
         yv[11] == 3, "SLICE run, ONNX form");
  y = tensor(EP_F32, 2, DIMS(2, 4), (uint8_t *)yv);
  EXPECT(ep_check_SLICE(&n) == EP_E_SHAPE, "SLICE check: ONNX form, other extent");
  const ep_tensor empty = tensor(EP_F32, 1, DIMS(0), 0);
  const ep_tensor *ein[1] = {&empty};
  const int32_t back[3] = {5, -10, -1};
  SHAPE_OK(EP_OP_SLICE, 1, ein, back, 3, 0);
  /* PAD with end pads */
  const int32_t pad[7] = {0, 0, 0, 1, -2, 2, 0}, crop[7] = {0, 0, 0, -3, 0, -3, 0};
  SHAPE_OK(EP_OP_PAD, 1, in, pad, 7, 8, 4);
  SHAPE_ERR(EP_OP_PAD, 1, in, crop, 7, 2, EP_E_SHAPE);
  SHAPE_ERR(EP_OP_PAD, 1, in, pad, 5, 2, EP_E_SHAPE);     /* begin only */
  /* SPLIT: sizes, equal parts */
  ep_tensor a, b, c;
  ep_tensor *three[3] = {&a, &b, &c};
  const int32_t sizes[4] = {1, 2, 3, 1}, eq[2] = {1, -1}, big[4] = {1, 5, 2, 0};
  a = tensor(EP_F32, 2, DIMS(-1, -1), 0); b = a; c = a;
  ep_node sp = node(EP_OP_SPLIT, 1, in, 3, three, sizes, 4);
  EXPECT(ep_shape_SPLIT(&sp) == EP_OK && a.dims[1] == 2 && b.dims[1] == 3 && c.dims[1] == 1 && c.dims[0] == 5, "SPLIT sizes");
  sp.params = eq; sp.n_params = 2;
  EXPECT(ep_shape_SPLIT(&sp) == EP_OK && a.dims[1] == 2 && b.dims[1] == 2 && c.dims[1] == 2, "SPLIT equal parts");
  sp.params = big; sp.n_params = 4;
  EXPECT(ep_shape_SPLIT(&sp) == EP_E_SHAPE, "SPLIT sizes past the extent");
  ep_tensor five = tensor(EP_F32, 1, DIMS(5), 0);
  const ep_tensor *fin[1] = {&five};
  ep_tensor *four[4] = {&a, &b, &c, &y};
  a = tensor(EP_F32, 1, DIMS(-1), 0); b = a; c = a; y = a;
  const int32_t eq0[2] = {0, -1};
  sp = node(EP_OP_SPLIT, 1, fin, 4, four, eq0, 2);
  EXPECT(ep_shape_SPLIT(&sp) == EP_E_SHAPE, "SPLIT 5 into 4 parts of 2");
  /* QMAXPOOL, 11 words: x [1, 2, 9, 13], 3x2 window, strides 2, 3, pads t1 l0 b0 r1, ceil mode */
  ep_tensor q = tensor(EP_U8, 4, DIMS(1, 2, 9, 13), 0);
  const ep_tensor *qin[1] = {&q};
  const int32_t mp[11] = {3, 2, 2, 3, 1, 1, 1, 0, 0, 1, 1}, mpfloor[11] = {3, 2, 2, 3, 1, 1, 1, 0, 0, 1, 0},
                mpbig[11] = {30, 2, 2, 3, 1, 1, 1, 0, 0, 1, 0}, mpbad[11] = {3, 2, 0, 3, 1, 1, 1, 0, 0, 1, 0},
                mpceil2[11] = {3, 2, 2, 3, 1, 1, 1, 0, 0, 1, 2};
  SHAPE_OK(EP_OP_QMAXPOOL, 1, qin, mp, 11, 1, 2, 5, 5);
  SHAPE_OK(EP_OP_QMAXPOOL, 1, qin, mpfloor, 11, 1, 2, 4, 5);
  SHAPE_ERR(EP_OP_QMAXPOOL, 1, qin, mpbig, 11, 4, EP_E_SHAPE);    /* window larger than the padded input */
  SHAPE_ERR(EP_OP_QMAXPOOL, 1, qin, mpbad, 11, 4, EP_E_PARAM);    /* stride 0 */
  SHAPE_ERR(EP_OP_QMAXPOOL, 1, qin, mpceil2, 11, 4, EP_E_SHAPE);
  SHAPE_ERR(EP_OP_QMAXPOOL, 1, qin, mp, 8, 4, EP_E_SHAPE);        /* the 8-word form: dims from the plan */
}

int main(void) {
  test_shape();
  test_view();
  test_range();
  test_constant_of_shape();
  test_expand();
  test_forms();
  printf("%d cases, %d failures\n", cases, failures);
  return failures != 0;
}
