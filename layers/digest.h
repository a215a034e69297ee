/* Content digests.  Only sha256 is produced; a digest string is always the
 * canonical "sha256:" + 64 lowercase hex digits, and every digest that comes
 * from outside (a manifest, an index, a command line) is validated with
 * ib_digest_check() before it is used as a path. */
#ifndef IB_DIGEST_H
#define IB_DIGEST_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "../util/error.h"

#define IB_DIGEST_LEN 71 /* "sha256:" + 64 */

typedef struct
{
  char s[IB_DIGEST_LEN + 1];
} ib_digest;

typedef struct ib_sha256 ib_sha256;

ib_sha256 *ib_sha256_new (void);
void ib_sha256_update (ib_sha256 *h, const void *buf, size_t len);
/* Writes the digest; the context may be reused after ib_sha256_reset. */
void ib_sha256_final (ib_sha256 *h, ib_digest *out);
void ib_sha256_free (ib_sha256 *h);

void ib_sha256_buf (const void *buf, size_t len, ib_digest *out);
/* Hash a whole file, streaming; SIZE receives its length. */
int ib_sha256_file (const char *path, ib_digest *out, uint64_t *size, ib_error_t *err);

/* 0 when S is a canonical sha256 digest, else an IB_EINTEGRITY error. */
int ib_digest_check (const char *s, ib_error_t *err);
/* HEX is 64 lowercase hex digits (a sha256 digest without its algorithm). */
bool ib_digest_hex_valid (const char *hex);
/* The hex part of a checked digest. */
static inline const char *ib_digest_hex (const char *digest) { return digest + 7; }

#endif
