#include "kernels/fleet.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/view/extract.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "kernels/cudaver.h"

const char *
ib_image_env (const struct ib_image *img, const char *key)
{
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive (img->config_json, "config");
  const cJSON *env = cJSON_GetObjectItemCaseSensitive (cfg, "Env");
  const cJSON *x;
  size_t kl = strlen (key);
  const char *found = NULL;
  cJSON_ArrayForEach (x, env)
  {
    if (cJSON_IsString (x) && strncmp (x->valuestring, key, kl) == 0 && x->valuestring[kl] == '=')
      found = x->valuestring + kl + 1;
  }
  return found;
}

/* ---- CUDA versions of image files, cached by content digest -------------- */

/* The records are made in the file-list pass (cudaver.h's indexer); a
 * file without one (indexers off, a store made before them, a file reached
 * by another name) is read from its layer, and its record made by the same
 * code. */
struct version_job
{
  const char *cache;
  const struct ib_fs_entry *const *files;
  unsigned *out;
  size_t n;
};

static int
version_extracted (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct version_job *job = data;
  cleanup_close int fd = -1;
  unsigned v = 0;
  if (ib_reader_spool (r, job->cache, &fd, err) < 0 || ib_cudaver_of_fd_save (job->cache, e->digest, fd, &v, err) < 0)
    return ib_error_wrap (err, "/%s", e->path);
  for (size_t i = 0; i < job->n; i++)
    if (job->files[i] == e)
      job->out[i] = v;
  return 0;
}

int
ib_fleet_cuda_versions (const struct ib_fleet_scope *sc, const struct ib_fs_entry *const *files, size_t n, unsigned *out,
             ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (sc->store, "cudaver", &cache, err) < 0)
    return -1;
  cleanup_free const struct ib_fs_entry **wanted = ib_xcalloc (n ? n : 1, sizeof (*wanted));
  size_t n_wanted = 0;
  for (size_t i = 0; i < n; i++)
    {
      out[i] = 0;
      if (!ib_cudaver_cache_load (cache, files[i]->digest, &out[i]))
        wanted[n_wanted++] = files[i];
    }
  if (sc->reads)
    {
      sc->reads->cached += n - n_wanted;
      sc->reads->read += n_wanted;
      sc->reads->layer_passes += ib_extract_layer_count (wanted, n_wanted);
    }
  struct version_job job = { cache, files, out, n };
  return ib_extract_entries (sc->store, sc->img, wanted, n_wanted, version_extracted, &job, err);
}

/* ---- the toolchains ------------------------------------------------------ */

struct tool
{
  const struct ib_fs_entry *e;
  const char *kind; /* "ptxas", "libnvrtc", ... */
  unsigned cuda;
};

struct tools
{
  size_t n;
  struct tool *t;
};

static int
find_tools (const struct ib_fleet_scope *sc, struct tools *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  /* By name, without a walk of every path: a base read in place keeps
   * what the patterns matched in it (fsview.h ib_fsview_match). */
  size_t n_globs, n;
  const char *const *globs = ib_cudaver_tool_globs (&n_globs);
  cleanup_free const struct ib_fs_entry **named = NULL;
  n = ib_fsview_match (sc->view, globs, n_globs, &named);
  for (size_t i = 0; i < n; i++)
    {
      const struct ib_fs_entry *e = named[i];
      const char *kind = ib_cudaver_tool_kind (e->path);
      if (kind == NULL || e->type != IB_FS_FILE)
        continue;
      out->t = ib_xrealloc (out->t, (out->n + 1) * sizeof (*out->t));
      out->t[out->n++] = (struct tool) { e, kind, 0 };
    }
  cleanup_free const struct ib_fs_entry **files = ib_xcalloc (out->n ? out->n : 1, sizeof (*files));
  cleanup_free unsigned *v = ib_xcalloc (out->n ? out->n : 1, sizeof (*v));
  for (size_t i = 0; i < out->n; i++)
    files[i] = out->t[i].e;
  if (ib_fleet_cuda_versions (sc, files, out->n, v, err) < 0)
    return -1;
  for (size_t i = 0; i < out->n; i++)
    out->t[i].cuda = v[i];
  return 0;
}

/* The newest CUDA version the target's GPUs need of a compiler, and the
 * GPU that needs it ("sm_121a"). */
