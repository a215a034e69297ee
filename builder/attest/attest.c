#include "builder/attest/attest.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

#ifndef IB_VERSION
#define IB_VERSION "0.1.0"
#endif

void
ib_rfc3339 (long long t, char buf[32])
{
  time_t tt = (time_t) t;
  struct tm tm;
  gmtime_r (&tt, &tm);
  strftime (buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* {"sha256": HEX} of an "sha256:HEX" digest. */
static cJSON *
digest_set (const char *digest)
{
  cJSON *d = cJSON_CreateObject ();
  const char *colon = strchr (digest, ':');
  cJSON_AddStringToObject (d, "sha256", colon ? colon + 1 : digest);
  return d;
}

cJSON *
ib_attest_statement (const struct ib_image *img, const char *name, const char *predicate_type, cJSON *predicate)
{
  cJSON *st = cJSON_CreateObject ();
  cJSON_AddStringToObject (st, "_type", IB_INTOTO_STATEMENT_V1);
  cJSON *subjects = cJSON_AddArrayToObject (st, "subject");
  cJSON *sub = cJSON_CreateObject ();
  cJSON_AddStringToObject (sub, "name", name);
  cJSON_AddItemToObject (sub, "digest", digest_set (img->manifest.digest.s));
  cJSON_AddItemToArray (subjects, sub);
  cJSON_AddStringToObject (st, "predicateType", predicate_type);
  cJSON_AddItemToObject (st, "predicate", predicate);
  return st;
}

/* A ResourceDescriptor: NAME, a file:// URI of PATH (made absolute), and
 * its DIGEST ("sha256:HEX" or bare hex; computed from PATH when NULL). */
static cJSON *
file_dependency (const char *name, const char *path, const char *digest)
{
  char abs[PATH_MAX];
  ib_digest d;
  if (digest == NULL)
    {
      if (ib_sha256_file (path, &d, NULL, NULL) < 0)
        return NULL;
      digest = d.s;
    }
  cJSON *r = cJSON_CreateObject ();
  if (name)
    cJSON_AddStringToObject (r, "name", name);
  cleanup_free char *uri = ib_xasprintf ("file://%s", realpath (path, abs) ? abs : path);
  cJSON_AddStringToObject (r, "uri", uri);
  cJSON_AddItemToObject (r, "digest", digest_set (digest));
  return r;
}

static void
add (cJSON *list, cJSON *item)
{
  if (item)
    cJSON_AddItemToArray (list, item);
}

/* The base, the definition file, every source the layers copy, the
 * prebake sources and nvcc. */
static void
add_dependencies (cJSON *deps, struct ib_build *b)
{
  const char *from = b->opt->from ? b->opt->from : b->def->from;
  if (b->base->n_layers)
    {
      cJSON *base = cJSON_CreateObject ();
      cJSON_AddStringToObject (base, "name", "base");
      cJSON_AddStringToObject (base, "uri", from);
      cJSON_AddItemToObject (base, "digest", digest_set (b->base->manifest.digest.s));
      cJSON_AddStringToObject (base, "mediaType", b->base->manifest.media_type);
      cJSON_AddItemToArray (deps, base);
    }
  add (deps, file_dependency ("definition", b->def->file, NULL));
  const struct ib_fsview *view = NULL;
  ib_build_image_view (b, &view, NULL);
  for (size_t i = 0; i < b->n_entries; i++)
    {
      const struct ib_layer_entry *e = &b->entries[i];
      if (e->type != IB_ENTRY_FILE || e->source == NULL)
        continue;
      const struct ib_fs_entry *f = view ? ib_fsview_lookup (view, e->path) : NULL;
      cleanup_free char *target = ib_xasprintf ("/%s", e->path);
      add (deps, file_dependency (target, e->source, f && *f->digest ? f->digest : NULL));
    }
  for (size_t i = 0; i < b->def->n_prebake; i++)
    if (!b->def->prebake[i].in_image)
      add (deps, file_dependency ("prebake", b->def->prebake[i].source, NULL));
  if (b->prebake_layer.desc.media_type && b->prebake.nvcc)
    {
      cJSON *nvcc = file_dependency ("nvcc", b->prebake.nvcc, NULL);
      if (nvcc)
        cJSON_AddStringToObject (cJSON_AddObjectToObject (nvcc, "annotations"), "version",
                                 b->prebake.nvcc_version ? b->prebake.nvcc_version : "");
      add (deps, nvcc);
    }
}

static cJSON *
external_parameters (struct ib_build *b)
{
  cJSON *p = cJSON_CreateObject ();
  char abs[PATH_MAX];
  cJSON_AddStringToObject (p, "definition", realpath (b->def->file, abs) ? abs : b->def->file);
  cJSON_AddStringToObject (p, "name", b->name);
  cJSON_AddStringToObject (p, "from", b->opt->from ? b->opt->from : b->def->from);
  if (b->opt->platform || b->def->platform)
    cJSON_AddStringToObject (p, "platform", b->opt->platform ? b->opt->platform : b->def->platform);
  static const char *const smoke[] = { "auto", "required", "off" };
  cJSON_AddStringToObject (p, "smoke", smoke[b->opt->smoke]);
  cJSON_AddBoolToObject (p, "allowUnsafeBase", b->opt->allow_unsafe_base);
  return p;
}

static cJSON *
internal_parameters (struct ib_build *b)
{
  cJSON *p = cJSON_CreateObject ();
  if (b->prebake_layer.desc.media_type)
    {
      cJSON *pb = cJSON_AddObjectToObject (p, "prebake");
      cJSON_AddStringToObject (pb, "nvcc", b->prebake.nvcc ? b->prebake.nvcc : "");
      cJSON_AddStringToObject (pb, "nvccVersion", b->prebake.nvcc_version ? b->prebake.nvcc_version : "");
      cJSON_AddStringToObject (pb, "flags", b->prebake.flags ? b->prebake.flags : "");
      cJSON *arches = cJSON_AddArrayToObject (pb, "arches");
      for (size_t i = 0; i < b->def->n_prebake_arches; i++)
        cJSON_AddItemToArray (arches, cJSON_CreateString (b->def->prebake_arches[i]));
    }
  cJSON_AddNumberToObject (p, "gzipLevel", b->def->gzip_level);
  return p;
}

cJSON *
ib_attest_slsa (struct ib_build *b)
{
  cJSON *pred = cJSON_CreateObject ();
  cJSON *bd = cJSON_AddObjectToObject (pred, "buildDefinition");
  cJSON_AddStringToObject (bd, "buildType", IB_SLSA_BUILD_TYPE);
  cJSON_AddItemToObject (bd, "externalParameters", external_parameters (b));
  cJSON_AddItemToObject (bd, "internalParameters", internal_parameters (b));
  add_dependencies (cJSON_AddArrayToObject (bd, "resolvedDependencies"), b);
  cJSON *rd = cJSON_AddObjectToObject (pred, "runDetails");
  cJSON *builder = cJSON_AddObjectToObject (rd, "builder");
  cJSON_AddStringToObject (builder, "id", IB_SLSA_BUILDER_ID);
  cJSON_AddStringToObject (cJSON_AddObjectToObject (builder, "version"), "imgbuild", IB_VERSION);
  cJSON *md = cJSON_AddObjectToObject (rd, "metadata");
  char when[32];
  cleanup_free char *id = ib_xasprintf ("%s@%lld", b->name, b->started);
  cJSON_AddStringToObject (md, "invocationId", id);
  ib_rfc3339 (b->started, when);
  cJSON_AddStringToObject (md, "startedOn", when);
  ib_rfc3339 ((long long) time (NULL), when);
  cJSON_AddStringToObject (md, "finishedOn", when);
  return pred;
}

int
ib_attest_check_statement (const cJSON *st, const ib_digest *digest, const char *what, ib_error_t *err)
{
  const cJSON *type = cJSON_GetObjectItemCaseSensitive (st, "_type");
  if (!cJSON_IsString (type) || strcmp (type->valuestring, IB_INTOTO_STATEMENT_V1) != 0)
    return ib_error (err, IB_EINTEGRITY, "%s: not an in-toto Statement v1 (_type is not %s)", what,
                     IB_INTOTO_STATEMENT_V1);
  const cJSON *sub;
  cJSON_ArrayForEach (sub, cJSON_GetObjectItemCaseSensitive (st, "subject"))
  {
    const cJSON *hex = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (sub, "digest"), "sha256");
    if (cJSON_IsString (hex) && strcmp (hex->valuestring, ib_digest_hex (digest->s)) == 0)
      return 0;
  }
  return ib_error (err, IB_EINTEGRITY, "%s: its subject is not the image %s", what, digest->s);
}
