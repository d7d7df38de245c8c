/* edgepack-run: run an edgepack bundle on this machine (Raspberry Pi 5 / any aarch64 Linux).
 *
 *   edgepack-run BUNDLE --input NAME=x.npy [--input ...] [--output y.npy] [--output NAME=z.npy]
 *   edgepack-run BUNDLE --bench [--input ...] [--warmup SECONDS] [--seconds SECONDS]
 *   edgepack-run BUNDLE --info
 *   any of these with --threads N: the plan runs on N threads (1..16; the core's pool, ep_edge.h), same outputs
 *   any of these with --public-key HEX|FILE: the bundle must be signed by that Ed25519 key
 *
 * Before the runtime reads the plan, the SHA-256 of BUNDLE/model.plan is compared with the one in
 * BUNDLE/manifest.json. With --public-key, before anything is parsed, BUNDLE/manifest.sig must be a
 * valid Ed25519 signature of manifest.json's exact bytes; then EVERY file the manifest lists must match
 * its size and SHA-256, and the bundle directory may hold no file the manifest does not list. Inputs/outputs (names, dtypes, shapes) come from the manifest, read with a
 * bounded JSON tokenizer (ep_json.c), and are cross-checked with the plan's own tensor table.
 * `--output FILE.npy` saves the first output; `--output NAME=FILE.npy` any output by name (an
 * argument containing '=' is always NAME=FILE). Without --output, outputs are summarized on stdout.
 * Plan version 2 (shapes resolved at run time): each input's dims come from its .npy file, checked against
 * the manifest (fixed dims equal; symbolic dims, given as names, within manifest["dims"] bounds and one extent
 * per symbol: ep_dims.c), then given to the core (ep_set_input_shape, ep_resolve); the arena is sized for that
 * shape, and outputs are written at their resolved dims. --bench without inputs runs at the example shape.
 * Exit codes: 0 ok, 2 usage or input error, 3 bundle integrity or plan rejected, 4 runtime error. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>

#include "edgepack.h"
#include "ep_edge.h"
#include "ep_dims.h"
#include "ep_ed25519.h"
#include "ep_json.h"
#include "ep_npy.h"
#include "ep_sha256.h"

#define MAX_IO 64
#define MAX_NAME 256
#define MAX_MANIFEST (16u << 20)
#define MAX_ARGS_IO 64
#define MAX_FILES 1024
#define MAX_DEPTH 8

#define DIM_FIXED (-1)   /* io_spec.sym: a fixed dim */
#define DIM_VARIES (-2)  /* an output dim that varies with the inputs but follows no single symbol */

typedef struct {
  char name[MAX_NAME];
  uint32_t dtype, rank, tensor;
  int32_t dims[EP_MAX_RANK];   /* version 2: this run's resolved dims (-1 until resolved) */
  int16_t sym[EP_MAX_RANK];    /* index in the manifest's dims, or DIM_FIXED / DIM_VARIES */
  uint32_t nbytes;
} io_spec;

static const char *g_prog = "edgepack-run";

static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", g_prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

/* --help: the text on stdout, exit 0; a usage error: on stderr, exit 2. */
static void usage(int code) {
  fprintf(code ? stderr : stdout,
          "usage: %s BUNDLE [--input NAME=FILE.npy]... [--output FILE.npy | --output NAME=FILE.npy]...\n"
          "       %s BUNDLE --bench [--input NAME=FILE.npy]... [--warmup SECONDS] [--seconds SECONDS]\n"
          "       %s BUNDLE --info\n"
          "--threads N: run the plan on N threads (1..16, default 1); the outputs are the same for every N.\n"
          "Runs BUNDLE/model.plan after checking its SHA-256 against BUNDLE/manifest.json.\n"
          "--public-key HEX|FILE: refuse the bundle unless manifest.sig is that Ed25519 key's signature of\n"
          "  manifest.json and every file matches its SHA-256 (no unlisted files). FILE: 64 hex chars or 32 raw bytes.\n"
          "Inputs: .npy v1.0, C order, little-endian, any dtype a plan holds (float32, int64, bool, (u)int8/16/32, uint64, float16, float64; bfloat16 as uint16 bits, float8/float4 as uint8 codes, (u)int4/2 as (u)int8 values), shape and dtype as the manifest says.\n"
          "  Symbolic dims (--info lists them): any extent within their bounds, the same for one symbol in every input.\n"
          "--bench: random inputs unless given (symbolic dims at their example extent); warm-up by time, then latency percentiles.\n",
          g_prog, g_prog, g_prog);
  exit(code);
}

