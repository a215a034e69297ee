#include "symbol-check/link-check/linkgate.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/view/extract.h"
#include "layers/view/ldconf.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/link-check/elfdyn.h"
#include "symbol-check/link-check/ldpaths.h"
#include "symbol-check/link-check/linkgate_private.h"
#include "symbol-check/link-check/resolve.h"
#include "util/strmap.h"
#include "symbol-check/link-check/reccache.h"

#define NOT_ELF_TEXT "imgbuild-elflink 1 not-elf\n"
#define MAX_ROUNDS 64
/* The whole records (symbols included) held in memory at once, beyond
 * their heads and the one or two records a lookup holds (reccache.h).  On
 * the torch image (413 records, 24 MB in all, libtorch_cpu's 3.8 MB) 4 MiB
 * reads 800 records from the cache, some twice, in 0.28 s of CPU where
 * holding every record took 0.33 s; 16 MiB reads each once but peaks some
 * 11 MB higher.  IMGBUILD_LINK_CACHE_KIB sets another, for tests. */
#define SYMBOL_BUDGET (4u << 20)

/* Libraries that the NVIDIA container runtime injects from the host's
 * driver: absent from a correct image.  Their symbols by pattern: cuInit,
 * cuMemAlloc_v2 ... (cublas*, cudnn* are not the driver's), nvmlInit ... */
static const struct
{
  const char *soname, *pattern;
} driver_libs[] = {
  { "libcuda.so.1", "cu[A-Z]*" },
  { "libnvidia-ml.so.1", "nvml[A-Z]*" },
  { "libnvidia-ptxjitcompiler.so.1", NULL },
  { "libnvidia-nvvm.so.4", NULL },
  { "libcudadebugger.so.1", NULL },
};
#define N_DRIVER_LIBS (sizeof (driver_libs) / sizeof (driver_libs[0]))

struct gate
{
  struct ib_store *s;
  const struct ib_image *img;
  const struct ib_fsview *view;
  const struct ib_native_rules *r;
  ib_problem_fn fn;
  void *data;
  struct ib_native_stats *st;
  char *elf_cache, *conf_cache;
  struct ib_strmap *by_digest; /* digest -> index into RECS */
  size_t n_recs;
  struct ib_elf_link **recs; /* heads (ib_elf_link_head); NULL: not ELF */
  bool *whole;               /* a whole record: its cache file was not written */
  char **digests;
  struct ib_reccache *syms;  /* the whole records of heads, within a budget */
  char *lost;                /* a record that could not be read again */
  size_t n_wanted;
  const struct ib_fs_entry **wanted;
  struct ib_strmap *wanted_set;
  struct ib_link_paths paths;
  struct ib_elf_link *driver;
  struct ib_strmap *said; /* problems already reported */
  size_t n_said_text;
  char **said_text;
};

/* SYMBOL_BUDGET, or IMGBUILD_LINK_CACHE_KIB's (tests force evictions with
 * a small one: the verdict must not change). */
static size_t
symbol_budget (void)
{
  const char *v = getenv ("IMGBUILD_LINK_CACHE_KIB");
  char *end;
  unsigned long long kib = v && *v ? strtoull (v, &end, 10) : 0;
  return v && *v && *end == '\0' && kib < (1ull << 40) ? (size_t) kib << 10 : SYMBOL_BUDGET;
}

/* ---- records: from the cache, or read out of the layers ------------------ */

/* The record L (NULL: not ELF) of content DIGEST: its head kept, the
 * whole record to the budgeted cache, unless CACHED is false (no cache
 * file to read it again from: kept whole). */
static void
rec_put (struct gate *g, const char *digest, struct ib_elf_link *l, bool cached)
{
  g->recs = ib_xrealloc (g->recs, (g->n_recs + 1) * sizeof (*g->recs));
  g->whole = ib_xrealloc (g->whole, (g->n_recs + 1) * sizeof (*g->whole));
  g->digests = ib_xrealloc (g->digests, (g->n_recs + 1) * sizeof (*g->digests));
  g->whole[g->n_recs] = l && !cached;
  g->recs[g->n_recs] = l && cached ? ib_elf_link_head (l) : l;
  if (l && cached)
    ib_reccache_add (g->syms, g->n_recs, l);
  g->digests[g->n_recs] = ib_xstrdup (digest);
  ib_strmap_put (g->by_digest, g->digests[g->n_recs], g->n_recs);
  g->n_recs++;
}

