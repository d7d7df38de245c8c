/* SHA-256 (FIPS 180-4), small and dependency-free: edgepack-run checks model.plan against the
 * manifest's hash before the runtime reads a byte of it. */
#ifndef EP_SHA256_H
#define EP_SHA256_H
#include <stddef.h>
#include <stdint.h>
typedef struct {
  uint32_t h[8];
  uint64_t total;      /* bytes hashed so far */
  uint8_t buf[64];
  uint32_t used;       /* bytes in buf */
} ep_sha256;
void ep_sha256_init(ep_sha256 *s);
void ep_sha256_update(ep_sha256 *s, const uint8_t *p, size_t n);
void ep_sha256_final(ep_sha256 *s, uint8_t out[32]);
/* Lower-case hex of the digest of p[0..n) into hex (65 bytes with the NUL). */
void ep_sha256_hex(const uint8_t *p, size_t n, char hex[65]);
#endif
