/* Signatures made by a signer the user names (imgbuild --sign-with CMD),
 * checked by a verifier the user names (imgverify --verify-signature-with
 * CMD): imgbuild holds no key and implements no signature scheme.
 *
 * What is signed is cosign's "simple signing" payload about the image,
 *
 *   {"critical": {"identity": {"docker-reference": NAME without its tag},
 *                 "image": {"docker-manifest-digest": "sha256:..."},
 *                 "type": "cosign container image signature"},
 *    "optional": {"vnd.imgbuild.attestation": "sha256:...",
 *                 "vnd.imgbuild.definition": "/abs/image.conf"}}
 *
 * where the attestation is the digest of the in-toto artifact written with
 * the image (provenance.h): one signature covers the image and what is
 * attested about it, since changing any statement changes that digest.
 *
 * The command runs as `/bin/sh -c CMD`, the payload on its stdin (git's
 * contract for gpg.program: `gpg --detach-sign`, `openssl dgst -sha256
 * -sign KEY`, `ssh-keygen -Y sign -f KEY -n NS` all read stdin), with
 *
 *   IMGBUILD_SIGN_PAYLOAD  a file holding the payload, for tools that want a path
 *   IMGBUILD_SIGNATURE     signing: where the signature may be written instead
 *                          of stdout; verifying: the signature to check
 *   IMGBUILD_SIGN_DIGEST   the image's manifest digest
 *   IMGBUILD_SIGN_NAME     the name being tagged, or the reference verified
 *
 * Signing: the signature is the command's stdout (or what it wrote to
 * $IMGBUILD_SIGNATURE); a command that fails or writes nothing fails the
 * build (IB_EENV) before any tag.  Verifying: exit 0 means it verifies; the
 * command's stdout goes to stderr (stdout is the report's).
 *
 * The signature is stored the way cosign stores its own in OCI 1.1 mode:
 * an artifact (IB_MT_COSIGN_SIGNATURE) whose `subject` is the image and
 * whose one layer is the payload (IB_MT_COSIGN_SIMPLESIGNING) with the
 * signature, base64, in IB_ANNOTATION_COSIGN_SIGNATURE; it is listed about
 * the image with IB_ANNOTATION_DEFINITION, and travels with the image as
 * the attestations do (oci:, docker-archive:, registries). */
#ifndef IB_SIGN_H
#define IB_SIGN_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/image/image.h"
#include "layers/store/store.h"

#define IB_SIGN_OPTIONAL_ATTESTATION "vnd.imgbuild.attestation"
#define IB_SIGN_OPTIONAL_DEFINITION "vnd.imgbuild.definition"

/* Sign IMG (to be tagged NAME) with CMD: the payload names ATTESTATION
 * (the in-toto artifact, NULL for none) and DEFINITION (may be NULL); the
 * signature artifact is written to S (not listed: ib_store_tag does that)
 * and *OUT is its manifest. */
int ib_sign_image (struct ib_store *s, const struct ib_image *img, const char *name,
                   const struct ib_descriptor *attestation, const char *definition, const char *cmd,
                   struct ib_descriptor *out, ib_error_t *err);

/* A signature artifact read back. */
struct ib_signature
{
  ib_digest artifact;    /* its manifest */
  char *subject;         /* the manifest's subject digest */
  char *payload;         /* the signed bytes */
  size_t payload_len;
  unsigned char *sig;    /* the signature, decoded */
  size_t sig_len;
  char *image;           /* the payload's critical.image.docker-manifest-digest */
  char *attestation;     /* its optional vnd.imgbuild.attestation, or NULL */
};

/* Read the signature artifact ART of S: IB_EINTEGRITY when it is not one
 * (no payload layer, no signature, a payload that is not the JSON above). */
int ib_signature_read (struct ib_store *s, const struct ib_descriptor *art, struct ib_signature *out,
                       ib_error_t *err);
void ib_signature_clear (struct ib_signature *sig);

/* Run the verifier CMD on SIG (NAME: what is verified, for the command's
 * environment): *OK is whether it exited 0; -1 when it could not be run. */
int ib_signature_verify (const struct ib_signature *sig, const char *cmd, const char *name, bool *ok,
                         ib_error_t *err);

#endif
