/* Integrity of existing images and of the store: every blob against its
 * digest and size, every layer's diff_id against its uncompressed bytes,
 * the manifest/config chain and its media types.  Layers are checked in
 * parallel, one streaming reader per thread (bounded memory), with a
 * progress bar on a terminal. */
#ifndef IB_VERIFY_H
#define IB_VERIFY_H

#include <stddef.h>

#include "../layers/image.h"
#include "../store/store.h"
#include "../util/requirement.h"
#include "../core/report.h"

struct ib_verify_stats
{
  size_t blobs;
  unsigned long long bytes;
  size_t bad;
};

/* Problems go to FN; returns -1 only when the check could not run.  The
 * hostile entries (layers/tarcheck.h) of the first LENIENT_LAYERS layers
 * are warnings (imgverify --allow-unsafe-base: the base's layers), those
 * of every other layer errors. */
int ib_verify_image (struct ib_store *s, const struct ib_image *img, size_t lenient_layers, struct ib_report *report,
                     int jobs, ib_problem_fn fn, void *data, struct ib_verify_stats *st, ib_error_t *err);
/* Every blob of the store against its name, every tag's whole closure. */
int ib_verify_store (struct ib_store *s, struct ib_report *report, int jobs, ib_problem_fn fn, void *data,
                     struct ib_verify_stats *st, ib_error_t *err);

#endif
