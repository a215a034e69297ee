/* The CUDA versions of an image's toolchain files (ptxas, nvcc, nvdisasm,
 * cuobjdump, NVRTC, nvJitLink), kept by the file's content digest (the
 * store's cache "cudaver"), and the indexer that fills that cache in the
 * file-list pass.  The fleet's toolchains and driver gates (fleet.h) read
 * the records; a file whose record is there is not read out of its layer
 * again.
 *
 * Without the indexer a cold build over CUDA's libraries read the 2.4 GB
 * layer that holds them a second time, for the version strings of
 * libnvrtc and libnvJitLink alone (issue 18: 10.9 s of the bench's `gpu`
 * cold build), after the list pass had read every byte of it.  Both ways
 * make the record with the same code (ib_cudaver_of_fd_save), so they
 * cannot disagree. */
#ifndef IB_CUDAVER_H
#define IB_CUDAVER_H

#include <stdbool.h>

#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "util/error.h"

/* "ptxas", "nvcc", "nvdisasm", "cuobjdump", "libnvrtc" (libnvrtc.so*),
 * "libnvJitLink" (libnvJitLink.so*): what the toolchains gate calls a file
 * at PATH (by its last component), NULL for any other. */
const char *ib_cudaver_tool_kind (const char *path);
/* Glob patterns (ib_fsview_match) that match every path
 * ib_cudaver_tool_kind names, and a few it does not (a folder named
 * libnvrtc.so.d): each path found is tested with it.  *N_OUT of them. */
const char *const *ib_cudaver_tool_globs (size_t *n_out);

/* The record kept for DIGEST in the folder DIR (the store's cache
 * "cudaver"): true and *OUT (0: the file states no version) when there is
 * one. */
bool ib_cudaver_cache_load (const char *dir, const char *digest, unsigned *out);
/* The version that the file FD (read with pread, from its start) states
 * (ib_cuda_version_of_fd) into *OUT, and saved as DIGEST's record in DIR
 * (best effort: a record that cannot be written is read again next time). */
int ib_cudaver_of_fd_save (const char *dir, const char *digest, int fd, unsigned *out, ib_error_t *err);

/* The indexer (layers/store/indexer.h): every regular file that
 * ib_cudaver_tool_kind names, by its path in the layer, gets its record
 * in the pass.  A file reached another way (TRITON_PTXAS_PATH naming a
 * file of another name, a link whose target is named otherwise) has none,
 * and the gate reads it from its layer as before. */
#define IB_CUDAVER_INDEXER "cudaver"
struct ib_cudaver_indexer
{
  struct ib_indexer ix;
  char *cache;
};
int ib_cudaver_indexer_init (struct ib_store *s, struct ib_cudaver_indexer *out, ib_error_t *err);
void ib_cudaver_indexer_clear (struct ib_cudaver_indexer *x);

#endif
