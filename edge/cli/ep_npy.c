/* .npy v1.0 reader/writer: see ep_npy.h. */
#include "ep_npy.h"
#include <stdio.h>
#include <string.h>

/* numpy descr <-> ONNX dtype code, manifest name, element size. Only the dtypes a plan can hold. numpy has no
 * descr of its own for the low-precision ones (ml_dtypes saves them as '<V2', '<V1', '<f1', which numpy cannot load
 * back): they travel in the descr of their carrier, listed first (bfloat16 as '<u2' raw bits, the float8 and float4
 * formats as '|u1' raw codes, int4/int2 as '|i1' values, uint4/uint2 as '|u1' values). */
static const struct { const char *descr, *name; uint32_t dtype, esize; } DESCRS[] = {
  {"<f4", "float32", 1, 4}, {"<i8", "int64", 7, 8}, {"|b1", "bool", 9, 1}, {"|i1", "int8", 3, 1},
  {"|u1", "uint8", 2, 1}, {"<i4", "int32", 6, 4}, {"<f2", "float16", 10, 2}, {"<f8", "float64", 11, 8},
  {"<i2", "int16", 5, 2}, {"<u2", "uint16", 4, 2}, {"<u4", "uint32", 12, 4}, {"<u8", "uint64", 13, 8},
  {"<u2", "bfloat16", 16, 2}, {"|u1", "float8_e4m3fn", 17, 1}, {"|u1", "float8_e4m3fnuz", 18, 1},
  {"|u1", "float8_e5m2", 19, 1}, {"|u1", "float8_e5m2fnuz", 20, 1}, {"|u1", "uint4", 21, 1}, {"|i1", "int4", 22, 1},
  {"|u1", "float4_e2m1fn", 23, 1}, {"|u1", "float8_e8m0fnu", 24, 1}, {"|u1", "uint2", 25, 1}, {"|i1", "int2", 26, 1}};
#define N_DESCRS (sizeof DESCRS / sizeof DESCRS[0])

const char *ep_dtype_str(uint32_t dtype) {
  for (size_t i = 0; i < N_DESCRS; i++) if (DESCRS[i].dtype == dtype) return DESCRS[i].name;
  return "unknown";
}

uint32_t ep_dtype_from_str(const char *name) {
  for (size_t i = 0; i < N_DESCRS; i++) if (!strcmp(DESCRS[i].name, name)) return DESCRS[i].dtype;
  return 0;
}

uint32_t ep_dtype_esize(uint32_t dtype) {
  for (size_t i = 0; i < N_DESCRS; i++) if (DESCRS[i].dtype == dtype) return DESCRS[i].esize;
  return 0;
}

uint32_t ep_dtype_carrier(uint32_t dtype) {
  for (size_t i = 0; i < N_DESCRS; i++)
    if (DESCRS[i].dtype == dtype)
      for (size_t k = 0; k <= i; k++) if (!strcmp(DESCRS[k].descr, DESCRS[i].descr)) return DESCRS[k].dtype;
  return 0;
}

static int npy_dtype(const char *descr, uint32_t *dtype, uint32_t *esize) {
  for (size_t i = 0; i < N_DESCRS; i++)
    if (!strcmp(descr, DESCRS[i].descr)) { *dtype = DESCRS[i].dtype; *esize = DESCRS[i].esize; return 1; }
  return 0;
}

typedef struct { const char *s; size_t n, i; } H;

static void sp(H *h) { while (h->i < h->n && (h->s[h->i] == ' ' || h->s[h->i] == '\t')) h->i++; }

/* A quoted Python string without escapes (all numpy writes here); copies up to cap-1 bytes. */
static int qstr(H *h, char *out, size_t cap) {
  sp(h);
  if (h->i >= h->n || (h->s[h->i] != '\'' && h->s[h->i] != '"')) return -1;
  char q = h->s[h->i++];
  size_t o = 0;
  while (h->i < h->n && h->s[h->i] != q) {
    if (h->s[h->i] == '\\' || o + 1 >= cap) return -1;
    out[o++] = h->s[h->i++];
  }
  if (h->i >= h->n) return -1;
  h->i++;
  out[o] = 0;
  return 0;
}

static int expect(H *h, char c) { sp(h); if (h->i < h->n && h->s[h->i] == c) { h->i++; return 0; } return -1; }

static int word(H *h, const char *w) {
  sp(h);
  size_t k = strlen(w);
  if (h->n - h->i < k || memcmp(h->s + h->i, w, k) != 0) return -1;
  h->i += k;
  return 0;
}

#define FAIL(...) do { snprintf(err, errcap, __VA_ARGS__); return -1; } while (0)

