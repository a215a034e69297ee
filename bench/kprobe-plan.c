/* kprobe-plan: the kernel probe's plan (kernels/kplan.h) on its own, timed,
 * without a GPU: what the smoke gate does between "gate jit-budget" and the
 * container's start.  bench/kprobe-plan.sh builds it against the library of
 * this tree and of another revision and runs both on the same image.
 *
 *   kprobe-plan STORE REF CC ROUNDS 'PATH-OR-GLOB KERNEL...'...
 *
 * The GPUs are one of compute capability CC (9.0: an H200).  Files are
 * opened from the folders the layers are extracted into, as the smoke gate
 * does (the container's root needs them anyway).  The kernel cache is
 * filled first, untimed (the kernel gate has filled it by then in a build);
 * then ROUNDS times: the probe's cubin cache emptied ("cold", the first
 * build of an image), the plan made, then made again ("warm").  One line
 * per round: cold and warm seconds, kernels planned, cubins, extracted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "layers/runner/bundle.h"
#include "kernels/kgate.h"
#include "kernels/kplan.h"
#include "layers/view/fsview.h"
#include "layers/transports/refs.h"
#include "util/fsutil.h"

struct ctx
{
  struct ib_store *s;
  const struct ib_image *img;
};

static int
open_extracted (void *data, const struct ib_fs_entry *e, int *fd, ib_error_t *err)
{
  struct ctx *c = data;
  char *dir = NULL;
  *fd = -1;
  if (e->layer < 0 || (size_t) e->layer >= c->img->n_layers)
    return 0;
  if (ib_image_layer_dir (c->s, c->img, (size_t) e->layer, &dir, err) < 0)
    return -1;
  char *path = ib_path_join (dir, e->path);
  *fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  free (path);
  free (dir);
  return 0;
}

static double
now (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static int
fail (ib_error_t *err)
{
  return ib_error_report ("kprobe-plan", err);
}

/* One plan into a fresh folder under the store; *SECS how long it took. */
static int
plan_once (struct ctx *c, const struct ib_fsview *view, const struct ib_requirement *req, size_t n_req,
           const struct ib_gpu *gpu, double *secs, struct ib_kplan *plan, ib_error_t *err)
{
  char dir[] = "/tmp/kprobe-plan-XXXXXX";
  if (mkdtemp (dir) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp");
  double t0 = now ();
  int r = ib_kplan_make (c->s, c->img, view, req, n_req, gpu, 1, NULL, 0, open_extracted, c, dir, plan, err);
  *secs = now () - t0;
  ib_remove_tree (dir, NULL);
  return r;
}

int
main (int argc, char **argv)
{
  if (argc < 6)
    {
      fprintf (stderr, "usage: kprobe-plan STORE REF CC ROUNDS 'PATH-OR-GLOB KERNEL...'...\n");
      return 2;
    }
  ib_error_t err = NULL;
  struct ctx c = { 0 };
  struct ib_image *img = NULL;
  struct ib_fsview *view = NULL;
  struct ib_gpu gpu = { 0, "bench", { 0, 0 } };
  if (ib_compute_capability_parse (argv[3], &gpu.cc) < 0)
    return fprintf (stderr, "kprobe-plan: bad CC %s\n", argv[3]), 2;
  if (ib_image_open_in_place (argv[1], argv[2], NULL, NULL, &c.s, &img, &err) < 0
      || ib_fsview_of_image (c.s, img, &view, &err) < 0)
    return fail (&err);
  c.img = img;
  int rounds = atoi (argv[4]);
  size_t n_req = (size_t) (argc - 5);
  struct ib_requirement *req = calloc (n_req, sizeof (*req));
  for (size_t q = 0; q < n_req; q++)
    for (char *save = NULL, *w = strtok_r (strdup (argv[5 + q]), " ", &save); w; w = strtok_r (NULL, " ", &save))
      if (req[q].path == NULL)
        req[q].path = w;
      else
        {
          req[q].names = realloc (req[q].names, (req[q].n_names + 1) * sizeof (char *));
          req[q].names[req[q].n_names++] = w;
        }
  /* The layers extracted (the container's root needs them: the first
   * build extracts them during the plan, a later one finds them) and the
   * kernel cache filled (the kernel gate did), as a build has them. */
  double t0 = now ();
  for (size_t l = 0; l < img->n_layers; l++)
    {
      char *dir = NULL;
      if (ib_image_layer_dir (c.s, img, l, &dir, &err) < 0)
        return fail (&err);
      free (dir);
    }
  printf ("layers extracted (or found) in %.3f s\n", now () - t0);
  char *cache = NULL;
  if (ib_store_cache_dir (c.s, "kprobe", &cache, &err) < 0)
    return fail (&err);
  struct ib_kplan plan;
  double secs;
  if (plan_once (&c, view, req, n_req, &gpu, &secs, &plan, &err) < 0)
    return fail (&err);
  ib_kplan_clear (&plan);
  for (int i = 0; i < rounds; i++)
    {
      double cold, warm;
      if (ib_remove_tree (cache, &err) < 0)
        return fail (&err);
      free (cache);
      if (ib_store_cache_dir (c.s, "kprobe", &cache, &err) < 0
          || plan_once (&c, view, req, n_req, &gpu, &cold, &plan, &err) < 0)
        return fail (&err);
      size_t n = plan.n, cubins = plan.cubins, extracted = plan.extracted;
      ib_kplan_clear (&plan);
      if (plan_once (&c, view, req, n_req, &gpu, &warm, &plan, &err) < 0)
        return fail (&err);
      printf ("cold %.3f s warm %.3f s: %zu kernels, %zu cubins, %zu extracted cold, %zu warm\n", cold, warm, n, cubins,
              extracted, plan.extracted);
      ib_kplan_clear (&plan);
    }
  for (size_t q = 0; q < n_req; q++)
    {
      free (req[q].path); /* the strdup'd argument the words point into */
      free (req[q].names);
    }
  free (req);
  free (cache);
  ib_fsview_free (view);
  ib_image_free (img);
  ib_store_free (c.s);
  return 0;
}
