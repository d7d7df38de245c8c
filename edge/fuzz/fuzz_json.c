/* libFuzzer harness for edgepack-run's manifest reader (cli/ep_json.c, cli/ep_dims.c): the manifest is untrusted.
 * Each input is one document in an exactly-sized buffer (no NUL after it, so ASan sees any read past the end).
 * When it parses, every token is read back through every accessor, and the reader's invariants are checked:
 * token ranges inside the document, subtrees nested and in order, counts consistent with the subtrees. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ep_dims.h"
#include "ep_json.h"

#define MAX_DOC (1u << 16)
#define MAX_TOKENS 1024u
#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char *const KEYS[] = {"name", "dtype", "shape", "tensor", "files", "sha256", "bytes", "dims", "min",
                                   "max", "example", "inputs", "outputs", "format", "target", ""};

static void check_token(const ep_json *j, uint32_t t) {
  const ep_jtok *k = &j->t[t];
  CHECK(k->start <= k->end && k->end <= j->len);
  CHECK(k->next > t && k->next <= j->n);
  if (k->type == EP_J_ARR || k->type == EP_J_OBJ) {
    uint32_t kids = 0;   /* direct children: objects hold key + value per member */
    for (uint32_t c = t + 1; c < k->next; c = j->t[c].next) {
      CHECK(j->t[c].next <= k->next);
      kids++;
    }
    CHECK(kids == (k->type == EP_J_OBJ ? 2 * k->size : k->size));
    for (uint32_t i = 0; i <= k->size; i++) {
      const int e = ep_json_at(j, (int)t, i);
      CHECK(k->type == EP_J_ARR ? (i < k->size ? e > (int)t && e < (int)k->next : e == -1) : e == -1);
    }
    for (size_t q = 0; q < sizeof KEYS / sizeof *KEYS; q++) {
      const int v = ep_json_get(j, (int)t, KEYS[q]);
      CHECK(v == -1 || (k->type == EP_J_OBJ && v > (int)t && v < (int)k->next));
    }
  }
  char small[8], big[256];
  const int a = ep_json_str(j, (int)t, small, sizeof small), b = ep_json_str(j, (int)t, big, sizeof big);
  CHECK(a < (int)sizeof small && b < (int)sizeof big);
  if (a >= 0) CHECK(b == a && memcmp(small, big, (size_t)a + 1) == 0);
  if (b >= 0) CHECK(k->type == EP_J_STR && big[b] == 0);
  int64_t v = 0;
  if (ep_json_int(j, (int)t, -1000, 1000, &v) == 0) CHECK(k->type == EP_J_NUM && v >= -1000 && v <= 1000);
  (void)ep_json_int(j, (int)t, INT64_MIN, INT64_MAX, &v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_DOC) return 0;
  char *doc = malloc(size ? size : 1);
  ep_jtok *toks = malloc(MAX_TOKENS * sizeof *toks);
  if (!doc || !toks) { free(doc); free(toks); return 0; }
  memcpy(doc, data, size);
  ep_json j;
  const int r = ep_json_parse(&j, doc, size, toks, MAX_TOKENS);
  CHECK(r == 0 || r == -1 || r == -2 || r == -3);
  if (r == 0) {
    CHECK(j.n >= 1 && j.n <= MAX_TOKENS && j.t[0].next == j.n);
    for (uint32_t t = 0; t < j.n; t++) check_token(&j, t);
    for (int t = -1; t <= (int)j.n; t += (int)j.n + 1) {   /* out-of-range token indices */
      char s[4];
      int64_t v;
      CHECK(ep_json_get(&j, t, "name") == -1 && ep_json_at(&j, t, 0) == -1);
      CHECK(ep_json_str(&j, t, s, sizeof s) == -1 && ep_json_int(&j, t, 0, 1, &v) == -1);
    }
    static ep_dims dims;   /* 9 KB: not on the stack */
    char err[256];
    if (j.t[0].type == EP_J_OBJ && ep_dims_read(&j, &dims, err, sizeof err) == 0) {
      CHECK(dims.n <= EP_DIMS_MAX);
      for (uint32_t s = 0; s < dims.n; s++) {
        CHECK(memchr(dims.s[s].name, 0, EP_DIMS_NAME) != NULL && ep_dims_find(&dims, dims.s[s].name) >= 0);
        (void)ep_dims_bind(&dims, s, "x", 0, dims.s[s].min, err, sizeof err);
        (void)ep_dims_bind(&dims, s, "y", 1, dims.s[s].min + 1, err, sizeof err);
        CHECK(ep_dims_extent(&dims, s) >= 0);
      }
      ep_dims_reset(&dims);
    }
  }
  free(toks);
  free(doc);
  return 0;
}
