/* A view read in place (layers/view/fsview_private.h: the base's kept view mapped,
 * the layers pushed on it as pieces) answers as the same view held whole:
 * the oracle is the view merged from the same lists, which
 * fsview_stacks_layers_as_a_sorted_merge checks against a table. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/fscache.h"
#include "layers/view/fsview.h"
#include "layers/view/fsview_private.h"
#include "tests/unit/test.h"

enum
{
  DIRS = 31,
  FILES = 40
};

static struct ib_fs_entry
ent (const char *path, char type)
{
  return (struct ib_fs_entry){ .path = (char *) path, .type = type, .mode = 0644, .digest = "" };
}

static int
by_path (const void *a, const void *b)
{
  return strcmp (((const struct ib_fs_entry *) a)->path, ((const struct ib_fs_entry *) b)->path);
}

/* Both views entry by entry, every name looked up, and a few globs. */
static void
same_views (struct test_ctx *t, const struct ib_fsview *whole, const struct ib_fsview *in_place, char **names,
            size_t n_names, const char *when)
{
  int before = t->failures;
  CHECK (t, ib_fsview_count (whole) == ib_fsview_count (in_place));
  for (size_t i = 0; i < ib_fsview_count (whole) && i < ib_fsview_count (in_place); i++)
    {
      const struct ib_fs_entry *a = ib_fsview_at (whole, i), *b = ib_fsview_at (in_place, i);
      CHECK (t, strcmp (a->path, b->path) == 0 && a->layer == b->layer && a->type == b->type && a->size == b->size
                    && strcmp (a->digest, b->digest) == 0);
    }
  for (size_t i = 0; i < n_names; i++)
    {
      const struct ib_fs_entry *a = ib_fsview_lookup (whole, names[i]), *b = ib_fsview_lookup (in_place, names[i]);
      CHECK (t, (a == NULL) == (b == NULL));
      CHECK (t, a == NULL || b == NULL || (a->layer == b->layer && a->type == b->type && strcmp (a->path, b->path) == 0));
    }
  static const char *const patterns[] = { "*", "/d0*", "/d07/*", "*f01?", "/d1?/f0*", "/zz*", "/d20", "*/f0*", "*3" };
  for (size_t p = 0; p < sizeof (patterns) / sizeof (patterns[0]); p++)
    {
      const struct ib_fs_entry **a = NULL, **b = NULL;
      size_t na = ib_fsview_glob (whole, patterns[p], &a), nb = ib_fsview_glob (in_place, patterns[p], &b);
      CHECK (t, na == nb);
      for (size_t k = 0; k < na && k < nb; k++)
        CHECK (t, strcmp (a[k]->path, b[k]->path) == 0 && a[k]->layer == b[k]->layer);
      free (a);
      free (b);
    }
  if (t->failures != before)
    fprintf (stderr, "  views differ %s\n", when);
}

/* The layers pushed on the base: new files and files replaced (runs and
 * scattered), a file and a folder whited out, an opaque folder with new
 * files, a file over a folder, a new folder before the first path and
 * one after the last; then a layer larger than a push in place takes. */
static size_t
overlay (int k, char **names, struct ib_fs_entry *l, uint64_t *rng)
{
  size_t n = 0;
  static char extra[8][32];
  switch (k)
    {
    case 0:
      l[n++] = ent ("a-first", 'd');
      l[n++] = ent ("a-first/x", 'f');
      l[n++] = ent ("zz-last", 'f');
      break;
    case 1:
      l[n++] = ent ("d03", IB_FS_WHITEOUT);
      l[n++] = ent ("d04", IB_FS_OPAQUE);
      l[n++] = ent ("d04/new", 'f');
      l[n++] = ent ("d05", 'f'); /* a file over the folder d05 */
      l[n++] = ent ("d06/f007", IB_FS_WHITEOUT);
      break;
    case 2:
    case 3:
      for (int i = 0; i < DIRS * FILES; i++)
        {
          *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
          if (*rng % 97 == 0 || (k == 3 && i / FILES == 20 && i % 3 == 0))
            l[n++] = ent (names[DIRS + i], 'f');
        }
      snprintf (extra[k], sizeof (extra[k]), "d%02d/between-%d", 10 + k, k);
      l[n++] = ent (extra[k], 'f');
      break;
    default: /* larger than IN_PLACE_PUSH */
      for (int i = 0; i < DIRS * FILES; i += 2)
        l[n++] = ent (names[DIRS + i], 'f');
      l[n++] = ent ("d09", IB_FS_WHITEOUT);
      break;
    }
  qsort (l, n, sizeof (*l), by_path); /* a layer's list is sorted */
  return n;
}

