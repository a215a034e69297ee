#include "builder/core/report.h"

#include "layers/image/transport.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "util/fsutil.h"

struct ib_report
{
  char *prog;
  bool quiet;
  bool tty;   /* stderr is a terminal */
  bool color; /* ... and NO_COLOR is not set */
  cJSON *doc;
  cJSON *gates;
  cJSON *problems;
  char *definition; /* what the rows and problems are about, when several are */
  cJSON *requirements; /* ib_report_requirement's, not part of the JSON document */
};

struct ib_report *
ib_report_new (const char *prog, const char *schema, bool quiet)
{
  struct ib_report *r = ib_xcalloc (1, sizeof (*r));
  r->prog = ib_xstrdup (prog);
  r->quiet = quiet;
  r->tty = isatty (2);
  const char *no_color = getenv ("NO_COLOR");
  r->color = r->tty && !(no_color && *no_color);
  r->doc = cJSON_CreateObject ();
  cJSON_AddStringToObject (r->doc, "schema", schema);
  r->gates = cJSON_AddArrayToObject (r->doc, "gates");
  r->problems = cJSON_AddArrayToObject (r->doc, "problems");
  r->requirements = cJSON_CreateArray ();
  return r;
}

void
ib_report_free (struct ib_report *r)
{
  if (r == NULL)
    return;
  cJSON_Delete (r->doc);
  cJSON_Delete (r->requirements);
  free (r->definition);
  free (r->prog);
  free (r);
}

void
ib_report_note (struct ib_report *r, const char *fmt, ...)
{
  if (r->quiet)
    return;
  va_list ap;
  va_start (ap, fmt);
  fprintf (stderr, "%s: ", r->prog);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
}

void
ib_report_requirement (struct ib_report *r, const char *gate, const char *file, const char *line,
                       const char *origin, const char *text)
{
  cJSON *q = cJSON_CreateObject ();
  cJSON_AddStringToObject (q, "gate", gate);
  cJSON_AddStringToObject (q, "file", file);
  cJSON_AddStringToObject (q, "line", line);
  cJSON_AddStringToObject (q, "origin", origin);
  cJSON_AddStringToObject (q, "text", text);
  if (r->definition)
    cJSON_AddStringToObject (q, "definition", r->definition);
  cJSON_AddItemToArray (r->requirements, q);
}

const cJSON *
ib_report_requirements (const struct ib_report *r)
{
  return r->requirements;
}

void
ib_report_set_definition (struct ib_report *r, const char *file)
{
  free (r->definition);
  r->definition = file ? ib_xstrdup (file) : NULL;
}

static bool
is_str (const cJSON *o, const char *key, const char *value)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, key);
  return cJSON_IsString (v) && strcmp (v->valuestring, value) == 0;
}

static cJSON *
new_problem (struct ib_report *r, const char *gate, bool is_error, const char *msg)
{
  cJSON *p = cJSON_CreateObject ();
  cJSON_AddStringToObject (p, "gate", gate);
  cJSON_AddStringToObject (p, "severity", is_error ? "error" : "warning");
  cJSON_AddStringToObject (p, "message", msg);
  if (r->definition)
    cJSON_AddStringToObject (p, "definition", r->definition);
  return p;
}

void
ib_report_problem (struct ib_report *r, const char *gate, bool is_error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = ib_xvasprintf (fmt, ap);
  va_end (ap);
  /* Not silenced by -q or --json: problems are what a person must read.
   * Errors carry no "error:" tag: the one "error:" line is the last,
   * naming the problem that stopped the run. */
  fprintf (stderr, "%s: %s: %s%s\n", r->prog, gate, is_error ? "" : "warning: ", msg);
  cJSON_AddItemToArray (r->problems, new_problem (r, gate, is_error, msg));
  free (msg);
}

size_t
ib_report_errors (const struct ib_report *r, const char *gate)
{
  size_t n = 0;
  const cJSON *p;
  cJSON_ArrayForEach (p, r->problems)
  n += is_str (p, "gate", gate) && is_str (p, "severity", "error");
  return n;
}

void
ib_report_stopped (struct ib_report *r, const char *gate, const char *msg)
{
  int i = 0;
  cJSON *p, *stop = NULL;
  cJSON_ArrayForEach (p, r->problems)
  {
    if (is_str (p, "gate", gate) && is_str (p, "severity", "error"))
      {
        stop = cJSON_DetachItemFromArray (r->problems, i);
        break;
      }
    i++;
  }
  if (stop == NULL)
    stop = new_problem (r, gate, true, msg);
  cJSON_AddTrueToObject (stop, "stopped");
  cJSON_InsertItemInArray (r->problems, 0, stop);
}

void
ib_report_gate (struct ib_report *r, const char *gate, enum ib_gate_status status, double seconds, const char *detail)
{
  static const char *names[] = { "pass", "fail", "skip" };
  static const char *colors[] = { "\033[32m", "\033[31m", "\033[33m" };
  if (status == IB_GATE_SKIP && detail == NULL)
    detail = "nothing to check";
  if (!r->quiet)
    fprintf (stderr, "%s: gate %-12s %s%-4s%s %7.3fs  %s\n", r->prog, gate, r->color ? colors[status] : "",
             names[status], r->color ? "\033[0m" : "", seconds, detail ? detail : "");
  cJSON *g = cJSON_CreateObject ();
  cJSON_AddStringToObject (g, "name", gate);
  cJSON_AddStringToObject (g, "status", names[status]);
  cJSON_AddNumberToObject (g, "seconds", seconds);
  if (detail)
    cJSON_AddStringToObject (g, status == IB_GATE_SKIP ? "reason" : "detail", detail);
  if (r->definition)
    cJSON_AddStringToObject (g, "definition", r->definition);
  cJSON_AddItemToArray (r->gates, g);
}

