/* The kernel gate in the build: the definition's [kernels] requirements
 * over the candidate image (prebaked layer included). */
#include <stdlib.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/gates/gates.h"

int
ib_gate_kernels (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->n_kernel_required == 0)
    return ib_gate_skip (b, "no [kernels] requirement in %s", ib_gate_definition_name (b));
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  /* [kernels] target, else [target] gpu, else 12.1. */
  struct ib_kernel_rules rules = { d->kernel_required, d->n_kernel_required, d->n_targets ? d->targets : d->target.gpus,
                                   d->n_targets ? d->n_targets : d->target.n_gpus };
  struct ib_gate_sink k = { b->report, "kernels", NULL, 0 };
  struct ib_kernel_stats st;
  int r = ib_kernels_check (b->store, b->image, view, &rules, ib_gate_sink_problem, &k, &st, err);
  if (r < 0)
    {
      ib_gate_sink_finish (&k, IB_EKERNELS, NULL);
      return -1;
    }
  ib_report_note (b->report, "kernels: %zu files, %zu kernel checks; %zu read, %zu cached", st.files,
                  st.kernels_checked, st.inspected, st.cached);
  if (ib_gate_sink_finish (&k, IB_EKERNELS, err) < 0)
    return -1;
  if (st.kernels_checked == 0)
    return ib_gate_skip (b, "[kernels] of %s checked no kernel", ib_gate_definition_name (b));
  return 0;
}
