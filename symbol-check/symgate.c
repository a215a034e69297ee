#include "symbol-check/symgate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/store/digest.h"
#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/elfsyms.h"
#include "symbol-check/pyfinder.h"
#include "symbol-check/pylex.h"
#include "symbol-check/pysyms.h"
#include "symbol-check/symcache.h"
#include "symbol-check/symgate_private.h"
#include "layers/tar/tarpath.h"


/* A checked file's syntax: from the cache, or queued for the interpreter. */
static void
queue_syntax (struct sg_ctx *c, const struct ib_fs_entry *e, const char *src, size_t len)
{
  if (!sg_syntax_checked (c))
    return;
  bool refused;
  int line;
  char *msg;
  if (ib_symcache_load_syntax (c->syntax_cache, e->digest, &refused, &line, &msg))
    {
      c->st->compile_cached++;
      sg_source_add (c, e, (struct ib_py_source){ NULL, NULL, 0, refused, line, msg });
      return;
    }
  char *copy = ib_xmalloc (len + 1);
  memcpy (copy, src, len);
  sg_source_add (c, e, (struct ib_py_source){ ib_xasprintf ("/%s", e->path), copy, len, false, 0, NULL });
}

static int
scan_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct sg_ctx *c = data;
  cleanup_free char *src = NULL;
  size_t len;
  if (ib_reader_slurp (r, MAX_PY_SOURCE, &src, &len, err) < 0)
    return ib_error_wrap (err, "%s", e->path);
  bool checked = e->layer >= c->r->first_checked_layer;
  cleanup_free char *package = sg_package_of (c, e->path);
  if (checked)
    {
      queue_syntax (c, e, src, len);
      c->read_order = ib_xrealloc (c->read_order, (c->n_read_order + 1) * sizeof (*c->read_order));
      c->read_order[c->n_read_order++] = e;
    }
  struct ib_py_module *m;
  char *scan_error = NULL;
  if (ib_py_scan (src, len, package, &m, err) < 0)
    {
      scan_error = ib_xstrdup ((*err)->msg);
      ib_error_release (err);
      m = ib_xcalloc (1, sizeof (*m));
    }
  else
    ib_symcache_save_py (c->py_cache, e->digest, package, m);
  c->st->scanned++;
  sg_known_add (c, e, m, checked)->scan_error = scan_error;
  return 0;
}

/* Make sure E's definitions are known: from the cache, or queued in WANTED. */
static void
need_defs (struct sg_ctx *c, const struct ib_fs_entry *e, const struct ib_fs_entry ***wanted, size_t *n)
{
  if (e == NULL || sg_known_find (c, e))
    return;
  cleanup_free char *package = sg_package_of (c, e->path);
  struct ib_py_module *m = ib_symcache_load_py (c->py_cache, e->digest, package);
  if (m)
    {
      c->st->cached++;
      sg_known_add (c, e, m, false);
      return;
    }
  sg_want (wanted, n, e);
}

/* The overlay's Python files: from the caches when the order they come in
 * is known for these layers (checked_memo.c), else read out of them. */
static int
load_checked_files (struct sg_ctx *c, ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL, **upper = NULL;
  size_t n = 0, n_upper = ib_fsview_from_layer (c->view, c->r->first_checked_layer, &upper);
  for (size_t i = 0; i < n_upper; i++)
    if (sg_is_py_under_root (c, upper[i]))
      sg_want (&wanted, &n, upper[i]);
  free (upper);
  c->st->files_checked = n;
  int r = 0;
  if (!sg_checked_from_caches (c, wanted, n))
    {
      r = ib_extract_entries (c->s, c->img, wanted, n, scan_extracted, c, err);
      if (r == 0)
        sg_checked_order_save (c);
    }
  free (wanted);
  return r;
}

/* ---- syntax: the image's CPython ----------------------------------------- */

