/* Ed25519 verify + SHA-512. The field and group arithmetic follows the structure of TweetNaCl's
 * crypto_sign_open (public-domain algorithm by Bernstein, van Gastel, Janssen, Lange, Schwabe,
 * Smetsers): GF(2^255-19) elements as 16 signed 16-bit limbs in int64, extended twisted Edwards
 * coordinates. Written for clarity and UB-freedom (no left shifts of negative values). */
#include "ep_ed25519.h"

/* ---- SHA-512 ---- */
static const uint64_t K512[80] = {
  0x428a2f98d728ae22ull, 0x7137449123ef65cdull, 0xb5c0fbcfec4d3b2full, 0xe9b5dba58189dbbcull, 0x3956c25bf348b538ull,
  0x59f111f1b605d019ull, 0x923f82a4af194f9bull, 0xab1c5ed5da6d8118ull, 0xd807aa98a3030242ull, 0x12835b0145706fbeull,
  0x243185be4ee4b28cull, 0x550c7dc3d5ffb4e2ull, 0x72be5d74f27b896full, 0x80deb1fe3b1696b1ull, 0x9bdc06a725c71235ull,
  0xc19bf174cf692694ull, 0xe49b69c19ef14ad2ull, 0xefbe4786384f25e3ull, 0x0fc19dc68b8cd5b5ull, 0x240ca1cc77ac9c65ull,
  0x2de92c6f592b0275ull, 0x4a7484aa6ea6e483ull, 0x5cb0a9dcbd41fbd4ull, 0x76f988da831153b5ull, 0x983e5152ee66dfabull,
  0xa831c66d2db43210ull, 0xb00327c898fb213full, 0xbf597fc7beef0ee4ull, 0xc6e00bf33da88fc2ull, 0xd5a79147930aa725ull,
  0x06ca6351e003826full, 0x142929670a0e6e70ull, 0x27b70a8546d22ffcull, 0x2e1b21385c26c926ull, 0x4d2c6dfc5ac42aedull,
  0x53380d139d95b3dfull, 0x650a73548baf63deull, 0x766a0abb3c77b2a8ull, 0x81c2c92e47edaee6ull, 0x92722c851482353bull,
  0xa2bfe8a14cf10364ull, 0xa81a664bbc423001ull, 0xc24b8b70d0f89791ull, 0xc76c51a30654be30ull, 0xd192e819d6ef5218ull,
  0xd69906245565a910ull, 0xf40e35855771202aull, 0x106aa07032bbd1b8ull, 0x19a4c116b8d2d0c8ull, 0x1e376c085141ab53ull,
  0x2748774cdf8eeb99ull, 0x34b0bcb5e19b48a8ull, 0x391c0cb3c5c95a63ull, 0x4ed8aa4ae3418acbull, 0x5b9cca4f7763e373ull,
  0x682e6ff3d6b2b8a3ull, 0x748f82ee5defb2fcull, 0x78a5636f43172f60ull, 0x84c87814a1f0ab72ull, 0x8cc702081a6439ecull,
  0x90befffa23631e28ull, 0xa4506cebde82bde9ull, 0xbef9a3f7b2c67915ull, 0xc67178f2e372532bull, 0xca273eceea26619cull,
  0xd186b8c721c0c207ull, 0xeada7dd6cde0eb1eull, 0xf57d4f7fee6ed178ull, 0x06f067aa72176fbaull, 0x0a637dc5a2c898a6ull,
  0x113f9804bef90daeull, 0x1b710b35131c471bull, 0x28db77f523047d84ull, 0x32caab7b40c72493ull, 0x3c9ebe0a15c9bebcull,
  0x431d67c49c100d4cull, 0x4cc5d4becb3e42b6ull, 0x597f299cfc657e2aull, 0x5fcb6fab3ad6faecull, 0x6c44198c4a475817ull,
};

static uint64_t ror64(uint64_t x, unsigned c) { return (x >> c) | (x << (64 - c)); }

