#include "symgate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../layers/extract.h"
#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "elfsyms.h"
#include "pysyms.h"

#define MAX_PY_SOURCE (64u << 20)
#define PY_CACHE_MAGIC "imgbuild-pysyms 1"
#define ELF_CACHE_MAGIC "imgbuild-elfsyms 1"
/* The last line of a complete cache file: one cut short is recomputed. */
#define CACHE_END "\x01end"

struct known
{
  const struct ib_fs_entry *e;
  struct ib_py_module *m;
  bool checked; /* an overlay file: its imports are checked */
};

struct ctx
{
  struct ib_store *s;
  const struct ib_image *img;
  const struct ib_fsview *view;
  const struct ib_symbol_rules *r;
  char *root; /* the python path as a view path: "usr/local/…/dist-packages" */
  char *py_cache, *elf_cache;
  struct known *known;
  size_t n_known;
  ib_problem_fn fn;
  void *data;
  struct ib_symbol_stats *st;
};

static void problem (struct ctx *c, bool is_error, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
problem (struct ctx *c, bool is_error, const char *fmt, ...)
{
  if (is_error)
    c->st->errors++;
  else
    c->st->warnings++;
  va_list ap;
  va_start (ap, fmt);
  ib_vproblemf (c->fn, c->data, is_error, fmt, ap);
  va_end (ap);
}

/* "usr/…/dist-packages/vllm/x.py" -> "vllm/x.py" */
static const char *
display (const struct ctx *c, const char *path)
{
  size_t n = strlen (c->root);
  return strncmp (path, c->root, n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

static const char *
layer_of (const struct ctx *c, const struct ib_fs_entry *e)
{
  return e->layer >= 0 && (size_t) e->layer < c->img->n_layers ? c->img->layers[e->layer].digest.s : "?";
}

static struct known *
known_find (struct ctx *c, const struct ib_fs_entry *e)
{
  for (size_t i = 0; i < c->n_known; i++)
    if (c->known[i].e == e)
      return &c->known[i];
  return NULL;
}

static void
known_add (struct ctx *c, const struct ib_fs_entry *e, struct ib_py_module *m, bool checked)
{
  c->known = ib_xrealloc (c->known, (c->n_known + 1) * sizeof (*c->known));
  c->known[c->n_known++] = (struct known){ e, m, checked };
}

/* ---- the per-content cache of definitions -------------------------------- */

/* Both caches (definitions of a Python file, dynamic symbols of a shared
 * object) are a header line, then one name per line, then an end marker:
 * a file cut short is recomputed, never half-trusted. */
static void
cache_save (const char *dir, const char *digest, const char *header, char *const *names, size_t n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fprintf (f, "%s\n", header);
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s\n", names[i]);
  fprintf (f, "%s\n", CACHE_END);
  fclose (f);
  cleanup_free char *path = ib_path_join (dir, digest);
  /* A cache that cannot be written only costs time next build. */
  ib_write_cache_file (path, text, len, NULL);
  free (text);
}

/* The header line (in *HEADER) and the names; false when absent or cut. */
static bool
cache_load (const char *dir, const char *digest, char **text, char **header, char ***names, size_t *n)
{
  cleanup_free char *path = ib_path_join (dir, digest);
  size_t len, m = strlen (CACHE_END "\n");
  if (!digest[0] || ib_read_file (path, 1u << 30, text, &len, NULL) < 0)
    return false;
  if (len < m || strcmp (*text + len - m, CACHE_END "\n") != 0)
    return false;
  (*text)[len - m] = '\0';
  char *save = NULL;
  *header = strtok_r (*text, "\n", &save);
  *names = NULL;
  *n = 0;
  for (char *l = strtok_r (NULL, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      *names = ib_xrealloc (*names, (*n + 1) * sizeof (**names));
      (*names)[(*n)++] = ib_xstrdup (l);
    }
  return *header != NULL;
}

static void
py_cache_save (struct ctx *c, const struct ib_fs_entry *e, const struct ib_py_module *m)
{
  cleanup_free char *header = ib_xasprintf ("%s getattr=%d star=%d", PY_CACHE_MAGIC, m->has_getattr,
                                            m->has_star_import);
  cache_save (c->py_cache, e->digest, header, m->defs, m->n_defs);
}

static struct ib_py_module *
py_cache_load (struct ctx *c, const struct ib_fs_entry *e)
{
  cleanup_free char *text = NULL;
  char *header, **names;
  size_t n;
  int getattr, star;
  if (!cache_load (c->py_cache, e->digest, &text, &header, &names, &n))
    return NULL;
  struct ib_py_module *m = ib_xcalloc (1, sizeof (*m));
  m->defs = names;
  m->n_defs = n;
  if (sscanf (header, PY_CACHE_MAGIC " getattr=%d star=%d", &getattr, &star) != 2)
    {
      ib_py_module_free (m);
      return NULL;
    }
  m->has_getattr = getattr;
  m->has_star_import = star;
  return m;
}

/* ---- finding modules in the view ----------------------------------------- */

static const struct ib_fs_entry *
lookup_file (const struct ctx *c, const char *rel)
{
  cleanup_free char *p = ib_path_join (c->root, rel);
  const struct ib_fs_entry *e = ib_fsview_lookup (c->view, p);
  return e && e->type == IB_FS_FILE ? e : NULL;
}

/* The file of module M ("vllm.x.y"): vllm/x/y.py or vllm/x/y/__init__.py. */
static const struct ib_fs_entry *
find_module (const struct ctx *c, const char *m, bool *is_package)
{
  cleanup_free char *rel = ib_xstrdup (m);
  for (char *p = rel; *p; p++)
    if (*p == '.')
      *p = '/';
  cleanup_free char *as_file = ib_xasprintf ("%s.py", rel);
  cleanup_free char *as_pkg = ib_xasprintf ("%s/__init__.py", rel);
  const struct ib_fs_entry *e = lookup_file (c, as_pkg);
  *is_package = e != NULL;
  return e ? e : lookup_file (c, as_file);
}

static bool
in_checked_package (const struct ctx *c, const char *module)
{
  for (size_t i = 0; i < c->r->n_packages; i++)
    {
      size_t n = strlen (c->r->packages[i]);
      if (strncmp (module, c->r->packages[i], n) == 0 && (module[n] == '\0' || module[n] == '.'))
        return true;
    }
  return false;
}

/* The package a checked file's relative imports resolve against: its
 * folder, for a module and for a package's __init__.py alike. */
static char *
package_of (const struct ctx *c, const char *path)
{
  char *rel = ib_xstrdup (display (c, path));
  char *slash = strrchr (rel, '/');
  if (slash)
    *slash = '\0';
  else
    rel[0] = '\0';
  for (char *p = rel; *p; p++)
    if (*p == '/')
      *p = '.';
  return rel;
}

/* ---- reading Python files out of the layers ------------------------------ */

static int
scan_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct ctx *c = data;
  cleanup_free char *src = NULL;
  size_t len;
  if (ib_reader_slurp (r, MAX_PY_SOURCE, &src, &len, err) < 0)
    return ib_error_wrap (err, "%s", e->path);
  bool checked = e->layer >= c->r->first_checked_layer;
  cleanup_free char *package = checked ? package_of (c, e->path) : NULL;
  struct ib_py_module *m;
  if (ib_py_scan (src, len, package, &m, err) < 0)
    {
      /* A file that does not even tokenize fails its importers loudly. */
      problem (c, true, "%s: %s", display (c, e->path), (*err)->msg);
      ib_error_release (err);
      m = ib_xcalloc (1, sizeof (*m));
    }
  else
    py_cache_save (c, e, m);
  c->st->scanned++;
  known_add (c, e, m, checked);
  return 0;
}

static void
want (const struct ib_fs_entry ***list, size_t *n, const struct ib_fs_entry *e)
{
  for (size_t i = 0; i < *n; i++)
    if ((*list)[i] == e)
      return;
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = e;
}

/* Make sure E's definitions are known: from the cache, or queued in WANTED. */
static void
need_defs (struct ctx *c, const struct ib_fs_entry *e, const struct ib_fs_entry ***wanted, size_t *n)
{
  if (e == NULL || known_find (c, e))
    return;
  struct ib_py_module *m = py_cache_load (c, e);
  if (m)
    {
      c->st->cached++;
      known_add (c, e, m, false);
      return;
    }
  want (wanted, n, e);
}

static int
load_checked_files (struct ctx *c, ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0, rl = strlen (c->root);
  for (size_t i = 0; i < ib_fsview_count (c->view); i++)
    {
      const struct ib_fs_entry *e = ib_fsview_at (c->view, i);
      size_t pl = strlen (e->path);
      if (e->layer >= c->r->first_checked_layer && e->type == IB_FS_FILE && pl > 3
          && strcmp (e->path + pl - 3, ".py") == 0 && strncmp (e->path, c->root, rl) == 0 && e->path[rl] == '/')
        want (&wanted, &n, e);
    }
  int r = ib_extract_entries (c->s, c->img, wanted, n, scan_extracted, c, err);
  free (wanted);
  c->st->files_checked = n;
  return r;
}

static int
load_needed_defs (struct ctx *c, ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0, n_known = c->n_known;
  bool pkg;
  for (size_t k = 0; k < n_known; k++)
    {
      const struct ib_py_module *m = c->known[k].m;
      for (size_t i = 0; c->known[k].checked && i < m->n_imports; i++)
        if (in_checked_package (c, m->imports[i].module))
          need_defs (c, find_module (c, m->imports[i].module, &pkg), &wanted, &n);
    }
  for (size_t i = 0; i < c->r->n_python; i++)
    need_defs (c, ib_fsview_lookup (c->view, c->r->python[i].path + (c->r->python[i].path[0] == '/')), &wanted, &n);
  int r = ib_extract_entries (c->s, c->img, wanted, n, scan_extracted, c, err);
  free (wanted);
  return r;
}

/* ---- the checks ---------------------------------------------------------- */

static void
check_name (struct ctx *c, const struct known *from, const struct ib_py_import *im, const char *name)
{
  bool pkg;
  const struct ib_fs_entry *target = find_module (c, im->module, &pkg);
  const struct known *t = target ? known_find (c, target) : NULL;
  c->st->names_checked++;
  if (t == NULL)
    return; /* reported once per import */
  if (ib_py_defines (t->m, name))
    return;
  if (pkg)
    {
      cleanup_free char *sub = ib_xasprintf ("%s.%s", im->module, name);
      bool sub_pkg;
      if (find_module (c, sub, &sub_pkg))
        return;
    }
  const char *where = display (c, target->path);
  if (t->m->has_getattr || t->m->has_star_import)
    problem (c, c->r->unresolved_is_error, "%s:%d: from %s import %s: %s is not resolvable statically (%s has %s)",
             display (c, from->e->path), im->line, im->module, name, name, where,
             t->m->has_getattr ? "a module-level __getattr__" : "a star import");
  else
    problem (c, true, "%s:%d: from %s import %s: %s is not defined in %s (layer %s)", display (c, from->e->path),
             im->line, im->module, name, name, where, layer_of (c, target));
}

static void
check_imports (struct ctx *c, const struct known *k)
{
  for (size_t i = 0; i < k->m->n_imports; i++)
    {
      const struct ib_py_import *im = &k->m->imports[i];
      if (!in_checked_package (c, im->module))
        continue;
      c->st->imports_checked++;
      bool pkg;
      if (find_module (c, im->module, &pkg) == NULL)
        {
          problem (c, true, "%s:%d: %s %s: module %s is not in the image (no %s.py or %s/__init__.py)",
                   display (c, k->e->path), im->line, im->is_from ? "from" : "import", im->module, im->module,
                   im->module, im->module);
          continue;
        }
      for (size_t n = 0; n < im->n_names; n++)
        if (strcmp (im->names[n].name, "*") != 0)
          check_name (c, k, im, im->names[n].name);
    }
}

static void
check_required_python (struct ctx *c, const struct ib_requirement *req)
{
  const char *path = req->path + (req->path[0] == '/');
  const struct ib_fs_entry *e = ib_fsview_lookup (c->view, path);
  const struct known *k = e ? known_find (c, e) : NULL;
  if (k == NULL)
    {
      problem (c, true, "%s: required file %s is not in the image", req->origin, req->path);
      return;
    }
  for (size_t i = 0; i < req->n_names; i++)
    {
      c->st->names_checked++;
      if (!ib_py_defines (k->m, req->names[i]))
        problem (c, true, "%s: %s does not define required symbol %s (layer %s)", req->origin, req->path,
                 req->names[i], layer_of (c, e));
    }
}

/* ---- native symbols ------------------------------------------------------ */

struct native_job
{
  struct ctx *c;
  const struct ib_requirement *req;
};

static struct ib_elf_symbols *
elf_cache_load (struct ctx *c, const struct ib_fs_entry *e)
{
  cleanup_free char *text = NULL;
  char *header;
  struct ib_elf_symbols *s = ib_xcalloc (1, sizeof (*s));
  if (!cache_load (c->elf_cache, e->digest, &text, &header, &s->names, &s->n)
      || sscanf (header, ELF_CACHE_MAGIC " machine=%u", &s->machine) != 1)
    {
      ib_elf_symbols_free (s);
      return NULL;
    }
  return s;
}

static void
elf_cache_save (struct ctx *c, const struct ib_fs_entry *e, const struct ib_elf_symbols *s)
{
  cleanup_free char *header = ib_xasprintf ("%s machine=%u", ELF_CACHE_MAGIC, s->machine);
  cache_save (c->elf_cache, e->digest, header, s->names, s->n);
}

static void
check_native_file (struct ctx *c, const struct ib_requirement *req, const struct ib_fs_entry *e,
                   const struct ib_elf_symbols *syms)
{
  for (size_t i = 0; i < req->n_names; i++)
    {
      c->st->names_checked++;
      if (!ib_elf_exports (syms, req->names[i]))
        problem (c, true, "%s: /%s does not export dynamic symbol %s (layer %s)", req->origin, e->path,
                 req->names[i], layer_of (c, e));
    }
}

/* Spool one shared object to a temporary file (the ELF reader seeks), read
 * its symbols, cache them, check them. */
static int
native_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct native_job *job = data;
  struct ctx *c = job->c;
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, c->elf_cache, &fd, err) < 0)
    return -1;
  struct ib_elf_symbols *syms;
  if (ib_elf_dynsyms (fd, e->path, &syms, err) < 0)
    {
      problem (c, true, "%s: /%s: %s", job->req->origin, e->path, (*err)->msg);
      ib_error_release (err);
      return 0;
    }
  c->st->scanned++;
  elf_cache_save (c, e, syms);
  check_native_file (c, job->req, e, syms);
  ib_elf_symbols_free (syms);
  return 0;
}

