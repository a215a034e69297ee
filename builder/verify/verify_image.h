/* imgverify REF: an existing image's integrity, then, for each definition
 * it was built from (each provenance record, or the one --definition
 * names), its recorded files against its content and the same IMAGE gates
 * as at build time.
 *
 * A gate that checked nothing is a skip with its reason, never a pass; the
 * gates that must have run (--require-gates, by default those that ran when
 * the image was built) make the run fail when they did not. */
#ifndef IB_VERIFY_IMAGE_H
#define IB_VERIFY_IMAGE_H

#include <stdbool.h>

#include "layers/image/transport.h"

struct ib_cluster_options;

struct ib_verify_image_options
{
  const char *store;      /* NULL: ib_store_default_path */
  const char *definition; /* check this definition only; NULL: every recorded one */
  /* Comma-separated gate names that must run, "none", or NULL for the
   * default: the symbol and kernel gates that passed in a recorded build. */
  const char *require_gates;
  bool smoke, json;
  bool allow_unsafe_base; /* escaping entries of the base's layers warn (verify.h) */
  bool strict_base;       /* privileged entries (setuid files, devices) are errors (verify.h) */
  bool full;              /* read every layer through (verify.h) */
  int jobs;
  char *const *reports; /* --report junit:FILE / json:FILE (junit.h) */
  size_t n_reports;
  struct ib_remote_options remote;
  const char *verify_signature_with; /* the verifier's command (sign.h); NULL: signatures are listed, not verified */
  const struct ib_cluster_options *cluster; /* --hosts (smoke_cluster.h) */
};

/* Names that --require-gates accepts: 0, or -1 with a usage error. */
int ib_verify_parse_gates (const char *list, ib_error_t *err);

/* Verify REF and print the report; returns the exit code. */
int ib_verify_image_ref (const char *ref, const struct ib_verify_image_options *o);

#endif