static const char *
conflict_marker (const char *src, size_t len, int line)
{
  const char *p = src, *end = src + len;
  for (int l = 1; l < line && p < end; l++)
    {
      const char *nl = memchr (p, '\n', (size_t) (end - p));
      p = nl ? nl + 1 : end;
    }
  return ib_py_is_conflict_marker (p, (size_t) (end - p)) ? " (a merge conflict marker)" : "";
}

void
ib_py_answerer_clear (struct ib_py_answerer *a)
{
  free (a->who);
  free (a->not_image);
  *a = (struct ib_py_answerer){ 0 };
}

/* A refusal, by CPython or, where no CPython of the image's version
 * answered, by every CPython (a conflict marker). */
static void
report_refusal (struct sg_ctx *c, const struct ib_py_source *s, const struct ib_fs_entry *e, bool exact)
{
  int marker = exact ? 0 : ib_py_conflict_marker_line (s->src, s->len);
  if (marker > 0)
    sg_problem (c, true, "%s:%d: every CPython refuses it: a merge conflict marker", sg_display (c, e->path), marker);
  else if (exact)
    sg_problem (c, true, "%s:%d: CPython %s refuses it: %s", sg_display (c, e->path), s->line, c->layout.version,
                s->msg ? s->msg : "?");
  else
    sg_problem (c, false, "%s:%d: %s refuses it: %s (not the image's CPython %s: a warning)", sg_display (c, e->path),
                s->line, c->st->compiler, s->msg ? s->msg : "?", c->layout.version);
}

static int
check_syntax (struct sg_ctx *c, ib_error_t *err)
{
  if (c->r->compile == NULL)
    return 0;
  if (!c->layout.version[0])
    {
      if (c->st->files_checked)
        sg_problem (c, false, "syntax not checked: the image shows no Python version (no python3.X under %s, no /usr/bin/python3)",
                    c->root);
      return 0;
    }
  /* Only the files the cache does not know go to the interpreter. */
  size_t n_new = 0;
  struct ib_py_source *fresh = ib_xcalloc (c->n_sources + 1, sizeof (*fresh));
  size_t *idx = ib_xcalloc (c->n_sources + 1, sizeof (*idx));
  for (size_t i = 0; i < c->n_sources; i++)
    if (c->sources[i].path)
      {
        idx[n_new] = i;
        fresh[n_new++] = c->sources[i];
      }
  struct ib_py_answerer ans = { .exact = true };
  int r = 0;
  if (n_new)
    r = c->r->compile (c->r->compile_data, c->layout.interpreter[0] ? c->layout.interpreter : NULL,
                       c->layout.version, fresh, n_new, &ans, err);
  bool exact = ans.exact;
  if (r == 0 && n_new)
    {
      snprintf (c->st->compiler, sizeof (c->st->compiler), "%s", ans.who ? ans.who : "?");
      /* The image has an interpreter and no CPython of its version answered. */
      if (!exact && c->layout.interpreter[0])
        snprintf (c->st->syntax_unchecked, sizeof (c->st->syntax_unchecked), "%s", ans.not_image ? ans.not_image : "?");
      for (size_t k = 0; k < n_new; k++)
        {
          if (fresh[k].refused && *conflict_marker (fresh[k].src, fresh[k].len, fresh[k].line))
            {
              char *m = ib_xasprintf ("%s%s", fresh[k].msg ? fresh[k].msg : "?",
                                      conflict_marker (fresh[k].src, fresh[k].len, fresh[k].line));
              free (fresh[k].msg);
              fresh[k].msg = m;
            }
          c->sources[idx[k]].refused = fresh[k].refused;
          c->sources[idx[k]].line = fresh[k].line;
          c->sources[idx[k]].msg = fresh[k].msg;
          c->st->compiled++;
          /* Only the image's own answer (or its version's) is worth keeping. */
          if (exact)
            ib_symcache_save_syntax (c->syntax_cache, c->source_entries[idx[k]]->digest, fresh[k].refused,
                                     fresh[k].line, fresh[k].msg);
        }
    }
  for (size_t i = 0; r == 0 && i < c->n_sources; i++)
    {
      const struct ib_py_source *s = &c->sources[i];
      const struct ib_fs_entry *e = c->source_entries[i];
      struct sg_known *k = sg_known_find (c, e);
      if (s->refused)
        {
          /* An answer from the cache is always an exact one. */
          report_refusal (c, s, e, exact || s->path == NULL);
          if (k)
            {
              free (k->scan_error);
              k->scan_error = NULL; /* CPython's message is the one */
            }
        }
    }
  ib_py_answerer_clear (&ans);
  free (fresh);
  free (idx);
  return r;
}

