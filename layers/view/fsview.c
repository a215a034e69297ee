#include "layers/view/fsview.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/fscache.h"
#include "layers/view/fsview_private.h"
#include "layers/tar/tarpath.h"

/* ---- the merged view ----------------------------------------------------- */

struct ib_fsview *
ib_fsview_new (void)
{
  return ib_xcalloc (1, sizeof (struct ib_fsview));
}

/* The map's records as entries, zero (not read yet) until a check reads
 * one: mapped, not calloc'd, so that its pages are the kernel's zero
 * pages until written.  calloc gave that only while the table was above
 * malloc's mmap threshold, which glibc raises to the largest block freed:
 * after a cold build freed its whole view (as large as this table) the
 * table came from the heap and was cleared byte by byte, 16 MB of RSS at
 * 30 GB that a warm build never had. */
static struct ib_fs_entry *
base_new (size_t n)
{
  void *p = mmap (NULL, (n + 1) * sizeof (struct ib_fs_entry), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                  -1, 0);
  if (p == MAP_FAILED)
    abort (); /* as ib_xcalloc does when memory runs out */
  return p;
}

static void
base_free (struct ib_fsview *v)
{
  if (v->base)
    munmap (v->base, (v->map.n + 1) * sizeof (*v->base));
  v->base = NULL;
}

void
ib_fsview_free (struct ib_fsview *v)
{
  if (v == NULL)
    return;
  for (size_t i = 0; i < v->n_hazards; i++)
    free (v->hazards[i]);
  free (v->hazards);
  free (v->e);
  base_free (v);
  free (v->pieces);
  free (v->map_path);
  ib_fs_strings_free (v->strings);
  free (v);
}

const char *const *
ib_fsview_hazards (const struct ib_fsview *v, size_t *n)
{
  *n = v->n_hazards;
  return (const char *const *) v->hazards;
}

/* ---- reading it, whole or in place ------------------------------------ */

/* The piece that holds entry I: the last whose start is not above it.  A
 * walk reads the entries in order: the piece of the last read, or the
 * one after it, holds the next (a glob of "*" + name over a base of
 * 60,000 entries spent a third of its time in this search).  The hint is
 * the view's only state that a read changes; a view is read by one
 * thread. */
static size_t
piece_of (const struct ib_fsview *v, size_t i)
{
  size_t *hint = &((struct ib_fsview *) v)->hint;
  for (size_t h = *hint; h < v->n_pieces && h <= *hint + 1; h++)
    if (v->pieces[h].start <= i && i - v->pieces[h].start < v->pieces[h].len)
      return *hint = h;
  size_t lo = 0, hi = v->n_pieces;
  while (hi - lo > 1)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (v->pieces[mid].start <= i)
        lo = mid;
      else
        hi = mid;
    }
  return *hint = lo;
}

const char *
ib_fsview_path_at (const struct ib_fsview *v, size_t i)
{
  if (v->pieces == NULL)
    return v->e[i].path;
  const struct ib_fsview_piece *p = &v->pieces[piece_of (v, i)];
  size_t k = p->from + (i - p->start);
  if (p->up)
    return v->e[k].path;
  return v->base[k].path ? v->base[k].path : ib_fs_map_path (&v->map, k);
}

/* A record of the map is made an entry when it is first read, and stays
 * (its address is what a check keeps): the view's content never changes
 * by being read, so a const view may fill it. */
const struct ib_fs_entry *
ib_fsview_entry_at (const struct ib_fsview *v, size_t i)
{
  if (v->pieces == NULL)
    return &v->e[i];
  const struct ib_fsview_piece *p = &v->pieces[piece_of (v, i)];
  size_t k = p->from + (i - p->start);
  if (p->up)
    return &v->e[k];
  if (v->base[k].path == NULL)
    ib_fs_map_entry (&v->map, k, &v->base[k]);
  return &v->base[k];
}

