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

/* Start the lister for a pull into S; *LISTENER is what the pull is given
 * (ib_remote_options.listener) and must outlive it.  The lister's threads
 * take the layers in the order they came; a transfer that brings a layer
 * while those before it, not listed yet, come to more than AHEAD bytes
 * waits for them to be listed before it goes on (so that the listers read
 * what the pull wrote from the page cache, not the disk).  AHEAD 0: an
 * eighth of the machine's memory, at least 256 MiB. */
struct ib_pull_lister *ib_pull_lister_start (struct ib_store *s, uint64_t ahead, struct ib_pull_listener *listener);

struct ib_pull_lister_stats
{
  size_t listed;  /* layers whose list the lister made or found cached */
  size_t layers;  /* layers of the image it was told of (0: no config came) */
  size_t held;          /* transfers that waited for the listers */
  double held_seconds;  /* the time they waited, each transfer's added up */
  uint64_t ahead;       /* the bound they waited on, in bytes */
};

/* The pull is over (PULL_FAILED: it failed): wait for the lister to list
 * what arrived (nothing more when PULL_FAILED), stop it, free it; what it
 * did in *STATS when not NULL. */
void ib_pull_lister_finish (struct ib_pull_lister *l, bool pull_failed, struct ib_pull_lister_stats *stats);

#endif