/* Whole file into memory (64-byte aligned, `extra` zero bytes appended), size limit `max`. */
static uint8_t *read_file(const char *path, size_t max, size_t *len, int code) {
  FILE *f = fopen(path, "rb");
  if (!f) die(code, "cannot open %s: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) die(code, "cannot seek %s", path);
  long n = ftell(f);
  if (n < 0 || (unsigned long)n > max) die(code, "%s: size %ld out of range (max %zu bytes)", path, n, max);
  rewind(f);
  void *buf = NULL;
  if (posix_memalign(&buf, 64, (size_t)n + 64) != 0) die(4, "out of memory reading %s", path);
  if (n && fread(buf, 1, (size_t)n, f) != (size_t)n) die(code, "cannot read %s", path);
  fclose(f);
  memset((uint8_t *)buf + n, 0, 64);
  *len = (size_t)n;
  return buf;
}

static void join(char *out, size_t cap, const char *dir, const char *file) {
  if ((size_t)snprintf(out, cap, "%s/%s", dir, file) >= cap) die(2, "path too long: %s/%s", dir, file);
}

static void fmt_shape(char *out, size_t cap, uint32_t rank, const int64_t *d64, const int32_t *d32) {
  size_t k = (size_t)snprintf(out, cap, "[");
  for (uint32_t i = 0; i < rank && k < cap; i++)
    k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", d64 ? (long long)d64[i] : (long long)d32[i]);
  if (k < cap) snprintf(out + k, cap - k, "]");
}

/* A spec's shape as the manifest gives it: [batch, 16]. */
static void fmt_spec(char *out, size_t cap, const io_spec *s, const ep_dims *dims) {
  size_t k = (size_t)snprintf(out, cap, "[");
  for (uint32_t i = 0; i < s->rank && k < cap; i++) {
    if (s->sym[i] >= 0) k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", dims->s[s->sym[i]].name);
    else if (s->sym[i] == DIM_VARIES) k += (size_t)snprintf(out + k, cap - k, "%s?", i ? ", " : "");
    else k += (size_t)snprintf(out + k, cap - k, "%s%d", i ? ", " : "", (int)s->dims[i]);
  }
  if (k < cap) snprintf(out + k, cap - k, "]");
}

/* manifest["inputs"] or ["outputs"] into specs, cross-checked with the opened plan. */
static uint32_t read_io(const ep_json *j, const char *key, io_spec *specs, const ep_ctx *ctx, int is_in, const ep_dims *dims) {
  const int v2 = ep_plan_version(ctx) == 2;
  int arr = ep_json_get(j, 0, key);
  if (arr < 0 || j->t[arr].type != EP_J_ARR) die(3, "manifest.json: '%s' missing or not a list", key);
  uint32_t n = j->t[arr].size;
  if (n > MAX_IO) die(3, "manifest.json: more than %d %s", MAX_IO, key);
  uint32_t plan_n = is_in ? ep_num_inputs(ctx) : ep_num_outputs(ctx);
  if (n != plan_n) die(3, "manifest.json lists %u %s, the plan has %u", n, key, plan_n);
  for (uint32_t i = 0; i < n; i++) {
    io_spec *s = &specs[i];
    int o = ep_json_at(j, arr, i);
    char dt[32];
    int64_t v;
    if (ep_json_str(j, ep_json_get(j, o, "name"), s->name, sizeof s->name) < 0)
      die(3, "manifest.json: %s[%u].name missing or too long", key, i);
    if (ep_json_str(j, ep_json_get(j, o, "dtype"), dt, sizeof dt) < 0 || !(s->dtype = ep_dtype_from_str(dt)))
      die(3, "manifest.json: %s[%u].dtype missing or unknown", key, i);
    if (ep_json_int(j, ep_json_get(j, o, "tensor"), 0, 0x7fffffff, &v)) die(3, "manifest.json: %s[%u].tensor invalid", key, i);
    s->tensor = (uint32_t)v;
    int sh = ep_json_get(j, o, "shape");
    if (sh < 0 || j->t[sh].type != EP_J_ARR || j->t[sh].size > EP_MAX_RANK) die(3, "manifest.json: %s[%u].shape invalid", key, i);
    s->rank = j->t[sh].size;
    for (uint32_t d = 0; d < s->rank; d++) {
      const int dt_tok = ep_json_at(j, sh, d);
      char sym[EP_DIMS_NAME];
      s->sym[d] = DIM_FIXED;
      if (v2 && ep_json_str(j, dt_tok, sym, sizeof sym) > 0) {   /* a symbolic dim: its name */
        const int k = ep_dims_find(dims, sym);
        if (k < 0 && is_in) die(3, "manifest.json: %s '%s' dimension %u is '%s', which 'dims' does not list", key, s->name, d, sym);
        s->sym[d] = (int16_t)(k < 0 ? DIM_VARIES : k);
        s->dims[d] = -1;
      } else if (v2 && !is_in && dt_tok >= 0 && j->t[dt_tok].type == EP_J_LIT) {   /* null: varies */
        s->sym[d] = DIM_VARIES;
        s->dims[d] = -1;
      } else {
        if (ep_json_int(j, dt_tok, 0, 0x7fffffff, &v)) die(3, "manifest.json: %s[%u].shape invalid", key, i);
        s->dims[d] = (int32_t)v;
      }
    }
    int32_t id = is_in ? ep_input_id(ctx, i) : ep_output_id(ctx, i);
    ep_tensor_info info;
    if (id < 0 || (uint32_t)id != s->tensor || ep_tensor_describe(ctx, (uint32_t)id, &info) != EP_OK)
      die(3, "manifest.json: %s '%s' is not the plan's %s #%u", key, s->name, key, i);
    int same = info.dtype == s->dtype && info.rank == s->rank;
    for (uint32_t d = 0; same && d < s->rank; d++)   /* version 2: a symbolic dim is negative in the plan */
      same = s->sym[d] == DIM_FIXED ? info.dims[d] == s->dims[d] : info.dims[d] < 0;
    if (!same) die(3, "manifest.json: %s '%s' disagrees with the plan's tensor (dtype/shape)", key, s->name);
    s->nbytes = info.nbytes;   /* version 2 with symbolic dims: set once resolved */
    for (uint32_t k = 0; k < i; k++)
      if (!strcmp(specs[k].name, s->name)) die(3, "manifest.json: duplicate %s name '%s'", key, s->name);
  }
  return n;
}

/* --public-key: 64 hex characters, or a file holding them (or the 32 raw bytes). */
static void parse_public_key(const char *arg, uint8_t pk[32]) {
  char hex[65];
  size_t n = strlen(arg);
  if (n == 64) {
    memcpy(hex, arg, 65);
  } else {
    size_t len;
    uint8_t *f = read_file(arg, 4096, &len, 2);
    if (len == 32) { memcpy(pk, f, 32); free(f); return; }
    size_t b = 0, e = len;
    while (b < e && (f[b] == ' ' || f[b] == '\n' || f[b] == '\r' || f[b] == '\t')) b++;
    while (e > b && (f[e - 1] == ' ' || f[e - 1] == '\n' || f[e - 1] == '\r' || f[e - 1] == '\t')) e--;
    if (e - b != 64) die(2, "--public-key %s: expected 64 hex characters (an Ed25519 public key) or 32 raw bytes", arg);
    memcpy(hex, f + b, 64);
    hex[64] = 0;
    free(f);
  }
  for (int i = 0; i < 32; i++) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char c = hex[2 * i + k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) die(2, "--public-key: expected 64 hex characters (an Ed25519 public key)");
      v = 16 * v + d;
    }
    pk[i] = (uint8_t)v;
  }
}

