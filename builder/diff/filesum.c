#include "builder/diff/filesum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cudabin.h"
#include "layers/view/extract.h"
#include "symbol-check/elfsyms.h"
#include "symbol-check/pysyms.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

#define MAX_PY_SOURCE (64u << 20)

void
ib_file_summary_add (struct ib_file_summary *f, char kind, const char *name, uint64_t hash)
{
  f->s = ib_xrealloc (f->s, (f->n + 1) * sizeof (*f->s));
  f->s[f->n++] = (struct ib_sym){ kind, ib_xstrdup (name), hash };
}

static int
cmp_sym (const void *a, const void *b)
{
  const struct ib_sym *x = a, *y = b;
  return x->kind != y->kind ? x->kind - y->kind : strcmp (x->name, y->name);
}

struct ranked
{
  struct ib_sym sym;
  size_t rank; /* position before sorting: source order among equal names */
};

static int
cmp_ranked (const void *a, const void *b)
{
  const struct ranked *x = a, *y = b;
  int c = cmp_sym (&x->sym, &y->sym);
  return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Sorted, and one entry per (kind, name): a Python name bound by several
 * statements gets the hash of all of them, in source order. */
void
ib_file_summary_sort (struct ib_file_summary *f)
{
  struct ranked *r = ib_xcalloc (f->n ? f->n : 1, sizeof (*r));
  for (size_t i = 0; i < f->n; i++)
    r[i] = (struct ranked){ f->s[i], i };
  ib_qsort (r, f->n, sizeof (*r), cmp_ranked);
  size_t o = 0;
  for (size_t i = 0; i < f->n; i++)
    {
      if (o > 0 && cmp_sym (&f->s[o - 1], &r[i].sym) == 0)
        {
          f->s[o - 1].hash = f->s[o - 1].hash * 0x100000001b3ull ^ r[i].sym.hash;
          free (r[i].sym.name);
        }
      else
        f->s[o++] = r[i].sym;
    }
  f->n = o;
  free (r);
}

void
ib_file_summary_free (struct ib_file_summary *f)
{
  if (f == NULL)
    return;
  for (size_t i = 0; i < f->n; i++)
    free (f->s[i].name);
  free (f->s);
  free (f);
}

static uint64_t
fnv1a (uint64_t h, const char *s)
{
  for (; *s; s++)
    h = (h ^ (unsigned char) *s) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;
}

/* What a name bound by an import statement stands for: the module and the
 * name it imports, so that one import line gaining a name does not show
 * every other name of the line as changed. */
static bool
import_hash (const struct ib_py_module *m, const char *bound, uint64_t *hash)
{
  for (size_t i = 0; i < m->n_imports; i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      const char *mod = im->module ? im->module : "";
      if (!im->is_from)
        {
          size_t first = strcspn (mod, ".");
          if (im->asname ? strcmp (im->asname, bound) == 0
                         : strlen (bound) == first && strncmp (mod, bound, first) == 0)
            {
              *hash = fnv1a (fnv1a (0xcbf29ce484222325ull, "import"), im->asname ? mod : bound);
              return true;
            }
          continue;
        }
      for (size_t k = 0; k < im->n_names; k++)
        {
          const struct ib_py_alias *a = &im->names[k];
          if (strcmp (a->asname ? a->asname : a->name, bound) == 0)
            {
              *hash = fnv1a (fnv1a (fnv1a (0xcbf29ce484222325ull, "from"), mod), a->name);
              return true;
            }
        }
    }
  return false;
}

/* Each module-level statement scanned on its own: the names it binds get
 * its hash (an import's names, what each imports). */
static int
summarize_python (const char *src, size_t len, struct ib_file_summary *f, ib_error_t *err)
{
  struct ib_py_statement *st = NULL;
  size_t n = 0;
  if (ib_py_statements (src, len, &st, &n, err) < 0)
    return -1;
  int r = 0;
  for (size_t i = 0; r == 0 && i < n; i++)
    {
      struct ib_py_module *m = NULL;
      const char *text = src + st[i].start;
      bool is_import = strncmp (text, "import", 6) == 0 || strncmp (text, "from", 4) == 0;
      r = ib_py_scan (text, st[i].end - st[i].start, NULL, &m, err);
      for (size_t k = 0; r == 0 && k < m->n_defs; k++)
        {
          uint64_t h = st[i].hash;
          if (is_import)
            import_hash (m, m->defs[k], &h);
          ib_file_summary_add (f, IB_SYM_PYTHON, m->defs[k], h);
        }
      ib_py_module_free (m);
    }
  free (st);
  return r;
}

static bool
is_elf (int fd)
{
  unsigned char magic[4];
  return pread (fd, magic, 4, 0) == 4 && memcmp (magic, "\x7f" "ELF", 4) == 0;
}

static int
summarize_binary (const char *path, int fd, struct ib_file_summary *f, ib_error_t *err)
{
  if (is_elf (fd))
    {
      struct ib_elf_symbols *es = NULL;
      ib_error_t e = NULL;
      /* An ELF file that is not a shared object (an executable without
       * .dynsym, a relocatable object) exports nothing. */
      if (ib_elf_dynsyms (fd, path, &es, &e) == 0)
        for (size_t i = 0; i < es->n; i++)
          ib_file_summary_add (f, IB_SYM_DYNAMIC, es->names[i], 0);
      ib_error_release (&e);
      ib_elf_symbols_free (es);
    }
  struct ib_cuda_file *c = NULL;
  if (ib_cuda_inspect (fd, path, &c, err) < 0)
    return -1;
  for (size_t i = 0; i < c->n; i++)
    {
      /* -rdc code is nvlink's input, never loaded: not a kernel of the file. */
      if (c->e[i].relocatable)
        continue;
      char arch[32];
      ib_cuda_entry_arch (&c->e[i], arch, sizeof (arch));
      for (size_t k = 0; k < c->e[i].n_kernels; k++)
        {
          cleanup_free char *name = ib_xasprintf ("%s %s", arch, c->e[i].kernels[k]);
          ib_file_summary_add (f, IB_SYM_KERNEL, name, 0);
        }
    }
  ib_cuda_file_free (c);
  return 0;
}

static bool
is_python (const char *path)
{
  size_t n = strlen (path);
  return n >= 3 && strcmp (path + n - 3, ".py") == 0;
}

int
ib_file_summary_fd (const char *path, int fd, struct ib_file_summary **out, ib_error_t *err)
{
  struct ib_file_summary *f = ib_xcalloc (1, sizeof (*f));
  int r;
  if (is_python (path))
    {
      cleanup_free char *src = NULL;
      size_t len = 0, cap = 0;
      char buf[65536];
      ssize_t k;
      while ((k = read (fd, buf, sizeof (buf))) > 0 && len + (size_t) k <= MAX_PY_SOURCE)
        {
          if (len + (size_t) k > cap)
            src = ib_xrealloc (src, cap = (len + (size_t) k) * 2);
          memcpy (src + len, buf, (size_t) k);
          len += (size_t) k;
        }
      r = k < 0 ? ib_error_errno (err, errno, IB_EENV, "read `%s`", path) : summarize_python (src ? src : "", len, f, err);
    }
  else
    r = summarize_binary (path, fd, f, err);
  if (r < 0)
    {
      ib_file_summary_free (f);
      return ib_error_wrap (err, "%s", path);
    }
  ib_file_summary_sort (f);
  *out = f;
  return 0;
}

struct job
{
  const char *spool;
  const struct ib_fs_entry *const *files;
  size_t n;
  struct ib_file_summary **out;
};

static int
summarize_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct job *job = data;
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, job->spool, &fd, err) < 0)
    return -1;
  cleanup_free char *path = ib_xasprintf ("/%s", e->path);
  struct ib_file_summary *f;
  if (ib_file_summary_fd (path, fd, &f, err) < 0)
    return -1;
  for (size_t i = 0; i < job->n; i++)
    if (job->files[i] == e && job->out[i] == NULL)
      {
        job->out[i] = f;
        return 0;
      }
  ib_file_summary_free (f);
  return 0;
}

