/* A gate's row in the report, its skip reason, and the sink its problems
 * go to.  See gate.h. */
#include "builder/core/gate.h"

#include <stdarg.h>
#include <stdlib.h>

#include "util/fsutil.h"

void
ib_gate_sink_problem (void *sink, bool is_error, const char *msg)
{
  struct ib_gate_sink *k = sink;
  if (is_error)
    k->errors++;
  if (is_error && k->first_error == NULL)
    k->first_error = ib_xstrdup (msg);
  ib_report_problem (k->report, k->gate, is_error, "%s", msg);
}

int
ib_gate_skip (struct ib_build *b, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  free (b->skip_reason);
  b->skip_reason = ib_xvasprintf (fmt, ap);
  va_end (ap);
  return IB_GATE_SKIPPED;
}

const char *
ib_gate_definition_name (const struct ib_build *b)
{
  return b->definition_name ? b->definition_name : b->def->file;
}

int
ib_gate_sink_finish (struct ib_gate_sink *k, int class, ib_error_t *err)
{
  int r = 0;
  if (k->errors == 1)
    r = ib_error (err, class, "%s", k->first_error);
  else if (k->errors > 1)
    r = ib_error (err, class, "%s (and %zu more, listed above)", k->first_error, k->errors - 1);
  free (k->first_error);
  k->first_error = NULL;
  return r;
}

void
ib_gate_row (struct ib_build *b, const char *gate, int r, double seconds, size_t errors_before, const char *detail,
             ib_error_t e)
{
  if (r < 0)
    {
      if (ib_report_errors (b->report, gate) == errors_before)
        ib_report_problem (b->report, gate, true, "%s", e->msg);
      ib_report_gate (b->report, gate, IB_GATE_FAIL, seconds, e->msg);
    }
  else if (r == IB_GATE_SKIPPED)
    ib_report_gate (b->report, gate, IB_GATE_SKIP, seconds, b->skip_reason);
  else
    ib_report_gate (b->report, gate, IB_GATE_PASS, seconds, detail);
  free (b->skip_reason);
  b->skip_reason = NULL;
}