size_t
ib_fsview_id (const struct ib_fsview *v, const struct ib_fs_entry *e)
{
  uintptr_t at = (uintptr_t) e, base = (uintptr_t) v->base;
  if (v->pieces && at >= base && at < base + v->map.n * sizeof (*e))
    return (size_t) (e - v->base);
  return (v->pieces ? v->map.n : 0) + (size_t) (e - v->e);
}

size_t
ib_fsview_ids (const struct ib_fsview *v)
{
  return v->pieces ? v->map.n + v->n_e : v->n;
}

size_t
ib_fsview_lower_bound_in (const struct ib_fsview *v, size_t from, size_t to, const char *path)
{
  size_t lo = from, hi = to;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (ib_fsview_path_at (v, mid), path) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static size_t
lower_bound (const struct ib_fsview *v, const char *path)
{
  return ib_fsview_lower_bound_in (v, 0, v->n, path);
}

/* Paths that start with PREFIX are contiguous in sorted order, and end
 * before PREFIX with its last byte one up: two binary searches, where a
 * scan of a folder's entries was one comparison each (a whole base, for
 * a pattern with a short head). */
void
ib_fsview_prefix_range (const struct ib_fsview *v, const char *prefix, size_t *from, size_t *to)
{
  size_t len = strlen (prefix);
  *from = lower_bound (v, prefix);
  if (len == 0)
    {
      *to = v->n; /* the root: every entry, without a scan of them */
      return;
    }
  if ((unsigned char) prefix[len - 1] == 0xff)
    {
      for (*to = *from; *to < v->n && strncmp (ib_fsview_path_at (v, *to), prefix, len) == 0;)
        ++*to;
      return;
    }
  cleanup_free char *past = ib_xstrdup (prefix);
  past[len - 1] = (char) ((unsigned char) past[len - 1] + 1);
  *to = ib_fsview_lower_bound_in (v, *from, v->n, past);
}

/* ---- changing it ---------------------------------------------------------- */

/* Put LEN entries from FROM (UP: of E, else of the map) at the end of
 * PIECES, joined to the last piece when they continue it. */
static void
piece_put (struct ib_fsview_piece *pieces, size_t *n, size_t from, size_t len, bool up)
{
  if (len == 0)
    return;
  struct ib_fsview_piece *last = *n ? &pieces[*n - 1] : NULL;
  if (last && last->up == up && last->from + last->len == from)
    {
      last->len += len;
      return;
    }
  pieces[(*n)++] = (struct ib_fsview_piece){ .from = from, .len = len, .up = up };
}

/* The view read in place, its entries [A, B) replaced by entry UP of E
 * (SIZE_MAX: by nothing).  The pieces before A, UP, the pieces from B. */
static void
pieces_splice (struct ib_fsview *v, size_t a, size_t b, size_t up)
{
  struct ib_fsview_piece *out = ib_xmalloc ((v->n_pieces + 2) * sizeof (*out));
  size_t n = 0;
  for (size_t i = 0; i < v->n_pieces && v->pieces[i].start < a; i++)
    {
      const struct ib_fsview_piece *p = &v->pieces[i];
      piece_put (out, &n, p->from, p->len < a - p->start ? p->len : a - p->start, p->up);
    }
  if (up != SIZE_MAX)
    piece_put (out, &n, up, 1, true);
  for (size_t i = 0; i < v->n_pieces; i++)
    {
      const struct ib_fsview_piece *p = &v->pieces[i];
      if (p->start + p->len <= b)
        continue;
      size_t skip = b > p->start ? b - p->start : 0;
      piece_put (out, &n, p->from + skip, p->len - skip, p->up);
    }
  size_t start = 0;
  for (size_t i = 0; i < n; i++)
    {
      out[i].start = start;
      start += out[i].len;
    }
  free (v->pieces);
  v->pieces = out;
  v->n_pieces = n;
  v->n = start;
}

/* Remove the view's entries [A, B). */
static void
cut (struct ib_fsview *v, size_t a, size_t b)
{
  /* Nothing (an empty view has no array at all: memmove of a null
   * pointer is undefined even for no bytes, UBSan says). */
  if (b <= a)
    return;
  if (v->pieces)
    {
      pieces_splice (v, a, b, SIZE_MAX);
      return;
    }
  memmove (&v->e[a], &v->e[b], (v->n - b) * sizeof (*v->e));
  v->n -= b - a;
}

/* Remove the entries under DIR (and DIR itself when WITH_SELF); "" is the
 * root. */
static void
remove_tree (struct ib_fsview *v, const char *dir, bool with_self)
{
  if (with_self)
    {
      size_t at = lower_bound (v, dir);
      if (at < v->n && strcmp (ib_fsview_path_at (v, at), dir) == 0)
        cut (v, at, at + 1);
    }
  cleanup_free char *prefix = *dir ? ib_xasprintf ("%s/", dir) : ib_xstrdup ("");
  size_t from, to;
  ib_fsview_prefix_range (v, prefix, &from, &to);
  cut (v, from, to);
}

static void
copy_entry (struct ib_fsview *v, struct ib_fs_entry *dst, const struct ib_fs_entry *src, int layer)
{
  *dst = *src;
  dst->path = ib_fs_strings_add (&v->strings, src->path, strlen (src->path));
  dst->link = src->link ? ib_fs_strings_add (&v->strings, src->link, strlen (src->link)) : NULL;
  dst->digest = src->digest && src->digest[0] ? ib_fs_strings_add (&v->strings, src->digest, strlen (src->digest)) : "";
  dst->layer = layer;
}

static bool
is_marker (const struct ib_fs_entry *e)
{
  return e->type == IB_FS_WHITEOUT || e->type == IB_FS_OPAQUE;
}

/* A whiteout that names no file (`.wh.`, `.wh..`, `.wh...`;
 * layer_reader.h) removes nothing: taken as a path, the empty one would
 * delete the whole tree below the layer. */
static bool
names_nothing (const char *path)
{
  const char *slash = strrchr (path, '/');
  return ib_whiteout_names_nothing (slash ? slash + 1 : path);
}

/* The first list of a view, stolen: its own array becomes the view's,
 * markers dropped in place.  The copy into a merged array was 6 MB of
 * fresh pages for a base of 60,000 entries, a fifth of a warm build's page
 * faults. */
static void
take_list (struct ib_fsview *v, struct ib_fs_list *list, int layer)
{
  size_t n = 0;
  for (size_t i = 0; i < list->n; i++)
    {
      if (is_marker (&list->e[i]))
        continue; /* an empty view: it removes nothing */
      list->e[n] = list->e[i];
      list->e[n++].layer = layer;
    }
  free (v->e);
  v->e = list->e;
  v->n = n;
  v->cap = list->n;
  list->e = NULL;
  list->n = 0;
}

/* lower_bound_in from FROM to the end, by galloping: the distance to the
 * answer is bracketed by doubling steps, then searched.  A layer's entries land in a
 * few runs of the view (a package's tree goes in one place), so each is
 * found a step or two after the previous one: a binary search over the
 * whole rest of the view for each was 17 comparisons an entry and half of
 * a warm build over a 16 GB base of 8 layers (80e6 of 356e6 instructions
 * in strcmp, by callgrind). */
static size_t
gallop_from (const struct ib_fsview *v, size_t from, const char *path)
{
  size_t lo = from, step = 1; /* every entry before LO is below PATH */
  while (lo < v->n && strcmp (v->e[lo].path, path) < 0)
    {
      size_t hi = v->n - lo > step ? lo + step : v->n;
      if (hi < v->n && strcmp (v->e[hi].path, path) < 0)
        {
          lo = hi + 1;
          step *= 2;
          continue;
        }
      return ib_fsview_lower_bound_in (v, lo + 1, hi, path); /* the answer is in (lo, hi] */
    }
  return lo;
}

/* Where each of LIST's entries goes in the view (POS: at or after the
 * previous one's; SAME: it replaces the view's entry there), the paths of
 * folders a file replaces (HIDDEN), and how many entries are new. */
static size_t
place_list (const struct ib_fsview *v, const struct ib_fs_list *list, size_t *pos, bool *same, const char **hidden,
            size_t *n_hidden)
{
  size_t a = 0, n_new = 0;
  for (size_t b = 0; b < list->n; b++)
    {
      const struct ib_fs_entry *up = &list->e[b];
      if (is_marker (up))
        continue;
      a = gallop_from (v, a, up->path);
      pos[b] = a;
      same[b] = a < v->n && strcmp (v->e[a].path, up->path) == 0;
      if (same[b])
        {
          /* A file over a folder hides what was under the folder. */
          if (v->e[a].type == IB_FS_DIR && up->type != IB_FS_DIR)
            hidden[(*n_hidden)++] = up->path;
          a++;
        }
      else
        n_new++;
    }
  return n_new;
}

/* What LIST's opaque folders and whiteouts remove from the view below it. */
static void
remove_marked (struct ib_fsview *v, const struct ib_fs_list *list)
{
  for (size_t i = 0; i < list->n; i++)
    if (list->e[i].type == IB_FS_OPAQUE)
      remove_tree (v, list->e[i].path, false);
  for (size_t i = 0; i < list->n; i++)
    if (list->e[i].type == IB_FS_WHITEOUT && !names_nothing (list->e[i].path))
      remove_tree (v, list->e[i].path, true);
}

/* A layer pushed on a view read in place, one entry at a time: its
 * place by binary search, and a piece edit (O(pieces)) for each.  Above
 * this many entries the view is made whole first and merged as a view
 * built from lists is: an edit per entry would grow as their square. */
#define IN_PLACE_PUSH 512

/* The view read in place made whole: every entry made and put in E, in
 * order (the map stays: the entries' strings are in it). */
static void
make_whole (struct ib_fsview *v)
{
  struct ib_fs_entry *all = ib_xmalloc ((v->n ? v->n : 1) * sizeof (*all));
  for (size_t i = 0; i < v->n; i++)
    {
      all[i] = *ib_fsview_entry_at (v, i);
      ib_fsview_walked (v, i);
    }
  free (v->e);
  base_free (v);
  free (v->pieces);
  v->e = all;
  v->cap = v->n_e = v->n;
  v->pieces = NULL;
  v->n_pieces = 0;
}

/* UP as the next entry of E, of layer LAYER (STEAL: its strings are the
 * list's, which the view adopts); its index in E. */
static size_t
put_up (struct ib_fsview *v, const struct ib_fs_entry *up, int layer, bool steal)
{
  if (v->n_e == v->cap)
    {
      v->cap = v->cap ? 2 * v->cap : 64;
      v->e = ib_xrealloc (v->e, v->cap * sizeof (*v->e));
    }
  if (steal)
    {
      v->e[v->n_e] = *up;
      v->e[v->n_e].layer = layer;
    }
  else
    copy_entry (v, &v->e[v->n_e], up, layer);
  return v->n_e++;
}

static void
push_in_place (struct ib_fsview *v, struct ib_fs_list *list, int layer, bool steal)
{
  remove_marked (v, list);
  cleanup_free const char **hidden = ib_xcalloc (list->n + 1, sizeof (*hidden));
  size_t n_hidden = 0;
  for (size_t b = 0; b < list->n; b++)
    {
      const struct ib_fs_entry *up = &list->e[b];
      if (is_marker (up))
        continue;
      size_t at = lower_bound (v, up->path);
      bool same = at < v->n && strcmp (ib_fsview_path_at (v, at), up->path) == 0;
      /* A file over a folder hides what was under the folder. */
      if (same && ib_fsview_entry_at (v, at)->type == IB_FS_DIR && up->type != IB_FS_DIR)
        hidden[n_hidden++] = up->path;
      pieces_splice (v, at, same ? at + 1 : at, put_up (v, up, layer, steal));
    }
  if (steal)
    ib_fs_strings_adopt (&v->strings, &list->strings);
  for (size_t i = 0; i < n_hidden; i++)
    remove_tree (v, hidden[i], false);
}

/* Stack LIST as layer LAYER.  With STEAL its strings move into the view
 * instead of being copied (LIST is freed next).  Both sides are sorted:
 * each of LIST's entries is placed by binary search, the array grows in
 * place, and the view's entries move back as blocks, from the end: an
 * overlay of 23 files over a base of 60,000 entries is 23 searches and a
 * few moves, and a base of many layers never holds two copies of its
 * array (a merge into a new one was the warm build's peak at 16 GB). */
static void
push_list (struct ib_fsview *v, struct ib_fs_list *list, int layer, bool steal)
{
  if (v->pieces && list->n > IN_PLACE_PUSH)
    make_whole (v);
  if (v->pieces)
    {
      push_in_place (v, list, layer, steal);
      return;
    }
  if (v->n == 0 && steal)
    {
      ib_fs_strings_adopt (&v->strings, &list->strings);
      take_list (v, list, layer);
      return;
    }
  remove_marked (v, list);
  cleanup_free size_t *pos = ib_xcalloc (list->n + 1, sizeof (*pos));
  cleanup_free bool *same = ib_xcalloc (list->n + 1, sizeof (*same));
  cleanup_free const char **hidden = ib_xcalloc (list->n + 1, sizeof (*hidden));
  size_t n_hidden = 0, n_new = place_list (v, list, pos, same, hidden, &n_hidden);
  if (v->n + n_new > v->cap)
    {
      v->cap = v->n + n_new;
      v->e = ib_xrealloc (v->e, (v->cap ? v->cap : 1) * sizeof (*v->e));
    }
  size_t old = v->n, w = v->n + n_new; /* the view's entries [0, old) are still to place, below w */
  for (size_t b = list->n; b-- > 0;)
    {
      const struct ib_fs_entry *up = &list->e[b];
      if (is_marker (up))
        continue;
      size_t from = pos[b] + (same[b] ? 1 : 0);
      if (old > from)
        memmove (&v->e[w - (old - from)], &v->e[from], (old - from) * sizeof (*v->e));
      w -= old - from;
      old = pos[b];
      w--;
      if (steal)
        {
          v->e[w] = *up;
          v->e[w].layer = layer;
        }
      else
        copy_entry (v, &v->e[w], up, layer);
    }
  v->n += n_new;
  if (steal)
    ib_fs_strings_adopt (&v->strings, &list->strings);
  for (size_t i = 0; i < n_hidden; i++)
    remove_tree (v, hidden[i], false);
}

void
ib_fsview_push (struct ib_fsview *v, const struct ib_fs_list *list, int layer)
{
  push_list (v, (struct ib_fs_list *) list, layer, false);
}

static int
push_layers (struct ib_fsview *v, struct ib_store *s, const struct ib_image *img, size_t first,
             const struct ib_fsview_judge *judge, ib_error_t *err)
{
  /* Judged, the layers above the first are listed ahead only once it passed. */
  size_t ahead = judge ? first + 1 : first;
  for (size_t i = first; i < img->n_layers; i++)
    {
      if (i == ahead)
        ib_fs_list_layers_ahead (s, img, ahead);
      struct ib_fs_list *l;
      if (ib_fs_list_layer (s, &img->layers[i], &img->diff_ids[i], &l, err) < 0)
        return -1;
      push_list (v, l, (int) i, true);
      /* The paths the merge compared, given back: the view's pages grow
       * with what a check reads, not with every layer merged. */
      ib_fs_strings_release (v->strings);
      size_t h0 = v->n_hazards;
      for (size_t k = 0; k < l->n_hazards; k++)
        {
          v->hazards = ib_xrealloc (v->hazards, (v->n_hazards + 1) * sizeof (*v->hazards));
          v->hazards[v->n_hazards++] = ib_xasprintf ("layer %s: %s", img->layers[i].digest.s, l->hazards[k]);
        }
      ib_fs_list_free (l);
      if (judge && judge->layer (judge->data, i, (const char *const *) v->hazards + h0, v->n_hazards - h0, err) < 0)
        return -1;
    }
  return 0;
}

int
ib_fsview_push_layers (struct ib_fsview *v, struct ib_store *s, const struct ib_image *img, size_t first,
                       ib_error_t *err)
{
  return push_layers (v, s, img, first, NULL, err);
}

/* The view of IMG's layers kept whole (fscache.h), for an image of two
 * layers or more: named by their ChainID in the cache `views`, read only
 * when every layer's blob is trusted, as a layer's list is.  On a base of
 * 8 layers and 190,000 entries, loading and merging the 8 lists was a
 * sixth of a warm build (45e6 of 269e6 instructions), and grew with the
 * number of layers; one file is loaded as one list is. */
static int
view_cache_path (struct ib_store *s, const struct ib_image *img, char **path, ib_digest *chain, ib_error_t *err)
{
  *path = NULL;
  if (img->n_layers < 2)
    return 0;
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "views", &dir, err) < 0)
    return -1;
  chain->s[0] = '\0';
  for (size_t i = 0; i < img->n_layers; i++)
    ib_chain_id_next (chain, img->diff_ids[i].s);
  *path = ib_path_join (dir, ib_digest_hex (chain->s));
  return 0;
}

