/* Line-oriented driver for tests/test_ed25519.py (built with ASan + UBSan):
 *   "H <hex msg>"               -> SHA-512 of msg, hex
 *   "V <pk hex> <sig hex> <hex msg>" -> "1" valid / "0" refused
 * An empty message is written as "-". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_ed25519.h"

static size_t unhex(const char *s, uint8_t *out, size_t cap) {
  if (!strcmp(s, "-")) return 0;
  size_t n = strlen(s) / 2;
  if (n > cap) { fprintf(stderr, "too long\n"); exit(2); }
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) { fprintf(stderr, "bad hex\n"); exit(2); }
    out[i] = (uint8_t)v;
  }
  return n;
}

int main(void) {
  static char line[1 << 20];
  static uint8_t msg[1 << 19];
  while (fgets(line, sizeof line, stdin)) {
    char *save = NULL, *cmd = strtok_r(line, " \n", &save);
    if (!cmd) continue;
    if (!strcmp(cmd, "H")) {
      size_t n = unhex(strtok_r(NULL, " \n", &save), msg, sizeof msg);
      ep_sha512 s;
      uint8_t h[64];
      ep_sha512_init(&s);
      ep_sha512_update(&s, msg, n);
      ep_sha512_final(&s, h);
      for (int i = 0; i < 64; i++) printf("%02x", h[i]);
      printf("\n");
    } else if (!strcmp(cmd, "V")) {
      uint8_t pk[32], sig[64];
      if (unhex(strtok_r(NULL, " \n", &save), pk, 32) != 32 || unhex(strtok_r(NULL, " \n", &save), sig, 64) != 64) {
        fprintf(stderr, "bad key/sig length\n");
        return 2;
      }
      size_t n = unhex(strtok_r(NULL, " \n", &save), msg, sizeof msg);
      printf("%d\n", ep_ed25519_verify(sig, msg, n, pk) == 0);
    }
    fflush(stdout);
  }
  return 0;
}
