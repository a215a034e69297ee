/* A client of one repository on a registry, per the OCI distribution spec
 * (what `docker://HOST[:PORT]/REPO` names), over libcurl.
 *
 * Every call authenticates as the registry asks (anonymous, Basic, or a
 * Bearer token from the realm its WWW-Authenticate names, fetched again when
 * a request needs a scope the token lacks, such as pull on another
 * repository for a mount) and retries with backoff on 429, 5xx and broken
 * connections.  Credentials come from the auth file only and never appear
 * in a message.  Blobs stream through the store's blob writer, which checks
 * their digest and size; nothing large is held in memory. */
#ifndef IB_REGISTRY_H
#define IB_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/store/descriptor.h"
#include "layers/store/store.h"
#include "layers/image/transport.h"
#include "layers/registry/progress.h" /* struct ib_registry_stats */

struct ib_registry;

/* HOST is "name[:port]"; REPO a repository path.  PUSH asks for push access
 * as well as pull. */
int ib_registry_open (const char *host, const char *repo, bool push, const struct ib_remote_options *opt,
                      struct ib_registry **out, ib_error_t *err);
/* Another client of M's repository, opened as M was, over the scheme M
 * settled on and with its credentials and token (the parallel transfers'
 * workers). */
int ib_registry_open_like (const struct ib_registry *m, struct ib_registry **out, ib_error_t *err);
void ib_registry_free (struct ib_registry *r);
const struct ib_registry_stats *ib_registry_stats (const struct ib_registry *r);
/* Blob bytes moved from now until ib_registry_progress_end count towards a
 * progress bar of TOTAL bytes named WHAT (when the options asked for one). */
void ib_registry_progress_begin (struct ib_registry *r, const char *what, uint64_t total);
void ib_registry_progress_add (struct ib_registry *r, uint64_t n);
void ib_registry_progress_end (struct ib_registry *r);

/* A manifest or index by tag or digest: its exact bytes, media type and
 * digest.  A digest reference (and a Docker-Content-Digest header) must
 * match the bytes.  IB_ENOTFOUND when the registry has none. */
int ib_registry_get_manifest (struct ib_registry *r, const char *reference, char **body, size_t *len,
                              char **media_type, ib_digest *digest, ib_error_t *err);
/* Fetch the blob D into the store, verified while it streams; nothing when
 * the store has it, unless the options asked to refetch. */
int ib_registry_fetch_blob (struct ib_registry *r, struct ib_store *s, const struct ib_descriptor *d,
                            ib_error_t *err);
/* Make the repository hold the store's blob D: nothing when it has it
 * (HEAD), a cross-repository mount from MOUNT_FROM (a valid repository name
 * on the same registry) when given and the registry agrees, else an upload: monolithic up
 * to the chunk size, chunked above it, resumed where the registry says it
 * stopped when a chunk fails. */
int ib_registry_push_blob (struct ib_registry *r, struct ib_store *s, const struct ib_descriptor *d,
                           const char *mount_from, ib_error_t *err);
/* What ib_registry_each_blob does with one blob D (the I-th), through the
 * client R of the thread it runs on. */
typedef int (*ib_registry_blob_fn) (struct ib_registry *r, const struct ib_descriptor *d, size_t i, void *ctx,
                                    ib_error_t *err);
/* FN on each of the N blobs, up to the client's job count at once
 * (--transfer-jobs, else $IMGBUILD_REGISTRY_JOBS, else 4), each extra
 * thread with its own client opened as R was; one job: in order, on R, as a
 * plain loop.  The first error wins: no blob is started after it, every
 * thread is joined, and it is returned as FN gave it.  A digest listed twice
 * is done once in parallel, then again on R (as a loop would find it
 * there).  The workers' stats are added to R's and their bytes fed to R's
 * progress bar.  FN and CTX must be safe on several threads at once. */
int ib_registry_each_blob (struct ib_registry *r, const struct ib_descriptor *const *blobs, size_t n,
                           ib_registry_blob_fn fn, void *ctx, ib_error_t *err);
/* The job count of the options: --transfer-jobs, else
 * $IMGBUILD_REGISTRY_JOBS, else 4. */
unsigned ib_registry_jobs (const struct ib_remote_options *opt);

/* PUT a manifest under REFERENCE (a tag or its digest). */
int ib_registry_put_manifest (struct ib_registry *r, const char *reference, const char *media_type,
                              const char *body, size_t len, ib_error_t *err);

#endif