/* A cache file cut short or of another format is a miss, never half-used. */
static bool
rec_from_cache (struct gate *g, const char *digest)
{
  cleanup_free char *path = ib_path_join (g->elf_cache, digest);
  cleanup_free char *text = NULL;
  if (ib_read_file (path, 1u << 30, &text, NULL, NULL) < 0)
    return false;
  if (strcmp (text, NOT_ELF_TEXT) == 0)
    {
      rec_put (g, digest, NULL, true);
      return true;
    }
  struct ib_elf_link *l = ib_elf_link_from_text (text);
  if (l == NULL)
    return false;
  text = NULL; /* the record's now */
  rec_put (g, digest, l, true);
  return true;
}

static void
want (struct gate *g, const struct ib_fs_entry *e)
{
  size_t dummy;
  if (ib_strmap_get (g->wanted_set, e->path, &dummy))
    return;
  g->wanted = ib_xrealloc (g->wanted, (g->n_wanted + 1) * sizeof (*g->wanted));
  g->wanted[g->n_wanted++] = e;
  ib_strmap_put (g->wanted_set, e->path, 1);
}

static int
record_fn (void *data, const struct ib_fs_entry *e, const struct ib_elf_link **out)
{
  struct gate *g = data;
  size_t at;
  if (!ib_strmap_get (g->by_digest, e->digest, &at))
    {
      if (!e->digest[0] || !rec_from_cache (g, e->digest))
        {
          want (g, e);
          return 0;
        }
      g->st->cached++;
      at = g->n_recs - 1;
    }
  *out = g->recs[at];
  return 1;
}

/* The whole record of a file whose head record_fn gave. */
static const struct ib_elf_link *
symbols_fn (void *data, const struct ib_fs_entry *e)
{
  struct gate *g = data;
  size_t at;
  if (!ib_strmap_get (g->by_digest, e->digest, &at) || g->recs[at] == NULL)
    return NULL; /* cannot be: the linker asks only for the ELF objects it was given */
  if (g->whole[at])
    return g->recs[at];
  const struct ib_elf_link *l = ib_reccache_get (g->syms, at, e->digest);
  if (l == NULL && g->lost == NULL)
    g->lost = ib_xstrdup (e->path);
  return l;
}

static void
release_fn (void *data, const struct ib_fs_entry *e)
{
  struct gate *g = data;
  size_t at;
  if (ib_strmap_get (g->by_digest, e->digest, &at) && !g->whole[at])
    ib_reccache_put (g->syms, at);
}

/* L's cache text (NULL: not ELF) streamed into PATH, as
 * ib_write_cache_file writes a whole one: never torn, no fsync. */
static void
write_record (const char *path, const struct ib_elf_link *l)
{
  struct ib_atomic_file af;
  if (ib_atomic_file_open (&af, path, NULL) < 0)
    return;
  int fd = fcntl (af.fd, F_DUPFD_CLOEXEC, 0);
  FILE *f = fd < 0 ? NULL : fdopen (fd, "w");
  if (f == NULL && fd >= 0)
    close (fd);
  char buf[64 << 10]; /* stdio's own would be a page: a write(2) per 4 KiB */
  if (f)
    setvbuf (f, buf, _IOFBF, sizeof (buf));
  bool ok = f != NULL && (l ? ib_elf_link_write_text (l, f) == 0 : fputs (NOT_ELF_TEXT, f) >= 0);
  if (f && fclose (f) != 0)
    ok = false;
  if (ok)
    ib_atomic_file_commit (&af, 0644, false, NULL);
  else
    ib_atomic_file_abort (&af);
}

int
ib_link_record_save (const char *cache, const char *digest, int fd, const char *what, struct ib_elf_link **out,
                     ib_error_t *err)
{
  struct ib_elf_link *l = NULL;
  if (ib_elf_link_read (fd, what, &l, err) < 0)
    {
      if ((*err)->class == IB_EENV)
        return -1;
      ib_error_release (err); /* not ELF, or damaged: the loader would not take it either */
      l = NULL;
    }
  cleanup_free char *path = ib_path_join (cache, digest);
  write_record (path, l); /* a cache not written costs time, not correctness */
  if (out)
    *out = l;
  else
    ib_elf_link_free (l);
  return 0;
}

static int
rec_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct gate *g = data;
  size_t at;
  if (ib_strmap_get (g->by_digest, e->digest, &at))
    return 0; /* the same content at another path */
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, g->elf_cache, &fd, err) < 0)
    return -1;
  struct ib_elf_link *l = NULL;
  if (ib_link_record_save (g->elf_cache, e->digest, fd, e->path, &l, err) < 0)
    return -1;
  cleanup_free char *cpath = ib_path_join (g->elf_cache, e->digest);
  rec_put (g, e->digest, l, access (cpath, F_OK) == 0);
  g->st->read++;
  return 0;
}

