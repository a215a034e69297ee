#include "kernels/kplan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "kernels/payload.h"

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

/* A cubin to extract: entry INDEX of the image file FILE, read back by its
 * place in the file (AT: offset, stored size, codec) without parsing the
 * rest of the file; SYMBOL is a kernel it must hold. */
struct wanted
{
  const struct ib_fs_entry *file;
  size_t index;
  struct ib_cuda_entry at; /* kernels not kept */
  char *symbol;
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
cubin_name (struct planner *p, const struct ib_fs_entry *file, const struct ib_cuda_file *code, size_t index,
            const char *symbol)
{
  for (size_t i = 0; i < p->n_w; i++)
    if (p->w[i].file == file && p->w[i].index == index)
      return p->w[i].name;
  p->w = ib_xrealloc (p->w, (p->n_w + 1) * sizeof (*p->w));
  char *name = ib_xasprintf ("%s-%zu.cubin", file->digest, index);
  cleanup_free char *cached = ib_path_join (p->cache, name);
  struct ib_cuda_entry at = code->e[index];
  at.n_kernels = 0, at.kernels = NULL;
  p->w[p->n_w] = (struct wanted){ file, index, at, ib_xstrdup (symbol), name, access (cached, R_OK) == 0 };
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
      it->cubin = ib_xstrdup (cubin_name (p, files[i], code[i], (size_t) sel, sym));
      const char *r = recipe_for (recipes, n_recipes, kernel, sym);
      it->recipe = r ? ib_xstrdup (r) : NULL;
    }
  if (!any)
    add_item (p->plan, req->path, kernel, g);
}

/* ---- extraction ---------------------------------------------------------- */

static int
write_piece (void *data, const unsigned char *buf, size_t n, uint64_t off, ib_error_t *err)
{
  (void) off;
  return ib_write_all (*(int *) data, buf, n, "cubin", err);
}

/* The cubin at TMP is one loadable SASS entry holding W's kernel: the
 * place the kernel cache recorded was this content's. */
