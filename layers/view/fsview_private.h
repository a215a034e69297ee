/* The merged view's layout, shared by the files of view/ that read it
 * (fsview.c, fsglob.c); the rest of the project sees fsview.h only.
 *
 * A view is held one of two ways:
 *   - whole: E holds every entry, sorted by path (a view merged from the
 *     layers' lists);
 *   - read in place (fscache.h): the base's view is a mapped cache file,
 *     its records made entries only as they are read (BASE, a NULL path:
 *     not yet), and the layers pushed on it are entries of E.  PIECES say
 *     in what order: runs of the base's records and of E's entries that
 *     together are the view, sorted.  A warm build's overlay of a few dozen
 *     files is a few dozen pieces; a larger push makes the view whole first
 *     (each piece edit costs the number of pieces). */
#ifndef IB_FSVIEW_PRIVATE_H
#define IB_FSVIEW_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/view/fscache.h"
#include "layers/view/fsview.h"

/* LEN entries of the view from its entry START: records FROM.. of the
 * map, or (UP) entries FROM.. of E. */
struct ib_fsview_piece
{
  size_t start, from, len;
  bool up;
};

struct ib_fsview
{
  size_t n;              /* entries in the view */
  size_t cap, n_e;       /* E's room; read in place, how many of E are used (whole: n) */
  struct ib_fs_entry *e; /* whole: the view, sorted; read in place: the entries pushed, in no order */
  struct ib_fs_strings *strings; /* the entries' paths and link targets, and the map */
  char **hazards;
  size_t n_hazards;
  const struct ib_fsview_observer *obs; /* told of every read; NULL: none */
  /* read in place (PIECES not NULL) */
  struct ib_fs_map map;
  struct ib_fs_entry *base; /* the map's records as entries, filled when first read */
  struct ib_fsview_piece *pieces;
  size_t n_pieces;
  size_t hint; /* the piece of the last entry read (fsview.c piece_of) */
  size_t lookups; /* made: every LOOKUP_RELEASE, the map's pages are given back (fsview.c) */
  /* the kept view's file and what it was when mapped (fsglob.c keeps
   * the base's glob hits beside it) */
  char *map_path;
  uint64_t map_id[4]; /* device, inode, size, modification time (ns) */
};

/* V (new, empty) as the view kept at PATH (fscache.h) of the layers
 * CHAIN, N_LAYERS of them, read in place; false, V unchanged, when PATH
 * is not such a view. */
bool ib_fsview_map (struct ib_fsview *v, const char *path, const ib_digest *chain, size_t n_layers);
/* Entry I's path, without making it an entry. */
const char *ib_fsview_path_at (const struct ib_fsview *v, size_t i);
/* Entry I (below v->n), the observer not told. */
const struct ib_fs_entry *ib_fsview_entry_at (const struct ib_fsview *v, size_t i);
/* The first entry in [FROM, TO) whose path is not below PATH (TO when none). */
size_t ib_fsview_lower_bound_in (const struct ib_fsview *v, size_t from, size_t to, const char *path);
/* The entries below PREFIX/ ("" the root): [*FROM, *TO). */
void ib_fsview_prefix_range (const struct ib_fsview *v, const char *prefix, size_t *from, size_t *to);
/* A number for each entry the view hands out, below ib_fsview_ids (V):
 * for a table by entry that a walk fills. */
size_t ib_fsview_id (const struct ib_fsview *v, const struct ib_fs_entry *e);
size_t ib_fsview_ids (const struct ib_fsview *v);
/* Walking the view at entry I: every 8,192 entries, the pages of the
 * mapped lists read are given back. */
void ib_fsview_walked (const struct ib_fsview *v, size_t i);

#endif