bool
ib_fsview_map (struct ib_fsview *v, const char *path, const ib_digest *chain, size_t n_layers)
{
  struct ib_fs_list hz = { 0 };
  if (v->n || v->pieces || !ib_fs_view_cache_map (path, chain, n_layers, &v->strings, &v->map, &hz))
    return false;
  v->hazards = hz.hazards;
  v->n_hazards = hz.n_hazards;
  v->n = v->map.n;
  v->base = base_new (v->map.n);
  v->pieces = ib_xcalloc (1, sizeof (*v->pieces));
  v->pieces[0] = (struct ib_fsview_piece){ .len = v->map.n };
  v->n_pieces = v->map.n ? 1 : 0;
  struct stat st;
  if (stat (path, &st) == 0)
    {
      v->map_path = ib_xstrdup (path);
      v->map_id[0] = (uint64_t) st.st_dev;
      v->map_id[1] = (uint64_t) st.st_ino;
      v->map_id[2] = (uint64_t) st.st_size;
      v->map_id[3] = (uint64_t) st.st_mtim.tv_sec * 1000000000u + (uint64_t) st.st_mtim.tv_nsec;
    }
  return true;
}

static bool
view_cache_load (struct ib_store *s, const struct ib_image *img, const char *path, const ib_digest *chain,
                 struct ib_fsview *v)
{
  for (size_t i = 0; i < img->n_layers; i++)
    if (!ib_store_blob_trusted (s, &img->layers[i].digest))
      return false;
  return ib_fsview_map (v, path, chain, img->n_layers);
}

