/* edgepack runtime core: public C API.
 * The core allocates nothing. The host gives it the plan bytes (which must stay unchanged and
 * alive while the context is used) and one arena of ep_arena_bytes() bytes, 64-byte aligned.
 * All functions return an ep_status; ep_status_str() names it. The plan is untrusted input:
 * ep_open() validates every offset, length, id, shape and kernel parameter before anything runs.
 *
 * Call sequence, version 1 (fixed shapes):
 *   ep_open(ctx, plan, n);  arena = 64-aligned ep_arena_bytes(ctx) bytes;  ep_bind(ctx, arena, bytes);
 *   per run: write inputs at ep_tensor_data(ctx, ep_input_id(ctx, i)); ep_run(ctx); read outputs likewise.
 * Version 2 (ep_plan_version(ctx) == 2: input dims given per run, within the plan's bounds):
 *   ep_open(); state = 64-aligned ep_state_bytes(ctx) bytes, kept alive; ep_set_state(ctx, state, bytes);
 *   per run: ep_set_input_shape(ctx, i, rank, dims) for every input (ep_input_bound() gives each dim's
 *     [min, max], max 0 = unbounded; EP_E_LIMIT above a bound, EP_E_INPUT for a wrong rank or fixed dim);
 *     for every value input (ep_input_values(ctx, i) not NULL: its values decide shapes), write its values there;
 *     ep_resolve(ctx) (returns at once when no dim and no value input changed; EP_E_LIMIT: more memory than the
 *     plan allows; EP_E_SHAPE: values that give no valid shape);
 *     ep_arena_bytes(ctx) is what this shape needs: ep_bind() an arena at least that large (64-aligned;
 *     binding the same address again costs nothing, a moved arena re-runs the plan's prologue);
 *     write inputs at ep_tensor_data(), ep_run(), read outputs there, their dims and byte sizes from
 *     ep_tensor_describe() (resolved for this run).
 * edgepack-run (edge/cli), edge/python/edgepack_runtime.py, org.edgepack.Session and packager/runtime/wasm.py
 * are hosts that do exactly this. */
#ifndef EDGEPACK_H
#define EDGEPACK_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  EP_OK = 0,
  EP_E_TRUNCATED = 1,    /* the plan is shorter than its header or a section says */
  EP_E_MAGIC = 2,        /* not a plan */
  EP_E_VERSION = 3,      /* plan format version not supported by this runtime */
  EP_E_BOUNDS = 4,       /* an offset/length/id points outside its section */
  EP_E_TENSOR = 5,       /* a tensor entry is inconsistent (dtype, rank, size) */
  EP_E_OP = 6,           /* unknown kernel id or wrong number of inputs/outputs */
  EP_E_PARAM = 7,        /* kernel parameters invalid or inconsistent with shapes */
  EP_E_SHAPE = 8,        /* tensor shapes inconsistent with the kernel */
  EP_E_DTYPE = 9,        /* tensor dtype not supported by the kernel */
  EP_E_ARENA = 10,       /* arena missing or misaligned */
  EP_E_INDEX = 11,       /* a runtime index (Gather, ...) is out of range */
  EP_E_STATE = 12,       /* call order wrong (run before open/bind) */
  EP_E_ALIGN = 13,       /* plan buffer misaligned */
  EP_E_LIMIT = 14,       /* an input dimension above the plan's bound, or more memory than the plan allows */
  EP_E_INPUT = 15        /* input shape missing or inconsistent with the plan (rank, a fixed dimension) */
} ep_status;

/* Tensor element types use ONNX TensorProto codes. */
enum { EP_F32 = 1, EP_U8 = 2, EP_I8 = 3, EP_U16 = 4, EP_I16 = 5, EP_I32 = 6, EP_I64 = 7, EP_BOOL = 9, EP_F16 = 10,
       EP_F64 = 11, EP_U32 = 12, EP_U64 = 13,
       /* low precision (src/kernels/lowp.c): one element per byte (bfloat16: 2 bytes), 4- and 2-bit integers
        * sign- or zero-extended, the float formats as their raw codes */
       EP_BF16 = 16, EP_F8E4M3FN = 17, EP_F8E4M3FNUZ = 18, EP_F8E5M2 = 19, EP_F8E5M2FNUZ = 20, EP_U4 = 21, EP_I4 = 22,
       EP_F4E2M1 = 23, EP_F8E8M0 = 24, EP_U2 = 25, EP_I2 = 26 };

#define EP_MAX_RANK 8