/* manifest.sig must be pk's Ed25519 signature of the manifest's exact bytes. */
static void verify_signature(const char *bundle, const uint8_t *mtext, size_t mlen, const uint8_t pk[32]) {
  char path[4096];
  join(path, sizeof path, bundle, "manifest.sig");
  FILE *f = fopen(path, "rb");
  if (!f) die(3, "%s: bundle is not signed (manifest.sig missing) and a public key is required", bundle);
  uint8_t sig[65];
  size_t n = fread(sig, 1, sizeof sig, f);
  fclose(f);
  if (n != 64) die(3, "%s: manifest.sig is not a 64-byte Ed25519 signature", bundle);
  if (ep_ed25519_verify(sig, mtext, mlen, pk) != 0)
    die(3, "%s: signature does not verify with the given public key (manifest.json tampered, or signed by another key)", bundle);
}

/* A manifest file name: relative, no '..' or empty component, no backslash. */
static int safe_name(const char *s) {
  if (!*s || *s == '/' || strchr(s, '\\')) return 0;
  for (const char *c = s; *c;) {
    const char *e = strchr(c, '/');
    size_t l = e ? (size_t)(e - c) : strlen(c);
    if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return 0;
    c += l + (e != NULL);
    if (e && !*c) return 0;
  }
  return 1;
}

/* Strict mode: every file listed in manifest["files"] matches its size and SHA-256; names into `names`. */
static uint32_t verify_all_files(const char *bundle, const ep_json *j, char (*names)[MAX_NAME]) {
  int files = ep_json_get(j, 0, "files");
  if (files < 0 || j->t[files].type != EP_J_OBJ) die(3, "manifest.json: 'files' missing or not an object");
  uint32_t n = j->t[files].size;
  if (n > MAX_FILES) die(3, "manifest.json: more than %d files", MAX_FILES);
  uint32_t k = (uint32_t)files + 1;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t v = k + 1;   /* key token, then its value's subtree */
    char want[80], got[65], path[4096];
    int64_t bytes;
    if (v >= j->n || ep_json_str(j, (int)k, names[i], MAX_NAME) < 0) die(3, "manifest.json: file name %u invalid or too long", i);
    if (!safe_name(names[i])) die(3, "manifest lists a file outside the bundle: %s", names[i]);
    for (uint32_t m = 0; m < i; m++)
      if (!strcmp(names[m], names[i])) die(3, "manifest.json lists %s twice", names[i]);
    if (ep_json_str(j, ep_json_get(j, (int)v, "sha256"), want, sizeof want) != 64 ||
        ep_json_int(j, ep_json_get(j, (int)v, "bytes"), 0, (int64_t)1 << 40, &bytes))
      die(3, "manifest.json: no size/SHA-256 for %s", names[i]);
    join(path, sizeof path, bundle, names[i]);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) die(3, "bundle file missing: %s", names[i]);
    size_t len;
    uint8_t *data = read_file(path, (size_t)1 << 40, &len, 3);
    ep_sha256_hex(data, len, got);
    free(data);
    if ((int64_t)len != bytes || strcmp(got, want) != 0)
      die(3, "bundle file %s does not match its SHA-256 in manifest.json (tampered or corrupt)", names[i]);
    k = j->t[v].next;
  }
  return n;
}

/* Strict mode: nothing in the bundle directory (recursively) that the signed manifest does not cover. */
static void refuse_unlisted(const char *bundle, const char *rel, char (*names)[MAX_NAME], uint32_t n, int depth) {
  char dir[4096];
  if (*rel) join(dir, sizeof dir, bundle, rel); else join(dir, sizeof dir, bundle, ".");
  DIR *d = opendir(dir);
  if (!d) die(3, "cannot list %s: %s", dir, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char r[4096], full[4096];
    if ((size_t)snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= sizeof r) die(3, "path too long: %s", e->d_name);
    join(full, sizeof full, bundle, r);
    struct stat st;
    if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (depth >= MAX_DEPTH) die(3, "%s: directories nested too deep", bundle);
      refuse_unlisted(bundle, r, names, n, depth + 1);
      continue;
    }
    int listed = !strcmp(r, "manifest.json") || !strcmp(r, "manifest.sig");
    for (uint32_t i = 0; !listed && i < n; i++) listed = !strcmp(r, names[i]);
    if (!listed) die(3, "%s: files not covered by the signed manifest: %s", bundle, r);
  }
  closedir(d);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p) {
  double r = p / 100.0 * (double)(n - 1);
  size_t i = (size_t)r;
  double f = r - (double)i;
  return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[n - 1];
}

