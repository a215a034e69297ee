/* The reverse edges of the symbol gate: an overlay file that drops a name
 * which other modules of the base import ("from torch._jit_internal import
 * X", X removed) breaks those modules, not itself.  The base's imports of
 * the checked packages are indexed once per (base layers, python path,
 * packages) into the store's cache, one file of lines sorted by imported
 * module, and each overlay module's importers are checked against the
 * merged image. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/store/digest.h"
#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/symcache.h"
#include "symbol-check/symgate_private.h"

struct index_build
{
  struct sg_ctx *c;
  const struct ib_fsview *base;
  char **lines; /* "MODULE\tLINE GUARDED FROM PATH NAMES" */
  size_t n;
};

static void
index_module (struct index_build *b, const struct ib_fs_entry *e, const struct ib_py_module *m)
{
  for (size_t i = 0; i < m->n_imports; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      if (im->n_names == 0 || !sg_in_packages (b->c, im->module) || strlen (im->module) > 200)
        continue;
      char *names = ib_xstrdup ("");
      for (size_t k = 0; k < im->n_names; k++)
        {
          char *next = ib_xasprintf ("%s%s%s", names, k ? "," : "", im->names[k].name);
          free (names);
          names = next;
        }
      b->lines = ib_xrealloc (b->lines, (b->n + 1) * sizeof (*b->lines));
      b->lines[b->n++] = ib_xasprintf ("%s\t%d %d %d %d %s %s%s%s", im->module, im->line, im->guarded, im->is_from,
                                       im->cond ? im->cond_line : 0, e->path, names, im->cond ? "\t" : "",
                                       im->cond ? im->cond : "");
      free (names);
    }
}

static int
index_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct index_build *b = data;
  cleanup_free char *src = NULL;
  size_t len;
  if (ib_reader_slurp (r, MAX_PY_SOURCE, &src, &len, err) < 0)
    return ib_error_wrap (err, "%s", e->path);
  cleanup_free char *package = sg_package_of (b->c, e->path);
  struct ib_py_module *m;
  if (ib_py_scan (src, len, package, &m, err) < 0)
    {
      ib_error_release (err); /* a base file we cannot read imports nothing we can check */
      return 0;
    }
  ib_symcache_save_py (b->c->py_cache, e->digest, package, m);
  b->c->st->scanned++;
  index_module (b, e, m);
  ib_py_module_free (m);
  return 0;
}

