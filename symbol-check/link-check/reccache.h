/* The link gate's whole ELF records (elfdyn.h), symbols included, held in
 * memory within a budget of bytes: the records of an image's objects
 * together are far larger than any one load needs at once (the torch
 * image's are 24 MB, a 16 GB base's more), so the gate keeps only their
 * heads (ib_elf_link_head) and reads a whole record from its cache file
 * again when a lookup needs its symbols.
 *
 * Records are named by a slot (the caller's index of the file content)
 * and the content digest, their file in the cache folder.  A record is
 * held from ib_reccache_get to ib_reccache_put; the least recently used
 * records that are not held go once the cache holds more than its budget
 * (held ones stay: a budget smaller than the largest record still works,
 * one or two records over it). */
#ifndef IB_RECCACHE_H
#define IB_RECCACHE_H

#include <stddef.h>

#include "symbol-check/link-check/elfdyn.h"

struct ib_reccache;

struct ib_reccache_stats
{
  size_t loads;      /* records read from their cache file */
  size_t evictions;  /* records let go to stay within the budget */
  size_t peak_bytes; /* the most the cache held at once */
};

/* Records of the cache folder DIR, BUDGET bytes of them at most (but for
 * the held ones). */
struct ib_reccache *ib_reccache_new (const char *dir, size_t budget);
void ib_reccache_free (struct ib_reccache *c);

/* A whole record just made or read (L, the cache's now), for slot SLOT,
 * not held: it saves reading it again while it stays. */
void ib_reccache_add (struct ib_reccache *c, size_t slot, struct ib_elf_link *l);
/* SLOT's record, held until ib_reccache_put (gets nest); NULL when its
 * cache file, DIGEST, cannot be read or is not a whole record. */
const struct ib_elf_link *ib_reccache_get (struct ib_reccache *c, size_t slot, const char *digest);
void ib_reccache_put (struct ib_reccache *c, size_t slot);

void ib_reccache_stats (const struct ib_reccache *c, struct ib_reccache_stats *out);

#endif