void
fsview_in_place_answers_as_whole (struct test_ctx *t)
{
  char **names = ib_xcalloc (DIRS + DIRS * FILES + 8, sizeof (*names));
  size_t n_names = 0;
  for (int d = 0; d < DIRS; d++)
    names[n_names++] = ib_xasprintf ("d%02d", d);
  for (int i = 0; i < DIRS * FILES; i++)
    names[n_names++] = ib_xasprintf ("d%02d/f%03d", i / FILES, i % FILES);
  static const char *const more[] = { "a-first", "a-first/x", "zz-last", "d04/new", "d12/between-2", "d13/between-3" };
  for (size_t i = 0; i < sizeof (more) / sizeof (more[0]); i++)
    names[n_names++] = ib_xstrdup (more[i]);
  /* The base: two layers, the second replacing some files of the first. */
  struct ib_fs_entry *l = ib_xcalloc (DIRS + DIRS * FILES + 8, sizeof (*l));
  size_t n = 0;
  for (size_t i = 0; i < DIRS + DIRS * FILES; i++)
    {
      l[n] = ent (names[i], i < DIRS ? 'd' : 'f');
      l[n].size = i;
      n++;
    }
  qsort (l, n, sizeof (*l), by_path);
  struct ib_fsview *whole = ib_fsview_new ();
  struct ib_fs_list list = { .n = n, .e = l };
  ib_fsview_push (whole, &list, 0);
  n = 0;
  for (int i = 0; i < DIRS * FILES; i += 5)
    l[n++] = ent (names[DIRS + i], 'f');
  list.n = n;
  ib_fsview_push (whole, &list, 1);
  /* kept, and read back in place */
  ib_digest chain = { "sha256:9932074217c35353d2e03a3f5a86549f7c67bfeb0ba53e23d69f4d4c8f7958f5" };
  cleanup_free char *path = ib_xasprintf ("%s/view", test_tmpdir ());
  struct ib_fs_list kept = { .n = ib_fsview_count (whole) };
  kept.e = ib_xcalloc (kept.n + 1, sizeof (*kept.e));
  for (size_t i = 0; i < kept.n; i++)
    kept.e[i] = *ib_fsview_at (whole, i);
  ib_error_t err = NULL;
  CHECK (t, ib_fs_view_cache_save (path, &chain, &kept, &err) == 0);
  free (kept.e);
  struct ib_fsview *in_place = ib_fsview_new ();
  CHECK (t, ib_fsview_map (in_place, path, &chain, 2));
  CHECK (t, in_place->pieces != NULL);
  same_views (t, whole, in_place, names, n_names, "as kept");
  uint64_t rng = 0x9e3779b97f4a7c15u;
  for (int k = 0; k < 5; k++)
    {
      list.n = overlay (k, names, l, &rng);
      ib_fsview_push (whole, &list, 2 + k);
      ib_fsview_push (in_place, &list, 2 + k);
      /* A push in place keeps the base mapped; the last one is too large. */
      CHECK (t, (in_place->pieces != NULL) == (k < 4));
      char when[32];
      snprintf (when, sizeof (when), "after layer %d", 2 + k);
      same_views (t, whole, in_place, names, n_names, when);
    }
  ib_fsview_free (whole);
  ib_fsview_free (in_place);
  free (l);
  for (size_t i = 0; i < n_names; i++)
    free (names[i]);
  free (names);
}

/* A view read in place makes an entry only of the records a check reads:
 * a lookup of one path leaves the other records' entries unmade. */
void
fsview_in_place_reads_only_what_is_looked_up (struct test_ctx *t)
{
  enum { N = 20000 };
  struct ib_fs_entry *e = ib_xcalloc (N, sizeof (*e));
  for (size_t i = 0; i < N; i++)
    e[i] = ent (ib_xasprintf ("usr/lib/python3/dist-packages/m%05zu.py", i), 'f');
  struct ib_fs_list l = { .n = N, .e = e };
  ib_digest chain = { "sha256:1111111111111111111111111111111111111111111111111111111111111111" };
  cleanup_free char *path = ib_xasprintf ("%s/view", test_tmpdir ());
  ib_error_t err = NULL;
  CHECK (t, ib_fs_view_cache_save (path, &chain, &l, &err) == 0);
  struct ib_fsview *v = ib_fsview_new ();
  CHECK (t, ib_fsview_map (v, path, &chain, 1));
  const struct ib_fs_entry *hit = ib_fsview_lookup (v, "usr/lib/python3/dist-packages/m12345.py");
  CHECK (t, hit && hit->type == 'f' && hit->layer == 0);
  CHECK (t, ib_fsview_lookup (v, "usr/lib/python3/dist-packages/m12345.pyc") == NULL);
  size_t made = 0;
  for (size_t i = 0; v->base && i < v->map.n; i++)
    made += v->base[i].path != NULL;
  CHECK (t, made == 1);
  /* The entries of a layer above the base's: the pushed ones, found
   * without a walk of the base. */
  struct ib_fs_entry up[] = { ent ("usr/lib/python3/dist-packages/m12345.py", 'f'), ent ("zz/new.py", 'f') };
  struct ib_fs_list ul = { .n = 2, .e = up };
  ib_fsview_push (v, &ul, 1);
  const struct ib_fs_entry **upper = NULL;
  size_t n_upper = ib_fsview_from_layer (v, 1, &upper);
  CHECK (t, n_upper == 2 && strcmp (upper[0]->path, up[0].path) == 0 && strcmp (upper[1]->path, "zz/new.py") == 0);
  free (upper);
  made = 0;
  for (size_t i = 0; v->base && i < v->map.n; i++)
    made += v->base[i].path != NULL;
  CHECK (t, made == 1);
  CHECK (t, ib_fsview_from_layer (v, 0, &upper) == N + 1 && upper[N]->layer == 1);
  free (upper);
  ib_fsview_free (v);
  for (size_t i = 0; i < N; i++)
    free (e[i].path);
  free (e);
}

