/* A base's file lists made while the base is pulled.
 *
 * A build over a base in a registry fetches the base's blobs (several at
 * once, each hashed as it arrives), then reads each layer again to make its
 * file list (fsview.h: inflate, the diff_id, every file's digest, and the
 * indexers fed on the way).  Done one after the other, a cold build costs
 * the download plus the list pass.  The lister is a thread that a pull
 * tells of each blob as it lands in the store (the config, then layers in
 * whatever order the transfers end): it lists each layer as soon as both
 * the layer and the config (its diff_ids) are there, while the rest of the
 * base is still downloading, so that the build finds every list cached and
 * the cost is the longer of the two, not their sum.  The layer's second
 * read is from the page cache the download just filled: a pull that runs
 * ahead of the listers by more than a bound waits for them (below), or a
 * base larger than the page cache is read back from the disk.
 *
 * The lists it makes are those ib_fs_list_layer makes, cached the same way
 * and checked the same way (the blob's digest and its diff_id): a layer it
 * cannot list (a diff_id that differs from the config's, a tar that is not
 * one) is left unlisted, and the build's own pass reads it and says why. */
#ifndef IB_PULL_LISTS_H
#define IB_PULL_LISTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layers/image/transport.h"

struct ib_pull_lister;

/* Judging the entries of each layer as it is listed (a base's setuid files
 * with --strict-base, entries that escape the root): REFUSES says whether
 * one hostile entry (as ib_fsview_hazards gives it) refuses the image; it
 * runs on the lister's threads and must only read.  The transfer that
 * brings the image's first layer waits for its list and judgement (a
 * distribution's setuid files and devices are in its first layer): a
 * refused layer stops the pull at that transfer, or at the next one to end,
 * and the build is refused after that layer's bytes, not the image's. */
struct ib_pull_judge
{
  bool (*refuses) (void *data, const char *hazard);
  void *data;
};

/* Start the lister for a pull into S; *LISTENER is what the pull is given
 * (ib_remote_options.listener) and must outlive it.  The lister's threads
 * take the layers in the order they came; a transfer that brings a layer
 * while those before it, not listed yet, come to more than AHEAD bytes
 * waits for them to be listed before it goes on (so that the listers read
 * what the pull wrote from the page cache, not the disk).  AHEAD 0: an
 * eighth of the machine's memory, at least 256 MiB. */
struct ib_pull_lister *ib_pull_lister_start (struct ib_store *s, uint64_t ahead, const struct ib_pull_judge *judge,
                                             struct ib_pull_listener *listener);

struct ib_pull_lister_stats
{
  size_t listed;  /* layers whose list the lister made or found cached */
  size_t layers;  /* layers of the image it was told of (0: no config came) */
  size_t held;          /* transfers that waited for the listers */
  double held_seconds;  /* the time they waited, each transfer's added up */
  uint64_t ahead;       /* the bound they waited on, in bytes */
  /* The first layer that the judge refused, if one was: its number, and
   * all of its hostile entries (the caller's: ib_pull_lister_stats_clear). */
  bool refused;
  size_t refused_layer;
  char **hazards;
  size_t n_hazards;
};

void ib_pull_lister_stats_clear (struct ib_pull_lister_stats *stats);

/* The pull is over (PULL_FAILED: it failed): wait for the lister to list
 * what arrived (nothing more when PULL_FAILED), stop it, free it; what it
 * did in *STATS when not NULL. */
void ib_pull_lister_finish (struct ib_pull_lister *l, bool pull_failed, struct ib_pull_lister_stats *stats);

#endif
