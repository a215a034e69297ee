/* The transports, one file each, and what they share.  Each implements
 * layers/image/transport.h; the table that picks one for a reference is refs.h. */
#ifndef IB_TRANSPORTS_H
#define IB_TRANSPORTS_H

#include "layers/image/transport.h"

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

/* The same archive streamed: WRITE gets its bytes in order and returns 0,
 * or -1 with *ERR set to stop. */
typedef int (*ib_stream_write_fn) (void *data, const void *buf, size_t len, ib_error_t *err);
int ib_docker_archive_stream (struct ib_store *s, const struct ib_image *img, const char *tag, size_t skip_layers,
                              ib_stream_write_fn write, void *data, ib_error_t *err);

/* What loading an image into one Docker Engine did. */
struct ib_docker_load_result
{
  size_t n_layers;    /* the image's */
  size_t present;     /* leading layers the daemon had (by chain ID) */
  bool had_image;     /* it had the image ID already: only the tag was written */
  uint64_t archive;   /* bytes of the archive sent (0 when it had the image) */
  uint64_t bytes_up;  /* everything sent on the connection: requests, archive */
  ib_digest image_id; /* what the daemon says NAME is, after the load */
};
/* Load IMG as NAME into the Docker Engine at HOST (docker_client.h's
 * syntax; NULL: $DOCKER_HOST, else the local socket), sending only the
 * layers it lacks, streamed (nothing written to disk); then check that
 * NAME is our image ID there.  PROGRESS (may be NULL) gets the archive's
 * bytes as they go. */
int ib_docker_load (struct ib_store *s, const struct ib_image *img, const char *name, const char *host,
                    const struct ib_transfer_report *progress, struct ib_docker_load_result *out, ib_error_t *err);

extern const struct ib_transport ib_transport_store;
extern const struct ib_transport ib_transport_docker_daemon;
extern const struct ib_transport ib_transport_oci;
extern const struct ib_transport ib_transport_docker_archive;
extern const struct ib_transport ib_transport_registry;

/* docker://HOST[:PORT]/REPO[:TAG|@DIGEST] into OUT: LOCATION is HOST/REPO
 * (Docker Hub's names completed as Docker does), NAME the tag (default
 * latest) or digest. */
int ib_registry_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err);

#endif
