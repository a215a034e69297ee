/* The kernel probe's results (kernels/dcp2/kprobe.h prints them, one line
 * a kernel, in the smoke test's output) against its plan (kernels/kplan.h):
 * each required kernel on each kind of GPU is "pass" (loaded, measured,
 * launched or not launchable without a recipe), "fail" (which step, which
 * CUDA error), "not on this machine" (no SASS for these GPUs: planned, never
 * loaded) or "not run" (the probe stopped before it). */
#ifndef IB_KPROBE_RESULT_H
#define IB_KPROBE_RESULT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "kernels/kplan.h"

struct ib_kprobe_summary
{
  size_t passed, failed, launched, absent, not_run;
  /* "kernel K (FILE, ARCH) on GPU 0 (NVIDIA H200, 9.0): STEP: ERROR", then
   * "; N kernels failed in all: K, L"; a cubin that does not load: "the
   * ARCH cubin of FILE does not load on GPU 0 (…): cuLibraryLoadData: ERROR;
   * its kernels: K, L, M" (CUDA does not say which kernel broke it). */
  char *first_failure;
  char *gpus;          /* "GPU 0 NVIDIA H200 (9.0)" */
};

/* A JSON array, one object per plan item: {"kernel","symbol","file","arch",
 * "gpu","gpu_name","compute_capability","status","registers",
 * "shared_static","max_dynamic_shared","max_threads","launch","error"}. */
cJSON *ib_kprobe_results (const struct ib_kplan *plan, const char *output, struct ib_kprobe_summary *sum);
void ib_kprobe_summary_clear (struct ib_kprobe_summary *s);

#endif
