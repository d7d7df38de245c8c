/* libFuzzer harness for edgepack-run's .npy reader (cli/ep_npy.c): input files are untrusted. Each input is one
 * file in an exactly-sized buffer. When the header parses, its description must fit the file (data inside it,
 * bytes = elements x dtype size), and the header edgepack-run writes for the same array must parse back to it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ep_npy.h"

#define MAX_FILE (1u << 16)
#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_FILE) return 0;
  uint8_t *file = malloc(size ? size : 1);
  if (!file) return 0;
  memcpy(file, data, size);
  ep_npy a;
  char err[256];
  memset(err, 0x55, sizeof err);
  if (ep_npy_parse(file, size, &a, err, sizeof err) == 0) {
    const uint64_t es = ep_dtype_esize(a.dtype);
    CHECK(es && a.rank <= EP_NPY_MAX_RANK && a.data_off <= size && a.nbytes <= size - a.data_off);
    uint64_t elems = 1;
    int32_t dims[EP_NPY_MAX_RANK];
    int fits = 1, zero = 0;
    for (uint32_t k = 0; k < a.rank; k++) {
      CHECK(a.dims[k] >= 0 && a.dims[k] <= INT32_MAX);
      zero |= a.dims[k] == 0;
      fits &= a.dims[k] <= INT32_MAX;
      dims[k] = (int32_t)a.dims[k];
    }
    for (uint32_t k = 0; k < a.rank && !zero; k++) {
      elems *= (uint64_t)a.dims[k];   /* no overflow: each partial product is bounded by the file size */
      CHECK(elems * es <= size);
    }
    CHECK((zero ? 0 : elems) * es == a.nbytes);
    CHECK(strcmp(ep_dtype_str(a.dtype), "unknown") != 0);
    uint8_t hdr[512];
    const size_t hl = fits ? ep_npy_header(a.dtype, a.rank, dims, hdr, sizeof hdr) : 0;
    if (hl) {   /* round trip: our own header, followed by the same data, describes the same array */
      CHECK(hl % 64 == 0 && hl <= sizeof hdr);
      uint8_t *again = malloc(hl + a.nbytes + 1);
      CHECK(again != NULL);
      memcpy(again, hdr, hl);
      memcpy(again + hl, file + a.data_off, a.nbytes);
      ep_npy b;
      CHECK(ep_npy_parse(again, hl + a.nbytes, &b, err, sizeof err) == 0);
      CHECK(b.dtype == a.dtype && b.rank == a.rank && b.nbytes == a.nbytes && b.data_off == hl);
      CHECK(memcmp(b.dims, a.dims, a.rank * sizeof a.dims[0]) == 0);
      free(again);
    }
  } else {
    CHECK(memchr(err, 0, sizeof err) != NULL && err[0] != 0);   /* refused with a message, NUL-terminated */
  }
  free(file);
  return 0;
}