static unsigned
cuda_needed (const struct ib_target *t, char *gpu, size_t n)
{
  size_t n_gpus;
  const struct ib_compute_capability *g = ib_target_gpus (t, &n_gpus);
  unsigned need = 0;
  snprintf (gpu, n, "sm_%u%u", g[0].major, g[0].minor);
  for (size_t i = 0; i < n_gpus; i++)
    {
      unsigned c = ib_cuda_for_gpu (g[i]);
      if (c > need)
        {
          need = c;
          snprintf (gpu, n, "sm_%u%u%s", g[i].major, g[i].minor, g[i].major >= 9 ? "a" : "");
        }
    }
  return need;
}

static void
detail (const struct ib_fleet_scope *sc, const char *kind, const char *path, unsigned cuda, const char *note)
{
  if (sc->details == NULL)
    return;
  char v[16] = "";
  if (cuda)
    ib_cuda_version_str (cuda, v, sizeof (v));
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "kind", kind);
  cJSON_AddStringToObject (o, "path", path);
  if (cuda)
    cJSON_AddStringToObject (o, "cuda", v);
  else
    cJSON_AddNullToObject (o, "cuda");
  if (note)
    cJSON_AddStringToObject (o, "note", note);
  cJSON_AddItemToArray (sc->details, o);
}

/* The regular file at image path PATH, symlinks followed; NULL if none. */
static const struct ib_fs_entry *
image_file (const struct ib_fsview *v, const char *path)
{
  while (*path == '/')
    path++;
  const struct ib_fs_entry *e = ib_fsview_lookup (v, path);
  return e ? ib_fsview_follow (v, e) : NULL;
}

static unsigned
version_of_path (const struct ib_fleet_scope *sc, const struct tools *tl, const struct ib_fs_entry *e,
                 ib_error_t *err, int *r)
{
  for (size_t i = 0; i < tl->n; i++)
    if (tl->t[i].e == e)
      return tl->t[i].cuda;
  unsigned v = 0;
  *r = ib_fleet_cuda_versions (sc, &e, 1, &v, err);
  return v;
}

/* "the image has /usr/local/cuda-13.0/bin/ptxas (CUDA 13.0)", or "". */
static char *
better_ptxas (const struct tools *tl, unsigned need)
{
  for (size_t i = 0; i < tl->n; i++)
    if (strcmp (tl->t[i].kind, "ptxas") == 0 && tl->t[i].cuda >= need && strstr (tl->t[i].e->path, "triton/") == NULL)
      {
        char v[16];
        ib_cuda_version_str (tl->t[i].cuda, v, sizeof (v));
        return ib_xasprintf ("; the image has /%s (CUDA %s)", tl->t[i].e->path, v);
      }
  return ib_xstrdup ("");
}

/* The ptxas that Triton will use: TRITON_PTXAS_PATH when set, else its
 * own backends/nvidia/bin/ptxas (triton/knobs.py, nvidia backend). */
static int
check_triton (const struct ib_fleet_scope *sc, const struct tools *tl, unsigned need, const char *gpu,
              ib_error_t *err)
{
  char nv[16];
  ib_cuda_version_str (need, nv, sizeof (nv));
  cleanup_free char *better = better_ptxas (tl, need);
  const char *env = ib_image_env (sc->img, "TRITON_PTXAS_PATH");
  if (env && *env)
    {
      const struct ib_fs_entry *e = image_file (sc->view, env);
      if (e == NULL)
        {
          ib_problemf (sc->fn, sc->data, true,
                       "TRITON_PTXAS_PATH=%s: no such file in the image (Triton falls back to its own ptxas)%s", env,
                       better);
          return 0;
        }
      int r = 0;
      unsigned v = version_of_path (sc, tl, e, err, &r);
      char vs[16] = "unknown";
      if (v)
        ib_cuda_version_str (v, vs, sizeof (vs));
      if (r == 0 && v && v < need)
        ib_problemf (sc->fn, sc->data, true,
                     "TRITON_PTXAS_PATH=%s is ptxas of CUDA %s (/%s), which cannot target %s (needs CUDA %s or "
                     "later): point TRITON_PTXAS_PATH at a newer ptxas%s",
                     env, vs, e->path, gpu, nv, better);
      detail (sc, "TRITON_PTXAS_PATH", env, v, v && v < need ? "too old for the target" : NULL);
      return r;
    }
  for (size_t i = 0; i < tl->n; i++)
    {
      const struct tool *t = &tl->t[i];
      if (strcmp (t->kind, "ptxas") != 0 || fnmatch ("*triton/backends/nvidia/bin/ptxas", t->e->path, 0) != 0)
        continue;
      char vs[16];
      ib_cuda_version_str (t->cuda, vs, sizeof (vs));
      if (t->cuda && t->cuda < need)
        ib_problemf (sc->fn, sc->data, true,
                     "Triton will use its own /%s, ptxas of CUDA %s, which cannot target %s (needs CUDA %s or later): "
                     "set TRITON_PTXAS_PATH to a newer ptxas%s",
                     t->e->path, vs, gpu, nv, better);
    }
  return 0;
}

