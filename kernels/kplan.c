#include "kplan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../layers/extract.h"
#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "payload.h"

static int
variant_rank (char v)
{
  return v == 'a' ? 2 : v == 'f' ? 1 : 0;
}

long
ib_kplan_select (const struct ib_cuda_file *f, const char *kernel, struct ib_compute_capability cc,
                 const char **symbol)
{
  long best = -1;
  const char *best_sym = NULL;
  for (size_t i = 0; f && i < f->n; i++)
    {
      const struct ib_cuda_entry *e = &f->e[i];
      if (e->kind != IB_CUDA_SASS || e->relocatable || !ib_sass_runs_on (e->sm, e->variant, cc.major, cc.minor))
        continue;
      const char *sym = NULL;
      for (size_t k = 0; k < e->n_kernels && !sym; k++)
        if (ib_kernel_name_matches (kernel, e->kernels[k]))
          sym = e->kernels[k];
      if (sym == NULL)
        continue;
      const struct ib_cuda_entry *b = best >= 0 ? &f->e[best] : NULL;
      if (b == NULL || e->sm > b->sm || (e->sm == b->sm && variant_rank (e->variant) > variant_rank (b->variant)))
        best = (long) i, best_sym = sym;
    }
  if (symbol)
    *symbol = best_sym;
  return best;
}

/* ---- planning ------------------------------------------------------------ */

/* A cubin to extract: entry INDEX of the image file FILE. */
struct wanted
{
  const struct ib_fs_entry *file;
  size_t index;
  char *name; /* "<file digest>-<index>.cubin", in the cache and the plan's folder */
  bool cached;
};

struct planner
{
  struct ib_kplan *plan;
  struct wanted *w;
  size_t n_w;
  const char *dir;
  const char *cache; /* the store's cache of extracted cubins, by content */
};

static const char *
recipe_for (const struct ib_launch_recipe *r, size_t n, const char *kernel, const char *symbol)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (r[i].kernel, kernel) == 0 || (symbol && strcmp (r[i].kernel, symbol) == 0))
      return r[i].recipe;
  return NULL;
}

static const char *
cubin_name (struct planner *p, const struct ib_fs_entry *file, size_t index)
{
  for (size_t i = 0; i < p->n_w; i++)
    if (p->w[i].file == file && p->w[i].index == index)
      return p->w[i].name;
  p->w = ib_xrealloc (p->w, (p->n_w + 1) * sizeof (*p->w));
  char *name = ib_xasprintf ("%s-%zu.cubin", file->digest, index);
  cleanup_free char *cached = ib_path_join (p->cache, name);
  p->w[p->n_w] = (struct wanted){ file, index, name, access (cached, R_OK) == 0 };
  return p->w[p->n_w++].name;
}

static struct ib_kplan_item *
add_item (struct ib_kplan *p, const char *file, const char *kernel, const struct ib_gpu *g)
{
  p->items = ib_xrealloc (p->items, (p->n + 1) * sizeof (*p->items));
  struct ib_kplan_item *it = &p->items[p->n++];
  memset (it, 0, sizeof (*it));
  it->file = ib_xstrdup (file);
  it->kernel = ib_xstrdup (kernel);
  it->gpu = g->index;
  it->cc = g->cc;
  snprintf (it->gpu_name, sizeof (it->gpu_name), "%s", g->name);
  return it;
}

/* KERNEL on GPU G: one probe per file whose fatbin has a cubin for G, or
 * one "not on this machine" item when none has. */
static void
plan_kernel (struct planner *p, const struct ib_requirement *req, const char *kernel, const struct ib_gpu *g,
             const struct ib_fs_entry *const *files, struct ib_cuda_file *const *code, size_t n,
             const struct ib_launch_recipe *recipes, size_t n_recipes)
{
  bool any = false;
  for (size_t i = 0; i < n; i++)
    {
      const char *sym = NULL;
      long sel = ib_kplan_select (code[i], kernel, g->cc, &sym);
      if (sel < 0)
        continue;
      any = true;
      cleanup_free char *path = ib_xasprintf ("/%s", files[i]->path);
      struct ib_kplan_item *it = add_item (p->plan, path, kernel, g);
      it->symbol = ib_xstrdup (sym);
      ib_cuda_entry_arch (&code[i]->e[sel], it->arch, sizeof (it->arch));
      it->cubin = ib_xstrdup (cubin_name (p, files[i], (size_t) sel));
      const char *r = recipe_for (recipes, n_recipes, kernel, sym);
      it->recipe = r ? ib_xstrdup (r) : NULL;
    }
  if (!any)
    add_item (p->plan, req->path, kernel, g);
}

/* ---- extraction ---------------------------------------------------------- */

struct extract_job
{
  struct planner *p;
  const struct ib_fs_entry *file;
};

static int
write_piece (void *data, const unsigned char *buf, size_t n, uint64_t off, ib_error_t *err)
{
  (void) off;
  return ib_write_all (*(int *) data, buf, n, "cubin", err);
}

static int
save_cubin (void *data, const struct ib_cuda_entry *e, size_t index, const struct ib_payload *pl, ib_error_t *err)
{
  (void) e;
  struct extract_job *job = data;
  for (size_t i = 0; i < job->p->n_w; i++)
    {
      const struct wanted *w = &job->p->w[i];
      if (w->cached || w->file != job->file || w->index != index)
        continue;
      /* Into the cache, complete or not at all. */
      cleanup_free char *path = ib_path_join (job->p->cache, w->name);
      cleanup_free char *tmp = ib_xasprintf ("%s.tmp-%d", path, (int) getpid ());
      int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
      int r = ib_payload_stream (pl, write_piece, &fd, err);
      if (close (fd) < 0 && r == 0)
        r = ib_error_errno (err, errno, IB_EENV, "write `%s`", tmp);
      if (r == 0 && rename (tmp, path) < 0)
        r = ib_error_errno (err, errno, IB_EENV, "rename `%s`", tmp);
      if (r < 0)
        {
          unlink (tmp);
          return -1;
        }
    }
  return 0;
}

