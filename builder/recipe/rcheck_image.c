/* The recipe checks that read the image: its Python (flags and variables),
 * its shared objects' strings (C getenv), its GPU code (the architecture
 * lists), its file system (mounts). */
#include "builder/recipe/rcheck.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/jitbudget.h"
#include "kernels/kgate.h"
#include "kernels/target.h"
#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/recipe/rcheck_private.h"

#define MAX_PY (16u << 20)

static bool
ends_with (const char *s, const char *suffix)
{
  size_t a = strlen (s), b = strlen (suffix);
  return a >= b && strcmp (s + a - b, suffix) == 0;
}

struct py_read
{
  struct ib_py_inventory *inv;
  size_t refused;
};

static int
read_py (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct py_read *pr = data;
  cleanup_free char *src = NULL;
  size_t len;
  if (ib_reader_slurp (r, MAX_PY, &src, &len, err) < 0)
    return -1;
  ib_error_t e2 = NULL;
  cleanup_free char *path = ib_xasprintf ("/%s", e->path);
  /* A file the lexer refuses declares nothing this reading can see; the
   * symbol gate is where broken Python fails. */
  if (ib_py_inventory_add (pr->inv, path, src, len, &e2) < 0)
    pr->refused++;
  ib_error_release (&e2);
  return 0;
}

int
ib_py_inventory_of_image (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                          const char *package, struct ib_py_inventory *inv, ib_error_t *err)
{
  cleanup_free char *a = ib_xasprintf ("dist-packages/%s/", package);
  cleanup_free char *b = ib_xasprintf ("site-packages/%s/", package);
  const struct ib_fs_entry **want = NULL;
  size_t n = 0;
  for (size_t i = 0; i < ib_fsview_count (view); i++)
    {
      const struct ib_fs_entry *e = ib_fsview_at (view, i);
      if (e->type != IB_FS_FILE || !ends_with (e->path, ".py") || !(strstr (e->path, a) || strstr (e->path, b)))
        continue;
      want = ib_xrealloc (want, (n + 1) * sizeof (*want));
      want[n++] = e;
    }
  struct py_read pr = { inv, 0 };
  int r = ib_extract_entries (s, img, want, n, read_py, &pr, err);
  free (want);
  ib_py_inventory_finish (inv);
  return r;
}

/* ---- C getenv: the names in the strings of shared objects --------------- */

struct so_scan
{
  size_t n_names;
  char **names; /* "\0NAME\0" patterns, without the first NUL */
  bool *found;
  char **where;
  size_t scanned;
};

static bool
has_zname (const char *buf, size_t len, const char *name)
{
  size_t n = strlen (name);
  for (const char *p = buf; (p = memmem (p, (size_t) (buf + len - p), name, n + 1)) != NULL; p++)
    if (p > buf && p[-1] == '\0')
      return true;
  return false;
}

static int
scan_so (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct so_scan *sc = data;
  /* Whole, as the loader maps it: the names sit in .rodata/.dynstr. */
  cleanup_free char *buf = NULL;
  size_t len;
  if (ib_reader_slurp (r, (size_t) e->size + 1, &buf, &len, err) < 0)
    return -1;
  sc->scanned++;
  if (!has_zname (buf, len, "getenv") && !has_zname (buf, len, "secure_getenv"))
    return 0;
  for (size_t i = 0; i < sc->n_names; i++)
    if (!sc->found[i] && has_zname (buf, len, sc->names[i]))
      {
        sc->found[i] = true;
        sc->where[i] = ib_xasprintf ("/%s", e->path);
      }
  return 0;
}

static bool
is_shared_object (const char *path)
{
  return ends_with (path, ".so") || strstr (path, ".so.") != NULL;
}

static int
env_in_shared_objects (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                       struct so_scan *sc, ib_error_t *err)
{
  const struct ib_fs_entry **want = NULL;
  size_t n = 0;
  for (size_t i = 0; i < ib_fsview_count (view); i++)
    {
      const struct ib_fs_entry *e = ib_fsview_at (view, i);
      if (e->type != IB_FS_FILE || !is_shared_object (e->path) || e->size > (1ULL << 31))
        continue;
      want = ib_xrealloc (want, (n + 1) * sizeof (*want));
      want[n++] = e;
    }
  int r = ib_extract_entries (s, img, want, n, scan_so, sc, err);
  free (want);
  return r;
}

