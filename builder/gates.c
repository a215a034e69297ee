#include "gates.h"

/* In pipeline order within each phase. */
static const struct ib_gate gates[] = {
  { "definition", IB_PHASE_INPUTS, ib_gate_definition },
  { "symbols", IB_PHASE_IMAGE, ib_gate_symbols },
};

const struct ib_gate *
ib_gates (size_t *n)
{
  *n = sizeof (gates) / sizeof (gates[0]);
  return gates;
}
