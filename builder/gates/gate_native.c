/* The native link gate in the build: the definition's [native] rules over
 * the candidate image (symbol-check/link-check/linkgate.h). */
#include <stdlib.h>
#include <string.h>

#include "symbol-check/link-check/linkgate.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/gates/gates.h"

void
ib_native_plan_init (struct ib_native_plan *p, const struct ib_definition *d, size_t first_overlay_layer,
                     char *const *targets, size_t n_targets)
{
  const struct ib_native_conf *c = &d->native;
  memset (p, 0, sizeof (*p));
  /* Whose extension modules: [native] package lines, else the symbol
   * gate's packages. */
  if (!c->n_packages && !d->n_check_packages && d->python_path)
    p->packages = targets ? ib_packages_of_targets (d->python_path, targets, n_targets, &p->n_packages)
                          : ib_default_packages (d, &p->n_packages);
  p->rules = (struct ib_native_rules){
    .check = c->check,
    .n_check = c->n_check,
    .defaults = !c->no_defaults,
    .first_checked_layer = (int) first_overlay_layer,
    .packages = c->n_packages ? c->packages : d->n_check_packages ? d->check_packages : p->packages,
    .n_packages = c->n_packages ? c->n_packages : d->n_check_packages ? d->n_check_packages : p->n_packages,
    .preloads = c->preloads,
    .n_preloads = c->n_preloads,
    .allow = c->allow,
    .n_allow = c->n_allow,
    .injected = c->injected,
    .n_injected = c->n_injected,
    .interpreter = c->interpreter,
    .driver = c->driver,
  };
}

void
ib_native_plan_clear (struct ib_native_plan *p)
{
  for (size_t i = 0; i < p->n_packages; i++)
    free (p->packages[i]);
  free (p->packages);
  memset (p, 0, sizeof (*p));
}

int
ib_gate_native (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (!d->native.enabled)
    return ib_gate_skip (b, "no [native] in %s", ib_gate_definition_name (b));
  /* Made if need be.  The gate observes the view while it reads it
   * (symbol-check/link-check/memo.h), so it gets the build's own, not this read-only
   * handle. */
  const struct ib_fsview *built;
  if (ib_build_image_view (b, &built, err) < 0)
    return -1;
  struct ib_native_plan plan;
  ib_native_plan_init (&plan, d, b->first_overlay_layer, NULL, 0);
  struct ib_gate_sink k = { b->report, "native", NULL, 0 };
  struct ib_native_stats st;
  int r = ib_native_check (b->store, b->image, b->image_view, &plan.rules, ib_gate_sink_problem, &k, &st, NULL, err);
  ib_native_plan_clear (&plan);
  if (r < 0)
    {
      ib_gate_sink_finish (&k, IB_ESYMBOLS, NULL);
      return -1;
    }
  cleanup_free char *how = st.reused ? ib_xstrdup ("the verdict over the base, reused: the overlay changes nothing "
                                                   "the check read")
                                      : ib_xasprintf ("%zu files read in %zu layer passes, %zu cached", st.read,
                                                      st.layers_read, st.cached);
  ib_report_note (b->report,
                  "native: %zu objects, %zu loaded, %zu symbol references; %zu warnings, %zu unchecked, %zu allowed; %s",
                  st.objects, st.loaded, st.refs, st.warnings, st.unchecked, st.allowed, how);
  if (ib_gate_sink_finish (&k, IB_ESYMBOLS, err) < 0)
    return -1;
  if (st.objects == 0)
    return ib_gate_skip (b, "[native] of %s matched no shared object: nothing to link", ib_gate_definition_name (b));
  return 0;
}