static int
read_wanted (struct gate *g, ib_extract_fn fn, ib_error_t *err)
{
  g->st->layers_read += ib_extract_layer_count (g->wanted, g->n_wanted);
  int r = ib_extract_entries (g->s, g->img, g->wanted, g->n_wanted, fn, g, err);
  g->n_wanted = 0;
  ib_strmap_free (g->wanted_set);
  g->wanted_set = ib_strmap_new ();
  return r;
}

/* ---- ld.so.conf ---------------------------------------------------------- */

static int
load_ldconf (struct gate *g, ib_error_t *err)
{
  struct ib_ldconf c = { 0 };
  int r = ib_ldconf_read (g->s, g->img, g->view, &c, &g->st->layers_read, err);
  for (size_t i = 0; r == 0 && i < c.n_dirs; i++)
    ib_link_paths_add_conf (&g->paths, c.dirs[i]);
  ib_ldconf_clear (&c);
  return r;
}

/* ---- which objects ------------------------------------------------------- */

struct roots
{
  size_t n;
  char **path;
  struct ib_strmap *seen;
};

static void
root_add (struct roots *r, const char *path)
{
  size_t dummy;
  if (ib_strmap_get (r->seen, path, &dummy))
    return;
  r->path = ib_xrealloc (r->path, (r->n + 1) * sizeof (*r->path));
  r->path[r->n] = ib_xstrdup (path);
  ib_strmap_put (r->seen, r->path[r->n], r->n);
  r->n++;
}

static bool
looks_loadable (const struct ib_fs_entry *e)
{
  const char *base = strrchr (e->path, '/');
  base = base ? base + 1 : e->path;
  return strstr (base, ".so") != NULL || (e->mode & 0111);
}

/* The top-level package of a path under a dist-/site-packages folder. */
static char *
package_of (const char *path)
{
  const char *m = strstr (path, "-packages/");
  if (m == NULL || (m - path < 4) || (strncmp (m - 4, "dist", 4) != 0 && strncmp (m - 4, "site", 4) != 0))
    return NULL;
  m += strlen ("-packages/");
  size_t len = strcspn (m, "/");
  return m[len] == '/' ? strndup (m, len) : NULL;
}

static bool
in_packages (const struct ib_native_rules *r, const char *path)
{
  cleanup_free char *pkg = package_of (path);
  size_t n = strlen (path);
  for (size_t i = 0; pkg && i < r->n_packages; i++)
    if (strcmp (pkg, r->packages[i]) == 0 && n > 3 && strcmp (path + n - 3, ".so") == 0)
      return true;
  return false;
}

static void
select_roots (struct gate *g, struct roots *out)
{
  const struct ib_native_rules *r = g->r;
  for (size_t i = 0; i < r->n_check; i++)
    {
      cleanup_free const struct ib_fs_entry **files = NULL;
      size_t n = ib_fsview_glob (g->view, r->check[i], &files);
      for (size_t f = 0; f < n; f++)
        root_add (out, files[f]->path);
    }
  if (!r->defaults)
    return;
  /* By name first: a base's view is read in place, and an entry made of
   * each of its records (336,000 at 30 GB) was 16 MB of a cold build's
   * peak, for the few hundred extension modules.  The checked layers'
   * entries (all of them may be picked) come from ib_fsview_from_layer,
   * met in the same path order as the walk. */
  cleanup_free const struct ib_fs_entry **upper = NULL;
  size_t n_upper = ib_fsview_from_layer (g->view, r->first_checked_layer, &upper), u = 0;
  for (size_t i = 0; i < ib_fsview_count (g->view); i++)
    {
      const char *path = ib_fsview_path (g->view, i);
      bool checked = u < n_upper && strcmp (upper[u]->path, path) == 0, pkg = in_packages (r, path);
      const struct ib_fs_entry *e = checked ? upper[u++] : pkg ? ib_fsview_at (g->view, i) : NULL;
      if (e && e->type == IB_FS_FILE && ((checked && looks_loadable (e)) || pkg))
        root_add (out, e->path);
    }
}

static bool
is_python_object (const char *path)
{
  return strstr (path, "/dist-packages/") || strstr (path, "/site-packages/") || strstr (path, "/lib-dynload/");
}

/* The image's interpreter for objects under PATH: the definition's, else
 * /usr/local/bin/python3 for /usr/local trees, else /usr/bin/python3. */
