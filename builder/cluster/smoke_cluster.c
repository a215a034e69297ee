/* The smoke test across nodes: the coordinator (the smoke gate with
 * --hosts).  The steps the launcher starts on the nodes are
 * builder/verify/node.c.  See smoke_cluster.h. */
#include "builder/cluster/smoke_cluster.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/runner/bundle.h"
#include "builder/core/gate.h"
#include "builder/smoke/launch.h"
#include "builder/smoke/nccl_log.h"

#define DEFAULT_COMM_PORT 29517
#define PULL_TIMEOUT_S 1800
#define GRACE_S 15

/* ---- small helpers ------------------------------------------------------- */

static char *
hex_encode (const char *s)
{
  size_t n = strlen (s);
  char *h = ib_xmalloc (2 * n + 1);
  for (size_t i = 0; i < n; i++)
    snprintf (h + 2 * i, 3, "%02x", (unsigned char) s[i]);
  h[2 * n] = '\0';
  return h;
}

struct strv
{
  char **v;
  size_t n;
};

static void
push (struct strv *a, char *s)
{
  a->v = ib_xrealloc (a->v, (a->n + 2) * sizeof (char *));
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
}

static void
strv_clear (struct strv *a)
{
  for (size_t i = 0; i < a->n; i++)
    free (a->v[i]);
  free (a->v);
  memset (a, 0, sizeof (*a));
}

/* imgverify on the nodes: as asked, else the one beside this program (the
 * same path on every node, as a launcher expects of any program). */
static char *
node_imgverify (const struct ib_cluster_options *c)
{
  const char *env = getenv ("IMGBUILD_NODE_IMGVERIFY");
  if (c->node_imgverify)
    return ib_xstrdup (c->node_imgverify);
  if (env && *env)
    return ib_xstrdup (env);
  char self[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof (self) - 1);
  if (n <= 0)
    return ib_xstrdup ("imgverify");
  self[n] = '\0';
  *strrchr (self, '/') = '\0';
  return ib_path_join (self, "imgverify");
}

static void
remote_args (struct strv *a, const struct ib_remote_options *r)
{
  if (r->tls_verify_off)
    push (a, ib_xstrdup ("--tls-verify=false"));
  if (r->auth_file)
    {
      push (a, ib_xstrdup ("--authfile"));
      push (a, ib_xstrdup (r->auth_file));
    }
  if (r->transfer_jobs)
    push (a, ib_xasprintf ("--transfer-jobs=%u", r->transfer_jobs));
}

/* The text after "error: " of the first such line of TEXT, or NULL. */
static char *
first_error (const char *text)
{
  const char *at = text ? strstr (text, "error: ") : NULL;
  return at ? strndup (at + 7, strcspn (at + 7, "\n")) : NULL;
}

/* ---- one step of the launcher -------------------------------------------- */

struct step
{
  const char *what; /* "pull", "smoke" */
  struct ib_launch_step ls;
  int timeout_s;
  int n_procs;
  /* after the run */
  int code;
  bool timed_out;
  char *output, *launcher_text;
  char **per_proc;
};

static void
step_clear (struct step *s)
{
  free (s->output);
  free (s->launcher_text);
  ib_launch_split_free (s->per_proc, s->n_procs);
}

