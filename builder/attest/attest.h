/* Attestations in the formats that the ecosystem reads: in-toto Statements
 * v1 (https://github.com/in-toto/attestation, spec/v1/statement.md), each
 * about the image's manifest digest.
 *
 *   - SLSA Provenance v1 (https://slsa.dev/provenance/v1): the build
 *     definition (the definition file by digest, the base by digest, every
 *     source copied, nvcc by digest with its version and flags when the
 *     definition prebakes) and the run (builder, start and end times);
 *   - imgbuild's own facts (IB_PREDICATE_BUILD, documented by
 *     docs/imgbuild-build-predicate.schema.json): the imgbuild.provenance/v1
 *     document, the gate sections and results that imgverify reruns;
 *   - the SBOM (sbom.h), predicate type IB_PREDICATE_SPDX.
 *
 * provenance.h stores them as one OCI artifact about the image. */
#ifndef IB_ATTEST_H
#define IB_ATTEST_H

#include <cjson/cJSON.h>

#include "builder/core/build.h"

#define IB_INTOTO_STATEMENT_V1 "https://in-toto.io/Statement/v1"
#define IB_PREDICATE_SLSA "https://slsa.dev/provenance/v1"
#define IB_PREDICATE_SPDX "https://spdx.dev/Document"
#define IB_PREDICATE_BUILD "https://imgbuild.invalid/attestation/build/v1"
#define IB_SLSA_BUILD_TYPE "https://imgbuild.invalid/buildtypes/definition/v1"
#define IB_SLSA_BUILDER_ID "https://imgbuild.invalid/builder/imgbuild"

/* A statement about IMG (named NAME) with PREDICATE (taken). */
cJSON *ib_attest_statement (const struct ib_image *img, const char *name, const char *predicate_type,
                            cJSON *predicate);
/* The SLSA Provenance v1 predicate of a build whose gates have run. */
cJSON *ib_attest_slsa (struct ib_build *b);
/* "2026-11-30T17:47:47Z" for the Unix time T. */
void ib_rfc3339 (long long t, char buf[32]);

/* Check that STATEMENT is an in-toto Statement v1 about the manifest
 * DIGEST; WHAT names it in the error (IB_EINTEGRITY). */
int ib_attest_check_statement (const cJSON *statement, const ib_digest *digest, const char *what, ib_error_t *err);

#endif
