#include "symbol-check/link-check/resolve.h"

#include <elf.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/strmap.h"

const char *const ib_link_version_prefixes[3] = { "GLIBC_", "GLIBCXX_", "CXXABI_" };

/* ---- the files of the image that loads have touched ---------------------- */

struct lfile
{
  char *path; /* view path of the regular file */
  const struct ib_fs_entry *e;
  const struct ib_elf_link *elf; /* its head, or whole record; NULL: not ELF */
  bool read, indexed;
  size_t memo_gen; /* the index generation MEMO was made at; 0: none */
  size_t n_refs;
  uint32_t *memo_off; /* per reference: where its definers start in MEMO_IDS */
  int *memo_ids;
};

struct idx
{
  uint32_t hash;
  int file;
};

struct ib_linker
{
  struct ib_linker_config cfg;
  struct ib_strmap *by_path;
  struct lfile *files;
  size_t n_files;
  struct ib_strmap *resolved; /* a path searched -> its file id + 1, or 0 */
  char **resolved_keys;
  size_t n_resolved;
  /* Which files define a name: by the name's hash, 8 bytes a definition
   * (a map of the names themselves, each pointing into its record, held
   * every record in memory: 35 MB for a torch image). */
  struct idx *idx;
  size_t n_idx;
  size_t gen; /* bumped when files join the index */
};

struct ib_linker *
ib_linker_new (const struct ib_linker_config *cfg)
{
  struct ib_linker *k = ib_xcalloc (1, sizeof (*k));
  k->cfg = *cfg;
  k->by_path = ib_strmap_new ();
  k->resolved = ib_strmap_new ();
  k->gen = 1;
  return k;
}

void
ib_linker_free (struct ib_linker *k)
{
  if (k == NULL)
    return;
  for (size_t i = 0; i < k->n_files; i++)
    {
      free (k->files[i].path);
      free (k->files[i].memo_off);
      free (k->files[i].memo_ids);
    }
  free (k->files);
  free (k->idx);
  ib_strmap_free (k->by_path);
  ib_strmap_free (k->resolved);
  for (size_t i = 0; i < k->n_resolved; i++)
    free (k->resolved_keys[i]);
  free (k->resolved_keys);
  free (k);
}

/* The file at view path CANON (entry E), added on first sight. */
static int
file_id (struct ib_linker *k, const char *canon, const struct ib_fs_entry *e)
{
  size_t id;
  if (ib_strmap_get (k->by_path, canon, &id))
    return (int) id;
  k->files = ib_xrealloc (k->files, (k->n_files + 1) * sizeof (*k->files));
  struct lfile *f = &k->files[k->n_files];
  memset (f, 0, sizeof (*f));
  f->path = ib_xstrdup (canon);
  f->e = e;
  ib_strmap_put (k->by_path, f->path, k->n_files);
  return (int) k->n_files++;
}

/* Its record; false (and *PENDING) when not read yet. */
static bool
file_read (struct ib_linker *k, int id, bool *pending)
{
  struct lfile *f = &k->files[id];
  if (!f->read)
    {
      const struct ib_elf_link *elf = NULL;
      if (k->cfg.record (k->cfg.data, f->e, &elf) == 0)
        {
          *pending = true;
          return false;
        }
      k->files[id].elf = elf;
      k->files[id].read = true;
    }
  return true;
}

static bool
usable (const struct ib_linker *k, const struct ib_elf_link *l)
{
  return l && !l->elf32 && l->machine == k->cfg.paths->machine;
}

/* ---- one simulated process ----------------------------------------------- */

struct lobj
{
  int file;    /* -1: not found (the loader's "faked" object) */
  char *name;  /* the path it was opened by, or the DT_NEEDED when not found */
  size_t n_names;
  char **names; /* the names it was asked for by */
  int loader;   /* the object whose DT_NEEDED brought it; -1 */
  size_t n_deps;
  int *deps;
  bool driver; /* injected by the runtime */
  size_t injected;
};

struct proc
{
  struct ib_linker *k;
  const struct ib_link_context *ctx;
  size_t n;
  struct lobj *o;
  int main;
  bool pending;
  struct ib_link_report *rep; /* NULL: loading only */
};

static const struct ib_elf_link *
elf_of (const struct proc *p, int i)
{
  return p->o[i].file >= 0 ? p->k->files[p->o[i].file].elf : NULL;
}

