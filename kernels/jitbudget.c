#include "kernels/jitbudget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

bool
ib_ptx_runs_on (unsigned sm, char variant, unsigned major, unsigned minor)
{
  unsigned m = sm / 10, n = sm % 10;
  if (variant == 'a')
    return m == major && n == minor;
  if (variant == 'f')
    return m == major && minor >= n;
  return major > m || (major == m && minor >= n);
}

/* (kernel name, entry) pairs of one file, sorted by name: each kernel's
 * entries are one run of the array. */
struct pair
{
  const char *name;
  const struct ib_cuda_entry *e;
};

static int
pair_cmp (const void *a, const void *b)
{
  return strcmp (((const struct pair *) a)->name, ((const struct pair *) b)->name);
}

static struct pair *
pairs_of (const struct ib_cuda_file *f, size_t *n)
{
  size_t cap = 0;
  for (size_t i = 0; f && i < f->n; i++)
    cap += f->e[i].relocatable ? 0 : f->e[i].n_kernels;
  struct pair *p = ib_xcalloc (cap ? cap : 1, sizeof (*p));
  *n = 0;
  for (size_t i = 0; f && i < f->n; i++)
    for (size_t k = 0; !f->e[i].relocatable && k < f->e[i].n_kernels; k++)
      p[(*n)++] = (struct pair) { f->e[i].kernels[k], &f->e[i] };
  ib_qsort (p, *n, sizeof (*p), pair_cmp);
  return p;
}

static bool
sass_runs_everywhere (const struct pair *p, size_t n, const struct ib_compute_capability *g, size_t n_gpus)
{
  for (size_t t = 0; t < n_gpus; t++)
    {
      bool ok = false;
      for (size_t i = 0; i < n && !ok; i++)
        ok = p[i].e->kind == IB_CUDA_SASS && ib_sass_runs_on (p[i].e->sm, p[i].e->variant, g[t].major, g[t].minor);
      if (!ok)
        return false;
    }
  return true;
}

/* Every target GPU has runnable SASS or PTX it can JIT. */
static bool
ptx_covers (const struct pair *p, size_t n, const struct ib_compute_capability *g, size_t n_gpus)
{
  for (size_t t = 0; t < n_gpus; t++)
    {
      bool ok = false;
      for (size_t i = 0; i < n && !ok; i++)
        ok = (p[i].e->kind == IB_CUDA_SASS && ib_sass_runs_on (p[i].e->sm, p[i].e->variant, g[t].major, g[t].minor))
             || (p[i].e->kind == IB_CUDA_PTX && ib_ptx_runs_on (p[i].e->sm, p[i].e->variant, g[t].major, g[t].minor));
      if (!ok)
        return false;
    }
  return true;
}

static void
add_name (char ***v, size_t *n, const char *s)
{
  *v = ib_xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = ib_xstrdup (s);
}

