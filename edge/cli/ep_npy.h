/* .npy files, format version 1.0 only, C order, little-endian float32 ('<f4') and int64 ('<i8'),
 * plus the other dtypes a plan can hold: bool '|b1', int8 '|i1', uint8 '|u1', int16 '<i2', uint16 '<u2',
 * int32 '<i4', uint32 '<u4', uint64 '<u8', float16 '<f2', float64 '<f8'; the low-precision dtypes in their carrier's
 * descr (ep_dtype_carrier). Anything else (big-endian, Fortran order, other dtypes, v2/v3 headers, object
 * arrays) is refused with a message saying what was found. The header is parsed by a small bounded
 * parser of the Python dict literal numpy writes; nothing is evaluated. */
#ifndef EP_NPY_H
#define EP_NPY_H
#include <stddef.h>
#include <stdint.h>
#define EP_NPY_MAX_RANK 8
typedef struct {
  uint32_t dtype;          /* ONNX TensorProto code (edgepack.h EP_F32 ...) */
  uint32_t rank;
  int64_t dims[EP_NPY_MAX_RANK];
  uint64_t nbytes;         /* data bytes */
  size_t data_off;         /* where the data starts in the file */
} ep_npy;
/* Parse the header of file bytes p[0..n); checks the data length. 0 ok, else -1 with err filled. */
int ep_npy_parse(const uint8_t *p, size_t n, ep_npy *out, char *err, size_t errcap);
/* Build a v1.0 header (padded to 64 bytes, '\n' terminated) into hdr; returns its length or 0. */
size_t ep_npy_header(uint32_t dtype, uint32_t rank, const int32_t *dims, uint8_t *hdr, size_t cap);
const char *ep_dtype_str(uint32_t dtype);  /* "float32", "int64", "bool", ... (the manifest's names) */
uint32_t ep_dtype_from_str(const char *name);   /* its inverse; 0 for a name no plan holds */
uint32_t ep_dtype_esize(uint32_t dtype);        /* element bytes; 0 for an unknown dtype */
/* The numpy-native dtype whose .npy descr carries `dtype` (itself, or for bfloat16 uint16, float8/float4 and
 * uint4/uint2 uint8, int4/int2 int8); 0 for an unknown dtype. */
uint32_t ep_dtype_carrier(uint32_t dtype);
#endif