static char *
interpreter_for (const struct gate *g, const char *path)
{
  const char *tries[] = { g->r->interpreter, strncmp (path, "usr/local/", 10) == 0 ? "/usr/local/bin/python3" : NULL,
                          "/usr/bin/python3", "/usr/local/bin/python3" };
  for (size_t i = 0; i < 4; i++)
    {
      char *canon = NULL;
      const struct ib_fs_entry *e = tries[i] ? ib_fsview_resolve (g->view, tries[i], &canon) : NULL;
      if (e && e->type == IB_FS_FILE)
        return canon;
      free (canon);
      if (i == 0 && tries[0])
        return NULL; /* a declared one that is absent is not replaced by a guess */
    }
  return NULL;
}

struct root_ctx
{
  struct ib_link_context c;
  char *interp;
  char **preloads;
};

/* A root judged as a program of the image loads it (ib_native_rules.hosted):
 * a file no one may execute, which is how Debian ships shared libraries
 * and plugins; an executable (or a library marked executable, as libc.so.6
 * is) keeps the strict verdict, and so does an extension module, whose
 * program is known (the interpreter, loaded with it): what it lacks, the
 * import lacks. */
static bool
hosted_root (const struct gate *g, const char *root)
{
  if (!g->r->hosted || g->r->as_ldd || is_python_object (root))
    return false;
  cleanup_free char *abs = ib_xasprintf ("/%s", root);
  const struct ib_fs_entry *e = ib_fsview_resolve (g->view, abs, NULL);
  return e && e->type == IB_FS_FILE && (e->mode & 0111) == 0;
}

static void
ctx_for (const struct gate *g, const char *root, struct root_ctx *rc)
{
  memset (rc, 0, sizeof (*rc));
  rc->c.hosted = hosted_root (g, root);
  if (g->r->as_ldd || !is_python_object (root))
    return;
  rc->interp = interpreter_for (g, root);
  rc->c.interpreter = rc->interp;
  rc->c.python_symbols = rc->interp == NULL;
  cleanup_free char *pkg = package_of (root);
  for (size_t i = 0; pkg && i < g->r->n_preloads; i++)
    if (strcmp (g->r->preloads[i].package, pkg) == 0)
      {
        rc->preloads = ib_xrealloc (rc->preloads, (rc->c.n_preloads + 1) * sizeof (*rc->preloads));
        rc->preloads[rc->c.n_preloads++] = ib_xstrdup (g->r->preloads[i].path + (g->r->preloads[i].path[0] == '/'));
      }
  rc->c.preloads = rc->preloads;
}

static void
ctx_clear (struct root_ctx *rc)
{
  free (rc->interp);
  for (size_t i = 0; i < rc->c.n_preloads; i++)
    free (rc->preloads[i]);
  free (rc->preloads);
}

/* ---- reading what the loads need, in as few layer passes as can be ------- */

/* Want the library at view entry E (a link is followed) unless known. */
static void
prefetch_entry (struct gate *g, const struct ib_fs_entry *e)
{
  cleanup_free char *abs = ib_xasprintf ("/%s", e->path);
  const struct ib_fs_entry *f = ib_fsview_resolve (g->view, abs, NULL);
  size_t at;
  if (f == NULL || f->type != IB_FS_FILE || !f->digest[0] || ib_strmap_get (g->by_digest, f->digest, &at))
    return;
  cleanup_free char *cpath = ib_path_join (g->elf_cache, f->digest);
  if (access (cpath, F_OK) != 0)
    want (g, f);
}

/* Every "*.so*" right in folder DIR, or anywhere under it with DEEP. */
static void
prefetch_folder (struct gate *g, const char *dir, bool deep)
{
  size_t dl = strlen (dir);
  for (size_t i = 0; i < ib_fsview_count (g->view); i++)
    {
      const struct ib_fs_entry *e = ib_fsview_at (g->view, i);
      const char *rest = e->path + dl + 1;
      const char *base = strrchr (e->path, '/') ? strrchr (e->path, '/') + 1 : e->path;
      if (strncmp (e->path, dir, dl) == 0 && e->path[dl] == '/' && (deep || !strchr (rest, '/'))
          && strstr (base, ".so"))
        prefetch_entry (g, e);
    }
}

/* A cold first round reads, with the roots, every not yet cached library
 * of the search folders and of the roots' Python packages (where their
 * $ORIGIN paths lead): most closures end there, so most images need one
 * pass over their layers instead of one per level of dependencies. */
