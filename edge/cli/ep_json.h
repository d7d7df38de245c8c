/* A tiny, bounded JSON reader for manifest.json (untrusted: a bundle may come from anywhere).
 * ep_json_parse() tokenizes the whole document into a caller-supplied token array, in document
 * order (a container precedes its children); each token records where its subtree ends, so
 * lookups skip values in O(1). Limits: max_tokens tokens, nesting depth EP_JSON_MAX_DEPTH; input
 * must be complete, strict RFC 8259 JSON (no comments, no trailing commas, UTF-8 not re-validated).
 * Nothing allocates; every read is bounded by the document length. */
#ifndef EP_JSON_H
#define EP_JSON_H
#include <stddef.h>
#include <stdint.h>

#define EP_JSON_MAX_DEPTH 32
enum { EP_J_OBJ = 1, EP_J_ARR = 2, EP_J_STR = 3, EP_J_NUM = 4, EP_J_LIT = 5 /* true false null */ };

typedef struct {
  uint8_t type;
  uint32_t start, end;   /* byte range: strings without their quotes */
  uint32_t size;         /* objects: key count; arrays: element count */
  uint32_t next;         /* index of the first token after this one's subtree */
} ep_jtok;

typedef struct {
  const char *s;
  uint32_t len;
  ep_jtok *t;
  uint32_t n, cap;
} ep_json;

/* 0 on success; -1 malformed, -2 too many tokens, -3 too deep. */
int ep_json_parse(ep_json *j, const char *s, size_t len, ep_jtok *toks, uint32_t cap);
/* Value token of `key` in object token `obj`, or -1. Keys are compared after unescaping. */
int ep_json_get(const ep_json *j, int obj, const char *key);
/* i-th element of array token `arr`, or -1. */
int ep_json_at(const ep_json *j, int arr, uint32_t i);
/* Decode a string token (escapes, \u with surrogate pairs -> UTF-8) into out (NUL-terminated).
 * Returns its byte length, or -1 when not a string, malformed, or longer than cap - 1. */
int ep_json_str(const ep_json *j, int tok, char *out, size_t cap);
/* Integer value of a number token without fraction/exponent, within [lo, hi]; 0 ok, -1 otherwise. */
int ep_json_int(const ep_json *j, int tok, int64_t lo, int64_t hi, int64_t *out);
#endif
