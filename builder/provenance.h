/* Provenance: what imgbuild records about an image it built, and what
 * imgverify reads back and checks against the image's content.
 *
 * It is an OCI artifact beside the image, not in it (so two builds of the
 * same content, from a definition or a Dockerfile, on any machine, still
 * have one digest): a manifest with artifactType
 * application/vnd.imgbuild.provenance.v1+json, an empty config, one blob
 * holding the JSON document (schema imgbuild.provenance/v1), and a
 * `subject` naming the image's manifest.  The store lists it in index.json
 * (untagged, annotation vnd.imgbuild.subject = the image digest); oci:
 * outputs carry it too.  The image's own manifest carries the OCI
 * annotations org.opencontainers.image.base.name and base.digest. */
#ifndef IB_PROVENANCE_H
#define IB_PROVENANCE_H

#include <cjson/cJSON.h>

#include "build.h"

/* The document for a build whose gates have run. */
cJSON *ib_provenance_of_build (struct ib_build *b);
/* Store DOC as an artifact about IMG; *OUT is the artifact's manifest. */
int ib_provenance_write (struct ib_store *s, const struct ib_image *img, const cJSON *doc, struct ib_descriptor *out,
                         ib_error_t *err);
/* The provenance document recorded for IMG in the store (IB_ENOTFOUND when
 * there is none). */
int ib_provenance_read (struct ib_store *s, const struct ib_image *img, cJSON **doc, ib_error_t *err);

#endif
