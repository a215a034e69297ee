#include "kernels/kgate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/view/extract.h"
#include "kernels/jitbudget.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

int
ib_compute_capability_parse (const char *s, struct ib_compute_capability *out)
{
  char *end;
  long major = strtol (s, &end, 10);
  if (end == s || *end != '.')
    return -1;
  const char *m = end + 1;
  long minor = strtol (m, &end, 10);
  if (end == m || *end || major < 1 || major > 99 || minor < 0 || minor > 9)
    return -1;
  out->major = (unsigned) major;
  out->minor = (unsigned) minor;
  return 0;
}

bool
ib_kernel_name_matches (const char *required, const char *symbol)
{
  if (strcmp (required, symbol) == 0)
    return true;
  char prefix[32];
  snprintf (prefix, sizeof (prefix), "_Z%zu", strlen (required));
  size_t pl = strlen (prefix);
  return strncmp (symbol, prefix, pl) == 0 && strncmp (symbol + pl, required, strlen (required)) == 0;
}

/* ---- what files hold, cached by content digest --------------------------- */

struct inspect_job
{
  const char *cache;
  const struct ib_fs_entry *const *files;
  size_t n;
  struct ib_cuda_file **out;
  size_t inspected;
  bool drop_saved; /* a record saved is not kept in OUT (ib_kernels_each_file reads it back) */
};

static int
inspect_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct inspect_job *job = data;
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, job->cache, &fd, err) < 0)
    return -1;
  cleanup_free char *what = ib_xasprintf ("/%s", e->path);
  struct ib_cuda_file *f;
  if (ib_cuda_inspect (fd, what, &f, err) < 0)
    return -1;
  bool saved = ib_kernels_cache_save (job->cache, e->digest, f);
  job->inspected++;
  for (size_t i = 0; i < job->n; i++)
    if (job->files[i] == e && job->out[i] == NULL)
      {
        if (job->drop_saved && saved)
          break;
        job->out[i] = f;
        return 0;
      }
  ib_cuda_file_free (f);
  return 0;
}

/* The files of WANTED (not cached) that the file-list pass saw to be
 * neither ELF nor fatbin (a man page behind a link named like a library):
 * no GPU code, the record ib_cuda_inspect would make, without a read;
 * taken out of WANTED, their record set in OUT (parallel to FILES). */
static void
no_code_from_the_pass (struct ib_store *s, const char *cache, const struct ib_fs_entry **wanted, size_t *n_wanted,
                       const struct ib_fs_entry *const *files, size_t n, struct ib_cuda_file **out)
{
  const struct ib_indexer *ix = ib_store_indexer (s, IB_KERNELS_INDEXER);
  if (ix == NULL || *n_wanted == 0)
    return;
  cleanup_free const char **digests = ib_xcalloc (*n_wanted, sizeof (*digests));
  cleanup_free bool *none = ib_xcalloc (*n_wanted, sizeof (*none));
  for (size_t i = 0; i < *n_wanted; i++)
    digests[i] = wanted[i]->digest;
  ib_kernels_indexer_no_code (ix->data, digests, *n_wanted, none);
  size_t k = 0;
  for (size_t i = 0; i < *n_wanted; i++)
    {
      if (!none[i] || !wanted[i]->digest[0])
        {
          wanted[k++] = wanted[i];
          continue;
        }
      struct ib_cuda_file *f = ib_xcalloc (1, sizeof (*f));
      ib_kernels_cache_save (cache, wanted[i]->digest, f);
      for (size_t j = 0; j < n; j++)
        if (files[j] == wanted[i] && out[j] == NULL)
          {
            out[j] = f;
            f = NULL;
          }
      ib_cuda_file_free (f);
    }
  *n_wanted = k;
}

static int
inspect_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files, size_t n,
                 struct ib_cuda_file **out, size_t *inspected, bool drop_saved, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "kernels", &cache, err) < 0)
    return -1;
  const struct ib_fs_entry **wanted = ib_xcalloc (n ? n : 1, sizeof (*wanted));
  size_t n_wanted = 0;
  for (size_t i = 0; i < n; i++)
    if ((out[i] = ib_kernels_cache_load (cache, files[i]->digest)) == NULL)
      wanted[n_wanted++] = files[i];
  no_code_from_the_pass (s, cache, wanted, &n_wanted, files, n, out);
  struct inspect_job job = { cache, files, n, out, 0, drop_saved };
  int r = ib_extract_entries (s, img, wanted, n_wanted, inspect_extracted, &job, err);
  free (wanted);
  if (inspected)
    *inspected = job.inspected;
  return r;
}

