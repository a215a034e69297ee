#include "layers/image/image.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/fsutil.h"


#define MAX_CONFIG_SIZE (32u << 20)

/* Platform fields are short; a longer one is cut, never overflows. */
static void
copy_field (char *dst, size_t n, const char *src)
{
  size_t len = src ? strnlen (src, n - 1) : 0;
  memcpy (dst, src ? src : "", len);
  dst[len] = '\0';
}

int
ib_platform_parse (const char *s, struct ib_platform *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  cleanup_free char *copy = ib_xstrdup (s);
  char *save = NULL;
  char *os = strtok_r (copy, "/", &save);
  char *arch = strtok_r (NULL, "/", &save);
  char *variant = strtok_r (NULL, "/", &save);
  if (os == NULL || arch == NULL || strtok_r (NULL, "/", &save) != NULL)
    return ib_error (err, IB_EUSAGE, "platform `%s` is not OS/ARCH[/VARIANT]", s);
  copy_field (out->os, sizeof (out->os), os);
  copy_field (out->architecture, sizeof (out->architecture), arch);
  copy_field (out->variant, sizeof (out->variant), variant);
  return 0;
}

void
ib_platform_host (struct ib_platform *out)
{
  struct utsname u;
  memset (out, 0, sizeof (*out));
  strcpy (out->os, "linux");
  const char *arch = "amd64";
  if (uname (&u) == 0)
    {
      if (strcmp (u.machine, "aarch64") == 0)
        arch = "arm64";
      else if (strcmp (u.machine, "x86_64") != 0)
        arch = u.machine;
    }
  copy_field (out->architecture, sizeof (out->architecture), arch);
}

static bool
platform_matches (const cJSON *p, const struct ib_platform *want)
{
  const cJSON *os = cJSON_GetObjectItemCaseSensitive (p, "os");
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive (p, "architecture");
  const cJSON *var = cJSON_GetObjectItemCaseSensitive (p, "variant");
  if (!cJSON_IsString (os) || !cJSON_IsString (arch))
    return false;
  if (strcmp (os->valuestring, want->os) || strcmp (arch->valuestring, want->architecture))
    return false;
  return !want->variant[0] || (cJSON_IsString (var) && strcmp (var->valuestring, want->variant) == 0);
}

/* An index: pick the manifest of the platform asked for, else the only
 * image in it, else the host's. */
static int
choose_from_index (const cJSON *index, const struct ib_platform *want, struct ib_descriptor *out, ib_error_t *err)
{
  const cJSON *list = cJSON_GetObjectItemCaseSensitive (index, "manifests");
  if (!cJSON_IsArray (list) || cJSON_GetArraySize (list) == 0)
    return ib_error (err, IB_EINTEGRITY, "image index has no manifests");
  struct ib_platform host;
  ib_platform_host (&host);
  const struct ib_platform *target = want ? want : (cJSON_GetArraySize (list) == 1 ? NULL : &host);
  const cJSON *m;
  cJSON_ArrayForEach (m, list)
  {
    if (target == NULL || platform_matches (cJSON_GetObjectItemCaseSensitive (m, "platform"), target))
      return ib_descriptor_from_json (m, out, err);
  }
  return ib_error (err, IB_ENOTFOUND, "image index has no manifest for %s/%s", target->os, target->architecture);
}

static int
parse_manifest (struct ib_image *img, const cJSON *m, ib_error_t *err)
{
  const cJSON *version = cJSON_GetObjectItemCaseSensitive (m, "schemaVersion");
  if (!cJSON_IsNumber (version) || version->valueint != 2)
    return ib_error (err, IB_EINTEGRITY, "manifest %s: schemaVersion is not 2", img->manifest.digest.s);
  if (ib_descriptor_from_json (cJSON_GetObjectItemCaseSensitive (m, "config"), &img->config, err) < 0)
    return ib_error_wrap (err, "manifest %s: config", img->manifest.digest.s);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive (m, "layers");
  if (!cJSON_IsArray (layers))
    return ib_error (err, IB_EINTEGRITY, "manifest %s: no layers array", img->manifest.digest.s);
  img->n_layers = (size_t) cJSON_GetArraySize (layers);
  img->layers = ib_xcalloc (img->n_layers, sizeof (*img->layers));
  size_t i = 0;
  const cJSON *l;
  cJSON_ArrayForEach (l, layers)
  {
    if (ib_descriptor_from_json (l, &img->layers[i], err) < 0)
      return ib_error_wrap (err, "manifest %s: layer %zu", img->manifest.digest.s, i);
    if (!ib_media_type_is_layer (img->layers[i].media_type))
      return ib_error (err, IB_EINTEGRITY, "manifest %s: layer %zu has media type `%s`", img->manifest.digest.s, i,
                       img->layers[i].media_type ? img->layers[i].media_type : "(none)");
    i++;
  }
  return 0;
}

