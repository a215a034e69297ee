#include "fsview.h"

#include <archive_entry.h>
#include <errno.h>
#include <fnmatch.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "fscache.h"
#include "../store/indexer.h"
#include "../layers/layer_reader.h"
#include "../layers/tarpath.h"

/* ---- one layer's list ---------------------------------------------------- */

void
ib_fs_list_free (struct ib_fs_list *l)
{
  if (l == NULL)
    return;
  for (size_t i = 0; i < l->n_hazards; i++)
    free (l->hazards[i]);
  free (l->hazards);
  free (l->e);
  ib_fs_strings_free (l->strings);
  free (l);
}

static void
add_hazard (struct ib_fs_list *l, const char *text)
{
  l->hazards = ib_xrealloc (l->hazards, (l->n_hazards + 1) * sizeof (*l->hazards));
  l->hazards[l->n_hazards++] = ib_xstrdup (text);
}

static int
cmp_entry (const void *a, const void *b)
{
  return strcmp (((const struct ib_fs_entry *) a)->path, ((const struct ib_fs_entry *) b)->path);
}

static struct ib_fs_entry *
list_append (struct ib_fs_list *l, size_t *cap)
{
  if (l->n == *cap)
    {
      *cap = *cap ? *cap * 2 : 256;
      l->e = ib_xrealloc (l->e, *cap * sizeof (*l->e));
    }
  struct ib_fs_entry *e = &l->e[l->n++];
  memset (e, 0, sizeof (*e));
  return e;
}

static char
type_of (struct archive_entry *ae)
{
  if (archive_entry_hardlink (ae))
    return IB_FS_HARDLINK;
  switch (archive_entry_filetype (ae))
    {
    case AE_IFREG:
      return IB_FS_FILE;
    case AE_IFDIR:
      return IB_FS_DIR;
    case AE_IFLNK:
      return IB_FS_SYMLINK;
    default:
      return IB_FS_OTHER;
    }
}

/* Whiteouts are files named ".wh.X" (delete X) or ".wh..wh..opq" (opaque
 * parent); they are turned into markers on the path they act on. */
static void
classify_whiteout (struct ib_fs_entry *e)
{
  char *slash = strrchr (e->path, '/');
  char *base = slash ? slash + 1 : e->path;
  if (strncmp (base, ".wh.", 4) != 0)
    return;
  if (strcmp (base, ".wh..wh..opq") == 0)
    {
      e->type = IB_FS_OPAQUE;
      if (slash)
        *slash = '\0';
      else
        e->path[0] = '\0';
      return;
    }
  e->type = IB_FS_WHITEOUT;
  for (char *c = base; (*c = c[4]) != '\0'; c++)
    ;
}

/* Hash a regular file's content and, when the store's indexers want it
 * (indexer.h), hand it to them in the same read. */
static int
hash_entry_data (struct ib_layer_reader *r, struct ib_fs_entry *e, struct ib_fs_strings **strings, char *buf,
                 size_t bufsz, const struct ib_store *s, const char *spool_dir, ib_error_t *err)
{
  ib_sha256 *h = ib_sha256_new ();
  struct ib_index_file ixf;
  bool indexing = false, first = true;
  for (;;)
    {
      ssize_t n = ib_layer_reader_data (r, buf, bufsz, err);
      if (n < 0)
        {
          ib_sha256_free (h);
          if (indexing)
            ib_index_file_abort (&ixf);
          return ib_error_wrap (err, "read `%s`", e->path);
        }
      if (first && spool_dir)
        indexing = ib_index_file_begin (&ixf, s, spool_dir, e->path, e->size, (const unsigned char *) buf, (size_t) n);
      first = false;
      if (n == 0)
        break;
      ib_sha256_update (h, buf, (size_t) n);
      if (indexing)
        ib_index_file_feed (&ixf, buf, (size_t) n);
    }
  ib_digest d;
  ib_sha256_final (h, &d);
  ib_sha256_free (h);
  e->digest = ib_fs_strings_add (strings, ib_digest_hex (d.s), 64);
  if (indexing)
    ib_index_file_end (&ixf, e->digest);
  return 0;
}

