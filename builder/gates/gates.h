/* Gates: the checks an image must pass before it is tagged.  Each gate runs
 * in one phase of the pipeline; a gate returns 0 on pass, -1 with an error
 * (whose class becomes the exit code) on failure, and records what it found
 * in the build report.  Adding a gate is adding one row to ib_gates(). */
#ifndef IB_GATES_H
#define IB_GATES_H

#include <stddef.h>

#include "builder/core/build.h"
#include "builder/core/gate.h"
#include "symbol-check/link-check/linkgate.h"

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

const struct ib_gate *ib_gates (size_t *n);

/* Without check-package lines: the top-level packages that the overlay's
 * files live in under python-path (malloc'd strings). */
char **ib_default_packages (const struct ib_definition *d, size_t *n);
/* The same for the image paths TARGETS (NULLs skipped), under PYTHON_PATH. */
char **ib_packages_of_targets (const char *python_path, char *const *targets, size_t n_targets, size_t *n);

/* What the native gate checks for definition D over an image whose layers
 * from FIRST_OVERLAY_LAYER on are the build's own: its [native] rules (the
 * section's absence read as an empty one), the overlay's objects, and the
 * extension modules of [native] package lines, else check-package lines,
 * else the packages the overlay's files live in: those of TARGETS (image
 * paths) when not NULL, else of D's copy items.  The build's gate and
 * `imgverify --native REF` both take it from here. */
struct ib_native_plan
{
  struct ib_native_rules rules; /* points into D and the plan */
  char **packages;              /* the default packages, when the plan made them */
  size_t n_packages;
};
void ib_native_plan_init (struct ib_native_plan *p, const struct ib_definition *d, size_t first_overlay_layer,
                          char *const *targets, size_t n_targets);
void ib_native_plan_clear (struct ib_native_plan *p);

int ib_gate_definition (struct ib_build *b, ib_error_t *err);
int ib_gate_native (struct ib_build *b, ib_error_t *err);
int ib_gate_symbols (struct ib_build *b, ib_error_t *err);
int ib_gate_kernels (struct ib_build *b, ib_error_t *err);
int ib_gate_toolchains (struct ib_build *b, ib_error_t *err);
int ib_gate_driver (struct ib_build *b, ib_error_t *err);
int ib_gate_ptx (struct ib_build *b, ib_error_t *err);
int ib_gate_jit_budget (struct ib_build *b, ib_error_t *err);
int ib_gate_smoke (struct ib_build *b, ib_error_t *err);

/* One rank's container on this node (imgverify --node-rank, builder/verify/node.c):
 * the smoke gate's run of the program for RANK (builder/cluster/smoke_cluster.h). */
struct ib_smoke_rank;
int ib_smoke_rank_run (struct ib_build *b, const struct ib_smoke_rank *rk, int *exit_code, ib_error_t *err);

#endif
