#include "layers/image/transport.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

int
ib_check_image_name (const char *name, ib_error_t *err)
{
  const char *colon = strrchr (name, ':');
  if (colon == NULL || colon == name || colon[1] == '\0' || strchr (colon, '/'))
    return ib_error (err, IB_EUSAGE, "image name `%s` is not NAME:TAG", name);
  for (const char *c = name; *c; c++)
    if (*c <= ' ' || *c == '@' || *c == 0x7f)
      return ib_error (err, IB_EUSAGE, "image name `%s` has a character that a reference cannot hold", name);
  return 0;
}

void
ib_transport_note (const struct ib_ref *ref, const char *fmt, ...)
{
  const struct ib_transfer_report *t = ref->remote ? ref->remote->progress : NULL;
  if (t == NULL || t->note == NULL)
    return;
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *text = ib_xvasprintf (fmt, ap);
  va_end (ap);
  t->note (t->data, text);
}

void
ib_ref_clear (struct ib_ref *r)
{
  free (r->location);
  free (r->name);
  memset (r, 0, sizeof (*r));
}

int
ib_image_copy_blobs (const struct ib_store *src, struct ib_store *dst, const struct ib_image *img,
                     const struct ib_pull_listener *listener, ib_error_t *err)
{
  /* A listener loads the image from DST as its layers come: the manifest
   * goes first then, as a registry's pull puts it.  A blob is not a name
   * (DST names an image in its index, after the copy), so a copy cut short
   * leaves blobs that nothing names, for gc. */
  if (listener && ib_store_copy_blob (src, dst, &img->manifest, err) < 0)
    return -1;
  if (ib_store_copy_blob (src, dst, &img->config, err) < 0)
    return -1;
  if (listener && listener->arrived (listener->data, img, 0, err) < 0)
    return -1;
  /* The layers the listener reads where they are: with settled, its read
   * copies them (they are all told of first, so that its threads read
   * several at once), else the copy goes on beside the read. */
  cleanup_free bool *early = ib_xcalloc (img->n_layers ? img->n_layers : 1, sizeof (*early));
  bool copies = listener && listener->arriving && listener->settled;
  for (size_t i = 0; i < img->n_layers; i++)
    {
      struct ib_blob_loc at = { 0 };
      early[i] = listener && listener->arriving && !ib_store_has_blob (dst, &img->layers[i].digest)
                 && ib_store_locate_blob (src, &img->layers[i].digest, &at, NULL) == 0;
      int r = early[i] ? listener->arriving (listener->data, img, i + 1, &at, err) : 0;
      ib_blob_loc_clear (&at);
      if (r < 0 || (!(early[i] && copies) && ib_store_copy_blob (src, dst, &img->layers[i], err) < 0))
        return -1;
      if (listener && !early[i] && listener->arrived (listener->data, img, i + 1, err) < 0)
        return -1;
    }
  /* Named by the listener's read (its size was checked there), or copied
   * now. */
  for (size_t i = 0; copies && i < img->n_layers; i++)
    if (early[i]
        && (listener->settled (listener->data, img, i + 1, err) < 0
            || (!ib_store_has_blob (dst, &img->layers[i].digest)
                && ib_store_copy_blob (src, dst, &img->layers[i], err) < 0)))
      return -1;
  /* The manifest last: a layout never names an image whose blobs it lacks. */
  return ib_store_copy_blob (src, dst, &img->manifest, err);
}

int
ib_parse_tls_verify (const char *arg, struct ib_remote_options *opt)
{
  if (strcmp (arg, "true") == 0 || strcmp (arg, "false") == 0)
    {
      opt->tls_verify_off = strcmp (arg, "false") == 0;
      return 0;
    }
  return -1;
}

int
ib_parse_transfer_jobs (const char *arg, struct ib_remote_options *opt)
{
  char *end;
  long n = strtol (arg, &end, 10);
  if (*arg == '\0' || *end != '\0' || n < 1 || n > 64)
    return -1;
  opt->transfer_jobs = (unsigned) n;
  return 0;
}