static void
push_str (char ***list, size_t *n, char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = s;
}

static int
add_object (struct proc *p, int file, const char *name, const char *asked, int loader)
{
  p->o = ib_xrealloc (p->o, (p->n + 1) * sizeof (*p->o));
  struct lobj *o = &p->o[p->n];
  memset (o, 0, sizeof (*o));
  o->file = file;
  o->name = ib_xstrdup (name);
  o->loader = loader;
  push_str (&o->names, &o->n_names, ib_xstrdup (asked));
  return (int) p->n++;
}

static void
proc_clear (struct proc *p)
{
  for (size_t i = 0; i < p->n; i++)
    {
      free (p->o[i].name);
      for (size_t j = 0; j < p->o[i].n_names; j++)
        free (p->o[i].names[j]);
      free (p->o[i].names);
      free (p->o[i].deps);
    }
  free (p->o);
}

static void
finding (struct proc *p, enum ib_link_kind kind, bool is_error, const char *object, const char *name,
         const char *version, const char *fmt, ...) __attribute__ ((format (printf, 7, 8)));

static void
finding (struct proc *p, enum ib_link_kind kind, bool is_error, const char *object, const char *name,
         const char *version, const char *fmt, ...)
{
  struct ib_link_report *r = p->rep;
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n_findings; i++)
    {
      const struct ib_link_finding *f = &r->findings[i];
      if (f->kind == kind && strcmp (f->object, object) == 0 && strcmp (f->name, name) == 0
          && (f->version == NULL) == (version == NULL) && (!version || strcmp (f->version, version) == 0))
        return;
    }
  va_list ap;
  va_start (ap, fmt);
  char *detail = ib_xvasprintf (fmt, ap);
  va_end (ap);
  r->findings = ib_xrealloc (r->findings, (r->n_findings + 1) * sizeof (*r->findings));
  r->findings[r->n_findings++] = (struct ib_link_finding){ kind, is_error, ib_xstrdup (object), ib_xstrdup (name),
                                                           version ? ib_xstrdup (version) : NULL, detail };
}

/* ld.so's _dl_name_match_p, and the SONAME it adds on a match. */
static bool
name_matches (const struct proc *p, int i, const char *name)
{
  const struct lobj *o = &p->o[i];
  if (strcmp (o->name, name) == 0)
    return true;
  for (size_t j = 0; j < o->n_names; j++)
    if (strcmp (o->names[j], name) == 0)
      return true;
  const struct ib_elf_link *l = elf_of (p, i);
  return l && l->soname && strcmp (l->soname, name) == 0;
}

/* A loaded object NAME matches; objects not found are searched again, as
 * the loader skips its "faked" ones. */
static int
find_loaded (const struct proc *p, const char *name)
{
  for (size_t i = 0; i < p->n; i++)
    if ((p->o[i].file >= 0 || p->o[i].driver) && name_matches (p, (int) i, name))
      return (int) i;
  return -1;
}

/* ---- searching a DT_NEEDED ----------------------------------------------- */

struct search
{
  struct proc *p;
  const char *name;
  int found;        /* file id */
  char *found_path; /* the path the loader opens it by */
  char *where;      /* the folders searched, for messages */
  size_t where_len;
  char *skipped, *others;
  size_t skipped_len, others_len;
};

static void
append (char **buf, size_t *len, const char *sep, const char *s)
{
  if (*len)
    ib_xappend (buf, len, sep, strlen (sep));
  ib_xappend (buf, len, s, strlen (s));
}

/* The regular file PATH leads to in the view: its id, or -1.  Every
 * process the gate simulates searches the same folders for the same names
 * (each of torch's extension modules loads libtorch's closure), so each
 * path is resolved once per linker; the view does not change under it. */
static int
resolve_file (struct ib_linker *k, const char *path)
{
  size_t v;
  if (ib_strmap_get (k->resolved, path, &v))
    return (int) v - 1;
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (k->cfg.view, path, &canon);
  v = e && e->type == IB_FS_FILE ? (size_t) file_id (k, canon, e) + 1 : 0;
  k->resolved_keys = ib_xrealloc (k->resolved_keys, (k->n_resolved + 1) * sizeof (*k->resolved_keys));
  char *key = k->resolved_keys[k->n_resolved++] = ib_xstrdup (path);
  ib_strmap_put (k->resolved, key, v);
  return (int) v - 1;
}