static int
step_run (struct ib_build *b, struct step *s, cJSON *commands, ib_error_t *err)
{
  char **argv = ib_launch_argv (&s->ls, NULL);
  cleanup_free char *line = ib_launch_shell_line (argv);
  cJSON_AddStringToObject (commands, s->what, line);
  /* The definition's hex is for the nodes, not for people. */
  cleanup_free char *shown = ib_xstrdup (line);
  char *hex = strstr (shown, "--node-definition ");
  if (hex)
    {
      hex += 18;
      size_t n = strspn (hex, "0123456789abcdef");
      char *tail = ib_xasprintf ("HEX(%zu bytes)%s", n / 2, hex + n);
      strcpy (hex, tail);
      free (tail);
    }
  ib_report_note (b->report, "smoke: %s: %s", s->what, shown);
  if (b->opt->cluster->dry_run)
    {
      printf ("%s\n", line);
      ib_launch_argv_free (argv);
      return 0;
    }
  int r = ib_launch_run (argv, s->timeout_s, GRACE_S, -1, &s->output, &s->code, &s->timed_out, err);
  ib_launch_argv_free (argv);
  if (r < 0)
    return -1;
  ib_launch_split (s->ls.launcher, s->output, s->n_procs, &s->per_proc, &s->launcher_text);
  if (s->code == 127 && strstr (s->output, "cannot run "))
    return ib_error (err, IB_EENV, "the launcher %s is not installed here (%s)",
                     ib_launcher_name (s->ls.launcher),
                     s->ls.launcher == IB_LAUNCH_MPIRUN ? "Debian: openmpi-bin" : "Slurm's srun");
  return 0;
}

/* Which process of a failed step to name: the launcher's first failed
 * one, else the first that printed an error, else -1. */
static int
step_culprit (const struct step *s)
{
  int r = ib_launch_first_failed (s->ls.launcher, s->launcher_text);
  if (r >= 0 && r < s->n_procs)
    return r;
  for (int i = 0; i < s->n_procs; i++)
    if (strstr (s->per_proc[i], "error: "))
      return i;
  return -1;
}

/* The error of a failed step, naming the node (and the rank). */
static int
step_error (const struct step *s, const struct ib_hosts *h, bool per_node, ib_error_t *err)
{
  int who = step_culprit (s);
  const char *host = who < 0 ? NULL : per_node ? h->name[who] : ib_hosts_of_rank (h, who);
  cleanup_free char *why = who >= 0 ? first_error (s->per_proc[who]) : NULL;
  cleanup_free char *said = ib_launch_said (s->launcher_text);
  cleanup_free char *rank = per_node || who < 0 ? ib_xstrdup ("") : ib_xasprintf (" (rank %d)", who);
  int class = s->timed_out ? IB_ESMOKE : per_node && s->code >= 2 && s->code <= 9 ? s->code : IB_ESMOKE;
  if (s->timed_out)
    return ib_error (err, class, "%s: not over after %d s: %s stopped it%s%s%s%s", s->what, s->timeout_s,
                     ib_launcher_name (s->ls.launcher), host ? "; node " : "", host ? host : "", why ? ": " : "",
                     why ? why : "");
  /* The node's own message starts "rank R: " when it is a rank's. */
  const char *because = why;
  int skip = 0;
  if (because && sscanf (because, "rank %*d: %n", &skip) == 0 && skip > 0)
    because += skip;
  if (host)
    return ib_error (err, class, "%snode %s%s: %s", per_node ? "pull: " : "", host, rank,
                     because ? because : s->code == 137 ? "killed" : "it failed without a message");
  return ib_error (err, class, "%s: %s exited with %d%s%s", s->what, ib_launcher_name (s->ls.launcher), s->code,
                   said ? ": " : "", said ? said : "");
}

/* ---- the coordinator ----------------------------------------------------- */

/* NCCL's transport per peer pair, with the hosts of both ends, each pair
 * judged by the transport expected between them. */