static int
cmp_line (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

#define INDEX_MAGIC "imgbuild-pyrevidx 4"

/* Write the index: one file, its lines sorted (each module's lines
 * together, its "#DIGEST" line first), written durably once.  It was one
 * file per imported module, each made durable by itself: 1,951 of them
 * and 3,902 fsyncs over the CUDA base, a second of a cold build's tail. */
static int
index_write (struct index_build *b, const char *path, ib_error_t *err)
{
  ib_qsort (b->lines, b->n, sizeof (*b->lines), cmp_line);
  char *text = NULL;
  size_t len = 0;
  ib_xappend (&text, &len, INDEX_MAGIC "\n", strlen (INDEX_MAGIC) + 1);
  for (size_t i = 0; i < b->n; i++)
    {
      ib_xappend (&text, &len, b->lines[i], strlen (b->lines[i]));
      ib_xappend (&text, &len, "\n", 1);
    }
  int r = ib_write_file_atomic (path, text, len, 0644, err);
  free (text);
  return r;
}

/* The index of the base below the overlay, built once per (base layers,
 * python path, packages). */
static int
reverse_index (struct sg_ctx *c, char **out, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (c->s, "pyrevidx", &cache, err) < 0)
    return -1;
  ib_sha256 *h = ib_sha256_new ();
  ib_sha256_update (h, INDEX_MAGIC "\n", strlen (INDEX_MAGIC) + 1);
  ib_sha256_update (h, c->root, strlen (c->root) + 1);
  for (size_t i = 0; i < c->r->n_packages; i++)
    ib_sha256_update (h, c->r->packages[i], strlen (c->r->packages[i]) + 1);
  for (int i = 0; i < c->r->first_checked_layer && (size_t) i < c->img->n_layers; i++)
    ib_sha256_update (h, c->img->diff_ids[i].s, strlen (c->img->diff_ids[i].s) + 1);
  ib_digest key;
  ib_sha256_final (h, &key);
  ib_sha256_free (h);
  *out = ib_path_join (cache, ib_digest_hex (key.s));
  if (access (*out, F_OK) == 0)
    return 0;
  struct ib_image base = *c->img;
  base.n_layers = (size_t) c->r->first_checked_layer < c->img->n_layers ? (size_t) c->r->first_checked_layer : c->img->n_layers;
  struct ib_fsview *bv = NULL;
  if (ib_fsview_of_image (c->s, &base, &bv, err) < 0)
    return -1;
  struct index_build b = { c, bv, NULL, 0 };
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0;
  for (size_t i = 0; i < ib_fsview_count (bv); i++)
    {
      /* The name first: the base's view is read in place, and an entry
       * made of each of its records (336,000 at 30 GB) was 16 MB of the
       * cold build's peak for the few thousand that are modules. */
      if (!sg_is_py_path_under_root (c, ib_fsview_path (bv, i)))
        continue;
      const struct ib_fs_entry *e = ib_fsview_at (bv, i);
      if (!sg_is_py_under_root (c, e))
        continue;
      cleanup_free char *mod = sg_module_of (c, e->path);
      if (!sg_in_packages (c, mod))
        continue;
      /* The base's own version of each module: what it defined. */
      b.lines = ib_xrealloc (b.lines, (b.n + 1) * sizeof (*b.lines));
      b.lines[b.n++] = ib_xasprintf ("%s\t#%s", mod, e->digest);
      cleanup_free char *package = sg_package_of (c, e->path);
      struct ib_py_module *m = ib_symcache_load_py (c->py_cache, e->digest, package);
      if (m == NULL)
        {
          sg_want (&wanted, &n, e);
          continue;
        }
      c->st->cached++;
      index_module (&b, e, m);
      ib_py_module_free (m);
    }
  int r = ib_extract_entries (c->s, &base, wanted, n, index_extracted, &b, err);
  free (wanted);
  if (r == 0)
    r = index_write (&b, *out, err);
  for (size_t i = 0; i < b.n; i++)
    free (b.lines[i]);
  free (b.lines);
  ib_fsview_free (bv);
  return r;
}