int
ib_kernels_inspect_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                            size_t n, struct ib_cuda_file **out, size_t *inspected, ib_error_t *err)
{
  return inspect_entries (s, img, files, n, out, inspected, false, err);
}

int
ib_kernels_each_file (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                      size_t n, int (*fn) (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err),
                      void *data, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "kernels", &cache, err) < 0)
    return -1;
  /* Those the cache lacks, inspected together (a record is only loaded
   * here to see that it is there). */
  cleanup_free const struct ib_fs_entry **wanted = ib_xcalloc (n ? n : 1, sizeof (*wanted));
  size_t n_wanted = 0;
  for (size_t i = 0; i < n; i++)
    {
      struct ib_cuda_file *f = ib_kernels_cache_load (cache, files[i]->digest);
      if (f == NULL)
        wanted[n_wanted++] = files[i];
      ib_cuda_file_free (f);
    }
  /* Each record saved is dropped as soon as it is, and read back one at a
   * time below: the cold walk over the CUDA base held every file's list
   * (90 MB of kernel names) until the inspection ended. */
  struct ib_cuda_file **got = ib_xcalloc (n_wanted ? n_wanted : 1, sizeof (*got));
  int r = n_wanted ? inspect_entries (s, img, wanted, n_wanted, got, NULL, true, err) : 0;
  for (size_t i = 0, k = 0; r == 0 && i < n; i++)
    {
      struct ib_cuda_file *f = ib_kernels_cache_load (cache, files[i]->digest);
      const struct ib_cuda_file *code = f;
      /* WANTED is in the order of FILES: its next one that is this file */
      size_t j = k;
      while (f == NULL && j < n_wanted && wanted[j] != files[i])
        j++;
      if (f == NULL && j < n_wanted)
        {
          code = got[j];
          k = j + 1;
        }
      if (code == NULL)
        r = ib_error (err, IB_EKERNELS, "the GPU code record of `/%s` was saved but does not read back",
                      files[i]->path);
      else
        r = fn (data, i, code, err);
      ib_cuda_file_free (f);
    }
  for (size_t k = 0; k < n_wanted; k++)
    ib_cuda_file_free (got[k]);
  free (got);
  return r;
}

struct budget_walk
{
  struct ib_jit_budget *jb;
  const struct ib_fs_entry *const *files;
  size_t with_code;
};

static int
budget_learn (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err)
{
  (void) i, (void) err;
  struct budget_walk *w = data;
  w->with_code += code->n > 0;
  ib_jit_budget_learn (w->jb, code);
  return 0;
}

static int
budget_add (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err)
{
  (void) err;
  struct budget_walk *w = data;
  cleanup_free char *path = ib_xasprintf ("/%s", w->files[i]->path);
  ib_jit_budget_add (w->jb, path, code);
  return 0;
}

int
ib_kernels_jit_budget (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                       size_t n, const struct ib_target *target, struct ib_jit_budget **out, size_t *with_code,
                       ib_error_t *err)
{
  struct budget_walk w = { ib_jit_budget_new (target), files, 0 };
  int r = ib_kernels_each_file (s, img, files, n, budget_learn, &w, err);
  if (r == 0)
    r = ib_kernels_each_file (s, img, files, n, budget_add, &w, err);
  if (r < 0)
    {
      ib_jit_budget_free (w.jb);
      return r;
    }
  if (with_code)
    *with_code = w.with_code;
  *out = w.jb;
  return 0;
}

size_t
ib_kernels_glob_files (const struct ib_fsview *view, char *const *globs, size_t n_globs,
                       const struct ib_fs_entry ***out)
{
  static char *const defaults[] = { "*.so", "*.so.*", "*.cubin", "*.fatbin" };
  if (n_globs == 0)
    {
      globs = defaults;
      n_globs = 4;
    }
  return ib_fsview_glob_all (view, (const char *const *) globs, n_globs, out);
}

/* ---- the gate ------------------------------------------------------------ */

struct gate
{
  ib_problem_fn fn;
  void *data;
  struct ib_kernel_stats *st;
};

