/* libFuzzer harness for edgepack-run's hashes and signature check (cli/ep_sha256.c, cli/ep_ed25519.c).
 * Input: one mode byte, then
 *   mode 0..1  a message and a chunking: SHA-256 and SHA-512 fed in the chunks the input's bytes choose must equal
 *              the one-shot digest (the block buffering is where such code goes wrong);
 *   mode 2..   signature (64) | public key (32) | message: ep_ed25519_verify on it; when it accepts, the same
 *              signature must be refused for the message with one bit flipped, for a flipped signature bit and
 *              for a flipped key bit. Seeds (edge/fuzz/make_corpus.py) hold valid triples, so mutation starts
 *              from inside the accepted set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ep_ed25519.h"
#include "ep_sha256.h"

#define MAX_INPUT (1u << 14)
#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static void hashes_chunked(const uint8_t *msg, size_t n, const uint8_t *cuts, size_t ncuts) {
  ep_sha256 a, b;
  ep_sha512 c, d;
  uint8_t ha[32], hb[32], hc[64], hd[64];
  ep_sha256_init(&a); ep_sha256_update(&a, msg, n); ep_sha256_final(&a, ha);
  ep_sha512_init(&c); ep_sha512_update(&c, msg, n); ep_sha512_final(&c, hc);
  ep_sha256_init(&b);
  ep_sha512_init(&d);
  size_t off = 0;
  for (size_t i = 0; off < n; i++) {
    size_t len = ncuts ? 1u + (size_t)cuts[i % ncuts] * (1u + (i & 1u)) : n;   /* 1..511: within and across blocks */
    if (len > n - off) len = n - off;
    ep_sha256_update(&b, msg + off, len);
    ep_sha512_update(&d, msg + off, len);
    off += len;
  }
  ep_sha256_final(&b, hb);
  ep_sha512_final(&d, hd);
  CHECK(memcmp(ha, hb, 32) == 0 && memcmp(hc, hd, 64) == 0);
  char hex[65];
  ep_sha256_hex(msg, n, hex);
  static const char X[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) CHECK(hex[2 * i] == X[ha[i] >> 4] && hex[2 * i + 1] == X[ha[i] & 15]);
  CHECK(hex[64] == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > MAX_INPUT) return 0;
  const uint8_t mode = data[0];
  uint8_t *buf = malloc(size);   /* exactly sized: reads past the end are ASan reports */
  if (!buf) return 0;
  memcpy(buf, data + 1, size - 1);
  const size_t n = size - 1;
  if (mode < 2) {
    const size_t ncuts = n < 16 ? n : 16;   /* the first bytes choose the chunk sizes; all bytes are hashed */
    hashes_chunked(buf, n, buf, ncuts);
  } else if (n >= 96) {
    uint8_t sig[64], pk[32];
    memcpy(sig, buf, 64);
    memcpy(pk, buf + 64, 32);
    uint8_t *msg = buf + 96;
    const size_t mlen = n - 96;
    if (ep_ed25519_verify(sig, msg, mlen, pk) == 0) {
      if (mlen) {
        msg[mode % mlen] ^= (uint8_t)(1u << (mode & 7));
        CHECK(ep_ed25519_verify(sig, msg, mlen, pk) != 0);
        msg[mode % mlen] ^= (uint8_t)(1u << (mode & 7));
      }
      sig[mode % 32] ^= 1;   /* in R */
      CHECK(ep_ed25519_verify(sig, msg, mlen, pk) != 0);
      sig[mode % 32] ^= 1;
      pk[mode % 31] ^= 2;
      CHECK(ep_ed25519_verify(sig, msg, mlen, pk) != 0);
    }
  }
  free(buf);
  return 0;
}