static int
parse_config (struct ib_image *img, ib_error_t *err)
{
  const cJSON *rootfs = cJSON_GetObjectItemCaseSensitive (img->config_json, "rootfs");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive (rootfs, "diff_ids");
  if (!cJSON_IsArray (ids) || (size_t) cJSON_GetArraySize (ids) != img->n_layers)
    return ib_error (err, IB_EINTEGRITY, "config %s: rootfs.diff_ids does not list one diff_id per layer (%zu)",
                     img->config.digest.s, img->n_layers);
  img->diff_ids = ib_xcalloc (img->n_layers, sizeof (*img->diff_ids));
  size_t i = 0;
  const cJSON *d;
  cJSON_ArrayForEach (d, ids)
  {
    if (!cJSON_IsString (d) || ib_digest_check (d->valuestring, err) < 0)
      return ib_error_wrap (err, "config %s: diff_id %zu", img->config.digest.s, i);
    strcpy (img->diff_ids[i++].s, d->valuestring);
  }
  return 0;
}

int
ib_manifest_parse (const struct ib_descriptor *desc, const char *text, size_t len, const struct ib_platform *platform,
                   struct ib_descriptor *next, struct ib_image **img, ib_error_t *err)
{
  *img = NULL;
  memset (next, 0, sizeof (*next));
  cJSON *m = cJSON_ParseWithLength (text, len);
  if (m == NULL)
    return ib_error (err, IB_EINTEGRITY, "manifest %s is not valid JSON", desc->digest.s);
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive (m, "mediaType");
  const char *media = cJSON_IsString (mt) ? mt->valuestring : desc->media_type;
  bool is_index = (media && (strcmp (media, IB_MT_OCI_INDEX) == 0 || strcmp (media, IB_MT_DOCKER_LIST) == 0))
                  || (!media && cJSON_GetObjectItemCaseSensitive (m, "manifests"));
  int r;
  if (is_index)
    r = choose_from_index (m, platform, next, err);
  else
    {
      struct ib_image *i = ib_xcalloc (1, sizeof (*i));
      ib_descriptor_copy (&i->manifest, desc);
      if (i->manifest.media_type == NULL)
        i->manifest.media_type = ib_xstrdup (media ? media : IB_MT_OCI_MANIFEST);
      r = parse_manifest (i, m, err);
      if (r < 0)
        ib_image_free (i);
      else
        *img = i;
    }
  cJSON_Delete (m);
  return r;
}

int
ib_image_load (struct ib_store *s, const struct ib_descriptor *desc, const struct ib_platform *platform,
               struct ib_image **out, ib_error_t *err)
{
  struct ib_descriptor cur;
  ib_descriptor_copy (&cur, desc);
  struct ib_image *img = NULL;
  for (int depth = 0; img == NULL; depth++)
    {
      cleanup_free char *text = NULL;
      size_t len;
      struct ib_descriptor next;
      int r = depth > 2 ? ib_error (err, IB_EINTEGRITY, "image index nests too deep")
                        : ib_store_read_blob (s, &cur.digest, IB_MAX_MANIFEST_SIZE, &text, &len, err);
      if (r == 0)
        r = ib_manifest_parse (&cur, text, len, platform, &next, &img, err);
      ib_descriptor_clear (&cur);
      if (r < 0)
        return -1;
      cur = next;
    }
  ib_descriptor_clear (&cur);
  cleanup_free char *cfg = NULL;
  size_t len;
  int r = ib_store_read_blob (s, &img->config.digest, MAX_CONFIG_SIZE, &cfg, &len, err);
  if (r == 0 && (img->config_json = cJSON_ParseWithLength (cfg, len)) == NULL)
    r = ib_error (err, IB_EINTEGRITY, "config %s is not valid JSON", img->config.digest.s);
  if (r == 0)
    r = parse_config (img, err);
  if (r < 0)
    {
      ib_image_free (img);
      return -1;
    }
  *out = img;
  return 0;
}

