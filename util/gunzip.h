/* Inflating gzip streams: one or more gzip members back to back (RFC 1952,
 * as layer blobs may be), fed in pieces, each member's CRC-32 and length
 * checked.  Built with ISA-L's igzip (Debian's libisal-dev, found by
 * pkg-config) when it is there, zlib otherwise: the same bytes out, the
 * same errors, igzip about twice as fast on one core.  Used by the layer
 * reader, the one place every layer's bytes are inflated. */
#ifndef IB_GUNZIP_H
#define IB_GUNZIP_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

struct ib_gunzip;

int ib_gunzip_new (struct ib_gunzip **out, ib_error_t *err);
void ib_gunzip_free (struct ib_gunzip *g);

/* Inflate from IN (IN_LEN bytes) into OUT (OUT_LEN bytes): *IN_USED and
 * *OUT_MADE say how much of each.  *MEMBER_END: a member ended (its trailer
 * checked); the next call starts a new member with what input is left.
 * Fails (IB_EINTEGRITY, "gzip data is corrupt (WHY)") on data that is not
 * gzip or whose checksum or length is wrong. */
int ib_gunzip_run (struct ib_gunzip *g, const unsigned char *in, size_t in_len, size_t *in_used, unsigned char *out,
                   size_t out_len, size_t *out_made, bool *member_end, ib_error_t *err);

/* Checkpoints, where an inflate may be resumed (ISA-L builds only: its whole
 * inflater state, history included, is one plain struct; zlib's is not).
 * A snapshot is taken right after a run that consumed all the input it was
 * given, inside a member, with room left in its output: the inflater then
 * stands at a point that depends only on the bytes before it, so a second
 * inflater fed the same bytes up to there, however cut, stands at the same
 * point (ib_gunzip_at).  A snapshot is the state "normalized": pointers
 * cleared, bits and bytes that the inflater does not hold zeroed, and the
 * history (the last 32 KiB of output) at its end.
 *
 * The size of a snapshot, and a key naming its format (the ISA-L version
 * and the size of its state): a snapshot is only ever given to a build of
 * the same key.  0 and NULL: this build cannot resume. */
size_t ib_gunzip_snapshot_size (void);
const char *ib_gunzip_snapshot_key (void);
/* After a run: when G stands at a checkpoint, its snapshot into SNAP
 * (ib_gunzip_snapshot_size bytes) and true; else false. */
bool ib_gunzip_snapshot (const struct ib_gunzip *g, void *snap);
/* An inflater standing where SNAP says.  Fails (IB_EINTEGRITY) on a
 * snapshot that is not one this build takes (its fields out of range): a
 * snapshot read from disk is checked so far, and no further: that it is
 * where the stream stands is for the caller to prove (ib_gunzip_at on the
 * inflater that reaches it). */
int ib_gunzip_resume (const void *snap, struct ib_gunzip **out, ib_error_t *err);
/* Whether G, after a run that consumed all its input, stands exactly at
 * SNAP: the same bits held, history, block state and tables, checksum and
 * length so far. */
bool ib_gunzip_at (const struct ib_gunzip *g, const void *snap);

/* "isa-l" or "zlib": the engine this build inflates with. */
const char *ib_gunzip_engine (void);

#endif
