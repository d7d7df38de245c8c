/* Function codes of the UNARY kernel (its params[0]) and the shared activation epilogue.
 * Codes below EP_ACT_COUNT, and those appended later (ep_act_fusable: EP_ACT_SILU), are the activations that
 * conv/gemm/matmul may fuse: they call ep_activation_nparams() in check() and ep_apply_activation() on their
 * output rows in run().
 * The codes are generated from wasm_kernels/spec/ops.json (ep_fns.h), as are their Python and JS twins. */
#ifndef EP_ACTIVATION_H
#define EP_ACTIVATION_H
#include <stdint.h>

#include "ep_fns.h"   /* enum ep_unary_fn: EP_ACT_* (fusable), EP_ACT_COUNT, EP_UN_* */

/* Number of float parameter words function `fn` takes; -1 if fn is not a UNARY function code. */
int32_t ep_unary_nparams(int32_t fn);
/* Same, but -1 unless fn is a fusable activation (ep_act_fusable). */
int32_t ep_activation_nparams(int32_t fn);
/* Apply activation fn (validated with ep_activation_nparams in check()) with its parameter words
 * fn_params[0..nparams) to x[0..count) in place. Vectorized; x needs no particular alignment. */
void ep_apply_activation(float *x, uint32_t count, int32_t fn, const int32_t *fn_params);
/* The float -> float codes ep_apply_unary computes in place (NONE is the identity); RECURRENT's check() takes only these. */
static inline int ep_unary_in_place(int32_t fn) { return fn >= EP_ACT_NONE && (fn < EP_UN_NOT || fn == EP_ACT_SILU); }
/* Same as ep_apply_activation for any code with ep_unary_in_place(fn): RECURRENT's gate activations. */
void ep_apply_unary(float *x, uint32_t count, int32_t fn, const int32_t *fn_params);
#endif
