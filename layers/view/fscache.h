/* The storage of file lists (fsview.h), private to layers/: the blocks that
 * hold a list's strings, and the cache file of one layer's list.
 *
 * A warm build reads the lists of its whole base, some 60,000 entries per
 * 2 GB, on every build; as text that was a sixth of its time (parsing,
 * unescaping, a malloc and a free per path).  The cache is binary instead:
 * fixed records in path order and one block of strings that is mapped, not
 * read, so loading a list is a loop that points each entry at its strings. */
#ifndef IB_FSCACHE_H
#define IB_FSCACHE_H

#include <stdbool.h>

#include "layers/store/digest.h"
#include "layers/view/fsview.h"

/* A copy of S (LEN bytes, then a NUL) in the blocks of *POOL, which grow
 * as needed; it lives until ib_fs_strings_free of *POOL. */
char *ib_fs_strings_add (struct ib_fs_strings **pool, const char *s, size_t len);
/* Move every block of *FROM into *TO (*FROM becomes empty). */
void ib_fs_strings_adopt (struct ib_fs_strings **to, struct ib_fs_strings **from);
void ib_fs_strings_free (struct ib_fs_strings *pool);
/* Give back the pages of the cache files mapped in POOL that reads brought
 * in (its other blocks stay): a later read takes them from the file again.
 * The files are mapped read-only, so nothing is lost. */
void ib_fs_strings_release (const struct ib_fs_strings *pool);

/* Write L, the list of the layer DIFF_ID, to PATH, atomically; nothing
 * (and 0) when L cannot be kept: its paths out of order, or too many. */
int ib_fs_cache_save (const char *path, const ib_digest *diff_id, const struct ib_fs_list *l, ib_error_t *err);
/* Read PATH into L (empty): false, and L left empty, when the file is
 * missing, of another layer or another format, or not whole and
 * consistent (an offset out of bounds, a type unknown, paths out of
 * order); such a file is computed again, never trusted halfway. */
bool ib_fs_cache_load (const char *path, const ib_digest *diff_id, struct ib_fs_list *l);

/* The merged view of an image's first layers, named by their ChainID
 * (ib_chain_id_next): the same file, its own magic, and each record keeps
 * the layer that provides its entry.  L is the view's entries (a layer
 * index each, below 65,536, else nothing is written) and its hazards.  A
 * warm build over a base of many layers maps one file instead of loading
 * and merging a list per layer. */
int ib_fs_view_cache_save (const char *path, const ib_digest *chain_id, const struct ib_fs_list *l, ib_error_t *err);

/* A view read in place: its records are found by binary search in the
 * mapped file and made entries one at a time, as they are read.  Loading
 * the whole view made an entry of every record and checked every path's
 * order: at 30 GB (336,000 entries) a third of a warm build, and the part
 * of it that grew with the base.  The writer proves the order instead
 * (ib_fs_view_cache_save writes nothing for entries out of order); a
 * record read is checked as ib_fs_cache_load checks it, and one that is
 * damaged reads as a placeholder (type IB_FS_OTHER, path ""), never as a
 * pointer out of the file. */
struct ib_fs_map
{
  const char *recs;
  size_t n;
  const char *strings;
  uint64_t strings_size;
  unsigned n_layers;
};
/* Map the view PATH of CHAIN_ID over N_LAYERS layers into *M, its mapping
 * owned by a block added to *POOL (freed with it); its hazards, copied,
 * into HAZARDS (their array and count only).  False when PATH is missing,
 * another layer's or another kind's, or not whole (as ib_fs_cache_load). */
bool ib_fs_view_cache_map (const char *path, const ib_digest *chain_id, size_t n_layers, struct ib_fs_strings **pool,
                           struct ib_fs_map *m, struct ib_fs_list *hazards);
/* The path of record I (below M->n), read in place. */
const char *ib_fs_map_path (const struct ib_fs_map *m, size_t i);
/* Record I as an entry: its strings and digest point into the map. */
void ib_fs_map_entry (const struct ib_fs_map *m, size_t i, struct ib_fs_entry *e);

#endif