struct ib_image *
ib_image_scratch (const struct ib_platform *platform)
{
  struct ib_image *img = ib_xcalloc (1, sizeof (*img));
  cJSON *c = cJSON_CreateObject ();
  cJSON_AddStringToObject (c, "architecture", platform->architecture);
  cJSON_AddStringToObject (c, "os", platform->os);
  if (platform->variant[0])
    cJSON_AddStringToObject (c, "variant", platform->variant);
  cJSON_AddObjectToObject (c, "config");
  cJSON *rootfs = cJSON_AddObjectToObject (c, "rootfs");
  cJSON_AddStringToObject (rootfs, "type", "layers");
  cJSON_AddArrayToObject (rootfs, "diff_ids");
  cJSON_AddArrayToObject (c, "history");
  img->config_json = c;
  return img;
}

void
ib_image_free (struct ib_image *img)
{
  if (img == NULL)
    return;
  ib_descriptor_clear (&img->manifest);
  ib_descriptor_clear (&img->config);
  for (size_t i = 0; i < img->n_layers; i++)
    ib_descriptor_clear (&img->layers[i]);
  free (img->layers);
  free (img->diff_ids);
  cJSON_Delete (img->config_json);
  free (img);
}

char *
ib_format_rfc3339 (long long t)
{
  time_t tt = (time_t) t;
  struct tm tm;
  gmtime_r (&tt, &tm);
  char buf[64];
  strftime (buf, sizeof (buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return ib_xstrdup (buf);
}

static cJSON *
object_child (cJSON *parent, const char *key)
{
  cJSON *c = cJSON_GetObjectItemCaseSensitive (parent, key);
  if (!cJSON_IsObject (c))
    {
      cJSON_DeleteItemFromObjectCaseSensitive (parent, key);
      c = cJSON_AddObjectToObject (parent, key);
    }
  return c;
}

static void
apply_env (cJSON *cfg, const struct ib_image_delta *d)
{
  if (d->n_env == 0)
    return;
  cJSON *env = cJSON_GetObjectItemCaseSensitive (cfg, "Env");
  if (!cJSON_IsArray (env))
    {
      cJSON_DeleteItemFromObjectCaseSensitive (cfg, "Env");
      env = cJSON_AddArrayToObject (cfg, "Env");
    }
  for (size_t i = 0; i < d->n_env; i++)
    {
      size_t keylen = strcspn (d->env[i], "=");
      for (int k = cJSON_GetArraySize (env) - 1; k >= 0; k--)
        {
          const cJSON *e = cJSON_GetArrayItem (env, k);
          if (cJSON_IsString (e) && strncmp (e->valuestring, d->env[i], keylen) == 0
              && e->valuestring[keylen] == '=')
            cJSON_DeleteItemFromArray (env, k);
        }
      cJSON_AddItemToArray (env, cJSON_CreateString (d->env[i]));
    }
}

static void
apply_labels (cJSON *cfg, const struct ib_image_delta *d)
{
  if (d->n_labels == 0)
    return;
  cJSON *labels = object_child (cfg, "Labels");
  for (size_t i = 0; i + 1 < d->n_labels * 2; i += 2)
    {
      cJSON_DeleteItemFromObjectCaseSensitive (labels, d->labels[i]);
      cJSON_AddStringToObject (labels, d->labels[i], d->labels[i + 1]);
    }
}

static cJSON *
extended_config (const struct ib_image *base, const struct ib_image_delta *d, ib_error_t *err)
{
  cJSON *c = cJSON_Duplicate (base->config_json, true);
  cleanup_free char *created = ib_format_rfc3339 (d->created);
  cJSON_DeleteItemFromObjectCaseSensitive (c, "created");
  cJSON_AddStringToObject (c, "created", created);
  cJSON *cfg = object_child (c, "config");
  apply_env (cfg, d);
  apply_labels (cfg, d);
  if (d->cmd_json)
    {
      cJSON *cmd = cJSON_Parse (d->cmd_json);
      if (!cJSON_IsArray (cmd))
        {
          cJSON_Delete (cmd);
          cJSON_Delete (c);
          ib_error (err, IB_EDEFINITION, "cmd `%s` is not a JSON array", d->cmd_json);
          return NULL;
        }
      cJSON_DeleteItemFromObjectCaseSensitive (cfg, "Cmd");
      cJSON_AddItemToObject (cfg, "Cmd", cmd);
    }
  cJSON *ids = cJSON_GetObjectItemCaseSensitive (object_child (c, "rootfs"), "diff_ids");
  for (size_t i = 0; i < d->n_layers; i++)
    cJSON_AddItemToArray (ids, cJSON_CreateString (d->diff_ids[i].s));
  cJSON *hist = cJSON_GetObjectItemCaseSensitive (c, "history");
  if (!cJSON_IsArray (hist))
    {
      cJSON_DeleteItemFromObjectCaseSensitive (c, "history");
      hist = cJSON_AddArrayToObject (c, "history");
    }
  for (size_t i = 0; i < (d->n_layers ? d->n_layers : 1); i++)
    {
      cJSON *h = cJSON_CreateObject ();
      cJSON_AddStringToObject (h, "created", created);
      cJSON_AddStringToObject (h, "created_by", d->n_layers && d->history ? d->history[i] : "imgbuild");
      if (d->n_layers == 0)
        cJSON_AddBoolToObject (h, "empty_layer", true);
      cJSON_AddItemToArray (hist, h);
    }
  return c;
}

int
ib_image_extend (struct ib_store *s, const struct ib_image *base, const struct ib_image_delta *d,
                 struct ib_image **out, ib_error_t *err)
{
  cJSON *config = extended_config (base, d, err);
  if (config == NULL)
    return -1;
  char *config_text = cJSON_PrintUnformatted (config);
  struct ib_image *img = ib_xcalloc (1, sizeof (*img));
  img->config_json = config;
  img->config.media_type = ib_xstrdup (IB_MT_OCI_CONFIG);
  img->config.size = strlen (config_text);
  int r = ib_store_put_blob (s, config_text, img->config.size, &img->config.digest, err);
  free (config_text);
  if (r < 0)
    {
      ib_image_free (img);
      return -1;
    }
  img->n_layers = base->n_layers + d->n_layers;
  img->layers = ib_xcalloc (img->n_layers, sizeof (*img->layers));
  img->diff_ids = ib_xcalloc (img->n_layers, sizeof (*img->diff_ids));
  for (size_t i = 0; i < img->n_layers; i++)
    {
      const struct ib_descriptor *src = i < base->n_layers ? &base->layers[i] : &d->layers[i - base->n_layers];
      ib_descriptor_copy (&img->layers[i], src);
      /* Same bytes, OCI's name for them: base layers keep their digests. */
      free (img->layers[i].media_type);
      img->layers[i].media_type = ib_xstrdup (ib_layer_media_type_to_oci (src->media_type));
      img->diff_ids[i] = i < base->n_layers ? base->diff_ids[i] : d->diff_ids[i - base->n_layers];
    }
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddNumberToObject (m, "schemaVersion", 2);
  cJSON_AddStringToObject (m, "mediaType", IB_MT_OCI_MANIFEST);
  cJSON_AddItemToObject (m, "config", ib_descriptor_to_json (&img->config));
  cJSON *layers = cJSON_AddArrayToObject (m, "layers");
  for (size_t i = 0; i < img->n_layers; i++)
    cJSON_AddItemToArray (layers, ib_descriptor_to_json (&img->layers[i]));
  if (d->n_annotations)
    {
      cJSON *ann = cJSON_AddObjectToObject (m, "annotations");
      for (size_t i = 0; i < d->n_annotations; i++)
        cJSON_AddStringToObject (ann, d->annotations[2 * i], d->annotations[2 * i + 1]);
    }
  char *text = cJSON_PrintUnformatted (m);
  cJSON_Delete (m);
  img->manifest.media_type = ib_xstrdup (IB_MT_OCI_MANIFEST);
  img->manifest.size = strlen (text);
  r = ib_store_put_blob (s, text, img->manifest.size, &img->manifest.digest, err);
  free (text);
  if (r < 0)
    {
      ib_image_free (img);
      return -1;
    }
  *out = img;
  return 0;
}
