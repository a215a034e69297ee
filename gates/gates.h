/* Gates: the checks an image must pass before it is tagged.  Each gate runs
 * in one phase of the pipeline; a gate returns 0 on pass, -1 with an error
 * (whose class becomes the exit code) on failure, and records what it found
 * in the build report.  Adding a gate is adding one row to ib_gates(). */
#ifndef IB_GATES_H
#define IB_GATES_H

#include <stddef.h>

#include "build.h"

enum ib_gate_phase
{
  IB_PHASE_INPUTS, /* before the overlay layer is written */
  IB_PHASE_IMAGE,  /* over the candidate image: written, not tagged */
};

struct ib_gate
{
  const char *name;
  enum ib_gate_phase phase;
  int (*run) (struct ib_build *b, ib_error_t *err);
};

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

const struct ib_gate *ib_gates (size_t *n);

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

/* TARGET ("/usr/…") is covered by the definition's [new] section. */
bool ib_definition_declares_new (const struct ib_definition *d, const char *target);
/* Without check-package lines: the top-level packages that the overlay's
 * files live in under python-path (malloc'd strings). */
char **ib_default_packages (const struct ib_definition *d, size_t *n);

int ib_gate_definition (struct ib_build *b, ib_error_t *err);
int ib_gate_native (struct ib_build *b, ib_error_t *err);
int ib_gate_symbols (struct ib_build *b, ib_error_t *err);
int ib_gate_kernels (struct ib_build *b, ib_error_t *err);
int ib_gate_toolchains (struct ib_build *b, ib_error_t *err);
int ib_gate_driver (struct ib_build *b, ib_error_t *err);
int ib_gate_ptx (struct ib_build *b, ib_error_t *err);
int ib_gate_jit_budget (struct ib_build *b, ib_error_t *err);
int ib_gate_smoke (struct ib_build *b, ib_error_t *err);

#endif
