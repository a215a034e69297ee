#include "builder/smoke/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

/* ---- hosts --------------------------------------------------------------- */

static bool
host_name_ok (const char *s)
{
  /* A name or an IPv4/IPv6 address as mpirun, srun and NCCL_COMM_ID take
   * it: no blanks, no shell or list characters. */
  if (*s == '\0' || strlen (s) > 253)
    return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '.' || *p == '-' || *p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')
          || (*p >= 'A' && *p <= 'Z')))
      return false;
  return true;
}

int
ib_hosts_parse (const char *text, struct ib_hosts *h, ib_error_t *err)
{
  memset (h, 0, sizeof (*h));
  cleanup_free char *copy = ib_xstrdup (text ? text : "");
  char *save = NULL;
  for (char *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save))
    {
      char *colon = strrchr (tok, ':');
      long slots = 1;
      if (colon)
        {
          char *end;
          *colon = '\0';
          slots = strtol (colon + 1, &end, 10);
          if (*end || colon[1] == '\0' || slots < 1 || slots > 64)
            {
              ib_hosts_clear (h);
              return ib_error (err, IB_EUSAGE, "--hosts: `%s:%s`: the GPUs of a host are 1 to 64", tok, colon + 1);
            }
        }
      if (!host_name_ok (tok))
        {
          ib_hosts_clear (h);
          return ib_error (err, IB_EUSAGE, "--hosts: `%s` is not a host name or address", tok);
        }
      for (size_t i = 0; i < h->n; i++)
        if (strcmp (h->name[i], tok) == 0)
          {
            ib_hosts_clear (h);
            return ib_error (err, IB_EUSAGE, "--hosts: `%s` is named twice (HOST:N gives it N GPUs)", tok);
          }
      if (h->n == 1024)
        {
          ib_hosts_clear (h);
          return ib_error (err, IB_EUSAGE, "--hosts: more than 1024 hosts");
        }
      h->name = ib_xrealloc (h->name, (h->n + 1) * sizeof (*h->name));
      h->slots = ib_xrealloc (h->slots, (h->n + 1) * sizeof (*h->slots));
      h->name[h->n] = ib_xstrdup (tok);
      h->slots[h->n++] = (int) slots;
      h->ranks += (int) slots;
    }
  if (h->n == 0)
    return ib_error (err, IB_EUSAGE, "--hosts: no host named (H1,H2,... or H1:GPUS,...)");
  return 0;
}

void
ib_hosts_clear (struct ib_hosts *h)
{
  for (size_t i = 0; i < h->n; i++)
    free (h->name[i]);
  free (h->name);
  free (h->slots);
  memset (h, 0, sizeof (*h));
}

const char *
ib_hosts_of_rank (const struct ib_hosts *h, int rank)
{
  for (size_t i = 0; i < h->n; i++)
    {
      if (rank < h->slots[i])
        return h->name[i];
      rank -= h->slots[i];
    }
  return "?";
}

/* ---- launchers ----------------------------------------------------------- */

int
ib_launcher_choose (const char *name, enum ib_launcher *out, ib_error_t *err)
{
  if (name == NULL || strcmp (name, "auto") == 0)
    {
      const char *job = getenv ("SLURM_JOB_ID");
      *out = job && *job ? IB_LAUNCH_SRUN : IB_LAUNCH_MPIRUN;
      return 0;
    }
  if (strcmp (name, "mpirun") == 0)
    *out = IB_LAUNCH_MPIRUN;
  else if (strcmp (name, "srun") == 0)
    *out = IB_LAUNCH_SRUN;
  else
    return ib_error (err, IB_EUSAGE, "--launcher: `%s` is not mpirun, srun or auto", name);
  return 0;
}

const char *
ib_launcher_name (enum ib_launcher l)
{
  return l == IB_LAUNCH_SRUN ? "srun" : "mpirun";
}

struct words
{
  char **w;
  size_t n;
};

static void
add (struct words *v, char *s)
{
  v->w = ib_xrealloc (v->w, (v->n + 2) * sizeof (*v->w));
  v->w[v->n++] = s;
  v->w[v->n] = NULL;
}