static void
try_path (struct search *s, const char *path)
{
  struct ib_linker *k = s->p->k;
  int id = resolve_file (k, path);
  if (id < 0)
    return;
  if (!file_read (k, id, &s->p->pending))
    return; /* the search goes on, so that every candidate is read in one round */
  const struct ib_elf_link *l = k->files[id].elf;
  char mb[32];
  if (!usable (k, l))
    {
      cleanup_free char *why = ib_xasprintf ("%s (%s)", path,
                                             l == NULL    ? "not ELF"
                                             : l->elf32 ? "32-bit"
                                                        : ib_elf_machine_name (l->machine, mb));
      append (&s->skipped, &s->skipped_len, ", ", why);
      return;
    }
  if (s->found < 0)
    {
      s->found = id;
      s->found_path = ib_xstrdup (path);
    }
  else if (id != s->found && strcmp (k->files[id].e->digest, k->files[s->found].e->digest) != 0)
    append (&s->others, &s->others_len, ", ", path);
}

static void
try_dirs (struct search *s, char *const *dirs, size_t n, const char *origin, const char *label)
{
  if (n == 0)
    return;
  size_t start = s->where_len;
  append (&s->where, &s->where_len, "; ", label);
  ib_xappend (&s->where, &s->where_len, " ", 1);
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *dir = origin ? ib_link_expand (s->p->k->cfg.paths, dirs[i], origin) : ib_xstrdup (dirs[i]);
      if (dir == NULL)
        continue;
      if (s->where_len > start + strlen (label) + 3)
        ib_xappend (&s->where, &s->where_len, ":", 1);
      ib_xappend (&s->where, &s->where_len, dir, strlen (dir));
      cleanup_free char *path = *dir ? ib_path_join (dir, s->name) : ib_xstrdup (s->name);
      try_path (s, path);
    }
}

static char *
origin_of (const struct lobj *o)
{
  char *d = ib_xstrdup (o->name);
  char *slash = strrchr (d, '/');
  if (slash)
    *(slash == d ? slash + 1 : slash) = '\0';
  return d;
}

/* A DT_RPATH/DT_RUNPATH value, split at ':', with the object's origin. */
static void
try_rpath (struct search *s, int obj, const char *value, const char *label)
{
  char **dirs = NULL;
  size_t n = 0;
  cleanup_free char *copy = ib_xstrdup (value);
  for (char *save = NULL, *t = strtok_r (copy, ":", &save); t; t = strtok_r (NULL, ":", &save))
    push_str (&dirs, &n, t);
  cleanup_free char *origin = origin_of (&s->p->o[obj]);
  cleanup_free char *what = ib_xasprintf ("%s of %s", label, s->p->o[obj].name);
  try_dirs (s, dirs, n, origin, what);
  free (dirs);
}

/* ld.so's order (dl-load.c, _dl_map_object). */
static void
search_all (struct search *s, int loader)
{
  struct proc *p = s->p;
  const struct ib_link_paths *lp = p->k->cfg.paths;
  const struct ib_elf_link *le = loader >= 0 ? elf_of (p, loader) : NULL;
  if (strchr (s->name, '/'))
    {
      try_path (s, s->name);
      return;
    }
  if (le == NULL || le->runpath == NULL)
    {
      bool did_main = false;
      for (int l = loader; l >= 0; l = p->o[l].loader)
        if (elf_of (p, l) && elf_of (p, l)->rpath)
          {
            try_rpath (s, l, elf_of (p, l)->rpath, "RPATH");
            did_main |= l == p->main;
          }
      const struct ib_elf_link *me = p->main >= 0 ? elf_of (p, p->main) : NULL;
      if (!did_main && me && me->rpath && !me->runpath)
        try_rpath (s, p->main, me->rpath, "RPATH");
    }
  try_dirs (s, lp->env, lp->n_env, NULL, "LD_LIBRARY_PATH");
  if (le && le->runpath)
    try_rpath (s, loader, le->runpath, "RUNPATH");
  if (le == NULL || !le->nodeflib)
    {
      try_dirs (s, lp->conf, lp->n_conf, NULL, "ld.so.conf");
      try_dirs (s, lp->defaults, lp->n_defaults, NULL, "default");
    }
}