/* Bind an arena of at least ep_arena_bytes() bytes, 64-byte aligned and zeroed. When the need grows (version 2:
 * a larger shape) a new block replaces the old one (realloc keeps no alignment, and nothing in it needs keeping);
 * otherwise the same block is bound again, which the core takes at once (its prologue re-runs only when the
 * arena moves). */
/* The arena from the kernel's zero pages: zeroed without being written, so only the pages a run touches become
 * resident (--info on a 2 GiB arena touches none). Page-aligned: more than the core's 64 bytes. */
static void arena_free(uint8_t *arena, uint32_t cap) {
  if (arena) munmap(arena, cap ? (size_t)cap : 64u);
}

static void bind_arena(ep_ctx *ctx, uint8_t **arena, uint32_t *cap) {
  const uint32_t need = ep_arena_bytes(ctx);
  if (!*arena || need > *cap) {
    arena_free(*arena, *cap);
    void *p = mmap(NULL, need ? (size_t)need : 64u, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die(4, "out of memory (arena %u bytes)", need);
    *arena = p;
    *cap = need;
  }
  const ep_status st = ep_bind(ctx, *arena, *cap);
  if (st != EP_OK) die(4, "bind failed: %s (status %d)", ep_status_str(st), (int)st);
}

/* A tensor's dims and size as the core has them now (version 2: resolved for this run's shapes). */
static void refresh(const ep_ctx *ctx, io_spec *s) {
  ep_tensor_info info;
  if (ep_tensor_describe(ctx, s->tensor, &info) != EP_OK || info.rank != s->rank) die(4, "tensor '%s': no description", s->name);
  for (uint32_t d = 0; d < s->rank; d++) s->dims[d] = info.dims[d];
  s->nbytes = info.nbytes;
}

/* An input's .npy against the manifest: dtype, rank, fixed dims equal, symbolic dims within their bounds and
 * one extent per symbol (ep_dims). Sets the spec's dims for this run. */
static void check_input(io_spec *s, const char *file, const ep_npy *npy, ep_dims *dims) {
  char got_s[256], want_s[256], err[512];
  fmt_shape(got_s, sizeof got_s, npy->rank, npy->dims, NULL);
  fmt_spec(want_s, sizeof want_s, s, dims);
  if (npy->dtype != ep_dtype_carrier(s->dtype))   /* a low-precision input comes in its carrier's descr (ep_npy.h) */
    die(2, "input '%s' (%s): dtype %s, expected %s%s%s", s->name, file, ep_dtype_str(npy->dtype), ep_dtype_str(s->dtype),
        s->dtype == ep_dtype_carrier(s->dtype) ? "" : " as its .npy carrier ", s->dtype == ep_dtype_carrier(s->dtype) ? "" :
        ep_dtype_str(ep_dtype_carrier(s->dtype)));
  if (npy->rank != s->rank) die(2, "input '%s' (%s): shape %s, expected %s", s->name, file, got_s, want_s);
  for (uint32_t d = 0; d < s->rank; d++) {
    if (s->sym[d] < 0) {
      if (npy->dims[d] != s->dims[d])
        die(2, "input '%s' (%s): shape %s, expected %s (dimension %u is fixed to %d)", s->name, file, got_s, want_s, d, (int)s->dims[d]);
      continue;
    }
    if (npy->dims[d] > 0x7fffffff) die(2, "input '%s' (%s): dimension %u is %lld, more than the runtime takes (2^31 - 1)", s->name, file, d, (long long)npy->dims[d]);
    if (ep_dims_bind(dims, (uint32_t)s->sym[d], s->name, d, npy->dims[d], err, sizeof err))
      die(2, "%s (%s: shape %s)", err, file, got_s);
    s->dims[d] = (int32_t)npy->dims[d];   /* bounded by ep_dims_bind: at most 2^31 - 1 */
  }
}

/* Version 2: the inputs' dims to the core, the value inputs' values (they decide shapes: data[i], NULL when not
 * given), then resolve (every tensor's dims, the arena plan). The core checks the plan's own bounds too: a refusal
 * names the input and dimension; values that give no valid shape name the value inputs. */
static void set_shapes(ep_ctx *ctx, const io_spec *ins, uint32_t n_in, const uint8_t *const *data, const uint64_t *nbytes) {
  for (uint32_t i = 0; i < n_in; i++) {
    const ep_status st = ep_set_input_shape(ctx, i, ins[i].rank, ins[i].dims);
    if (st == EP_OK) continue;
    char sh[256];
    fmt_shape(sh, sizeof sh, ins[i].rank, NULL, ins[i].dims);
    for (uint32_t k = 0; k < ins[i].rank; k++) {
      int32_t lo = 0, hi = 0;
      if (ep_input_bound(ctx, i, k, &lo, &hi) != EP_OK) continue;
      if (ins[i].dims[k] < lo || (hi > 0 && ins[i].dims[k] > hi)) {
        char b[32] = "";
        if (hi > 0) snprintf(b, sizeof b, "%d", (int)hi);
        die(2, "input '%s': dimension %u is %d, outside the plan's bounds [%d..%s] (shape %s)", ins[i].name, k,
            (int)ins[i].dims[k], (int)lo, hi > 0 ? b : "", sh);
      }
    }
    die(2, "input '%s': shape %s refused by the plan: %s (status %d)", ins[i].name, sh, ep_status_str(st), (int)st);
  }
  const char *named = NULL;   /* the first value input, for the error */
  uint32_t n_values = 0;
  for (uint32_t i = 0; i < n_in; i++) {
    uint8_t *v = ep_input_values(ctx, i);
    if (!v) continue;
    ep_tensor_info info;
    if (!data[i] || ep_tensor_describe(ctx, ins[i].tensor, &info) != EP_OK || nbytes[i] != info.nbytes)
      die(2, "input '%s' decides shapes by its values: give it (--input %s=FILE.npy) with %u bytes", ins[i].name, ins[i].name,
          ep_tensor_describe(ctx, ins[i].tensor, &info) == EP_OK ? info.nbytes : 0u);
    memcpy(v, data[i], info.nbytes);
    if (!n_values++) named = ins[i].name;
  }
  const ep_status st = ep_resolve(ctx);
  if (st != EP_OK && named)
    die(2, "the values of input '%s'%s decide shapes and give none this plan can run: %s (status %d)", named,
        n_values > 1 ? " (and the other value inputs)" : "", ep_status_str(st), (int)st);
  if (st == EP_E_LIMIT) die(2, "these input shapes need more memory than the plan allows: %s", ep_status_str(st));
  if (st != EP_OK) die(4, "resolving the input shapes failed: %s (status %d)", ep_status_str(st), (int)st);
}

static void print_info(const char *bundle, const ep_ctx *ctx, const io_spec *ins, uint32_t n_in, const io_spec *outs,
                       uint32_t n_out, const ep_dims *dims) {
  char sh[256];
  if (ep_plan_version(ctx) == 2)
  {
    char most[64] = "unbounded";   /* a bounded plan keeps every allowed shape within max_arena_bytes */
    if (ctx->max_arena_bytes) snprintf(most, sizeof most, "at most %u bytes", ctx->max_arena_bytes);
    printf("bundle %s: %u kernel nodes, plan version 2 (shapes resolved at run time: arena sized per shape, %s; "
           "state %u bytes), vector layer %s\n", bundle, ctx->n_nodes, most, ep_state_bytes(ctx), ep_vec_name());
  }
  else
    printf("bundle %s: %u kernel nodes, arena %u bytes, vector layer %s\n", bundle, ctx->n_nodes, ep_arena_bytes(ctx), ep_vec_name());
  for (uint32_t i = 0; i < n_in; i++) { fmt_spec(sh, sizeof sh, &ins[i], dims); printf("input  %s: %s%s\n", ins[i].name, ep_dtype_str(ins[i].dtype), sh); }
  for (uint32_t i = 0; i < n_out; i++) { fmt_spec(sh, sizeof sh, &outs[i], dims); printf("output %s: %s%s\n", outs[i].name, ep_dtype_str(outs[i].dtype), sh); }
  for (uint32_t i = 0; i < dims->n; i++) {
    const ep_sym *s = &dims->s[i];
    if (s->max) printf("dim    %s: %lld..%lld (example %lld)\n", s->name, (long long)s->min, (long long)s->max, (long long)s->example);
    else printf("dim    %s: %lld.. (no upper bound; example %lld)\n", s->name, (long long)s->min, (long long)s->example);
  }
}

static void run_or_die(ep_ctx *ctx) {
  ep_status s = ep_run(ctx);
  if (s != EP_OK) die(4, "run failed: %s (status %d)", ep_status_str(s), (int)s);
}

static void save_npy(const char *path, const io_spec *s, const uint8_t *data) {
  uint8_t hdr[512];
  size_t hl = ep_npy_header(s->dtype, s->rank, s->dims, hdr, sizeof hdr);
  if (!hl) die(4, "output '%s': dtype %s cannot be written as .npy", s->name, ep_dtype_str(s->dtype));
  FILE *f = fopen(path, "wb");
  if (!f) die(2, "cannot write %s: %s", path, strerror(errno));
  if (fwrite(hdr, 1, hl, f) != hl || fwrite(data, 1, s->nbytes, f) != s->nbytes || fclose(f) != 0)
    die(2, "cannot write %s", path);
}

static void summarize(const io_spec *s, const uint8_t *data) {
  char sh[256];
  fmt_shape(sh, sizeof sh, s->rank, NULL, s->dims);
  printf("%s: %s%s", s->name, ep_dtype_str(s->dtype), sh);
  const uint32_t esz = ep_dtype_esize(s->dtype);
  const int narrow_int = s->dtype == EP_I4 || s->dtype == EP_U4 || s->dtype == EP_I2 || s->dtype == EP_U2;
  const uint32_t dt = narrow_int ? ep_dtype_carrier(s->dtype) : s->dtype;   /* small floats: '?' */
  uint32_t n = s->nbytes / esz, show = n < 8 ? n : 8;
  printf(" = [");
  for (uint32_t i = 0; i < show; i++) {
    if (dt == EP_F32) { float v; memcpy(&v, data + 4 * i, 4); printf("%s%.6g", i ? ", " : "", (double)v); }
    else if (dt == EP_I64) { int64_t v; memcpy(&v, data + 8 * i, 8); printf("%s%lld", i ? ", " : "", (long long)v); }
    else if (dt == EP_BOOL) printf("%s%d", i ? ", " : "", data[i] != 0);
    else if (dt == EP_I8) printf("%s%d", i ? ", " : "", (int)(int8_t)data[i]);
    else if (dt == EP_U8) printf("%s%d", i ? ", " : "", (int)data[i]);
    else if (dt == EP_I32) { int32_t v; memcpy(&v, data + 4 * i, 4); printf("%s%d", i ? ", " : "", (int)v); }
    else if (dt == EP_F64) { double v; memcpy(&v, data + 8 * i, 8); printf("%s%.6g", i ? ", " : "", v); }
    else if (dt == EP_I16) { int16_t v; memcpy(&v, data + 2 * i, 2); printf("%s%d", i ? ", " : "", (int)v); }
    else if (dt == EP_U16) { uint16_t v; memcpy(&v, data + 2 * i, 2); printf("%s%u", i ? ", " : "", (unsigned)v); }
    else if (dt == EP_U32) { uint32_t v; memcpy(&v, data + 4 * i, 4); printf("%s%u", i ? ", " : "", (unsigned)v); }
    else if (dt == EP_U64) { uint64_t v; memcpy(&v, data + 8 * i, 8); printf("%s%llu", i ? ", " : "", (unsigned long long)v); }
    else printf("%s?", i ? ", " : "");
  }
  printf("%s]\n", n > show ? ", ..." : "");
}

/* Deterministic pseudo-random fill for --bench without inputs: floats in [-1, 1), ints 0. */
static void fill_random(const io_spec *s, uint8_t *p) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  if (!s->nbytes) return;
  if (s->dtype != EP_F32) { memset(p, 0, s->nbytes); return; }
  for (uint32_t i = 0; i < s->nbytes / 4; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    float v = (float)((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    memcpy(p + 4 * i, &v, 4);
  }
}

static double parse_seconds(const char *s, const char *opt) {
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= 0 && v <= 3600)) die(2, "%s expects seconds in [0, 3600], got '%s'", opt, s);
  return v;
}

