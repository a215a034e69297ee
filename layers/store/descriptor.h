/* OCI content descriptors and media types. */
#ifndef IB_DESCRIPTOR_H
#define IB_DESCRIPTOR_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "layers/store/digest.h"

#define IB_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define IB_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define IB_MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define IB_MT_OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define IB_MT_OCI_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define IB_MT_OCI_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define IB_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define IB_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define IB_MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define IB_MT_DOCKER_LAYER_GZIP "application/vnd.docker.image.rootfs.diff.tar.gzip"
#define IB_MT_DOCKER_LAYER "application/vnd.docker.image.rootfs.diff.tar"

#define IB_ANNOTATION_REF_NAME "org.opencontainers.image.ref.name"
#define IB_ANNOTATION_SUBJECT "vnd.imgbuild.subject"
/* On a provenance artifact's manifest (and copied to its index entry): the
 * definition the build came from.  A subject has one artifact per
 * definition: a rebuild from the same definition replaces its own. */
#define IB_ANNOTATION_DEFINITION "vnd.imgbuild.definition"
#define IB_ANNOTATION_BASE_NAME "org.opencontainers.image.base.name"
#define IB_ANNOTATION_BASE_DIGEST "org.opencontainers.image.base.digest"
#define IB_MT_OCI_EMPTY "application/vnd.oci.empty.v1+json"
/* The provenance artifacts imgbuild wrote before it spoke in-toto: one
 * layer, the imgbuild.provenance/v1 document.  Still read. */
#define IB_MT_PROVENANCE "application/vnd.imgbuild.provenance.v1+json"
/* An artifact of in-toto Statements v1 (one per layer, each layer of this
 * media type with the annotation IB_ANNOTATION_PREDICATE), as BuildKit and
 * cosign attach them. */
#define IB_MT_INTOTO "application/vnd.in-toto+json"
#define IB_ANNOTATION_PREDICATE "in-toto.io/predicate-type"
/* A signature, laid out as cosign lays out its own in OCI 1.1 mode: an
 * artifact of this type whose one layer is the signed payload (cosign's
 * "simple signing" JSON) with the signature, base64, in the annotation
 * IB_ANNOTATION_COSIGN_SIGNATURE (builder/attest/sign.h). */
#define IB_MT_COSIGN_SIGNATURE "application/vnd.dev.cosign.artifact.sig.v1+json"
#define IB_MT_COSIGN_SIMPLESIGNING "application/vnd.dev.cosign.simplesigning.v1+json"
#define IB_ANNOTATION_COSIGN_SIGNATURE "dev.cosignproject.cosign/signature"

struct ib_descriptor
{
  char *media_type;
  ib_digest digest;
  uint64_t size;
};

void ib_descriptor_clear (struct ib_descriptor *d);
void ib_descriptor_copy (struct ib_descriptor *dst, const struct ib_descriptor *src);
/* Parse {"mediaType","digest","size"}; the digest is validated. */
int ib_descriptor_from_json (const cJSON *j, struct ib_descriptor *d, ib_error_t *err);
cJSON *ib_descriptor_to_json (const struct ib_descriptor *d);

bool ib_media_type_is_layer (const char *mt);
/* Whether an artifactType is imgbuild's provenance, old or in-toto, or a
 * signature: the referrers that travel with an image. */
bool ib_is_attestation_type (const char *artifact_type);
/* The artifact type of an artifact MANIFEST, as the distribution spec's
 * referrers API reports it: its artifactType, else its config's mediaType;
 * NULL when it has neither.  What an index entry that lost its
 * artifactType (skopeo copies the entries without it) is told by. */
const char *ib_manifest_artifact_type (const cJSON *manifest);
/* Whether a new referrer of type NEW (from some definition) replaces a
 * listed one of type OLD from the same definition: new attestations replace
 * the old ones and the signatures of them (which sign what is replaced), a
 * new signature replaces only signatures. */
bool ib_referrer_replaces (const char *new_type, const char *old_type);
/* The OCI media type that carries the same bytes as MT (Docker's layer types
 * map to OCI's); NULL when MT is not a layer type we can carry. */
const char *ib_layer_media_type_to_oci (const char *mt);

#endif
