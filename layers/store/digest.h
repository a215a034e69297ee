/* Content digests.  Only sha256 is produced; a digest string is always the
 * canonical "sha256:" + 64 lowercase hex digits, and every digest that comes
 * from outside (a manifest, an index, a command line) is validated with
 * ib_digest_check() before it is used as a path. */
#ifndef IB_DIGEST_H
#define IB_DIGEST_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

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
/* The same for up to LENGTH bytes of FD from where it is (UINT64_MAX: to
 * its end), WHAT naming it in errors; PROGRESS (may be NULL) is told of
 * the bytes as they are read. */
int ib_sha256_fd (int fd, uint64_t length, const char *what, ib_digest *out, uint64_t *size,
                  void (*progress) (void *, unsigned long long), void *data, ib_error_t *err);

/* A hash worker: ib_sha256_update run on a second thread, so that a reader
 * that inflates a layer on its own thread (layers/read/layer_reader.c) does not
 * also spend half its time hashing: on sha_ni machines SHA-256 and igzip's
 * inflate go at about the same speed, and a layer has two streams to hash
 * (the blob and the tar).  Jobs run one at a time in the order they were
 * submitted, so each context sees its bytes in order.
 *
 * Contract: a submitted buffer belongs to the worker until
 * ib_hash_worker_wait returns for its ticket (or later); the caller must not
 * write it before then.  The contexts are the caller's, touched only by the
 * worker between submit and wait; ib_hash_worker_drain returns once every
 * job is hashed, after which they may be finalized.  With THREADED false
 * (one core, a small blob: a thread costs more than it saves) or when no
 * thread can be started, submit hashes at once and wait returns at once.
 * No global state: any number of workers may run side by side. */
struct ib_hash_worker;

struct ib_hash_worker *ib_hash_worker_new (bool threaded);
/* Hash LEN bytes of BUF into H; returns the job's ticket.  Blocks while the
 * worker's queue is full. */
uint64_t ib_hash_worker_submit (struct ib_hash_worker *w, ib_sha256 *h, const void *buf, size_t len);
/* Return once job TICKET (and every one before it) is hashed.  0 is never
 * a ticket: wait (w, 0) returns at once. */
void ib_hash_worker_wait (struct ib_hash_worker *w, uint64_t ticket);
void ib_hash_worker_drain (struct ib_hash_worker *w);
/* Stop and join the thread; jobs not started yet are dropped (a reader
 * freed mid-stream does not want their digests).  NULL is a no-op. */
void ib_hash_worker_free (struct ib_hash_worker *w);
/* Whether W hashes on a thread of its own (tests). */
bool ib_hash_worker_threaded (const struct ib_hash_worker *w);

/* The OCI ChainID of a stack of layers, one diff_id at a time: CHAIN
 * starts empty (""), takes DIFF_ID as is for the first layer, then
 * sha256(CHAIN + " " + DIFF_ID) for each next one (image-spec, config.md). */
void ib_chain_id_next (ib_digest *chain, const char *diff_id);

/* 0 when S is a canonical sha256 digest, else an IB_EINTEGRITY error. */
int ib_digest_check (const char *s, ib_error_t *err);
/* HEX is 64 lowercase hex digits (a sha256 digest without its algorithm). */
bool ib_digest_hex_valid (const char *hex);
/* The hex part of a checked digest. */
static inline const char *ib_digest_hex (const char *digest) { return digest + 7; }

#endif