static void problem (struct gate *g, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
problem (struct gate *g, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g->st->errors++;
  ib_vproblemf (g->fn, g->data, true, fmt, ap);
  va_end (ap);
}

static bool
entry_has (const struct ib_cuda_entry *e, const char *kernel)
{
  for (size_t k = 0; k < e->n_kernels; k++)
    if (ib_kernel_name_matches (kernel, e->kernels[k]))
      return true;
  return false;
}

/* "sm_120a SASS in /a.so, compute_120 PTX in /b.so", or "the kernel is in
 * none of them": the entries that hold KERNEL, those a process can load
 * first (the relocatable ones, -rdc, only after them), at most 8, and how
 * many were left out. */
static char *
what_is_there (const char *kernel, const struct ib_fs_entry *const *files, struct ib_cuda_file *const *code,
               size_t n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  size_t shown = 0, left = 0;
  for (int relocatable = 0; relocatable < 2; relocatable++)
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; code[i] && k < code[i]->n; k++)
        {
          const struct ib_cuda_entry *e = &code[i]->e[k];
          if (e->relocatable != (relocatable == 1) || !entry_has (e, kernel))
            continue;
          if (shown == 8)
            {
              left++;
              continue;
            }
          char arch[32];
          ib_cuda_entry_arch (e, arch, sizeof (arch));
          fprintf (f, "%s%s %s%s in /%s", shown++ ? ", " : "", arch,
                   e->kind == IB_CUDA_SASS ? "SASS" : e->kind == IB_CUDA_PTX ? "PTX" : "LTO-IR",
                   e->relocatable ? " (relocatable, -rdc)" : "", files[i]->path);
        }
  if (shown == 0)
    fputs ("the kernel is in none of them", f);
  else if (left)
    fprintf (f, ", and %zu more entries not listed", left);
  fclose (f);
  return text;
}

static void
check_kernel (struct gate *g, const struct ib_requirement *req, const char *kernel,
              const struct ib_compute_capability *cc, const struct ib_fs_entry *const *files,
              struct ib_cuda_file *const *code, size_t n)
{
  g->st->kernels_checked++;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; code[i] && k < code[i]->n; k++)
      {
        const struct ib_cuda_entry *e = &code[i]->e[k];
        if (e->kind == IB_CUDA_SASS && !e->relocatable && ib_sass_runs_on (e->sm, e->variant, cc->major, cc->minor)
            && entry_has (e, kernel))
          return;
      }
  cleanup_free char *there = what_is_there (kernel, files, code, n);
  problem (g, "%s: kernel %s has no SASS that runs on compute capability %u.%u without a JIT in %s: %s",
           req->origin, kernel, cc->major, cc->minor, req->path, there);
}

static int
check_requirement (struct gate *g, struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                   const struct ib_requirement *req, const struct ib_kernel_rules *rules, ib_error_t *err)
{
  static const struct ib_compute_capability gb10 = { 12, 1 };
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n = ib_fsview_glob (view, req->path, &files);
  if (n == 0)
    {
      problem (g, "%s: no file in the image matches %s", req->origin, req->path);
      return 0;
    }
  struct ib_cuda_file **code = ib_xcalloc (n, sizeof (*code));
  size_t inspected = 0;
  int r = ib_kernels_inspect_entries (s, img, files, n, code, &inspected, err);
  g->st->files += n;
  g->st->inspected += inspected;
  g->st->cached += n - inspected;
  for (size_t k = 0; r == 0 && k < req->n_names; k++)
    for (size_t t = 0; t < (rules->n_targets ? rules->n_targets : 1); t++)
      check_kernel (g, req, req->names[k], rules->n_targets ? &rules->targets[t] : &gb10, files, code, n);
  for (size_t i = 0; i < n; i++)
    ib_cuda_file_free (code[i]);
  free (code);
  return r;
}

int
ib_kernels_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                  const struct ib_kernel_rules *rules, ib_problem_fn fn, void *data, struct ib_kernel_stats *stats,
                  ib_error_t *err)
{
  memset (stats, 0, sizeof (*stats));
  struct gate g = { fn, data, stats };
  for (size_t i = 0; i < rules->n_required; i++)
    if (check_requirement (&g, s, img, view, &rules->required[i], rules, err) < 0)
      return -1;
  return 0;
}
