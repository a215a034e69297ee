#include "builder/indexers.h"

#include <stdlib.h>
#include <string.h>

#include "builder/gates/gates.h"

void
ib_build_indexers_add (struct ib_build_indexers *x, const struct ib_definition *d, struct ib_store *s)
{
  memset (x, 0, sizeof (*x));
  const char *off = getenv ("IMGBUILD_NO_INDEXERS");
  if (off && *off && strcmp (off, "0") != 0)
    return; /* the gates read the layers themselves (tests compare both ways) */
  ib_error_t e = NULL;
  x->sbom_on = ib_sbom_indexer_init (s, &x->sbom, &e) == 0;
  if (x->sbom_on)
    ib_store_add_indexer (s, &x->sbom.ix);
  ib_error_release (&e);
  /* The SBOM lists the GPU code of every shared object. */
  x->kernels_on = ib_kernels_indexer_init (s, &x->kernels, &e) == 0;
  if (x->kernels_on)
    ib_store_add_indexer (s, &x->kernels.ix);
  ib_error_release (&e);
  /* The toolchains and driver gates' CUDA versions: without them a
   * cold build reads CUDA's libraries out of their layer once more. */
  if (d->target.present)
    {
      x->cudaver_on = ib_cudaver_indexer_init (s, &x->cudaver, &e) == 0;
      if (x->cudaver_on)
        ib_store_add_indexer (s, &x->cudaver.ix);
      ib_error_release (&e);
    }
  /* The native gate's records, and the symbol gate's too: its syntax
   * check runs the image's interpreter in a chroot of the files the loader
   * maps for it (builder/pyroot.c), found from these records; without
   * them it extracts every layer of the image whole. */
  if (d->native.enabled || d->python_path)
    {
      x->native_on = ib_native_indexer_init (s, &x->native, &e) == 0;
      if (x->native_on)
        ib_store_add_indexer (s, &x->native.ix);
      ib_error_release (&e);
    }
  if (d->python_path)
    {
      char *const *packages = d->check_packages;
      size_t n = d->n_check_packages;
      if (n == 0)
        {
          x->defaults = ib_default_packages (d, &x->n_defaults);
          packages = x->defaults;
          n = x->n_defaults;
        }
      x->python_on = n > 0 && ib_python_indexer_init (s, d->python_path, packages, n, &x->python, &e) == 0;
      if (x->python_on)
        ib_store_add_indexer (s, &x->python.ix);
      ib_error_release (&e);
    }
}

void
ib_build_indexers_clear (struct ib_build_indexers *x)
{
  if (x->native_on)
    ib_native_indexer_clear (&x->native);
  if (x->python_on)
    ib_python_indexer_clear (&x->python);
  if (x->sbom_on)
    ib_sbom_indexer_clear (&x->sbom);
  if (x->kernels_on)
    ib_kernels_indexer_clear (&x->kernels);
  if (x->cudaver_on)
    ib_cudaver_indexer_clear (&x->cudaver);
  for (size_t i = 0; i < x->n_defaults; i++)
    free (x->defaults[i]);
  free (x->defaults);
  memset (x, 0, sizeof (*x));
}
