/* What a whole read of a layer blob found, kept so that the same bytes are
 * not inflated again only to learn it again: its diff_id (the digest of
 * its tar) and its hostile entries (tarcheck.h).
 *
 * The layer reader keeps one at the end of every read that went through
 * every entry and found the blob's digest and size right (a build's pass,
 * a pull, an imgverify), in the local store's imgbuild/read-through/HEX
 * (HEX: the blob's digest, so gc sweeps it with the blob).  The blob's
 * digest says what its bytes are, so what its tar hashes to and what its
 * entries say is a fact about that digest: imgverify that finds a record
 * hashes the blob's bytes, where they are, and takes the rest from it
 * (imgverify --full reads through again).  A record is never used for
 * bytes this run has not hashed.
 *
 * The file names the rules its hostile entries were found by
 * (IB_TAR_CHECK_RULES and libarchive's version, whose warnings are among
 * them) and ends with the SHA-256 of all before it: a damaged, truncated
 * or other-rules file is no record. */
#ifndef IB_READTHROUGH_H
#define IB_READTHROUGH_H

#include <stddef.h>
#include <stdint.h>

#include "layers/store/store.h"

struct ib_readthrough
{
  uint64_t size;       /* the blob's */
  ib_digest diff_id;   /* its tar's digest */
  char **hazards;      /* "entry `NAME`: WHY", in the order of the entries */
  size_t n_hazards;
};

/* Keep REC for BLOB in S.  A layer whose hostile entries would make the
 * record larger than IB_READTHROUGH_MAX is not kept (0: it is read again
 * next time). */
#define IB_READTHROUGH_MAX (1u << 20)
int ib_readthrough_save (struct ib_store *s, const ib_digest *blob, const struct ib_readthrough *rec,
                         ib_error_t *err);
/* 1 and *OUT filled when S keeps a usable record for BLOB, else 0 (none,
 * damaged, or made under other rules). */
int ib_readthrough_load (struct ib_store *s, const ib_digest *blob, struct ib_readthrough *out);
void ib_readthrough_clear (struct ib_readthrough *rec);

#endif