static int
check_cubin (const struct wanted *w, const char *tmp, const char *what, ib_error_t *err)
{
  cleanup_close int fd = open (tmp, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", tmp);
  struct ib_cuda_file *f = NULL;
  cleanup_free char *label = ib_xasprintf ("%s, entry %zu", what, w->index);
  if (ib_cuda_inspect (fd, label, &f, err) < 0)
    return -1;
  bool ok = f->n == 1 && f->e[0].kind == IB_CUDA_SASS && f->e[0].sm == w->at.sm;
  for (size_t k = 0; ok && k < f->e[0].n_kernels; k++)
    if (strcmp (f->e[0].kernels[k], w->symbol) == 0)
      {
        ib_cuda_file_free (f);
        return 0;
      }
  ib_cuda_file_free (f);
  return ib_error (err, IB_EKERNELS, "`%s`: entry %zu read back is not the sm_%u cubin with `%s`", what, w->index,
                   w->at.sm, w->symbol);
}

/* W's cubin into the cache, complete or not at all: its payload alone,
 * streamed (and uncompressed) from its recorded place in FD. */
static int
save_cubin (struct planner *p, const struct wanted *w, int fd, const char *what, ib_error_t *err)
{
  struct ib_payload pl;
  if (ib_cuda_entry_payload (&w->at, fd, what, &pl, err) < 0)
    return -1;
  cleanup_free char *path = ib_path_join (p->cache, w->name);
  cleanup_free char *tmp = ib_xasprintf ("%s.tmp-%d", path, (int) getpid ());
  int out = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
  int r = ib_payload_stream (&pl, write_piece, &out, err);
  if (close (out) < 0 && r == 0)
    r = ib_error_errno (err, errno, IB_EENV, "write `%s`", tmp);
  if (r == 0)
    r = check_cubin (w, tmp, what, err);
  if (r == 0 && rename (tmp, path) < 0)
    r = ib_error_errno (err, errno, IB_EENV, "rename `%s`", tmp);
  if (r < 0)
    unlink (tmp);
  return r;
}

/* The wanted cubins of image file E, open on FD. */
static int
extract_fd (struct planner *p, const struct ib_fs_entry *e, int fd, ib_error_t *err)
{
  cleanup_free char *what = ib_xasprintf ("/%s", e->path);
  for (size_t i = 0; i < p->n_w; i++)
    if (!p->w[i].cached && p->w[i].file == e && save_cubin (p, &p->w[i], fd, what, err) < 0)
      return -1;
  return 0;
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

/* What the required files hold, each file inspected once however many
 * requirements name it (the kernel cache has them after the kernel gate;
 * otherwise one pass over each layer reads them all). */
struct inspected
{
  const struct ib_fs_entry **files;
  struct ib_cuda_file **code;
  size_t n;
};

static int
inspect_required (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                  const struct ib_requirement *req, size_t n_req, struct inspected *in, ib_error_t *err)
{
  memset (in, 0, sizeof (*in));
  for (size_t q = 0; q < n_req; q++)
    {
      cleanup_free const struct ib_fs_entry **files = NULL;
      size_t n = ib_fsview_glob (view, req[q].path, &files);
      for (size_t i = 0; i < n; i++)
        {
          bool seen = false;
          for (size_t k = 0; k < in->n && !seen; k++)
            seen = in->files[k] == files[i];
          if (!seen)
            {
              in->files = ib_xrealloc (in->files, (in->n + 1) * sizeof (*in->files));
              in->files[in->n++] = files[i];
            }
        }
    }
  in->code = ib_xcalloc (in->n ? in->n : 1, sizeof (*in->code));
  return ib_kernels_inspect_entries (s, img, in->files, in->n, in->code, NULL, err);
}

static void
inspected_clear (struct inspected *in)
{
  for (size_t i = 0; i < in->n; i++)
    ib_cuda_file_free (in->code[i]);
  free (in->code);
  free (in->files);
}

/* Every kernel of REQ on each kind of GPU (one probe per kind). */
static void
plan_requirement (struct planner *p, const struct inspected *in, const struct ib_fsview *view,
                  const struct ib_requirement *req, const struct ib_gpu *gpus, size_t n_gpus,
                  const struct ib_launch_recipe *recipes, size_t n_recipes)
{
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n = ib_fsview_glob (view, req->path, &files);
  struct ib_cuda_file **code = ib_xcalloc (n ? n : 1, sizeof (*code));
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < in->n && !code[i]; k++)
      if (in->files[k] == files[i])
        code[i] = in->code[k];
  for (size_t k = 0; k < req->n_names; k++)
    for (size_t g = 0; g < n_gpus; g++)
      {
        bool seen = false;
        for (size_t h = 0; h < g && !seen; h++)
          seen = gpus[h].cc.major == gpus[g].cc.major && gpus[h].cc.minor == gpus[g].cc.minor;
        if (!seen)
          plan_kernel (p, req, req->names[k], &gpus[g], files, code, n, recipes, n_recipes);
      }
  free (code);
}

/* The chosen cubins not yet in the cache, each file opened once: through
 * OPEN_FN when it can, else streamed out of its layer. */
static int
extract_wanted (struct planner *p, struct ib_store *s, const struct ib_image *img, ib_kplan_open_fn open_fn,
                void *open_data, ib_error_t *err)
{
  const struct ib_fs_entry **files = ib_xcalloc (p->n_w ? p->n_w : 1, sizeof (*files));
  size_t n_files = 0;
  for (size_t i = 0; i < p->n_w; i++)
    {
      bool seen = p->w[i].cached;
      for (size_t k = 0; k < n_files && !seen; k++)
        seen = files[k] == p->w[i].file;
      if (!seen)
        files[n_files++] = p->w[i].file;
    }
  int r = 0;
  for (size_t i = 0; r == 0 && open_fn && i < n_files;)
    {
      int fd = -1;
      r = open_fn (open_data, files[i], &fd, err);
      if (r == 0 && fd >= 0)
        {
          r = extract_fd (p, files[i], fd, err);
          close (fd);
          files[i] = files[--n_files];
        }
      else
        i++;
    }
  if (r == 0 && n_files)
    r = ib_extract_entries (s, img, files, n_files, extract_file, p, err);
  free (files);
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
  struct inspected in;
  int r = inspect_required (s, img, view, req, n_req, &in, err);
  for (size_t q = 0; r == 0 && q < n_req; q++)
    plan_requirement (&p, &in, view, &req[q], gpus, n_gpus, recipes, n_recipes);
  inspected_clear (&in);
  if (r == 0)
    r = extract_wanted (&p, s, img, open_fn, open_data, err);
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
      free (p.w[i].symbol);
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
