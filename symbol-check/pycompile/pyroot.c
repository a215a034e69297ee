#include "symbol-check/pycompile/pyroot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layers/view/extract.h"
#include "symbol-check/link-check/linkgate.h"
#include "util/strmap.h"
#include "layers/runner/bundle.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* The loaders' PT_INTERP paths: the link records do not keep them, and a
 * path the image lacks is simply not taken. */
static const char *const loaders[] = { "/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1",
                                       "/lib/ld-linux-armhf.so.3", "/lib64/ld64.so.2", "/lib/ld64.so.1" };

struct closure
{
  const struct ib_fsview *v;
  struct ib_strmap *seen; /* view paths taken */
  size_t n;
  const struct ib_fs_entry **e;
};

static void
take (struct closure *c, const struct ib_fs_entry *e)
{
  size_t dummy;
  if (ib_strmap_add (c->seen, e->path, 1, &dummy))
    {
      c->e = ib_xrealloc (c->e, (c->n + 1) * sizeof (*c->e));
      c->e[c->n++] = e;
    }
}

/* PATH and every symbolic link the kernel follows to reach it (each
 * component's, as ib_fsview_resolve walks them), and a hard link's file. */
static void
take_path (struct closure *c, const char *path, int depth)
{
  if (depth > 40)
    return;
  cleanup_free char *cur = ib_xstrdup ("");
  cleanup_free char *copy = ib_xstrdup (path);
  char *save = NULL;
  for (char *comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0)
        {
          char *slash = strrchr (cur, '/');
          *(slash ? slash : cur) = '\0';
          continue;
        }
      char *next = *cur ? ib_xasprintf ("%s/%s", cur, comp) : ib_xstrdup (comp);
      free (cur);
      cur = next;
      const struct ib_fs_entry *e = ib_fsview_lookup (c->v, cur);
      if (e == NULL)
        return;
      if (e->type != IB_FS_SYMLINK && e->type != IB_FS_HARDLINK)
        continue;
      take (c, e);
      /* Go on from the link's target with the components left. */
      char *slash = strrchr (cur, '/');
      cleanup_free char *parent = slash ? strndup (cur, (size_t) (slash - cur)) : ib_xstrdup ("");
      const char *rest = save && *save ? save : "";
      cleanup_free char *again = e->type == IB_FS_HARDLINK || e->link[0] == '/'
                                     ? ib_xasprintf ("%s/%s", e->link, rest)
                                     : ib_xasprintf ("%s/%s/%s", parent, e->link, rest);
      take_path (c, again, depth + 1);
      return;
    }
  const struct ib_fs_entry *e = *cur ? ib_fsview_lookup (c->v, cur) : NULL;
  if (e)
    take (c, e);
}

/* Whether NAME is one of REL's components. */
static bool
is_component (const char *rel, const char *name)
{
  size_t n = strlen (name);
  for (const char *p = strstr (rel, name); p; p = strstr (p + 1, name))
    if ((p == rel || p[-1] == '/') && (p[n] == '/' || p[n] == '\0'))
      return true;
  return false;
}

/* Every entry under DIR but its site-packages, dist-packages and
 * __pycache__ folders. */
static void
take_tree (struct closure *c, const char *dir)
{
  take_path (c, dir, 0);
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *d = ib_fsview_resolve (c->v, dir, &canon);
  if (d == NULL || d->type != IB_FS_DIR)
    return;
  size_t len = strlen (canon);
  for (size_t i = 0; i < ib_fsview_count (c->v); i++)
    {
      /* The name first: a base's view is read in place, and an entry made
       * of each of its records (336,000 at 30 GB, a walk per tree) was
       * 16 MB of a cold build's peak, for the few thousand under DIR. */
      const char *path = ib_fsview_path (c->v, i);
      if (strncmp (path, canon, len) != 0 || path[len] != '/')
        continue;
      const struct ib_fs_entry *e = ib_fsview_at (c->v, i);
      const char *rel = e->path + len + 1;
      if (strncmp (rel, "site-packages", 13) == 0 && (rel[13] == '/' || rel[13] == '\0'))
        continue;
      if (strncmp (rel, "dist-packages", 13) == 0 && (rel[13] == '/' || rel[13] == '\0'))
        continue;
      /* Bytecode caches: CPython reads one only beside its source (PEP
       * 3147) and compiles the source when it is absent, to the same code;
       * they were 664 of the 1,416 files a cold build over bookworm's
       * Python 3.11 wrote here before the interpreter could start. */
      if (is_component (rel, "__pycache__"))
        continue;
      if (e->type == IB_FS_HARDLINK)
        take_path (c, e->path, 0);
      else
        take (c, e);
    }
}