static int
view_cache_save (const struct ib_fsview *v, const char *path, const ib_digest *chain, ib_error_t *err)
{
  const struct ib_fs_list whole
      = { .n = v->n, .e = v->e, .n_hazards = v->n_hazards, .hazards = v->hazards, .strings = v->strings };
  return ib_fs_view_cache_save (path, chain, &whole, err);
}

int
ib_fsview_of_image (struct ib_store *s, const struct ib_image *img, struct ib_fsview **out, ib_error_t *err)
{
  return ib_fsview_of_image_judged (s, img, NULL, out, err);
}

int
ib_fsview_of_image_judged (struct ib_store *s, const struct ib_image *img, const struct ib_fsview_judge *judge,
                           struct ib_fsview **out, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  ib_digest chain;
  if (view_cache_path (s, img, &cache, &chain, err) < 0)
    return -1;
  struct ib_fsview *v = ib_fsview_new ();
  if (cache && view_cache_load (s, img, cache, &chain, v))
    {
      *out = v;
      return 0;
    }
  if (push_layers (v, s, img, 0, judge, err) < 0 || (cache && view_cache_save (v, cache, &chain, err) < 0))
    {
      ib_fsview_free (v);
      return -1;
    }
  /* The view as kept, read back in place: the whole one (an entry of 48
   * bytes for each of a base's 336,000 at 30 GB, and the layers' lists it
   * points into) is given back before the checks run, as a warm build
   * would never have made it.  A view that was not kept stays whole. */
  struct ib_fsview *kept = ib_fsview_new ();
  if (cache && ib_fsview_map (kept, cache, &chain, img->n_layers))
    {
      ib_fsview_free (v);
      v = kept;
      malloc_trim (0);
    }
  else
    ib_fsview_free (kept);
  *out = v;
  return 0;
}

