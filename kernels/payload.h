/* One fatbin entry's payload (or a bare cubin), streamed: the bytes as the
 * file stores them (plain, a zstd frame, or a raw LZ4 block) are read a
 * chunk at a time and handed on uncompressed, so that NCCL's 130 MB linked
 * cubin costs a few MiB of memory, not its size (the design brief's 64 MiB
 * peak).  Readers that need bytes from several places of a payload stream
 * it more than once (ib_payload_collect). */
#ifndef IB_PAYLOAD_H
#define IB_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

enum ib_payload_codec
{
  IB_PAYLOAD_PLAIN,
  IB_PAYLOAD_ZSTD,
  IB_PAYLOAD_LZ4, /* one raw LZ4 block, as fatbinary writes it */
};

/* Buffers and a zstd context that the streams of one inspection share
 * (made on first use, freed by ib_payload_scratch_free).  Each of a
 * library's thousand entries made and faulted in its own 1 MiB buffers
 * and zstd window: 850,000 page faults for cuBLASLt whenever glibc maps
 * them apart, and a heap of their high-water mark when it does not. */
struct ib_payload_scratch;
struct ib_payload_scratch *ib_payload_scratch_new (void);
void ib_payload_scratch_free (struct ib_payload_scratch *s);

struct ib_payload
{
  int fd;
  const char *what;  /* the file, for messages */
  uint64_t off;      /* where the stored bytes start in the file */
  uint64_t stored;   /* how many bytes the file stores */
  uint64_t size;     /* uncompressed size */
  enum ib_payload_codec codec;
  struct ib_payload_scratch *scratch; /* NULL: the stream makes its own */
};

/* FN gets consecutive pieces of the uncompressed payload, OFF being where
 * each starts; it returns 0 to go on, 1 when it has seen enough (the rest
 * is not decompressed), -1 on error (its own message in ERR). */
typedef int (*ib_payload_fn) (void *data, const unsigned char *p, size_t n, uint64_t off, ib_error_t *err);

int ib_payload_stream (const struct ib_payload *pl, ib_payload_fn fn, void *data, ib_error_t *err);

/* Copy the byte ranges of a payload that a reader wants into buffers, in
 * one streaming pass that stops once every range is filled.  A range past
 * the payload's end is an error. */
struct ib_payload_range
{
  uint64_t off, len;
  unsigned char *buf; /* allocated by ib_payload_collect, freed by the caller */
};
int ib_payload_collect (const struct ib_payload *pl, struct ib_payload_range *r, size_t n, ib_error_t *err);

#endif