int main(int argc, char **argv) {
  const char *bundle = NULL;
  const char *in_args[MAX_ARGS_IO], *out_args[MAX_ARGS_IO];
  int n_in_args = 0, n_out_args = 0, bench = 0, info_only = 0, have_key = 0;
  uint32_t threads = 1;
  uint8_t pk[32];
  double warmup = 3.0, seconds = 10.0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--input") || !strcmp(a, "--output")) {
      if (i + 1 >= argc) usage(2);
      int is_in = a[2] == 'i';
      if ((is_in ? n_in_args : n_out_args) >= MAX_ARGS_IO) die(2, "too many %s arguments", a);
      if (is_in) in_args[n_in_args++] = argv[++i]; else out_args[n_out_args++] = argv[++i];
    } else if (!strcmp(a, "--public-key")) {
      if (i + 1 >= argc) usage(2);
      parse_public_key(argv[++i], pk);
      have_key = 1;
    } else if (!strcmp(a, "--bench")) {
      bench = 1;
    } else if (!strcmp(a, "--info")) {
      info_only = 1;
    } else if (!strcmp(a, "--warmup") || !strcmp(a, "--seconds")) {
      if (i + 1 >= argc) usage(2);
      double v = parse_seconds(argv[++i], a);
      if (a[2] == 'w') warmup = v; else seconds = v;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(0);
    } else if (!strcmp(a, "--threads")) {
      if (i + 1 >= argc) usage(2);
      char *end;
      const long v = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 1 || v > (long)EP_EDGE_MAX_THREADS)
        die(2, "--threads expects a whole number in [1, %u], got '%s'", EP_EDGE_MAX_THREADS, argv[i]);
      threads = (uint32_t)v;
    } else if (a[0] == '-' || bundle) {
      fprintf(stderr, "%s: unexpected argument '%s'\n", g_prog, a);
      usage(2);
    } else {
      bundle = a;
    }
  }
  if (!bundle) usage(2);
  /* Workers start now (pthreads, sleeping between jobs); every ep_run below uses them. */
  if (threads > 1 && ep_edge_set_threads(threads) != threads) die(4, "could not start %u threads", threads);

  /* 1. Manifest, then the plan checked against the manifest's SHA-256. */
  char path[4096];
  size_t mlen, plen;
  join(path, sizeof path, bundle, "manifest.json");
  char *mtext = (char *)read_file(path, MAX_MANIFEST, &mlen, 3);
  if (have_key) verify_signature(bundle, (const uint8_t *)mtext, mlen, pk);   /* before parsing a byte */
  uint32_t cap = (uint32_t)(mlen / 2 + 16);  /* a token needs at least ~2 bytes of text */
  ep_jtok *toks = malloc(sizeof(ep_jtok) * cap);
  if (!toks) die(4, "out of memory");
  ep_json j;
  if (ep_json_parse(&j, mtext, mlen, toks, cap) != 0 || j.t[0].type != EP_J_OBJ)
    die(3, "%s: not valid JSON (or nested deeper than %d)", path, EP_JSON_MAX_DEPTH);
  static char names[MAX_FILES][MAX_NAME];
  if (have_key) refuse_unlisted(bundle, "", names, verify_all_files(bundle, &j, names), 0);
  char want_hash[80], fmt[64];
  int files = ep_json_get(&j, 0, "files");
  int planent = ep_json_get(&j, files, "model.plan");
  if (ep_json_str(&j, ep_json_get(&j, 0, "format"), fmt, sizeof fmt) < 0 || strcmp(fmt, "edgepack-bundle"))
    die(3, "%s: not an edgepack bundle manifest", path);
  if (ep_json_str(&j, ep_json_get(&j, planent, "sha256"), want_hash, sizeof want_hash) != 64)
    die(3, "%s: no SHA-256 for model.plan", path);
  /* The plan is target-independent: pi5 bundles, and web bundles (same plan) run here; android ones belong in an app. */
  char target[32];
  if (ep_json_str(&j, ep_json_get(&j, 0, "target"), target, sizeof target) < 0)
    die(3, "%s: manifest names no target", path);
  if (strcmp(target, "pi5") && strcmp(target, "web"))
    die(3, "%s: bundle was packaged for target '%s': edgepack-run runs pi5 (and web) bundles; load android bundles "
        "with org.edgepack.Session in the app", path, target);
  join(path, sizeof path, bundle, "model.plan");
  uint8_t *plan = read_file(path, 0xffffffffu, &plen, 3);
  char got_hash[65];
  ep_sha256_hex(plan, plen, got_hash);
  if (strcmp(got_hash, want_hash) != 0)
    die(3, "model.plan does not match its SHA-256 in manifest.json (tampered or corrupt): refusing to run it");

  /* 2. Open (validates everything). Version 1: bind the arena now. Version 2: hand the core its state now;
   *    the arena is sized once the input shapes are known. */
  ep_ctx ctx;
  ep_status st = ep_open(&ctx, plan, (uint32_t)plen);
  if (st != EP_OK) die(3, "the runtime rejected model.plan: %s (status %d)", ep_status_str(st), (int)st);
  const int v2 = ep_plan_version(&ctx) == 2;
  static ep_dims dims;
  char err[512];
  if (ep_dims_read(&j, &dims, err, sizeof err)) die(3, "%s", err);
  static io_spec ins[MAX_IO], outs[MAX_IO];
  uint32_t n_in = read_io(&j, "inputs", ins, &ctx, 1, &dims);
  uint32_t n_out = read_io(&j, "outputs", outs, &ctx, 0, &dims);
  uint8_t *arena = NULL, *state = NULL;
  uint32_t arena_cap = 0;
  if (v2) {
    const uint32_t sb = ep_state_bytes(&ctx);
    void *p = NULL;
    if (posix_memalign(&p, 64, sb ? sb : 64) != 0) die(4, "out of memory (plan state %u bytes)", sb);
    state = memset(p, 0, sb ? sb : 64);
    st = ep_set_state(&ctx, state, sb);
    if (st != EP_OK) die(4, "setting the plan state failed: %s", ep_status_str(st));
  } else {
    bind_arena(&ctx, &arena, &arena_cap);
  }
  if (info_only) {
    print_info(bundle, &ctx, ins, n_in, outs, n_out, &dims);
    arena_free(arena, arena_cap); free(state); free(plan); free(toks); free(mtext);
    return 0;
  }

  /* 3. Inputs: every name known, none twice, dtype and shape as the manifest says (version 2: symbolic dims
   *    within their bounds, one extent per symbol). */
  int given[MAX_IO] = {0};
  uint8_t *npy_files[MAX_IO] = {0};
  ep_npy npys[MAX_IO];
  for (int a = 0; a < n_in_args; a++) {
    const char *eq = strchr(in_args[a], '=');
    if (!eq || eq == in_args[a] || !eq[1]) die(2, "--input expects NAME=FILE.npy, got '%s'", in_args[a]);
    size_t nl = (size_t)(eq - in_args[a]);
    uint32_t k = 0;
    for (; k < n_in; k++) if (strlen(ins[k].name) == nl && !strncmp(ins[k].name, in_args[a], nl)) break;
    if (k == n_in) {
      fprintf(stderr, "%s: error: unknown input '%.*s'; this model takes:", g_prog, (int)nl, in_args[a]);
      for (uint32_t i = 0; i < n_in; i++) fprintf(stderr, "%s '%s'", i ? "," : "", ins[i].name);
      fputc('\n', stderr);
      exit(2);
    }
    if (given[k]) die(2, "input '%s' given twice", ins[k].name);
    given[k] = 1;
    size_t flen;
    npy_files[k] = read_file(eq + 1, (size_t)1 << 40, &flen, 2);
    ep_npy *npy = &npys[k];
    if (ep_npy_parse(npy_files[k], flen, npy, err, sizeof err)) die(2, "input '%s' (%s): %s", ins[k].name, eq + 1, err);
    check_input(&ins[k], eq + 1, npy, &dims);
  }
  for (uint32_t k = 0; k < n_in; k++) {
    if (given[k]) continue;
    if (!bench) die(2, "missing input '%s' (give --input %s=FILE.npy)", ins[k].name, ins[k].name);
    for (uint32_t d = 0; d < ins[k].rank; d++)   /* --bench: a symbol another input gave, else its example */
      if (ins[k].sym[d] >= 0) ins[k].dims[d] = (int32_t)ep_dims_extent(&dims, (uint32_t)ins[k].sym[d]);
  }
  if (v2) {
    const uint8_t *vals[MAX_IO] = {0};
    uint64_t val_bytes[MAX_IO] = {0};
    for (uint32_t k = 0; k < n_in; k++)
      if (given[k]) { vals[k] = npy_files[k] + npys[k].data_off; val_bytes[k] = npys[k].nbytes; }
    set_shapes(&ctx, ins, n_in, vals, val_bytes);
    bind_arena(&ctx, &arena, &arena_cap);
    for (uint32_t k = 0; k < n_in; k++) refresh(&ctx, &ins[k]);
    for (uint32_t k = 0; k < n_out; k++) refresh(&ctx, &outs[k]);
  }
  for (uint32_t k = 0; k < n_in; k++) {
    uint8_t *t = ep_tensor_data(&ctx, ins[k].tensor);
    if (v2 && ep_input_values(&ctx, k)) { free(npy_files[k]); npy_files[k] = NULL; continue; }   /* written already */
    if (!t && ins[k].nbytes) die(4, "input '%s' has no place in the arena", ins[k].name);
    if (!given[k]) { fill_random(&ins[k], t); continue; }
    if (npys[k].nbytes != ins[k].nbytes)
      die(2, "input '%s': %llu bytes, expected %u", ins[k].name, (unsigned long long)npys[k].nbytes, ins[k].nbytes);
    if (ins[k].nbytes) memcpy(t, npy_files[k] + npys[k].data_off, ins[k].nbytes);
    free(npy_files[k]);
    npy_files[k] = NULL;
  }

  /* 4. Outputs to save: resolved before running so a typo fails fast. */
  const char *save[MAX_IO] = {0};
  for (int a = 0; a < n_out_args; a++) {
    const char *eq = strchr(out_args[a], '=');
    uint32_t k = 0;
    const char *file = out_args[a];
    if (eq) {
      size_t nl = (size_t)(eq - out_args[a]);
      for (; k < n_out; k++) if (strlen(outs[k].name) == nl && !strncmp(outs[k].name, out_args[a], nl)) break;
      if (k == n_out) {
        fprintf(stderr, "%s: error: unknown output '%.*s'; this model gives:", g_prog, (int)nl, out_args[a]);
        for (uint32_t i = 0; i < n_out; i++) fprintf(stderr, "%s '%s'", i ? "," : "", outs[i].name);
        fputc('\n', stderr);
        exit(2);
      }
      file = eq + 1;
    }
    if (!*file) die(2, "--output expects FILE.npy or NAME=FILE.npy");
    if (k >= n_out) die(2, "this model has no outputs");
    if (save[k]) die(2, "output '%s' saved twice", outs[k].name);
    save[k] = file;
  }

  if (bench) {
    /* The arena may reuse an input's bytes once it is consumed: restore the inputs before every run. */
    uint8_t *saved[MAX_IO] = {0};
    for (uint32_t k = 0; k < n_in; k++) {
      if (!(saved[k] = malloc(ins[k].nbytes ? ins[k].nbytes : 1))) die(4, "out of memory");
      memcpy(saved[k], ep_tensor_data(&ctx, ins[k].tensor), ins[k].nbytes);
    }
#define RESTORE_INPUTS() for (uint32_t k = 0; k < n_in; k++) memcpy(ep_tensor_data(&ctx, ins[k].tensor), saved[k], ins[k].nbytes)
    double end = now_s() + warmup;
    size_t warm_runs = 0;
    do { RESTORE_INPUTS(); run_or_die(&ctx); warm_runs++; } while (now_s() < end);
    size_t cap_t = 1024, n = 0;
    double *t = malloc(cap_t * sizeof *t);
    if (!t) die(4, "out of memory");
    double t_end = now_s() + seconds;
    while (n < 10 || now_s() < t_end) {
      double t0 = now_s();
      RESTORE_INPUTS();
      run_or_die(&ctx);
      if (n == cap_t) {
        double *nt = realloc(t, 2 * cap_t * sizeof *t);
        if (!nt) die(4, "out of memory");
        t = nt; cap_t *= 2;
      }
      t[n++] = (now_s() - t0) * 1e3;
    }
    qsort(t, n, sizeof *t, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += t[i];
    printf("%s [%s, %u thread%s]: p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  min %.3f ms  mean %.3f ms  (%zu runs after %zu warm-up runs / %.1f s)\n",
           bundle, ep_vec_name(), threads, threads == 1 ? "" : "s", pct(t, n, 50), pct(t, n, 90), pct(t, n, 99), t[0], sum / (double)n, n, warm_runs, warmup);
    if (threads > 1) {   /* did the workers take part? (0 = this thread) */
      printf("tasks per thread:");
      for (uint32_t i = 0; i < threads; i++) printf(" %u", ep_thread_tasks(i));
      printf("\n");
    }
    free(t);
    for (uint32_t k = 0; k < n_in; k++) free(saved[k]);
#undef RESTORE_INPUTS
  } else {
    run_or_die(&ctx);
  }

  for (uint32_t k = 0; k < n_out; k++) {
    if (v2) refresh(&ctx, &outs[k]);   /* NonZero, NMS, Unique: the run set the extent */
    const uint8_t *data = ep_tensor_data(&ctx, outs[k].tensor);
    if (save[k]) save_npy(save[k], &outs[k], data);
    else if (!bench && n_out_args == 0) summarize(&outs[k], data);
  }
  arena_free(arena, arena_cap);
  free(state);
  free(plan);
  free(toks);
  free(mtext);
  return 0;
}