static void
prefetch (struct gate *g, const struct roots *roots)
{
  char **dirs[2] = { g->paths.conf, g->paths.defaults };
  size_t nd[2] = { g->paths.n_conf, g->paths.n_defaults };
  for (int k = 0; k < 2; k++)
    for (size_t d = 0; d < nd[k]; d++)
      {
        cleanup_free char *dir = NULL;
        const struct ib_fs_entry *de = ib_fsview_resolve (g->view, dirs[k][d], &dir);
        if (de && de->type == IB_FS_DIR)
          prefetch_folder (g, dir, false);
      }
  struct ib_strmap *done = ib_strmap_new ();
  char **pkgs = NULL;
  size_t n = 0;
  for (size_t i = 0; i < roots->n; i++)
    {
      cleanup_free char *pkg = package_of (roots->path[i]);
      const char *m = pkg ? strstr (roots->path[i], "-packages/") : NULL;
      size_t dummy;
      char *dir = m ? strndup (roots->path[i], (size_t) (m - roots->path[i]) + strlen ("-packages/") + strlen (pkg))
                    : NULL;
      if (dir && !ib_strmap_get (done, dir, &dummy))
        {
          pkgs = ib_xrealloc (pkgs, (n + 1) * sizeof (*pkgs));
          pkgs[n] = dir;
          ib_strmap_put (done, pkgs[n++], 1);
          prefetch_folder (g, dir, true);
        }
      else
        free (dir);
    }
  ib_strmap_free (done);
  for (size_t i = 0; i < n; i++)
    free (pkgs[i]);
  free (pkgs);
}

/* Load every root until no record is missing; each round reads what the
 * previous one found missing, every layer at most once per round. */
static int
load_all (struct gate *g, struct ib_linker *k, const struct roots *roots, ib_error_t *err)
{
  for (size_t round = 0;; round++)
    {
      bool pending = false;
      for (size_t i = 0; i < roots->n; i++)
        {
          struct root_ctx rc;
          ctx_for (g, roots->path[i], &rc);
          pending |= ib_linker_load (k, roots->path[i], &rc.c, false, NULL) == 1;
          ctx_clear (&rc);
        }
      if (!pending)
        return 0;
      if (round == 0)
        prefetch (g, roots);
      if (round >= MAX_ROUNDS)
        return ib_error (err, IB_EINTEGRITY, "the dependencies of the image's objects do not settle");
      g->st->rounds++;
      if (read_wanted (g, rec_extracted, err) < 0)
        return -1;
    }
}

/* ---- reporting ----------------------------------------------------------- */

static const char *kind_names[] = { "missing", "undefined", "version", "machine", "not-elf",
                                    "no-version-info", "shadowed", "unchecked", "allowed" };

static char *
problem_text (const struct ib_link_finding *f)
{
  switch (f->kind)
    {
    case IB_LINK_MISSING:
      return ib_xasprintf ("/%s: needs %s, which is not in the image (%s)", f->object, f->name, f->detail);
    case IB_LINK_UNDEFINED:
      return ib_xasprintf ("/%s: undefined symbol %s%s%s (%s)", f->object, f->name, f->version ? "@" : "",
                           f->version ? f->version : "", f->detail);
    case IB_LINK_UNCHECKED:
      return ib_xasprintf ("/%s: symbol %s%s%s unchecked: %s", f->object, f->name, f->version ? "@" : "",
                           f->version ? f->version : "", f->detail);
    default:
      return ib_xasprintf ("/%s: %s", f->object, f->detail);
    }
}

static void
report_finding (struct gate *g, const struct ib_link_finding *f)
{
  if (f->kind == IB_LINK_ALLOWED)
    {
      g->st->allowed++;
      return;
    }
  char *text = problem_text (f);
  size_t dummy;
  if (ib_strmap_get (g->said, text, &dummy))
    {
      free (text);
      return;
    }
  g->said_text = ib_xrealloc (g->said_text, (g->n_said_text + 1) * sizeof (*g->said_text));
  g->said_text[g->n_said_text++] = text;
  ib_strmap_put (g->said, text, 1);
  if (f->kind == IB_LINK_UNCHECKED)
    g->st->unchecked++;
  if (f->is_error)
    g->st->errors++;
  else
    g->st->warnings++;
  ib_problemf (g->fn, g->data, f->is_error, "%s", text);
}

static void
needs_json (cJSON *o, char *const needs[3])
{
  static const char *keys[3] = { "GLIBC", "GLIBCXX", "CXXABI" };
  cJSON *n = cJSON_AddObjectToObject (o, "needs");
  for (int x = 0; x < 3; x++)
    if (needs[x])
      cJSON_AddStringToObject (n, keys[x], needs[x]);
}