static const struct ib_link_injected *
injected_lib (const struct ib_linker *k, const char *name, size_t *at)
{
  for (size_t i = 0; i < k->cfg.n_injected; i++)
    if (strcmp (k->cfg.injected[i].soname, name) == 0)
      {
        *at = i;
        return &k->cfg.injected[i];
      }
  return NULL;
}

static void
search_clear (struct search *s)
{
  free (s->found_path);
  free (s->where);
  free (s->skipped);
  free (s->others);
}

/* Not in the image: a runtime-injected library, or a missing one. */
static int
add_not_found (struct proc *p, struct search *s, const char *name, int loader)
{
  size_t inj;
  int i = add_object (p, -1, name, name, loader);
  if (injected_lib (p->k, name, &inj))
    {
      p->o[i].driver = true;
      p->o[i].injected = inj;
      return i;
    }
  const char *by = loader >= 0 && p->o[loader].file >= 0 ? p->k->files[p->o[loader].file].path : "?";
  finding (p, IB_LINK_MISSING, true, by, name, NULL, "searched %s%s%s", s->where ? s->where : "nothing",
           s->skipped ? "; skipped " : "", s->skipped ? s->skipped : "");
  return i;
}

/* The object for DT_NEEDED NAME of LOADER: -1 when records are missing. */
static int
load_needed (struct proc *p, const char *name, int loader)
{
  int i = find_loaded (p, name);
  if (i >= 0)
    return i;
  struct search s = { .p = p, .name = name, .found = -1 };
  bool was_pending = p->pending;
  p->pending = false;
  search_all (&s, loader);
  if (p->pending)
    {
      search_clear (&s);
      return -1;
    }
  p->pending = was_pending;
  if (s.found < 0)
    i = add_not_found (p, &s, name, loader);
  else
    {
      for (size_t j = 0; j < p->n && i < 0; j++)
        if (p->o[j].file == s.found)
          i = (int) j; /* the same file by another path: one object */
      if (i >= 0)
        push_str (&p->o[i].names, &p->o[i].n_names, ib_xstrdup (name));
      else
        i = add_object (p, s.found, s.found_path, name, loader);
      if (s.others && p->o[loader].file >= 0)
        finding (p, IB_LINK_SHADOWED, false, p->k->files[p->o[loader].file].path, name, NULL,
                 "%s resolves to %s; other copies later in its search path, not taken: %s", name, s.found_path,
                 s.others);
    }
  search_clear (&s);
  return i;
}

static void
add_dep (struct lobj *o, int dep)
{
  o->deps = ib_xrealloc (o->deps, (o->n_deps + 1) * sizeof (*o->deps));
  o->deps[o->n_deps++] = dep;
}

/* Breadth first from object FIRST on, as _dl_map_object_deps. */
static void
load_closure (struct proc *p, size_t first)
{
  for (size_t q = first; q < p->n; q++)
    {
      const struct ib_elf_link *l = elf_of (p, (int) q);
      for (size_t i = 0; l && i < l->n_needed; i++)
        {
          int d = load_needed (p, l->needed[i], (int) q);
          if (d >= 0)
            add_dep (&p->o[q], d);
        }
    }
}

/* ---- symbol lookups ------------------------------------------------------ */

/* File ID's whole record, held until symbols_put; NULL when lost. */
static const struct ib_elf_link *
symbols_get (struct ib_linker *k, int id)
{
  if (k->cfg.symbols == NULL)
    return k->files[id].elf;
  return k->cfg.symbols (k->cfg.data, k->files[id].e);
}

static void
symbols_put (struct ib_linker *k, int id, const struct ib_elf_link *l)
{
  if (k->cfg.release && l)
    k->cfg.release (k->cfg.data, k->files[id].e);
}

static int
cmp_idx (const void *a, const void *b)
{
  const struct idx *x = a, *y = b;
  if (x->hash != y->hash)
    return x->hash < y->hash ? -1 : 1;
  return (x->file > y->file) - (x->file < y->file);
}

