/* A gzip layer's inflate index: checkpoints where its inflate may be
 * resumed (util/gunzip.h), so that a later read can inflate the one stream
 * on several threads (layers/read/pinflate.h), zran-style.
 *
 * Recorded by the layer reader at a blob's first whole read (a build, a
 * pull, a first imgverify) and kept when both of its digests were right,
 * in the store's imgbuild/inflate-index/HEX (HEX: the blob's digest, so gc
 * sweeps it with its blob).  Each checkpoint is the input offset, the
 * output offset and the inflater's normalized state there.  The file names
 * the snapshot format (the ISA-L version and state size) and the blob's
 * size, and ends with the SHA-256 of all before it: a damaged, truncated,
 * foreign or other-version file is no index.
 *
 * An index that loads is still not trusted: every checkpoint is proven by
 * the inflater that reaches it (pinflate.h), and one that is not where the
 * stream is makes the read go on sequentially. */
#ifndef IB_INFLATE_INDEX_H
#define IB_INFLATE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layers/store/store.h"

/* Output between checkpoints: the unit of work of one thread, and what a
 * thread may inflate ahead of the reader. */
#define IB_INFLATE_INDEX_SPAN (8u << 20)

struct ib_inflate_point
{
  uint64_t in, out; /* blob bytes before it, uncompressed bytes before it */
};

struct ib_inflate_index_writer;

/* A writer for BLOB's index in S; *OUT NULL (and 0) when this build takes
 * no snapshots.  For a view (an artifact read in place) the index goes to
 * the local store with its other derived data, never to the artifact: its
 * bytes may change under it, and a checkpoint is believed only where it is
 * proven (above), so a later read of changed bytes goes on sequentially.
 * Without it, a fresh store's imgverify inflated the CUDA base's 4.7 GB
 * layer a second time, from its first byte, for the few files its symbol
 * gate reads by range after the pass (6 of its 39 s). */
int ib_inflate_index_writer_new (struct ib_store *s, const ib_digest *blob, struct ib_inflate_index_writer **out,
                                 ib_error_t *err);
/* Whether a checkpoint at output offset OUT is due (a span past the last). */
bool ib_inflate_index_writer_due (const struct ib_inflate_index_writer *w, uint64_t out);
/* Add the checkpoint (IN, OUT) with the snapshot SNAP. */
int ib_inflate_index_writer_add (struct ib_inflate_index_writer *w, uint64_t in, uint64_t out, const void *snap,
                                 ib_error_t *err);
/* Name the file, for a blob of BLOB_SIZE bytes; nothing when it has no
 * checkpoint. */
int ib_inflate_index_writer_commit (struct ib_inflate_index_writer *w, uint64_t blob_size, ib_error_t *err);
/* Removes the file unless committed.  NULL is a no-op. */
void ib_inflate_index_writer_free (struct ib_inflate_index_writer *w);

struct ib_inflate_index;

/* BLOB's index (BLOB_SIZE bytes) in S: 0 and *OUT NULL when it has none
 * that this build can use; -1 only when the file cannot be read. */
int ib_inflate_index_load (struct ib_store *s, const ib_digest *blob, uint64_t blob_size,
                           struct ib_inflate_index **out, ib_error_t *err);
size_t ib_inflate_index_count (const struct ib_inflate_index *x);
struct ib_inflate_point ib_inflate_index_point (const struct ib_inflate_index *x, size_t k);
/* Checkpoint K's snapshot into SNAP (ib_gunzip_snapshot_size bytes); safe
 * from several threads at once. */
int ib_inflate_index_snapshot (const struct ib_inflate_index *x, size_t k, void *snap, ib_error_t *err);
void ib_inflate_index_free (struct ib_inflate_index *x);
/* Remove BLOB's index: a checkpoint of it proved wrong, so that the next
 * whole read records it again. */
void ib_inflate_index_drop (struct ib_store *s, const ib_digest *blob);

#endif