static bool
is_arch_list (const char *name)
{
  return strcmp (name, "TORCH_CUDA_ARCH_LIST") == 0 || strcmp (name, "FLASHINFER_CUDA_ARCH_LIST") == 0;
}

static int
check_env (struct ib_rcheck *c, struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
           const struct ib_recipe *r, const struct ib_py_inventory *inv, ib_error_t *err)
{
  struct so_scan sc = { 0 };
  sc.names = ib_xcalloc (r->n_env + 1, sizeof (char *));
  sc.found = ib_xcalloc (r->n_env + 1, sizeof (bool));
  sc.where = ib_xcalloc (r->n_env + 1, sizeof (char *));
  size_t *pending = ib_xcalloc (r->n_env + 1, sizeof (size_t));
  for (size_t i = 0; i < r->n_env; i++)
    {
      const struct ib_recipe_env *v = &r->env[i];
      const struct ib_env_read *rd = ib_py_inventory_env (inv, v->name);
      const char *outside = ib_recipe_outside_variable (v->name);
      if (rd)
        ib_rcheck_add (c, v->line, IB_R_PASS, "env", v->name, "read at %s:%d", rd->file, rd->line);
      else if (outside)
        ib_rcheck_add (c, v->line, IB_R_PASS, "env", v->name, "an outside variable (read by %s)", outside);
      else if (is_arch_list (v->name))
        ib_rcheck_add (c, v->line, IB_R_PASS, "env", v->name, "read by %s JIT builds (its value: the arch check)",
                       v->name[0] == 'T' ? "PyTorch's" : "FlashInfer's");
      else
        {
          pending[sc.n_names] = i;
          sc.names[sc.n_names++] = v->name;
        }
    }
  int rc = 0;
  if (sc.n_names)
    rc = env_in_shared_objects (s, img, view, &sc, err);
  c->so_scanned = sc.scanned;
  for (size_t k = 0; rc == 0 && k < sc.n_names; k++)
    {
      const struct ib_recipe_env *v = &r->env[pending[k]];
      if (sc.found[k])
        ib_rcheck_add (c, v->line, IB_R_PASS, "env", v->name, "named in %s, which calls getenv", sc.where[k]);
      else
        ib_rcheck_add (c, v->line, IB_R_FAIL, "env", v->name,
                       "nothing in the image reads it (%zu env reads in %zu Python files, %zu shared objects "
                       "scanned): a typo or a dead knob",
                       ib_py_inventory_n_env (inv), ib_py_inventory_files (inv), sc.scanned);
    }
  for (size_t k = 0; k < sc.n_names; k++)
    free (sc.where[k]);
  free (sc.names), free (sc.found), free (sc.where), free (pending);
  return rc;
}

/* ---- the architecture lists against the image's GPU code ----------------- */

struct code
{
  size_t n;
  const struct ib_fs_entry **files;
  struct ib_cuda_file **code;
  char **paths;
};

static void
code_clear (struct code *k)
{
  for (size_t i = 0; i < k->n; i++)
    {
      ib_cuda_file_free (k->code[i]);
      free (k->paths[i]);
    }
  free (k->files), free (k->code), free (k->paths);
}

/* "12.1a", "9.0", "8.0+PTX", "sm_121a" into a compute capability. */
static bool
parse_arch (const char *s, struct ib_compute_capability *cc)
{
  unsigned major, minor;
  char rest[16] = "";
  if (strncmp (s, "sm_", 3) == 0)
    {
      unsigned v;
      if (sscanf (s + 3, "%u%15s", &v, rest) < 1 || v < 10)
        return false;
      major = v / 10, minor = v % 10;
    }
  else if (sscanf (s, "%u.%u%15s", &major, &minor, rest) < 2)
    return false;
  if (*rest && strcmp (rest, "a") && strcmp (rest, "f") && strcmp (rest, "+PTX") && strcmp (rest, "a+PTX"))
    return false;
  *cc = (struct ib_compute_capability){ major, minor };
  return true;
}

/* The GPU code a JIT arch list is about: what the image's Python packages
 * bring and prebake (vLLM, FlashInfer, their extensions), not NVIDIA's own
 * libraries (the nvidia-* wheels: NCCL, cuBLAS, ...; torch/lib), which ship
 * their own per-arch selection and are never JIT-built from these lists;
 * the kernel gate's `require` lines are where those are checked.  For
 * FLASHINFER_CUDA_ARCH_LIST, FlashInfer's files only. */
