/* The parts of pysyms.h that look beyond one scan: a scan as JSON (for
 * imgverify --python-symbols) and a file's module name on disk. */
#include "symbol-check/pysyms.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

static cJSON *
str_or_null (const char *s)
{
  return s ? cJSON_CreateString (s) : cJSON_CreateNull ();
}

cJSON *
ib_py_module_json (const char *path, const struct ib_py_module *m)
{
  cJSON *f = cJSON_CreateObject ();
  cJSON_AddStringToObject (f, "path", path);
  cJSON *defs = cJSON_AddArrayToObject (f, "definitions");
  for (size_t i = 0; i < m->n_defs; i++)
    cJSON_AddItemToArray (defs, cJSON_CreateString (m->defs[i]));
  cJSON *imports = cJSON_AddArrayToObject (f, "imports");
  for (size_t i = 0; i < m->n_imports; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      cJSON *j = cJSON_CreateObject ();
      cJSON_AddNumberToObject (j, "line", im->line);
      cJSON_AddItemToObject (j, "module", str_or_null (im->module));
      cJSON_AddNumberToObject (j, "level", im->level);
      cJSON *names = cJSON_AddArrayToObject (j, "names");
      for (size_t k = 0; k < im->n_names; k++)
        {
          cJSON *n = cJSON_CreateObject ();
          cJSON_AddStringToObject (n, "name", im->names[k].name);
          cJSON_AddItemToObject (n, "asname", str_or_null (im->names[k].asname));
          cJSON_AddItemToArray (names, n);
        }
      if (!im->is_from)
        cJSON_AddItemToObject (j, "asname", str_or_null (im->asname));
      if (im->guarded)
        cJSON_AddTrueToObject (j, "guarded");
      if (im->cond)
        {
          cJSON_AddStringToObject (j, "condition", im->cond);
          cJSON_AddNumberToObject (j, "condition_line", im->cond_line);
        }
      cJSON_AddItemToArray (imports, j);
    }
  return f;
}

static bool
has_init (const char *dir)
{
  cleanup_free char *p = ib_path_join (dir, "__init__.py");
  return access (p, F_OK) == 0;
}

int
ib_py_module_name_of_path (const char *path, char **module, char **package, ib_error_t *err)
{
  char real[PATH_MAX];
  if (realpath (path, real) == NULL)
    return ib_error_errno (err, errno, IB_EUSAGE, "`%s`", path);
  cleanup_free char *dir = ib_xstrdup (real);
  char *slash = strrchr (dir, '/');
  *slash = '\0';
  const char *file = slash + 1;
  size_t fl = strlen (file);
  cleanup_free char *name = fl > 3 && strcmp (file + fl - 3, ".py") == 0 ? strndup (file, fl - 3) : ib_xstrdup (file);
  bool is_init = strcmp (name, "__init__") == 0;
  cleanup_free char *dotted = is_init ? ib_xstrdup ("") : ib_xstrdup (name);
  while (*dir && has_init (dir))
    {
      slash = strrchr (dir, '/');
      char *next = *dotted ? ib_xasprintf ("%s.%s", slash + 1, dotted) : ib_xstrdup (slash + 1);
      free (dotted);
      dotted = next;
      *slash = '\0';
    }
  *module = ib_xstrdup (dotted);
  if (is_init)
    *package = ib_xstrdup (dotted);
  else
    {
      char *dot = strrchr (dotted, '.');
      *package = dot ? strndup (dotted, (size_t) (dot - dotted)) : ib_xstrdup ("");
    }
  return 0;
}