static int
compute_list (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id, struct ib_fs_list *l,
              ib_error_t *err)
{
  struct ib_layer_reader *r;
  if (ib_layer_reader_open (s, blob, diff_id, &r, err) < 0)
    return -1;
  size_t cap = 0;
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  /* The indexers' spool goes beside their caches; none, no indexing. */
  size_t n_ix;
  ib_store_indexers (s, &n_ix);
  cleanup_free char *spool_dir = NULL;
  if (n_ix && ib_store_cache_dir (s, "spool", &spool_dir, NULL) < 0)
    spool_dir = NULL;
  struct archive_entry *ae;
  int x;
  while ((x = ib_layer_reader_next (r, &ae, err)) == 1)
    {
      cleanup_free char *path = ib_clean_tar_path (archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "");
      if (path == NULL)
        continue; /* the root folder itself, or a hostile ".." entry that no extractor may follow */
      struct ib_fs_entry *e = list_append (l, &cap);
      e->path = ib_fs_strings_add (&l->strings, path, strlen (path));
      e->digest = "";
      e->type = type_of (ae);
      e->mode = archive_entry_perm (ae);
      e->size = (uint64_t) archive_entry_size (ae);
      const char *link = e->type == IB_FS_HARDLINK ? archive_entry_hardlink (ae) : archive_entry_symlink (ae);
      if (link)
        e->link = ib_fs_strings_add (&l->strings, link, strlen (link));
      if (e->type == IB_FS_FILE && hash_entry_data (r, e, &l->strings, buf, 1 << 20, s, spool_dir, err) < 0)
        {
          ib_layer_reader_free (r);
          return -1;
        }
      classify_whiteout (e);
    }
  if (x == 0)
    x = ib_layer_reader_end (r, NULL, err);
  size_t nh;
  const char *const *h = ib_layer_reader_hazards (r, &nh);
  for (size_t i = 0; x == 0 && i < nh; i++)
    add_hazard (l, h[i]);
  ib_layer_reader_free (r);
  if (x < 0)
    return -1;
  ib_qsort (l->e, l->n, sizeof (*l->e), cmp_entry);
  return 0;
}

/* A path as one field of a line of text (link-check/memo.c's): '\\', '\t'
 * and '\n' escaped. */
void
ib_fs_put_escaped (FILE *f, const char *s)
{
  for (; *s; s++)
    {
      if (*s == '\\')
        fputs ("\\\\", f);
      else if (*s == '\n')
        fputs ("\\n", f);
      else if (*s == '\t')
        fputs ("\\t", f);
      else
        fputc (*s, f);
    }
}

/* Undo ib_fs_put_escaped: S in place, and a copy of it. */
char *
ib_fs_unescape (char *s)
{
  /* Most paths have nothing escaped: copied whole, not byte by byte. */
  char *o = strchr (s, '\\');
  if (o == NULL)
    return ib_xstrdup (s);
  for (char *c = o; *c; c++)
    {
      if (*c == '\\' && c[1])
        {
          c++;
          *o++ = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
        }
      else
        *o++ = *c;
    }
  *o = '\0';
  return ib_xstrdup (s);
}

int
ib_fs_list_layer (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id,
                  struct ib_fs_list **out, ib_error_t *err)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "files", &dir, err) < 0)
    return -1;
  cleanup_free char *cache = ib_path_join (dir, ib_digest_hex (diff_id->s));
  struct ib_fs_list *l = ib_xcalloc (1, sizeof (*l));
  if (ib_store_blob_trusted (s, &blob->digest) && ib_fs_cache_load (cache, diff_id, l))
    {
      *out = l;
      return 0;
    }
  ib_fs_list_free (l);
  l = ib_xcalloc (1, sizeof (*l));
  if (compute_list (s, blob, diff_id, l, err) < 0 || ib_fs_cache_save (cache, diff_id, l, err) < 0)
    {
      ib_fs_list_free (l);
      return -1;
    }
  /* The list as saved, read back mapped: its strings and digests on the
   * heap were some 180 bytes an entry, and a cold build over a base of
   * 190,000 entries held every layer's (55 of its 93 MB); mapped, the
   * digests are given back and the paths are file pages.  A list that was
   * not saved (too large to cache) stays as computed. */
  struct ib_fs_list *saved = ib_xcalloc (1, sizeof (*saved));
  if (ib_fs_cache_load (cache, diff_id, saved))
    {
      ib_fs_list_free (l);
      l = saved;
    }
  else
    ib_fs_list_free (saved);
  /* The pass's heap (the list computed, the indexers' file texts, the
   * tar check's names) is free but held by malloc between the view's
   * blocks: given back, as the next layer's pass would not reuse it all. */
  malloc_trim (0);
  *out = l;
  return 0;
}

