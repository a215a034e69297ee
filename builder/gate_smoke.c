/* The smoke gate: the candidate image run as a container on the GPUs, with
 * the smoke program bound in (kernels/dcp2/dcp2_smoke.c), before the tag.
 * --smoke=auto runs it when the machine has GPUs and otherwise says plainly
 * that it skipped; --smoke=required refuses to tag without a pass. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../recipe/recipe.h"
#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "bundle.h"
#include "gates.h"

#ifndef IB_LIBEXEC_DIR
#define IB_LIBEXEC_DIR "/usr/local/libexec/imgbuild"
#endif

/* dcp2_smoke beside the running imgbuild, else where it is installed. */
static char *
smoke_program (const struct ib_definition *d)
{
  if (d->smoke_program)
    return ib_xstrdup (d->smoke_program);
  char self[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof (self) - 1);
  if (n > 0)
    {
      self[n] = '\0';
      *strrchr (self, '/') = '\0';
      /* Beside the program (the build tree), else ../libexec/imgbuild. */
      char *p = ib_path_join (self, "dcp2_smoke");
      if (access (p, X_OK) == 0)
        return p;
      free (p);
      p = ib_path_join (self, "../libexec/imgbuild/dcp2_smoke");
      if (access (p, X_OK) == 0)
        return p;
      free (p);
    }
  return ib_path_join (IB_LIBEXEC_DIR, "dcp2_smoke");
}

static int
find_nccl (struct ib_build *b, char **out, ib_error_t *err)
{
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  const char *want = b->def->smoke_nccl;
  if (want)
    {
      const struct ib_fs_entry *e = ib_fsview_lookup (view, want + 1);
      if (e == NULL || ib_fsview_follow (view, e) == NULL)
        return ib_error (err, IB_ESMOKE, "the image has no NCCL: %s is not in it", want);
      *out = ib_xstrdup (want);
      return 0;
    }
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n = ib_fsview_glob (view, "*/libnccl.so*", &files);
  if (n == 0)
    return ib_error (err, IB_ESMOKE, "the image has no NCCL: no libnccl.so* in its file system");
  *out = ib_xasprintf ("/%s", files[0]->path);
  return 0;
}

static void
record (struct ib_build *b, const char *status, const struct ib_run_result *res, double seconds)
{
  cJSON *s = cJSON_AddObjectToObject (ib_report_json (b->report), "smoke");
  cJSON_AddStringToObject (s, "status", status);
  if (res == NULL)
    return;
  cJSON_AddNumberToObject (s, "exit_code", res->exit_code);
  cJSON_AddNumberToObject (s, "seconds", seconds);
  cJSON_AddNumberToObject (s, "gpus", res->n_gpus);
  cJSON_AddStringToObject (s, "runtime", res->runtime ? res->runtime : "");
  cJSON_AddStringToObject (s, "gpu_injection", res->gpu_source ? res->gpu_source : "");
  cJSON_AddStringToObject (s, "output", res->output ? res->output : "");
}

/* The line that says why: a message of the program itself (it names the
 * missing NCCL or kernels), else the first failing case, else the last line. */
static char *
failure_line (const char *out)
{
  const char *cause = NULL, *failed = NULL, *last = NULL;
  for (const char *l = out; l && *l;)
    {
      const char *e = strchr (l, '\n');
      size_t n = e ? (size_t) (e - l) : strlen (l);
      cleanup_free char *line = strndup (l, n);
      if (n)
        last = l;
      if (!cause && strncmp (line, "dcp2_smoke: ", 12) == 0 && !strstr (line, " ranks, dcp ")
          && !strstr (line, "PASS") && !strstr (line, "FAIL ("))
        cause = l;
      if (!failed && strstr (line, ": FAIL"))
        failed = l;
      l = e ? e + 1 : NULL;
    }
  const char *l = cause ? cause : failed ? failed : last;
  return l ? strndup (l, strcspn (l, "\n")) : ib_xstrdup ("(no output)");
}

/* What the smoke test runs: the [smoke] section's DCP size and ranks, or,
 * when the definition names a recipe, the recipe's shape (its DCP size,
 * TP x PP ranks, shm size), so that the test proves the configuration that
 * will be served; with fewer GPUs than ranks, the largest multiple of the
 * DCP size that fits, said in the report. */
struct smoke_shape
{
  int dcp, ranks;
  unsigned long long shm;
};

