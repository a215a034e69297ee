/* The indexers (layers/store/indexer.h) a definition's gates profit from,
 * registered on the build's store before the first file list is made:
 * the native gate's when it has [native] or a python-path (the syntax
 * check's chroot is found from its records), the symbol gate's when it has
 * [symbols] (its checked packages), the toolchains gate's CUDA versions
 * when it has [target], the SBOM's and its GPU-code list's always.  With
 * them a cold build reads each base layer once, for its file list and
 * every record the gates and the SBOM then take from their caches,
 * instead of once more per gate and round. */
#ifndef IB_BUILD_INDEXERS_H
#define IB_BUILD_INDEXERS_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/cudaver.h"
#include "kernels/kgate.h"
#include "symbol-check/link-check/linkgate.h"
#include "symbol-check/symgate.h"
#include "builder/definition/definition.h"
#include "builder/attest/sbom.h"

struct ib_build_indexers
{
  bool native_on, python_on, sbom_on, kernels_on, cudaver_on;
  struct ib_native_indexer native;
  struct ib_cudaver_indexer cudaver;
  struct ib_kernels_indexer kernels;
  struct ib_sbom_indexer sbom;
  struct ib_python_indexer python;
  char **defaults; /* the symbol gate's default packages, when it has no check-package */
  size_t n_defaults;
};

/* Register on S what D's gates use; X must outlive S's use.  A cache
 * folder that cannot be made leaves that indexer out (the gate reads the
 * layers itself, as without indexers): never an error. */
void ib_build_indexers_add (struct ib_build_indexers *x, const struct ib_definition *d, struct ib_store *s);
void ib_build_indexers_clear (struct ib_build_indexers *x);

#endif
