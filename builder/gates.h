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

/* A gate that ran nothing (no GPU, switched off) says so with this: 1. */
#define IB_GATE_SKIPPED 1

const struct ib_gate *ib_gates (size_t *n);

/* Where a gate's problems go: each is a line of the report as it is found,
 * except the first error, which becomes the gate's error (the one "error:"
 * line the user sees, naming the first thing to fix). */
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

int ib_gate_definition (struct ib_build *b, ib_error_t *err);
int ib_gate_symbols (struct ib_build *b, ib_error_t *err);
int ib_gate_kernels (struct ib_build *b, ib_error_t *err);
int ib_gate_smoke (struct ib_build *b, ib_error_t *err);

#endif
