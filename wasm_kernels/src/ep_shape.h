/* Run-time shapes (plan v2): each kernel owns its shape function (output dims from input dims, its
 * parameters and the values of shape inputs) and its scratch function (bytes of scratch a run at those
 * shapes needs). The core calls shape() node by node to resolve a plan for the input dims it is given,
 * then the kernel's check() as for a static plan. Internal header. */
#ifndef EP_SHAPE_H
#define EP_SHAPE_H
#include "ep_kernel.h"

/* shape: every input's dims are resolved; in[k]->data is non-NULL only where the value is known while
 * resolving (weights, and tensors computed by shape nodes), and NULL otherwise: a shape function that
 * needs a value must return EP_E_SHAPE when it is NULL. Each out[k]->rank is the plan's; shape() sets
 * out[k]->dims[0..rank) (ep_shape_set) or returns EP_E_SHAPE / EP_E_PARAM.
 * scratch: scratch bytes for the resolved shapes (called after shape(); NULL in the table = none). */
typedef ep_status (*ep_shape_fn)(ep_node *n);
typedef uint32_t (*ep_scratch_fn)(const ep_node *n);
typedef struct {
  ep_shape_fn shape;     /* NULL: the kernel runs only with the shapes written in the plan */
  ep_scratch_fn scratch; /* NULL: no scratch */
} ep_shape_entry;

const ep_shape_entry *ep_shape_for(uint32_t op);   /* NULL for an unknown op */

/* Set t's dims (rank must equal t->rank, the plan's) and numel; EP_E_SHAPE on a negative dim, a rank
 * mismatch or more than 2^32-1 elements. */
ep_status ep_shape_set(ep_tensor *t, uint32_t rank, const int32_t *dims);
/* out = t's dims, for kernels whose output has the shape of an input. */
ep_status ep_shape_like(ep_tensor *out, const ep_tensor *t);
/* numpy broadcasting of ins[0..n) (right-aligned) into out's rank: EP_E_SHAPE if incompatible. */
ep_status ep_shape_broadcast(ep_tensor *out, const ep_tensor *const *ins, uint32_t n);
/* Element k of an integer (int32 or int64) value input, as int64; 0 when out of range (check before). */
int64_t ep_value_at(const ep_tensor *t, uint64_t k);

/* Each kernel's shape and scratch functions by name, ep_shape_<OP> / ep_scratch_<OP> (defined in
 * src/shape/shape_<family>.c next to the family's other ones; the table lists those that exist). */
#define EP_DECLARE_SHAPE(id, name) ep_status ep_shape_##name(ep_node *node); uint32_t ep_scratch_##name(const ep_node *node);
EP_OP_LIST(EP_DECLARE_SHAPE)
#undef EP_DECLARE_SHAPE

/* t = the dims held as values by s (int64 1-D, known, each 0..INT32_MAX, at most EP_MAX_RANK; EP_E_SHAPE otherwise):
 * EXPAND's and CONSTANT_OF_SHAPE's shape input (src/shape/shape_common.c). */
ep_status ep_shape_of_values(const ep_tensor *s, ep_tensor *t);
/* Output 0 has input 0's dims (UNARY, CAST, SOFTMAX, QUANTIZE_LINEAR, ...; src/shape/shape_common.c). */
ep_status ep_shape_first(ep_node *n);
/* For check() of a parameter form that determines the output dims: EP_OK when n's outputs have exactly the
 * dims f derives from its inputs (f runs on copies: n is not modified), else f's error or EP_E_SHAPE. */
ep_status ep_shape_agrees(const ep_node *n, ep_shape_fn f);
/* SLICE's ONNX form on one axis of extent d (src/shape/shape_data.c): first index and length of
 * start:end:step after negative indices and clamping, as onnxruntime resolves them (step != 0). */
void ep_slice_axis(int64_t d, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *len);
/* SLICE's 3r ONNX words [start.., end.., step..] (src/shape/shape_data.c): its parameter words, or with no words
 * made from the values of inputs starts, ends, axes?, steps? (value inputs); EP_E_SHAPE when unknown or invalid. */
ep_status ep_slice_words(const ep_node *n, int32_t *w);
/* PAD's 3 + 2r words [mode, value_lo, value_hi, begin.., end..] (src/shape/shape_data.c): its parameter words
 * (3 + r or 3 + 2r), or [mode, lo, hi] completed from the values of inputs pads, axes? and (when known) value?. */
ep_status ep_pad_words(const ep_node *n, int32_t *w);
/* AXIS's axis (src/shape/shape_axis.c): word 1, or CumSum / CumProd's (word 1 = -1) from input 1's value, negative
 * from the end; -1 when unknown or out of range. */
int32_t ep_axis_of(const ep_node *n);
/* REDUCE's mask of reduced dims (src/shape/shape_reduce.c): word 1 ([kind, mask]), or from the axes input's values
 * ([kind, 0, noop_with_empty_axes]); EP_E_SHAPE for axes unknown, out of range or repeated. */
ep_status ep_reduce_mask(const ep_node *n, uint32_t *mask);
/* SHAPE's [start, end) normalized against a rank (src/shape/shape_dims.c): first dim and count. */
void ep_shape_span(uint32_t rank, const int32_t *params, uint32_t *first, uint32_t *count);
#endif
