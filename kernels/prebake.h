/* Prebake: compile CUDA sources with the build machine's nvcc into
 * fatbins (device code only: the host CPU does not matter) for every arch
 * of the definition, to be placed by the pipeline in one new layer with a
 * SHA256SUMS file beside them.
 *
 * Compiles run in parallel under a cap (the definition's `jobs`, else
 * $MAX_JOBS, else the number of cores: the lesson of the node that a JIT
 * wedged).  They are cached in the store by the digest of the nvcc used,
 * the flags, the source and every header it includes (as `nvcc -M` lists
 * them); the header list itself is remembered per (nvcc, flags, source), so
 * a rebuild with nothing changed runs nvcc zero times. */
#ifndef IB_PREBAKE_H
#define IB_PREBAKE_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "layers/tar/tarlayer.h"

struct ib_prebake_source
{
  char *source;   /* on the build machine; or an image path when IN_IMAGE */
  bool in_image;  /* then its includes are image folders too */
  char *dest;     /* image path of the fatbin */
  size_t n_includes;
  char **includes;
  char *origin;
};

struct ib_prebake_spec
{
  const struct ib_prebake_source *sources;
  size_t n_sources;
  char *const *arches; /* "sm_121a", "sm_90a", "sm_120f", "compute_121" (PTX) */
  size_t n_arches;
  char *const *flags;  /* extra nvcc flags */
  size_t n_flags;
  int jobs;            /* 0: $MAX_JOBS, else the number of cores */
};

struct ib_prebake_result
{
  struct ib_layer_entry *entries; /* the fatbins and one SHA256SUMS per folder */
  size_t n_entries;
  size_t compiled;  /* sources nvcc compiled */
  size_t cached;    /* sources found in the cache */
  size_t nvcc_runs; /* every nvcc process started, -M and --version included */
  char *nvcc;       /* the nvcc used */
  char *nvcc_version;
  char *flags;      /* the flags, as one string */
  int jobs;
};

int ib_prebake_run (struct ib_store *s, const struct ib_image *base, const struct ib_fsview *base_view,
                    const struct ib_prebake_spec *spec, struct ib_prebake_result *out, ib_error_t *err);
void ib_prebake_result_clear (struct ib_prebake_result *r);

/* $NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc; an IB_EENV
 * error naming what was looked for when there is none. */
int ib_find_nvcc (char **out, ib_error_t *err);

#endif
