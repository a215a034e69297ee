/* The pipeline: one build from its definition to the tagged image, step by
 * step (builder/core/build.h draws it), and the gates of one phase over a build
 * (imgverify runs the IMAGE ones over an existing image). */
#ifndef IB_PIPELINE_H
#define IB_PIPELINE_H
#include "builder/core/build.h"
/* Run the gates of PHASE over B (imgverify runs the IMAGE ones over an
 * existing image with the same code). */
int ib_build_run_gates (struct ib_build *b, int phase, ib_error_t *err);

/* Build DEF.  On success the image is tagged (and written to the outputs);
 * *MANIFEST receives its digest.  DEF gains the items of its [copy OS/ARCH]
 * sections for the base's platform (ib_definition_select_platform). */
int ib_build_run (struct ib_definition *def, const struct ib_build_options *opt, ib_digest *manifest,
                  ib_error_t *err);

#endif
