/* The table: which transport a reference names, and the operations on an
 * image by reference that the programs use. */
#include "layers/transports/refs.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/transports/transports.h"

/* "LOCATION[:NAME:TAG]": the location ends at the first ':' as in skopeo,
 * so a path with a colon in it cannot be named this way. */
static void
split_location (const char *rest, struct ib_ref *out)
{
  const char *colon = strchr (rest, ':');
  if (colon == NULL)
    {
      out->location = ib_xstrdup (rest);
      return;
    }
  out->location = strndup (rest, (size_t) (colon - rest));
  if (colon[1])
    out->name = ib_xstrdup (colon + 1);
}

int
ib_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (strcmp (s, "scratch") == 0)
    {
      out->kind = IB_REF_SCRATCH;
      return 0;
    }
  if (strncmp (s, "oci:", 4) == 0)
    {
      out->kind = IB_REF_OCI;
      out->transport = &ib_transport_oci;
      split_location (s + 4, out);
    }
  else if (strncmp (s, "docker-archive:", 15) == 0)
    {
      out->kind = IB_REF_DOCKER_ARCHIVE;
      out->transport = &ib_transport_docker_archive;
      split_location (s + 15, out);
    }
  else if (strncmp (s, "docker-daemon:", 14) == 0)
    {
      /* The whole rest is Docker's own reference. */
      out->kind = IB_REF_DOCKER_DAEMON;
      out->transport = &ib_transport_docker_daemon;
      out->location = ib_xstrdup (s + 14);
    }
  else if (strncmp (s, "docker://", 9) == 0)
    return ib_registry_ref_parse (s, out, err);
  else if (strchr (s, ':') && !strchr (s, '/'))
    {
      out->kind = IB_REF_STORE;
      out->transport = &ib_transport_store;
      out->name = ib_xstrdup (s);
    }
  else
    return ib_error (err, IB_EUSAGE,
                     "`%s` is not an image reference (NAME:TAG, oci:DIR[:NAME:TAG], docker-archive:FILE, "
                     "docker-daemon:NAME:TAG, docker://HOST/REPO:TAG, scratch)", s);
  if (out->location && out->location[0] == '\0')
    {
      ib_ref_clear (out);
      return ib_error (err, IB_EUSAGE, "`%s` names no path", s);
    }
  /* In the store a name is NAME:TAG; in a layout or archive it is whatever
   * names the image there (skopeo's oci:DIR:x). */
  if (out->name && (out->kind == IB_REF_STORE ? ib_check_image_name (out->name, err) < 0
                                               : strpbrk (out->name, " \t\n") != NULL))
    {
      if (err && *err == NULL)
        ib_error (err, IB_EUSAGE, "`%s` names the image with a blank in it", s);
      ib_ref_clear (out);
      return -1;
    }
  return 0;
}

int
ib_image_pull (struct ib_store *s, const char *text, const struct ib_platform *platform,
               const struct ib_remote_options *remote, struct ib_image **out, ib_error_t *err)
{
  struct ib_ref ref;
  if (ib_ref_parse (text, &ref, err) < 0)
    return -1;
  ref.remote = remote;
  if (ref.kind == IB_REF_SCRATCH)
    {
      struct ib_platform host;
      ib_platform_host (&host);
      *out = ib_image_scratch (platform ? platform : &host);
      return 0;
    }
  struct ib_descriptor manifest = { 0 };
  int r = ref.transport->pull (s, &ref, platform, &manifest, err);
  if (r == 0)
    r = ib_image_load (s, &manifest, platform, out, err);
  ib_descriptor_clear (&manifest);
  ib_ref_clear (&ref);
  return r < 0 ? ib_error_wrap (err, "image `%s`", text) : 0;
}

/* The manifest that REF names inside the view S. */
static int
view_manifest (struct ib_store *s, const struct ib_ref *ref, struct ib_descriptor *out, ib_error_t *err)
{
  if (ref->kind == IB_REF_DOCKER_ARCHIVE)
    return ib_docker_archive_read (s, ref, out, err);
  return ref->name ? ib_store_resolve (s, ref->name, out, err) : ib_store_only_image (s, out, err);
}

int
ib_image_open_in_place (const char *local_root, const char *text, const struct ib_platform *platform,
                        const struct ib_remote_options *remote, struct ib_store **store, struct ib_image **out,
                        ib_error_t *err)
{
  struct ib_ref ref;
  if (ib_ref_parse (text, &ref, err) < 0)
    return -1;
  struct ib_store *s = NULL;
  int r;
  if (ref.kind == IB_REF_OCI || ref.kind == IB_REF_DOCKER_ARCHIVE)
    {
      r = ref.kind == IB_REF_OCI ? ib_store_open_layout_view (local_root, ref.location, &s, err)
                                 : ib_store_open_view (local_root, ref.location, &s, err);
      struct ib_descriptor manifest = { 0 };
      if (r == 0)
        r = view_manifest (s, &ref, &manifest, err);
      if (r == 0)
        r = ib_image_load (s, &manifest, platform, out, err);
      ib_descriptor_clear (&manifest);
      if (r < 0)
        ib_error_wrap (err, "image `%s`", text);
    }
  else
    {
      struct ib_remote_options o = remote ? *remote : (struct ib_remote_options) { 0 };
      o.refetch = ref.kind == IB_REF_REGISTRY;
      r = ib_store_open (local_root, &s, err);
      if (r == 0)
        r = ib_image_pull (s, text, platform, &o, out, err);
    }
  ib_ref_clear (&ref);
  if (r < 0)
    {
      ib_store_free (s);
      return -1;
    }
  *store = s;
  return 0;
}

int
ib_image_push (struct ib_store *s, const struct ib_image *img, const char *text, const char *name,
               const struct ib_remote_options *remote, ib_error_t *err)
{
  struct ib_ref ref;
  if (ib_ref_parse (text, &ref, err) < 0)
    return -1;
  ref.remote = remote;
  int r = ref.kind == IB_REF_SCRATCH ? ib_error (err, IB_EUSAGE, "cannot write to scratch")
                                     : ref.transport->push (s, img, &ref, name, err);
  ib_ref_clear (&ref);
  return r < 0 ? ib_error_wrap (err, "write `%s`", text) : 0;
}

