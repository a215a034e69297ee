/* The smoke gate: the candidate image run as a container on the GPUs, with
 * the smoke program bound in (kernels/dcp2/dcp2_smoke.c), before the tag.
 * --smoke=auto runs it when the machine has GPUs and otherwise says plainly
 * that it skipped; --smoke=required refuses to tag without a pass. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builder/recipe/recipe.h"
#include "layers/view/extract.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/runner/bundle.h"
#include "builder/gates/gates.h"
#include "builder/smoke/gpuinfo.h"
#include "builder/smoke/kprobe_result.h"
#include "builder/smoke/nccl_log.h"
#include "builder/cluster/smoke_cluster.h"

/* Where the probe's cubins and manifest appear in the container. */
#define KPROBE_TARGET "/opt/imgbuild/kprobe"

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

/* The report's smoke object (made once, "fail" until record() says
 * otherwise: a gate that stops on an error before the run failed). */
static cJSON *
smoke_json (struct ib_build *b)
{
  cJSON *r = ib_report_json (b->report);
  cJSON *s = cJSON_GetObjectItemCaseSensitive (r, "smoke");
  if (s == NULL)
    {
      s = cJSON_AddObjectToObject (r, "smoke");
      cJSON_AddStringToObject (s, "status", "fail");
    }
  return s;
}

static void
record (struct ib_build *b, const char *status, const struct ib_run_result *res, double seconds)
{
  cJSON *s = smoke_json (b);
  cJSON_DeleteItemFromObjectCaseSensitive (s, "status");
  cJSON_AddStringToObject (s, "status", status);
  if (res == NULL)
    return;
  cJSON_AddNumberToObject (s, "exit_code", res->exit_code);
  cJSON_AddNumberToObject (s, "seconds", seconds);
  cJSON_AddNumberToObject (s, "gpus", res->n_gpus);
  cJSON_AddStringToObject (s, "runtime", res->runtime ? res->runtime : "");
  cJSON_AddStringToObject (s, "gpu_injection", res->gpu_source ? res->gpu_source : "");
  cleanup_free char *shown = ib_nccl_log_strip_info (res->output ? res->output : "");
  cJSON_AddStringToObject (s, "output", shown);
  /* All of it, NCCL's INFO lines too, for whoever reads the JSON. */
  cJSON_AddStringToObject (s, "log", res->output ? res->output : "");
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
          && !strstr (line, "PASS") && !strstr (line, "FAIL (") && !strstr (line, "kernel probe: ")
          && !strstr (line, "container: "))
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

/* ---- NCCL's configuration in the image ---------------------------------- */

static int
slurp_entry (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  (void) e;
  size_t len;
  return ib_reader_slurp (r, 1 << 16, (char **) data, &len, err);
}

/* Every NCCL_* variable of the image's Env and an /etc/nccl.conf change
 * what NCCL does on every node that runs the image: warnings, listed in the
 * report. */
static int
nccl_config (struct ib_build *b, ib_error_t *err)
{
  cJSON *list = cJSON_CreateArray ();
  const cJSON *e;
  cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (b->image->config_json,
                                                                                             "config"),
                                                           "Env"))
  {
    if (cJSON_IsString (e) && strncmp (e->valuestring, "NCCL_", 5) == 0)
      {
        ib_report_problem (b->report, "smoke", false, "the image sets %s: NCCL behaves so on every node", e->valuestring);
        cJSON_AddItemToArray (list, cJSON_CreateString (e->valuestring));
      }
  }
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    {
      cJSON_Delete (list);
      return -1;
    }
  const struct ib_fs_entry *conf = ib_fsview_lookup (view, "etc/nccl.conf");
  conf = conf ? ib_fsview_follow (view, conf) : NULL;
  if (conf)
    {
      cleanup_free char *text = NULL;
      const struct ib_fs_entry *one[] = { conf };
      if (ib_extract_entries (b->store, b->image, one, 1, slurp_entry, &text, err) < 0)
        {
          cJSON_Delete (list);
          return -1;
        }
      char *flat = ib_xstrdup (text ? text : "");
      for (char *p = flat; *p; p++)
        if (*p == '\n')
          *p = ' ';
      ib_report_problem (b->report, "smoke", false, "the image has /etc/nccl.conf (NCCL reads it on every node): %s",
                         flat);
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "file", "/etc/nccl.conf");
      cJSON_AddStringToObject (o, "content", text ? text : "");
      cJSON_AddItemToArray (list, o);
      free (flat);
    }
  cJSON_AddItemToObject (smoke_json (b), "nccl_config", list);
  return 0;
}

