/* A registry's JSON (layers/image/image.c, layers/registry/http.c): manifests
 * and indexes as ib_manifest_parse resolves them one step at a time, and
 * the {"errors":[…]} body of a refusal.  The first byte picks the media
 * type the registry claimed and the platform asked for; the rest is the
 * body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/image/image.h"
#include "layers/registry/http.h"
#include "tests/fuzz/fuzz.h"

static const char *const media_types[] = {
  NULL, IB_MT_OCI_MANIFEST, IB_MT_OCI_INDEX, IB_MT_DOCKER_MANIFEST, IB_MT_DOCKER_LIST, IB_MT_PROVENANCE,
};

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  unsigned pick = data[0];
  const char *body = (const char *) data + 1;
  size_t len = size - 1;
  struct ib_descriptor desc = { .media_type = (char *) media_types[pick % 6], .size = len };
  strcpy (desc.digest.s, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  struct ib_platform platform, *pp = NULL;
  if (pick & 0x40)
    {
      ib_error_t perr = NULL;
      if (ib_platform_parse (pick & 0x80 ? "linux/arm64/v8" : "linux/amd64", &platform, &perr) < 0)
        fuzz_fail ("platform: %s", perr->msg);
      pp = &platform;
    }
  struct ib_descriptor next;
  struct ib_image *img = NULL;
  ib_error_t err = NULL;
  if (ib_manifest_parse (&desc, body, len, pp, &next, &img, &err) == 0)
    {
      if (img == NULL && next.media_type == NULL && next.digest.s[0] == '\0')
        fuzz_fail ("an index step gave no manifest");
      if (img)
        for (size_t i = 0; i < img->n_layers; i++)
          if (img->layers[i].media_type == NULL)
            fuzz_fail ("layer %zu has no media type", i);
      ib_image_free (img);
      ib_descriptor_clear (&next);
    }
  else if (err == NULL || err->msg == NULL)
    fuzz_fail ("ib_manifest_parse failed without a message");
  ib_error_release (&err);
  /* The same bytes as a refusal's body. */
  char *text = fuzz_text ((const uint8_t *) body, len);
  struct ib_registry r = { .host = "h:1" };
  struct ib_http_call c = { .method = "GET", .url = "https://h:1/v2/a/manifests/t?x", .buf = text, .len = len,
                            .status = 404, .attempts = pick & 3 };
  ib_registry_status_error (&r, &c, "manifest", &err);
  ib_error_release (&err);
  free (text);
  return 0;
}
