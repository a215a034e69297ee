/* The build: one context that the pipeline fills step by step and the gates
 * read.  The pipeline is
 *
 *   resolve base → INPUTS gates → overlay layer → prebake layer
 *     → config + manifest → IMAGE gates (over the candidate image)
 *     → attestations (and the signature of --sign-with) → tag → outputs
 *
 * The kernel gate judges the image with its prebaked layer: before it, the
 * kernels that prebake exists to add would be missing by design.
 *
 * and every step before the tag works on content named by digest only (the
 * candidate's blobs are in the store, but nothing names them): a failure
 * anywhere leaves the store's tags as they were. */
#ifndef IB_BUILD_H
#define IB_BUILD_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/image/transport.h"
#include "layers/store/store.h"
#include "layers/tar/tarlayer.h"
#include "builder/definition/definition.h"
#include "builder/core/report.h"

struct ib_cluster_options;

struct ib_build_options
{
  const char *store;     /* NULL: ib_store_default_path */
  const char *from;      /* overrides the definition's base */
  const char *name;      /* overrides the definition's name */
  const char *platform;  /* OS/ARCH */
  char *const *outputs;  /* references to write the image to after the tag */
  size_t n_outputs;
  char *const *reports;  /* --report junit:FILE / json:FILE (junit.h) */
  size_t n_reports;
  struct ib_remote_options remote; /* registries: TLS, credentials */
  char *const *load_hosts; /* --load: Docker Engines to load the tagged image
                              into ("" this machine's), in parallel */
  size_t n_load_hosts;
  int jobs;              /* --jobs: threads deflating new layers; 0: the online CPUs */
  bool json;
  bool quiet;
  bool allow_unsafe_base; /* build over a base whose entries escape the root, each a warning */
  bool strict_base;       /* refuse a base with privileged entries (setuid files, devices) too */
  const char *sign_with;  /* --sign-with: the signer's command (sign.h), run before the tag */
  /* --hosts: the smoke test across these nodes, through a launcher
   * (smoke_cluster.h); NULL: on this machine's GPUs. */
  const struct ib_cluster_options *cluster;
  enum
  {
    IB_SMOKE_AUTO,     /* run when GPUs exist, else say plainly that it skipped */
    IB_SMOKE_REQUIRED, /* no tag without a pass */
    IB_SMOKE_OFF,
  } smoke;
};

struct ib_build
{
  struct ib_definition *def; /* its [copy OS/ARCH] lines are selected once the base is known */
  const struct ib_build_options *opt;
  const char *name;
  struct ib_store *store;
  struct ib_image *base;
  struct ib_fsview *base_view; /* computed on first use */
  struct ib_layer_entry *entries;
  size_t n_entries;
  struct ib_layer_result overlay;
  struct ib_prebake_result prebake;
  struct ib_layer_result prebake_layer; /* when the definition prebakes */
  struct ib_image *image;        /* the candidate, untagged until every gate passed */
  size_t first_overlay_layer;    /* the layers from here on are this build's */
  /* imgverify, a recorded definition: the files its record lists (the
   * definition kept only its gate lines, not its [copy] items), from which
   * the gates' default packages come as the build's came from its items. */
  char *const *recorded_targets;
  size_t n_recorded_targets;
  long long started;             /* Unix time the build started (provenance) */
  bool keep_going;               /* run every gate even after one failed (imgverify) */
  struct ib_fsview *image_view;  /* the candidate's merged file system */
  struct ib_report *report;
  const char *definition_name; /* how messages name def; NULL: def->file */
  char *skip_reason;           /* set by ib_gate_skip, taken by the gate's row */
  const char *failed_gate;     /* the gate whose error stopped the run, if one did */
};

/* The base's merged file system, from the per-layer caches. */
int ib_build_base_view (struct ib_build *b, const struct ib_fsview **out, ib_error_t *err);
/* The same, JUDGE told each layer's hazards as it is stacked (fsview.h):
 * the base's entries refused before the layers above are read. */
int ib_build_base_view_judged (struct ib_build *b, const struct ib_fsview_judge *judge, const struct ib_fsview **out,
                               ib_error_t *err);

/* The candidate image's merged file system (base + overlay). */
int ib_build_image_view (struct ib_build *b, const struct ib_fsview **out, ib_error_t *err);

#endif