static cJSON *
report_json (const struct ib_link_report *rep)
{
  cJSON *o = cJSON_CreateObject ();
  cleanup_free char *root = ib_xasprintf ("/%s", rep->root);
  cJSON_AddStringToObject (o, "path", root);
  cJSON_AddStringToObject (o, "loaded_as", rep->python ? "python" : "ldd");
  cJSON *loaded = cJSON_AddArrayToObject (o, "loaded");
  for (size_t i = 0; i < rep->n_loaded; i++)
    {
      cJSON *l = cJSON_CreateObject ();
      cJSON_AddStringToObject (l, "name", rep->loaded[i].name);
      if (rep->loaded[i].path)
        {
          cleanup_free char *p = ib_xasprintf ("/%s", rep->loaded[i].path);
          cJSON_AddStringToObject (l, "path", p);
        }
      else
        cJSON_AddNullToObject (l, "path");
      if (rep->loaded[i].driver)
        cJSON_AddBoolToObject (l, "injected", true);
      cJSON_AddItemToArray (loaded, l);
    }
  cJSON *objs = cJSON_AddArrayToObject (o, "objects");
  for (size_t i = 0; i < rep->n_objects; i++)
    {
      cJSON *x = cJSON_CreateObject ();
      cleanup_free char *p = ib_xasprintf ("/%s", rep->objects[i].path);
      cJSON_AddStringToObject (x, "path", p);
      needs_json (x, rep->objects[i].needs);
      cJSON_AddItemToArray (objs, x);
    }
  cJSON *probs = cJSON_AddArrayToObject (o, "problems");
  for (size_t i = 0; i < rep->n_findings; i++)
    {
      const struct ib_link_finding *f = &rep->findings[i];
      cJSON *x = cJSON_CreateObject ();
      cleanup_free char *p = ib_xasprintf ("/%s", f->object);
      cJSON_AddStringToObject (x, "kind", kind_names[f->kind]);
      cJSON_AddBoolToObject (x, "error", f->is_error);
      cJSON_AddStringToObject (x, "object", p);
      cJSON_AddStringToObject (x, "name", f->name);
      if (f->version)
        cJSON_AddStringToObject (x, "version", f->version);
      cJSON_AddStringToObject (x, "detail", f->detail);
      cJSON_AddItemToArray (probs, x);
    }
  return o;
}

/* What the image's libc and libstdc++ provide: the highest versions. */
static void
provides_json (struct gate *g, cJSON *json)
{
  cJSON *p = cJSON_AddObjectToObject (json, "provides");
  const char *libs[3] = { "libc.so.6", "libstdc++.so.6", "libstdc++.so.6" };
  for (int x = 0; x < 3; x++)
    for (size_t d = 0; d < g->paths.n_defaults; d++)
      {
        cleanup_free char *path = ib_path_join (g->paths.defaults[d], libs[x]);
        const struct ib_fs_entry *e = ib_fsview_resolve (g->view, path, NULL);
        size_t at;
        if (e == NULL || e->type != IB_FS_FILE || !ib_strmap_get (g->by_digest, e->digest, &at) || !g->recs[at])
          continue;
        const char *v = ib_link_highest_version (g->recs[at], ib_link_version_prefixes[x]);
        if (v)
          cJSON_AddStringToObject (p, (const char *[]){ "GLIBC", "GLIBCXX", "CXXABI" }[x], v);
        break;
      }
}

/* How the budget of whole records went: records read again from the
 * cache once let go, and the most held at once. */
static void
record_cache_json (const struct gate *g, cJSON *json)
{
  struct ib_reccache_stats st;
  ib_reccache_stats (g->syms, &st);
  cJSON *c = cJSON_AddObjectToObject (json, "record_cache");
  cJSON_AddNumberToObject (c, "budget_kib", (double) (symbol_budget () >> 10));
  cJSON_AddNumberToObject (c, "loads", (double) st.loads);
  cJSON_AddNumberToObject (c, "evictions", (double) st.evictions);
  cJSON_AddNumberToObject (c, "peak_kib", (double) (st.peak_bytes >> 10));
}

static int
check_all (struct gate *g, struct ib_linker *k, const struct roots *roots, cJSON *json)
{
  cJSON *list = json ? cJSON_AddArrayToObject (json, "objects") : NULL;
  for (size_t i = 0; i < roots->n; i++)
    {
      const struct ib_fs_entry *e = ib_fsview_lookup (g->view, roots->path[i]);
      size_t at;
      if (e && ib_strmap_get (g->by_digest, e->digest, &at) && g->recs[at] == NULL)
        continue; /* not an ELF object: nothing to load */
      struct root_ctx rc;
      ctx_for (g, roots->path[i], &rc);
      struct ib_link_report *rep = NULL;
      int r = ib_linker_load (k, roots->path[i], &rc.c, true, &rep);
      ctx_clear (&rc);
      if (r != 0 || rep == NULL)
        continue; /* cannot happen after load_all: every record is there */
      g->st->objects++;
      g->st->loaded += rep->n_loaded;
      g->st->refs += rep->refs_checked;
      for (size_t f = 0; f < rep->n_findings; f++)
        report_finding (g, &rep->findings[f]);
      if (list)
        cJSON_AddItemToArray (list, report_json (rep));
      ib_link_report_free (rep);
    }
  if (json)
    {
      provides_json (g, json);
      record_cache_json (g, json);
    }
  return 0;
}

