/* The fleet an image is built for ([target] in image.conf): the GPUs'
 * compute capabilities, the NVIDIA driver the nodes run, the platform.
 * And what NVIDIA documents about them, as tables in target.c, each row
 * with its source: which CUDA version and PTX ISA a driver supports, which
 * CUDA version a compiler must have to target a GPU.  CUDA versions are
 * MAJOR*1000 + MINOR*10 (12.9 = 12090), as cudaRuntimeGetVersion gives
 * them; PTX ISA versions MAJOR*10 + MINOR (9.0 = 90). */
#ifndef IB_TARGET_H
#define IB_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"
#include "kernels/kgate.h"

struct ib_driver_version
{
  unsigned major, minor, patch; /* 580.95.05 */
};

struct ib_target
{
  bool present;                   /* the definition has a [target] */
  size_t n_gpus;
  struct ib_compute_capability *gpus; /* none: 12.1 */
  struct ib_driver_version driver;    /* zero: IB_DEFAULT_DRIVER */
  char *platform;                     /* NULL: the image's own */
  size_t n_libcuda;
  char **libcuda;                     /* libcuda.so* files the image may ship */
};

#define IB_DEFAULT_DRIVER "580.95.05" /* DGX OS 7's driver on the DGX Spark */

/* One `KEY = VALUE` line of [target]. */
int ib_target_parse (struct ib_target *t, const char *key, const char *value, const char *origin, ib_error_t *err);
void ib_target_clear (struct ib_target *t);
/* The target's GPUs, or 12.1 when none was named. */
const struct ib_compute_capability *ib_target_gpus (const struct ib_target *t, size_t *n);
struct ib_driver_version ib_target_driver (const struct ib_target *t);

int ib_driver_version_parse (const char *s, struct ib_driver_version *out);
int ib_driver_version_cmp (struct ib_driver_version a, struct ib_driver_version b);

/* What a driver supports: the newest CUDA version (0 when older than
 * every row) and the newest PTX ISA its JIT compiles. */
unsigned ib_driver_max_cuda (struct ib_driver_version d);
unsigned ib_driver_max_ptx (struct ib_driver_version d);
/* The driver a CUDA version needs for full support, and (CUDA >= 11.1,
 * minor-version compatibility) the one its major version needs at least.
 * False when the version is unknown to the table. */
bool ib_cuda_min_driver (unsigned cuda, struct ib_driver_version *full, struct ib_driver_version *major_floor);
/* The first CUDA version whose compilers target compute capability CC (its
 * sm_XYa, for 9.0 and up), 0 when the table does not know it. */
unsigned ib_cuda_for_gpu (struct ib_compute_capability cc);

/* "12.9" / "580.95.05" into BUF. */
void ib_cuda_version_str (unsigned v, char *buf, size_t n);
void ib_driver_version_str (struct ib_driver_version d, char *buf, size_t n);
/* "12.9", "12.9.86", "13" -> 12090, 13000; 0 when not a version. */
unsigned ib_cuda_version_parse (const char *s);

/* The CUDA version a toolchain file states about itself without being run:
 * the "Cuda compilation tools, release X.Y, VX.Y.Z" string that ptxas,
 * nvcc, nvdisasm, NVRTC and nvJitLink carry, whatever their CPU
 * architecture.  0 when the file has none. */
int ib_cuda_version_of_fd (int fd, unsigned *out, ib_error_t *err);
/* From a library's file name: libcudart.so.11.8.89 -> 11.8, libcudart.so.13
 * -> 13.0 (the runtime carries no version string). */
unsigned ib_cuda_version_of_name (const char *path);

#endif