/* ---- the merged view ----------------------------------------------------- */

struct ib_fsview
{
  size_t n, cap;
  struct ib_fs_entry *e; /* sorted by path */
  struct ib_fs_strings *strings; /* the entries' paths and link targets */
  char **hazards;
  size_t n_hazards;
  const struct ib_fsview_observer *obs; /* told of every read; NULL: none */
};

struct ib_fsview *
ib_fsview_new (void)
{
  return ib_xcalloc (1, sizeof (struct ib_fsview));
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
  ib_fs_strings_free (v->strings);
  free (v);
}

const char *const *
ib_fsview_hazards (const struct ib_fsview *v, size_t *n)
{
  *n = v->n_hazards;
  return (const char *const *) v->hazards;
}

/* The first entry in [FROM, TO) whose path is not below PATH (TO when none). */
static size_t
lower_bound_in (const struct ib_fsview *v, size_t from, size_t to, const char *path)
{
  size_t lo = from, hi = to;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (v->e[mid].path, path) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static size_t
lower_bound (const struct ib_fsview *v, const char *path)
{
  return lower_bound_in (v, 0, v->n, path);
}

/* Remove the entries under DIR (and DIR itself when WITH_SELF); "" is the
 * root.  Paths that share a prefix are contiguous in sorted order, so the
 * range starts at the lower bound of "DIR/". */
static void
remove_tree (struct ib_fsview *v, const char *dir, bool with_self)
{
  if (with_self)
    {
      size_t at = lower_bound (v, dir);
      if (at < v->n && strcmp (v->e[at].path, dir) == 0)
        {
          memmove (&v->e[at], &v->e[at + 1], (v->n - at - 1) * sizeof (*v->e));
          v->n--;
        }
    }
  cleanup_free char *prefix = *dir ? ib_xasprintf ("%s/", dir) : ib_xstrdup ("");
  size_t pl = strlen (prefix);
  size_t from = lower_bound (v, prefix), to = from;
  while (to < v->n && strncmp (v->e[to].path, prefix, pl) == 0)
    to++;
  /* Nothing under it (an empty view has no array at all: memmove of a
   * null pointer is undefined even for no bytes, UBSan says). */
  if (to == from)
    return;
  memmove (&v->e[from], &v->e[to], (v->n - to) * sizeof (*v->e));
  v->n -= to - from;
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
      return lower_bound_in (v, lo + 1, hi, path); /* the answer is in (lo, hi] */
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
  if (v->n == 0 && steal)
    {
      ib_fs_strings_adopt (&v->strings, &list->strings);
      take_list (v, list, layer);
      return;
    }
  for (size_t i = 0; i < list->n; i++)
    if (list->e[i].type == IB_FS_OPAQUE)
      remove_tree (v, list->e[i].path, false);
  for (size_t i = 0; i < list->n; i++)
    if (list->e[i].type == IB_FS_WHITEOUT && !names_nothing (list->e[i].path))
      remove_tree (v, list->e[i].path, true);
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

int
ib_fsview_push_layers (struct ib_fsview *v, struct ib_store *s, const struct ib_image *img, size_t first,
                       ib_error_t *err)
{
  for (size_t i = first; i < img->n_layers; i++)
    {
      struct ib_fs_list *l;
      if (ib_fs_list_layer (s, &img->layers[i], &img->diff_ids[i], &l, err) < 0)
        return -1;
      push_list (v, l, (int) i, true);
      /* The paths the merge compared, given back: the view's pages grow
       * with what a check reads, not with every layer merged. */
      ib_fs_strings_release (v->strings);
      for (size_t k = 0; k < l->n_hazards; k++)
        {
          v->hazards = ib_xrealloc (v->hazards, (v->n_hazards + 1) * sizeof (*v->hazards));
          v->hazards[v->n_hazards++] = ib_xasprintf ("layer %s: %s", img->layers[i].digest.s, l->hazards[k]);
        }
      ib_fs_list_free (l);
    }
  return 0;
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

static bool
view_cache_load (struct ib_store *s, const struct ib_image *img, const char *path, const ib_digest *chain,
                 struct ib_fsview *v)
{
  for (size_t i = 0; i < img->n_layers; i++)
    if (!ib_store_blob_trusted (s, &img->layers[i].digest))
      return false;
  struct ib_fs_list l = { 0 };
  if (!ib_fs_view_cache_load (path, chain, img->n_layers, &l))
    return false;
  v->e = l.e;
  v->n = v->cap = l.n;
  v->strings = l.strings;
  v->hazards = l.hazards;
  v->n_hazards = l.n_hazards;
  return true;
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
  if (ib_fsview_push_layers (v, s, img, 0, err) < 0 || (cache && view_cache_save (v, cache, &chain, err) < 0))
    {
      ib_fsview_free (v);
      return -1;
    }
  *out = v;
  return 0;
}

const struct ib_fs_entry *
ib_fsview_lookup (const struct ib_fsview *v, const char *path)
{
  size_t at = lower_bound (v, path);
  const struct ib_fs_entry *e = at < v->n && strcmp (v->e[at].path, path) == 0 ? &v->e[at] : NULL;
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

static void
walked (const struct ib_fsview *v, size_t i)
{
  if (i % WALK_RELEASE == WALK_RELEASE - 1)
    ib_fs_strings_release (v->strings);
}

const struct ib_fs_entry *
ib_fsview_at (const struct ib_fsview *v, size_t i)
{
  walked (v, i);
  return i < v->n ? &v->e[i] : NULL;
}

const struct ib_fs_entry *
ib_fsview_follow (const struct ib_fsview *v, const struct ib_fs_entry *e)
{
  for (int hops = 0; e && e->type == IB_FS_SYMLINK && hops < 16; hops++)
    {
      cleanup_free char *dir = ib_xstrdup (e->path);
      char *slash = strrchr (dir, '/');
      if (slash)
        *slash = '\0';
      else
        dir[0] = '\0';
      cleanup_free char *joined
          = e->link[0] == '/' || !*dir ? ib_xstrdup (e->link) : ib_xasprintf ("%s/%s", dir, e->link);
      cleanup_free char *clean = ib_clean_tar_path (joined);
      e = clean ? ib_fsview_lookup (v, clean) : NULL;
    }
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

/* The entries PATTERN can match: those whose "/PATH" starts with its
 * literal head (what comes before its first `*`, `?`, `[` or `\\`), one
 * range of the sorted view.  fnmatch without flags matches literal
 * characters only by themselves, so nothing outside the range matches:
 * a base of 60,000 entries is otherwise 60,000 fnmatch calls per pattern. */
static void
glob_range (const struct ib_fsview *v, const char *pattern, size_t *from, size_t *to)
{
  size_t head = strcspn (pattern, "*?[\\");
  *from = 0;
  *to = v->n;
  if (head == 0)
    return;
  if (pattern[0] != '/')
    {
      *to = 0; /* every candidate starts with "/" */
      return;
    }
  cleanup_free char *prefix = strndup (pattern + 1, head - 1);
  *from = lower_bound (v, prefix);
  for (*to = *from; *to < v->n && strncmp (v->e[*to].path, prefix, head - 1) == 0;)
    ++*to;
}

/* The first RUN bytes of C in [AT, END), or NULL.  Runs are short (".so.")
 * and paths rarely hold their first byte: memchr skips ahead with vector
 * instructions where memmem builds its search tables on every call, which
 * was a third of the default kernel globs over a base. */
static const char *
find_run (const char *at, const char *end, const char *c, size_t run)
{
  while ((size_t) (end - at) >= run)
    {
      const char *p = memchr (at, c[0], (size_t) (end - at) - run + 1);
      if (p == NULL)
        return NULL;
      if (memcmp (p, c, run) == 0)
        return p;
      at = p + 1;
    }
  return NULL;
}

/* Whether PATH can match PATTERN, cheaply: the pattern's literal runs
 * (between `*` and `?`) must occur in PATH in their order, the first at
 * its start unless the pattern starts with a wildcard, the last at its
 * end unless it ends with one.  Only a necessary condition (fnmatch
 * decides), and only for patterns without `[` or `\\`.  The default
 * kernel globs ("*.so", "*.so.*") start with `*`: glob_range cannot narrow
 * them, and fnmatch over 60,000 paths four times was a third of a warm
 * build. */
static bool
may_match (const char *pattern, const char *path)
{
  if (strpbrk (pattern, "[\\"))
    return true;
  size_t plen = strlen (path);
  const char *at = path;
  for (const char *c = pattern; *c;)
    {
      size_t run = strcspn (c, "*?");
      if (run == 0)
        {
          at += *c == '?'; /* `?` takes one character */
          if (at > path + plen)
            return false;
          c++;
          continue;
        }
      bool first = c == pattern, last = c[run] == '\0';
      if (last && !first)
        return (size_t) (path + plen - at) >= run && memcmp (path + plen - run, c, run) == 0;
      if (first)
        {
          if (strncmp (at, c, run) != 0 || (last && at[run] != '\0'))
            return false;
          at += run;
        }
      else
        {
          const char *found = find_run (at, path + plen, c, run);
          if (found == NULL)
            return false;
          at = found + run;
        }
      c += run;
    }
  return true;
}

/* Whether "/PATH" (PATH LEN bytes) ends with TAIL. */
static bool
abs_ends_with (const char *path, size_t len, const char *tail, size_t n)
{
  if (n > len + 1)
    return false;
  if (n == len + 1)
    return tail[0] == '/' && memcmp (path, tail + 1, len) == 0;
  return memcmp (path + len - n, tail, n) == 0;
}

/* The files PATTERN matches, added to LIST unless SEEN (by entry index). */
static void
glob_one (const struct ib_fsview *v, const char *pattern, unsigned char *seen, const struct ib_fs_entry ***list,
          size_t *n)
{
  size_t from, to, cap = 0;
  glob_range (v, pattern, &from, &to);
  /* The literal tail after the last wildcard, checked before anything
   * else: "*.so" rejects most of a view with one memcmp each. */
  const char *wild = NULL;
  for (const char *c = pattern; *c; c++)
    if (*c == '*' || *c == '?')
      wild = c;
  bool tail_ok = wild && wild[1] && !strpbrk (pattern, "[\\");
  size_t tail_len = tail_ok ? strlen (wild + 1) : 0;
  cleanup_free char *abs = NULL;
  for (size_t i = from; i < to; i++)
    {
      walked (v, i);
      size_t len = strlen (v->e[i].path);
      if (tail_ok && !abs_ends_with (v->e[i].path, len, wild + 1, tail_len))
        continue;
      if (len + 2 > cap)
        abs = ib_xrealloc (abs, cap = 2 * (len + 2));
      abs[0] = '/';
      memcpy (abs + 1, v->e[i].path, len + 1);
      if (!may_match (pattern, abs) || fnmatch (pattern, abs, 0) != 0)
        continue;
      if (v->obs)
        v->obs->seen (v->obs->data, v->e[i].path, &v->e[i]);
      const struct ib_fs_entry *file = ib_fsview_follow (v, &v->e[i]);
      if (file == NULL || seen[file - v->e])
        continue;
      seen[file - v->e] = 1;
      *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
      (*list)[(*n)++] = file;
    }
}

size_t
ib_fsview_glob_all (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                    const struct ib_fs_entry ***out)
{
  const struct ib_fs_entry **list = NULL;
  size_t n = 0;
  cleanup_free unsigned char *seen = ib_xcalloc (v->n + 1, 1);
  for (size_t p = 0; v->obs && p < n_patterns; p++)
    v->obs->pattern (v->obs->data, patterns[p]);
  for (size_t p = 0; p < n_patterns; p++)
    glob_one (v, patterns[p], seen, &list, &n);
  *out = list;
  return n;
}

size_t
ib_fsview_glob (const struct ib_fsview *v, const char *pattern, const struct ib_fs_entry ***out)
{
  return ib_fsview_glob_all (v, &pattern, 1, out);
}
