/* The transports, one file each, and what they share.  Each implements
 * layers/transport.h; the table that picks one for a reference is refs.h. */
#ifndef IB_TRANSPORTS_H
#define IB_TRANSPORTS_H

#include "../layers/transport.h"

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

/* docker://HOST[:PORT]/REPO[:TAG|@DIGEST] into OUT: LOCATION is HOST/REPO
 * (Docker Hub's names completed as Docker does), NAME the tag (default
 * latest) or digest. */
int ib_registry_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err);

#endif
