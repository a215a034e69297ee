/* The checked files of a warm build without reading the overlay.
 *
 * What a Python file defines and imports, and whether CPython compiles
 * it, are cached by its content digest (symcache.h), but the gate still
 * read its overlay's files out of the layer: it takes them in the order
 * the layer holds them, and that order is the order of its report (the
 * problems, the first warning kept as the example).  A view knows its
 * files by path only, so the order is kept here, per overlay: one record
 * per python path and sequence of checked layers (their diff_ids name
 * their content, so a record never goes stale), each line the path of a
 * file as the layers gave it (the view names the layer that provides it).
 *
 * A build whose record and every file's entries are there adds them as
 * the read would have, in that order; anything missing, a record that is
 * not whole or names other files than the view has, and the files are
 * read as before.  A layer that holds one path twice (the gate then checks
 * both copies) keeps no record. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/store/digest.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/symcache.h"
#include "symbol-check/symgate_private.h"

#define ORDER_MAGIC "imgbuild-pyorder 1"

static int
first_checked (const struct sg_ctx *c)
{
  return c->r->first_checked_layer > 0 ? c->r->first_checked_layer : 0;
}

/* The record's name: the python path and the checked layers' diff_ids;
 * NULL when no layer is checked. */
static char *
order_key (const struct sg_ctx *c)
{
  size_t first = (size_t) first_checked (c);
  if (first >= c->img->n_layers)
    return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fprintf (f, "%s\nroot ", ORDER_MAGIC);
  ib_fs_put_escaped (f, c->root);
  for (size_t i = first; i < c->img->n_layers; i++)
    fprintf (f, "\n%s", c->img->diff_ids[i].s);
  fclose (f);
  ib_digest d;
  ib_sha256_buf (text, len, &d);
  free (text);
  return ib_xstrdup (ib_digest_hex (d.s));
}

static char *
order_dir (const struct sg_ctx *c)
{
  char *dir = NULL;
  ib_error_t err = NULL;
  if (ib_store_cache_dir (c->s, "pyorder", &dir, &err) < 0)
    ib_error_release (&err);
  return dir;
}

static int
cmp_ptr (const void *a, const void *b)
{
  uintptr_t x = (uintptr_t) *(const void *const *) a, y = (uintptr_t) *(const void *const *) b;
  return x < y ? -1 : x > y;
}

/* Whether LIST (N entries) holds one entry twice. */
static bool
has_duplicate (const struct ib_fs_entry *const *list, size_t n)
{
  cleanup_free const struct ib_fs_entry **sorted = ib_xcalloc (n + 1, sizeof (*sorted));
  memcpy (sorted, list, n * sizeof (*sorted));
  ib_qsort (sorted, n, sizeof (*sorted), cmp_ptr);
  for (size_t i = 1; i < n; i++)
    if (sorted[i] == sorted[i - 1])
      return true;
  return false;
}

/* Whether A and B (N entries each; B without duplicates) hold the same. */
static bool
same_set (const struct ib_fs_entry *const *a, const struct ib_fs_entry *const *b, size_t n)
{
  cleanup_free const struct ib_fs_entry **x = ib_xcalloc (n + 1, sizeof (*x));
  cleanup_free const struct ib_fs_entry **y = ib_xcalloc (n + 1, sizeof (*y));
  memcpy (x, a, n * sizeof (*x));
  memcpy (y, b, n * sizeof (*y));
  ib_qsort (x, n, sizeof (*x), cmp_ptr);
  ib_qsort (y, n, sizeof (*y), cmp_ptr);
  return memcmp (x, y, n * sizeof (*x)) == 0;
}

/* The files of WANTED in the kept order (malloc'd), NULL when none is kept
 * for them: a record cut short, of another count, naming a path the view
 * lacks or one that is not a checked file. */
static const struct ib_fs_entry **
kept_order (const struct sg_ctx *c, const struct ib_fs_entry *const *wanted, size_t n)
{
  cleanup_free char *key = order_key (c);
  cleanup_free char *dir = key ? order_dir (c) : NULL;
  cleanup_free char *text = NULL;
  char *header = NULL, **lines = NULL;
  size_t n_lines = 0;
  if (dir == NULL || !ib_symcache_load (dir, key, &text, &header, &lines, &n_lines))
    return NULL;
  const struct ib_fs_entry **order = NULL;
  bool ok = strcmp (header, ORDER_MAGIC) == 0 && n_lines == n;
  if (ok)
    order = ib_xcalloc (n + 1, sizeof (*order));
  for (size_t i = 0; ok && i < n; i++)
    {
      cleanup_free char *path = ib_fs_unescape (lines[i]);
      ok = (order[i] = ib_fsview_lookup (c->view, path)) != NULL;
    }
  /* N entries, no two alike, each one of WANTED: WANTED, reordered. */
  ok = ok && same_set (order, wanted, n);
  for (size_t i = 0; i < n_lines; i++)
    free (lines[i]);
  free (lines);
  if (!ok)
    {
      free (order);
      return NULL;
    }
  return order;
}

/* The cached entries of one checked file: what it defines and imports,
 * and (when asked) CPython's answer; false when one is missing. */
static bool
load_file (struct sg_ctx *c, const struct ib_fs_entry *e, struct ib_py_module **m, struct ib_py_source *syntax)
{
  cleanup_free char *package = sg_package_of (c, e->path);
  *m = ib_symcache_load_py (c->py_cache, e->digest, package);
  *syntax = (struct ib_py_source){ 0 };
  return *m != NULL
         && (!sg_syntax_checked (c)
             || ib_symcache_load_syntax (c->syntax_cache, e->digest, &syntax->refused, &syntax->line, &syntax->msg));
}

bool
sg_checked_from_caches (struct sg_ctx *c, const struct ib_fs_entry *const *wanted, size_t n)
{
  if (n == 0)
    return false;
  cleanup_free const struct ib_fs_entry **order = kept_order (c, wanted, n);
  if (order == NULL)
    return false;
  struct ib_py_module **mods = ib_xcalloc (n, sizeof (*mods));
  struct ib_py_source *syntax = ib_xcalloc (n, sizeof (*syntax));
  size_t got = 0;
  while (got < n && load_file (c, order[got], &mods[got], &syntax[got]))
    got++;
  for (size_t i = 0; i < n; i++)
    {
      if (got < n)
        {
          ib_py_module_free (mods[i]);
          free (syntax[i].msg);
          continue;
        }
      /* As scan_extracted adds a file read out of the layer. */
      if (sg_syntax_checked (c))
        {
          c->st->compile_cached++;
          sg_source_add (c, order[i], syntax[i]);
        }
      c->st->cached++;
      sg_known_add (c, order[i], mods[i], true);
    }
  free (mods);
  free (syntax);
  return got == n;
}

void
sg_checked_order_save (struct sg_ctx *c)
{
  size_t n = c->n_read_order;
  cleanup_free char *key = n ? order_key (c) : NULL;
  cleanup_free char *dir = key ? order_dir (c) : NULL;
  /* A layer with a path twice gave more files than the view has: a
   * record of them would never be used. */
  if (dir == NULL || has_duplicate (c->read_order, n))
    return;
  char **lines = ib_xcalloc (n, sizeof (*lines));
  for (size_t i = 0; i < n; i++)
    {
      size_t len = 0;
      FILE *f = open_memstream (&lines[i], &len);
      ib_fs_put_escaped (f, c->read_order[i]->path);
      fclose (f);
    }
  ib_symcache_save (dir, key, ORDER_MAGIC, lines, n);
  for (size_t i = 0; i < n; i++)
    free (lines[i]);
  free (lines);
}
