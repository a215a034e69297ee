/* Triage of an overlay against a base, as the DCP2 port was triaged by hand:
 * imgverify --triage DEFINITION --against REF [--their-base REF2].
 *
 * Each file the definition writes lands in one bucket:
 *   identical   the overlay's file is REF's, byte for byte: nothing to port
 *   clean       their base's file == REF's: their change applies cleanly
 *   merge       both bases have it and they differ: a 3-way merge
 *   new-theirs  REF has it, their base does not: new in their tree, ours
 *               has its own version (cherry-pick, don't adopt wholesale)
 *   new-both    neither base has it
 *   new-ours    their base has it, REF does not
 * and without --their-base: identical, differs (REF has another version)
 * or new (REF lacks it).
 *
 * --require-superset: every definition (Python), dynamic symbol and kernel
 * that REF's version of a file has must exist in the overlay's version: the
 * port's "the set is a strict superset".  `require NAME@FILE` lines in the
 * definition's [triage] section name fixes that must be present in the
 * overlay's FILE (a target, or the end of one).  Each failure names the
 * file and the symbol; they exit 5. */
#ifndef IB_TRIAGE_H
#define IB_TRIAGE_H

#include <stdbool.h>

#include "layers/image/transport.h"

struct ib_triage_options
{
  const char *store;
  const char *definition; /* a folder or an image.conf */
  const char *against;    /* REF: the base the overlay goes onto */
  const char *their_base; /* REF2, or NULL */
  bool require_superset;
  bool json;
  struct ib_remote_options remote;
};

/* The table on stdout (or one JSON document, schema imgverify.triage/v1),
 * problems on stderr; returns the exit code. */
int ib_triage_run (const struct ib_triage_options *o);

#endif