static bool
arch_file (const char *path, bool flashinfer_only)
{
  if (flashinfer_only)
    return strstr (path, "flashinfer") != NULL;
  return (strstr (path, "-packages/") != NULL) && strstr (path, "/nvidia/") == NULL
         && strstr (path, "/torch/lib/") == NULL;
}

static void
check_one_arch (struct ib_rcheck *c, const struct ib_recipe_env *v, const char *arch, const struct code *k,
                bool flashinfer_only)
{
  struct ib_compute_capability cc;
  if (!parse_arch (arch, &cc))
    {
      ib_rcheck_add (c, v->line, IB_R_UNCHECKED, "arch", v->name, "`%s` is not an architecture this check reads",
                     arch);
      return;
    }
  const char **paths = ib_xcalloc (k->n + 1, sizeof (char *));
  struct ib_cuda_file **code = ib_xcalloc (k->n + 1, sizeof (*code));
  size_t n = 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->code[i] && k->code[i]->n && arch_file (k->paths[i], flashinfer_only))
      paths[n] = k->paths[i], code[n++] = k->code[i];
  struct ib_target t = { .n_gpus = 1, .gpus = &cc };
  struct ib_jit_budget *b = ib_jit_budget_compute (paths, code, n, &t);
  size_t kernels = 0, bad = 0;
  cleanup_free char *list = ib_xstrdup ("");
  for (size_t i = 0; i < b->n; i++)
    {
      const struct ib_jit_file *f = &b->f[i];
      kernels += f->kernels;
      bad += f->jit + f->none;
      for (size_t j = 0; j < f->n_none_names + f->n_jit_names; j++)
        {
          bool none = j < f->n_none_names;
          const char *name = none ? f->none_names[j] : f->jit_names[j - f->n_none_names];
          if (strlen (list) < 400)
            {
              char *l2 = ib_xasprintf ("%s%s%s in %s (%s)", list, *list ? "; " : "", name, f->path,
                                       none ? "no code for it" : "PTX only: JIT at first use");
              free (list);
              list = l2;
            }
        }
    }
  if (n == 0)
    ib_rcheck_add (c, v->line, IB_R_UNCHECKED, "arch", v->name, "%s: the image has no %sGPU code to compare", arch,
                   flashinfer_only ? "FlashInfer " : "");
  else if (bad)
    ib_rcheck_add (c, v->line, IB_R_FAIL, "arch", v->name,
                   "%s (compute %u.%u): %zu of %zu kernels in %zu files have no SASS that runs on it: %s%s", arch,
                   cc.major, cc.minor, bad, kernels, n, list, strlen (list) >= 400 ? "; ..." : "");
  else
    ib_rcheck_add (c, v->line, IB_R_PASS, "arch", v->name, "%s (compute %u.%u): SASS for all %zu kernels in %zu files",
                   arch, cc.major, cc.minor, kernels, n);
  ib_jit_budget_free (b);
  free (paths);
  free (code);
}

static int
check_arch (struct ib_rcheck *c, struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
            const struct ib_recipe *r, struct code *k, ib_error_t *err)
{
  bool any = false;
  for (size_t i = 0; i < r->n_env; i++)
    any = any || is_arch_list (r->env[i].name);
  if (!any)
    return 0;
  k->n = ib_kernels_glob_files (view, NULL, 0, &k->files);
  k->code = ib_xcalloc (k->n + 1, sizeof (*k->code));
  k->paths = ib_xcalloc (k->n + 1, sizeof (char *));
  for (size_t i = 0; i < k->n; i++)
    k->paths[i] = ib_xasprintf ("/%s", k->files[i]->path);
  if (ib_kernels_inspect_entries (s, img, k->files, k->n, k->code, NULL, err) < 0)
    return ib_error_wrap (err, "the image's GPU code");
  for (size_t i = 0; i < r->n_env; i++)
    {
      const struct ib_recipe_env *v = &r->env[i];
      if (!is_arch_list (v->name))
        continue;
      cleanup_free char *copy = ib_xstrdup (v->value);
      char *save = NULL;
      for (char *a = strtok_r (copy, "; ,", &save); a; a = strtok_r (NULL, "; ,", &save))
        check_one_arch (c, v, a, k, v->name[0] == 'F');
    }
  return 0;
}

/* ---- mounts -------------------------------------------------------------- */