static bool
in_sorted (const char *const *names, size_t n, const char *name)
{
  size_t lo = 0, hi = n;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      int c = strcmp (names[mid], name);
      if (c == 0)
        return true;
      if (c < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return false;
}

static int
str_cmp (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* What the budget learns before its rows: the kernels that some file runs
 * without a JIT (their PTX elsewhere is never compiled), as copies of
 * their names, sorted and unique once the first row is added. */
struct ib_jit_budget_state
{
  const struct ib_compute_capability *gpus;
  size_t n_gpus;
  char **runnable;
  size_t n_runnable, cap_runnable;
  bool sorted;
};

static void
file_budget (struct ib_jit_file *out, const struct ib_cuda_file *f, const struct ib_jit_budget_state *c,
             unsigned driver_ptx)
{
  for (size_t i = 0; f && i < f->n; i++)
    {
      const struct ib_cuda_entry *e = &f->e[i];
      if (e->relocatable)
        {
          out->relocatable_entries++;
          continue;
        }
      out->sass_entries += e->kind == IB_CUDA_SASS;
      out->ptx_entries += e->kind == IB_CUDA_PTX;
      unsigned v = e->ptx_major * 10 + e->ptx_minor;
      if (e->kind == IB_CUDA_PTX && v > out->newest_ptx)
        out->newest_ptx = v;
      out->ptx_too_new += e->kind == IB_CUDA_PTX && v > driver_ptx;
    }
  size_t n;
  struct pair *p = pairs_of (f, &n);
  bool *used = ib_xcalloc (f && f->n ? f->n : 1, sizeof (*used));
  for (size_t i = 0; i < n;)
    {
      size_t j = i;
      while (j < n && strcmp (p[j].name, p[i].name) == 0)
        j++;
      out->kernels++;
      if (sass_runs_everywhere (p + i, j - i, c->gpus, c->n_gpus))
        out->runs++;
      else if (in_sorted ((const char *const *) c->runnable, c->n_runnable, p[i].name))
        out->covered++;
      else if (ptx_covers (p + i, j - i, c->gpus, c->n_gpus))
        {
          out->jit++;
          add_name (&out->jit_names, &out->n_jit_names, p[i].name);
          for (size_t k = i; k < j; k++)
            if (p[k].e->kind == IB_CUDA_PTX && !used[p[k].e - f->e])
              {
                used[p[k].e - f->e] = true;
                out->jit_ptx_bytes += p[k].e->uncompressed_size;
              }
        }
      else
        {
          out->none++;
          add_name (&out->none_names, &out->n_none_names, p[i].name);
        }
      i = j;
    }
  free (used);
  free (p);
}

struct ib_jit_budget *
ib_jit_budget_new (const struct ib_target *target)
{
  struct ib_jit_budget *b = ib_xcalloc (1, sizeof (*b));
  b->driver_ptx = ib_driver_max_ptx (ib_target_driver (target));
  b->state = ib_xcalloc (1, sizeof (*b->state));
  b->state->gpus = ib_target_gpus (target, &b->state->n_gpus);
  return b;
}

void
ib_jit_budget_learn (struct ib_jit_budget *b, const struct ib_cuda_file *code)
{
  struct ib_jit_budget_state *c = b->state;
  size_t np;
  struct pair *p = pairs_of (code, &np);
  for (size_t a = 0; a < np;)
    {
      size_t e = a;
      while (e < np && strcmp (p[e].name, p[a].name) == 0)
        e++;
      if (sass_runs_everywhere (p + a, e - a, c->gpus, c->n_gpus))
        {
          if (c->n_runnable == c->cap_runnable)
            {
              c->cap_runnable = c->cap_runnable ? 2 * c->cap_runnable : 64;
              c->runnable = ib_xrealloc (c->runnable, c->cap_runnable * sizeof (*c->runnable));
            }
          c->runnable[c->n_runnable++] = ib_xstrdup (p[a].name);
          c->sorted = false;
        }
      a = e;
    }
  free (p);
}

void
ib_jit_budget_add (struct ib_jit_budget *b, const char *path, const struct ib_cuda_file *code)
{
  struct ib_jit_budget_state *c = b->state;
  if (!c->sorted && c->n_runnable > 1) /* ib_qsort (NULL, 0, ...) is undefined (UBSan) */
    {
      ib_qsort (c->runnable, c->n_runnable, sizeof (*c->runnable), str_cmp);
      size_t k = 1;
      for (size_t i = 1; i < c->n_runnable; i++)
        if (strcmp (c->runnable[i], c->runnable[k - 1]) != 0)
          c->runnable[k++] = c->runnable[i];
        else
          free (c->runnable[i]);
      c->n_runnable = k;
    }
  c->sorted = true;
  b->f = ib_xrealloc (b->f, (b->n + 1) * sizeof (*b->f));
  struct ib_jit_file *f = &b->f[b->n++];
  memset (f, 0, sizeof (*f));
  f->path = ib_xstrdup (path);
  file_budget (f, code, c, b->driver_ptx);
}

struct ib_jit_budget *
ib_jit_budget_compute (const char *const *paths, struct ib_cuda_file *const *code, size_t n,
                       const struct ib_target *target)
{
  struct ib_jit_budget *b = ib_jit_budget_new (target);
  for (size_t i = 0; i < n; i++)
    ib_jit_budget_learn (b, code[i]);
  for (size_t i = 0; i < n; i++)
    ib_jit_budget_add (b, paths[i], code[i]);
  return b;
}

void
ib_jit_budget_free (struct ib_jit_budget *b)
{
  if (b == NULL)
    return;
  for (size_t i = 0; i < b->n; i++)
    {
      struct ib_jit_file *f = &b->f[i];
      for (size_t k = 0; k < f->n_jit_names; k++)
        free (f->jit_names[k]);
      for (size_t k = 0; k < f->n_none_names; k++)
        free (f->none_names[k]);
      free (f->jit_names);
      free (f->none_names);
      free (f->path);
    }
  free (b->f);
  if (b->state)
    {
      for (size_t i = 0; i < b->state->n_runnable; i++)
        free (b->state->runnable[i]);
      free (b->state->runnable);
      free (b->state);
    }
  free (b);
}

static cJSON *
names_json (char *const *v, size_t n)
{
  cJSON *a = cJSON_CreateArray ();
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray (a, cJSON_CreateString (v[i]));
  return a;
}

uint64_t
ib_jit_budget_ptx_bytes (const struct ib_jit_budget *b)
{
  uint64_t t = 0;
  for (size_t i = 0; i < b->n; i++)
    t += b->f[i].jit_ptx_bytes;
  return t;
}

double
ib_jit_core_seconds (uint64_t ptx_bytes)
{
  return (double) ptx_bytes / IB_JIT_PTX_BYTES_PER_CORE_SECOND;
}

/* J's text, unformatted, to OUT; J is freed. */
static void
put_json (FILE *out, cJSON *j)
{
  char *text = cJSON_PrintUnformatted (j);
  if (text)
    fputs (text, out);
  free (text);
  cJSON_Delete (j);
}

static cJSON *
file_json (const struct ib_jit_file *f)
{
  cJSON *j = cJSON_CreateObject ();
  cJSON_AddStringToObject (j, "path", f->path);
  cJSON_AddNumberToObject (j, "sass_entries", (double) f->sass_entries);
  cJSON_AddNumberToObject (j, "ptx_entries", (double) f->ptx_entries);
  cJSON_AddNumberToObject (j, "relocatable_entries", (double) f->relocatable_entries);
  cJSON_AddNumberToObject (j, "kernels", (double) f->kernels);
  cJSON_AddNumberToObject (j, "runs", (double) f->runs);
  cJSON_AddNumberToObject (j, "covered_elsewhere", (double) f->covered);
  cJSON_AddNumberToObject (j, "jit", (double) f->jit);
  cJSON_AddNumberToObject (j, "jit_ptx_bytes", (double) f->jit_ptx_bytes);
  cJSON_AddNumberToObject (j, "neither", (double) f->none);
  cJSON_AddNumberToObject (j, "ptx_too_new", (double) f->ptx_too_new);
  cJSON_AddItemToObject (j, "jit_kernels", names_json (f->jit_names, f->n_jit_names));
  cJSON_AddItemToObject (j, "neither_kernels", names_json (f->none_names, f->n_none_names));
  return j;
}

void
ib_jit_budget_write_json (FILE *out, const struct ib_jit_budget *b)
{
  char v[16];
  snprintf (v, sizeof (v), "%u.%u", b->driver_ptx / 10, b->driver_ptx % 10);
  uint64_t ptx = ib_jit_budget_ptx_bytes (b);
  fputs ("{\"driver_ptx\":", out);
  put_json (out, cJSON_CreateString (v));
  fputs (",\"jit_ptx_bytes\":", out);
  put_json (out, cJSON_CreateNumber ((double) ptx));
  fputs (",\"jit_core_seconds_estimate\":", out);
  put_json (out, cJSON_CreateNumber (ib_jit_core_seconds (ptx)));
  fputs (",\"jit_rate_bytes_per_core_second\":", out);
  put_json (out, cJSON_CreateNumber (IB_JIT_PTX_BYTES_PER_CORE_SECOND));
  fputs (",\"files\":[", out);
  bool first = true;
  for (size_t i = 0; i < b->n; i++)
    {
      const struct ib_jit_file *f = &b->f[i];
      if (f->sass_entries + f->ptx_entries + f->relocatable_entries == 0)
        continue;
      fputs (first ? "" : ",", out);
      first = false;
      put_json (out, file_json (f));
    }
  fputs ("]}\n", out);
}

void
ib_jit_budget_print (FILE *out, const struct ib_jit_budget *b)
{
  fprintf (out, "%-60s %5s %5s %7s %6s %6s %5s %12s %7s\n", "file", "sass", "ptx", "kernels", "runs", "elsew",
           "jit", "jit PTX B", "neither");
  size_t jit = 0, none = 0;
  for (size_t i = 0; i < b->n; i++)
    {
      const struct ib_jit_file *f = &b->f[i];
      if (f->sass_entries + f->ptx_entries + f->relocatable_entries == 0)
        continue;
      fprintf (out, "%-60s %5zu %5zu %7zu %6zu %6zu %5zu %12llu %7zu\n", f->path, f->sass_entries, f->ptx_entries,
               f->kernels, f->runs, f->covered, f->jit, (unsigned long long) f->jit_ptx_bytes, f->none);
      for (size_t k = 0; k < f->n_jit_names && k < 8; k++)
        fprintf (out, "    jit: %s\n", f->jit_names[k]);
      if (f->n_jit_names > 8)
        fprintf (out, "    jit: ... and %zu more\n", f->n_jit_names - 8);
      for (size_t k = 0; k < f->n_none_names && k < 8; k++)
        fprintf (out, "    neither: %s\n", f->none_names[k]);
      if (f->n_none_names > 8)
        fprintf (out, "    neither: ... and %zu more\n", f->n_none_names - 8);
      if (f->ptx_too_new)
        fprintf (out, "    %zu PTX entries newer (.version %u.%u) than the driver's JIT takes (%u.%u)\n", f->ptx_too_new,
                 f->newest_ptx / 10, f->newest_ptx % 10, b->driver_ptx / 10, b->driver_ptx % 10);
      jit += f->jit;
      none += f->none;
    }
  uint64_t ptx = ib_jit_budget_ptx_bytes (b);
  fprintf (out, "%zu kernels JIT-compiled at first use (%llu bytes of PTX: about %.0f core-seconds of ptxas at "
           "%.2f MB/s), %zu with neither SASS nor PTX for the target\n",
           jit, (unsigned long long) ptx, ib_jit_core_seconds (ptx), IB_JIT_PTX_BYTES_PER_CORE_SECOND / 1e6, none);
}
