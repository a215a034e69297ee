#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../util/fsutil.h"

struct ib_report
{
  char *prog;
  bool quiet;
  cJSON *doc;
  cJSON *gates;
  cJSON *problems;
};

double
ib_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

struct ib_report *
ib_report_new (const char *prog, bool quiet)
{
  struct ib_report *r = ib_xcalloc (1, sizeof (*r));
  r->prog = ib_xstrdup (prog);
  r->quiet = quiet;
  r->doc = cJSON_CreateObject ();
  cJSON_AddStringToObject (r->doc, "schema", "imgbuild.report/v1");
  r->gates = cJSON_AddArrayToObject (r->doc, "gates");
  r->problems = cJSON_AddArrayToObject (r->doc, "problems");
  return r;
}

void
ib_report_free (struct ib_report *r)
{
  if (r == NULL)
    return;
  cJSON_Delete (r->doc);
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
ib_report_problem (struct ib_report *r, const char *gate, const char *fmt, ...)
{
  va_list ap;
  char *msg;
  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  fprintf (stderr, "%s: %s: %s\n", r->prog, gate, msg);
  cJSON *p = cJSON_CreateObject ();
  cJSON_AddStringToObject (p, "gate", gate);
  cJSON_AddStringToObject (p, "message", msg);
  cJSON_AddItemToArray (r->problems, p);
  free (msg);
}

void
ib_report_gate (struct ib_report *r, const char *gate, enum ib_gate_status status, double seconds, const char *detail)
{
  static const char *names[] = { "pass", "fail", "skip" };
  if (!r->quiet)
    fprintf (stderr, "%s: gate %-12s %-4s %7.3fs  %s\n", r->prog, gate, names[status], seconds, detail ? detail : "");
  cJSON *g = cJSON_CreateObject ();
  cJSON_AddStringToObject (g, "name", gate);
  cJSON_AddStringToObject (g, "status", names[status]);
  cJSON_AddNumberToObject (g, "seconds", seconds);
  if (detail)
    cJSON_AddStringToObject (g, "detail", detail);
  cJSON_AddItemToArray (r->gates, g);
}

cJSON *
ib_report_json (struct ib_report *r)
{
  return r->doc;
}