static void sha512_block(uint64_t h[8], const uint8_t *p) {
  uint64_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 16; i++) {
    uint64_t v = 0;
    for (int j = 0; j < 8; j++) v = (v << 8) | p[8 * i + j];
    w[i] = v;
  }
  for (int i = 16; i < 80; i++) {
    const uint64_t s0 = ror64(w[i - 15], 1) ^ ror64(w[i - 15], 8) ^ (w[i - 15] >> 7);
    const uint64_t s1 = ror64(w[i - 2], 19) ^ ror64(w[i - 2], 61) ^ (w[i - 2] >> 6);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  for (int i = 0; i < 80; i++) {
    const uint64_t t1 = k + (ror64(e, 14) ^ ror64(e, 18) ^ ror64(e, 41)) + ((e & f) ^ (~e & g)) + K512[i] + w[i];
    const uint64_t t2 = (ror64(a, 28) ^ ror64(a, 34) ^ ror64(a, 39)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void ep_sha512_init(ep_sha512 *s) {
  static const uint64_t iv[8] = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull,
                                 0xa54ff53a5f1d36f1ull, 0x510e527fade682d1ull, 0x9b05688c2b3e6c1full,
                                 0x1f83d9abfb41bd6bull, 0x5be0cd19137e2179ull};
  for (int i = 0; i < 8; i++) s->h[i] = iv[i];
  s->total = 0;
  s->used = 0;
}

void ep_sha512_update(ep_sha512 *s, const uint8_t *p, size_t n) {
  s->total += n;
  while (n) {
    if (s->used == 0 && n >= 128) { sha512_block(s->h, p); p += 128; n -= 128; continue; }
    const size_t take = n < 128 - s->used ? n : 128 - s->used;
    for (size_t i = 0; i < take; i++) s->buf[s->used + i] = p[i];
    s->used += (uint32_t)take; p += take; n -= take;
    if (s->used == 128) { sha512_block(s->h, s->buf); s->used = 0; }
  }
}

void ep_sha512_final(ep_sha512 *s, uint8_t out[64]) {
  const uint64_t bits = s->total * 8;   /* messages < 2^61 bytes: the high 64 length bits are 0 */
  uint8_t pad[144] = {0x80};
  const uint32_t padlen = (s->used < 112 ? 112 : 240) - s->used;
  for (int i = 0; i < 8; i++) pad[padlen + 8 + i] = (uint8_t)(bits >> (56 - 8 * i));
  ep_sha512_update(s, pad, padlen + 16);
  for (int i = 0; i < 64; i++) out[i] = (uint8_t)(s->h[i / 8] >> (56 - 8 * (i % 8)));
}

/* ---- GF(2^255 - 19) ---- */
typedef int64_t gf[16];
static const gf gf0 = {0}, gf1 = {1},
  D = {0x78a3, 0x1359, 0x4dca, 0x75eb, 0xd8ab, 0x4141, 0x0a4d, 0x0070, 0xe898, 0x7779, 0x4079, 0x8cc7, 0xfe73, 0x2b6f, 0x6cee, 0x5203},
  D2 = {0xf159, 0x26b2, 0x9b94, 0xebd6, 0xb156, 0x8283, 0x149a, 0x00e0, 0xd130, 0xeef3, 0x80f2, 0x198e, 0xfce7, 0x56df, 0xd9dc, 0x2406},
  BX = {0xd51a, 0x8f25, 0x2d60, 0xc956, 0xa7b2, 0x9525, 0xc760, 0x692c, 0xdc5c, 0xfdd6, 0xe231, 0xc0a4, 0x53fe, 0xcd6e, 0x36d3, 0x2169},
  BY = {0x6658, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666},
  SQRTM1 = {0xa0b0, 0x4a0e, 0x1b27, 0xc4ee, 0xe478, 0xad2f, 0x1806, 0x2f43, 0xd7a7, 0x3dfb, 0x0099, 0x2b4d, 0xdf0b, 0x4fc1, 0x2480, 0x2b83};

static void fset(gf r, const gf a) { for (int i = 0; i < 16; i++) r[i] = a[i]; }

static void carry(gf o) {
  for (int i = 0; i < 16; i++) {
    o[i] += 65536;
    const int64_t c = o[i] >> 16;   /* arithmetic shift: floor division */
    if (i < 15) o[i + 1] += c - 1; else o[0] += 38 * (c - 1);
    o[i] -= c * 65536;
  }
}

/* swap p and q when b == 1 */
static void fswap(gf p, gf q, int b) {
  const int64_t m = -(int64_t)b;
  for (int i = 0; i < 16; i++) { const int64_t t = m & (p[i] ^ q[i]); p[i] ^= t; q[i] ^= t; }
}

static void fpack(uint8_t o[32], const gf n) {
  gf m, t;
  fset(t, n);
  carry(t); carry(t); carry(t);
  for (int j = 0; j < 2; j++) {   /* subtract p while the result stays non-negative */
    m[0] = t[0] - 0xffed;
    for (int i = 1; i < 15; i++) { m[i] = t[i] - 0xffff - ((m[i - 1] >> 16) & 1); m[i - 1] &= 0xffff; }
    m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1);
    const int b = (int)((m[15] >> 16) & 1);
    m[14] &= 0xffff;
    fswap(t, m, 1 - b);
  }
  for (int i = 0; i < 16; i++) { o[2 * i] = (uint8_t)(t[i] & 0xff); o[2 * i + 1] = (uint8_t)((t[i] >> 8) & 0xff); }
}

static int bytes_neq(const uint8_t *a, const uint8_t *b, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) d |= a[i] ^ b[i];
  return d != 0;
}

