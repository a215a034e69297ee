/* Reading chosen files out of an image's layers, one streaming pass per
 * layer, never extracting a layer whole: the symbol and kernel gates read
 * the few files they need this way, and cache what they learn by the file's
 * content digest so that the next build reads no layer at all. */
#ifndef IB_EXTRACT_H
#define IB_EXTRACT_H

#include <stddef.h>
#include <sys/types.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/read/layer_reader.h"
#include "layers/store/store.h"

/* Called once per wanted file, with the reader positioned at its data. */
typedef int (*ib_extract_fn) (void *data, const struct ib_fs_entry *entry, struct ib_layer_reader *r,
                              ib_error_t *err);

/* For each entry of WANTED (entries of a view over IMG, so each names the
 * layer that provides it), call FN with its content.  Layers are read in
 * order, each at most once, and only those that provide a wanted file: a
 * trusted gzip or uncompressed layer by range where its list knows where
 * each wanted file's data starts (layers/read/layer_seek.h; each file's bytes
 * proven by its digest before FN sees them, FN handed a reader of that
 * file alone), else, and for any file whose range did not prove, by one
 * streaming pass. */
int ib_extract_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *wanted,
                        size_t n, ib_extract_fn fn, void *data, ib_error_t *err);

/* How many layers the N entries of WANTED come from: the passes
 * ib_extract_entries makes over them (at most). */
size_t ib_extract_layer_count (const struct ib_fs_entry *const *wanted, size_t n);

/* Copy the current file of R into an unlinked temporary file in DIR, for
 * readers that seek (ELF); *FD is positioned at 0. */
int ib_reader_spool (struct ib_layer_reader *r, const char *dir, int *fd, ib_error_t *err);
/* Read the current file of R whole (at most MAX bytes). */
int ib_reader_slurp (struct ib_layer_reader *r, size_t max, char **out, size_t *len, ib_error_t *err);

#endif
