/* The driver floor: what the image's CUDA libraries and config ask of the
 * driver that the nodes run (fleet.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
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

static const char *
config_str (const struct ib_image *img, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (img->config_json, key);
  return cJSON_IsString (v) ? v->valuestring : "";
}

/* The folders of LD_LIBRARY_PATH: the dynamic loader searches them before
 * ld.so.cache (ld.so(8)), so a libcuda there is the one a program loads,
 * whatever the runtime injects; each as its clean path in the view (its
 * links followed). */
struct search
{
  size_t n;
  char **dir; /* clean view paths: "usr/local/cuda/compat" */
};

static char *
view_dir (const struct ib_fsview *v, const char *dir)
{
  cleanup_free char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (v, dir, &canon);
  char *clean = e && e->type == IB_FS_DIR && canon ? steal_pointer (&canon) : ib_xstrdup (dir + strspn (dir, "/"));
  size_t len = strlen (clean);
  while (len && clean[len - 1] == '/')
    clean[--len] = '\0';
  return clean;
}

static void
search_init (const struct ib_fleet_scope *sc, struct search *s)
{
  memset (s, 0, sizeof (*s));
  const char *llp = ib_image_env (sc->img, "LD_LIBRARY_PATH");
  cleanup_free char *copy = ib_xstrdup (llp ? llp : "");
  char *save = NULL;
  for (char *w = strtok_r (copy, ":;", &save); w; w = strtok_r (NULL, ":;", &save))
    if (w[0] == '/')
      {
        s->dir = ib_xrealloc (s->dir, (s->n + 1) * sizeof (*s->dir));
        s->dir[s->n++] = view_dir (sc->view, w);
      }
}

static void
search_clear (struct search *s)
{
  for (size_t i = 0; i < s->n; i++)
    free (s->dir[i]);
  free (s->dir);
}

static bool
search_has (const struct search *s, const char *dir)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp (s->dir[i], dir) == 0)
      return true;
  return false;
}

/* The folder where the NVIDIA container runtime binds the driver's
 * libraries (libnvidia-container's libs_dir): the multiarch folder of an
 * image with /etc/debian_version, /usr/lib64 otherwise.  It then runs
 * ldconfig with that folder named first, so the folder's libcuda.so.1
 * leads ld.so.cache, ahead of every folder of /etc/ld.so.conf (glibc's
 * ldconfig over the CUDA base shows it: tests/integration/fleet.sh). */
static char *
runtime_libs_dir (const struct ib_fleet_scope *sc)
{
  if (ib_fsview_resolve (sc->view, "/etc/debian_version", NULL) == NULL)
    return view_dir (sc->view, "/usr/lib64");
  bool arm = strcmp (config_str (sc->img, "architecture"), "arm64") == 0;
  return view_dir (sc->view, arm ? "/usr/lib/aarch64-linux-gnu" : "/usr/lib/x86_64-linux-gnu");
}

/* Whether the link E (libcuda.so) leads, link by link, to DIR/libcuda.so.1:
 * the name that the runtime's ldconfig points at the driver's libcuda. */
static bool
leads_to_soname (const struct ib_fsview *v, const struct ib_fs_entry *e, const char *dir)
{
  cleanup_free char *soname = ib_xasprintf ("%s/libcuda.so.1", dir);
  for (int hops = 0; e && e->type == IB_FS_SYMLINK && e->link && hops < 40; hops++)
    {
      cleanup_free char *parent = ib_xstrdup (e->path);
      char *slash = strrchr (parent, '/');
      *(slash ? slash : parent) = '\0';
      cleanup_free char *target
          = e->link[0] == '/' ? ib_xstrdup (e->link) : ib_xasprintf ("/%s/%s", parent, e->link);
      char *base = strrchr (target, '/');
      *base = '\0';
      cleanup_free char *folder = view_dir (v, *target ? target : "/");
      cleanup_free char *next = *folder ? ib_xasprintf ("%s/%s", folder, base + 1) : ib_xstrdup (base + 1);
      if (strcmp (next, soname) == 0)
        return true;
      e = ib_fsview_lookup (v, next);
    }
  return false;
}

/* A libcuda of the image at PATH (its file name NAME) in the folder where
 * the runtime binds the driver's (DIR): what ldconfig does with it. */