/* ---- forward edges: the overlay's imports -------------------------------- */

static void
need_extension (struct sg_ctx *c, const struct ib_fs_entry *e, const char *module, const char *file, int line)
{
  for (size_t i = 0; i < c->n_ext; i++)
    if (c->ext[i].e == e)
      return;
  c->ext = ib_xrealloc (c->ext, (c->n_ext + 1) * sizeof (*c->ext));
  c->ext[c->n_ext++] = (struct sg_extension){ e, ib_xstrdup (module), ib_xasprintf ("%s:%d", file, line) };
}

static int
load_needed_defs (struct sg_ctx *c, ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0, n_known = c->n_known;
  for (size_t k = 0; k < n_known; k++)
    {
      const struct ib_py_module *m = c->known[k]->m;
      for (size_t i = 0; c->known[k]->checked && i < m->n_imports; i++)
        {
          if (!sg_in_packages (c, m->imports[i].module))
            continue;
          struct ib_py_resolved res;
          ib_py_resolve (&c->layout, m->imports[i].module, &res, NULL);
          if (res.kind == IB_PY_PACKAGE || res.kind == IB_PY_SOURCE)
            need_defs (c, res.e, &wanted, &n);
          else if (res.kind == IB_PY_EXTENSION || res.kind == IB_PY_BELOW_EXTENSION)
            need_extension (c, res.e, res.extension ? res.extension : m->imports[i].module,
                            sg_display (c, c->known[k]->e->path), m->imports[i].line);
          ib_py_resolved_clear (&res);
        }
    }
  for (size_t i = 0; i < c->r->n_python; i++)
    need_defs (c, ib_fsview_lookup (c->view, c->r->python[i].path + (c->r->python[i].path[0] == '/')), &wanted, &n);
  int r = ib_extract_entries (c->s, c->img, wanted, n, scan_extracted, c, err);
  free (wanted);
  return r;
}

/* The definitions of a module file, from what is known or the cache. */
static void
check_imports (struct sg_ctx *c, const struct sg_known *k)
{
  if (k->scan_error)
    sg_problem (c, true, "%s: %s", sg_display (c, k->e->path), k->scan_error);
  for (size_t i = 0; i < k->m->n_imports; i++)
    if (sg_in_packages (c, k->m->imports[i].module))
      sg_check_import (c, sg_display (c, k->e->path), &k->m->imports[i], "");
}

static void
check_required_python (struct sg_ctx *c, const struct ib_requirement *req)
{
  const char *path = req->path + (req->path[0] == '/');
  const struct ib_fs_entry *e = ib_fsview_lookup (c->view, path);
  const struct sg_known *k = e ? sg_known_find (c, e) : NULL;
  if (k == NULL)
    {
      sg_problem (c, true, "%s: required file %s is not in the image", req->origin, req->path);
      return;
    }
  for (size_t i = 0; i < req->n_names; i++)
    {
      c->st->names_checked++;
      if (!ib_py_defines (k->m, req->names[i]))
        sg_problem (c, true, "%s: %s does not define required symbol %s (layer %s)", req->origin, req->path,
                    req->names[i], sg_layer_of (c, e));
    }
}

