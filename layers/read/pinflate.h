/* One gzip blob inflated on several threads with its inflate index
 * (inflate_index.h), read back in order by one consumer.
 *
 * The stream is cut at the index's checkpoints into chunks; chunk K goes
 * to worker K mod THREADS, which inflates it into buffers of its own (at
 * most PINFLATE_BUFFERS of a MiB each, so memory is bounded whatever the
 * blob) that the consumer takes in the stream's order: the blob's bytes
 * (for its digest) and the uncompressed bytes, each in order.
 *
 * Nothing of the index is believed: chunk 0 starts from the blob's first
 * byte; a chunk's output is handed out only once the chunk before it
 * ended exactly at its checkpoint (all of its input consumed, the
 * checkpoint's output offset reached, and the inflater's whole state equal
 * to the checkpoint's: bits held, history, tables, CRC and length so far),
 * so by induction every byte handed out is the blob's sequential inflate.
 * When a chunk does not end at its checkpoint, its worker goes on past it
 * sequentially to the end of the blob and the other workers stop: the
 * bytes handed out are the same either way, only slower
 * (ib_pinflate_fell_back).  The gzip CRC-32 and length of each member are
 * checked by the inflater as always. */
#ifndef IB_PINFLATE_H
#define IB_PINFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layers/read/inflate_index.h"

#define PINFLATE_BUFFERS 12

struct ib_pinflate;

/* The blob is LENGTH bytes from OFFSET of FD (read with pread; FD stays
 * the caller's; PATH names it in errors); X its index (the caller's, kept
 * until free); THREADS >= 2. */
int ib_pinflate_new (int fd, const char *path, uint64_t offset, uint64_t length, const struct ib_inflate_index *x, int threads,
                     struct ib_pinflate **out, ib_error_t *err);

enum ib_piece_kind
{
  IB_PIECE_BLOB, /* bytes of the blob, in order */
  IB_PIECE_DATA  /* uncompressed bytes, in order */
};

struct ib_piece
{
  enum ib_piece_kind kind;
  const unsigned char *buf; /* valid until the next call */
  size_t len;
};

/* 1 and the next piece; 0 at the end (the last member ended with the
 * blob); -1 with *ERR: the inflater's error (util/gunzip.h), a read error,
 * or *TRUNCATED set (the blob ended inside a member: *ERR is NULL then, the
 * caller words it as its sequential reader does). */
int ib_pinflate_next (struct ib_pinflate *p, struct ib_piece *piece, bool *truncated, ib_error_t *err);
/* Whether a checkpoint proved wrong (the index is not this blob's). */
bool ib_pinflate_fell_back (struct ib_pinflate *p);
/* Stops and joins the workers.  NULL is a no-op. */
void ib_pinflate_free (struct ib_pinflate *p);

#endif