typedef struct {
  const uint8_t *plan;
  uint32_t plan_bytes;
  uint8_t *arena;
  uint32_t arena_bytes;
  uint32_t n_tensors, n_nodes, n_inputs, n_outputs;
  uint32_t tensors_off, nodes_off, ints_off, ints_count, weights_off, weights_bytes;
  uint32_t inputs_at, outputs_at;
  uint32_t n_prologue;   /* nodes [0, n_prologue) carry EP_NODE_PROLOGUE: run once by ep_bind */
  uint32_t opened;
  /* version 2 (run-time shapes) */
  uint32_t version;
  uint32_t life_off, bounds_at, values_bytes, max_arena_bytes;
  uint8_t *state;         /* host-provided: input dims, resolved dims, offsets, values region */
  uint32_t state_bytes;
  uint32_t resolved;      /* the state holds a resolved plan for the current input dims */
  uint32_t value_inputs;  /* graph inputs in the values region (their values decide shapes): the state keeps a copy */
  uint32_t prologue_bytes;/* arena bytes [0, prologue_bytes) hold the prologue's outputs, same for every shape */
  const uint8_t *prologue_arena; /* the arena the prologue last ran in (v2: rerun only when it moves) */
  uint32_t bound_bytes;   /* size of the arena given to ep_bind */
  uint32_t n_main;        /* nodes [0, n_main) run in order; If/Loop/Scan bodies live in [n_main, n_nodes) */
  uint32_t iterations_left; /* body steps the running top-level control node may still take (src/control.h) */
  uint32_t failed_node;   /* the node ep_resolve or ep_run stopped at, for error messages */
  uint32_t rerun;         /* ep_run re-deriving dims after a data-dependent node: placed sizes are limits (resolve.c) */
  uint32_t run_set_dims;  /* the last ep_run set such dims: ep_resolve gives the outputs their capacities again */
} ep_ctx;

typedef struct {
  uint32_t dtype;
  uint32_t rank;
  int32_t dims[EP_MAX_RANK];
  uint32_t nbytes;
} ep_tensor_info;

const char *ep_status_str(ep_status s);
/* Validate the plan and fill ctx. plan must be 64-byte aligned (weights are read in place). */
ep_status ep_open(ep_ctx *ctx, const uint8_t *plan, uint32_t plan_bytes);
uint32_t ep_arena_bytes(const ep_ctx *ctx);
/* Hand the core its arena (64-byte aligned, at least ep_arena_bytes()); runs the plan's prologue nodes
 * (weights converted once, e.g. float16 -> float32), so it is called once per arena, not per run. */
ep_status ep_bind(ep_ctx *ctx, uint8_t *arena, uint32_t arena_bytes);
/* Run every node in plan order. Inputs must have been written to their tensors first. */
ep_status ep_run(ep_ctx *ctx);
/* Run one node (profiling): nodes must be run in order 0..ep_num_nodes()-1 for a correct result.
 * Prologue nodes already ran in ep_bind: for them this does nothing. */
ep_status ep_run_node(ep_ctx *ctx, uint32_t i);
uint32_t ep_num_nodes(const ep_ctx *ctx);
/* Graph inputs/outputs, in manifest order: their tensor ids. */
uint32_t ep_num_inputs(const ep_ctx *ctx);
uint32_t ep_num_outputs(const ep_ctx *ctx);
int32_t ep_input_id(const ep_ctx *ctx, uint32_t i);
int32_t ep_output_id(const ep_ctx *ctx, uint32_t i);
/* Where a tensor lives (after ep_bind), and its description. NULL/EP_E_BOUNDS on a bad id. */
uint8_t *ep_tensor_data(const ep_ctx *ctx, uint32_t id);
ep_status ep_tensor_describe(const ep_ctx *ctx, uint32_t id, ep_tensor_info *out);
const char *ep_vec_name(void);

/* Version 2 plans. ep_state_bytes: 0 for a static (version 1) plan. */
uint32_t ep_plan_version(const ep_ctx *ctx);
uint32_t ep_state_bytes(const ep_ctx *ctx);
ep_status ep_set_state(ep_ctx *ctx, uint8_t *state, uint32_t bytes);
/* Dims of graph input i for the next run (rank must be the plan's). */
ep_status ep_set_input_shape(ep_ctx *ctx, uint32_t i, uint32_t rank, const int32_t *dims);
/* Input i's bound on dim k: most (0 = unbounded) and least extent the plan accepts. */
ep_status ep_input_bound(const ep_ctx *ctx, uint32_t i, uint32_t k, int32_t *min, int32_t *max);
/* Resolve every tensor's dims for the inputs' dims, run the shape arithmetic and plan the arena; afterwards
 * ep_arena_bytes() is what this shape needs (bind a larger arena, or the same one again, before running). */
ep_status ep_resolve(ep_ctx *ctx);
/* Where graph input i's values go when they decide shapes (a value input: the host writes them before
 * ep_resolve, which re-resolves when they changed); NULL for other inputs, a version-1 plan or no state. */
uint8_t *ep_input_values(const ep_ctx *ctx, uint32_t i);
/* The node the last ep_resolve or ep_run failed at (its index in plan order). */
uint32_t ep_failed_node(const ep_ctx *ctx);
/* Tests: re-derive each node's output dims and scratch through the kernels' shape functions and compare
 * with the plan (node: the first that differs; what: 1 dims, 2 scratch, 3 refused; checked: nodes compared). */
ep_status ep_shapes_consistent(const ep_ctx *ctx, uint32_t *node, uint32_t *what, uint32_t *checked);

#ifdef __cplusplus
}
#endif
#endif