static void
check_path_variables (const struct ib_fleet_scope *sc, const struct tools *tl, unsigned need, const char *gpu)
{
  const char *cuobjdump = ib_image_env (sc->img, "TRITON_CUOBJDUMP_PATH");
  if (cuobjdump && *cuobjdump && image_file (sc->view, cuobjdump) == NULL)
    ib_problemf (sc->fn, sc->data, true, "TRITON_CUOBJDUMP_PATH=%s: no such file in the image", cuobjdump);
  const char *home = ib_image_env (sc->img, "CUDA_HOME");
  if (home == NULL || *home == '\0')
    return;
  cleanup_free char *rel = ib_xstrdup (home + strspn (home, "/"));
  size_t len = strlen (rel);
  while (len && rel[len - 1] == '/')
    rel[--len] = '\0';
  const struct ib_fs_entry *dir = ib_fsview_lookup (sc->view, rel);
  if (dir == NULL)
    {
      ib_problemf (sc->fn, sc->data, true, "CUDA_HOME=%s: no such folder in the image", home);
      return;
    }
  /* Torch's cpp_extension JIT compiles with $CUDA_HOME/bin/nvcc. */
  for (size_t i = 0; i < tl->n; i++)
    if (strcmp (tl->t[i].kind, "nvcc") == 0 && tl->t[i].cuda && tl->t[i].cuda < need
        && strncmp (tl->t[i].e->path, rel, len) == 0 && tl->t[i].e->path[len] == '/')
      {
        char vs[16];
        ib_cuda_version_str (tl->t[i].cuda, vs, sizeof (vs));
        ib_problemf (sc->fn, sc->data, false, "CUDA_HOME=%s: /%s is CUDA %s, which cannot target %s", home,
                     tl->t[i].e->path, vs, gpu);
      }
}

int
ib_fleet_toolchains (const struct ib_fleet_scope *sc, ib_error_t *err)
{
  struct tools tl;
  if (find_tools (sc, &tl, err) < 0)
    {
      free (tl.t);
      return -1;
    }
  char gpu[16], nv[16];
  unsigned need = cuda_needed (sc->target, gpu, sizeof (gpu));
  ib_cuda_version_str (need, nv, sizeof (nv));
  if (sc->checked)
    {
      static const char *const vars[] = { "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "CUDA_HOME" };
      *sc->checked += tl.n;
      for (size_t i = 0; i < sizeof (vars) / sizeof (vars[0]); i++)
        {
          const char *v = ib_image_env (sc->img, vars[i]);
          *sc->checked += v && *v;
        }
    }
  for (size_t i = 0; i < tl.n; i++)
    {
      const struct tool *t = &tl.t[i];
      cleanup_free char *path = ib_xasprintf ("/%s", t->e->path);
      bool compiler = strcmp (t->kind, "libnvJitLink") != 0 && strcmp (t->kind, "cuobjdump") != 0;
      bool old = compiler && t->cuda && t->cuda < need;
      detail (sc, t->kind, path, t->cuda, t->cuda == 0 ? "no version string" : old ? "too old for the target" : NULL);
      if (old && strstr (t->e->path, "triton/backends/nvidia/bin/") == NULL)
        {
          char vs[16];
          ib_cuda_version_str (t->cuda, vs, sizeof (vs));
          ib_problemf (sc->fn, sc->data, false, "%s: %s of CUDA %s cannot target %s (needs CUDA %s or later)", path,
                       t->kind, vs, gpu, nv);
        }
    }
  int r = check_triton (sc, &tl, need, gpu, err);
  if (r == 0)
    check_path_variables (sc, &tl, need, gpu);
  free (tl.t);
  return r;
}