/* A lookup's binary search reads records and paths all over a view read
 * in place, and each page read maps the 16 around it: a cold build's last
 * checks (the SBOM's package files and the links they follow, the native
 * gate's libraries) made some thousands, which left 55 MB of the 30 GB
 * base's kept view resident, most of the build's peak.  The pages are
 * given back every this many lookups (a warm build makes some 1,500, most
 * of them in the same few pages, read again at once). */
#define LOOKUP_RELEASE 64

const struct ib_fs_entry *
ib_fsview_lookup (const struct ib_fsview *v, const char *path)
{
  /* Like the hint, the count is state a read changes: one thread reads. */
  if (++((struct ib_fsview *) v)->lookups % LOOKUP_RELEASE == 0)
    ib_fs_strings_release (v->strings);
  size_t at = lower_bound (v, path);
  const struct ib_fs_entry *e
      = at < v->n && strcmp (ib_fsview_path_at (v, at), path) == 0 ? ib_fsview_entry_at (v, at) : NULL;
  if (v->obs)
    v->obs->seen (v->obs->data, path, e);
  return e;
}

void
ib_fsview_observe (struct ib_fsview *v, const struct ib_fsview_observer *o)
{
  v->obs = o;
}

size_t
ib_fsview_count (const struct ib_fsview *v)
{
  return v->n;
}

