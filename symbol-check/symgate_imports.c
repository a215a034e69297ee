/* The symbol gate's core, shared by its passes (symgate.c), the reverse
 * edges (revimports.c) and the checked-file memo (checked_memo.c): the
 * context's lookups (what is known of a file, which package a path is in,
 * how a path is shown) and one import checked against the definitions
 * known.  Nothing here reads a layer: what is not known comes from the
 * symbol cache or is reported as unchecked. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/pycond.h"
#include "symbol-check/pyfinder.h"
#include "symbol-check/pysyms.h"
#include "symbol-check/symcache.h"
#include "symbol-check/symgate_private.h"

void
sg_problem (struct sg_ctx *c, bool is_error, const char *fmt, ...)
{
     va_list ap;
  if (is_error)
    c->st->errors++;
  else
    {
      c->st->warnings++;
      if (!c->st->example_warning[0])
        {
          va_start (ap, fmt);
          vsnprintf (c->st->example_warning, sizeof (c->st->example_warning), fmt, ap);
          va_end (ap);
        }
    }
  va_start (ap, fmt);
  ib_vproblemf (c->fn, c->data, is_error, fmt, ap);
  va_end (ap);
}

static void unchecked (struct sg_ctx *c, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* What cannot be proven statically and is not an error: counted, the first kept. */
static void
unchecked (struct sg_ctx *c, const char *fmt, ...)
{
  c->st->unchecked++;
  if (c->st->example_unchecked[0])
    return;
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (c->st->example_unchecked, sizeof (c->st->example_unchecked), fmt, ap);
  va_end (ap);
}

