/* Reading a layer blob, streaming: the compression (gzip, zstd or none) is
 * found from the bytes, the tar entries are handed out one by one, and the
 * blob's digest and the diff_id are computed on the way.  ib_layer_reader_end
 * drains what is left and fails when either digest differs from what the
 * manifest and config say: a layer is never trusted because of its name. */
#ifndef IB_LAYER_READER_H
#define IB_LAYER_READER_H

#include <archive_entry.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "layers/store/descriptor.h"
#include "layers/store/store.h"

struct ib_layer_reader;

/* What a layer blob is, by its first bytes (N of them at P): gzip, zstd,
 * else a plain tar stream. */
enum ib_blob_codec
{
  IB_BLOB_PLAIN,
  IB_BLOB_GZIP,
  IB_BLOB_ZSTD
};
enum ib_blob_codec ib_blob_codec_of (const unsigned char *p, size_t n);
/* The same for the blob of LENGTH bytes at OFFSET of FD (pread: FD's
 * position stays; no byte past the blob is read, as in an archive the next
 * member follows it); IB_BLOB_PLAIN when FD is -1 or nothing can be read. */
enum ib_blob_codec ib_blob_codec_at (int fd, uint64_t offset, uint64_t length);

/* Read the layer BLOB of the store (or view) S, wherever its bytes are.
 * EXPECTED_DIFF_ID may be NULL (not known).  When ib_layer_reader_end finds
 * both digests right, the blob counts as hashed in this run
 * (ib_store_mark_hashed), so caches keyed by it may be used. */
int ib_layer_reader_open (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *expected_diff_id,
                          struct ib_layer_reader **out, ib_error_t *err);
/* The same; a gzip blob that has an inflate index (inflate_index.h) is
 * inflated on THREADS threads when THREADS > 1 (the caller's share of the
 * CPUs), with the same bytes, verdicts and errors as when read on one. */
int ib_layer_reader_open_threads (struct ib_store *s, const struct ib_descriptor *blob,
                                  const ib_digest *expected_diff_id, int threads, struct ib_layer_reader **out,
                                  ib_error_t *err);
/* The same over bytes that are not in S yet: BLOB's bytes at AT (another
 * layout's blob, being brought into S), read and checked as S's own would
 * be, and written into a blob writer of S as they are read and hashed (one
 * read and one hash of the blob, where a copy beside the read took a
 * second of each).  What the read learns (the inflate index, the
 * read-through record) goes to S, keyed by BLOB's digest as always. */
int ib_layer_reader_open_at (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at,
                             const ib_digest *expected_diff_id, struct ib_layer_reader **out, ib_error_t *err);
/* After ib_layer_reader_end found them BLOB: the writer of an open_at
 * reader's bytes, for the caller to name them
 * (ib_blob_writer_commit_hashed, whose fsync may then wait on another
 * thread than the reading one) or abort; NULL for any other reader, or
 * before that.  A reader freed with its writer leaves nothing in S. */
struct ib_blob_writer *ib_layer_reader_take_copy (struct ib_layer_reader *r);
/* A reader of one file's bytes instead of a layer's: LEN bytes from 0 of
 * FD (the caller's, read with pread), handed out by ib_layer_reader_data;
 * nothing else but ib_layer_reader_free may be called on it.  How a file
 * read from a layer by range (layer_seek.h) goes to the code written for a
 * reader standing at a tar entry (layers/view/extract.h). */
struct ib_layer_reader *ib_layer_reader_of_file (int fd, uint64_t len);
/* After ib_layer_reader_next: where the entry's data starts in the
 * layer's tar stream (its header and any extended headers before it). */
uint64_t ib_layer_reader_data_at (const struct ib_layer_reader *r);
/* Called with the number of blob bytes read, as they are read (progress). */
void ib_layer_reader_on_progress (struct ib_layer_reader *r, void (*fn) (void *, unsigned long long), void *data);
/* 1 and *ENTRY set, 0 at the end, -1 on error. */
int ib_layer_reader_next (struct ib_layer_reader *r, struct archive_entry **entry, ib_error_t *err);
/* Read the current entry's data; 0 at its end. */
ssize_t ib_layer_reader_data (struct ib_layer_reader *r, void *buf, size_t len, ib_error_t *err);
/* R's hash worker (layers/store/digest.h), which hashes its blob and its
 * tar: the caller may hash what it reads from R there too (each file's
 * digest), its jobs run in order with R's own; the worker lives until
 * ib_layer_reader_free, which drops the jobs not yet run. */
struct ib_hash_worker *ib_layer_reader_hash_worker (struct ib_layer_reader *r);
/* The hostile entries seen so far (tarcheck.h), each "entry `NAME`: WHY";
 * valid until the next call on R. */
const char *const *ib_layer_reader_hazards (const struct ib_layer_reader *r, size_t *n);
/* Drain, then check both digests.  DIFF_ID may be NULL. */
int ib_layer_reader_end (struct ib_layer_reader *r, ib_digest *diff_id, ib_error_t *err);
void ib_layer_reader_free (struct ib_layer_reader *r);

#endif
