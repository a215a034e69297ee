/* What the GPUs of this machine are: index, name and compute capability,
 * asked of the host's CUDA driver in a child process (so that imgbuild
 * itself never initialises CUDA).  The kernel probe plans by them. */
#ifndef IB_GPUINFO_H
#define IB_GPUINFO_H

#include <stddef.h>

#include "kernels/kplan.h"
#include "util/error.h"

/* *OUT (malloc'd, *N entries) for every GPU the driver sees. */
int ib_gpu_query (struct ib_gpu **out, size_t *n, ib_error_t *err);

/* Parse the child's lines "INDEX<TAB>MAJOR.MINOR<TAB>NAME" (exposed for
 * the tests). */
int ib_gpu_parse (const char *text, struct ib_gpu **out, size_t *n, ib_error_t *err);

#endif