/* ---- the gate ------------------------------------------------------------ */

const char *
ib_link_config_env (const struct ib_image *img, const char *key)
{
  const cJSON *env = img->config_json ? cJSON_GetObjectItem (cJSON_GetObjectItem (img->config_json, "config"), "Env")
                                      : NULL;
  size_t n = strlen (key);
  const cJSON *it;
  cJSON_ArrayForEach (it, env)
    if (cJSON_IsString (it) && strncmp (it->valuestring, key, n) == 0 && it->valuestring[n] == '=')
      return it->valuestring + n + 1;
  return NULL;
}

unsigned
ib_link_image_machine (const struct ib_image *img)
{
  const cJSON *a = img->config_json ? cJSON_GetObjectItem (img->config_json, "architecture") : NULL;
  unsigned m = cJSON_IsString (a) ? ib_link_machine_of_arch (a->valuestring) : 0;
  return m ? m : ib_link_machine_of_arch ("amd64");
}

static int
read_driver (struct gate *g, ib_error_t *err)
{
  if (g->r->driver == NULL)
    return 0;
  cleanup_close int fd = open (g->r->driver, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EDEFINITION, "driver `%s`", g->r->driver);
  return ib_elf_link_read (fd, g->r->driver, &g->driver, err);
}

static void
gate_clear (struct gate *g)
{
  for (size_t i = 0; i < g->n_recs; i++)
    {
      ib_elf_link_free (g->recs[i]);
      free (g->digests[i]);
    }
  free (g->recs);
  free (g->whole);
  free (g->digests);
  ib_reccache_free (g->syms);
  free (g->lost);
  free (g->wanted);
  ib_strmap_free (g->wanted_set);
  ib_strmap_free (g->by_digest);
  for (size_t i = 0; i < g->n_said_text; i++)
    free (g->said_text[i]);
  free (g->said_text);
  ib_strmap_free (g->said);
  ib_link_paths_clear (&g->paths);
  ib_elf_link_free (g->driver);
  free (g->elf_cache);
  free (g->conf_cache);
}

static int
run_gate (struct gate *g, cJSON *json, ib_error_t *err)
{
  struct ib_link_injected inj[N_DRIVER_LIBS + 16];
  size_t n_inj = 0;
  for (size_t i = 0; i < N_DRIVER_LIBS; i++)
    inj[n_inj++] = (struct ib_link_injected){ driver_libs[i].soname, driver_libs[i].pattern,
                                              i == 0 ? g->driver : NULL };
  for (size_t i = 0; i < g->r->n_injected && n_inj < N_DRIVER_LIBS + 16; i++)
    inj[n_inj++] = (struct ib_link_injected){ g->r->injected[i], NULL, NULL };
  struct ib_linker_config cfg = { .view = g->view, .paths = &g->paths, .record = record_fn, .symbols = symbols_fn,
                                  .release = release_fn, .data = g, .injected = inj, .n_injected = n_inj, .allow = g->r->allow,
                                  .n_allow = g->r->n_allow };
  struct ib_linker *k = ib_linker_new (&cfg);
  struct roots roots = { .seen = ib_strmap_new () };
  select_roots (g, &roots);
  /* libc and libstdc++ join the first round: their versions are reported. */
  for (size_t d = 0; d < g->paths.n_defaults; d++)
    for (int x = 0; x < 2; x++)
      {
        cleanup_free char *path = ib_path_join (g->paths.defaults[d], x ? "libstdc++.so.6" : "libc.so.6");
        const struct ib_fs_entry *e = ib_fsview_resolve (g->view, path, NULL);
        const struct ib_elf_link *dummy;
        if (e && e->type == IB_FS_FILE)
          record_fn (g, e, &dummy);
      }
  int r = load_all (g, k, &roots, err);
  if (r == 0)
    r = check_all (g, k, &roots, json);
  if (r == 0 && g->lost)
    r = ib_error (err, IB_EENV, "the ELF record of /%s could not be read again from the store's cache", g->lost);
  for (size_t i = 0; i < roots.n; i++)
    free (roots.path[i]);
  free (roots.path);
  ib_strmap_free (roots.seen);
  ib_linker_free (k);
  return r;
}

