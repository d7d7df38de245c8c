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
#endif
