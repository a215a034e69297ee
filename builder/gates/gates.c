/* The gates, in the order the pipeline runs them.  See gates.h. */
#include "builder/gates/gates.h"

#include "builder/gates/recipes.h"

/* In pipeline order within each phase. */
static const struct ib_gate gates[] = {
  { "definition", IB_PHASE_INPUTS, ib_gate_definition },
  { "symbols", IB_PHASE_IMAGE, ib_gate_symbols },
  { "native", IB_PHASE_IMAGE, ib_gate_native },
  { "kernels", IB_PHASE_IMAGE, ib_gate_kernels },
  { "toolchains", IB_PHASE_IMAGE, ib_gate_toolchains },
  { "driver", IB_PHASE_IMAGE, ib_gate_driver },
  { "ptx", IB_PHASE_IMAGE, ib_gate_ptx },
  { "jit-budget", IB_PHASE_IMAGE, ib_gate_jit_budget },
  { "recipe", IB_PHASE_IMAGE, ib_gate_recipe },
  { "smoke", IB_PHASE_IMAGE, ib_gate_smoke },
};

const struct ib_gate *
ib_gates (size_t *n)
{
  *n = sizeof (gates) / sizeof (gates[0]);
  return gates;
}
