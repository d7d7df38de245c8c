/* Byte layout of a plan, versions 1 (static shapes) and 2 (shapes resolved at run time). docs/plan-format.md describes the same layout in prose;
 * packager/plan/layout.py writes it. All integers little-endian. */
#ifndef EP_PLAN_LAYOUT_H
#define EP_PLAN_LAYOUT_H
#define EP_PLAN_MAGIC "EPLN"
#define EP_PLAN_VERSION 1u
#define EP_PLAN_HEADER_BYTES 64u
#define EP_PLAN_VERSION_DYNAMIC 2u
#define EP_PLAN_HEADER_BYTES_V2 96u
#define EP_PLAN_LIFE_BYTES 12u   /* v2 lifetime entry: i32 root, i32 first, i32 last */
#define EP_PLAN_TENSOR_BYTES 48u
#define EP_PLAN_NODE_BYTES 32u
#define EP_PLAN_ALIGN 64u

/* header field offsets */
enum {
  EP_H_MAGIC = 0, EP_H_VERSION = 4, EP_H_HEADER_BYTES = 8, EP_H_PLAN_BYTES = 12,
  EP_H_N_TENSORS = 16, EP_H_N_NODES = 20, EP_H_N_INPUTS = 24, EP_H_N_OUTPUTS = 28,
  EP_H_TENSORS_OFF = 32, EP_H_NODES_OFF = 36, EP_H_INTS_OFF = 40, EP_H_INTS_COUNT = 44,
  EP_H_WEIGHTS_OFF = 48, EP_H_WEIGHTS_BYTES = 52, EP_H_ARENA_BYTES = 56, EP_H_FLAGS = 60,
  /* version 2 only */
  EP_H_LIFE_OFF = 64, EP_H_BOUNDS_AT = 68, EP_H_VALUES_BYTES = 72, EP_H_MAX_ARENA_BYTES = 76,
  EP_H_N_MAIN = 80 /* 0: no bodies; else nodes [0, n_main) run, bodies live in [n_main, n_nodes) */, EP_H_RESERVED2 = 84
};
/* tensor entry field offsets */
enum {
  EP_T_DTYPE = 0, EP_T_STORAGE = 1, EP_T_RANK = 2, EP_T_FLAGS = 3,
  EP_T_OFFSET = 4, EP_T_NBYTES = 8, EP_T_DIMS = 12, EP_T_RESERVED = 44
};
enum { EP_STORAGE_ARENA = 0, EP_STORAGE_WEIGHTS = 1, EP_STORAGE_VALUES = 2 /* v2: computed while resolving */ };
/* tensor flags (byte at EP_T_FLAGS), version 2 only */
enum { EP_TENSOR_DYNAMIC = 1u };   /* dims of -1 are resolved at run time */
/* node entry field offsets */
enum {
  EP_N_OP = 0, EP_N_N_IN = 2, EP_N_N_OUT = 3, EP_N_IO_AT = 4, EP_N_PARAMS_AT = 8,
  EP_N_N_PARAMS = 12, EP_N_SCRATCH_OFF = 16, EP_N_SCRATCH_BYTES = 20, EP_N_FLAGS = 24, EP_N_RESERVED = 28
};
/* node flags (word at EP_N_FLAGS) */
enum {
  EP_NODE_PROLOGUE = 1u,   /* runs once in ep_bind (e.g. CAST of a float16 weight), skipped by ep_run */
  EP_NODE_RESOLVE = 2u     /* v2: runs in ep_resolve (shape arithmetic into the values region), skipped by ep_run */
};
#endif