/* A walk of the whole view reads every entry's path (and a check, some
 * digests): the pages of the mapped lists it read are given back every
 * this many entries, so that a walk holds a window of the lists, not all
 * of them (13 MB of paths over a base of 190,000 entries, and a build
 * walks its views a few times at once).  Fault-around reads them again by
 * 16 pages, for some 200 faults a walk. */
#define WALK_RELEASE 8192

void
ib_fsview_walked (const struct ib_fsview *v, size_t i)
{
  if (i % WALK_RELEASE == WALK_RELEASE - 1)
    ib_fs_strings_release (v->strings);
}

const char *
ib_fsview_path (const struct ib_fsview *v, size_t i)
{
  ib_fsview_walked (v, i);
  return i < v->n ? ib_fsview_path_at (v, i) : NULL;
}

const struct ib_fs_entry *
ib_fsview_at (const struct ib_fsview *v, size_t i)
{
  ib_fsview_walked (v, i);
  return i < v->n ? ib_fsview_entry_at (v, i) : NULL;
}

/* E added to *LIST when it is of layer FIRST or above. */
static void
take_from_layer (const struct ib_fs_entry ***list, size_t *n, size_t *cap, const struct ib_fs_entry *e, int first)
{
  if (e->layer < first)
    return;
  if (*n == *cap)
    *list = ib_xrealloc (*list, (*cap = *cap ? 2 * *cap : 64) * sizeof (**list));
  (*list)[(*n)++] = e;
}

