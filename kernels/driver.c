/* The driver floor: what the image's CUDA libraries and config ask of the
 * driver that the nodes run (fleet.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/ldconf.h"
#include "kernels/fleet.h"

/* One CUDA version that WHAT (a file, or a config variable) needs, against
 * the target's driver: full support, minor-version compatibility (a
 * warning: what is newer than the driver, PTX included, fails), or none. */
static void
judge (const struct ib_fleet_scope *sc, const char *what, const char *role, unsigned cuda)
{
  if (sc->checked)
    (*sc->checked)++;
  struct ib_driver_version d = ib_target_driver (sc->target), full, floor;
  char cv[16], dv[32], fv[32], flv[32], mv[16];
  ib_cuda_version_str (cuda, cv, sizeof (cv));
  ib_driver_version_str (d, dv, sizeof (dv));
  ib_cuda_version_str (ib_driver_max_cuda (d), mv, sizeof (mv));
  if (!ib_cuda_min_driver (cuda, &full, &floor))
    return;
  ib_driver_version_str (full, fv, sizeof (fv));
  ib_driver_version_str (floor, flv, sizeof (flv));
  if (ib_driver_version_cmp (d, full) >= 0)
    return;
  if (ib_driver_version_cmp (d, floor) >= 0 && cuda >= 11010)
    ib_problemf (sc->fn, sc->data, false,
                 "%s: %s of CUDA %s on driver %s (CUDA %s): runs only under minor-version compatibility (full "
                 "support needs driver %s); its features and PTX newer than the driver fail",
                 what, role, cv, dv, mv, fv);
  else
    ib_problemf (sc->fn, sc->data, true,
                 "%s: %s of CUDA %s needs driver %s or later (%s for CUDA %s itself); the target's driver %s "
                 "supports CUDA %s",
                 what, role, cv, flv, fv, cv, dv, mv);
}

static int
check_libraries (const struct ib_fleet_scope *sc, ib_error_t *err)
{
  static const char *const globs[] = { "*/libcudart.so*", "*/libnvrtc.so*", "*/libnvJitLink.so*" };
  static const char *const roles[] = { "the CUDA runtime", "NVRTC", "nvJitLink" };
  enum
  {
    N_LIBS = sizeof (globs) / sizeof (globs[0])
  };
  /* One walk of the view for the three: each a walk of every path. */
  const struct ib_fs_entry **files[N_LIBS];
  size_t n[N_LIBS];
  ib_fsview_glob_each (sc->view, globs, N_LIBS, files, n);
  int r = 0;
  for (size_t k = 0; k < N_LIBS; k++)
    {
      cleanup_free unsigned *v = ib_xcalloc (n[k] ? n[k] : 1, sizeof (*v));
      /* The runtime states no version, its file name does; NVRTC and
       * nvJitLink carry a version string, their name is the fallback. */
      if (r == 0 && k > 0 && ib_fleet_cuda_versions (sc, files[k], n[k], v, err) < 0)
        r = -1;
      for (size_t i = 0; r == 0 && i < n[k]; i++)
        {
          cleanup_free char *path = ib_xasprintf ("/%s", files[k][i]->path);
          unsigned cuda = v[i] ? v[i] : ib_cuda_version_of_name (path);
          if (cuda)
            judge (sc, path, roles[k], cuda);
        }
      free (files[k]);
    }
  return r;
}

/* NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=tesla,driver>=470,driver<471 ...":
 * the container toolkit starts the container when the cuda clause holds,
 * or one of the brand clauses' driver ranges (forward compatibility on
 * data-center GPUs) does. */
