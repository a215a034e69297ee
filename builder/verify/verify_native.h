/* imgverify --native REF with no glob: the native link gate over an image
 * on what its build checked, never less.  For each provenance record of
 * the image, the recorded definition's native plan (builder/gates/gates.h:
 * its [native] rules, the objects of the layers the build added, the
 * extension modules of its packages), as the build's gate ran it; for an
 * image with no record (a base, an image imgbuild did not build), every
 * ELF object of the image. */
#ifndef IB_VERIFY_NATIVE_H
#define IB_VERIFY_NATIVE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "layers/image/image.h"
#include "layers/store/store.h"
#include "layers/view/fsview.h"
#include "symbol-check/link-check/linkgate.h"

/* Problems go to FN; *ST sums the checks; with JSON (may be NULL) the
 * objects of every check are in its "objects", and "scope" says what was
 * checked, as *SCOPE (malloc'd, one line for people) does.  AS_LDD loads
 * every object as `ldd -r` does.  -1 only when the check could not run. */
int ib_verify_native_as_built (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, bool as_ldd,
                               ib_problem_fn fn, void *data, struct ib_native_stats *st, cJSON *json, char **scope,
                               ib_error_t *err);

#endif
