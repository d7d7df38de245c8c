/* Run-time dims of a version-2 bundle: see ep_dims.h. */
#include "ep_dims.h"
#include <stdio.h>
#include <string.h>

#define FAIL(...) do { snprintf(err, errcap, __VA_ARGS__); return -1; } while (0)

int ep_dims_read(const ep_json *j, ep_dims *d, char *err, size_t errcap) {
  memset(d, 0, sizeof *d);
  const int obj = ep_json_get(j, 0, "dims");
  if (obj < 0) return 0;
  if (j->t[obj].type != EP_J_OBJ) FAIL("manifest.json: 'dims' is not an object");
  if (j->t[obj].size > EP_DIMS_MAX) FAIL("manifest.json: more than %d symbolic dims", EP_DIMS_MAX);
  uint32_t k = (uint32_t)obj + 1;   /* key token, then its value's subtree */
  for (uint32_t i = 0; i < j->t[obj].size; i++) {
    const uint32_t v = k + 1;
    ep_sym *s = &d->s[i];
    if (v >= j->n || ep_json_str(j, (int)k, s->name, sizeof s->name) <= 0) FAIL("manifest.json: dims: name %u empty or too long", i);
    if (j->t[v].type != EP_J_OBJ) FAIL("manifest.json: dims['%s'] is not an object", s->name);
    const int mx = ep_json_get(j, (int)v, "max");
    if (ep_json_int(j, ep_json_get(j, (int)v, "min"), 0, 0x7fffffff, &s->min))
      FAIL("manifest.json: dims['%s'].min missing or not an integer in [0, 2^31)", s->name);
    if (mx < 0 || j->t[mx].type == EP_J_LIT) {
      if (mx >= 0 && (j->t[mx].end - j->t[mx].start != 4 || memcmp(j->s + j->t[mx].start, "null", 4)))
        FAIL("manifest.json: dims['%s'].max must be an integer or null", s->name);
      s->max = 0;
    } else if (ep_json_int(j, mx, 1, 0x7fffffff, &s->max) || s->max < s->min) {
      FAIL("manifest.json: dims['%s'].max invalid (an integer >= min, or null)", s->name);
    }
    const int ex = ep_json_get(j, (int)v, "example");
    s->example = s->min > 0 ? s->min : 1;
    if (ex >= 0 && (ep_json_int(j, ex, s->min, s->max ? s->max : 0x7fffffff, &s->example)))
      FAIL("manifest.json: dims['%s'].example invalid (an integer within its bounds)", s->name);
    s->value = -1;
    for (uint32_t m = 0; m < i; m++)
      if (!strcmp(d->s[m].name, s->name)) FAIL("manifest.json: dims lists '%s' twice", s->name);
    k = j->t[v].next;
    d->n = i + 1;
  }
  return 0;
}

int ep_dims_find(const ep_dims *d, const char *name) {
  for (uint32_t i = 0; i < d->n; i++)
    if (!strcmp(d->s[i].name, name)) return (int)i;
  return -1;
}

void ep_dims_reset(ep_dims *d) {
  for (uint32_t i = 0; i < d->n; i++) { d->s[i].value = -1; d->s[i].set_by = NULL; }
}

int ep_dims_bind(ep_dims *d, uint32_t sym, const char *input, uint32_t k, int64_t got, char *err, size_t errcap) {
  if (sym >= d->n) FAIL("input '%s': dimension %u has no entry in manifest.json 'dims'", input, k);
  ep_sym *s = &d->s[sym];
  char range[64];
  if (s->max) snprintf(range, sizeof range, "[%lld..%lld]", (long long)s->min, (long long)s->max);
  else snprintf(range, sizeof range, "[%lld..] (no upper bound)", (long long)s->min);
  if (got < s->min)
    FAIL("input '%s': dimension %u ('%s') is %lld, below its bound %lld (this bundle accepts '%s' in %s)", input, k,
         s->name, (long long)got, (long long)s->min, s->name, range);
  if (s->max && got > s->max)
    FAIL("input '%s': dimension %u ('%s') is %lld, above its bound %lld (this bundle accepts '%s' in %s)", input, k,
         s->name, (long long)got, (long long)s->max, s->name, range);
  if (s->value >= 0 && s->value != got)
    FAIL("input '%s': dimension %u ('%s') is %lld, but input '%s' gives '%s' = %lld", input, k, s->name, (long long)got,
         s->set_by ? s->set_by : "?", s->name, (long long)s->value);
  s->value = got;
  s->set_by = input;
  return 0;
}

int64_t ep_dims_extent(const ep_dims *d, uint32_t sym) {
  if (sym >= d->n) return 1;
  return d->s[sym].value >= 0 ? d->s[sym].value : d->s[sym].example;
}