static void
check_require (const struct ib_fleet_scope *sc)
{
  const char *req = ib_image_env (sc->img, "NVIDIA_REQUIRE_CUDA");
  const char *off = ib_image_env (sc->img, "NVIDIA_DISABLE_REQUIRE");
  if (req == NULL || (off && *off && strcmp (off, "false") != 0 && strcmp (off, "0") != 0))
    return;
  if (sc->checked)
    (*sc->checked)++;
  struct ib_driver_version d = ib_target_driver (sc->target);
  unsigned max = ib_driver_max_cuda (d), want = 0;
  bool brand_ok = false;
  cleanup_free char *copy = ib_xstrdup (req);
  char *save = NULL;
  for (char *w = strtok_r (copy, " ", &save); w; w = strtok_r (NULL, " ", &save))
    {
      if (strncmp (w, "cuda>=", 6) == 0)
        want = ib_cuda_version_parse (w + 6);
      struct ib_driver_version lo, hi;
      const char *a = strstr (w, "driver>="), *b = strstr (w, "driver<");
      char los[32] = "", his[32] = "";
      if (strncmp (w, "brand=", 6) == 0 && a && b && sscanf (a + 8, "%31[0-9.]", los) == 1
          && sscanf (b + 7, "%31[0-9.]", his) == 1 && ib_driver_version_parse (los, &lo) == 0
          && ib_driver_version_parse (his, &hi) == 0)
        brand_ok |= ib_driver_version_cmp (d, lo) >= 0 && ib_driver_version_cmp (d, hi) < 0;
    }
  if (want == 0 || want <= max)
    return;
  char wv[16], mv[16], dv[32];
  ib_cuda_version_str (want, wv, sizeof (wv));
  ib_cuda_version_str (max, mv, sizeof (mv));
  ib_driver_version_str (d, dv, sizeof (dv));
  ib_problemf (sc->fn, sc->data, !brand_ok,
               "NVIDIA_REQUIRE_CUDA=%s: asks for CUDA %s, the target's driver %s supports CUDA %s%s", req, wv, dv, mv,
               brand_ok ? " (a brand clause admits it: forward compatibility, data-center GPUs only)"
                        : ": the NVIDIA container toolkit refuses to start it");
}

static bool
declared (const struct ib_target *t, const char *path)
{
  for (size_t i = 0; t && i < t->n_libcuda; i++)
    if (strcmp (t->libcuda[i], path) == 0)
      return true;
  return false;
}

/* Where the dynamic loader looks before (or instead of) the driver that the
 * NVIDIA runtime injects into the default folders (ld.so(8)):
 * LD_LIBRARY_PATH, the folders of /etc/ld.so.conf (ld.so.cache), then the
 * default folders themselves; each folder as its path in the view (its
 * links followed), with what put it there. */
struct search
{
  size_t n;
  char **dir; /* clean view paths: "usr/lib/x86_64-linux-gnu" */
  const char **via;
};

static void
search_add (struct search *s, const struct ib_fsview *v, const char *dir, const char *via)
{
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (v, dir, &canon);
  char *clean = e && e->type == IB_FS_DIR && canon ? steal_pointer (&canon) : ib_xstrdup (dir + strspn (dir, "/"));
  size_t len = strlen (clean);
  while (len && clean[len - 1] == '/')
    clean[--len] = '\0';
  s->dir = ib_xrealloc (s->dir, (s->n + 1) * sizeof (*s->dir));
  s->via = ib_xrealloc (s->via, (s->n + 1) * sizeof (*s->via));
  s->dir[s->n] = clean;
  s->via[s->n++] = via;
}

static void
search_clear (struct search *s)
{
  for (size_t i = 0; i < s->n; i++)
    free (s->dir[i]);
  free (s->dir);
  free (s->via);
}