/* The file PATTERN's kept hits are in, beside the view at PATH (the only
 * one of that name there); NULL when none. */
static char *
kept_file (const char *path)
{
  cleanup_free char *dir = ib_xstrdup (path);
  char *slash = strrchr (dir, '/');
  *slash = '\0';
  size_t plen = strlen (slash + 1);
  char *found = NULL;
  DIR *d = opendir (dir);
  for (struct dirent *de; d && (de = readdir (d));)
    if (strncmp (de->d_name, slash + 1, plen) == 0 && strncmp (de->d_name + plen, ".glob-", 6) == 0)
      {
        free (found);
        found = ib_xasprintf ("%s/%s", dir, de->d_name);
      }
  if (d)
    closedir (d);
  return found;
}

static size_t
glob_count (const char *path, const ib_digest *chain, const char *pattern)
{
  struct ib_fsview *v = ib_fsview_new ();
  if (!ib_fsview_map (v, path, chain, 1))
    {
      ib_fsview_free (v);
      return (size_t) -1;
    }
  const struct ib_fs_entry **got = NULL;
  size_t n = ib_fsview_glob (v, pattern, &got);
  free (got);
  ib_fsview_free (v);
  return n;
}

/* A pattern that starts with a wildcard, over a view read in place, keeps
 * the base's hits beside the view's file, and the next view of that base
 * reads them instead of walking the records: a kept file with one hit
 * less (still well formed) answers one file less.  A damaged one (cut
 * short, or longer than its hits), one of another pattern, or one kept
 * for the view's file before it was written again, is not read: the
 * records are walked and the file written anew. */