static int
check_native (struct ctx *c, const struct ib_requirement *req, ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0, matched = 0;
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n_files = ib_fsview_glob (c->view, req->path, &files);
  for (size_t i = 0; i < n_files; i++)
    {
      const struct ib_fs_entry *file = files[i];
      matched++;
      c->st->native_checked++;
      struct ib_elf_symbols *syms = elf_cache_load (c, file);
      if (syms)
        {
          c->st->cached++;
          check_native_file (c, req, file, syms);
          ib_elf_symbols_free (syms);
        }
      else
        want (&wanted, &n, file);
    }
  if (matched == 0)
    problem (c, true, "%s: no shared object in the image matches %s", req->origin, req->path);
  struct native_job job = { c, req };
  int r = ib_extract_entries (c->s, c->img, wanted, n, native_extracted, &job, err);
  free (wanted);
  return r;
}

static void
ctx_clear (struct ctx *c)
{
  for (size_t i = 0; i < c->n_known; i++)
    ib_py_module_free (c->known[i].m);
  free (c->known);
  free (c->root);
  free (c->py_cache);
  free (c->elf_cache);
}

int
ib_symbols_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                  const struct ib_symbol_rules *rules, ib_problem_fn fn, void *data, struct ib_symbol_stats *stats,
                  ib_error_t *err)
{
  struct ctx c = { .s = s, .img = img, .view = view, .r = rules, .fn = fn, .data = data, .st = stats };
  memset (stats, 0, sizeof (*stats));
  c.root = ib_clean_tar_path (rules->python_path ? rules->python_path : "/");
  if (c.root == NULL)
    c.root = ib_xstrdup ("");
  int r = ib_store_cache_dir (s, "pysyms", &c.py_cache, err);
  if (r == 0)
    r = ib_store_cache_dir (s, "elfsyms", &c.elf_cache, err);
  if (r == 0)
    r = load_checked_files (&c, err);
  if (r == 0)
    r = load_needed_defs (&c, err);
  for (size_t i = 0; r == 0 && i < c.n_known; i++)
    if (c.known[i].checked)
      check_imports (&c, &c.known[i]);
  for (size_t i = 0; r == 0 && i < rules->n_python; i++)
    check_required_python (&c, &rules->python[i]);
  for (size_t i = 0; r == 0 && i < rules->n_native; i++)
    r = check_native (&c, &rules->native[i], err);
  ctx_clear (&c);
  return r;
}