static int fneq(const gf a, const gf b) {
  uint8_t c[32], d[32];
  fpack(c, a); fpack(d, b);
  return bytes_neq(c, d, 32);
}

static int fparity(const gf a) { uint8_t d[32]; fpack(d, a); return d[0] & 1; }

static void funpack(gf o, const uint8_t n[32]) {
  for (int i = 0; i < 16; i++) o[i] = n[2 * i] + 256 * (int64_t)n[2 * i + 1];
  o[15] &= 0x7fff;
}

static void fadd(gf o, const gf a, const gf b) { for (int i = 0; i < 16; i++) o[i] = a[i] + b[i]; }
static void fsub(gf o, const gf a, const gf b) { for (int i = 0; i < 16; i++) o[i] = a[i] - b[i]; }

static void fmul(gf o, const gf a, const gf b) {
  int64_t t[31] = {0};
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) t[i + j] += a[i] * b[j];
  for (int i = 0; i < 15; i++) t[i] += 38 * t[i + 16];   /* 2^256 = 38 mod p */
  for (int i = 0; i < 16; i++) o[i] = t[i];
  carry(o); carry(o);
}

static void fsq(gf o, const gf a) { fmul(o, a, a); }

/* i^((p-5)/8) = i^(2^252 - 3) */
static void fpow2523(gf o, const gf i) {
  gf c;
  fset(c, i);
  for (int a = 250; a >= 0; a--) { fsq(c, c); if (a != 1) fmul(c, c, i); }
  fset(o, c);
}

static void finv(gf o, const gf i) {   /* i^(p-2) */
  gf c;
  fset(c, i);
  for (int a = 253; a >= 0; a--) { fsq(c, c); if (a != 2 && a != 4) fmul(c, c, i); }
  fset(o, c);
}

/* ---- points (X, Y, Z, T), x = X/Z, y = Y/Z, xy = T/Z ---- */
static void padd(gf p[4], gf q[4]) {   /* p += q */
  gf a, b, c, d, t, e, f, g, h;
  fsub(a, p[1], p[0]); fsub(t, q[1], q[0]); fmul(a, a, t);
  fadd(b, p[0], p[1]); fadd(t, q[0], q[1]); fmul(b, b, t);
  fmul(c, p[3], q[3]); fmul(c, c, D2);
  fmul(d, p[2], q[2]); fadd(d, d, d);
  fsub(e, b, a); fsub(f, d, c); fadd(g, d, c); fadd(h, b, a);
  fmul(p[0], e, f); fmul(p[1], h, g); fmul(p[2], g, f); fmul(p[3], e, h);
}

static void pswap(gf p[4], gf q[4], int b) { for (int i = 0; i < 4; i++) fswap(p[i], q[i], b); }

static void ppack(uint8_t r[32], gf p[4]) {
  gf tx, ty, zi;
  finv(zi, p[2]);
  fmul(tx, p[0], zi); fmul(ty, p[1], zi);
  fpack(r, ty);
  r[31] ^= (uint8_t)(fparity(tx) << 7);
}

/* p = s * q (s: 32 bytes little-endian); q is clobbered */
static void pmul(gf p[4], gf q[4], const uint8_t s[32]) {
  fset(p[0], gf0); fset(p[1], gf1); fset(p[2], gf1); fset(p[3], gf0);
  for (int i = 255; i >= 0; i--) {
    const int b = (s[i / 8] >> (i & 7)) & 1;
    pswap(p, q, b); padd(q, p); padd(p, p); pswap(p, q, b);
  }
}

static void pbase(gf p[4], const uint8_t s[32]) {
  gf q[4];
  fset(q[0], BX); fset(q[1], BY); fset(q[2], gf1); fmul(q[3], BX, BY);
  pmul(p, q, s);
}

