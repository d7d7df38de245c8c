/* Ed25519 signature verification (RFC 8032, cofactorless) and SHA-512 (FIPS 180-4), small and
 * dependency-free: edgepack-run checks manifest.sig against manifest.json with them. Verify only (no
 * secrets handled, so nothing needs to be constant-time). Stricter than RFC 8032 requires: refuses a
 * non-canonical S (S >= L), a non-canonical encoding of A or R, and an A or R of small order (which
 * would let one signature verify for many messages). */
#ifndef EP_ED25519_H
#define EP_ED25519_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t h[8];
  uint64_t total;   /* bytes hashed so far */
  uint8_t buf[128];
  uint32_t used;    /* bytes in buf */
} ep_sha512;
void ep_sha512_init(ep_sha512 *s);
void ep_sha512_update(ep_sha512 *s, const uint8_t *p, size_t n);
void ep_sha512_final(ep_sha512 *s, uint8_t out[64]);

/* 0 when sig is a valid signature of msg[0..len) under public key pk, -1 otherwise. */
int ep_ed25519_verify(const uint8_t sig[64], const uint8_t *msg, size_t len, const uint8_t pk[32]);
#endif
