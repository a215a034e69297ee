/* The build context: what the pipeline fills and the gates read, and the
 * two views of it that are made on first use.  See build.h. */
#include <string.h>

#include "util/cleanup.h"
#include "builder/core/build.h"

int
ib_build_base_view_judged (struct ib_build *b, const struct ib_fsview_judge *judge, const struct ib_fsview **out,
                           ib_error_t *err)
{
  if (b->base_view == NULL && ib_fsview_of_image_judged (b->store, b->base, judge, &b->base_view, err) < 0)
    return judge ? -1 : ib_error_wrap (err, "base `%s`", b->def->from);
  *out = b->base_view;
  return 0;
}

int
ib_build_base_view (struct ib_build *b, const struct ib_fsview **out, ib_error_t *err)
{
  return ib_build_base_view_judged (b, NULL, out, err);
}

/* The image is its base's layers and the new ones above: its view is the
 * base's, already made for the definition gate, with the new layers
 * stacked on it, so the base's file list is read once per build.  The
 * base's view moves into the image's (the checks of the base come before
 * the image's, and one view of 60,000 entries is some 8 MB); a later
 * ib_build_base_view makes it again. */
static int
image_view_over_base (struct ib_build *b, ib_error_t *err)
{
  const struct ib_image *base = b->base, *img = b->image;
  bool prefix = base && b->base_view && base->n_layers <= img->n_layers;
  for (size_t i = 0; prefix && i < base->n_layers; i++)
    prefix = strcmp (base->layers[i].digest.s, img->layers[i].digest.s) == 0
             && strcmp (base->diff_ids[i].s, img->diff_ids[i].s) == 0;
  if (!prefix)
    return ib_fsview_of_image (b->store, img, &b->image_view, err);
  struct ib_fsview *v = steal_pointer (&b->base_view);
  if (ib_fsview_push_layers (v, b->store, img, base->n_layers, err) < 0)
    {
      ib_fsview_free (v);
      return -1;
    }
  b->image_view = v;
  return 0;
}

int
ib_build_image_view (struct ib_build *b, const struct ib_fsview **out, ib_error_t *err)
{
  if (b->image_view == NULL && image_view_over_base (b, err) < 0)
    return ib_error_wrap (err, "image %s", b->image->manifest.digest.s);
  *out = b->image_view;
  return 0;
}