static int
smoke_shape (struct ib_build *b, int gpus, struct smoke_shape *sh, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  sh->dcp = d->smoke_dcp;
  sh->ranks = d->smoke_ranks ? d->smoke_ranks : gpus - gpus % d->smoke_dcp;
  sh->shm = 0;
  if (d->n_recipes == 0)
    return 0;
  struct ib_recipe *r = NULL;
  if (ib_recipe_load (d->recipes[0], &r, err) < 0)
    return ib_error_wrap (err, "%s", d->recipe_origins[0]);
  long tp = r->tensor_parallel_size ? r->tensor_parallel_size : 1;
  long want = tp * (r->pipeline_parallel_size ? r->pipeline_parallel_size : 1);
  sh->dcp = (int) r->dcp;
  sh->shm = r->shm_bytes;
  sh->ranks = want <= gpus ? (int) want : gpus - gpus % sh->dcp;
  cleanup_free char *here = gpus == 0 ? ib_xstrdup ("this machine has no GPU")
                            : want <= gpus
                                ? ib_xasprintf ("%d ranks run here", sh->ranks)
                                : ib_xasprintf ("this machine has %d GPU%s: %d ranks run here, fewer than the %ld served "
                                                "(the largest shape that fits)",
                                                gpus, gpus == 1 ? "" : "s", sh->ranks, want);
  cJSON *j = cJSON_AddObjectToObject (ib_report_json (b->report), "smoke_shape");
  cJSON_AddStringToObject (j, "recipe", r->path);
  cJSON_AddNumberToObject (j, "ranks_served", (double) want);
  cJSON_AddNumberToObject (j, "ranks", sh->ranks);
  cJSON_AddNumberToObject (j, "dcp", sh->dcp);
  cJSON_AddNumberToObject (j, "shm_bytes", (double) sh->shm);
  ib_report_note (b->report,
                  "smoke: shape of %s: TP %ld x PP %ld = %ld ranks over %ld nodes, DCP %ld, shm %s; %s", r->path, tp,
                  r->pipeline_parallel_size ? r->pipeline_parallel_size : 1, want,
                  r->required_nodes ? r->required_nodes : 1, r->dcp, r->shm_size ? r->shm_size : "(default 8g)",
                  here);
  ib_recipe_free (r);
  return 0;
}

static int
skip_or_refuse (struct ib_build *b, const char *why, ib_error_t *err)
{
  if (b->opt->smoke == IB_SMOKE_REQUIRED)
    {
      record (b, "fail", NULL, 0);
      return ib_error (err, IB_ESMOKE, "--smoke=required, but %s: the smoke test cannot run, nothing is tagged", why);
    }
  record (b, "skip", NULL, 0);
  return ib_gate_skip (b, "%s (--smoke=auto; --smoke=required would refuse to tag)", why);
}

int
ib_gate_smoke (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (!d->has_smoke)
    return b->opt->smoke == IB_SMOKE_REQUIRED
               ? ib_error (err, IB_ESMOKE, "--smoke=required, but %s has no [smoke] section",
                           ib_gate_definition_name (b))
               : ib_gate_skip (b, "no [smoke] in %s", ib_gate_definition_name (b));
  if (b->opt->smoke == IB_SMOKE_OFF)
    {
      record (b, "off", NULL, 0);
      return ib_gate_skip (b, "%s", b->keep_going ? "not asked for (--smoke runs it)" : "--smoke=off");
    }
  cleanup_free char *nccl = NULL;
  if (find_nccl (b, &nccl, err) < 0)
    return -1;
  int gpus = ib_gpu_count ();
  struct smoke_shape sh;
  if (smoke_shape (b, gpus, &sh, err) < 0)
    return -1;
  if (gpus == 0)
    return skip_or_refuse (b, "this machine has no GPU (no /dev/nvidia0)", err);
  if (gpus < sh.dcp)
    {
      cleanup_free char *why = ib_xasprintf ("this machine has %d GPU%s, a DCP group needs %d", gpus,
                                             gpus == 1 ? "" : "s", sh.dcp);
      return skip_or_refuse (b, why, err);
    }
  cleanup_free char *program = smoke_program (d);
  if (access (program, X_OK) < 0)
    return ib_error (err, IB_EENV, "the smoke program %s is missing (make builds it)", program);
  char dcp[16], ranks[16];
  snprintf (dcp, sizeof (dcp), "%d", sh.dcp);
  snprintf (ranks, sizeof (ranks), "%d", sh.ranks);
  char **args = ib_xcalloc (8 + d->n_smoke_args, sizeof (char *));
  size_t n = 0;
  args[n++] = "--kernels", args[n++] = d->smoke_kernels, args[n++] = "--nccl", args[n++] = nccl;
  args[n++] = "--dcp", args[n++] = dcp, args[n++] = "--ranks", args[n++] = ranks;
  for (size_t i = 0; i < d->n_smoke_args; i++)
    args[n++] = d->smoke_args[i];
  char *env[] = { "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1",
                  "NCCL_DEBUG=WARN" };
  struct ib_run_options o = { .program = program, .program_target = "/opt/imgbuild/dcp2_smoke", .args = args,
                              .n_args = n, .env = env, .n_env = 4, .gpus = true, .timeout_s = d->smoke_timeout,
                              .shm_bytes = sh.shm };
  struct ib_run_result res;
  double t0 = ib_now ();
  ib_report_note (b->report, "smoke: %s ranks, dcp %s, in a container (%d GPUs on this machine%s)", ranks, dcp, gpus,
                  sh.shm ? ", /dev/shm as the recipe sizes it" : "");
  int r = ib_run_image (b->store, b->image, &o, &res, err);
  free (args);
  if (r < 0)
    return ib_error_wrap (err, "smoke test");
  double secs = ib_now () - t0;
  if (!b->opt->quiet && !b->opt->json && res.output)
    fprintf (stderr, "%s", res.output);
  record (b, res.exit_code == 0 ? "pass" : "fail", &res, secs);
  ib_report_note (b->report, "smoke: %s in %.1fs (%s, %s)", res.exit_code == 0 ? "pass" : "FAIL", secs, res.runtime,
                  res.gpu_source);
  if (res.exit_code != 0)
    {
      cleanup_free char *line = failure_line (res.output);
      r = ib_error (err, IB_ESMOKE, "smoke test failed in the container (exit %d): %s",
                    res.exit_code == 124 ? 124 : res.exit_code, line);
    }
  ib_run_result_clear (&res);
  return r;
}
