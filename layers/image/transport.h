/* The interface every transport implements (the transports are in
 * transports/, the table that picks one for a reference is
 * layers/transports/refs.h): a reference parsed into its kind, location and name,
 * and the two operations on it.  `pull` brings an image's manifest, config
 * and layers into the store, checking every digest; `push` writes an image
 * of the store out.  Also what the command line says about remote
 * transports, and how transports report progress. */
#ifndef IB_TRANSPORT_H
#define IB_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/image/image.h"
#include "layers/store/store.h"

/* What transports tell people: the progress of long transfers (START
 * gives a handle that ADD feeds with the bytes moved and END closes) and
 * one NOTE line per transfer ("pushed …: 5 blobs uploaded …").  The
 * transports call them; the program draws and reports (layers/ knows
 * nothing of the report).  Any may be NULL. */
struct ib_transfer_report
{
  void *(*start) (void *data, const char *what, uint64_t total);
  void (*add) (void *handle, uint64_t n);
  void (*end) (void *handle);
  void (*note) (void *data, const char *text);
  void *data;
};

/* Told, from a transfer's thread, as each blob of an image being pulled
 * is in the store (hashed, its digest right): I = 0 for IMG's config, I =
 * k + 1 for its layer k.  IMG is the pull's own (its manifest and its
 * descriptors; no diff_ids: the config may not be there yet), valid only
 * during the call, which hands the work on, and may make the transfer wait
 * while what it handed on before is too far behind (layers/view/pull_lists.h).
 * A blob the store already had is told of too.  A registry's pull and an
 * OCI layout's call it: the others read their source in one piece. */
struct ib_pull_listener
{
  /* 0; or -1 with ERR set, and the pull stops: what came refuses the image
   * (pull_lists.h, a judge). */
  int (*arrived) (void *data, const struct ib_image *img, size_t i, ib_error_t *err);
  /* Told instead of arrived, by a pull from a local source (another
   * layout), before layer I - 1 is copied into the store: its bytes are at
   * AT, where the listener may read them while the copy goes on (one core
   * copies, the other lists: a 4.4 GB layer's copy was 10 s of a cold
   * build on which one core stayed idle).  NULL: arrived after the copy. */
  int (*arriving) (void *data, const struct ib_image *img, size_t i, const struct ib_blob_loc *at, ib_error_t *err);
  /* With arriving: returns once the listener is done with layer I - 1 that
   * it was told of (its read copies the blob into the store: one read and
   * one hash of it, not two; ib_layer_reader_open_at), 0, or -1 with ERR
   * set, and the pull stops.  The pull then copies what is still not in
   * the store (a list taken from a cache, a read that failed).  NULL: the
   * pull copies each layer beside the listener's read. */
  int (*settled) (void *data, const struct ib_image *img, size_t i, ib_error_t *err);
  void *data;
};

/* What the command line says about remote transports. */
struct ib_remote_options
{
  bool tls_verify_off; /* --tls-verify=false: also allows plain HTTP */
  const char *auth_file; /* --authfile; else $REGISTRY_AUTH_FILE, else Docker's config.json */
  const struct ib_transfer_report *progress; /* NULL: silent */
  bool refetch; /* fetch and hash every blob even when the store has it:
                   imgverify checks what the registry serves */
  unsigned transfer_jobs; /* --transfer-jobs: registry blobs moved at once;
                             0: $IMGBUILD_REGISTRY_JOBS, else 4 */
  const char *docker_host; /* docker-daemon: references: the Docker Engine
                              (layers/transports/docker_client.h); NULL: $DOCKER_HOST,
                              else the local socket */
  const struct ib_pull_listener *listener; /* NULL: none */
};

/* "true"/"false" of --tls-verify=BOOL into OPT. */
int ib_parse_tls_verify (const char *arg, struct ib_remote_options *opt);
/* N (1..64) of --transfer-jobs=N into OPT. */
int ib_parse_transfer_jobs (const char *arg, struct ib_remote_options *opt);


struct ib_ref;

struct ib_transport
{
  const char *prefix; /* "oci:" */
  int (*pull) (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
               struct ib_descriptor *manifest, ib_error_t *err);
  /* NAME is the image's name (NAME:TAG) when the reference gives none. */
  int (*push) (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
               ib_error_t *err);
};

enum ib_ref_kind
{
  IB_REF_SCRATCH,
  IB_REF_STORE,
  IB_REF_OCI,
  IB_REF_DOCKER_ARCHIVE,
  IB_REF_DOCKER_DAEMON,
  IB_REF_REGISTRY,
};

struct ib_ref
{
  enum ib_ref_kind kind;
  char *location; /* DIR, FILE, HOST/REPO; NULL for the store */
  char *name;     /* NAME:TAG, or NULL; a registry's TAG or DIGEST */
  const struct ib_transport *transport;
  const struct ib_remote_options *remote; /* for registries; NULL: defaults */
};

void ib_ref_clear (struct ib_ref *r);
/* NAME:TAG with a non-empty name and tag, no spaces. */
int ib_check_image_name (const char *name, ib_error_t *err);
/* Copy the manifest, config and layers of IMG (loaded from SRC) to DST;
 * LISTENER (may be NULL) is told of the config and of each layer as it is
 * in DST, or, where it can be and DST does not hold it yet, as its copy
 * starts (arriving). */
int ib_image_copy_blobs (const struct ib_store *src, struct ib_store *dst, const struct ib_image *img,
                         const struct ib_pull_listener *listener, ib_error_t *err);
/* A line about a transfer of REF, for the program's report (nothing when
 * the reference came without one). */
void ib_transport_note (const struct ib_ref *ref, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
