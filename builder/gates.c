#include "gates.h"

#include <stdlib.h>

#include "../util/fsutil.h"

/* In pipeline order within each phase. */
static const struct ib_gate gates[] = {
  { "definition", IB_PHASE_INPUTS, ib_gate_definition },
  { "symbols", IB_PHASE_IMAGE, ib_gate_symbols },
  { "kernels", IB_PHASE_IMAGE, ib_gate_kernels },
  { "smoke", IB_PHASE_IMAGE, ib_gate_smoke },
};

const struct ib_gate *
ib_gates (size_t *n)
{
  *n = sizeof (gates) / sizeof (gates[0]);
  return gates;
}

void
ib_gate_sink_problem (void *sink, bool is_error, const char *msg)
{
  struct ib_gate_sink *k = sink;
  if (is_error)
    k->errors++;
  if (is_error && k->first_error == NULL)
    k->first_error = ib_xstrdup (msg);
  else
    ib_report_problem (k->report, k->gate, "%s%s", is_error ? "" : "warning: ", msg);
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
