/* Provenance: what imgbuild records about an image it built, and what
 * imgverify reads back and checks against the image's content.
 *
 * It is an OCI artifact beside the image, not in it (so two builds of the
 * same content, from a definition or a Dockerfile, on any machine, still
 * have one digest): a manifest with artifactType application/vnd.in-toto+json,
 * an empty config, one layer per in-toto statement (attest.h), and a
 * `subject` naming the image's manifest.  The record imgverify reads (schema
 * imgbuild.provenance/v1) is the predicate of the IB_PREDICATE_BUILD
 * statement.  Images built before carry the old artifact (artifactType
 * application/vnd.imgbuild.provenance.v1+json, the document as its one
 * blob): still read.  The store lists it in index.json
 * (untagged, annotation vnd.imgbuild.subject = the image digest); oci:
 * outputs carry it too.  The image's own manifest carries the OCI
 * annotations org.opencontainers.image.base.name and base.digest.
 *
 * An image has one record per definition it was built from: two builds
 * that give one digest (a definition and a Dockerfile with the same
 * content) keep both, each with its own gate sections and results.  The
 * definition is named by its file's absolute path, in the record and in
 * the artifact's annotation IB_ANNOTATION_DEFINITION; a rebuild from the
 * same file replaces its own record only, and keeps it when its statements
 * say the same, the times a build stamps aside (so a push of the rebuild
 * finds the record in the registry already). */
#ifndef IB_PROVENANCE_H
#define IB_PROVENANCE_H

#include <cjson/cJSON.h>

#include "builder/core/build.h"

/* The document for a build whose gates have run. */
cJSON *ib_provenance_of_build (struct ib_build *b);
/* Store STATEMENTS (in-toto Statements v1 about IMG) as one artifact
 * about IMG: artifactType application/vnd.in-toto+json, one layer per
 * statement annotated with its predicate type, DEFINITION (may be NULL) in
 * IB_ANNOTATION_DEFINITION; *OUT is the artifact's manifest. */
int ib_provenance_write (struct ib_store *s, const struct ib_image *img, cJSON *const *statements, size_t n,
                         const char *definition, struct ib_descriptor *out, ib_error_t *err);
/* Store an artifact about IMG: ARTIFACT_TYPE, an empty config, LAYERS (a
 * JSON array of descriptors, taken), IMG as its subject, DEFINITION (may
 * be NULL) in IB_ANNOTATION_DEFINITION; *OUT is its manifest. */
int ib_artifact_write (struct ib_store *s, const struct ib_image *img, const char *artifact_type, cJSON *layers,
                       const char *definition, struct ib_descriptor *out, ib_error_t *err);
/* The attestations of a build whose gates have run (attest.h: SLSA, the
 * record of ib_provenance_of_build, the SBOM), written as above; or, when
 * the store lists a record of the image from the same definition that
 * says the same but for its times, that one (nothing written). */
int ib_provenance_write_build (struct ib_build *b, struct ib_descriptor *out, ib_error_t *err);
/* Every provenance document recorded for IMG in the store, in the order
 * they were recorded (*N is 0 when there is none).  Free with
 * ib_provenance_free. */
int ib_provenance_read_all (struct ib_store *s, const struct ib_image *img, cJSON ***docs, size_t *n,
                            ib_error_t *err);
void ib_provenance_free (cJSON **docs, size_t n);
/* The definition file a record names ("" when it names none). */
const char *ib_provenance_definition (const cJSON *doc);
/* The image paths a record lists (its overlay's files), *N of them; free
 * each and the array. */
char **ib_provenance_targets (const cJSON *doc, size_t *n);

#endif
