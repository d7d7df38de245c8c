/* The few libc-like helpers the core carries itself, so it links with no libc at all. */
#include "ep_kernel.h"
#include "ep_vec.h"

void *ep_memcpy(void *dst, const void *src, uint32_t n) {
  uint8_t *d = (uint8_t *)dst;
  const uint8_t *s = (const uint8_t *)src;
  for (uint32_t i = 0; i < n; i++) d[i] = s[i];
  return dst;
}

void *ep_memset(void *dst, int c, uint32_t n) {
  uint8_t *d = (uint8_t *)dst;
  for (uint32_t i = 0; i < n; i++) d[i] = (uint8_t)c;
  return dst;
}

uint32_t ep_dtype_size(uint32_t dtype) {
  switch (dtype) {   /* the plan's dtype table (wasm_kernels/spec/ops.json) */
#define EP_DTYPE_SIZE(code, name, bytes) case code: return bytes;
    EP_DTYPE_LIST(EP_DTYPE_SIZE)
#undef EP_DTYPE_SIZE
    default: return 0;
  }
}

int ep_same_shape(const ep_tensor *a, const ep_tensor *b) {
  if (a->rank != b->rank) return 0;
  for (uint32_t i = 0; i < a->rank; i++) if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

const char *ep_status_str(ep_status s) {
  switch (s) {
    case EP_OK: return "ok";
    case EP_E_TRUNCATED: return "plan truncated";
    case EP_E_MAGIC: return "not an edgepack plan (bad magic)";
    case EP_E_VERSION: return "unsupported plan version";
    case EP_E_BOUNDS: return "offset or id out of bounds";
    case EP_E_TENSOR: return "inconsistent tensor entry";
    case EP_E_OP: return "unknown kernel or wrong input/output count";
    case EP_E_PARAM: return "invalid kernel parameters";
    case EP_E_SHAPE: return "tensor shapes inconsistent with kernel";
    case EP_E_DTYPE: return "unsupported tensor dtype for kernel";
    case EP_E_ARENA: return "arena missing, too small or misaligned";
    case EP_E_INDEX: return "index out of range";
    case EP_E_STATE: return "call order (open, bind, run)";
    case EP_E_ALIGN: return "plan buffer misaligned";
    case EP_E_LIMIT: return "input dimension or memory above the plan's bound";
    case EP_E_INPUT: return "input shape missing or inconsistent with the plan";
  }
  return "unknown status";
}

const char *ep_vec_name(void) { return EP_VEC_NAME; }
