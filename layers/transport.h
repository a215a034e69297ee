/* Image references and the transports behind them, named as skopeo and
 * podman name them:
 *   NAME:TAG                 the local store
 *   oci:DIR[:NAME:TAG]       an OCI image layout
 *   docker-archive:FILE[:NAME:TAG]   a `docker save` archive (classic or OCI)
 *   docker-daemon:NAME:TAG   the Docker Engine, over its unix socket
 *   docker://HOST[:PORT]/REPO[:TAG|@DIGEST]   a registry
 *   scratch                  the empty image
 * A transport is one small interface with one file per transport:
 * `pull` brings an image's manifest, config and layers into the store,
 * checking every digest, and `push` writes an image of the store out. */
#ifndef IB_TRANSPORT_H
#define IB_TRANSPORT_H

#include "image.h"
#include "registry.h"
#include "store.h"

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

int ib_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err);
void ib_ref_clear (struct ib_ref *r);
/* NAME:TAG with a non-empty name and tag, no spaces. */
int ib_check_image_name (const char *name, ib_error_t *err);

/* Resolve REF into the store and load it (scratch gives the empty image of
 * PLATFORM or the host's). */
int ib_image_pull (struct ib_store *s, const char *ref, const struct ib_platform *platform,
                   const struct ib_remote_options *remote, struct ib_image **out, ib_error_t *err);
/* REF as imgverify must see it: its own bytes, never the store's copy of
 * the same digests.  An oci: layout and a docker-archive: file are read in
 * place through a view (store.h: nothing copied, nothing written to them,
 * caches in the local store at LOCAL_ROOT used only for blobs hashed in
 * this run); a registry's blobs are all fetched and hashed as it serves
 * them, those the store has included; the store itself and the Docker
 * Engine (whose archive is read whole into the store) are read as
 * ib_image_pull reads them.  *STORE is the view or the local store, to free
 * with ib_store_free. */
int ib_image_open_in_place (const char *local_root, const char *ref, const struct ib_platform *platform,
                            const struct ib_remote_options *remote, struct ib_store **store, struct ib_image **out,
                            ib_error_t *err);
int ib_image_push (struct ib_store *s, const struct ib_image *img, const char *ref, const char *name,
                   const struct ib_remote_options *remote, ib_error_t *err);
/* Copy the manifest, config and layers of IMG (loaded from SRC) to DST. */
int ib_image_copy_blobs (const struct ib_store *src, struct ib_store *dst, const struct ib_image *img,
                         ib_error_t *err);

/* The docker-archive reader and writer, shared with the Docker Engine
 * transport (which moves the same archives over the daemon's API).  A
 * writer's SKIP_LAYERS leading layers are listed but not included. */
int ib_docker_archive_read (struct ib_store *s, const struct ib_ref *ref, struct ib_descriptor *manifest,
                            ib_error_t *err);
int ib_docker_archive_write (struct ib_store *s, const struct ib_image *img, const char *file, const char *tag,
                             size_t skip_layers, ib_error_t *err);

/* The Docker Engine's socket: $DOCKER_HOST as unix://PATH, else
 * /var/run/docker.sock. */
char *ib_docker_socket_path (void);

extern const struct ib_transport ib_transport_store;
extern const struct ib_transport ib_transport_docker_daemon;
extern const struct ib_transport ib_transport_oci;
extern const struct ib_transport ib_transport_docker_archive;
extern const struct ib_transport ib_transport_registry;

/* A line about a transfer of REF, for the program's report (nothing when
 * the reference came without one). */
void ib_transport_note (const struct ib_ref *ref, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* docker://HOST[:PORT]/REPO[:TAG|@DIGEST] into OUT: LOCATION is HOST/REPO
 * (Docker Hub's names completed as Docker does), NAME the tag (default
 * latest) or digest. */
int ib_registry_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err);

#endif