/* ---- the kernel probe's plan --------------------------------------------- */

/* A file of the image from the folder its layer is extracted into (the
 * container's root needs them all anyway): no second pass over the layer. */
static int
open_extracted (void *data, const struct ib_fs_entry *e, int *fd, ib_error_t *err)
{
  struct ib_build *b = data;
  cleanup_free char *dir = NULL;
  *fd = -1;
  if (e->layer < 0 || (size_t) e->layer >= b->image->n_layers
      || ib_image_layer_dir (b->store, b->image, (size_t) e->layer, &dir, err) < 0)
    return e->layer < 0 || (size_t) e->layer >= b->image->n_layers ? 0 : -1;
  cleanup_free char *path = ib_path_join (dir, e->path);
  *fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  return 0;
}

/* The GPUs the contract gives the container; *N 0 when the driver cannot
 * say (the probe then has nothing to plan). */
static int
plan_kernels (struct ib_build *b, const char *dir, struct ib_kplan *plan, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  struct ib_gpu *all = NULL;
  size_t n_all = 0, n = 0;
  if (ib_gpu_query (&all, &n_all, err) < 0)
    return -1;
  struct ib_gpu *gpus = ib_xcalloc (n_all ? n_all : 1, sizeof (*gpus));
  for (size_t i = 0; i < n_all; i++)
    if (ib_contract_has_gpu (&d->contract, all[i].index))
      {
        gpus[n] = all[i];
        gpus[n].index = (int) n; /* as the container numbers them */
        n++;
      }
  free (all);
  const struct ib_fsview *view;
  int r = ib_build_image_view (b, &view, err);
  if (r == 0)
    r = ib_kplan_make (b->store, b->image, view, d->kernel_required, d->n_kernel_required, gpus, n, d->launch,
                       d->n_launch, open_extracted, b, dir, plan, err);
  free (gpus);
  return r < 0 ? ib_error_wrap (err, "the kernel probe's plan") : 0;
}

/* ---- judging the run ----------------------------------------------------- */

/* The container's /dev/shm and memlock limit as the program saw them,
 * against the contract: the smoke test ran with exactly that contract. */
static int
contract_seen (struct ib_build *b, const struct ib_contract *k, const char *out, ib_error_t *err)
{
  const char *at = out ? strstr (out, "dcp2_smoke: container: /dev/shm ") : NULL;
  unsigned long long shm = 0;
  char ml[32] = "";
  if (at == NULL || sscanf (at, "dcp2_smoke: container: /dev/shm %llu bytes, memlock %31s", &shm, ml) != 2)
    return 0; /* it stopped before saying (its error says why) */
  cJSON *seen = cJSON_AddObjectToObject (smoke_json (b), "seen");
  cJSON_AddNumberToObject (seen, "shm_bytes", (double) shm);
  cJSON_AddStringToObject (seen, "memlock", ml);
  ib_report_note (b->report, "smoke: the container had a /dev/shm of %llu bytes, memlock %s", shm, ml);
  if (!k->ipc_host && (shm > k->shm_bytes || k->shm_bytes - shm > (1u << 20)))
    return ib_error (err, IB_ESMOKE, "the container's /dev/shm has %llu bytes, the launch contract says %llu", shm,
                     k->shm_bytes);
  char want[32];
  snprintf (want, sizeof (want), k->memlock == IB_CONTRACT_UNLIMITED ? "unlimited" : "%llu", k->memlock);
  if (k->memlock_set && strcmp (ml, want) != 0)
    return ib_error (err, IB_ESMOKE, "the container's memlock limit is %s, the launch contract says %s", ml, want);
  return 0;
}

/* What the run showed: the probe's and NCCL's findings into the report,
 * and the error when it failed. */