/* TEXT's lines, split in place (*N of them). */
static char **
split_lines (char *text, size_t *n)
{
  char **out = NULL;
  size_t cap = 0;
  char *save = NULL;
  for (char *l = strtok_r (text, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      if (*n == cap)
        {
          cap = cap ? cap * 2 : 1024;
          out = ib_xrealloc (out, cap * sizeof (*out));
        }
      out[(*n)++] = l;
    }
  return out;
}

/* The index of the first of the sorted LINES that is not before
 * "MODULE\t" (N when none). */
static size_t
first_line_of (char *const *lines, size_t n, const char *module)
{
  cleanup_free char *key = ib_xasprintf ("%s\t", module);
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (lines[mid], key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* One line of an index entry, checked against the merged image.  BASE is
 * what the base's own version of MODULE defined: a name it defined that the
 * overlay's version no longer does was removed, whatever run-time binding
 * the file also has. */
static void
check_importer (struct sg_ctx *c, const char *module, const struct ib_py_module *base, const struct sg_known *now, char *l)
{
  int line, guarded, from, cond_line, off = -1;
  char path[4096];
  if (sscanf (l, "%d %d %d %d %4095s %n", &line, &guarded, &from, &cond_line, path, &off) != 5 || off < 0)
    return;
  char *cond = strchr (l + off, '\t');
  if (cond)
    *cond++ = '\0';
  const struct ib_fs_entry *e = ib_fsview_lookup (c->view, path);
  if (e == NULL || e->layer >= c->r->first_checked_layer)
    return; /* gone, or replaced by the overlay: its own imports are checked */
  c->st->importers++;
  struct ib_py_import im = { .line = line, .is_from = from, .module = (char *) module, .guarded = guarded,
                             .cond = cond, .cond_line = cond ? cond_line : 0 };
  char *save = NULL;
  for (char *n = strtok_r (l + off, ",", &save); n; n = strtok_r (NULL, ",", &save))
    {
      im.names = ib_xrealloc (im.names, (im.n_names + 1) * sizeof (*im.names));
      im.names[im.n_names++] = (struct ib_py_alias){ n, NULL };
    }
  cleanup_free char *via = ib_xasprintf (" (imported by the image's %s; the overlay replaces %s)", sg_display (c, path), module);
  bool removed = false;
  enum ib_py_truth runs = sg_import_runs (c, &im);
  cleanup_free char *why = sg_why_a_warning (&im, runs, NULL);
  for (size_t i = 0; runs != IB_PY_FALSE && base && now && i < im.n_names; i++)
    if (ib_py_defines (base, im.names[i].name) && !ib_py_defines (now->m, im.names[i].name))
      {
        sg_problem (c, !*why, "%s:%d: from %s import %s: %s was defined in the base's %s and the overlay's no longer defines it (layer %s)%s%s",
                    sg_display (c, path), line, module, im.names[i].name, im.names[i].name, sg_display (c, now->e->path),
                    sg_layer_of (c, now->e), via, why);
        removed = true;
      }
  if (!removed && runs != IB_PY_FALSE)
    sg_check_import (c, sg_display (c, path), &im, via);
  free (im.names);
}

int
sg_check_reverse_edges (struct sg_ctx *c, ib_error_t *err)
{
  if (c->r->first_checked_layer <= 0 || c->r->n_packages == 0)
    return 0;
  bool any = false;
  for (size_t k = 0; k < c->n_known && !any; k++)
    any = c->known[k]->checked;
  if (!any)
    return 0;
  cleanup_free char *path = NULL, *text = NULL;
  cleanup_free char **lines = NULL;
  size_t n_lines = 0;
  /* A record that is not whole (written by hand, damaged) is made again. */
  for (int attempt = 0; attempt < 2 && (n_lines == 0 || strcmp (lines[0], INDEX_MAGIC) != 0); attempt++)
    {
      if (attempt)
        unlink (path);
      free (path);
      free (text);
      free (lines);
      path = text = NULL;
      n_lines = 0;
      if (reverse_index (c, &path, err) < 0 || ib_read_file (path, 1u << 30, &text, NULL, err) < 0)
        return ib_error_wrap (err, "the reverse-import index");
      lines = split_lines (text, &n_lines);
    }
  if (n_lines == 0 || strcmp (lines[0], INDEX_MAGIC) != 0)
    return ib_error (err, IB_EINTEGRITY, "the reverse-import index `%s` is not one of this version", path);
  size_t n_known = c->n_known;
  for (size_t k = 0; k < n_known; k++)
    {
      if (!c->known[k]->checked)
        continue;
      cleanup_free char *module = sg_module_of (c, c->known[k]->e->path);
      if (!sg_in_packages (c, module))
        continue;
      size_t ml = strlen (module);
      struct ib_py_module *base = NULL;
      /* Its lines, if any base module imports names from it. */
      for (size_t i = first_line_of (lines + 1, n_lines - 1, module) + 1;
           i < n_lines && strncmp (lines[i], module, ml) == 0 && lines[i][ml] == '\t'; i++)
        {
          char *l = lines[i] + ml + 1;
          if (l[0] == '#')
            {
              cleanup_free char *package = sg_package_of (c, c->known[k]->e->path);
              ib_py_module_free (base);
              base = ib_symcache_load_py (c->py_cache, l + 1, package);
              continue;
            }
          check_importer (c, module, base, c->known[k], l);
        }
      ib_py_module_free (base);
    }
  return 0;
}