/* An overlay file that select_roots would pick. */
bool
ib_native_selects (void *data, const struct ib_fs_entry *e)
{
  const struct ib_native_rules *r = data;
  return r->defaults && (looks_loadable (e) || in_packages (r, e->path));
}

/* G's tables, the loader's search paths (with LD_LIBRARY_PATH LLP) and
 * the caches' folders; gate_clear undoes it, whatever it returns. */
static int
gate_open (struct gate *g, const char *llp, ib_error_t *err)
{
  g->by_digest = ib_strmap_new ();
  g->wanted_set = ib_strmap_new ();
  g->said = ib_strmap_new ();
  ib_link_paths_init (&g->paths, g->view, ib_link_image_machine (g->img), llp);
  int r = ib_store_cache_dir (g->s, "elflink", &g->elf_cache, err);
  if (r == 0)
    r = ib_store_cache_dir (g->s, "ldconf", &g->conf_cache, err);
  if (r == 0)
    g->syms = ib_reccache_new (g->elf_cache, symbol_budget ());
  return r;
}

static int
check_view (struct gate *g, cJSON *json, ib_error_t *err)
{
  int r = gate_open (g, ib_link_config_env (g->img, "LD_LIBRARY_PATH"), err);
  if (r == 0)
    r = read_driver (g, err);
  if (r == 0)
    r = load_ldconf (g, err);
  if (r == 0)
    r = run_gate (g, json, err);
  return r;
}

/* The check in full (linkgate_private.h). */
int
ib_native_run (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
               const struct ib_native_rules *rules, ib_problem_fn fn, void *data, struct ib_native_stats *st,
               cJSON *json, ib_error_t *err)
{
  struct gate g = { .s = s, .img = img, .view = view, .r = rules, .st = st, .fn = fn, .data = data };
  int r = check_view (&g, json, err);
  gate_clear (&g);
  return r;
}

/* ---- what a program maps ------------------------------------------------- */

static void
push_path (char ***out, size_t *n, char *path)
{
  *out = ib_xrealloc (*out, (*n + 1) * sizeof (**out));
  (*out)[(*n)++] = path;
}

/* A loaded object's file, and the path the loader opens it by (through
 * the SONAME's symbolic link, ld.so.cache's folder): both must be there. */
static void
closure_add (const struct ib_link_loaded *l, char ***out, size_t *n)
{
  push_path (out, n, ib_xstrdup (l->path));
  push_path (out, n, ib_xstrdup (l->name));
}

int
ib_link_program_closure (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                         const char *program, char ***out, size_t *n_out, ib_error_t *err)
{
  struct ib_native_stats st = { 0 };
  struct ib_native_rules none = { 0 };
  struct gate g = { .s = s, .img = img, .view = view, .r = &none, .st = &st };
  /* The program runs with no LD_LIBRARY_PATH (pycompile.c's environment). */
  int r = gate_open (&g, NULL, err);
  /* Only what is cached: the caller's other way needs no record, so a
   * pass over the layers here would be a pass for nothing. */
  struct ib_ldconf conf = { 0 };
  if (r == 0 && !ib_ldconf_walk (view, g.conf_cache, &conf))
    r = 1;
  for (size_t i = 0; r == 0 && i < conf.n_dirs; i++)
    ib_link_paths_add_conf (&g.paths, conf.dirs[i]);
  ib_ldconf_clear (&conf);
  struct ib_link_report *rep = NULL;
  if (r == 0)
    {
      struct ib_linker_config cfg = { .view = view, .paths = &g.paths, .record = record_fn, .symbols = symbols_fn,
                                      .release = release_fn, .data = &g };
      struct ib_linker *k = ib_linker_new (&cfg);
      struct ib_link_context ctx = { 0 };
      r = ib_linker_load (k, program, &ctx, true, &rep);
      ib_linker_free (k);
      if (r == 0 && g.lost)
        r = 1; /* a record gone from the cache: as one never cached */
    }
  for (size_t i = 0; r == 0 && i < rep->n_loaded; i++)
    if (rep->loaded[i].path == NULL)
      r = 1; /* a library the loader would not find: the program would not start */
  *out = NULL;
  *n_out = 0;
  for (size_t i = 0; r == 0 && i < rep->n_loaded; i++)
    closure_add (&rep->loaded[i], out, n_out);
  ib_link_report_free (rep);
  gate_clear (&g);
  return r;
}