static int
judge_links (struct ib_build *b, const struct ib_hosts *h, cJSON *sj, const char *all_output, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  const char *local = d->smoke_expect_transport ? d->smoke_expect_transport : "P2P";
  const char *between = d->smoke_expect_transport_nodes ? d->smoke_expect_transport_nodes : "NET/IB";
  cJSON_AddStringToObject (sj, "expect_transport", local);
  cJSON_AddStringToObject (sj, "expect_transport_nodes", between);
  struct ib_nccl_log nl;
  ib_nccl_log_parse (all_output, &nl);
  cJSON_AddItemToObject (sj, "nccl", ib_nccl_log_json (&nl));
  cJSON *links = cJSON_AddArrayToObject (sj, "links");
  int r = 0;
  for (size_t i = 0; i < nl.n_pairs; i++)
    {
      const struct ib_nccl_pair *p = &nl.pairs[i];
      const char *fh = ib_hosts_of_rank (h, atoi (p->from)), *th = ib_hosts_of_rank (h, atoi (p->to));
      bool same = strcmp (fh, th) == 0;
      const char *want = same ? local : between;
      bool ok = ib_nccl_transport_is (p->transport, want);
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "from", p->from);
      cJSON_AddStringToObject (o, "to", p->to);
      cJSON_AddStringToObject (o, "from_host", fh);
      cJSON_AddStringToObject (o, "to_host", th);
      cJSON_AddStringToObject (o, "transport", p->transport);
      cJSON_AddNumberToObject (o, "channels", p->channels);
      cJSON_AddStringToObject (o, "expected", want);
      cJSON_AddBoolToObject (o, "ok", ok);
      cJSON_AddItemToArray (links, o);
      ib_report_note (b->report, "smoke: link %s (%s) -> %s (%s) via %s, %d channel%s%s", p->from, fh, p->to, th,
                      p->transport, p->channels, p->channels == 1 ? "" : "s", ok ? "" : "  <- not as expected");
      if (!ok && r == 0)
        r = ib_error (err, IB_ESMOKE, "%s %s: NCCL connected %s (%s) -> %s (%s) via %s (it fell back)",
                      same ? "expect-transport" : "expect-transport-nodes", want, p->from, fh, p->to, th, p->transport);
    }
  if (r == 0 && nl.n_pairs == 0)
    r = ib_error (err, IB_ESMOKE, "expect-transport-nodes %s: NCCL's log (NCCL_DEBUG=INFO) names no transport",
                  between);
  ib_nccl_log_clear (&nl);
  return r;
}

/* NCCL_COMM_ID (the first host, a port), then the coordinator's own NCCL_*
 * settings (NCCL_SOCKET_IFNAME=..., NCCL_IB_HCA=...) for every rank. */
static void
rank_env (struct strv *env, const struct ib_hosts *h, int port)
{
  extern char **environ;
  const char *given = getenv ("NCCL_COMM_ID");
  if (!(given && *given))
    push (env, ib_xasprintf ("NCCL_COMM_ID=%s:%d", h->name[0], port));
  for (char **e = environ; *e; e++)
    if (strncmp (*e, "NCCL_", 5) == 0)
      push (env, ib_xstrdup (*e));
}

static void
show_ranks (struct ib_build *b, const struct step *s, const struct ib_hosts *h)
{
  if (b->opt->quiet || b->opt->json)
    return;
  for (int r = 0; r < s->n_procs; r++)
    {
      cleanup_free char *shown = ib_nccl_log_strip_info (s->per_proc[r]);
      for (const char *l = shown; *l;)
        {
          size_t len = strcspn (l, "\n");
          fprintf (stderr, "[rank %d %s] %.*s\n", r, ib_hosts_of_rank (h, r), (int) len, l);
          l += len + (l[len] == '\n');
        }
    }
}

struct plan
{
  struct ib_hosts hosts;
  enum ib_launcher launcher;
  struct strv pull_argv, rank_argv, sweep_argv, env;
  struct step pull, ranks, sweep;
  char run_id[32];
};

static void
plan_clear (struct plan *p)
{
  ib_hosts_clear (&p->hosts);
  strv_clear (&p->pull_argv);
  strv_clear (&p->rank_argv);
  strv_clear (&p->sweep_argv);
  strv_clear (&p->env);
  step_clear (&p->pull);
  step_clear (&p->ranks);
  step_clear (&p->sweep);
}