static int
extract_fd (struct planner *p, const struct ib_fs_entry *e, int fd, ib_error_t *err)
{
  cleanup_free char *what = ib_xasprintf ("/%s", e->path);
  struct extract_job job = { p, e };
  struct ib_cuda_file *f = NULL;
  int ret = ib_cuda_inspect_each (fd, what, save_cubin, &job, &f, err);
  ib_cuda_file_free (f);
  return ret;
}

static int
extract_file (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct planner *p = data;
  cleanup_close int fd = -1;
  if (ib_reader_spool (r, p->dir, &fd, err) < 0)
    return -1;
  return extract_fd (p, e, fd, err);
}

static int
write_manifest (const struct ib_kplan *plan, const char *dir, ib_error_t *err)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  for (size_t i = 0; i < plan->n; i++)
    {
      const struct ib_kplan_item *it = &plan->items[i];
      if (it->cubin)
        fprintf (f, "%d\t%s\t%s\t%s\t%s\t%s\n", it->gpu, it->cubin, it->arch, it->file, it->symbol,
                 it->recipe ? it->recipe : "-");
    }
  fclose (f);
  cleanup_free char *path = ib_path_join (dir, "manifest");
  int r = ib_write_file_atomic (path, text, len, 0644, err);
  free (text);
  return r;
}

int
ib_kplan_make (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
               const struct ib_requirement *req, size_t n_req, const struct ib_gpu *gpus, size_t n_gpus,
               const struct ib_launch_recipe *recipes, size_t n_recipes, ib_kplan_open_fn open_fn,
               void *open_data, const char *dir, struct ib_kplan *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "kprobe", &cache, err) < 0)
    return -1;
  struct planner p = { out, NULL, 0, dir, cache };
  int r = 0;
  for (size_t q = 0; r == 0 && q < n_req; q++)
    {
      cleanup_free const struct ib_fs_entry **files = NULL;
      size_t n = ib_fsview_glob (view, req[q].path, &files);
      struct ib_cuda_file **code = ib_xcalloc (n ? n : 1, sizeof (*code));
      r = ib_kernels_inspect_entries (s, img, files, n, code, NULL, err);
      for (size_t k = 0; r == 0 && k < req[q].n_names; k++)
        for (size_t g = 0; g < n_gpus; g++)
          {
            bool seen = false; /* one probe per kind of GPU */
            for (size_t h = 0; h < g && !seen; h++)
              seen = gpus[h].cc.major == gpus[g].cc.major && gpus[h].cc.minor == gpus[g].cc.minor;
            if (!seen)
              plan_kernel (&p, &req[q], req[q].names[k], &gpus[g], files, code, n, recipes, n_recipes);
          }
      for (size_t i = 0; i < n; i++)
        ib_cuda_file_free (code[i]);
      free (code);
    }
  /* Each file that holds a chosen cubin not yet in the cache, read once. */
  const struct ib_fs_entry **files = ib_xcalloc (p.n_w ? p.n_w : 1, sizeof (*files));
  size_t n_files = 0;
  for (size_t i = 0; i < p.n_w; i++)
    {
      bool seen = p.w[i].cached;
      for (size_t k = 0; k < n_files && !seen; k++)
        seen = files[k] == p.w[i].file;
      if (!seen)
        files[n_files++] = p.w[i].file;
    }
  /* Files the caller can open directly leave the list. */
  for (size_t i = 0; r == 0 && open_fn && i < n_files;)
    {
      int fd = -1;
      r = open_fn (open_data, files[i], &fd, err);
      if (r == 0 && fd >= 0)
        {
          r = extract_fd (&p, files[i], fd, err);
          close (fd);
          files[i] = files[--n_files];
        }
      else
        i++;
    }
  if (r == 0 && n_files)
    r = ib_extract_entries (s, img, files, n_files, extract_file, &p, err);
  free (files);
  /* The plan's folder links them (the cache and the folder share the store). */
  for (size_t i = 0; r == 0 && i < p.n_w; i++)
    {
      cleanup_free char *from = ib_path_join (cache, p.w[i].name), *to = ib_path_join (dir, p.w[i].name);
      if (link (from, to) < 0)
        r = ib_error_errno (err, errno, IB_EENV, "link `%s` (was the cubin extracted?)", from);
    }
  out->extracted = 0;
  for (size_t i = 0; i < p.n_w; i++)
    {
      out->extracted += !p.w[i].cached;
      free (p.w[i].name);
    }
  out->cubins = p.n_w;
  free (p.w);
  if (r == 0)
    r = write_manifest (out, dir, err);
  if (r < 0)
    ib_kplan_clear (out);
  return r;
}

void
ib_kplan_clear (struct ib_kplan *p)
{
  for (size_t i = 0; i < p->n; i++)
    {
      free (p->items[i].file);
      free (p->items[i].kernel);
      free (p->items[i].symbol);
      free (p->items[i].cubin);
      free (p->items[i].recipe);
    }
  free (p->items);
  memset (p, 0, sizeof (*p));
}