int
ib_file_summary_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                         size_t n, struct ib_file_summary **out, ib_error_t *err)
{
  cleanup_free char *spool = NULL;
  if (ib_store_cache_dir (s, "filesum", &spool, err) < 0)
    return -1;
  /* Each layer entry once, even when several views share it. */
  const struct ib_fs_entry **wanted = ib_xcalloc (n ? n : 1, sizeof (*wanted));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    {
      out[i] = NULL;
      bool seen = false;
      for (size_t j = 0; j < k && !seen; j++)
        seen = wanted[j] == files[i];
      if (!seen)
        wanted[k++] = files[i];
    }
  struct job job = { spool, files, n, out };
  int r = ib_extract_entries (s, img, wanted, k, summarize_extracted, &job, err);
  /* A file asked for twice: the same entry, a copy of its summary. */
  for (size_t i = 0; r == 0 && i < n; i++)
    for (size_t j = 0; out[i] == NULL && j < n; j++)
      if (j != i && files[j] == files[i] && out[j])
        {
          out[i] = ib_xcalloc (1, sizeof (*out[i]));
          for (size_t x = 0; x < out[j]->n; x++)
            ib_file_summary_add (out[i], out[j]->s[x].kind, out[j]->s[x].name, out[j]->s[x].hash);
        }
  free (wanted);
  if (r < 0)
    for (size_t i = 0; i < n; i++)
      {
        ib_file_summary_free (out[i]);
        out[i] = NULL;
      }
  return r;
}

