/* What a file's GPU code is, kept by the file's content digest, and the
 * indexer that fills that cache in the file-list pass.  The kernel gate
 * (kgate.h) and the SBOM read the records; neither inspects a file whose
 * record is there. */
#ifndef IB_KINDEX_H
#define IB_KINDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "kernels/cudabin.h"

/* The GPU code of a file, kept in the folder DIR (the store's cache
 * "kernels") under the file's content digest: F saved (best effort), or
 * what was saved for DIGEST, NULL when there is none or it does not read
 * whole (a file cut short or damaged, another version's record).  The
 * record's format is kindex.c's.  Saving says whether the record was
 * written whole. */
bool ib_kernels_cache_save (const char *dir, const char *digest, const struct ib_cuda_file *f);
/* The records' version: a record of another is not read, and what is
 * kept from records (the JIT budget, builder/gates/gate_fleet.c) names it. */
#define IB_KERNELS_CACHE_MAGIC "imgbuild-kernels 4" /* 2: relocatable, ptx_version; 3: offset, stored; 4: binary */
struct ib_cuda_file *ib_kernels_cache_load (const char *dir, const char *digest);
/* FD (WHAT names it) inspected and its record written as the inspection
 * goes, an entry at a time (ib_cuda_inspect_stream): memory holds one
 * entry, however large the file's list.  On an error nothing is kept. */
int ib_kernels_cache_inspect (const char *dir, const char *digest, int fd, const char *what, ib_error_t *err);

/* The inspection's indexer (layers/store/indexer.h): in the pass that
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

#endif
