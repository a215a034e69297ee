/* What every gate does with the build's report: its row (pass, fail, or
 * skipped with a reason), and the sink its problems go to.  The gates
 * themselves and their table are builder/gates/gates.h. */
#ifndef IB_GATE_H
#define IB_GATE_H
#include <stdbool.h>
#include <stddef.h>
#include "builder/core/build.h"
/* A gate that checked nothing (no section for it, no GPU, switched off)
 * returns this, never 0: a pass is only ever for a check that ran.  It
 * says why with ib_gate_skip. */
#define IB_GATE_SKIPPED 1

/* Record why the running gate checked nothing; returns IB_GATE_SKIPPED. */
int ib_gate_skip (struct ib_build *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* The row of GATE, which returned R after SECONDS: 0 (a pass, DETAIL says
 * what it checked), IB_GATE_SKIPPED (the reason ib_gate_skip recorded), or
 * -1 with E.  A failure that reported no error of its own since
 * ERRORS_BEFORE (an I/O error, the smoke test) gets E as one, so that
 * "problems" holds every failure. */
void ib_gate_row (struct ib_build *b, const char *gate, int r, double seconds, size_t errors_before,
                  const char *detail, ib_error_t e);
/* How messages name B's definition: "image.conf", or for imgverify "the
 * recorded definition /x/image.conf". */
const char *ib_gate_definition_name (const struct ib_build *b);

/* Where a gate's problems go: each, error or warning, is a line of the
 * report as it is found; the first error also becomes the gate's error
 * (the "error:" line at the end, naming the first thing to fix). */
struct ib_gate_sink
{
  struct ib_report *report;
  const char *gate;
  char *first_error;
  size_t errors;
};
void ib_gate_sink_problem (void *sink, bool is_error, const char *msg);
/* 0 when no error was reported, else the gate's error of CLASS. */
int ib_gate_sink_finish (struct ib_gate_sink *k, int class, ib_error_t *err);

#endif