static void
judge_in_runtime_dir (const struct ib_fleet_scope *sc, const struct ib_fs_entry *e, const char *path,
                      const char *name, const char *dir)
{
  struct ib_driver_version d = ib_target_driver (sc->target), mine;
  char dv[32];
  ib_driver_version_str (d, dv, sizeof (dv));
  bool file = e->type == IB_FS_FILE || e->type == IB_FS_HARDLINK;
  if (strcmp (name, "libcuda.so.1") == 0)
    {
      if (file)
        ib_problemf (sc->fn, sc->data, true,
                     "%s: a libcuda in the image, a file and not a link, where the NVIDIA runtime binds the "
                     "driver's: its ldconfig leaves a libcuda.so.1 that is not a link, so the loader takes the "
                     "image's (CUDA error 803 where it differs from the driver): remove it, or declare it with "
                     "`libcuda = %s` in [target]",
                     path, path);
      return;
    }
  if (strcmp (name, "libcuda.so") == 0)
    {
      if (!leads_to_soname (sc->view, e, dir))
        ib_problemf (sc->fn, sc->data, false,
                     "%s: leads to the image's own libcuda, not to /%s/libcuda.so.1 that the NVIDIA runtime points "
                     "at the driver's: a program that opens libcuda.so by that name gets CUDA error 803 where "
                     "they differ (libcuda.so.1, which CUDA loads, is the driver's)",
                     path, dir);
      return;
    }
  if (ib_driver_version_parse (name + strlen ("libcuda.so."), &mine) < 0)
    return;
  char mv[32];
  ib_driver_version_str (mine, mv, sizeof (mv));
  int c = ib_driver_version_cmp (mine, d);
  if (c > 0)
    ib_problemf (sc->fn, sc->data, true,
                 "%s: a libcuda newer than the target's driver %s, where the NVIDIA runtime binds the driver's: "
                 "its ldconfig points libcuda.so.1 at the newest, this one (CUDA error 803): remove it, or declare "
                 "it with `libcuda = %s` in [target]",
                 path, dv, path);
  else if (c < 0)
    ib_problemf (sc->fn, sc->data, false,
                 "%s: a libcuda where the NVIDIA runtime binds the driver's: on the target's driver %s its ldconfig "
                 "points libcuda.so.1 at the driver's; on a driver older than %s, at this one (CUDA error 803)",
                 path, dv, mv);
}

static void
check_libcuda (const struct ib_fleet_scope *sc)
{
  /* By name, without a walk of every path (336,000 at 30 GB): a base
   * read in place keeps what the pattern matched in it. */
  static const char *const glob = "*/libcuda.so*";
  cleanup_free const struct ib_fs_entry **named = NULL;
  size_t n = ib_fsview_match (sc->view, &glob, 1, &named);
  struct search s;
  search_init (sc, &s);
  cleanup_free char *runtime_dir = runtime_libs_dir (sc);
  for (size_t i = 0; i < n; i++)
    {
      const struct ib_fs_entry *e = named[i];
      if (e->type != IB_FS_FILE && e->type != IB_FS_SYMLINK && e->type != IB_FS_HARDLINK)
        continue;
      cleanup_free char *path = ib_xasprintf ("/%s", e->path);
      char *slash = strrchr (path, '/');
      if (strncmp (slash + 1, "libcuda.so", 10) != 0)
        continue;
      if (sc->checked)
        (*sc->checked)++;
      if (declared (sc->target, path))
        continue;
      *slash = '\0';
      bool first = search_has (&s, path + 1), runtime = strcmp (path + 1, runtime_dir) == 0;
      *slash = '/';
      if (first)
        ib_problemf (sc->fn, sc->data, true,
                     "%s: a libcuda in the image where the loader finds it before the driver's that the NVIDIA "
                     "runtime injects (CUDA error 803 when they differ; its folder is on LD_LIBRARY_PATH): "
                     "remove it, or declare it with `libcuda = %s` in [target]",
                     path, path);
      else if (runtime)
        judge_in_runtime_dir (sc, e, path, slash + 1, runtime_dir);
      /* Elsewhere (a folder of /etc/ld.so.conf, say) the runtime's folder
       * leads the cache: the loader never reaches it by name. */
    }
  search_clear (&s);
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
  check_libcuda (sc);
  return 0;
}
