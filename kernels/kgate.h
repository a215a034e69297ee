/* The kernel gate: for each requirement (a path or glob inside the image
 * and kernel names), every named kernel must exist, in one of the matching
 * files, as SASS that runs without a JIT on every target GPU (CUDA's binary
 * compatibility, ib_sass_runs_on).  PTX alone, or SASS for another SM or an
 * arch-specific variant of a neighbour, fails, and the message lists what
 * is there instead.  What a file holds is cached in the store by its
 * content digest. */
#ifndef IB_KGATE_H
#define IB_KGATE_H

#include "../view/fsview.h"
#include "../layers/image.h"
#include "../store/indexer.h"
#include "../store/store.h"
#include "../util/requirement.h"
#include "cudabin.h"

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

/* F, the GPU code of the file whose content digest is DIGEST, into the
 * cache folder that ib_kernels_inspect_entries reads (best effort). */
void ib_kernels_cache_save (const char *dir, const char *digest, const struct ib_cuda_file *f);

/* The inspection's indexer (store/indexer.h, kindex.c): in the pass that
 * makes a layer's file list, the record of every ELF object and fatbin
 * into the cache above, and the digests of the other files, which have no
 * GPU code, kept (in an unlinked file) for ib_kernels_inspect_entries of
 * the same run: with it the SBOM's list of GPU code (and a kernel gate)
 * reads no layer again. */
#define IB_KERNELS_INDEXER "kernels"
struct ib_kernels_indexer
{
  struct ib_indexer ix;
  char *cache;
  int none_fd;        /* 32-byte digests of the files with no GPU code; -1: none known */
  unsigned char *buf; /* those not written to it yet */
  size_t n_buf;
};
int ib_kernels_indexer_init (struct ib_store *s, struct ib_kernels_indexer *out, ib_error_t *err);
void ib_kernels_indexer_clear (struct ib_kernels_indexer *x);
/* OUT[i]: whether the pass saw a file of content DIGESTS[i] that is
 * neither an ELF object nor a fatbin (so has no GPU code); false when it
 * cannot tell. */
void ib_kernels_indexer_no_code (struct ib_kernels_indexer *x, const char *const *digests, size_t n, bool *out);

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