int ep_npy_parse(const uint8_t *p, size_t n, ep_npy *out, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) FAIL("not a .npy file (bad magic)");
  if (p[6] != 1 || p[7] != 0) FAIL(".npy format version %u.%u not supported (only 1.0)", p[6], p[7]);
  size_t hlen = (size_t)p[8] | (size_t)p[9] << 8;
  if (hlen > n - 10) FAIL(".npy header truncated");
  H h = {(const char *)p + 10, hlen, 0};
  char descr[32] = {0};
  int have_descr = 0, have_order = 0, have_shape = 0;
  if (expect(&h, '{')) FAIL(".npy header is not a dict");
  for (;;) {
    sp(&h);
    if (h.i < h.n && h.s[h.i] == '}') { h.i++; break; }
    char key[32];
    if (qstr(&h, key, sizeof key) || expect(&h, ':')) FAIL(".npy header malformed");
    if ((!strcmp(key, "descr") && have_descr) || (!strcmp(key, "fortran_order") && have_order) ||
        (!strcmp(key, "shape") && have_shape))
      FAIL(".npy header: key '%s' given twice", key);
    if (!strcmp(key, "descr")) {
      if (qstr(&h, descr, sizeof descr)) FAIL(".npy header: descr is not a plain dtype string (structured arrays unsupported)");
      have_descr = 1;
    } else if (!strcmp(key, "fortran_order")) {
      if (!word(&h, "False")) have_order = 1;
      else if (!word(&h, "True")) FAIL(".npy array is in Fortran order: save it C-contiguous (np.ascontiguousarray)");
      else FAIL(".npy header: fortran_order malformed");
    } else if (!strcmp(key, "shape")) {
      if (expect(&h, '(')) FAIL(".npy header: shape malformed");
      for (;;) {
        sp(&h);
        if (h.i < h.n && h.s[h.i] == ')') { h.i++; break; }
        if (out->rank >= EP_NPY_MAX_RANK) FAIL(".npy array has more than %d dimensions", EP_NPY_MAX_RANK);
        int64_t v = 0; int digits = 0;
        while (h.i < h.n && h.s[h.i] >= '0' && h.s[h.i] <= '9') {
          if (v > 0x7fffffff) FAIL(".npy header: dimension too large");
          v = v * 10 + (h.s[h.i++] - '0'); digits++;
        }
        if (h.i < h.n && h.s[h.i] == 'L') h.i++;
        if (!digits || v > 0x7fffffff) FAIL(".npy header: shape malformed");
        out->dims[out->rank++] = v;
        sp(&h);
        if (h.i < h.n && h.s[h.i] == ',') { h.i++; continue; }
        if (expect(&h, ')')) FAIL(".npy header: shape malformed");
        break;
      }
      have_shape = 1;
    } else {
      FAIL(".npy header: unexpected key '%s'", key);
    }
    sp(&h);
    if (h.i < h.n && h.s[h.i] == ',') { h.i++; continue; }
    if (expect(&h, '}')) FAIL(".npy header malformed");
    break;
  }
  while (h.i < h.n && (h.s[h.i] == ' ' || h.s[h.i] == '\n' || h.s[h.i] == '\0')) h.i++;
  if (h.i != h.n) FAIL(".npy header: trailing bytes");
  if (!have_descr || !have_order || !have_shape) FAIL(".npy header lacks descr, fortran_order or shape");
  uint32_t esize;
  if (!npy_dtype(descr, &out->dtype, &esize)) {
    if (descr[0] == '>') FAIL(".npy array is big-endian ('%s'): save it little-endian (a.astype(a.dtype.newbyteorder('<')))", descr);
    FAIL(".npy dtype '%s' not supported (float32 '<f4', int64 '<i8'; also bool, int8, uint8, int16, uint16, int32, uint32, uint64, float16, float64)", descr);
  }
  uint64_t numel = 1;
  for (uint32_t i = 0; i < out->rank; i++) {
    numel *= (uint64_t)out->dims[i];
    if (numel > ((uint64_t)1 << 40)) FAIL(".npy array too large");
  }
  out->nbytes = numel * esize;
  out->data_off = 10 + hlen;
  if (n - out->data_off != out->nbytes)
    FAIL(".npy data is %zu bytes, header says %llu", n - out->data_off, (unsigned long long)out->nbytes);
  return 0;
}

size_t ep_npy_header(uint32_t dtype, uint32_t rank, const int32_t *dims, uint8_t *hdr, size_t cap) {
  const char *d = NULL;
  for (size_t i = 0; i < N_DESCRS; i++) if (DESCRS[i].dtype == dtype) d = DESCRS[i].descr;
  if (!d || cap < 128 + 24 * (size_t)rank) return 0;
  char dict[512];
  int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", d);
  for (uint32_t i = 0; i < rank; i++) k += snprintf(dict + k, sizeof dict - (size_t)k, "%d,%s", dims[i], i + 1 < rank ? " " : "");
  if (rank > 1) k--;  /* (2, 3) not (2, 3,); a 1-tuple keeps its comma */
  k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
  size_t total = 10 + (size_t)k + 1;
  size_t padded = (total + 63) / 64 * 64;
  if (padded > cap) return 0;
  memcpy(hdr, "\x93NUMPY\x01\x00", 8);
  size_t hl = padded - 10;
  hdr[8] = (uint8_t)(hl & 0xff);
  hdr[9] = (uint8_t)(hl >> 8);
  memcpy(hdr + 10, dict, (size_t)k);
  memset(hdr + 10 + k, ' ', padded - 10 - (size_t)k - 1);
  hdr[padded - 1] = '\n';
  return padded;
}