static void
check_mount (struct ib_rcheck *c, const struct ib_recipe_mount *m, const struct ib_fsview *view, const struct code *k)
{
  const char *p = m->container;
  if (p[0] != '/')
    {
      ib_rcheck_add (c, m->line, IB_R_FAIL, "mount", p, "the container path is not absolute");
      return;
    }
  /* Each parent: a folder of the image, or missing (the runtime makes it). */
  cleanup_free char *path = ib_xstrdup (p);
  const char *missing = NULL;
  for (char *slash = strchr (path + 1, '/'); slash; slash = strchr (slash + 1, '/'))
    {
      *slash = '\0';
      const struct ib_fs_entry *e = ib_fsview_resolve (view, path, NULL);
      if (e && e->type != IB_FS_DIR)
        {
          ib_rcheck_add (c, m->line, IB_R_FAIL, "mount", p, "its parent %s is not a folder in the image", path);
          return;
        }
      if (e == NULL && missing == NULL)
        missing = p;
      *slash = '/';
    }
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (view, p, &canon);
  if (e && e->type != IB_FS_DIR)
    {
      ib_rcheck_add (c, m->line, IB_R_FAIL, "mount", p,
                     "the image has a file there, not a folder");
      return;
    }
  size_t hidden = 0, kernels = 0;
  const char *example = NULL;
  if (e && canon)
    {
      size_t cl = strlen (canon);
      for (size_t i = 0; i < ib_fsview_count (view); i++)
        {
          const struct ib_fs_entry *f = ib_fsview_at (view, i);
          if (f->type == IB_FS_DIR || strncmp (f->path, canon, cl) != 0 || f->path[cl] != '/')
            continue;
          hidden++;
          for (size_t j = 0; j < k->n; j++)
            if (k->files[j] == f && k->code[j] && k->code[j]->n)
              kernels++, example = f->path;
        }
    }
  if (kernels)
    ib_rcheck_add (c, m->line, IB_R_FAIL, "mount", p,
                   "hides %zu files the image prebakes there, %zu with GPU code (/%s): the JIT cache mount "
                   "replaces the prebaked kernels",
                   hidden, kernels, example);
  else if (hidden)
    ib_rcheck_add (c, m->line, IB_R_WARN, "mount", p, "hides %zu files the image has there", hidden);
  else
    ib_rcheck_add (c, m->line, IB_R_PASS, "mount", p, "%s%s", e ? "an empty folder of the image" : "not in the image",
                   missing && !e ? " (the runtime creates it and its missing parents)" : "");
}

int
ib_recipe_check_image (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                       const struct ib_recipe *r, struct ib_rcheck **out, ib_error_t *err)
{
  struct ib_rcheck *c = ib_xcalloc (1, sizeof (*c));
  c->recipe = ib_xstrdup (r->path);
  struct ib_py_inventory *inv = ib_py_inventory_new ();
  struct code k = { 0 };
  int rc = ib_py_inventory_of_image (s, img, view, "vllm", inv, err);
  if (rc == 0)
    {
      c->py_files = ib_py_inventory_files (inv);
      c->flags_declared = ib_py_inventory_n_flags (inv);
      c->env_reads = ib_py_inventory_n_env (inv);
      ib_rcheck_shape (c, r);
      ib_rcheck_flags (c, r, inv);
      rc = check_env (c, s, img, view, r, inv, err);
    }
  if (rc == 0)
    rc = check_arch (c, s, img, view, r, &k, err);
  if (rc == 0 && r->n_mounts && k.n == 0)
    {
      k.n = ib_kernels_glob_files (view, NULL, 0, &k.files);
      k.code = ib_xcalloc (k.n + 1, sizeof (*k.code));
      k.paths = ib_xcalloc (k.n + 1, sizeof (char *));
      for (size_t i = 0; i < k.n; i++)
        k.paths[i] = ib_xasprintf ("/%s", k.files[i]->path);
      rc = ib_kernels_inspect_entries (s, img, k.files, k.n, k.code, NULL, err);
    }
  for (size_t i = 0; rc == 0 && i < r->n_mounts; i++)
    check_mount (c, &r->mounts[i], view, &k);
  code_clear (&k);
  ib_py_inventory_free (inv);
  if (rc < 0)
    {
      ib_rcheck_free (c);
      return ib_error_wrap (err, "recipe %s", r->path);
    }
  *out = c;
  return 0;
}
