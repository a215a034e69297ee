/* Will the image run on the fleet ([target]): checks over an image's merged
 * file system and config, each reporting problems one line at a time
 * (errors where the image cannot work, warnings where it works slowly or
 * only under CUDA's minor-version compatibility).
 *
 * - JIT toolchains: every ptxas, nvcc, nvdisasm, libnvrtc.so* and
 *   libnvJitLink.so* of the image with its CUDA version (read from the file,
 *   never run), and what TRITON_PTXAS_PATH, TRITON_CUOBJDUMP_PATH and
 *   CUDA_HOME point at.  The ptxas Triton will use (TRITON_PTXAS_PATH, else
 *   its bundled backends/nvidia/bin/ptxas) must target every GPU.
 * - Driver floor: libcudart (version from its file name), NVRTC, nvJitLink,
 *   CUDA_VERSION and NVIDIA_REQUIRE_CUDA against the declared driver; a
 *   libcuda.so* where the loader finds it before the injected driver's
 *   (LD_LIBRARY_PATH, /etc/ld.so.conf and its includes: layers/view/ldconf.h,
 *   the default folders).
 * - PTX: the .version of PTX the driver would have to JIT (jitbudget.h). */
#ifndef IB_FLEET_H
#define IB_FLEET_H

#include <cjson/cJSON.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "util/requirement.h"
#include "kernels/target.h"

/* How ib_fleet_cuda_versions found the versions it was asked for: a
 * record cached (in a store that never saw the image: made by the
 * file-list pass, cudaver.h), or the file read out of its layer. */
struct ib_fleet_reads
{
  size_t cached, read, layer_passes;
};

struct ib_fleet_scope
{
  struct ib_store *store;
  const struct ib_image *img;
  const struct ib_fsview *view;
  const struct ib_target *target;
  ib_problem_fn fn;
  void *data;
  cJSON *details; /* an array: one object per file looked at (may be NULL) */
  struct ib_fleet_reads *reads; /* counted into when not NULL */
  /* Counted into when not NULL: each thing a check judged (a tool, a
   * library with a version, a variable of the config, a libcuda).  0
   * after a check: it had nothing to judge, and the gate says skip. */
  size_t *checked;
};

int ib_fleet_toolchains (const struct ib_fleet_scope *sc, ib_error_t *err);
int ib_fleet_driver (const struct ib_fleet_scope *sc, ib_error_t *err);

/* OUT[i]: the CUDA version FILES[i] (entries of the scope's view) states
 * in its version string, 0 when none; cached in the store by content. */
int ib_fleet_cuda_versions (const struct ib_fleet_scope *sc, const struct ib_fs_entry *const *files, size_t n,
                            unsigned *out, ib_error_t *err);

/* The value of KEY in the image config's Env, NULL when unset. */
const char *ib_image_env (const struct ib_image *img, const char *key);

#endif
