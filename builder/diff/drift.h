/* Drift pins: an overlay that replaces files of its base was written
 * against those files.  `imgbuild --lock NAME` records them in
 * manifest.lock beside the definition (kept in version control): per
 * replaced target the sha256 of the base's file and what it defines
 * (Python definitions with a hash of their statements, dynamic symbols,
 * kernels per SM), and per [new] file target that the base lacked it.
 * When the base moves, the definition gate compares: a replaced file that
 * changed, vanished, or a new one that the base now has (upstream landed
 * it) is an error naming the target, both digests, and what changed in it.
 *
 *   # base dsv41-flash-b12x:local sha256:…
 *   /usr/…/vllm/v1/core/kv_cache_utils.py sha256:<hex>
 *    python get_kv_cache_config 5f0c3a9e1d2b4c6a
 *    dynamic b12x_fused_moe@@B12X_0.4
 *    kernel sm_121a trtllm_dcp_alltoall
 *   /usr/…/vllm/v1/core/candidate_blocks.py absent
 */
#ifndef IB_DRIFT_H
#define IB_DRIFT_H

#include <stddef.h>

#include "builder/core/build.h"
#include "builder/definition/definition.h"
#include "util/requirement.h"

#define IB_LOCK_FILE "manifest.lock"

/* The lock of D: manifest.lock in the definition's folder. */
char *ib_lock_path (const struct ib_definition *d);

/* imgbuild --lock: resolve the base (OPT->from, else the definition's),
 * and write D's lock against it.  *PINNED receives the number of lines. */
int ib_lock_run (const struct ib_definition *d, const struct ib_build_options *opt, size_t *pinned,
                 ib_error_t *err);

/* The drift check of the definition gate over B's base: problems go to FN;
 * a definition without a lock has nothing to check (*CHECKED = 0).
 * Returns -1 only when the check could not run (a malformed lock is a
 * problem, not a failure to run). */
int ib_lock_check (struct ib_build *b, ib_problem_fn fn, void *data, size_t *checked, ib_error_t *err);

#endif