static int
judge (struct ib_build *b, const struct ib_contract *k, const struct ib_kplan *plan, const struct ib_run_result *res,
       ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  cJSON *s = smoke_json (b);
  struct ib_kprobe_summary ks;
  cJSON_AddItemToObject (s, "kernels", ib_kprobe_results (plan, res->output, &ks));
  ib_report_note (b->report, "smoke: kernels: %zu proven on %s (%zu launched), %zu failed, %zu not on this machine%s",
                  ks.passed, *ks.gpus ? ks.gpus : "no GPU", ks.launched, ks.failed, ks.absent,
                  ks.not_run ? ", some not run" : "");
  struct ib_nccl_log nl;
  ib_nccl_log_parse (res->output ? res->output : "", &nl);
  cJSON_AddItemToObject (s, "nccl", ib_nccl_log_json (&nl));
  cJSON_AddItemToObject (s, "bandwidth", ib_nccl_bandwidth_json (res->output));
  const char *expect = d->smoke_expect_transport ? d->smoke_expect_transport : "P2P";
  cJSON_AddStringToObject (s, "expect_transport", expect);
  for (size_t i = 0; i < nl.n_pairs; i++)
    ib_report_note (b->report, "smoke: NCCL %s -> %s via %s%s%s (%d channel%s)", nl.pairs[i].from, nl.pairs[i].to,
                    nl.pairs[i].transport, nl.pairs[i].others ? ", also " : "",
                    nl.pairs[i].others ? nl.pairs[i].others : "", nl.pairs[i].channels,
                    nl.pairs[i].channels == 1 ? "" : "s");
  if (*nl.version)
    ib_report_note (b->report, "smoke: NCCL %s loaded; %zu communicator%s", nl.version, nl.n_comms,
                    nl.n_comms == 1 ? "" : "s");
  for (size_t i = 0; i < nl.n_settings; i++)
    ib_report_note (b->report, "smoke: NCCL setting from its environment: %s", nl.settings[i]);
  int r = contract_seen (b, k, res->output, err);
  const struct ib_nccl_pair *odd = ib_nccl_log_unexpected (&nl, expect);
  const char *cause = ib_nccl_log_cause (&nl);
  if (r < 0)
    ;
  else if (ks.failed)
    r = ib_error (err, IB_ESMOKE, "the kernel probe failed in the container: %s", ks.first_failure);
  else if (res->exit_code != 0)
    {
      cleanup_free char *line = failure_line (res->output);
      r = cause ? ib_error (err, IB_ESMOKE, "smoke test failed in the container (exit %d): %s; NCCL said: %s",
                            res->exit_code, line, cause)
                : ib_error (err, IB_ESMOKE, "smoke test failed in the container (exit %d): %s", res->exit_code, line);
    }
  else if (ks.not_run)
    r = ib_error (err, IB_ESMOKE, "the kernel probe did not report %zu of its kernels", ks.not_run);
  else if (nl.n_pairs == 0)
    r = ib_error (err, IB_ESMOKE, "expect-transport %s: NCCL's log (NCCL_DEBUG=INFO) names no transport", expect);
  else if (odd)
    r = ib_error (err, IB_ESMOKE, "expect-transport %s: NCCL connected %s -> %s via %s (it fell back)", expect,
                  odd->from, odd->to, odd->transport);
  ib_nccl_log_clear (&nl);
  ib_kprobe_summary_clear (&ks);
  return r;
}

static char **
smoke_args (const struct ib_definition *d, const char *nccl, const char *dcp, const char *ranks, size_t *n)
{
  char **args = ib_xcalloc (18 + d->n_smoke_args, sizeof (char *));
  size_t k = 0;
  args[k++] = "--kernels", args[k++] = d->smoke_kernels, args[k++] = "--nccl", args[k++] = (char *) nccl;
  args[k++] = "--dcp", args[k++] = (char *) dcp, args[k++] = "--ranks", args[k++] = (char *) ranks;
  if (d->smoke_gpus_per_rank)
    args[k++] = "--probe", args[k++] = KPROBE_TARGET;
  for (size_t i = 0; i < d->n_smoke_args; i++)
    args[k++] = d->smoke_args[i];
  *n = k;
  return args;
}