/* "usr/…/dist-packages/vllm/x.py" -> "vllm/x.py" */
const char *
sg_display (const struct sg_ctx *c, const char *path)
{
  size_t n = strlen (c->root);
  return strncmp (path, c->root, n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

const char *
sg_layer_of (const struct sg_ctx *c, const struct ib_fs_entry *e)
{
  return e->layer >= 0 && (size_t) e->layer < c->img->n_layers ? c->img->layers[e->layer].digest.s : "?";
}

struct sg_known *
sg_known_find (struct sg_ctx *c, const struct ib_fs_entry *e)
{
  for (size_t i = 0; i < c->n_known; i++)
    if (c->known[i]->e == e)
      return c->known[i];
  return NULL;
}

struct sg_known *
sg_known_add (struct sg_ctx *c, const struct ib_fs_entry *e, struct ib_py_module *m, bool checked)
{
  c->known = ib_xrealloc (c->known, (c->n_known + 1) * sizeof (*c->known));
  struct sg_known *k = ib_xmalloc (sizeof (*k));
  *k = (struct sg_known){ e, m, checked, NULL };
  c->known[c->n_known++] = k;
  return k;
}

bool
sg_in_packages (const struct sg_ctx *c, const char *module)
{
  for (size_t i = 0; i < c->r->n_packages; i++)
    {
      size_t n = strlen (c->r->packages[i]);
      if (strncmp (module, c->r->packages[i], n) == 0 && (module[n] == '\0' || module[n] == '.'))
        return true;
    }
  return false;
}

/* The package a file's relative imports resolve against: its folder, for a
 * module and for a package's __init__.py alike. */
char *
sg_package_of (const struct sg_ctx *c, const char *path)
{
  char *rel = ib_xstrdup (sg_display (c, path));
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

/* The dotted module a .py file of the view is: "torch/nn/__init__.py" -> "torch.nn". */
char *
sg_module_of (const struct sg_ctx *c, const char *path)
{
  char *rel = ib_xstrdup (sg_display (c, path));
  size_t n = strlen (rel);
  if (n > 3 && strcmp (rel + n - 3, ".py") == 0)
    rel[n - 3] = '\0';
  n = strlen (rel);
  if (n >= 9 && strcmp (rel + n - 8, "__init__") == 0 && (n == 8 || rel[n - 9] == '/'))
    rel[n > 8 ? n - 9 : 0] = '\0';
  for (char *p = rel; *p; p++)
    if (*p == '/')
      *p = '.';
  return rel;
}

bool
sg_is_py_path_under_root (const struct sg_ctx *c, const char *path)
{
  size_t pl = strlen (path), rl = strlen (c->root);
  return pl > 3 && strcmp (path + pl - 3, ".py") == 0
         && (rl == 0 || (strncmp (path, c->root, rl) == 0 && path[rl] == '/'));
}

bool
sg_is_py_under_root (const struct sg_ctx *c, const struct ib_fs_entry *e)
{
  return e->type == IB_FS_FILE && sg_is_py_path_under_root (c, e->path);
}

void
sg_want (const struct ib_fs_entry ***list, size_t *n, const struct ib_fs_entry *e)
{
  for (size_t i = 0; i < *n; i++)
    if ((*list)[i] == e)
      return;
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = e;
}

/* ---- reading Python files out of the layers ------------------------------ */

void
sg_source_add (struct sg_ctx *c, const struct ib_fs_entry *e, struct ib_py_source src)
{
  c->sources = ib_xrealloc (c->sources, (c->n_sources + 1) * sizeof (*c->sources));
  c->source_entries = ib_xrealloc (c->source_entries, (c->n_sources + 1) * sizeof (*c->source_entries));
  c->sources[c->n_sources] = src;
  c->source_entries[c->n_sources++] = e;
}

bool
sg_syntax_checked (const struct sg_ctx *c)
{
  return c->r->compile != NULL && c->layout.version[0];
}

static const struct ib_py_module *
defs_of (struct sg_ctx *c, const struct ib_fs_entry *e)
{
  struct sg_known *k = sg_known_find (c, e);
  if (k)
    return k->m;
  cleanup_free char *package = sg_package_of (c, e->path);
  struct ib_py_module *m = ib_symcache_load_py (c->py_cache, e->digest, package);
  return m ? sg_known_add (c, e, m, false)->m : NULL;
}

/* Whether a star import of M's (`from S import *`, S a Python module whose
 * definitions are known) provides NAME: 1 yes, 0 no, -1 cannot tell. */
static int
star_provides (struct sg_ctx *c, const struct ib_py_module *m, const char *name, int depth, char **blocker)
{
  int verdict = 0;
  for (size_t i = 0; i < m->n_imports && depth < 6; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      if (!(im->is_from && im->n_names == 1 && strcmp (im->names[0].name, "*") == 0))
        continue;
      struct ib_py_resolved res;
      ib_py_resolve (&c->layout, im->module, &res, NULL);
      const struct ib_py_module *s = res.kind == IB_PY_SOURCE || res.kind == IB_PY_PACKAGE ? defs_of (c, res.e) : NULL;
      if (s == NULL)
        {
          verdict = -1;
          if (*blocker == NULL)
            *blocker = ib_xasprintf ("a star import from %s%s", im->module,
                                     res.kind == IB_PY_EXTENSION ? ", an extension module" : "");
          ib_py_resolved_clear (&res);
          continue;
        }
      ib_py_resolved_clear (&res);
      if (ib_py_defines (s, name) || ib_py_promises (s, name))
        return 1;
      if (s->has_star_import)
        {
          int v = star_provides (c, s, name, depth + 1, blocker);
          if (v == 1)
            return 1;
          if (v < 0)
            verdict = -1;
        }
      if (s->has_getattr || s->runtime_binding)
        {
          verdict = -1;
          if (*blocker == NULL)
            *blocker = ib_xasprintf ("a star import from %s, which binds names at run time (%s)", im->module,
                                     s->has_getattr ? "__getattr__" : s->runtime_binding);
        }
    }
  return verdict;
}

/* The allow-missing module that covers MODULE (or, with NAME, the module
 * MODULE.NAME a from-import may name): the same, or one of its packages. */
static const char *
allowed_missing (const struct sg_ctx *c, const char *module, const char *name)
{
  cleanup_free char *sub = name ? ib_xasprintf ("%s.%s", module, name) : NULL;
  for (size_t i = 0; i < c->r->n_allow_missing; i++)
    {
      const char *a = c->r->allow_missing[i];
      size_t n = strlen (a);
      for (const char *m = module; m; m = m == module ? sub : NULL)
        if (strncmp (m, a, n) == 0 && (m[n] == '\0' || m[n] == '.'))
          return a;
    }
  return NULL;
}

char *
sg_why_a_warning (const struct ib_py_import *im, enum ib_py_truth runs, const char *allowed)
{
  if (im->guarded)
    return ib_xstrdup (" (a guarded import: a warning)");
  if (allowed)
    return ib_xasprintf (" (allow-missing %s in the definition: a warning)", allowed);
  if (runs == IB_PY_UNKNOWN)
    return ib_xasprintf (" (under the condition `%s` at line %d, which a static reading cannot decide: a warning)", im->cond,
                         im->cond_line);
  return ib_xstrdup ("");
}

/* NAME imported from the resolved module RES (named MODULE) by IM in FILE.
 * VIA says whose import it is, for the reverse edges ("" for the overlay's). */
static void
check_name (struct sg_ctx *c, const char *file, const struct ib_py_import *im, enum ib_py_truth runs,
            const char *module, const struct ib_py_resolved *res, const char *name, const char *via)
{
  int line = im->line;
  bool guarded = im->guarded || runs == IB_PY_UNKNOWN;
  c->st->names_checked++;
  if (res->kind == IB_PY_EXTENSION || res->kind == IB_PY_BELOW_EXTENSION)
    {
      unchecked (c, "%s:%d: from %s import %s: %s is %s (/%s)", file, line, module, name, module,
                 res->kind == IB_PY_EXTENSION ? "an extension module" : "below an extension module", res->e->path);
      return;
    }
  cleanup_free char *sub = ib_xasprintf ("%s.%s", module, name);
  struct ib_py_resolved sr;
  if (res->kind == IB_PY_PACKAGE || res->kind == IB_PY_NAMESPACE)
    {
      ib_py_resolve (&c->layout, sub, &sr, NULL);
      bool found = sr.kind != IB_PY_NONE;
      ib_py_resolved_clear (&sr);
      if (found)
        return;
    }
  const struct sg_known *t = res->kind == IB_PY_NAMESPACE ? NULL : sg_known_find (c, res->e);
  if (t && ib_py_defines (t->m, name))
    return;
  const char *allowed = allowed_missing (c, module, name);
  cleanup_free char *why = sg_why_a_warning (im, runs, allowed);
  /* A star import of a Python module whose definitions are known. */
  cleanup_free char *blocker = NULL;
  if (t && t->m->has_star_import)
    {
      int v = star_provides (c, t->m, name, 0, &blocker);
      if (v == 1)
        return;
      if (v == 0 && !ib_py_promises (t->m, name) && !t->m->has_getattr && !t->m->runtime_binding)
        {
          sg_problem (c, !guarded && !allowed,
                      "%s:%d: from %s import %s: %s is not defined in %s nor brought by its star imports%s%s", file, line,
                      module, name, name, sg_display (c, res->e->path), via, why);
          return;
        }
    }
  if (t && ib_py_promises (t->m, name))
    {
      /* Listed in __all__ and bound by nothing the file shows: an extension
       * binds it at run time (torch.cuda.FloatTensor). */
      sg_problem (c, c->r->unresolved_is_error && !guarded,
                  "%s:%d: from %s import %s: %s is in __all__ of %s but bound at run time, not by the file%s", file, line,
                  module, name, name, sg_display (c, res->e->path), via);
      return;
    }
  const char *where = sg_display (c, res->e->path);
  if (t && (t->m->has_getattr || t->m->has_star_import || t->m->runtime_binding))
    {
      cleanup_free char *how = t->m->has_getattr ? ib_xstrdup ("a module-level __getattr__")
                               : t->m->runtime_binding
                                   ? ib_xasprintf ("%s at line %d", t->m->runtime_binding, t->m->runtime_binding_line)
                                   : ib_xstrdup (blocker ? blocker : "a star import");
      sg_problem (c, c->r->unresolved_is_error && !guarded, "%s:%d: from %s import %s: %s is not resolvable statically (%s has %s)%s",
                  file, line, module, name, name, where, how, via);
      return;
    }
  sg_problem (c, !guarded && !allowed, "%s:%d: from %s import %s: %s is not defined in %s (layer %s)%s%s", file, line,
              module, name, name, where, sg_layer_of (c, res->e), via, why);
}

static char *
names_of (const struct ib_py_import *im)
{
  char *out = ib_xstrdup ("");
  for (size_t i = 0; i < im->n_names; i++)
    {
      char *next = ib_xasprintf ("%s%s%s", out, i ? ", " : "", im->names[i].name);
      free (out);
      out = next;
    }
  return out;
}

enum ib_py_truth
sg_import_runs (struct sg_ctx *c, const struct ib_py_import *im)
{
  struct ib_py_target tg = { c->layout.version };
  enum ib_py_truth runs = im->cond ? ib_py_condition (im->cond, &tg) : IB_PY_TRUE;
  c->st->never_run += runs == IB_PY_FALSE;
  return runs;
}

void
sg_check_import (struct sg_ctx *c, const char *file, const struct ib_py_import *im, const char *via)
{
  c->st->imports_checked++;
  /* The image's interpreter decides what it can: an import it never runs
   * is no fault, one that only the run decides a warning (pycond.h). */
  enum ib_py_truth runs = sg_import_runs (c, im);
  if (runs == IB_PY_FALSE)
    return;
  struct ib_py_resolved res;
  cleanup_free char *tried = NULL;
  ib_py_resolve (&c->layout, im->module, &res, &tried);
  if (res.kind == IB_PY_NONE)
    {
      cleanup_free char *names = names_of (im);
      const char *allowed = allowed_missing (c, im->module, NULL);
      cleanup_free char *why = sg_why_a_warning (im, runs, allowed);
      sg_problem (c, !*why, "%s:%d: %s %s: module %s is not in the image (tried %s under /%s%s%s)%s%s",
                  file, im->line, im->is_from ? "from" : "import", im->module, im->module, tried, c->root,
                  *names ? "; names imported: " : "", names, via, why);
      return;
    }
  if (res.kind == IB_PY_BELOW_EXTENSION && im->n_names == 0)
    unchecked (c, "%s:%d: import %s: below the extension module %s (/%s), made at run time", file, im->line,
               im->module, res.extension, res.e->path);
  for (size_t n = 0; n < im->n_names; n++)
    if (strcmp (im->names[n].name, "*") != 0)
      check_name (c, file, im, runs, im->module, &res, im->names[n].name, via);
  ib_py_resolved_clear (&res);
}

