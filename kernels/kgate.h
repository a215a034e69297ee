/* The kernel gate: for each requirement (a path or glob inside the image
 * and kernel names), every named kernel must exist, in one of the matching
 * files, as SASS that runs without a JIT on every target GPU (CUDA's binary
 * compatibility, ib_sass_runs_on).  PTX alone, or SASS for another SM or an
 * arch-specific variant of a neighbour, fails, and the message lists what
 * is there instead.  What a file holds is cached in the store by its
 * content digest. */
#ifndef IB_KGATE_H
#define IB_KGATE_H

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "util/requirement.h"
#include "kernels/cudabin.h"
#include "kernels/kindex.h"

struct ib_compute_capability
{
  unsigned major, minor;
};

struct ib_kernel_rules
{
  const struct ib_requirement *required;
  size_t n_required;
  const struct ib_compute_capability *targets; /* none: 12.1 */
  size_t n_targets;
};

struct ib_kernel_stats
{
  size_t files, kernels_checked, errors, inspected, cached;
};

int ib_kernels_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                      const struct ib_kernel_rules *rules, ib_problem_fn fn, void *data,
                      struct ib_kernel_stats *stats, ib_error_t *err);

/* The GPU code of FILES (entries of VIEW over IMG), from the cache or read
 * out of the layers: OUT[i] for FILES[i]. */
int ib_kernels_inspect_entries (struct ib_store *s, const struct ib_image *img,
                                const struct ib_fs_entry *const *files, size_t n, struct ib_cuda_file **out,
                                size_t *inspected, ib_error_t *err);
/* FN on the GPU code of each of FILES in turn, one record in memory at a
 * time (from the cache); those not cached yet are inspected first, in one
 * read of the layers, and only those whose record could not be cached are
 * kept until the end.  A negative FN stops the walk with its error. */
int ib_kernels_each_file (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                          size_t n, int (*fn) (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err),
                          void *data, ib_error_t *err);

struct ib_jit_budget;
struct ib_target;

/* The JIT budget (jitbudget.h) of N of the image's FILES against TARGET:
 * its two walks, one file's GPU code in memory at a time.  Each row is
 * named by the file's path from the root ("/usr/lib/..."); *WITH_CODE
 * (may be NULL) counts the files that have GPU code. */
int ib_kernels_jit_budget (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                           size_t n, const struct ib_target *target, struct ib_jit_budget **out, size_t *with_code,
                           ib_error_t *err);

/* The regular files of VIEW matching any of GLOBS (default, N_GLOBS 0:
 * *.so *.so.* *.cubin *.fatbin), each once.  *OUT is malloc'd. */
size_t ib_kernels_glob_files (const struct ib_fsview *view, char *const *globs, size_t n_globs,
                              const struct ib_fs_entry ***out);

/* "12.1" */
int ib_compute_capability_parse (const char *s, struct ib_compute_capability *out);
/* A required name matches a kernel symbol exactly, or the C++ mangled name
 * of a function of that name (_Z<len><name>…). */
bool ib_kernel_name_matches (const char *required, const char *symbol);

#endif
