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

#include "error.h"

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

/* "isa-l" or "zlib": the engine this build inflates with. */
const char *ib_gunzip_engine (void);

#endif
