#include "symbol-check/pyfinder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

/* "…/python3.12/…" -> "3.12" */
static bool
version_in (const char *s, char *out, size_t n)
{
  const char *p = strstr (s, "python3.");
  int minor;
  if (p == NULL || sscanf (p + 8, "%d", &minor) != 1)
    return false;
  snprintf (out, n, "3.%d", minor);
  return true;
}

static const struct ib_fs_entry *
lookup_file (const struct ib_fsview *v, const char *path)
{
  const struct ib_fs_entry *e = ib_fsview_lookup (v, path);
  if (e && e->type == IB_FS_SYMLINK)
    e = ib_fsview_follow (v, e);
  return e && e->type == IB_FS_FILE ? e : NULL;
}

static void
find_interpreter (struct ib_py_layout *l)
{
  if (!l->version[0])
    {
      static const char *const links[] = { "usr/local/bin/python3", "usr/bin/python3", NULL };
      for (int i = 0; links[i] && !l->version[0]; i++)
        {
          const struct ib_fs_entry *e = lookup_file (l->view, links[i]);
          if (e)
            version_in (e->path, l->version, sizeof (l->version));
        }
    }
  if (!l->version[0])
    return;
  static const char *const dirs[] = { "usr/local/bin", "usr/bin", NULL };
  for (int i = 0; dirs[i]; i++)
    {
      cleanup_free char *p = ib_xasprintf ("%s/python%s", dirs[i], l->version);
      if (lookup_file (l->view, p))
        {
          snprintf (l->interpreter, sizeof (l->interpreter), "/%s", p);
          return;
        }
    }
}

void
ib_py_layout_init (struct ib_py_layout *l, const struct ib_fsview *view, const char *root, const char *architecture)
{
  memset (l, 0, sizeof (*l));
  l->view = view;
  l->root = root;
  version_in (root, l->version, sizeof (l->version));
  find_interpreter (l);
  const char *a = architecture ? architecture : "";
  snprintf (l->triplet, sizeof (l->triplet), "%s-linux-gnu",
            strcmp (a, "arm64") == 0 ? "aarch64" : strcmp (a, "ppc64le") == 0 ? "powerpc64le"
                                                 : strcmp (a, "s390x") == 0   ? "s390x"
                                                                              : "x86_64");
}

/* Candidates are tried in importlib's order and listed for the message. */
struct finder
{
  const struct ib_py_layout *l;
  char *tried;
};

static const struct ib_fs_entry *
try_path (struct finder *f, const char *rel, bool folder)
{
  cleanup_free char *p = *f->l->root ? ib_xasprintf ("%s/%s", f->l->root, rel) : ib_xstrdup (rel);
  if (f->tried)
    {
      char *next = *f->tried ? ib_xasprintf ("%s, %s%s", f->tried, rel, folder ? "/" : "")
                             : ib_xasprintf ("%s%s", rel, folder ? "/" : "");
      free (f->tried);
      f->tried = next;
    }
  if (!folder)
    return lookup_file (f->l->view, p);
  const struct ib_fs_entry *e = ib_fsview_lookup (f->l->view, p);
  return e && e->type == IB_FS_DIR ? e : NULL;
}

/* The extension suffixes of the image's CPython: a known version gives its
 * own tag; without one every 3.X tag is accepted. */
static const struct ib_fs_entry *
try_extension (struct finder *f, const char *rel)
{
  const struct ib_py_layout *l = f->l;
  int lo = 6, hi = 14, minor;
  if (l->version[0] && sscanf (l->version, "3.%d", &minor) == 1)
    lo = hi = minor;
  for (int m = lo; m <= hi; m++)
    {
      cleanup_free char *p = ib_xasprintf ("%s.cpython-3%d-%s.so", rel, m, l->triplet);
      const struct ib_fs_entry *e = try_path (f, p, false);
      if (e)
        return e;
    }
  cleanup_free char *abi3 = ib_xasprintf ("%s.abi3.so", rel);
  cleanup_free char *plain = ib_xasprintf ("%s.so", rel);
  const struct ib_fs_entry *e = try_path (f, abi3, false);
  return e ? e : try_path (f, plain, false);
}

static enum ib_py_kind
resolve_one (struct finder *f, const char *module, const struct ib_fs_entry **out)
{
  cleanup_free char *rel = ib_xstrdup (module);
  for (char *p = rel; *p; p++)
    if (*p == '.')
      *p = '/';
  cleanup_free char *init = ib_xasprintf ("%s/__init__.py", rel);
  cleanup_free char *src = ib_xasprintf ("%s.py", rel);
  if ((*out = try_path (f, init, false)))
    return IB_PY_PACKAGE;
  if ((*out = try_extension (f, rel)))
    return IB_PY_EXTENSION;
  if ((*out = try_path (f, src, false)))
    return IB_PY_SOURCE;
  if ((*out = try_path (f, rel, true)))
    return IB_PY_NAMESPACE;
  return IB_PY_NONE;
}

void
ib_py_resolve (const struct ib_py_layout *l, const char *module, struct ib_py_resolved *out, char **tried)
{
  memset (out, 0, sizeof (*out));
  struct finder quiet = { l, NULL };
  out->kind = resolve_one (&quiet, module, &out->e);
  if (out->kind != IB_PY_NONE)
    return;
  /* A module below an extension module is made by it at run time. */
  cleanup_free char *prefix = ib_xstrdup (module);
  for (char *dot = strchr (prefix, '.'); dot; dot = strchr (dot + 1, '.'))
    {
      *dot = '\0';
      const struct ib_fs_entry *e;
      enum ib_py_kind k = resolve_one (&quiet, prefix, &e);
      if (k == IB_PY_EXTENSION)
        {
          out->kind = IB_PY_BELOW_EXTENSION;
          out->e = e;
          out->extension = ib_xstrdup (prefix);
          return;
        }
      if (k == IB_PY_NONE)
        break;
      *dot = '.';
    }
  if (tried)
    {
      struct finder loud = { l, ib_xstrdup ("") };
      const struct ib_fs_entry *e;
      resolve_one (&loud, module, &e);
      *tried = loud.tried;
    }
}

void
ib_py_resolved_clear (struct ib_py_resolved *r)
{
  free (r->extension);
  r->extension = NULL;
}

const char *
ib_py_last_part (const char *module)
{
  const char *dot = strrchr (module, '.');
  return dot ? dot + 1 : module;
}