static int
plan_make (struct ib_build *b, const char *ref, struct plan *p, ib_error_t *err)
{
  const struct ib_cluster_options *c = b->opt->cluster;
  const struct ib_definition *d = b->def;
  if (ib_hosts_parse (c->hosts, &p->hosts, err) < 0 || ib_launcher_choose (c->launcher, &p->launcher, err) < 0)
    return -1;
  const struct ib_hosts *h = &p->hosts;
  if (ref == NULL || strncmp (ref, "docker://", 9) != 0 || strstr (ref, "@sha256:") == NULL)
    return ib_error (err, IB_EUSAGE,
                     "--hosts: each node pulls the image by digest: `%s` is not docker://REGISTRY/REPO@sha256:...",
                     ref ? ref : "");
  if (h->ranks % d->smoke_dcp)
    return ib_error (err, IB_ESMOKE, "--hosts: %d GPUs do not form DCP groups of %d", h->ranks, d->smoke_dcp);
  for (size_t i = 1; p->launcher == IB_LAUNCH_SRUN && i < h->n; i++)
    if (h->slots[i] != h->slots[0])
      return ib_error (err, IB_EUSAGE, "--hosts: srun starts as many ranks on every node: %s has %d GPUs, %s %d",
                       h->name[0], h->slots[0], h->name[i], h->slots[i]);
  cleanup_free char *iv = node_imgverify (c);
  /* Names this run's containers on every node (the sweep removes only
   * them): the time and this process, in hex. */
  snprintf (p->run_id, sizeof (p->run_id), "%08lx%04x", (unsigned long) time (NULL), (unsigned) getpid () & 0xffff);
  cleanup_free char *slots = ib_xstrdup ("");
  for (size_t i = 0; i < h->n; i++)
    {
      char *next = ib_xasprintf ("%s%s%d", slots, i ? "," : "", h->slots[i] * d->smoke_gpus_per_rank);
      free (slots);
      slots = next;
    }
  push (&p->pull_argv, ib_xstrdup (iv));
  push (&p->pull_argv, ib_xstrdup ("--node-pull"));
  push (&p->pull_argv, ib_xstrdup (ref));
  push (&p->pull_argv, ib_xstrdup ("--node-slots"));
  push (&p->pull_argv, ib_xstrdup (slots));
  remote_args (&p->pull_argv, &b->opt->remote);
  push (&p->rank_argv, ib_xstrdup (iv));
  push (&p->rank_argv, ib_xstrdup ("--node-rank"));
  push (&p->rank_argv, ib_xstrdup (ref));
  push (&p->rank_argv, ib_xstrdup ("--dcp"));
  push (&p->rank_argv, ib_xasprintf ("%d", d->smoke_dcp));
  push (&p->rank_argv, ib_xstrdup ("--node-definition"));
  push (&p->rank_argv, hex_encode (d->gate_text ? d->gate_text : ""));
  const char *program = c->program ? c->program : d->smoke_program;
  if (program)
    {
      push (&p->rank_argv, ib_xstrdup ("--node-program"));
      push (&p->rank_argv, ib_xstrdup (program));
    }
  push (&p->rank_argv, ib_xstrdup ("--node-run-id"));
  push (&p->rank_argv, ib_xstrdup (p->run_id));
  remote_args (&p->rank_argv, &b->opt->remote);
  push (&p->sweep_argv, ib_xstrdup (iv));
  push (&p->sweep_argv, ib_xstrdup ("--node-sweep"));
  push (&p->sweep_argv, ib_xstrdup (p->run_id));
  rank_env (&p->env, h, c->comm_port > 0 ? c->comm_port : DEFAULT_COMM_PORT);
  bool root = geteuid () == 0;
  p->pull = (struct step){ .what = "pull",
                           .ls = { .launcher = p->launcher, .hosts = h, .per_node = true, .argv = p->pull_argv.v,
                                   .n_argv = p->pull_argv.n, .as_root = root },
                           .timeout_s = PULL_TIMEOUT_S,
                           .n_procs = (int) h->n };
  p->ranks = (struct step){ .what = "ranks",
                            .ls = { .launcher = p->launcher, .hosts = h, .env = p->env.v, .n_env = p->env.n,
                                    .argv = p->rank_argv.v, .n_argv = p->rank_argv.n, .as_root = root },
                            .timeout_s = d->smoke_timeout + 60,
                            .n_procs = h->ranks };
  p->sweep = (struct step){ .what = "sweep",
                            .ls = { .launcher = p->launcher, .hosts = h, .per_node = true, .argv = p->sweep_argv.v,
                                    .n_argv = p->sweep_argv.n, .as_root = root },
                            .timeout_s = 120,
                            .n_procs = (int) h->n };
  return 0;
}

