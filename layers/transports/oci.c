/* oci:DIR[:NAME:TAG] — another OCI image layout, read and written with the
 * store's own code: a layout is a store. */
#include <stdlib.h>

#include "layers/transports/transports.h"

static int
oci_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
          struct ib_descriptor *manifest, ib_error_t *err)
{
  struct ib_store *src;
  if (ib_store_open_existing (ref->location, &src, err) < 0)
    return -1;
  struct ib_descriptor top = { 0 };
  struct ib_image *img = NULL;
  int r = ref->name ? ib_store_resolve (src, ref->name, &top, err) : ib_store_only_image (src, &top, err);
  if (r == 0)
    r = ib_image_load (src, &top, platform, &img, err);
  if (r == 0)
    r = ib_image_copy_blobs (src, s, img, ref->remote ? ref->remote->listener : NULL, err);
  /* Provenance travels with the image. */
  if (r == 0)
    r = ib_store_copy_referrer (src, s, &img->manifest, err);
  if (r == 0)
    ib_descriptor_copy (manifest, &img->manifest);
  ib_image_free (img);
  ib_descriptor_clear (&top);
  ib_store_free (src);
  return r;
}

static int
oci_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
          ib_error_t *err)
{
  struct ib_store *dst;
  if (ib_store_open (ref->location, &dst, err) < 0)
    return -1;
  int r = ib_image_copy_blobs (s, dst, img, NULL, err);
  if (r == 0)
    r = ib_store_tag (dst, ref->name ? ref->name : name, &img->manifest, NULL, err);
  if (r == 0)
    r = ib_store_copy_referrer (s, dst, &img->manifest, err);
  ib_store_free (dst);
  return r;
}

const struct ib_transport ib_transport_oci = { "oci:", oci_pull, oci_push };