void
fsview_in_place_globs_keep_the_base_hits (struct test_ctx *t)
{
  enum { N = 3000 };
  struct ib_fs_entry *e = ib_xcalloc (N, sizeof (*e));
  for (size_t i = 0; i < N; i++)
    e[i] = ent (ib_xasprintf ("usr/lib/m%04zu%s", i, i % 3 ? ".py" : ".so"), 'f');
  struct ib_fs_list l = { .n = N, .e = e };
  ib_digest chain = { "sha256:2222222222222222222222222222222222222222222222222222222222222222" };
  cleanup_free char *dir = ib_xasprintf ("%s/kept-globs", test_tmpdir ());
  ib_mkdir_p (dir, 0755, NULL);
  cleanup_free char *path = ib_xasprintf ("%s/view", dir);
  ib_error_t err = NULL;
  CHECK (t, ib_fs_view_cache_save (path, &chain, &l, &err) == 0);
  CHECK (t, glob_count (path, &chain, "*.so") == N / 3);
  cleanup_free char *kept = kept_file (path);
  CHECK (t, kept != NULL);
  cleanup_free char *text = NULL;
  size_t len = 0;
  CHECK (t, kept && ib_read_file (kept, 1 << 20, &text, &len, NULL) == 0);
  /* hits: the last N / 3 words; one fewer, and the count said so */
  if (text && len > N / 3 * 4 + 8)
    {
      uint64_t hits;
      memcpy (&hits, text + len - N / 3 * 4 - 8, 8);
      CHECK (t, hits == N / 3);
      hits--;
      memcpy (text + len - N / 3 * 4 - 8, &hits, 8);
      CHECK (t, ib_write_cache_file (kept, text, len - 4, NULL) == 0);
      CHECK (t, glob_count (path, &chain, "*.so") == N / 3 - 1);
      /* damaged: the count says more than the file holds */
      CHECK (t, ib_write_cache_file (kept, text, len - 8, NULL) == 0);
      CHECK (t, glob_count (path, &chain, "*.so") == N / 3);
      /* ... and written anew: read as it was first */
      cleanup_free char *again = NULL;
      size_t again_len = 0;
      CHECK (t, ib_read_file (kept, 1 << 20, &again, &again_len, NULL) == 0 && again_len == len);
      /* bytes after the hits: not read, and the file written anew */
      cleanup_free char *longer = ib_xcalloc (len + 4, 1);
      memcpy (longer, text, len);
      CHECK (t, ib_write_cache_file (kept, longer, len + 4, NULL) == 0);
      CHECK (t, glob_count (path, &chain, "*.so") == N / 3);
      cleanup_free char *rewritten = NULL;
      size_t rewritten_len = 0;
      CHECK (t, ib_read_file (kept, 1 << 20, &rewritten, &rewritten_len, NULL) == 0 && rewritten_len == len);
      /* a pattern whose file name is the same cannot read another's hits:
       * the file says its pattern */
      cleanup_free char *other = ib_xcalloc (len, 1);
      memcpy (other, text, len);
      char *pat = memmem (other, len, "*.so\n", 5);
      CHECK (t, pat != NULL);
      if (pat)
        {
          pat[3] = 'x';
          CHECK (t, ib_write_cache_file (kept, other, len, NULL) == 0);
          CHECK (t, glob_count (path, &chain, "*.so") == N / 3);
        }
      /* the view written again: the hits kept for the file before it are
       * not read (one fewer, as above, kept with the old file's identity) */
      memcpy (&hits, text + len - N / 3 * 4 - 8, 8);
      CHECK (t, ib_write_cache_file (kept, text, len - 4, NULL) == 0);
      CHECK (t, glob_count (path, &chain, "*.so") == N / 3 - 1);
      CHECK (t, ib_fs_view_cache_save (path, &chain, &l, &err) == 0);
      CHECK (t, glob_count (path, &chain, "*.so") == N / 3);
    }
  for (size_t i = 0; i < N; i++)
    free (e[i].path);
  free (e);
}

/* A view read in place gives back the pages that lookups and a glob's hits
 * read, as a walk does: a cold build's last checks look up thousands of
 * paths (the SBOM's package files, the links they follow) and take
 * thousands of hits ("*.so"), which left most of the 30 GB base's kept
 * view resident (55 of its 67 MB peak; issue 18).  Every path looked up in
 * order, as those checks do: each lookup's search ends on pages of its own. */
void
fsview_in_place_lookups_give_back_the_pages_they_read (struct test_ctx *t)
{
  enum { N = 60000 };
  struct ib_fs_entry *e = ib_xcalloc (N, sizeof (*e));
  for (size_t i = 0; i < N; i++)
    e[i] = ent (ib_xasprintf ("usr/lib/python3/dist-packages/pkg%04zu/a_module_with_a_longer_name_%06zu%s", i / 50,
                              i, i % 3 ? ".py" : ".so"),
                'f');
  struct ib_fs_list l = { .n = N, .e = e };
  ib_digest chain = { "sha256:3333333333333333333333333333333333333333333333333333333333333333" };
  cleanup_free char *path = ib_xasprintf ("%s/lookups-view", test_tmpdir ());
  ib_error_t err = NULL;
  CHECK (t, ib_fs_view_cache_save (path, &chain, &l, &err) == 0);
  struct stat st;
  CHECK (t, stat (path, &st) == 0 && st.st_size > 8 << 20);
  long file_kib = (long) (st.st_size >> 10);
  /* A glob's hits first, on a view of their own: a lookup makes an entry
   * of the record it finds, which a hit then no longer reads. */
  struct ib_fsview *v = ib_fsview_new ();
  CHECK (t, ib_fsview_map (v, path, &chain, 1));
  const struct ib_fs_entry **hits = NULL;
  size_t n_hits = ib_fsview_glob (v, "*.so", &hits);
  long after_glob = test_mapped_kib (path);
  CHECK (t, n_hits == (N + 2) / 3);
  free (hits);
  ib_fsview_free (v);
  v = ib_fsview_new ();
  CHECK (t, ib_fsview_map (v, path, &chain, 1));
  size_t found = 0;
  for (size_t i = 0; i < N; i++)
    found += ib_fsview_lookup (v, e[i].path) != NULL;
  long after_lookups = test_mapped_kib (path);
  CHECK (t, found == N);
  /* Given back as they go (a walk's window of 8,192 hits, 64 lookups'
   * pages): an eighth of the file at most, where all was read. */
  CHECK (t, after_glob < file_kib / 8);
  CHECK (t, after_lookups < file_kib / 8);
  ib_fsview_free (v);
  for (size_t i = 0; i < N; i++)
    free (e[i].path);
  free (e);
}