static void
record_nodes (cJSON *sj, const struct plan *p)
{
  cJSON *nodes = cJSON_AddArrayToObject (sj, "nodes");
  for (size_t i = 0; i < p->hosts.n; i++)
    {
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "host", p->hosts.name[i]);
      cJSON_AddNumberToObject (o, "gpus", p->hosts.slots[i]);
      if (p->pull.per_proc)
        {
          cleanup_free char *e = first_error (p->pull.per_proc[i]);
          cJSON_AddStringToObject (o, "pull", e ? "fail" : "pass");
          if (e)
            cJSON_AddStringToObject (o, "error", e);
          cJSON_AddStringToObject (o, "pull_output", p->pull.per_proc[i]);
        }
      cJSON_AddItemToArray (nodes, o);
    }
}

static void
record_ranks (cJSON *sj, const struct plan *p)
{
  if (p->ranks.per_proc == NULL)
    return;
  cJSON *ranks = cJSON_AddArrayToObject (sj, "ranks");
  for (int r = 0; r < p->ranks.n_procs; r++)
    {
      cJSON *o = cJSON_CreateObject ();
      cleanup_free char *e = first_error (p->ranks.per_proc[r]);
      cJSON_AddNumberToObject (o, "rank", r);
      cJSON_AddStringToObject (o, "host", ib_hosts_of_rank (&p->hosts, r));
      if (e)
        cJSON_AddStringToObject (o, "error", e);
      cleanup_free char *shown = ib_nccl_log_strip_info (p->ranks.per_proc[r]);
      cJSON_AddStringToObject (o, "output", shown);
      cJSON_AddItemToArray (ranks, o);
    }
  cJSON_AddStringToObject (sj, "launcher_output", p->ranks.launcher_text ? p->ranks.launcher_text : "");
}

/* After a failed run: what is left of its containers on every node that
 * answers is removed; a node that does not is said so. */
static void
sweep (struct ib_build *b, struct plan *p, cJSON *commands, cJSON *sj)
{
  ib_error_t e = NULL;
  cJSON *list = cJSON_AddArrayToObject (sj, "sweep");
  if (step_run (b, &p->sweep, commands, &e) < 0)
    {
      ib_report_problem (b->report, "smoke", false, "the sweep of the nodes did not run: %s", e->msg);
      ib_error_release (&e);
      return;
    }
  for (size_t i = 0; i < p->hosts.n; i++)
    {
      const char *out = p->sweep.per_proc[i];
      cleanup_free char *why = first_error (out);
      unsigned long n = 0;
      const char *at = strstr (out, "swept ");
      if (at)
        n = strtoul (at + 6, NULL, 10);
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "host", p->hosts.name[i]);
      cJSON_AddNumberToObject (o, "removed", (double) n);
      cJSON_AddBoolToObject (o, "answered", at != NULL);
      cJSON_AddItemToArray (list, o);
      if (at == NULL)
        ib_report_problem (b->report, "smoke", false, "node %s did not answer the sweep: %s", p->hosts.name[i],
                           why ? why : "no word from it");
      else if (n)
        ib_report_note (b->report, "smoke: node %s: %lu container%s of the run removed by the sweep",
                        p->hosts.name[i], n, n == 1 ? "" : "s");
    }
}