size_t
ib_fsview_from_layer (const struct ib_fsview *v, int first, const struct ib_fs_entry ***out)
{
  const struct ib_fs_entry **list = NULL;
  size_t n = 0, cap = 0;
  /* Read in place, the base's records are all of layers below the map's
   * count: above it, only the pieces pushed are looked at. */
  bool upper_only = v->pieces && first >= 0 && (unsigned) first >= v->map.n_layers;
  for (size_t p = 0; upper_only && p < v->n_pieces; p++)
    for (size_t k = 0; v->pieces[p].up && k < v->pieces[p].len; k++)
      take_from_layer (&list, &n, &cap, &v->e[v->pieces[p].from + k], first);
  for (size_t i = 0; !upper_only && i < v->n; i++)
    take_from_layer (&list, &n, &cap, ib_fsview_at (v, i), first);
  *out = list;
  return n;
}

const struct ib_fs_entry *
ib_fsview_follow (const struct ib_fsview *v, const struct ib_fs_entry *e)
{
  /* As the kernel follows it: a target with "..", or through a linked
   * folder (torch/lib/libc10.so -> ../../../../x86_64-linux-gnu/libc10.so
   * with /lib -> usr/lib), leads where it leads in the image. */
  if (e && e->type == IB_FS_SYMLINK)
    e = ib_fsview_resolve (v, e->path, NULL);
  return e && e->type == IB_FS_FILE ? e : NULL;
}

