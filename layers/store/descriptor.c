#include "layers/store/descriptor.h"

#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

void
ib_descriptor_clear (struct ib_descriptor *d)
{
  free (d->media_type);
  memset (d, 0, sizeof (*d));
}

void
ib_descriptor_copy (struct ib_descriptor *dst, const struct ib_descriptor *src)
{
  *dst = *src;
  dst->media_type = src->media_type ? ib_xstrdup (src->media_type) : NULL;
}

int
ib_descriptor_from_json (const cJSON *j, struct ib_descriptor *d, ib_error_t *err)
{
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive (j, "mediaType");
  const cJSON *dg = cJSON_GetObjectItemCaseSensitive (j, "digest");
  const cJSON *sz = cJSON_GetObjectItemCaseSensitive (j, "size");
  if (!cJSON_IsObject (j) || !cJSON_IsString (dg) || !cJSON_IsNumber (sz))
    return ib_error (err, IB_EINTEGRITY, "malformed descriptor (needs digest and size)");
  if (ib_digest_check (dg->valuestring, err) < 0)
    return -1;
  if (sz->valuedouble < 0 || sz->valuedouble > 9007199254740992.0)
    return ib_error (err, IB_EINTEGRITY, "descriptor %s has an impossible size", dg->valuestring);
  memset (d, 0, sizeof (*d));
  d->media_type = cJSON_IsString (mt) ? ib_xstrdup (mt->valuestring) : NULL;
  strcpy (d->digest.s, dg->valuestring);
  d->size = (uint64_t) sz->valuedouble;
  return 0;
}

cJSON *
ib_descriptor_to_json (const struct ib_descriptor *d)
{
  cJSON *j = cJSON_CreateObject ();
  cJSON_AddStringToObject (j, "mediaType", d->media_type);
  cJSON_AddStringToObject (j, "digest", d->digest.s);
  cJSON_AddNumberToObject (j, "size", (double) d->size);
  return j;
}

bool
ib_media_type_is_layer (const char *mt)
{
  return ib_layer_media_type_to_oci (mt) != NULL;
}

const char *
ib_layer_media_type_to_oci (const char *mt)
{
  static const struct
  {
    const char *from, *to;
  } map[] = {
    { IB_MT_OCI_LAYER, IB_MT_OCI_LAYER },
    { IB_MT_OCI_LAYER_GZIP, IB_MT_OCI_LAYER_GZIP },
    { IB_MT_OCI_LAYER_ZSTD, IB_MT_OCI_LAYER_ZSTD },
    { IB_MT_DOCKER_LAYER_GZIP, IB_MT_OCI_LAYER_GZIP },
    { IB_MT_DOCKER_LAYER, IB_MT_OCI_LAYER },
  };
  if (mt == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof (map) / sizeof (map[0]); i++)
    if (strcmp (mt, map[i].from) == 0)
      return map[i].to;
  return NULL;
}

bool
ib_is_attestation_type (const char *t)
{
  return t
         && (strcmp (t, IB_MT_PROVENANCE) == 0 || strcmp (t, IB_MT_INTOTO) == 0
             || strcmp (t, IB_MT_COSIGN_SIGNATURE) == 0);
}

const char *
ib_manifest_artifact_type (const cJSON *manifest)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive (manifest, "artifactType");
  if (cJSON_IsString (t) && *t->valuestring)
    return t->valuestring;
  const cJSON *c = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (manifest, "config"), "mediaType");
  return cJSON_IsString (c) && *c->valuestring ? c->valuestring : NULL;
}

bool
ib_referrer_replaces (const char *new_type, const char *old_type)
{
  if (!ib_is_attestation_type (new_type) || !ib_is_attestation_type (old_type))
    return false;
  return strcmp (new_type, IB_MT_COSIGN_SIGNATURE) != 0 || strcmp (old_type, IB_MT_COSIGN_SIGNATURE) == 0;
}