size_t
ib_file_summary_diff (const struct ib_file_summary *a, const struct ib_file_summary *b, struct ib_sym_change **out)
{
  static const struct ib_file_summary none = { 0, NULL };
  a = a ? a : &none;
  b = b ? b : &none;
  struct ib_sym_change *ch = ib_xcalloc (a->n + b->n + 1, sizeof (*ch));
  size_t n = 0, i = 0, j = 0;
  while (i < a->n || j < b->n)
    {
      int c = i == a->n ? 1 : j == b->n ? -1 : cmp_sym (&a->s[i], &b->s[j]);
      if (c < 0)
        ch[n++] = (struct ib_sym_change){ '-', &a->s[i++] };
      else if (c > 0)
        ch[n++] = (struct ib_sym_change){ '+', &b->s[j++] };
      else
        {
          if (a->s[i].hash != b->s[j].hash)
            ch[n++] = (struct ib_sym_change){ '~', &b->s[j] };
          i++, j++;
        }
    }
  *out = ch;
  return n;
}

const char *
ib_sym_kind_name (char kind)
{
  return kind == IB_SYM_PYTHON ? "python" : kind == IB_SYM_DYNAMIC ? "dynamic" : "kernel";
}

char *
ib_sym_changes_list (const struct ib_sym_change *ch, size_t n, char c, char k, size_t max)
{
  char *buf = NULL;
  size_t len = 0, shown = 0, total = 0;
  for (size_t i = 0; i < n; i++)
    {
      if (ch[i].change != c || ch[i].sym->kind != k)
        continue;
      if (shown++ < max)
        {
          if (len)
            ib_xappend (&buf, &len, ", ", 2);
          ib_xappend (&buf, &len, ch[i].sym->name, strlen (ch[i].sym->name));
        }
      total++;
    }
  if (total > max)
    {
      cleanup_free char *more = ib_xasprintf (", ... (%zu more)", total - max);
      ib_xappend (&buf, &len, more, strlen (more));
    }
  return buf;
}

/* "definitions changed: a, b; definitions added: c; kernels removed: d" */
char *
ib_sym_changes_text (const struct ib_sym_change *ch, size_t n, size_t max)
{
  static const struct
  {
    char kind;
    const char *what;
  } kinds[] = { { IB_SYM_PYTHON, "definitions" }, { IB_SYM_DYNAMIC, "dynamic symbols" }, { IB_SYM_KERNEL, "kernels" } };
  static const struct
  {
    char c;
    const char *verb;
  } changes[] = { { '~', "changed" }, { '+', "added" }, { '-', "removed" } };
  char *buf = NULL;
  size_t len = 0;
  for (size_t k = 0; k < 3; k++)
    for (size_t c = 0; c < 3; c++)
      {
        cleanup_free char *list = ib_sym_changes_list (ch, n, changes[c].c, kinds[k].kind, max);
        if (list == NULL)
          continue;
        cleanup_free char *part = ib_xasprintf ("%s%s %s: %s", len ? "; " : "", kinds[k].what, changes[c].verb, list);
        ib_xappend (&buf, &len, part, strlen (part));
      }
  return buf ? buf : ib_xstrdup ("no definition, symbol or kernel changed");
}
