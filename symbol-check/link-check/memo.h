/* A check's verdict over an image's file system, kept for the next image
 * over the same base (the native link gate's: a warm build then costs
 * nothing per object of the base).
 *
 * A check run under a recorder leaves, besides what it said, what it read
 * of the view (layers/view/fsview.h, ib_fsview_observe): every path it looked
 * up with the entry found there, and every folder above it; every entry a
 * glob matched; every pattern.  The verdict is a function of those reads,
 * of the check's own settings and of content-addressed caches, so another
 * image over the same base layers gets it again when its overlay (its
 * layers above the base) leaves every read as it was:
 *   - an overlay entry at a path that was read must read the same there
 *     (type; for anything but a folder: mode, size, digest, link, layer),
 *     and a whiteout or an opaque folder must not be at one at all;
 *   - no overlay entry may match a pattern, nor be one the check picks by
 *     walking the view (SELECTS: the native gate's objects to load).
 * Paths the overlay does not name read the same as the base has them.
 * Both overlays are compared, the one the verdict was made on and the new
 * one: either can differ from the base at a path.  Since every folder of a
 * read path was read too, an overlay entry at a path that was not read has
 * nothing read below it.
 *
 * Memos live in a cache folder of the store, one file per key (the
 * check's settings and the base's diff_ids); a damaged or partial file is
 * a miss. */
#ifndef IB_LINK_MEMO_H
#define IB_LINK_MEMO_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "util/error.h"

/* Whether the check, walking the view, would pick overlay entry E. */
typedef bool (*ib_memo_select_fn) (void *data, const struct ib_fs_entry *e);

#define IB_MEMO_COUNTS 16

struct ib_memo_said
{
  bool is_error;
  char *msg;
};

struct ib_memo;

/* The memo of check KIND ("native": also its cache folder's name) with
 * SETTINGS (text: everything but the view that the verdict depends on)
 * for IMG, whose layers from FIRST on are its overlay (FIRST outside
 * 1..n_layers-1: no overlay, the whole image is the key).  *OUT is a hit
 * (ib_memo_hit) when a verdict was kept and holds for IMG's VIEW, else an
 * empty memo ready to record; NULL when the overlay's file lists cannot be
 * had (then the check runs in full, without a memo). */
void ib_memo_open (struct ib_store *s, const char *kind, const char *settings, const struct ib_image *img, int first,
                   const struct ib_fsview *view, ib_memo_select_fn selects, void *sdata, struct ib_memo **out);
void ib_memo_free (struct ib_memo *m);

bool ib_memo_hit (const struct ib_memo *m);
/* A hit's problems, in the order said, and its counters. */
const struct ib_memo_said *ib_memo_problems (const struct ib_memo *m, size_t *n);
const size_t *ib_memo_counts (const struct ib_memo *m);

/* Record the check's reads of VIEW (a miss only), until the caller stops
 * it with ib_fsview_observe (VIEW, NULL). */
void ib_memo_record (struct ib_memo *m, struct ib_fsview *view);
/* A problem the check said; its counters. */
void ib_memo_said (struct ib_memo *m, bool is_error, const char *msg);
void ib_memo_set_counts (struct ib_memo *m, const size_t counts[IB_MEMO_COUNTS]);
/* Keep the verdict of a check that ran to its end, unless the overlay
 * holds an entry the check picks (a verdict that could not be reused).  A
 * cache that cannot be written is no error: the next check runs in full. */
void ib_memo_save (struct ib_memo *m);

#endif