/* y < p = 2^255 - 19 (the sign bit masked off) */
static int canonical_y(const uint8_t s[32]) {
  if ((s[31] & 0x7f) != 0x7f) return 1;
  for (int i = 30; i > 0; i--) if (s[i] != 0xff) return 1;
  return s[0] < 0xed;
}

/* r = -P for the encoding s; -1 if s is not a canonical encoding of a curve point */
static int punpack_neg(gf r[4], const uint8_t s[32]) {
  gf t, chk, num, den, den2, den4, den6;
  if (!canonical_y(s)) return -1;
  fset(r[2], gf1);
  funpack(r[1], s);
  fsq(num, r[1]); fmul(den, num, D); fsub(num, num, r[2]); fadd(den, r[2], den);   /* num = y^2-1, den = dy^2+1 */
  fsq(den2, den); fsq(den4, den2); fmul(den6, den4, den2);
  fmul(t, den6, num); fmul(t, t, den);
  fpow2523(t, t);
  fmul(t, t, num); fmul(t, t, den); fmul(t, t, den); fmul(r[0], t, den);
  fsq(chk, r[0]); fmul(chk, chk, den);
  if (fneq(chk, num)) fmul(r[0], r[0], SQRTM1);
  fsq(chk, r[0]); fmul(chk, chk, den);
  if (fneq(chk, num)) return -1;                       /* no square root: not on the curve */
  if (!fneq(r[0], gf0) && (s[31] >> 7)) return -1;     /* x = 0 with the sign bit set: non-canonical */
  if (fparity(r[0]) == (s[31] >> 7)) fsub(r[0], gf0, r[0]);
  fmul(r[3], r[0], r[1]);
  return 0;
}

/* 8P is the neutral element (x = 0, y = 1) */
static int small_order(gf p[4]) {
  gf q[4];
  static const uint8_t neutral[32] = {1};
  uint8_t e[32];
  for (int i = 0; i < 4; i++) fset(q[i], p[i]);
  for (int k = 0; k < 3; k++) padd(q, q);
  ppack(e, q);
  return !bytes_neq(e, neutral, 32);
}

/* ---- scalars mod L = 2^252 + 27742317777372353535851937790883648493 ---- */
static const int64_t L[32] = {0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
                              0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};

static void mod_l(uint8_t r[32], int64_t x[64]) {
  for (int i = 63; i >= 32; i--) {
    int64_t c = 0;
    int j;
    for (j = i - 32; j < i - 12; j++) {
      x[j] += c - 16 * x[i] * L[j - (i - 32)];
      c = (x[j] + 128) >> 8;
      x[j] -= c * 256;
    }
    x[j] += c;
    x[i] = 0;
  }
  int64_t c = 0;
  for (int j = 0; j < 32; j++) {
    x[j] += c - (x[31] >> 4) * L[j];
    c = x[j] >> 8;
    x[j] &= 255;
  }
  for (int j = 0; j < 32; j++) x[j] -= c * L[j];
  for (int i = 0; i < 32; i++) {
    x[i + 1] += x[i] >> 8;
    r[i] = (uint8_t)(x[i] & 255);
  }
}

/* s < L (little-endian) */
static int scalar_canonical(const uint8_t s[32]) {
  for (int i = 31; i >= 0; i--) {
    if (s[i] < L[i]) return 1;
    if (s[i] > L[i]) return 0;
  }
  return 0;   /* equal to L */
}

int ep_ed25519_verify(const uint8_t sig[64], const uint8_t *msg, size_t len, const uint8_t pk[32]) {
  gf p[4], q[4], r[4];
  uint8_t h[64], t[32], red[32];
  int64_t x[64];
  if (!scalar_canonical(sig + 32)) return -1;
  if (punpack_neg(q, pk) || small_order(q)) return -1;
  if (punpack_neg(r, sig) || small_order(r)) return -1;
  ep_sha512 s;
  ep_sha512_init(&s);
  ep_sha512_update(&s, sig, 32);
  ep_sha512_update(&s, pk, 32);
  ep_sha512_update(&s, msg, len);
  ep_sha512_final(&s, h);
  for (int i = 0; i < 64; i++) x[i] = h[i];
  mod_l(red, x);
  pmul(p, q, red);            /* p = h * (-A) */
  pbase(q, sig + 32);         /* q = S * B */
  padd(p, q);                 /* S*B - h*A must equal R */
  ppack(t, p);
  return bytes_neq(sig, t, 32) ? -1 : 0;
}