bool
ib_report_gate_ran (const struct ib_report *r, const char *gate)
{
  const cJSON *g;
  cJSON_ArrayForEach (g, r->gates)
  if (is_str (g, "name", gate) && !is_str (g, "status", "skip"))
    return true;
  return false;
}

cJSON *
ib_report_json (struct ib_report *r)
{
  return r->doc;
}

static double
cpu_seconds (const struct rusage *u)
{
  return (double) u->ru_utime.tv_sec + (double) u->ru_utime.tv_usec / 1e6 + (double) u->ru_stime.tv_sec
         + (double) u->ru_stime.tv_usec / 1e6;
}

void
ib_report_resources (struct ib_report *r)
{
  struct rusage self, children;
  if (getrusage (RUSAGE_SELF, &self) < 0 || getrusage (RUSAGE_CHILDREN, &children) < 0)
    return; /* cannot fail with these arguments; nothing said rather than zeros */
  cJSON *j = cJSON_CreateObject ();
  /* ru_maxrss is in KiB on Linux; for RUSAGE_CHILDREN it is the largest
   * single descendant waited for, not a sum. */
  cJSON_AddNumberToObject (j, "peak_rss_kib", (double) self.ru_maxrss);
  cJSON_AddNumberToObject (j, "cpu_seconds", cpu_seconds (&self));
  cJSON_AddNumberToObject (j, "children_peak_rss_kib", (double) children.ru_maxrss);
  cJSON_AddNumberToObject (j, "children_cpu_seconds", cpu_seconds (&children));
  if (cJSON_HasObjectItem (r->doc, "resources"))
    cJSON_ReplaceItemInObjectCaseSensitive (r->doc, "resources", j);
  else
    cJSON_AddItemToObject (r->doc, "resources", j);
}

struct ib_progress
{
  struct ib_report *report;
  char *what;
  unsigned long long total;
  atomic_ullong done;
  atomic_bool stop;
  double start;
  pthread_t thread;
  bool running;
};

bool
ib_report_interactive (const struct ib_report *r)
{
  return r->tty && !r->quiet;
}

void
ib_human_bytes (double b, char *buf, size_t n)
{
  const char *unit[] = { "B", "kB", "MB", "GB", "TB" };
  int u = 0;
  while (b >= 1000 && u < 4)
    {
      b /= 1000;
      u++;
    }
  snprintf (buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static void
draw (struct ib_progress *p, bool last)
{
  double secs = ib_now () - p->start;
  unsigned long long done = atomic_load (&p->done);
  double frac = p->total ? (double) done / (double) p->total : 1.0;
  if (frac > 1)
    frac = 1;
  double rate = secs > 0 ? done / secs : 0;
  double left = rate > 0 && p->total > done ? (p->total - done) / rate : 0;
  char d[32], t[32], rt[32];
  ib_human_bytes ((double) done, d, sizeof (d));
  ib_human_bytes ((double) p->total, t, sizeof (t));
  ib_human_bytes (rate, rt, sizeof (rt));
  char bar[31];
  int fill = (int) (frac * 30);
  for (int i = 0; i < 30; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[30] = '\0';
  fprintf (stderr, "\r%s: %s [%s] %3.0f%% %s / %s  %s/s  %s %.0fs\033[K%s", p->report->prog, p->what, bar, frac * 100, d,
           t, rt, last ? "took" : "left", last ? secs : left, last ? "\n" : "");
  fflush (stderr);
}

static void *
progress_thread (void *data)
{
  struct ib_progress *p = data;
  while (!atomic_load (&p->stop))
    {
      draw (p, false);
      usleep (100000);
    }
  return NULL;
}

struct ib_progress *
ib_progress_start (struct ib_report *r, const char *what, unsigned long long total)
{
  struct ib_progress *p = ib_xcalloc (1, sizeof (*p));
  p->report = r;
  p->what = ib_xstrdup (what);
  p->total = total;
  p->start = ib_now ();
  atomic_init (&p->done, 0);
  atomic_init (&p->stop, false);
  p->running = r->tty && !r->quiet && pthread_create (&p->thread, NULL, progress_thread, p) == 0;
  return p;
}

void
ib_progress_add (struct ib_progress *p, unsigned long long n)
{
  if (p)
    atomic_fetch_add (&p->done, n);
}

void
ib_progress_end (struct ib_progress *p)
{
  if (p == NULL)
    return;
  if (p->running)
    {
      atomic_store (&p->stop, true);
      pthread_join (p->thread, NULL);
      draw (p, true);
    }
  free (p->what);
  free (p);
}

static void *
transfer_start (void *data, const char *what, uint64_t total)
{
  return ib_progress_start (data, what, total);
}

static void
transfer_add (void *handle, uint64_t n)
{
  ib_progress_add (handle, n);
}

static void
transfer_end (void *handle)
{
  ib_progress_end (handle);
}

/* Transfers are part of what a report says, --json or not. */
static void
transfer_note (void *data, const char *text)
{
  struct ib_report *r = data;
  ib_report_note (r, "%s", text);
  cJSON *list = cJSON_GetObjectItemCaseSensitive (r->doc, "transfers");
  if (list == NULL)
    list = cJSON_AddArrayToObject (r->doc, "transfers");
  cJSON_AddItemToArray (list, cJSON_CreateString (text));
}

void
ib_report_transfers (struct ib_report *r, struct ib_transfer_report *out)
{
  *out = (struct ib_transfer_report){ transfer_start, transfer_add, transfer_end, transfer_note, r };
}