static void
mpirun_argv (const struct ib_launch_step *s, struct words *v)
{
  const struct ib_hosts *h = s->hosts;
  add (v, ib_xstrdup ("mpirun"));
  if (s->as_root)
    add (v, ib_xstrdup ("--allow-run-as-root"));
  cleanup_free char *list = ib_xstrdup ("");
  for (size_t i = 0; i < h->n; i++)
    {
      char *next = ib_xasprintf ("%s%s%s:%d", list, i ? "," : "", h->name[i], h->slots[i]);
      free (list);
      list = next;
    }
  add (v, ib_xstrdup ("--host"));
  add (v, ib_xstrdup (list));
  add (v, ib_xstrdup ("-np"));
  add (v, ib_xasprintf ("%d", s->per_node ? (int) h->n : h->ranks));
  /* One per node for the pull; by slot for the ranks, so that rank R is on
   * ib_hosts_of_rank (R). */
  add (v, ib_xstrdup ("--map-by"));
  add (v, ib_xstrdup (s->per_node ? "node" : "slot"));
  /* The container and NCCL place themselves; a binding would pin the
   * runtime to one core. */
  add (v, ib_xstrdup ("--bind-to"));
  add (v, ib_xstrdup ("none"));
  /* NVIDIA's containers set OMPI_MCA_plm=isolated (start processes on this
   * machine only): from one of them, mpirun finds every other host "already
   * filled".  The command line wins over the environment. */
  add (v, ib_xstrdup ("--mca"));
  add (v, ib_xstrdup ("plm"));
  add (v, ib_xstrdup ("^isolated"));
  add (v, ib_xstrdup ("--tag-output"));
  for (size_t i = 0; i < s->n_env; i++)
    {
      add (v, ib_xstrdup ("-x"));
      add (v, ib_xstrdup (s->env[i]));
    }
}

static void
srun_argv (const struct ib_launch_step *s, struct words *v)
{
  const struct ib_hosts *h = s->hosts;
  add (v, ib_xstrdup ("srun"));
  cleanup_free char *list = ib_xstrdup ("");
  for (size_t i = 0; i < h->n; i++)
    {
      char *next = ib_xasprintf ("%s%s%s", list, i ? "," : "", h->name[i]);
      free (list);
      list = next;
    }
  add (v, ib_xasprintf ("--nodes=%zu", h->n));
  add (v, ib_xasprintf ("--nodelist=%s", list));
  add (v, ib_xasprintf ("--ntasks=%d", s->per_node ? (int) h->n : h->ranks));
  add (v, ib_xasprintf ("--ntasks-per-node=%d", s->per_node ? 1 : h->slots[0]));
  add (v, ib_xstrdup ("--distribution=block"));
  /* One task that fails ends the step (Slurm's way of what mpirun does by
   * default), and each line says its rank. */
  add (v, ib_xstrdup ("--kill-on-bad-exit=1"));
  add (v, ib_xstrdup ("--label"));
  add (v, ib_xstrdup ("--export=ALL"));
  if (s->n_env)
    {
      /* --export cannot carry a value with a comma (NCCL_IB_HCA=mlx5_0,mlx5_1). */
      add (v, ib_xstrdup ("env"));
      for (size_t i = 0; i < s->n_env; i++)
        add (v, ib_xstrdup (s->env[i]));
    }
}

char **
ib_launch_argv (const struct ib_launch_step *s, size_t *n)
{
  struct words v = { 0 };
  if (s->launcher == IB_LAUNCH_SRUN)
    srun_argv (s, &v);
  else
    mpirun_argv (s, &v);
  for (size_t i = 0; i < s->n_argv; i++)
    add (&v, ib_xstrdup (s->argv[i]));
  if (n)
    *n = v.n;
  return v.w;
}

void
ib_launch_argv_free (char **argv)
{
  for (size_t i = 0; argv && argv[i]; i++)
    free (argv[i]);
  free (argv);
}

