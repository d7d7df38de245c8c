/* Run-time dims of a version-2 bundle (plan version 2, "shapes resolved at run time").
 * manifest.json gives an input's symbolic dims as strings ("shape": ["batch", 16]) and each symbol's
 * bounds in "dims": {"batch": {"min": 1, "max": null, "example": 1}} (max null: unbounded). This module
 * reads that table and checks the extents a run gives: within the symbol's bounds, and one extent per
 * symbol across all inputs. Errors name the input, the dimension, the symbol and the bound. Nothing
 * allocates; names longer than EP_DIMS_NAME - 1 bytes or more than EP_DIMS_MAX symbols are refused. */
#ifndef EP_DIMS_H
#define EP_DIMS_H
#include <stddef.h>
#include <stdint.h>
#include "ep_json.h"

#define EP_DIMS_MAX 64
#define EP_DIMS_NAME 128

typedef struct {
  char name[EP_DIMS_NAME];
  int64_t min, max;        /* max 0: unbounded */
  int64_t example;         /* the extent the packager verified the bundle at */
  int64_t value;           /* extent given for this run, -1 before ep_dims_bind */
  const char *set_by;      /* the input that gave it */
} ep_sym;

typedef struct {
  ep_sym s[EP_DIMS_MAX];
  uint32_t n;
} ep_dims;

/* manifest["dims"] into d (absent: no symbols). 0 ok, -1 with err filled. */
int ep_dims_read(const ep_json *j, ep_dims *d, char *err, size_t errcap);
/* Index of symbol `name`, or -1. */
int ep_dims_find(const ep_dims *d, const char *name);
/* Forget the extents of the previous run. */
void ep_dims_reset(ep_dims *d);
/* Dim k of input `input` is symbol `sym` and the run gives it extent `got`: within [min..max] and, when an
 * earlier input already gave the symbol an extent, the same one. 0 ok, -1 with err filled. */
int ep_dims_bind(ep_dims *d, uint32_t sym, const char *input, uint32_t k, int64_t got, char *err, size_t errcap);
/* The extent of symbol `sym` for this run: the one bound, else its example. */
int64_t ep_dims_extent(const ep_dims *d, uint32_t sym);
#endif
