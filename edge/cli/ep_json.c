/* Bounded JSON tokenizer: see ep_json.h. Recursion depth is capped by EP_JSON_MAX_DEPTH. */
#include "ep_json.h"

typedef struct { ep_json *j; uint32_t pos; } P;

static void ws(P *p) {
  while (p->pos < p->j->len) {
    char c = p->j->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int newtok(P *p, uint8_t type, uint32_t start) {
  if (p->j->n >= p->j->cap) return -2;
  ep_jtok *t = &p->j->t[p->j->n];
  t->type = type; t->start = start; t->end = start; t->size = 0; t->next = 0;
  return (int)p->j->n++;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int parse_string(P *p) {
  /* at the opening quote */
  uint32_t start = ++p->pos;
  while (p->pos < p->j->len) {
    unsigned char c = (unsigned char)p->j->s[p->pos];
    if (c == '"') {
      int t = newtok(p, EP_J_STR, start);
      if (t < 0) return t;
      p->j->t[t].end = p->pos++;
      p->j->t[t].next = p->j->n;
      return 0;
    }
    if (c < 0x20) return -1;
    if (c == '\\') {
      if (++p->pos >= p->j->len) return -1;
      char e = p->j->s[p->pos];
      if (e == 'u') {
        if (p->j->len - p->pos < 5) return -1;
        for (int i = 1; i <= 4; i++) if (hexval(p->j->s[p->pos + i]) < 0) return -1;
        p->pos += 4;
      } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
        return -1;
      }
    }
    p->pos++;
  }
  return -1;
}

static int parse_number(P *p) {
  const char *s = p->j->s;
  uint32_t start = p->pos, n = p->j->len;
  if (p->pos < n && s[p->pos] == '-') p->pos++;
  if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9') return -1;
  if (s[p->pos] == '0') p->pos++;
  else while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9') p->pos++;
  if (p->pos < n && s[p->pos] == '.') {
    p->pos++;
    if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9') return -1;
    while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9') p->pos++;
  }
  if (p->pos < n && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
    p->pos++;
    if (p->pos < n && (s[p->pos] == '+' || s[p->pos] == '-')) p->pos++;
    if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9') return -1;
    while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9') p->pos++;
  }
  int t = newtok(p, EP_J_NUM, start);
  if (t < 0) return t;
  p->j->t[t].end = p->pos;
  p->j->t[t].next = p->j->n;
  return 0;
}

static int lit(P *p, const char *w) {
  uint32_t start = p->pos;
  for (; *w; w++, p->pos++)
    if (p->pos >= p->j->len || p->j->s[p->pos] != *w) return -1;
  int t = newtok(p, EP_J_LIT, start);
  if (t < 0) return t;
  p->j->t[t].end = p->pos;
  p->j->t[t].next = p->j->n;
  return 0;
}

static int value(P *p, int depth) {
  ws(p);
  if (p->pos >= p->j->len) return -1;
  char c = p->j->s[p->pos];
  if (c == '"') return parse_string(p);
  if (c == 't') return lit(p, "true");
  if (c == 'f') return lit(p, "false");
  if (c == 'n') return lit(p, "null");
  if (c != '{' && c != '[') return parse_number(p);
  if (depth >= EP_JSON_MAX_DEPTH) return -3;
  const int is_obj = c == '{';
  int t = newtok(p, is_obj ? EP_J_OBJ : EP_J_ARR, p->pos);
  if (t < 0) return t;
  p->pos++;
  ws(p);
  uint32_t count = 0;
  if (p->pos < p->j->len && p->j->s[p->pos] == (is_obj ? '}' : ']')) {
    p->pos++;
  } else {
    for (;;) {
      int r;
      if (is_obj) {
        ws(p);
        if (p->pos >= p->j->len || p->j->s[p->pos] != '"') return -1;
        if ((r = parse_string(p)) != 0) return r;
        ws(p);
        if (p->pos >= p->j->len || p->j->s[p->pos] != ':') return -1;
        p->pos++;
      }
      if ((r = value(p, depth + 1)) != 0) return r;
      count++;
      ws(p);
      if (p->pos >= p->j->len) return -1;
      char d = p->j->s[p->pos++];
      if (d == ',') continue;
      if (d == (is_obj ? '}' : ']')) break;
      return -1;
    }
  }
  p->j->t[t].size = count;
  p->j->t[t].end = p->pos;
  p->j->t[t].next = p->j->n;
  return 0;
}

int ep_json_parse(ep_json *j, const char *s, size_t len, ep_jtok *toks, uint32_t cap) {
  if (len > 0x7fffffffu) return -1;
  j->s = s; j->len = (uint32_t)len; j->t = toks; j->n = 0; j->cap = cap;
  P p = {j, 0};
  int r = value(&p, 0);
  if (r) return r;
  ws(&p);
  return p.pos == j->len ? 0 : -1;
}

static int valid(const ep_json *j, int tok) { return tok >= 0 && (uint32_t)tok < j->n; }

int ep_json_get(const ep_json *j, int obj, const char *key) {
  if (!valid(j, obj) || j->t[obj].type != EP_J_OBJ) return -1;
  char buf[256];
  uint32_t k = (uint32_t)obj + 1;
  for (uint32_t i = 0; i < j->t[obj].size && k < j->n; i++) {
    uint32_t v = k + 1;  /* a key is a string token: its value follows */
    if (v >= j->n) return -1;
    int n = ep_json_str(j, (int)k, buf, sizeof buf);
    if (n >= 0) {
      uint32_t m = 0;
      while (key[m] && (int)m < n && key[m] == buf[m]) m++;
      if (!key[m] && (int)m == n) return (int)v;
    }
    k = j->t[v].next;
  }
  return -1;
}

int ep_json_at(const ep_json *j, int arr, uint32_t i) {
  if (!valid(j, arr) || j->t[arr].type != EP_J_ARR || i >= j->t[arr].size) return -1;
  uint32_t k = (uint32_t)arr + 1;
  for (uint32_t e = 0; e < i && k < j->n; e++) k = j->t[k].next;
  return k < j->n ? (int)k : -1;
}

static size_t put_utf8(char *out, size_t at, size_t cap, uint32_t cp) {
  uint8_t b[4]; size_t n;
  if (cp < 0x80) { b[0] = (uint8_t)cp; n = 1; }
  else if (cp < 0x800) { b[0] = (uint8_t)(0xc0 | cp >> 6); b[1] = (uint8_t)(0x80 | (cp & 63)); n = 2; }
  else if (cp < 0x10000) { b[0] = (uint8_t)(0xe0 | cp >> 12); b[1] = (uint8_t)(0x80 | (cp >> 6 & 63)); b[2] = (uint8_t)(0x80 | (cp & 63)); n = 3; }
  else { b[0] = (uint8_t)(0xf0 | cp >> 18); b[1] = (uint8_t)(0x80 | (cp >> 12 & 63)); b[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); b[3] = (uint8_t)(0x80 | (cp & 63)); n = 4; }
  if (at + n >= cap) return 0;
  for (size_t i = 0; i < n; i++) out[at + i] = (char)b[i];
  return n;
}

static int hex4(const char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) v = v * 16 + hexval(s[i]);
  return v;
}

int ep_json_str(const ep_json *j, int tok, char *out, size_t cap) {
  if (!valid(j, tok) || j->t[tok].type != EP_J_STR || cap == 0) return -1;
  const char *s = j->s;
  size_t o = 0;
  for (uint32_t i = j->t[tok].start; i < j->t[tok].end; i++) {
    char c = s[i];
    if (c != '\\') {
      if (o + 1 >= cap) return -1;
      out[o++] = c;
      continue;
    }
    char e = s[++i];  /* the tokenizer guarantees a valid escape inside [start, end) */
    uint32_t cp;
    switch (e) {
      case 'b': cp = 8; break;
      case 'f': cp = 12; break;
      case 'n': cp = 10; break;
      case 'r': cp = 13; break;
      case 't': cp = 9; break;
      case 'u':
        cp = (uint32_t)hex4(s + i + 1);
        i += 4;
        if (cp >= 0xd800 && cp < 0xdc00) {  /* high surrogate: a low one must follow */
          if (j->t[tok].end - i < 7 || s[i + 1] != '\\' || s[i + 2] != 'u') return -1;
          uint32_t lo = (uint32_t)hex4(s + i + 3);
          if (lo < 0xdc00 || lo >= 0xe000) return -1;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          i += 6;
        } else if (cp >= 0xdc00 && cp < 0xe000) {
          return -1;
        }
        if (cp == 0) return -1;  /* an embedded NUL would truncate the name silently */
        break;
      default: cp = (uint32_t)(unsigned char)e; break;
    }
    size_t n = put_utf8(out, o, cap, cp);
    if (!n) return -1;
    o += n;
  }
  out[o] = 0;
  return (int)o;
}

int ep_json_int(const ep_json *j, int tok, int64_t lo, int64_t hi, int64_t *out) {
  if (!valid(j, tok) || j->t[tok].type != EP_J_NUM) return -1;
  uint32_t i = j->t[tok].start, e = j->t[tok].end;
  int neg = 0;
  if (i < e && j->s[i] == '-') { neg = 1; i++; }
  if (i >= e) return -1;
  int64_t v = 0;
  for (; i < e; i++) {
    char c = j->s[i];
    if (c < '0' || c > '9') return -1;  /* fraction or exponent */
    if (v > (INT64_MAX - (c - '0')) / 10) return -1;
    v = v * 10 + (c - '0');
  }
  if (neg) v = -v;
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}