/* Every file read since the last time joins the index. */
static void
index_all (struct ib_linker *k)
{
  bool grew = false;
  for (size_t i = 0; i < k->n_files; i++)
    {
      struct lfile *f = &k->files[i];
      if (!f->read || f->indexed)
        continue;
      f->indexed = grew = true;
      if (!usable (k, f->elf))
        continue;
      size_t n;
      cleanup_free uint32_t *h = ib_elf_link_hashes (f->elf, &n);
      k->idx = ib_xrealloc (k->idx, (k->n_idx + n + 1) * sizeof (*k->idx));
      for (size_t j = 0; j < n; j++)
        k->idx[k->n_idx++] = (struct idx){ h[j], (int) i };
    }
  if (!grew)
    return;
  ib_qsort (k->idx, k->n_idx, sizeof (*k->idx), cmp_idx);
  k->gen++;
}

/* Where the files that may define a name of hash H start in the index. */
static size_t
index_find (const struct ib_linker *k, uint32_t h)
{
  size_t lo = 0, hi = k->n_idx;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      if (k->idx[mid].hash < h)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* A reference of a file, by the object that may define it. */
struct cand
{
  int def;
  uint32_t ref;
};

static int
cmp_cand (const void *a, const void *b)
{
  const struct cand *x = a, *y = b;
  if (x->def != y->def)
    return x->def < y->def ? -1 : 1;
  return (x->ref > y->ref) - (x->ref < y->ref);
}

/* The (definer, reference) pairs of L's references, by the index: the
 * files that may define each, by definer. */
static struct cand *
candidates (const struct ib_linker *k, const struct ib_elf_link *l, size_t *n_out)
{
  struct cand *c = NULL;
  size_t n = 0, cap = 0;
  for (size_t r = 0; r < l->n_refs; r++)
    {
      uint32_t h = ib_elf_name_hash (l->refs[r].name);
      for (size_t j = index_find (k, h); j < k->n_idx && k->idx[j].hash == h; j++)
        {
          if (n == cap)
            c = ib_xrealloc (c, (cap = cap ? 2 * cap : 256) * sizeof (*c));
          c[n++] = (struct cand){ k->idx[j].file, (uint32_t) r };
        }
    }
  ib_qsort (c, n, sizeof (*c), cmp_cand);
  *n_out = n;
  return c;
}

/* Per reference of file ID: the files of the image that satisfy it, in
 * file order.  Definer by definer, so that one whole record is at hand at
 * a time besides ID's. */
static void
memo_build (struct ib_linker *k, int id)
{
  struct lfile *f = &k->files[id];
  if (f->memo_gen == k->gen)
    return;
  const struct ib_elf_link *l = symbols_get (k, id);
  static const struct ib_elf_link none = { 0 };
  const struct ib_elf_link *refs = l ? l : &none;
  size_t n = 0, kept = 0;
  cleanup_free struct cand *c = candidates (k, refs, &n);
  for (size_t i = 0; i < n;)
    {
      int def = c[i].def;
      const struct ib_elf_link *dl = symbols_get (k, def);
      for (; i < n && c[i].def == def; i++)
        if (dl && ib_elf_link_satisfies (dl, &refs->refs[c[i].ref]))
          c[kept++] = c[i];
      symbols_put (k, def, dl);
    }
  /* By reference, each one's definers still in file order. */
  free (f->memo_off);
  free (f->memo_ids);
  f->n_refs = refs->n_refs;
  f->memo_off = ib_xcalloc (f->n_refs + 2, sizeof (*f->memo_off));
  f->memo_ids = ib_xcalloc (kept + 1, sizeof (*f->memo_ids));
  for (size_t i = 0; i < kept; i++)
    f->memo_off[c[i].ref + 2]++;
  for (size_t r = 0; r < f->n_refs; r++)
    f->memo_off[r + 2] += f->memo_off[r + 1];
  for (size_t i = 0; i < kept; i++)
    f->memo_ids[f->memo_off[c[i].ref + 1]++] = c[i].def;
  f->memo_gen = k->gen;
  symbols_put (k, id, l);
}

/* ---- the checks ---------------------------------------------------------- */

struct scope
{
  unsigned char *files; /* by file id */
  bool *injected;       /* by injected index */
  char *text;           /* for messages */
  size_t n;
};

static void
scope_add (struct proc *p, struct scope *sc, int i)
{
  const struct lobj *o = &p->o[i];
  if (o->file >= 0)
    sc->files[o->file] = 1;
  if (o->driver)
    sc->injected[o->injected] = true;
  sc->n++;
}

/* The global scope (every object loaded before INDEX_ROOT) and the
 * root's own closure, reached through its dependencies. */
static void
scope_make (struct proc *p, size_t first_root, struct scope *sc)
{
  sc->files = ib_xcalloc (p->k->n_files + 1, 1);
  sc->injected = ib_xcalloc (p->k->cfg.n_injected + 1, sizeof (bool));
  cleanup_free bool *seen = ib_xcalloc (p->n + 1, sizeof (bool));
  for (size_t i = 0; i < first_root; i++)
    {
      seen[i] = true;
      scope_add (p, sc, (int) i);
    }
  cleanup_free int *queue = ib_xcalloc (p->n + 1, sizeof (int));
  size_t qn = 0;
  queue[qn++] = (int) first_root;
  seen[first_root] = true;
  for (size_t q = 0; q < qn; q++)
    {
      scope_add (p, sc, queue[q]);
      for (size_t d = 0; d < p->o[queue[q]].n_deps; d++)
        if (!seen[p->o[queue[q]].deps[d]])
          {
            seen[p->o[queue[q]].deps[d]] = true;
            queue[qn++] = p->o[queue[q]].deps[d];
          }
    }
  char *t = NULL;
  size_t len = 0;
  for (size_t i = 0, shown = 0; i < p->n; i++)
    if (seen[i] && shown++ < 12)
      {
        const struct ib_elf_link *l = elf_of (p, (int) i);
        append (&t, &len, ", ", l && l->soname ? l->soname : p->o[i].name);
      }
  sc->text = ib_xasprintf ("%zu objects: %s%s", sc->n, t ? t : "", sc->n > 12 ? ", ..." : "");
  free (t);
}

static void
scope_clear (struct scope *sc)
{
  free (sc->files);
  free (sc->injected);
  free (sc->text);
}

static bool
matches_any (char *const *patterns, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (fnmatch (patterns[i], name, 0) == 0)
      return true;
  return false;
}

/* A symbol nothing in scope defines: allowed, the driver's, an error, or
 * (true, nothing said) left to the program that loads the root, which
 * check_symbols reports once for the object. */
static bool
undefined (struct proc *p, const struct scope *sc, int file, const struct ib_elf_ref *ref, const int *ids, size_t n)
{
  struct ib_linker *k = p->k;
  const char *obj = k->files[file].path;
  if (p->ctx->python_symbols && (strncmp (ref->name, "Py", 2) == 0 || strncmp (ref->name, "_Py", 3) == 0))
    return false;
  if (matches_any (k->cfg.allow, k->cfg.n_allow, ref->name))
    {
      finding (p, IB_LINK_ALLOWED, false, obj, ref->name, ref->version, "allowed by allow-undefined");
      return false;
    }
  for (size_t i = 0; i < k->cfg.n_injected; i++)
    {
      const struct ib_link_injected *inj = &k->cfg.injected[i];
      if (!sc->injected[i] || inj->pattern == NULL || fnmatch (inj->pattern, ref->name, 0) != 0)
        continue;
      if (inj->driver == NULL)
        {
          finding (p, IB_LINK_UNCHECKED, false, obj, ref->name, ref->version,
                   "left to the driver's %s, injected at run time (no driver declared)", inj->soname);
          return false;
        }
      if (ib_elf_link_satisfies (inj->driver, ref))
        return false;
    }
  if (p->ctx->hosted)
    return true;
  const char *elsewhere = n ? k->files[ids[0]].path : NULL;
  finding (p, IB_LINK_UNDEFINED, true, obj, ref->name, ref->version, "scope: %s%s%s%s", sc->text,
           elsewhere ? "; defined in /" : "", elsewhere ? elsewhere : "",
           elsewhere ? ", which this load does not bring in" : "");
  return false;
}

static size_t
check_symbols (struct proc *p, const struct scope *sc, int file)
{
  struct ib_linker *k = p->k;
  memo_build (k, file);
  const struct lfile *f = &k->files[file];
  const struct ib_elf_link *l = NULL; /* the names, only for a symbol not found */
  size_t hosted = 0, first = 0;
  for (size_t r = 0; r < f->n_refs; r++)
    {
      bool ok = false;
      for (size_t j = f->memo_off[r]; j < f->memo_off[r + 1] && !ok; j++)
        ok = sc->files[f->memo_ids[j]];
      if (!ok && (l || (l = symbols_get (k, file)) != NULL)
          && undefined (p, sc, file, &l->refs[r], f->memo_ids + f->memo_off[r], f->memo_off[r + 1] - f->memo_off[r])
          && hosted++ == 0)
        first = r;
    }
  /* Once for the object: perl's XS modules leave hundreds each. */
  if (hosted)
    {
      bool defined = f->memo_off[first + 1] > f->memo_off[first];
      finding (p, IB_LINK_UNCHECKED, false, f->path, l->refs[first].name, l->refs[first].version,
               "%zu symbol%s that its load does not define, left to the program that loads it (this one is %s%s)",
               hosted, hosted == 1 ? "" : "s", defined ? "defined in /" : "defined nowhere in the image",
               defined ? k->files[f->memo_ids[f->memo_off[first]]].path : "");
    }
  symbols_put (k, file, l);
  return f->n_refs;
}

const char *
ib_link_highest_version (const struct ib_elf_link *l, const char *prefix)
{
  const char *best = NULL;
  size_t n = strlen (prefix);
  for (size_t i = 0; l && i < l->n_verdefs; i++)
    if (strncmp (l->verdefs[i], prefix, n) == 0 && l->verdefs[i][n] >= '0' && l->verdefs[i][n] <= '9'
        && (best == NULL || strverscmp (l->verdefs[i] + n, best + n) > 0))
      best = l->verdefs[i];
  return best;
}

static void
check_versions (struct proc *p, int obj)
{
  struct ib_linker *k = p->k;
  const struct ib_elf_link *l = elf_of (p, obj);
  const char *path = k->files[p->o[obj].file].path;
  for (size_t i = 0; i < l->n_verneed; i++)
    {
      const struct ib_elf_verneed *vn = &l->verneed[i];
      int t = find_loaded (p, vn->file);
      const struct ib_elf_link *tl = t >= 0 ? elf_of (p, t) : NULL;
      if (tl == NULL)
        continue; /* not found (reported), or injected */
      if (tl->n_verdefs == 0)
        finding (p, IB_LINK_NO_VERINFO, false, path, vn->file, NULL, "no version information in %s",
                 k->files[p->o[t].file].path);
      else if (!vn->weak && !ib_elf_link_defines_version (tl, vn->version))
        {
          const char *v = vn->version;
          const char *best = NULL;
          for (size_t x = 0; x < 3 && !best; x++)
            if (strncmp (v, ib_link_version_prefixes[x], strlen (ib_link_version_prefixes[x])) == 0)
              best = ib_link_highest_version (tl, ib_link_version_prefixes[x]);
          finding (p, IB_LINK_VERSION, true, path, vn->version, NULL, "version %s of %s not found in /%s%s%s",
                   vn->version, vn->file, k->files[p->o[t].file].path, best ? ", which defines up to " : "",
                   best ? best : "");
        }
    }
}

static void
object_needs (struct ib_link_object *o, const struct ib_elf_link *l)
{
  for (size_t x = 0; x < 3; x++)
    {
      const char *pre = ib_link_version_prefixes[x], *best = NULL;
      size_t n = strlen (pre);
      for (size_t i = 0; i < l->n_verneed; i++)
        {
          const char *v = l->verneed[i].version;
          if (strncmp (v, pre, n) == 0 && v[n] >= '0' && v[n] <= '9' && (!best || strverscmp (v + n, best + n) > 0))
            best = v;
        }
      o->needs[x] = best ? ib_xstrdup (best) : NULL;
    }
}

/* Every object the load brought (from FIRST_ROOT on) against the scope. */
static void
check_all (struct proc *p, size_t first_root)
{
  struct ib_link_report *r = p->rep;
  index_all (p->k);
  struct scope sc = { 0 };
  scope_make (p, first_root, &sc);
  for (size_t i = first_root; i < p->n; i++)
    {
      const struct lobj *o = &p->o[i];
      r->loaded = ib_xrealloc (r->loaded, (r->n_loaded + 1) * sizeof (*r->loaded));
      r->loaded[r->n_loaded++] = (struct ib_link_loaded){ ib_xstrdup (o->name),
                                                          o->file >= 0 ? ib_xstrdup (p->k->files[o->file].path) : NULL,
                                                          o->driver };
      if (o->file < 0)
        continue;
      check_versions (p, (int) i);
      r->refs_checked += check_symbols (p, &sc, o->file);
      r->objects = ib_xrealloc (r->objects, (r->n_objects + 1) * sizeof (*r->objects));
      struct ib_link_object *ob = &r->objects[r->n_objects++];
      ob->path = ib_xstrdup (p->k->files[o->file].path);
      object_needs (ob, elf_of (p, (int) i));
    }
  scope_clear (&sc);
}

/* ---- loading a root ------------------------------------------------------ */

/* The object at view path PATH as a process's main program or a dlopen'd
 * one; -1 when its record is missing or it cannot be loaded at all. */
static int
open_object (struct proc *p, const char *path, int loader, bool is_root)
{
  struct ib_linker *k = p->k;
  cleanup_free char *abs = ib_xasprintf ("/%s", path);
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (k->cfg.view, abs, &canon);
  if (e == NULL || e->type != IB_FS_FILE)
    {
      finding (p, IB_LINK_MISSING, true, path, path, NULL, "not a file of the image");
      return -1;
    }
  int id = file_id (k, canon, e);
  if (!file_read (k, id, &p->pending))
    return -1;
  const struct ib_elf_link *l = k->files[id].elf;
  char mb[32], ib[32];
  if (l == NULL)
    finding (p, IB_LINK_NOT_ELF, is_root, canon, canon, NULL, "not an ELF object");
  else if (!usable (k, l))
    finding (p, IB_LINK_MACHINE, true, canon, l->elf32 ? "32-bit" : ib_elf_machine_name (l->machine, mb), NULL,
             "an %s object in an %s image", l->elf32 ? "32-bit" : ib_elf_machine_name (l->machine, mb),
             ib_elf_machine_name (k->cfg.paths->machine, ib));
  if (!usable (k, l))
    return -1;
  for (size_t j = 0; j < p->n; j++)
    if (p->o[j].file == id)
      return (int) j;
  return add_object (p, id, abs, abs, loader);
}

static struct ib_link_report *
report_new (const char *root, bool python)
{
  struct ib_link_report *r = ib_xcalloc (1, sizeof (*r));
  r->root = ib_xstrdup (root);
  r->python = python;
  return r;
}

int
ib_linker_load (struct ib_linker *k, const char *root, const struct ib_link_context *ctx, bool check,
                struct ib_link_report **out)
{
  struct proc p = { .k = k, .ctx = ctx, .main = -1 };
  p.rep = check ? report_new (root, ctx->interpreter != NULL) : NULL;
  if (ctx->interpreter)
    {
      p.main = open_object (&p, ctx->interpreter, -1, false);
      if (p.main >= 0)
        load_closure (&p, 0);
      for (size_t i = 0; i < ctx->n_preloads; i++)
        {
          size_t first = p.n;
          if (open_object (&p, ctx->preloads[i], p.main, false) >= 0)
            load_closure (&p, first);
        }
    }
  size_t first_root = p.n;
  int r = open_object (&p, root, p.main, true);
  if (r >= 0 && (size_t) r == first_root)
    {
      if (p.main < 0)
        p.main = r;
      load_closure (&p, first_root);
      if (check && !p.pending)
        check_all (&p, first_root);
    }
  proc_clear (&p);
  if (p.pending)
    {
      ib_link_report_free (p.rep);
      return 1;
    }
  if (out)
    *out = p.rep;
  else
    ib_link_report_free (p.rep);
  return 0;
}

void
ib_link_report_free (struct ib_link_report *r)
{
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n_loaded; i++)
    {
      free (r->loaded[i].name);
      free (r->loaded[i].path);
    }
  free (r->loaded);
  for (size_t i = 0; i < r->n_objects; i++)
    {
      free (r->objects[i].path);
      for (size_t x = 0; x < 3; x++)
        free (r->objects[i].needs[x]);
    }
  free (r->objects);
  for (size_t i = 0; i < r->n_findings; i++)
    {
      free (r->findings[i].object);
      free (r->findings[i].name);
      free (r->findings[i].version);
      free (r->findings[i].detail);
    }
  free (r->findings);
  free (r->root);
  free (r);
}
