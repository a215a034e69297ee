/* The image's ld.so.conf, read as ldconfig reads it (ldconf.h). */
#include "layers/view/ldconf.h"

#include <stdlib.h>
#include <string.h>

#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

#define MAX_DEPTH 8
#define MAX_ROUNDS 10

static void
push (char ***list, size_t *n, char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = s;
}

/* Each line of TEXT in order: a folder to ON_DIR, an include's pattern
 * (made absolute from DIR) to ON_INCLUDE, as ldconfig reads them. */
static void
parse_lines (const char *text, const char *dir, void (*on_dir) (void *, char *),
             void (*on_include) (void *, char *), void *data)
{
  cleanup_free char *copy = ib_xstrdup (text);
  for (char *save = NULL, *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *hash = strchr (line, '#');
      if (hash)
        *hash = '\0';
      line += strspn (line, " \t");
      size_t len = strlen (line);
      while (len && strchr (" \t\r", line[len - 1]))
        line[--len] = '\0';
      if (!*line)
        continue;
      if (strncmp (line, "include", 7) == 0 && (line[7] == ' ' || line[7] == '\t'))
        {
          /* Several patterns may follow one include. */
          for (char *s2 = NULL, *pat = strtok_r (line + 8, " \t", &s2); pat; pat = strtok_r (NULL, " \t", &s2))
            on_include (data, pat[0] == '/' ? ib_xstrdup (pat) : ib_path_join (dir, pat));
          continue;
        }
      if (strncmp (line, "hwcap", 5) == 0 && (line[5] == ' ' || line[5] == '\t'))
        continue;
      /* Folders may be separated by ':', ',', spaces or tabs; a "=TYPE"
       * suffix of old ldconfig versions is dropped. */
      for (char *s2 = NULL, *d = strtok_r (line, ":, \t", &s2); d; d = strtok_r (NULL, ":, \t", &s2))
        {
          char *eq = strchr (d, '=');
          if (eq)
            *eq = '\0';
          if (d[0] == '/')
            on_dir (data, ib_xstrdup (d));
        }
    }
}

struct lists
{
  char ***dirs, ***includes;
  size_t *n_dirs, *n_includes;
};

static void
list_dir (void *data, char *d)
{
  struct lists *l = data;
  push (l->dirs, l->n_dirs, d);
}

static void
list_include (void *data, char *pattern)
{
  struct lists *l = data;
  push (l->includes, l->n_includes, pattern);
}

void
ib_ldconf_parse (const char *text, const char *dir, char ***dirs, size_t *n_dirs, char ***includes,
                 size_t *n_includes)
{
  struct lists l = { dirs, includes, n_dirs, n_includes };
  parse_lines (text, dir, list_dir, list_include, &l);
}

int
ib_ldconf_save (const char *cache, const char *digest, const char *text, size_t len)
{
  if (len > IB_LDCONF_MAX)
    return -1;
  cleanup_free char *path = ib_path_join (cache, digest);
  return ib_write_cache_file (path, text, len, NULL);
}

static void
add_dir (struct ib_ldconf *c, char *dir)
{
  /* "/opt/x/" and "/opt/x" are one folder to the loader. */
  size_t len = strlen (dir);
  while (len > 1 && dir[len - 1] == '/')
    dir[--len] = '\0';
  for (size_t i = 0; i < c->n_dirs; i++)
    if (strcmp (c->dirs[i], dir) == 0)
      {
        free (dir);
        return;
      }
  push (&c->dirs, &c->n_dirs, dir);
}

static void
add_missing (struct ib_ldconf *c, const struct ib_fs_entry *e)
{
  for (size_t i = 0; i < c->n_missing; i++)
    if (c->missing[i] == e)
      return;
  c->missing = ib_xrealloc (c->missing, (c->n_missing + 1) * sizeof (*c->missing));
  c->missing[c->n_missing++] = e;
}

struct walk
{
  const struct ib_fsview *v;
  const char *cache;
  int depth;
  struct ib_ldconf *c;
};

static void walk_file (const struct walk *w, const char *path);

static void
walk_dir (void *data, char *dir)
{
  const struct walk *w = data;
  add_dir (w->c, dir);
}

/* An include, where it stands among the folders: its files in name order. */
static void
walk_include (void *data, char *pattern)
{
  const struct walk *w = data;
  struct walk deeper = { w->v, w->cache, w->depth + 1, w->c };
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n = ib_fsview_glob (w->v, pattern, &files);
  for (size_t f = 0; f < n; f++)
    {
      cleanup_free char *abs = ib_xasprintf ("/%s", files[f]->path);
      walk_file (&deeper, abs);
    }
  free (pattern);
}

/* One file of the walk and what it includes. */
static void
walk_file (const struct walk *w, const char *path)
{
  const struct ib_fs_entry *e = ib_fsview_resolve (w->v, path, NULL);
  if (e == NULL || e->type != IB_FS_FILE || w->depth > MAX_DEPTH)
    return;
  cleanup_free char *cpath = ib_path_join (w->cache, e->digest);
  cleanup_free char *text = NULL;
  if (ib_read_file (cpath, IB_LDCONF_MAX, &text, NULL, NULL) < 0)
    {
      add_missing (w->c, e);
      return;
    }
  cleanup_free char *dir = ib_xstrdup (path);
  *strrchr (dir, '/') = '\0';
  parse_lines (text, *dir ? dir : "/", walk_dir, walk_include, (void *) w);
}

bool
ib_ldconf_walk (const struct ib_fsview *v, const char *cache, struct ib_ldconf *out)
{
  ib_ldconf_clear (out);
  struct walk w = { v, cache, 0, out };
  walk_file (&w, "/etc/ld.so.conf");
  return out->n_missing == 0;
}

void
ib_ldconf_clear (struct ib_ldconf *c)
{
  for (size_t i = 0; i < c->n_dirs; i++)
    free (c->dirs[i]);
  free (c->dirs);
  free (c->missing);
  memset (c, 0, sizeof (*c));
}

struct round
{
  const char *cache;
  size_t saved;
};

static int
extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct round *rd = data;
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_reader_slurp (r, IB_LDCONF_MAX, &text, &len, err) < 0)
    return ib_error_wrap (err, "/%s", e->path);
  if (ib_ldconf_save (rd->cache, e->digest, text, len) == 0)
    rd->saved++;
  return 0;
}

int
ib_ldconf_read (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *v, struct ib_ldconf *out,
                size_t *layer_passes, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "ldconf", &cache, err) < 0)
    return -1;
  /* Each round reads the files the last one found included; a file that
   * could not be cached (over the limit) stays missing: read as absent. */
  for (int round = 0; round < MAX_ROUNDS && !ib_ldconf_walk (v, cache, out); round++)
    {
      struct round rd = { cache, 0 };
      if (layer_passes)
        *layer_passes += ib_extract_layer_count (out->missing, out->n_missing);
      if (ib_extract_entries (s, img, out->missing, out->n_missing, extracted, &rd, err) < 0)
        return ib_error_wrap (err, "read the image's ld.so.conf");
      if (rd.saved == 0)
        break;
    }
  return 0;
}
