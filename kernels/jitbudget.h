/* The JIT budget: for every file with GPU code, which kernels have no SASS
 * that runs on the target GPUs and would be JIT-compiled from PTX at first
 * use (and how many PTX bytes that is), and which have neither.  The
 * kernel gate's required list stays the hard check; this is what a person
 * reads before a rollout (the design note's MAX_JOBS=2 lesson).  A kernel
 * that is PTX-only in one file but has SASS that runs in another file of
 * the same image (a prebaked cubin) counts as covered, not as JIT.
 * Relocatable entries (__nv_relfatbin) are never loaded and not counted. */
#ifndef IB_JITBUDGET_H
#define IB_JITBUDGET_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/cudabin.h"
#include "kernels/target.h"

struct ib_jit_file
{
  char *path;
  size_t sass_entries, ptx_entries, relocatable_entries; /* loadable entries, as cuobjdump lists them */
  size_t kernels;      /* distinct __global__ kernels of the loadable entries */
  size_t runs;         /* with SASS that runs on every target GPU */
  size_t covered;      /* PTX-only or missing here, SASS that runs in another file */
  size_t jit;          /* JIT-compiled from PTX at first use */
  uint64_t jit_ptx_bytes; /* uncompressed PTX of the entries those come from */
  size_t none;         /* neither SASS nor PTX for some target GPU */
  size_t ptx_too_new;  /* PTX entries whose .version the target driver's JIT refuses */
  unsigned newest_ptx; /* the highest .version, MAJOR*10+MINOR */
  size_t n_jit_names, n_none_names;
  char **jit_names, **none_names;
};

struct ib_jit_budget_state;

struct ib_jit_budget
{
  size_t n;
  struct ib_jit_file *f;
  unsigned driver_ptx; /* the newest PTX ISA the target's driver JITs */
  struct ib_jit_budget_state *state; /* what ib_jit_budget_learn learned */
};

/* The budget of N files (PATHS[i] with CODE[i]) against TARGET. */
struct ib_jit_budget *ib_jit_budget_compute (const char *const *paths, struct ib_cuda_file *const *code, size_t n,
                                             const struct ib_target *target);
/* The same, one file's GPU code at a time: the records of every file of
 * CUDA 13.0's lib64 (1,204 files, cuBLASLt's alone lists its kernels
 * for a dozen architectures) took a build from 52 to 83 MB at once.  Every file goes to ib_jit_budget_learn (which kernels
 * it runs without a JIT, kept by name), then every file again, in order,
 * to ib_jit_budget_add (its row); none may be learned after the first add. */
struct ib_jit_budget *ib_jit_budget_new (const struct ib_target *target);
void ib_jit_budget_learn (struct ib_jit_budget *b, const struct ib_cuda_file *code);
void ib_jit_budget_add (struct ib_jit_budget *b, const char *path, const struct ib_cuda_file *code);
void ib_jit_budget_free (struct ib_jit_budget *b);
/* The budget as JSON to OUT, a file's object at a time (one tree of every
 * file's kernel names and its text held 20 MB more of `--jit-budget
 * --json` over the CUDA base): {"driver_ptx", "jit_ptx_bytes",
 * "jit_core_seconds_estimate", "jit_rate_bytes_per_core_second", "files":
 * [...]}, files without GPU code left out; a newline after it. */
void ib_jit_budget_write_json (FILE *out, const struct ib_jit_budget *b);
/* A table for people; files without GPU code are left out. */
void ib_jit_budget_print (FILE *out, const struct ib_jit_budget *b);

/* What the first use would cost: the driver's JIT is ptxas's backend, and
 * ptxas -O3 compiled torch 2.6's PTX at 0.42 MB/s for sm_121 (0.47 MB/s
 * for sm_90) on one core of the device machine's Xeon
 * (tests/gpu/ptx-jit-rate.sh; tests/gpu/results/
 * nvidia-h100-ptx-jit-rate-dfabdfc).  The slower rate stands for every
 * target: an estimate of the order, not a promise (the driver caches what
 * it compiled, in ~/.nv/ComputeCache, CUDA_CACHE_MAXSIZE large enough). */
#define IB_JIT_PTX_BYTES_PER_CORE_SECOND 420000.0
/* Every file's jit_ptx_bytes together, and the estimate in core-seconds. */
uint64_t ib_jit_budget_ptx_bytes (const struct ib_jit_budget *b);
double ib_jit_core_seconds (uint64_t ptx_bytes);

/* Does PTX for compute_SM (VARIANT) JIT for MAJOR.MINOR?  Plain PTX for any
 * GPU at or above it; 'a' only on exactly it; 'f' on its family. */
bool ib_ptx_runs_on (unsigned sm, char variant, unsigned major, unsigned minor);

#endif