static int
make_parent (const char *full, ib_error_t *err)
{
  cleanup_free char *parent = ib_xstrdup (full);
  *strrchr (parent, '/') = '\0';
  return ib_mkdir_p (parent, 0755, err);
}

static int
write_file (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  const char *root = data;
  cleanup_free char *full = ib_path_join (root, e->path);
  if (make_parent (full, err) < 0)
    return -1;
  cleanup_close int fd = open (full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode & 0755);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", full);
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  ssize_t n;
  while ((n = ib_layer_reader_data (r, buf, 1 << 20, err)) > 0)
    if (ib_write_all (fd, buf, (size_t) n, full, err) < 0)
      return -1;
  return n < 0 ? ib_error_wrap (err, "/%s", e->path) : 0;
}

static int
cmp_path (const void *a, const void *b)
{
  return strcmp ((*(const struct ib_fs_entry *const *) a)->path, (*(const struct ib_fs_entry *const *) b)->path);
}

/* Folders, then files (one pass over the layers that hold them), then
 * hard links, then symbolic links, in path order: every file is written
 * before any link could lead a path elsewhere. */
static int
write_closure (struct ib_store *s, const struct ib_image *img, struct closure *c, const char *root, ib_error_t *err)
{
  ib_qsort (c->e, c->n, sizeof (*c->e), cmp_path);
  cleanup_free const struct ib_fs_entry **files = ib_xcalloc (c->n + 1, sizeof (*files));
  size_t n_files = 0;
  for (size_t i = 0; i < c->n; i++)
    {
      cleanup_free char *full = ib_path_join (root, c->e[i]->path);
      if (c->e[i]->type == IB_FS_DIR && ib_mkdir_p (full, 0755, err) < 0)
        return -1;
      if (c->e[i]->type == IB_FS_FILE)
        files[n_files++] = c->e[i];
    }
  if (ib_extract_entries (s, img, files, n_files, write_file, (void *) root, err) < 0)
    return -1;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < c->n; i++)
      {
        const struct ib_fs_entry *e = c->e[i];
        if (e->type != (pass ? IB_FS_SYMLINK : IB_FS_HARDLINK) || ib_through_symlink (root, e->path, false))
          continue;
        cleanup_free char *full = ib_path_join (root, e->path);
        cleanup_free char *target = pass ? NULL : ib_path_join (root, e->link);
        if (make_parent (full, err) < 0)
          return -1;
        /* A hard link to a file not taken is left out, as ld.so would
         * find nothing there either. */
        if (pass == 0 && link (target, full) < 0 && errno != ENOENT)
          return ib_error_errno (err, errno, IB_EENV, "link `%s`", full);
        if (pass == 1 && symlink (e->link, full) < 0)
          return ib_error_errno (err, errno, IB_EENV, "symlink `%s`", full);
      }
  return 0;
}

int
ib_pyroot_write (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *v, const char *interpreter,
                 const char *version, const char *dir, ib_error_t *err)
{
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *prog = ib_fsview_resolve (v, interpreter, &canon);
  if (prog == NULL || prog->type != IB_FS_FILE)
    return 1;
  char **libs = NULL;
  size_t n_libs = 0;
  int r = ib_link_program_closure (s, img, v, canon, &libs, &n_libs, err);
  if (r != 0)
    return r;
  struct closure c = { .v = v, .seen = ib_strmap_new () };
  take_path (&c, interpreter, 0);
  for (size_t i = 0; i < n_libs; i++)
    {
      take_path (&c, libs[i], 0);
      free (libs[i]);
    }
  free (libs);
  for (size_t i = 0; i < sizeof (loaders) / sizeof (loaders[0]); i++)
    take_path (&c, loaders[i], 0);
  take_path (&c, "/etc/ld.so.cache", 0);
  take_tree (&c, "/usr/lib/locale/C.utf8");
  /* The standard library: where CPython looks for it, PREFIX/lib/pythonX.Y
   * with PREFIX the folder above the one of its real path. */
  char *slash = strrchr (canon, '/');
  if (slash)
    *slash = '\0';
  slash = strrchr (canon, '/');
  cleanup_free char *stdlib = ib_xasprintf ("/%.*s/lib/python%s", slash ? (int) (slash - canon) : 0, canon, version);
  take_tree (&c, stdlib);
  r = mkdir (dir, 0755) < 0 ? ib_error_errno (err, errno, IB_EENV, "mkdir `%s`", dir) : 0;
  if (r == 0)
    r = write_closure (s, img, &c, dir, err);
  free (c.e);
  ib_strmap_free (c.seen);
  return r < 0 ? ib_error_wrap (err, "the interpreter's files") : 0;
}
