/* SHA-256 (FIPS 180-4), for session fingerprints and run-record chains. */
#ifndef BH_SHA256_H
#define BH_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BH_SHA256_LEN 32
#define BH_SHA256_HEX (2 * BH_SHA256_LEN + 1)

struct bh_sha256 {
    uint32_t h[8];
    uint64_t total;
    uint8_t buf[64];
    size_t used;
};

void bh_sha256_init(struct bh_sha256 *s);
void bh_sha256_update(struct bh_sha256 *s, const void *data, size_t len);
void bh_sha256_final(struct bh_sha256 *s, uint8_t out[BH_SHA256_LEN]);
/* One shot, as lowercase hex (NUL-terminated). */
void bh_sha256_hex(const void *data, size_t len, char out[BH_SHA256_HEX]);
void bh_hex(const uint8_t *in, size_t len, char *out);
/* True when s is a digest as bh_sha256_hex writes it: 64 lowercase hex
 * digits (a fingerprint or record digest read from outside is checked). */
bool bh_sha256_hex_valid(const char *s);

#endif