/* ---- native symbols ------------------------------------------------------ */

/* A shared object's symbols are wanted for a native requirement or for the
 * PyInit_ of an extension module. */
struct native_job
{
  struct sg_ctx *c;
  const struct ib_requirement *req; /* or NULL: the extension modules */
};

static void
check_native_file (struct sg_ctx *c, const struct ib_requirement *req, const struct ib_fs_entry *e,
                   const struct ib_elf_symbols *syms)
{
  for (size_t i = 0; i < req->n_names; i++)
    {
      c->st->names_checked++;
      if (!ib_elf_exports (syms, req->names[i]))
        sg_problem (c, true, "%s: /%s does not export dynamic symbol %s (layer %s)", req->origin, e->path,
                    req->names[i], sg_layer_of (c, e));
    }
}

/* CPython imports extension module A.B by calling PyInit_B. */
static void
check_extension (struct sg_ctx *c, const struct sg_extension *x, const struct ib_elf_symbols *syms)
{
  cleanup_free char *init = ib_xasprintf ("PyInit_%s", ib_py_last_part (x->module));
  c->st->names_checked++;
  if (!ib_elf_exports (syms, init))
    sg_problem (c, true, "%s: import %s: /%s does not export %s, so CPython cannot import it (layer %s)", x->where,
                x->module, x->e->path, init, sg_layer_of (c, x->e));
}

static void
checked_native (struct native_job *job, const struct ib_fs_entry *e, const struct ib_elf_symbols *syms)
{
  if (job->req)
    {
      check_native_file (job->c, job->req, e, syms);
      return;
    }
  for (size_t i = 0; i < job->c->n_ext; i++)
    if (job->c->ext[i].e == e)
      check_extension (job->c, &job->c->ext[i], syms);
}

/* Spool one shared object to a temporary file (the ELF reader seeks), read
 * its symbols, cache them, check them. */
static int
native_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct native_job *job = data;
  struct sg_ctx *c = job->c;
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, c->elf_cache, &fd, err) < 0)
    return -1;
  struct ib_elf_symbols *syms;
  if (ib_elf_dynsyms (fd, e->path, &syms, err) < 0)
    {
      sg_problem (c, true, "%s: /%s: %s", job->req ? job->req->origin : "extension module", e->path, (*err)->msg);
      ib_error_release (err);
      return 0;
    }
  c->st->scanned++;
  ib_symcache_save_elf (c->elf_cache, e->digest, syms);
  checked_native (job, e, syms);
  ib_elf_symbols_free (syms);
  return 0;
}

/* Check FILES from the cache where it can; read the rest in one pass. */
static int
check_native_files (struct sg_ctx *c, struct native_job *job, const struct ib_fs_entry *const *files, size_t n_files,
                    ib_error_t *err)
{
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0;
  for (size_t i = 0; i < n_files; i++)
    {
      struct ib_elf_symbols *syms = ib_symcache_load_elf (c->elf_cache, files[i]->digest);
      if (syms)
        {
          c->st->cached++;
          checked_native (job, files[i], syms);
          ib_elf_symbols_free (syms);
        }
      else
        sg_want (&wanted, &n, files[i]);
    }
  int r = ib_extract_entries (c->s, c->img, wanted, n, native_extracted, job, err);
  free (wanted);
  return r;
}

static int
check_native (struct sg_ctx *c, const struct ib_requirement *req, ib_error_t *err)
{
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n_files = ib_fsview_glob (c->view, req->path, &files);
  c->st->native_checked += n_files;
  if (n_files == 0)
    sg_problem (c, true, "%s: no shared object in the image matches %s", req->origin, req->path);
  struct native_job job = { c, req };
  return check_native_files (c, &job, files, n_files, err);
}

