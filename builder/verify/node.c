/* The steps the launcher starts on the nodes for the smoke test across
 * nodes (builder/cluster/smoke_cluster.c is the coordinator).  See node.h. */
#include "builder/verify/node.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builder/cluster/smoke_cluster.h"
#include "builder/gates/gates.h"
#include "layers/runner/bundle.h"
#include "builder/smoke/launch.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* The definition's gate text, as the coordinator hex-encodes it on the
 * rank's command line (smoke_cluster.c). */
static char *
hex_decode (const char *h)
{
  size_t n = strlen (h);
  if (n % 2)
    return NULL;
  char *s = ib_xmalloc (n / 2 + 1);
  for (size_t i = 0; i < n / 2; i++)
    {
      unsigned v;
      if (sscanf (h + 2 * i, "%2x", &v) != 1 || !strchr ("0123456789abcdef", h[2 * i])
          || !strchr ("0123456789abcdef", h[2 * i + 1]))
        {
          free (s);
          return NULL;
        }
      s[i] = (char) v;
    }
  s[n / 2] = '\0';
  return s;
}

int
ib_node_gpus (int local, int *device)
{
  const char *list = getenv ("IMGBUILD_NODE_GPUS");
  *device = -1;
  if (!(list && *list))
    {
      int n = ib_gpu_count ();
      if (local >= 0 && local < n)
        *device = local;
      return n;
    }
  int n = 0;
  for (const char *p = list; *p;)
    {
      char *end;
      long d = strtol (p, &end, 10);
      if (end == p || d < 0 || d > 255)
        break;
      /* Only a GPU this machine has counts. */
      cleanup_free char *node = ib_xasprintf ("/dev/nvidia%ld", d);
      if (access (node, F_OK) == 0)
        {
          if (n == local)
            *device = (int) d;
          n++;
        }
      p = *end == ',' ? end + 1 : end;
      if (*end != ',' && *end != '\0')
        break;
    }
  return n;
}

static int
launched (int *rank, int *size, int *local, ib_error_t *err)
{
  if (ib_launch_rank_from_env (rank, size, local) < 0)
    return ib_error (err, IB_EUSAGE, "--node-pull and --node-rank are started by a launcher (mpirun sets "
                                     "OMPI_COMM_WORLD_RANK, srun SLURM_PROCID): neither is set");
  return 0;
}

int
ib_node_pull_main (const struct ib_node_options *o)
{
  ib_error_t err = NULL;
  int rank, size, local;
  cleanup_free char *root = ib_store_default_path (o->store);
  struct ib_store *s = NULL;
  struct ib_image *img = NULL;
  int r = launched (&rank, &size, &local, &err);
  if (r == 0)
    r = ib_store_open (root, &s, &err);
  if (r == 0)
    r = ib_image_pull (s, o->ref, NULL, &o->remote, &img, &err);
  if (r < 0)
    ib_error_wrap (&err, "cannot pull %s into %s", o->ref, root);
  if (r == 0)
    {
      /* How many GPUs the hosts list gives this node (by its rank in a
       * one-per-node step). */
      int want = 0, i = 0;
      for (const char *p = o->slots ? o->slots : ""; *p; i++)
        {
          if (i == rank)
            want = atoi (p);
          p += strcspn (p, ",");
          p += *p == ',';
        }
      int dev, have = ib_node_gpus (0, &dev);
      fprintf (stdout, "imgverify: node: pulled %s into %s (%zu layers); %d GPU%s\n", img->manifest.digest.s, root,
               img->n_layers, have, have == 1 ? "" : "s");
      const char *only = getenv ("IMGBUILD_NODE_GPUS");
      if (have < want)
        r = ib_error (&err, IB_ESMOKE, "this node has %d GPU%s (%s), --hosts gives it %d", have,
                      have == 1 ? "" : "s",
                      only && *only ? "IMGBUILD_NODE_GPUS" : have ? "fewer than asked" : "no /dev/nvidia0", want);
    }
  ib_image_free (img);
  ib_store_free (s);
  return r < 0 ? ib_error_report ("imgverify", &err) : 0;
}

int
ib_node_rank_main (const struct ib_node_options *o)
{
  ib_error_t err = NULL;
  struct ib_smoke_rank rk = { .dcp = o->dcp > 0 ? o->dcp : 2, .program = o->program, .run_id = o->run_id };
  cleanup_free char *root = ib_store_default_path (o->store);
  cleanup_free char *text = o->definition ? hex_decode (o->definition) : NULL;
  struct ib_build_options bo = { .json = true, .quiet = true, .smoke = IB_SMOKE_REQUIRED, .remote = o->remote };
  struct ib_build b = { .opt = &bo, .name = o->ref };
  b.report = ib_report_new ("imgverify", "imgverify.report/v1", true);
  int code = -1;
  int r = launched (&rk.rank, &rk.world, &rk.local_rank, &err);
  if (r == 0)
    ib_node_gpus (rk.local_rank, &rk.device);
  if (r == 0 && text == NULL)
    r = ib_error (&err, IB_EUSAGE, "--node-definition: not the hex text of a definition's gate sections");
  if (r == 0)
    r = ib_definition_from_gate_text (text, &b.def, &err);
  if (r == 0)
    r = ib_store_open (root, &b.store, &err);
  if (r == 0)
    r = ib_image_pull (b.store, o->ref, NULL, &o->remote, &b.image, &err);
  if (r == 0)
    r = ib_smoke_rank_run (&b, &rk, &code, &err);
  ib_fsview_free (b.image_view);
  ib_image_free (b.image);
  ib_store_free (b.store);
  ib_definition_free (b.def);
  ib_report_free (b.report);
  return r < 0 ? ib_error_report ("imgverify", &err) : 0;
}

/* The run's rank folders left in RUNS (a rank ended with its reaper
 * before either removed them): each removed; how many. */
static size_t
sweep_rank_dirs (const char *runs, const char *container_prefix)
{
  cleanup_free char *want = ib_xasprintf (IB_SMOKE_RANK_DIR_PREFIX "%s", container_prefix);
  DIR *d = opendir (runs);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir (d)) != NULL)
    if (strncmp (e->d_name, want, strlen (want)) == 0)
      {
        cleanup_free char *path = ib_path_join (runs, e->d_name);
        if (ib_remove_tree (path, NULL) == 0)
          n++;
      }
  if (d)
    closedir (d);
  return n;
}

int
ib_node_sweep_main (const struct ib_node_options *o)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (o->store);
  cleanup_free char *runs = NULL, *state = NULL, *prefix = NULL;
  struct ib_store *s = NULL;
  size_t n = 0, dirs = 0;
  int r = ib_store_open (root, &s, &err);
  if (r == 0)
    r = ib_store_cache_dir (s, "run", &runs, &err);
  if (r == 0)
    {
      state = ib_path_join (runs, "runc");
      prefix = ib_xasprintf (IB_SMOKE_CONTAINER_PREFIX "%s-", o->run_id ? o->run_id : "");
      r = ib_containers_sweep (state, prefix, &n, &err);
    }
  if (r == 0)
    dirs = sweep_rank_dirs (runs, prefix);
  if (r == 0)
    printf ("imgverify: node: swept %zu container%s and %zu folder%s of run %s\n", n, n == 1 ? "" : "s", dirs,
            dirs == 1 ? "" : "s", o->run_id);
  ib_store_free (s);
  return r < 0 ? ib_error_report ("imgverify", &err) : 0;
}
