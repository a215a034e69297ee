/* Reading ranges of a layer's tar stream without inflating it from its
 * first byte: a gzip blob is inflated from the checkpoint of its inflate
 * index (inflate_index.h) that comes before each range, an uncompressed
 * blob read where the range is.  The file-list pass knows where each
 * regular file's data starts in the stream (fsview.h, ib_fs_entry.at):
 * with it, a gate that needs a few files of a base layer reads those, not
 * the whole layer again (a cold build over CUDA's libraries read 2.6 GB of
 * Debian and PyTorch a second time for the interpreter's 30 MB).
 *
 * Nothing here checks a digest: the bytes of a range are what the blob
 * inflates to there only if the index's checkpoint is right, which the
 * caller proves by the file's content digest (layers/view/extract.c); a range
 * that is not whole (past the stream's end, a corrupt stream) is an
 * error.  A zstd blob cannot be read this way. */
#ifndef IB_LAYER_SEEK_H
#define IB_LAYER_SEEK_H

#include <stdint.h>

#include "layers/store/descriptor.h"
#include "layers/store/store.h"

struct ib_layer_seek;

/* BLOB of S, to be read by ranges; NULL when it cannot be (a zstd blob,
 * one that cannot be opened, or one whose length is not the descriptor's:
 * the caller reads it whole, which says why). */
struct ib_layer_seek *ib_layer_seek_open (struct ib_store *s, const struct ib_descriptor *blob);
/* The LEN bytes at AT of the tar stream, handed to FN in pieces, in
 * order; FN's failure stops the read.  Ranges in increasing order cost
 * the least (an inflater goes on where it stands when no checkpoint lies
 * between). */
int ib_layer_seek_read (struct ib_layer_seek *k, uint64_t at, uint64_t len,
                        int (*fn) (void *data, const void *buf, size_t n, ib_error_t *err), void *data,
                        ib_error_t *err);
void ib_layer_seek_free (struct ib_layer_seek *k);

#endif
