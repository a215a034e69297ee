/* Image references and the transports behind them, named as skopeo and
 * podman name them:
 *   NAME:TAG                 the local store
 *   oci:DIR[:NAME:TAG]       an OCI image layout
 *   docker-archive:FILE[:NAME:TAG]   a `docker save` archive (classic or OCI)
 *   docker-daemon:NAME:TAG   the Docker Engine, over its unix socket
 *   docker://HOST[:PORT]/REPO[:TAG|@DIGEST]   a registry
 *   scratch                  the empty image
 * This is the table above the transports (transports.h) and their
 * interface (layers/image/transport.h): the programs use it, the transports never
 * do. */
#ifndef IB_REFS_H
#define IB_REFS_H

#include "layers/image/transport.h"

int ib_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err);

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
#endif
