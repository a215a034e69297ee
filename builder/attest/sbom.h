/* The SBOM of an image, an SPDX 2.3 JSON document
 * (https://spdx.github.io/spdx-spec/v2.3/): one package for the image,
 * and in it
 *   - every Debian package of /var/lib/dpkg/status that is installed
 *     (any state but not-installed and config-files), with its version
 *     and a purl pkg:deb/debian/NAME@VERSION?arch=ARCH;
 *   - every Python distribution (a *.dist-info/METADATA, a
 *     *.egg-info/PKG-INFO, or an *.egg-info file), with a purl pkg:pypi;
 *   - every shared object, cubin or fatbin with GPU code (kernels/cudabin.h),
 *     its sha256 and, in its comment, the architectures of the code with
 *     kernels that the runtime loads ("GPU code: sm_121a compute_120";
 *     relocatable -rdc code and cubins without a kernel are left out).
 * Read from the image's layers (only the layers that hold these files),
 * GPU code from the per-content cache that the kernel gate fills. */
#ifndef IB_SBOM_H
#define IB_SBOM_H

#include <cjson/cJSON.h>

#include "layers/store/indexer.h"
#include "builder/core/build.h"

/* Which lists kept per base a document reused. */
struct ib_sbom_reused
{
  bool packages; /* the Debian and Python packages */
  bool gpu;      /* the GPU code */
};

/* NAME is the image's name; CREATED a Unix time.  IMG's layers from FIRST
 * on are its overlay (outside 1..n_layers-1: none): the package list and
 * the GPU-code list are kept per base (symbol-check/link-check/memo.h; VIEW is observed
 * meanwhile, its entries unchanged) and *REUSED says which were reused. */
int ib_sbom_of_image (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, int first, const char *name,
                      long long created, struct ib_sbom_reused *reused, cJSON **out, ib_error_t *err);
int ib_sbom_of_build (struct ib_build *b, cJSON **out, ib_error_t *err);

/* The indexer (layers/store/indexer.h) that fills the SBOM's cache of package
 * files in the file-list pass, with the entry add_package_files would
 * write after its own read: a cold build's SBOM then reads no layer. */
struct ib_sbom_indexer
{
  struct ib_indexer ix;
  char *cache; /* STORE/imgbuild/sbom */
};
int ib_sbom_indexer_init (struct ib_store *s, struct ib_sbom_indexer *out, ib_error_t *err);
void ib_sbom_indexer_clear (struct ib_sbom_indexer *x);

/* The packages of a dpkg status file TEXT, added to LIST as SPDX packages
 * (exposed for the unit tests); IDS numbers their SPDXIDs. */
void ib_sbom_add_dpkg (cJSON *list, const char *text, size_t *ids);
/* The Name and Version of a Python METADATA / PKG-INFO text; 0 when both
 * are there.  *NAME and *VERSION are malloc'd. */
int ib_sbom_python_metadata (const char *text, char **name, char **version);

#endif