char *
ib_launch_shell_line (char *const *argv)
{
  char *line = NULL;
  size_t used = 0;
  for (size_t i = 0; argv[i]; i++)
    {
      const char *w = argv[i];
      bool plain = *w != '\0' && strspn (w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,@+%")
                                     == strlen (w);
      if (i)
        ib_xappend (&line, &used, " ", 1);
      if (plain)
        ib_xappend (&line, &used, w, strlen (w));
      else
        {
          ib_xappend (&line, &used, "'", 1);
          for (const char *p = w; *p; p++)
            if (*p == '\'')
              ib_xappend (&line, &used, "'\\''", 4);
            else
              ib_xappend (&line, &used, p, 1);
          ib_xappend (&line, &used, "'", 1);
        }
    }
  ib_xappend (&line, &used, "", 1);
  return line;
}

static int
env_int (const char *name)
{
  const char *v = getenv (name);
  char *end;
  if (v == NULL || *v == '\0')
    return -1;
  long x = strtol (v, &end, 10);
  return *end || x < 0 || x > 1 << 20 ? -1 : (int) x;
}

int
ib_launch_rank_from_env (int *rank, int *size, int *local_rank)
{
  static const char *const names[][3] = {
    { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" },
    { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID" },
  };
  for (size_t i = 0; i < 2; i++)
    {
      int r = env_int (names[i][0]), n = env_int (names[i][1]), l = env_int (names[i][2]);
      if (r >= 0 && n > r)
        {
          *rank = r;
          *size = n;
          *local_rank = l >= 0 ? l : 0;
          return 0;
        }
    }
  return -1;
}

/* ---- running the launcher ------------------------------------------------ */

static double
now_s (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

int
ib_launch_run (char *const *argv, int timeout_s, int grace_s, int echo_fd, char **output, int *code,
               bool *timed_out, ib_error_t *err)
{
  int pfd[2];
  *output = NULL;
  *timed_out = false;
  if (pipe2 (pfd, O_CLOEXEC) < 0)
    return ib_error_errno (err, errno, IB_EENV, "pipe");
  pid_t pid = fork ();
  if (pid < 0)
    return ib_error_errno (err, errno, IB_EENV, "fork");
  if (pid == 0)
    {
      /* Its own group: on a timeout the launcher and whatever it started
       * here get the signal, this program does not. */
      setpgid (0, 0);
      dup2 (pfd[1], 1);
      dup2 (pfd[1], 2);
      int nul = open ("/dev/null", O_RDONLY);
      if (nul >= 0)
        dup2 (nul, 0);
      execvp (argv[0], argv);
      dprintf (2, "cannot run %s: %s\n", argv[0], strerror (errno));
      _exit (127);
    }
  setpgid (pid, pid);
  close (pfd[1]);
  size_t used = 0;
  ib_xappend (output, &used, "", 0);
  double t0 = now_s ();
  int signalled = 0; /* 0, SIGTERM, SIGKILL */
  char buf[65536];
  for (;;)
    {
      struct pollfd p = { .fd = pfd[0], .events = POLLIN };
      int rc = poll (&p, 1, 200);
      if (rc > 0)
        {
          ssize_t n = read (pfd[0], buf, sizeof (buf));
          if (n > 0)
            {
              /* OpenMPI's daemons end some help messages with a NUL and no
               * newline (seen with a PMIx whose plugins do not load): kept,
               * it would end the text there and hide every rank's output
               * after it. */
              for (ssize_t i = 0; i < n; i++)
                if (buf[i] == '\0')
                  buf[i] = '\n';
              ib_xappend (output, &used, buf, (size_t) n);
              if (echo_fd >= 0 && write (echo_fd, buf, (size_t) n) < 0)
                echo_fd = -1;
            }
          else if (n == 0)
            break;
        }
      double el = now_s () - t0;
      if (signalled == 0 && el >= timeout_s)
        {
          *timed_out = true;
          kill (-pid, SIGTERM);
          signalled = SIGTERM;
        }
      else if (signalled == SIGTERM && el >= timeout_s + grace_s)
        {
          kill (-pid, SIGKILL);
          signalled = SIGKILL;
        }
      else if (signalled == SIGKILL && el >= timeout_s + grace_s + 5)
        break; /* a descendant holds the pipe open; the launcher is gone */
    }
  close (pfd[0]);
  ib_xappend (output, &used, "", 1);
  int st = 0;
  waitpid (pid, &st, 0);
  *code = WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
  return 0;
}

/* ---- the launcher's output ----------------------------------------------- */

/* The next OpenMPI --tag-output tag "[J,R]<stdout>:" in LINE at or after
 * FROM: where it starts, *AFTER past it, *RANK its rank, or -1 for job 0
 * (mpirun itself, [0,0], and its daemons on the nodes, [0,1]...: their
 * numbers are not the ranks'), *STREAM the first letter of the stream's
 * name past "std" ('o', 'e').  NULL: none. */
static const char *
mpirun_tag (const char *from, int *rank, char *stream, const char **after)
{
  for (const char *p = strchr (from, '['); p; p = strchr (p + 1, '['))
    {
      int job, r, n = 0;
      char name[8] = "";
      if (sscanf (p, "[%d,%d]<%7[a-z]>:%n", &job, &r, name, &n) == 3 && n > 0)
        {
          *rank = job != 0 ? r : -1;
          *stream = strncmp (name, "std", 3) == 0 ? name[3] : name[0];
          *after = p + n;
          return p;
        }
    }
  return NULL;
}

/* Where a piece of the launcher's output goes: rank R's text, or the
 * launcher's own (R out of range). */
struct split_out
{
  char **rk, *launcher;
  size_t *used, lused;
  char *stream; /* each rank's last stream */
  int ranks;
};

static void
split_put (struct split_out *o, int r, const char *text, size_t len)
{
  if (r >= 0 && r < o->ranks)
    ib_xappend (&o->rk[r], &o->used[r], text, len);
  else
    ib_xappend (&o->launcher, &o->lused, text, len);
}

/* One line of mpirun --tag-output.  OpenMPI tags each chunk it reads from a
 * rank, not each line: a rank's line written in two pieces comes back as
 * "first half[1,1]<stdout>:second half", or with another rank's chunk
 * between.  Each piece goes to the rank its tag names; the line's newline
 * to the last.  A rank's piece from its other stream starts a line of its
 * own (a rank killed mid-line leaves its stdout unended).  Pieces of no
 * rank of this job stay the launcher's, tagged. */
static void
split_mpirun_line (struct split_out *o, const char *line)
{
  int cur = -1;
  const char *p = line;
  for (;;)
    {
      int r;
      char stream;
      const char *after;
      const char *tag = mpirun_tag (p, &r, &stream, &after);
      split_put (o, cur, p, tag ? (size_t) (tag - p) : strlen (p));
      if (!tag)
        break;
      cur = r >= 0 && r < o->ranks ? r : -1;
      if (cur < 0) /* the launcher's own text keeps its tag */
        split_put (o, -1, tag, (size_t) (after - tag));
      else
        {
          if (o->stream[cur] && o->stream[cur] != stream && o->used[cur] > 0 && o->rk[cur][o->used[cur] - 1] != '\n')
            split_put (o, cur, "\n", 1);
          o->stream[cur] = stream;
        }
      p = after;
    }
  split_put (o, cur, "\n", 1);
}

/* One line of srun --label: "  R: text".  slurmstepd's own lines in a
 * task's stream (it says there that it ended the task's step) are the
 * launcher's: a rank that srun stopped did not fail of itself. */
static void
split_srun_line (struct split_out *o, const char *line)
{
  int rank = -1, n = 0;
  if (!(sscanf (line, " %d: %n", &rank, &n) == 1 && n > 0 && rank >= 0 && rank < o->ranks)
      || strncmp (line + n, "slurmstepd", 10) == 0)
    rank = -1, n = 0; /* the launcher's own line, label and all */
  split_put (o, rank, line + n, strlen (line + n));
  split_put (o, rank, "\n", 1);
}

void
ib_launch_split (enum ib_launcher l, const char *output, int ranks, char ***per_rank, char **launcher)
{
  struct split_out o = { .rk = ib_xcalloc ((size_t) ranks + 1, sizeof (char *)),
                         .used = ib_xcalloc ((size_t) ranks + 1, sizeof (size_t)),
                         .stream = ib_xcalloc ((size_t) ranks + 1, 1),
                         .ranks = ranks };
  ib_xappend (&o.launcher, &o.lused, "", 0);
  for (int r = 0; r < ranks; r++)
    ib_xappend (&o.rk[r], &o.used[r], "", 0);
  for (const char *p = output ? output : ""; *p;)
    {
      const char *e = strchr (p, '\n');
      size_t len = e ? (size_t) (e - p) : strlen (p);
      cleanup_free char *line = strndup (p, len);
      if (l == IB_LAUNCH_MPIRUN)
        split_mpirun_line (&o, line);
      else
        split_srun_line (&o, line);
      p = e ? e + 1 : p + len;
    }
  for (int r = 0; r < ranks; r++)
    ib_xappend (&o.rk[r], &o.used[r], "", 1);
  ib_xappend (&o.launcher, &o.lused, "", 1);
  free (o.used);
  free (o.stream);
  *per_rank = o.rk;
  *launcher = o.launcher;
}

/* mpirun's "Process name: [[J,1],R]" of the first process that failed. */
static int
mpirun_first_failed (const char *text)
{
  const char *at = strstr (text, "Process name: [[");
  int job, one, rank;
  if (at && sscanf (at, "Process name: [[%d,%d],%d]", &job, &one, &rank) == 3)
    return rank;
  return -1;
}

/* srun's first "srun: error: HOST: task R: WHY" (or "tasks R-S,T: WHY"):
 * srun says so of each task as it ends otherwise than with 0, the first
 * failure first. */
static int
srun_first_failed (const char *text)
{
  for (const char *l = strstr (text, "srun: error: "); l; l = strstr (l + 1, "srun: error: "))
    {
      const char *eol = l + strcspn (l, "\n");
      const char *task = strstr (l, ": task ");
      size_t skip = 7;
      if (task == NULL || task > eol)
        task = strstr (l, ": tasks "), skip = 8;
      char *end;
      long r = task && task < eol ? strtol (task + skip, &end, 10) : -1;
      if (r >= 0 && task && end != task + skip && (*end == ':' || *end == '-' || *end == ','))
        return (int) r;
    }
  return -1;
}

int
ib_launch_first_failed (enum ib_launcher l, const char *launcher)
{
  if (launcher == NULL)
    return -1;
  return l == IB_LAUNCH_SRUN ? srun_first_failed (launcher) : mpirun_first_failed (launcher);
}

/* LINE past an mpirun --tag-output tag the launcher's text kept (its
 * daemons', job 0). */
static const char *
untagged (const char *line)
{
  int r;
  char stream;
  const char *after;
  const char *tag = mpirun_tag (line, &r, &stream, &after);
  return tag == line ? after : line;
}

/* Lines a launcher prints that say nothing of why it failed: OpenMPI's
 * and PMIx's notes on optional plugins they could not load (a launcher
 * moved from where it was built prints one per plugin, first, over three
 * lines). */
static bool
launcher_noise (const char *l)
{
  static const char *const noise[] = { "component_repository_open",
                                       "dlopen error: ",
                                       "Perhaps a missing symbol, or compiled for a different version",
                                       "Sorry!  You were supposed to get help",
                                       "But I couldn't open the help file",
                                       NULL };
  for (size_t i = 0; noise[i]; i++)
    if (strstr (l, noise[i]))
      return true;
  /* The name of the help topic it could not show, alone on its line. */
  size_t lead = strspn (l, " \t");
  if (strcmp (l + lead, "unavailable") == 0)
    return true;
  return l[strspn (l, "- ")] == '\0' || strlen (l) <= 3;
}

static bool
dash_line (const char *l)
{
  return strncmp (l, "-----", 5) == 0 && l[strspn (l, "-")] == '\0';
}

/* The first line of a help box ("-----" above and below) that is advice,
 * not an error: the whole box is skipped. */
static bool
advice_box (const char *first)
{
  static const char *const advice[] = { "PMIx was unable to find a usable compression library", NULL };
  for (size_t i = 0; advice[i]; i++)
    if (strncmp (first, advice[i], strlen (advice[i])) == 0)
      return true;
  return false;
}

char *
ib_launch_said (const char *text)
{
  bool skipping = false;
  for (const char *l = text ? text : ""; *l;)
    {
      size_t len = strcspn (l, "\n");
      const char *next = l + len + (l[len] == '\n');
      cleanup_free char *line = strndup (l, len);
      const char *u = untagged (line);
      if (dash_line (u))
        {
          size_t nlen = strcspn (next, "\n");
          cleanup_free char *nline = strndup (next, nlen);
          /* Opens an advice box, or closes the one being skipped. */
          skipping = !skipping && advice_box (untagged (nline));
        }
      else if (!skipping && !launcher_noise (u))
        return strdup (u);
      l = next;
    }
  return NULL;
}

void
ib_launch_split_free (char **per_rank, int ranks)
{
  for (int r = 0; per_rank && r < ranks; r++)
    free (per_rank[r]);
  free (per_rank);
}