static int
search_init (const struct ib_fleet_scope *sc, struct search *s, ib_error_t *err)
{
  static const char *const defaults[] = { "/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu",
                                          "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                                          "/usr/lib/aarch64-linux-gnu", NULL };
  memset (s, 0, sizeof (*s));
  const char *llp = ib_image_env (sc->img, "LD_LIBRARY_PATH");
  cleanup_free char *copy = ib_xstrdup (llp ? llp : "");
  char *save = NULL;
  for (char *w = strtok_r (copy, ":;", &save); w; w = strtok_r (NULL, ":;", &save))
    if (w[0] == '/')
      search_add (s, sc->view, w, "LD_LIBRARY_PATH");
  struct ib_ldconf conf = { 0 };
  if (ib_ldconf_read (sc->store, sc->img, sc->view, &conf, sc->reads ? &sc->reads->layer_passes : NULL, err) < 0)
    {
      ib_ldconf_clear (&conf);
      return -1;
    }
  for (size_t i = 0; i < conf.n_dirs; i++)
    search_add (s, sc->view, conf.dirs[i], "/etc/ld.so.conf");
  ib_ldconf_clear (&conf);
  for (int i = 0; defaults[i]; i++)
    search_add (s, sc->view, defaults[i], "a default folder");
  return 0;
}

/* What put the folder DIR (a clean view path) on the loader's path, NULL
 * when nothing did. */
static const char *
search_finds (const struct search *s, const char *dir)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp (s->dir[i], dir) == 0)
      return s->via[i];
  return NULL;
}

static int
check_libcuda (const struct ib_fleet_scope *sc, ib_error_t *err)
{
  /* By name, without a walk of every path (336,000 at 30 GB): a base
   * read in place keeps what the pattern matched in it. */
  static const char *const glob = "*/libcuda.so*";
  cleanup_free const struct ib_fs_entry **named = NULL;
  size_t n = ib_fsview_match (sc->view, &glob, 1, &named);
  struct search s = { 0 };
  bool have_search = false;
  for (size_t i = 0; i < n; i++)
    {
      const struct ib_fs_entry *e = named[i];
      if (e->type != IB_FS_FILE && e->type != IB_FS_SYMLINK)
        continue;
      cleanup_free char *path = ib_xasprintf ("/%s", e->path);
      char *slash = strrchr (path, '/');
      if (strncmp (slash + 1, "libcuda.so", 10) != 0)
        continue;
      if (sc->checked)
        (*sc->checked)++;
      if (declared (sc->target, path))
        continue;
      /* The image's ld.so.conf is read only for an image with a libcuda. */
      if (!have_search && search_init (sc, &s, err) < 0)
        {
          search_clear (&s);
          return ib_error_wrap (err, "the loader's search path of %s", path);
        }
      have_search = true;
      *slash = '\0';
      const char *via = search_finds (&s, path + 1);
      *slash = '/';
      if (via)
        ib_problemf (sc->fn, sc->data, true,
                     "%s: a libcuda in the image where the loader finds it before the driver's that the NVIDIA "
                     "runtime injects (CUDA error 803 when they differ; its folder is on the search path through %s): "
                     "remove it, or declare it with `libcuda = %s` in [target]",
                     path, via, path);
    }
  search_clear (&s);
  return 0;
}

static const char *
config_str (const struct ib_image *img, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (img->config_json, key);
  return cJSON_IsString (v) ? v->valuestring : "";
}

static void
check_platform (const struct ib_fleet_scope *sc)
{
  const char *want = sc->target ? sc->target->platform : NULL;
  if (want == NULL)
    return;
  const char *variant = config_str (sc->img, "variant");
  char have[160];
  snprintf (have, sizeof (have), "%s/%s%s%s", config_str (sc->img, "os"), config_str (sc->img, "architecture"),
            *variant ? "/" : "", variant);
  if (strcmp (want, have) != 0 && !(strncmp (want, have, strlen (want)) == 0 && have[strlen (want)] == '/'))
    ib_problemf (sc->fn, sc->data, true, "the image is %s, the target's platform is %s", have, want);
}

int
ib_fleet_driver (const struct ib_fleet_scope *sc, ib_error_t *err)
{
  check_platform (sc);
  if (check_libraries (sc, err) < 0)
    return -1;
  check_require (sc);
  const char *cv = ib_image_env (sc->img, "CUDA_VERSION");
  unsigned v = cv ? ib_cuda_version_parse (cv) : 0;
  if (v)
    {
      cleanup_free char *what = ib_xasprintf ("CUDA_VERSION=%s", cv);
      judge (sc, what, "the image's CUDA", v);
    }
  return check_libcuda (sc, err);
}
