/* imgverify's GPU-code listings (imgverify_gpu.c), called by its command
 * line: each returns the program's exit code. */
#ifndef IB_IMGVERIFY_GPU_H
#define IB_IMGVERIFY_GPU_H

#include <stdbool.h>

#include "kernels/target.h"
#include "layers/transports/refs.h"

/* --kernels FILE...: the GPU code of local files. */
int iv_kernels_of_files (int n, char **files, bool json, const struct ib_target *budget);
/* --kernels REF [GLOB...]: the GPU code of an image's matching files. */
int iv_kernels_of_image (const char *store_path, const struct ib_remote_options *remote, const char *ref, int n_globs,
                         char **globs, bool json, const struct ib_target *budget);

#endif