static void
set_status (cJSON *sj, const char *status)
{
  cJSON_DeleteItemFromObjectCaseSensitive (sj, "status");
  cJSON_AddStringToObject (sj, "status", status);
}

int
ib_smoke_cluster (struct ib_build *b, const char *ref, ib_error_t *err)
{
  cJSON *sj = cJSON_GetObjectItemCaseSensitive (ib_report_json (b->report), "smoke");
  struct plan p = { 0 };
  double t0 = ib_now ();
  int r = plan_make (b, ref, &p, err);
  cJSON *commands = cJSON_AddObjectToObject (sj, "commands");
  if (r == 0)
    {
      cJSON_AddStringToObject (sj, "launcher", ib_launcher_name (p.launcher));
      cJSON_AddNumberToObject (sj, "world", p.hosts.ranks);
      cJSON_AddNumberToObject (sj, "dcp", b->def->smoke_dcp);
      const char *id = getenv ("NCCL_COMM_ID");
      for (size_t i = 0; i < p.env.n; i++)
        if (strncmp (p.env.v[i], "NCCL_COMM_ID=", 13) == 0)
          id = p.env.v[i] + 13;
      cJSON_AddStringToObject (sj, "nccl_comm_id", id ? id : "");
      ib_report_note (b->report, "smoke: %d ranks on %zu nodes through %s, DCP %d, NCCL_COMM_ID %s", p.hosts.ranks,
                      p.hosts.n, ib_launcher_name (p.launcher), b->def->smoke_dcp, id ? id : "");
      r = step_run (b, &p.pull, commands, err);
    }
  if (r == 0 && !b->opt->cluster->dry_run && (p.pull.code != 0 || p.pull.timed_out))
    r = step_error (&p.pull, &p.hosts, true, err);
  if (r == 0)
    r = step_run (b, &p.ranks, commands, err);
  if (r == 0 && b->opt->cluster->dry_run)
    {
      record_nodes (sj, &p);
      set_status (sj, "skip");
      plan_clear (&p);
      return ib_gate_skip (b, "--dry-run: the launcher's command lines are printed, nothing ran");
    }
  if (r == 0 && (p.ranks.code != 0 || p.ranks.timed_out))
    {
      r = step_error (&p.ranks, &p.hosts, false, err);
      sweep (b, &p, commands, sj);
    }
  if (p.ranks.per_proc)
    {
      show_ranks (b, &p.ranks, &p.hosts);
      size_t used = 0;
      cleanup_free char *all = NULL;
      ib_xappend (&all, &used, "", 0);
      for (int i = 0; i < p.ranks.n_procs; i++)
        ib_xappend (&all, &used, p.ranks.per_proc[i], strlen (p.ranks.per_proc[i]));
      /* Rank 0's all-rank figures and each DCP group's first rank's. */
      cJSON_AddItemToObject (sj, "bandwidth", ib_nccl_bandwidth_json (all));
      if (r == 0 && b->def->smoke_gpus_per_rank > 0)
        r = judge_links (b, &p.hosts, sj, all, err);
      else if (b->def->smoke_gpus_per_rank == 0)
        {
          const char *why = "gpus-per-rank 0 (the program uses no GPU, no NCCL)";
          cJSON_AddStringToObject (sj, "links_not_checked", why);
          ib_report_note (b->report, "smoke: transports not checked: %s", why);
        }
    }
  record_nodes (sj, &p);
  record_ranks (sj, &p);
  cJSON_AddNumberToObject (sj, "seconds", ib_now () - t0);
  set_status (sj, r == 0 ? "pass" : "fail");
  ib_report_note (b->report, "smoke: %s across %zu nodes in %.1fs", r == 0 ? "pass" : "FAIL", p.hosts.n,
                  ib_now () - t0);
  plan_clear (&p);
  return r;
}