/* Push the components of PATH onto the pending stack, last first, so that
 * the first component is popped next. */
static void
push_components (char ***stack, size_t *n, const char *path)
{
  cleanup_free char *copy = ib_xstrdup (path);
  char *parts[4096];
  size_t k = 0;
  for (char *save = NULL, *t = strtok_r (copy, "/", &save); t && k < 4096; t = strtok_r (NULL, "/", &save))
    parts[k++] = t;
  *stack = ib_xrealloc (*stack, (*n + k + 1) * sizeof (**stack));
  while (k > 0)
    (*stack)[(*n)++] = ib_xstrdup (parts[--k]);
}

/* CUR (a clean view path, "" the root) without its last component. */
static void
path_up (char *cur)
{
  char *slash = strrchr (cur, '/');
  if (slash)
    *slash = '\0';
  else
    cur[0] = '\0';
}

const struct ib_fs_entry *
ib_fsview_resolve (const struct ib_fsview *v, const char *path, char **canon)
{
  char **stack = NULL;
  size_t n = 0;
  int links = 0;
  push_components (&stack, &n, path);
  char *cur = ib_xstrdup ("");
  const struct ib_fs_entry *e = NULL;
  bool ok = true;
  while (ok && n > 0)
    {
      char *comp = stack[--n];
      if (strcmp (comp, ".") == 0 || strcmp (comp, "..") == 0)
        {
          if (comp[1] == '.')
            path_up (cur);
          free (comp);
          e = *cur ? ib_fsview_lookup (v, cur) : NULL;
          continue;
        }
      char *next = *cur ? ib_xasprintf ("%s/%s", cur, comp) : ib_xstrdup (comp);
      free (comp);
      e = ib_fsview_lookup (v, next);
      if (e && (e->type == IB_FS_SYMLINK || e->type == IB_FS_HARDLINK) && e->link && ++links <= 40)
        {
          free (next);
          if (e->type == IB_FS_HARDLINK || e->link[0] == '/')
            cur[0] = '\0'; /* a hard link names its target from the root */
          push_components (&stack, &n, e->link);
          continue;
        }
      ok = e != NULL && (n == 0 || e->type == IB_FS_DIR);
      free (cur);
      cur = next;
    }
  while (n > 0)
    free (stack[--n]);
  free (stack);
  if (!ok || (e == NULL && *cur) || (e && (e->type == IB_FS_SYMLINK || e->type == IB_FS_HARDLINK)))
    {
      free (cur);
      return NULL;
    }
  if (canon)
    *canon = cur;
  else
    free (cur);
  return e;
}
