#include "symbol-check/symcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/store/digest.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

#define PY_CACHE_MAGIC "imgbuild-pysyms 4"
#define ELF_CACHE_MAGIC "imgbuild-elfsyms 1"
#define SYNTAX_CACHE_MAGIC "imgbuild-pysyntax 1"
#define CACHE_END "\x01end"

void
ib_symcache_save (const char *dir, const char *digest, const char *header, char *const *lines, size_t n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fprintf (f, "%s\n", header);
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s\n", lines[i]);
  fprintf (f, "%s\n", CACHE_END);
  fclose (f);
  cleanup_free char *path = ib_path_join (dir, digest);
  ib_write_cache_file (path, text, len, NULL);
  free (text);
}

bool
ib_symcache_load (const char *dir, const char *digest, char **text, char **header, char ***lines, size_t *n)
{
  cleanup_free char *path = ib_path_join (dir, digest);
  size_t len, m = strlen (CACHE_END "\n");
  *lines = NULL;
  *n = 0;
  if (!digest[0] || ib_read_file (path, 1u << 30, text, &len, NULL) < 0)
    return false;
  if (len < m || strcmp (*text + len - m, CACHE_END "\n") != 0)
    return false;
  (*text)[len - m] = '\0';
  char *save = NULL;
  *header = strtok_r (*text, "\n", &save);
  for (char *l = strtok_r (NULL, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      *lines = ib_xrealloc (*lines, (*n + 1) * sizeof (**lines));
      (*lines)[(*n)++] = ib_xstrdup (l);
    }
  return *header != NULL;
}

static void
free_lines (char **lines, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free (lines[i]);
  free (lines);
}

/* The name of a record that depends on its package (it has relative
 * imports): DIGEST-HASH, HASH of the package.  Copies of one content in
 * several packages (torch's `from .modules import *` __init__.py files)
 * each keep their own; under one name per digest only the last one written
 * was kept, and a cold build read the others out of the base again. */
static char *
package_key (const char *digest, const char *package)
{
  const char *p = package && *package ? package : "-";
  ib_digest h;
  ib_sha256_buf (p, strlen (p), &h);
  return ib_xasprintf ("%s-%.16s", digest, ib_digest_hex (h.s));
}

/* Whether S reads back the same as one field of a record line: none of
 * the characters of SEPARATORS (a newline ends the line in any field), not
 * the placeholder "-" of an empty field, not empty where that reads as
 * nothing (NONEMPTY), short enough for the reader's buffer. */
static bool
fits_field (const char *s, const char *separators, bool nonempty)
{
  return strpbrk (s, separators) == NULL && strcmp (s, "-") != 0 && (!nonempty || *s) && strlen (s) < 1024;
}

/* Whether the record of M reads back as M (every field fits): a module
 * whose strings would not (a literal of __all__ across lines, say) keeps
 * no record, and the gate reads the file each time, as it must, since a
 * record read back otherwise could define what the file does not. */
static bool
fits_record (const struct ib_py_module *m)
{
  for (size_t i = 0; i < m->n_defs; i++)
    if (strchr (m->defs[i], '\n'))
      return false;
  for (size_t i = 0; i < m->n_all; i++)
    if (strchr (m->all[i], '\n'))
      return false;
  for (size_t i = 0; i < m->n_imports; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      if (!fits_field (im->module, " \t\n\v\f\r", false))
        return false;
      for (size_t k = 0; k < im->n_names; k++)
        if (!fits_field (im->names[k].name, " \t\n\v\f\r,", true))
          return false;
    }
  return true;
}

/* Header: magic, the flags, the package; then "d NAME" per definition and
 * "i LINE FROM GUARDED LEVEL MODULE NAME,NAME|-" per import. */
void
ib_symcache_save_py (const char *dir, const char *digest, const char *package, const struct ib_py_module *m)
{
  if (!fits_record (m))
    return;
  int rb = -1;
  for (int k = 0; m->runtime_binding && ib_py_runtime_bindings[k]; k++)
    if (m->runtime_binding == ib_py_runtime_bindings[k])
      rb = k;
  /* Only relative imports depend on the package: without any, one entry
   * serves every copy of the content (the many empty __init__.py). */
  bool relative = false;
  for (size_t i = 0; i < m->n_imports; i++)
    relative |= m->imports[i].level > 0;
  cleanup_free char *header = ib_xasprintf ("%s getattr=%d star=%d rb=%d:%d pkg=%s", PY_CACHE_MAGIC, m->has_getattr,
                                            m->has_star_import, rb, m->runtime_binding_line,
                                            !relative ? "*" : package && *package ? package : "-");
  size_t n = m->n_defs + m->n_imports + m->n_all;
  char **lines = ib_xcalloc (n + 1, sizeof (*lines));
  for (size_t i = 0; i < m->n_all; i++)
    lines[m->n_defs + m->n_imports + i] = ib_xasprintf ("a %s", m->all[i]);
  for (size_t i = 0; i < m->n_defs; i++)
    lines[i] = ib_xasprintf ("d %s", m->defs[i]);
  for (size_t i = 0; i < m->n_imports; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      char *names = ib_xstrdup (im->n_names ? "" : "-");
      for (size_t k = 0; k < im->n_names; k++)
        {
          char *next = ib_xasprintf ("%s%s%s", names, k ? "," : "", im->names[k].name);
          free (names);
          names = next;
        }
      /* The condition last: it is the only field with spaces. */
      lines[m->n_defs + i] = ib_xasprintf ("i %d %d %d %d %d %s %s%s%s", im->line, im->is_from, im->guarded, im->level,
                                           im->cond ? im->cond_line : 0, *im->module ? im->module : "-", names,
                                           im->cond ? " " : "", im->cond ? im->cond : "");
      free (names);
    }
  cleanup_free char *key = relative ? package_key (digest, package) : ib_xstrdup (digest);
  ib_symcache_save (dir, key, header, lines, n);
  free_lines (lines, n);
}

static void
add_cached_import (struct ib_py_module *m, const char *l)
{
  int line, from, guarded, level, cond_line, off = -1;
  char module[1024];
  if (sscanf (l, "i %d %d %d %d %d %1023s %n", &line, &from, &guarded, &level, &cond_line, module, &off) != 6 || off < 0)
    return;
  cleanup_free char *names = ib_xstrdup (l + off);
  char *cond = strchr (names, ' ');
  if (cond)
    *cond++ = '\0';
  m->imports = ib_xrealloc (m->imports, (m->n_imports + 1) * sizeof (*m->imports));
  struct ib_py_import *im = &m->imports[m->n_imports++];
  memset (im, 0, sizeof (*im));
  im->line = line;
  im->is_from = from;
  im->guarded = guarded;
  im->level = level;
  im->cond = cond ? ib_xstrdup (cond) : NULL;
  im->cond_line = cond ? cond_line : 0;
  im->module = ib_xstrdup (strcmp (module, "-") == 0 ? "" : module);
  if (strcmp (names, "-") == 0)
    return;
  char *save = NULL;
  for (char *n = strtok_r (names, ",", &save); n; n = strtok_r (NULL, ",", &save))
    {
      im->names = ib_xrealloc (im->names, (im->n_names + 1) * sizeof (*im->names));
      im->names[im->n_names++] = (struct ib_py_alias){ ib_xstrdup (n), NULL };
    }
}

static struct ib_py_module *load_py_at (const char *dir, const char *key, const char *package);

/* The content's one record, else the package's own. */
struct ib_py_module *
ib_symcache_load_py (const char *dir, const char *digest, const char *package)
{
  if (!digest[0])
    return NULL;
  struct ib_py_module *m = load_py_at (dir, digest, package);
  if (m == NULL)
    {
      cleanup_free char *key = package_key (digest, package);
      m = load_py_at (dir, key, package);
    }
  return m;
}

static struct ib_py_module *
load_py_at (const char *dir, const char *digest, const char *package)
{
  cleanup_free char *text = NULL;
  char *header, **lines;
  size_t n;
  int getattr, star, rb, rb_line;
  char pkg[1024];
  if (!ib_symcache_load (dir, digest, &text, &header, &lines, &n))
    return NULL;
  if (sscanf (header, PY_CACHE_MAGIC " getattr=%d star=%d rb=%d:%d pkg=%1023s", &getattr, &star, &rb, &rb_line, pkg)
          != 5
      || (strcmp (pkg, "*") != 0 && strcmp (pkg, package && *package ? package : "-") != 0))
    {
      free_lines (lines, n);
      return NULL;
    }
  struct ib_py_module *m = ib_xcalloc (1, sizeof (*m));
  m->has_getattr = getattr;
  m->has_star_import = star;
  for (int k = 0; rb >= 0 && ib_py_runtime_bindings[k]; k++)
    if (k == rb)
      {
        m->runtime_binding = ib_py_runtime_bindings[k];
        m->runtime_binding_line = rb_line;
      }
  for (size_t i = 0; i < n; i++)
    {
      if (strncmp (lines[i], "d ", 2) == 0)
        {
          m->defs = ib_xrealloc (m->defs, (m->n_defs + 1) * sizeof (*m->defs));
          m->defs[m->n_defs++] = ib_xstrdup (lines[i] + 2);
        }
      else if (strncmp (lines[i], "a ", 2) == 0)
        {
          m->all = ib_xrealloc (m->all, (m->n_all + 1) * sizeof (*m->all));
          m->all[m->n_all++] = ib_xstrdup (lines[i] + 2);
        }
      else
        add_cached_import (m, lines[i]);
    }
  free_lines (lines, n);
  return m;
}

void
ib_symcache_save_elf (const char *dir, const char *digest, const struct ib_elf_symbols *s)
{
  cleanup_free char *header = ib_xasprintf ("%s machine=%u", ELF_CACHE_MAGIC, s->machine);
  ib_symcache_save (dir, digest, header, s->names, s->n);
}

struct ib_elf_symbols *
ib_symcache_load_elf (const char *dir, const char *digest)
{
  cleanup_free char *text = NULL;
  char *header;
  struct ib_elf_symbols *s = ib_xcalloc (1, sizeof (*s));
  if (!ib_symcache_load (dir, digest, &text, &header, &s->names, &s->n)
      || sscanf (header, ELF_CACHE_MAGIC " machine=%u", &s->machine) != 1)
    {
      ib_elf_symbols_free (s);
      return NULL;
    }
  return s;
}

void
ib_symcache_save_syntax (const char *dir, const char *digest, bool refused, int line, const char *msg)
{
  cleanup_free char *header = ib_xasprintf ("%s refused=%d line=%d", SYNTAX_CACHE_MAGIC, refused, line);
  cleanup_free char *one = ib_xstrdup (msg && *msg ? msg : "-");
  for (char *p = one; *p; p++)
    if (*p == '\n')
      *p = ' ';
  ib_symcache_save (dir, digest, header, &one, 1);
}

bool
ib_symcache_load_syntax (const char *dir, const char *digest, bool *refused, int *line, char **msg)
{
  cleanup_free char *text = NULL;
  char *header, **lines;
  size_t n;
  int r;
  if (!ib_symcache_load (dir, digest, &text, &header, &lines, &n))
    return false;
  bool ok = n == 1 && sscanf (header, SYNTAX_CACHE_MAGIC " refused=%d line=%d", &r, line) == 2;
  if (ok)
    {
      *refused = r;
      *msg = ib_xstrdup (lines[0]);
    }
  free_lines (lines, n);
  return ok;
}
