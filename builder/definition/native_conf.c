#include "builder/definition/native_conf.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

static void
push (char ***list, size_t *n, const char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = ib_xstrdup (s);
}

static int
words (char *s, char **w, int max)
{
  int n = 0;
  for (char *save = NULL, *t = strtok_r (s, " \t", &save); t && n < max; t = strtok_r (NULL, " \t", &save))
    {
      if (*t == '#')
        break;
      w[n++] = t;
    }
  return n;
}

static int
set_once (char **slot, const char *value, const char *what, const char *origin, ib_error_t *err)
{
  if (*slot)
    return ib_error (err, IB_EDEFINITION, "%s: a second `%s` line", origin, what);
  *slot = ib_xstrdup (value);
  return 0;
}

int
ib_native_conf_line (struct ib_native_conf *c, const char *dir, char *line, const char *origin, ib_error_t *err)
{
  char *w[256];
  int n = words (line, w, 256);
  c->enabled = true;
  if (n >= 2 && strcmp (w[0], "check") == 0 && w[1][0] == '/')
    for (int i = 1; i < n; i++)
      push (&c->check, &c->n_check, w[i]);
  else if (n >= 2 && strcmp (w[0], "package") == 0)
    for (int i = 1; i < n; i++)
      push (&c->packages, &c->n_packages, w[i]);
  else if (n >= 2 && strcmp (w[0], "allow-undefined") == 0)
    for (int i = 1; i < n; i++)
      push (&c->allow, &c->n_allow, w[i]);
  else if (n >= 2 && strcmp (w[0], "injected") == 0)
    for (int i = 1; i < n; i++)
      push (&c->injected, &c->n_injected, w[i]);
  else if (n >= 3 && strcmp (w[0], "preload") == 0 && w[2][0] == '/')
    for (int i = 2; i < n; i++)
      {
        c->preloads = ib_xrealloc (c->preloads, (c->n_preloads + 1) * sizeof (*c->preloads));
        c->preloads[c->n_preloads++]
            = (struct ib_native_preload){ ib_xstrdup (w[1]), ib_xstrdup (w[i]), ib_xstrdup (origin) };
      }
  else if (n == 2 && strcmp (w[0], "interpreter") == 0 && w[1][0] == '/')
    return set_once (&c->interpreter, w[1], "interpreter", origin, err);
  else if (n == 2 && strcmp (w[0], "driver") == 0)
    {
      cleanup_free char *p = w[1][0] == '/' ? ib_xstrdup (w[1]) : ib_path_join (dir, w[1]);
      return set_once (&c->driver, p, "driver", origin, err);
    }
  else if (n == 2 && strcmp (w[0], "defaults") == 0 && (strcmp (w[1], "on") == 0 || strcmp (w[1], "off") == 0))
    c->no_defaults = strcmp (w[1], "off") == 0;
  else
    return ib_error (err, IB_EDEFINITION,
                     "%s: expected `check /GLOB...`, `package NAME...`, `preload PACKAGE /PATH...`, "
                     "`allow-undefined PATTERN...`, `interpreter /PATH`, `driver FILE`, `injected SONAME...` "
                     "or `defaults on|off`",
                     origin);
  return 0;
}

static void
free_list (char **l, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free (l[i]);
  free (l);
}

void
ib_native_conf_clear (struct ib_native_conf *c)
{
  free_list (c->check, c->n_check);
  free_list (c->packages, c->n_packages);
  free_list (c->allow, c->n_allow);
  free_list (c->injected, c->n_injected);
  for (size_t i = 0; i < c->n_preloads; i++)
    {
      free (c->preloads[i].package);
      free (c->preloads[i].path);
      free (c->preloads[i].origin);
    }
  free (c->preloads);
  free (c->interpreter);
  free (c->driver);
  memset (c, 0, sizeof (*c));
}