static int
check_extensions (struct sg_ctx *c, ib_error_t *err)
{
  const struct ib_fs_entry **files = ib_xcalloc (c->n_ext + 1, sizeof (*files));
  for (size_t i = 0; i < c->n_ext; i++)
    files[i] = c->ext[i].e;
  struct native_job job = { c, NULL };
  int r = check_native_files (c, &job, files, c->n_ext, err);
  free (files);
  return r;
}

/* ---- the gate ------------------------------------------------------------ */

static int
ctx_init (struct sg_ctx *c, ib_error_t *err)
{
  c->root = ib_clean_tar_path (c->r->python_path ? c->r->python_path : "/");
  if (c->root == NULL)
    c->root = ib_xstrdup ("");
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive (c->img->config_json, "architecture");
  ib_py_layout_init (&c->layout, c->view, c->root, cJSON_IsString (arch) ? arch->valuestring : NULL);
  if (c->layout.version[0])
    snprintf (c->st->python, sizeof (c->st->python), "%s%s%s%s", c->layout.version, c->layout.interpreter[0] ? " (" : "",
              c->layout.interpreter, c->layout.interpreter[0] ? ")" : "");
  if (ib_store_cache_dir (c->s, "pysyms", &c->py_cache, err) < 0 || ib_store_cache_dir (c->s, "elfsyms", &c->elf_cache, err) < 0)
    return -1;
  /* Syntax answers are per interpreter: its content, else its version. */
  const struct ib_fs_entry *interp = c->layout.interpreter[0] ? ib_fsview_lookup (c->view, c->layout.interpreter + 1) : NULL;
  if (interp && interp->type == IB_FS_SYMLINK)
    interp = ib_fsview_follow (c->view, interp);
  cleanup_free char *kind = ib_xasprintf ("pysyntax/%.16s", interp && interp->digest[0] ? interp->digest : c->layout.version);
  return ib_store_cache_dir (c->s, kind, &c->syntax_cache, err);
}

static void
ctx_clear (struct sg_ctx *c)
{
  for (size_t i = 0; i < c->n_known; i++)
    {
      ib_py_module_free (c->known[i]->m);
      free (c->known[i]->scan_error);
      free (c->known[i]);
    }
  free (c->known);
  for (size_t i = 0; i < c->n_sources; i++)
    {
      free ((char *) c->sources[i].path);
      free ((char *) c->sources[i].src);
      free (c->sources[i].msg);
    }
  free (c->sources);
  free (c->source_entries);
  free (c->read_order);
  for (size_t i = 0; i < c->n_ext; i++)
    {
      free (c->ext[i].module);
      free (c->ext[i].where);
    }
  free (c->ext);
  free (c->root);
  free (c->py_cache);
  free (c->elf_cache);
  free (c->syntax_cache);
}

int
ib_symbols_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                  const struct ib_symbol_rules *rules, ib_problem_fn fn, void *data, struct ib_symbol_stats *stats,
                  ib_error_t *err)
{
  struct sg_ctx c = { .s = s, .img = img, .view = view, .r = rules, .fn = fn, .data = data, .st = stats };
  memset (stats, 0, sizeof (*stats));
  int r = ctx_init (&c, err);
  if (r == 0)
    r = load_checked_files (&c, err);
  if (r == 0)
    r = check_syntax (&c, err);
  if (r == 0)
    r = load_needed_defs (&c, err);
  for (size_t i = 0; r == 0 && i < c.n_known; i++)
    if (c.known[i]->checked)
      check_imports (&c, c.known[i]);
  if (r == 0)
    r = sg_check_reverse_edges (&c, err);
  if (r == 0)
    r = check_extensions (&c, err);
  for (size_t i = 0; r == 0 && i < rules->n_python; i++)
    check_required_python (&c, &rules->python[i]);
  for (size_t i = 0; r == 0 && i < rules->n_native; i++)
    r = check_native (&c, &rules->native[i], err);
  ctx_clear (&c);
  return r;
}