/* --hosts: imgverify's REF is the registry's image; imgbuild's candidate
 * goes to the registry of the first --push by digest, untagged (no tag may
 * name it before it passed), and the nodes pull it from there. */
static int
smoke_on_hosts (struct ib_build *b, ib_error_t *err)
{
  if (b->keep_going)
    return ib_smoke_cluster (b, b->name, err);
  const char *push = NULL;
  for (size_t i = 0; i < b->opt->n_outputs && push == NULL; i++)
    if (strncmp (b->opt->outputs[i], "docker://", 9) == 0)
      push = b->opt->outputs[i];
  if (push == NULL)
    return ib_error (err, IB_EUSAGE, "--hosts: the nodes pull the image from a registry: add --push");
  /* docker://HOST[:PORT]/REPO[:TAG|@DIGEST] -> docker://HOST[:PORT]/REPO@DIGEST */
  const char *slash = strchr (push + 9, '/');
  size_t end = strlen (push);
  const char *at = strchr (push + 9, '@');
  const char *colon = slash ? strrchr (slash, ':') : NULL;
  if (at)
    end = (size_t) (at - push);
  else if (colon)
    end = (size_t) (colon - push);
  cleanup_free char *ref = ib_xasprintf ("%.*s@%s", (int) end, push, b->image->manifest.digest.s);
  struct ib_remote_options remote = b->opt->remote;
  ib_report_note (b->report, "smoke: the candidate goes to %s (untagged) for the nodes", ref);
  if (!b->opt->cluster->dry_run && ib_image_push (b->store, b->image, ref, b->name, &remote, err) < 0)
    return ib_error_wrap (err, "push the candidate for --hosts");
  return ib_smoke_cluster (b, ref, err);
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
  cJSON_AddItemToObject (smoke_json (b), "contract", ib_contract_json (&d->contract));
  if (b->opt->smoke == IB_SMOKE_OFF)
    {
      record (b, "off", NULL, 0);
      return ib_gate_skip (b, "%s", b->keep_going ? "not asked for (--smoke runs it)" : "--smoke=off");
    }
  cleanup_free char *nccl = NULL;
  if (find_nccl (b, &nccl, err) < 0 || nccl_config (b, err) < 0)
    return -1;
  if (b->opt->cluster)
    return smoke_on_hosts (b, err);
  int gpus = 0;
  for (int i = 0; i < ib_gpu_count (); i++)
    gpus += ib_contract_has_gpu (&d->contract, i);
  struct smoke_shape sh;
  if (smoke_shape (b, gpus, &sh, err) < 0)
    return -1;
  if (ib_gpu_count () == 0)
    return skip_or_refuse (b, "this machine has no GPU (no /dev/nvidia0)", err);
  if (gpus < sh.dcp)
    {
      cleanup_free char *why = ib_xasprintf ("the container gets %d GPU%s, a DCP group needs %d", gpus,
                                             gpus == 1 ? "" : "s", sh.dcp);
      return skip_or_refuse (b, why, err);
    }
  cleanup_free char *program = smoke_program (d);
  if (access (program, X_OK) < 0)
    return ib_error (err, IB_EENV, "the smoke program %s is missing (make builds it)", program);
  cleanup_free char *runs = NULL, *dir = NULL;
  if (ib_store_cache_dir (b->store, "run", &runs, err) < 0)
    return -1;
  dir = ib_path_join (runs, "kprobe-XXXXXX");
  if (mkdtemp (dir) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp `%s`", dir);
  double t0 = ib_now ();
  struct ib_kplan plan;
  int r = plan_kernels (b, dir, &plan, err);
  if (r < 0)
    {
      ib_remove_tree (dir, NULL);
      return -1;
    }
  ib_report_note (b->report, "smoke: kernel probe plan: %zu kernels, %zu cubins (%zu read out of the layers) in %.2fs",
                  plan.n, plan.cubins, plan.extracted, ib_now () - t0);
  char dcp[16], ranks[16];
  snprintf (dcp, sizeof (dcp), "%d", sh.dcp);
  snprintf (ranks, sizeof (ranks), "%d", sh.ranks);
  size_t n;
  char **args = smoke_args (d, nccl, dcp, ranks, &n);
  /* The contract, with /dev/shm as the recipe sizes it unless the
   * contract says. */
  struct ib_contract eff = d->contract;
  if (!(eff.set & 1u) && sh.shm)
    eff.shm_bytes = sh.shm;
  cJSON_ReplaceItemInObjectCaseSensitive (smoke_json (b), "contract", ib_contract_json (&eff));
  char *env[] = { "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1",
                  "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET,ENV" };
  struct ib_run_options o = { .program = program, .program_target = "/opt/imgbuild/dcp2_smoke", .args = args,
                              .n_args = n, .env = env, .n_env = 5, .gpus = true, .timeout_s = d->smoke_timeout,
                              .contract = &eff, .bind_dir = dir, .bind_target = KPROBE_TARGET,
                              .reaper = true, .reap_also = dir };
  struct ib_run_result res;
  ib_report_note (b->report, "smoke: %s ranks, dcp %s, in a container (%d GPUs given to it%s); %zu kernel probes", ranks,
                  dcp, gpus, sh.shm && !(d->contract.set & 1u) ? ", /dev/shm as the recipe sizes it" : "", plan.n);
  r = ib_run_image (b->store, b->image, &o, &res, err);
  free (args);
  ib_remove_tree (dir, NULL);
  if (r < 0)
    {
      ib_kplan_clear (&plan);
      return ib_error_wrap (err, "smoke test");
    }
  double secs = ib_now () - t0;
  const char *keep = getenv ("IMGBUILD_SMOKE_LOG");
  if (keep && *keep && res.output)
    ib_write_file_atomic (keep, res.output, strlen (res.output), 0644, NULL);
  if (!b->opt->quiet && !b->opt->json && res.output)
    {
      cleanup_free char *shown = ib_nccl_log_strip_info (res.output);
      fprintf (stderr, "%s", shown);
    }
  r = judge (b, &eff, &plan, &res, err);
  record (b, r == 0 ? "pass" : "fail", &res, secs);
  ib_report_note (b->report, "smoke: %s in %.1fs (%s, %s)", r == 0 ? "pass" : "FAIL", secs, res.runtime,
                  res.gpu_source);
  ib_kplan_clear (&plan);
  ib_run_result_clear (&res);
  return r;
}

/* ---- one rank of a launcher's job (smoke_cluster.c) ---------------------- */

/* The environment of a rank's container: NCCL's log as the single-machine
 * test asks for it, and every NCCL_* variable the launcher gave this
 * process (NCCL_COMM_ID, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...). */
static char **
rank_env (size_t *n)
{
  static const char *const fixed[] = { "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
                                       "NVSHMEM_DISABLE_NVLS=1", "NCCL_DEBUG=INFO",
                                       "NCCL_DEBUG_SUBSYS=INIT,NET,ENV", NULL };
  extern char **environ;
  size_t k = 0, cap = 8;
  for (char **e = environ; *e; e++)
    cap++;
  char **env = ib_xcalloc (cap + 1, sizeof (char *));
  for (int i = 0; fixed[i]; i++)
    {
      size_t len = strcspn (fixed[i], "=") + 1;
      bool overridden = false;
      for (char **e = environ; *e; e++)
        overridden |= strncmp (*e, fixed[i], len) == 0;
      if (!overridden)
        env[k++] = ib_xstrdup (fixed[i]);
    }
  for (char **e = environ; *e; e++)
    if (strncmp (*e, "NCCL_", 5) == 0)
      env[k++] = ib_xstrdup (*e);
  *n = k;
  return env;
}

static void
free_strings (char **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free (v[i]);
  free (v);
}

int
ib_smoke_rank_run (struct ib_build *b, const struct ib_smoke_rank *rk, int *exit_code, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  *exit_code = -1;
  cleanup_free char *nccl = NULL;
  if (find_nccl (b, &nccl, err) < 0)
    return -1;
  bool gpus = d->smoke_gpus_per_rank > 0;
  if (gpus && rk->device < 0)
    return ib_error (err, IB_ESMOKE, "this node has no GPU %d for rank %d (%d GPU%s here%s)", rk->local_rank, rk->rank,
                     ib_gpu_count (), ib_gpu_count () == 1 ? "" : "s",
                     getenv ("IMGBUILD_NODE_GPUS") ? ", IMGBUILD_NODE_GPUS" : "");
  cleanup_free char *program = rk->program ? ib_xstrdup (rk->program) : smoke_program (d);
  if (access (program, X_OK) < 0)
    return ib_error (err, IB_EENV, "the smoke program %s is missing on this node", program);
  /* The container gets the rank's GPU and none other. */
  struct ib_contract eff = d->contract;
  cleanup_free char *devices = ib_xasprintf ("%d", rk->device);
  if (gpus)
    eff.devices = devices;
  cleanup_free char *runs = NULL, *dir = NULL, *state = NULL;
  if (ib_store_cache_dir (b->store, "run", &runs, err) < 0)
    return -1;
  cleanup_free char *id = rk->run_id ? ib_xasprintf (IB_SMOKE_CONTAINER_PREFIX "%s-rank%d", rk->run_id, rk->rank)
                                     : ib_xasprintf (IB_SMOKE_CONTAINER_PREFIX "%d-rank%d", (int) getpid (), rk->rank);
  /* Named after the container, so that the sweep finds it when a
   * launcher's process tracking (Slurm's proctrack/cgroup) ended the
   * reaper with the rank (ib_node_sweep_main). */
  dir = ib_xasprintf ("%s/" IB_SMOKE_RANK_DIR_PREFIX "%s-XXXXXX", runs, id);
  state = ib_path_join (runs, "runc");
  if (mkdtemp (dir) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp `%s`", dir);
  struct ib_kplan plan = { 0 };
  struct ib_definition *dd = b->def;
  struct ib_contract keep = dd->contract;
  dd->contract = eff; /* plan_kernels picks the contract's GPUs */
  int r = gpus ? plan_kernels (b, dir, &plan, err) : 0;
  dd->contract = keep;
  if (r < 0)
    {
      ib_remove_tree (dir, NULL);
      return -1;
    }
  char dcp[16], world[16], rank[16];
  snprintf (dcp, sizeof (dcp), "%d", rk->dcp);
  snprintf (world, sizeof (world), "%d", rk->world);
  snprintf (rank, sizeof (rank), "%d", rk->rank);
  size_t n;
  char **args = smoke_args (d, nccl, dcp, world, &n);
  args[n++] = "--rank", args[n++] = rank, args[n++] = "--world", args[n++] = world;
  args[n++] = "--device", args[n++] = "0";
  size_t n_env;
  char **env = rank_env (&n_env);
  struct ib_run_options o = { .program = program, .program_target = "/opt/imgbuild/dcp2_smoke", .args = args,
                              .n_args = n, .env = env, .n_env = n_env, .gpus = gpus, .timeout_s = d->smoke_timeout,
                              .contract = &eff, .bind_dir = gpus ? dir : NULL, .bind_target = gpus ? KPROBE_TARGET : NULL,
                              .state_root = state, .container_id = id, .reaper = true, .reap_also = dir };
  struct ib_run_result res;
  fprintf (stderr, "imgverify: rank %d of %d: container %s (%s)\n", rk->rank, rk->world, id,
           gpus ? "its node's GPU" : "no GPU: gpus-per-rank 0");
  r = ib_run_image (b->store, b->image, &o, &res, err);
  free (args);
  free_strings (env, n_env);
  ib_remove_tree (dir, NULL);
  ib_kplan_clear (&plan);
  if (r < 0)
    return ib_error_wrap (err, "rank %d's container", rk->rank);
  fputs (res.output ? res.output : "", stdout);
  fflush (stdout);
  *exit_code = res.exit_code;
  if (res.exit_code != 0)
    {
      cleanup_free char *line = failure_line (res.output);
      r = ib_error (err, IB_ESMOKE, "rank %d: the smoke program %s (exit %d): %s", rk->rank,
                    res.exit_code == 137 ? "was killed (SIGKILL)"
                    : res.exit_code == 124 ? "timed out"
                                            : "failed",
                    res.exit_code, line);
    }
  ib_run_result_clear (&res);
  return r;
}
