/* Integrity of existing images and of the store: every blob against its
 * digest and size, every layer's diff_id against its uncompressed bytes
 * (or, for bytes this store has read through before, against what that
 * read found), the manifest/config chain and its media types.  Layers are checked in
 * parallel, one streaming reader per thread (bounded memory), with a
 * progress bar on a terminal. */
#ifndef IB_VERIFY_H
#define IB_VERIFY_H

#include <stddef.h>

#include "layers/image/image.h"
#include "layers/store/store.h"
#include "util/requirement.h"
#include "builder/core/report.h"

struct ib_verify_stats
{
  size_t blobs;
  unsigned long long bytes;
  size_t bad;
  size_t layers_read;  /* inflated, both digests computed, every entry checked */
  size_t layers_known; /* hashed only: read through before (readthrough.h) */
  size_t layers_in_pass; /* of those, a view's read where they are by this run's pass: not hashed again */
  /* The privileged entries found (setuid/setgid files, devices, FIFOs,
   * sockets: tarcheck.h), each "layer DIGEST: entry `NAME`: WHY", in the
   * order of the layers; not problems unless STRICT.  Freed by
   * ib_verify_stats_clear. */
  char **privileged;
  size_t n_privileged;
};
void ib_verify_stats_clear (struct ib_verify_stats *st);

struct ib_verify_how
{
  /* The entries that escape the root or lie (layers/tar/tarcheck.h) of
   * the first LENIENT_LAYERS layers are warnings (imgverify
   * --allow-unsafe-base: the base's layers), those of every other layer
   * errors. */
  size_t lenient_layers;
  /* The privileged entries are errors too (imgverify --strict-base);
   * without it they are only listed in the stats. */
  bool strict;
  int jobs; /* threads; 0: one per CPU */
  /* Read every layer through.  Without it, a layer whose blob this store
   * has read through before (layers/read/readthrough.h) has its bytes hashed,
   * and its diff_id and hostile entries are the record's. */
  bool full;
};

/* Problems go to FN; returns -1 only when the check could not run. */
int ib_verify_image (struct ib_store *s, const struct ib_image *img, const struct ib_verify_how *how,
                     struct ib_report *report, ib_problem_fn fn, void *data, struct ib_verify_stats *st,
                     ib_error_t *err);
/* Every blob of the store against its name, every tag's whole closure. */
int ib_verify_store (struct ib_store *s, struct ib_report *report, int jobs, ib_problem_fn fn, void *data,
                     struct ib_verify_stats *st, ib_error_t *err);

#endif
