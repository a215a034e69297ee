/* docker://HOST[:PORT]/REPO[:TAG|@DIGEST] — a registry.
 *
 * Pulling walks the manifest (an index down to the platform's manifest),
 * then fetches the config and the layers the store does not have: a blob
 * is fetched once per store, so a second build over the same base moves
 * only its manifest.  Each blob pulled is remembered with the repository it
 * came from (imgbuild/sources/), so that a push to another repository of
 * the same registry mounts it instead of sending it again, and is told to
 * the pull's listener (layers/image/transport.h), so that a build lists a layer
 * while the others are still on their way.
 *
 * Pushing sends the blobs the repository lacks, the provenance artifact
 * (by digest, with the referrers tag `sha256-HEX` that the distribution
 * spec defines for registries without the referrers API), the manifest by
 * digest, and only then the tag: a tag never names a manifest the
 * registry could not serve whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/registry/registry.h"
#include "layers/transports/transports.h"

static bool
valid_repo (const char *repo)
{
  if (*repo == '\0' || *repo == '/' || repo[strlen (repo) - 1] == '/' || strstr (repo, "//"))
    return false;
  for (const char *c = repo; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr ("._-/", *c)))
      return false;
  return true;
}

static bool
valid_tag (const char *tag)
{
  size_t n = strlen (tag);
  if (n == 0 || n > 128 || tag[0] == '.' || tag[0] == '-')
    return false;
  return strspn (tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

int
ib_registry_ref_parse (const char *s, struct ib_ref *out, ib_error_t *err)
{
  const char *rest = s + strlen ("docker://");
  cleanup_free char *copy = ib_xstrdup (rest);
  char *at = strchr (copy, '@');
  char *slash = strchr (copy, '/');
  char *reference = NULL;
  if (at)
    {
      *at = '\0';
      if (ib_digest_check (at + 1, err) < 0)
        return ib_error_wrap (err, "`%s`", s);
      reference = at + 1;
    }
  else
    {
      char *colon = strrchr (copy, ':');
      if (colon && (slash == NULL || colon > strrchr (copy, '/')))
        {
          *colon = '\0';
          reference = colon + 1;
          if (!valid_tag (reference))
            return ib_error (err, IB_EUSAGE, "`%s`: `%s` is not a tag", s, reference);
        }
    }
  /* The first component is a host when it looks like one, as in Docker;
   * else the name is on Docker Hub. */
  slash = strchr (copy, '/');
  bool has_host = slash && (memchr (copy, '.', (size_t) (slash - copy)) || memchr (copy, ':', (size_t) (slash - copy))
                            || strncmp (copy, "localhost/", 10) == 0);
  cleanup_free char *host = has_host ? strndup (copy, (size_t) (slash - copy)) : ib_xstrdup ("docker.io");
  const char *repo = has_host ? slash + 1 : copy;
  cleanup_free char *full = !has_host && strchr (repo, '/') == NULL ? ib_xasprintf ("library/%s", repo)
                                                                      : ib_xstrdup (repo);
  if (!valid_repo (full) || *host == '\0')
    return ib_error (err, IB_EUSAGE, "`%s` is not docker://HOST[:PORT]/REPO[:TAG|@DIGEST] (a repository is "
                     "lowercase letters, digits and ._-/)", s);
  out->kind = IB_REF_REGISTRY;
  out->transport = &ib_transport_registry;
  out->location = ib_xasprintf ("%s/%s", host, full);
  out->name = ib_xstrdup (reference ? reference : "latest");
  return 0;
}

/* HOST/REPO → the two parts. */
static void
split (const char *location, char **host, char **repo)
{
  const char *slash = strchr (location, '/');
  *host = strndup (location, (size_t) (slash - location));
  *repo = ib_xstrdup (slash + 1);
}

static int
open_registry (const struct ib_ref *ref, bool push, struct ib_registry **out, ib_error_t *err)
{
  cleanup_free char *host = NULL, *repo = NULL;
  split (ref->location, &host, &repo);
  return ib_registry_open (host, repo, push, ref->remote, out, err);
}

/* Where a blob came from: "HOST/REPO", kept to mount it later. */
static void
remember_source (struct ib_store *s, const ib_digest *d, const char *location)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "sources", &dir, NULL) < 0)
    return;
  cleanup_free char *path = ib_path_join (dir, ib_digest_hex (d->s));
  ib_write_cache_file (path, location, strlen (location), NULL);
}

/* The repository of the same registry that a blob came from, if any. */
static char *
source_repo (struct ib_store *s, const ib_digest *d, const char *host)
{
  cleanup_free char *dir = NULL, *text = NULL;
  size_t len;
  if (ib_store_cache_dir (s, "sources", &dir, NULL) < 0)
    return NULL;
  cleanup_free char *path = ib_path_join (dir, ib_digest_hex (d->s));
  if (ib_read_file (path, 4096, &text, &len, NULL) < 0)
    return NULL;
  size_t n = strlen (host);
  if (strncmp (text, host, n) != 0 || text[n] != '/' || !valid_repo (text + n + 1))
    return NULL;
  return ib_xstrdup (text + n + 1);
}

/* Fetch a manifest into the store by REFERENCE; OUT describes it. */
static int
fetch_manifest (struct ib_registry *reg, struct ib_store *s, const char *reference, struct ib_descriptor *out,
                char **text, size_t *len, ib_error_t *err)
{
  cleanup_free char *media = NULL;
  ib_digest got;
  if (ib_registry_get_manifest (reg, reference, text, len, &media, &got, err) < 0)
    return -1;
  ib_digest stored;
  if (ib_store_put_blob (s, *text, *len, &stored, err) < 0)
    return -1;
  out->digest = got;
  out->size = *len;
  out->media_type = media && *media ? ib_xstrdup (media) : NULL;
  return 0;
}

/* An artifact's config and layers (of any media type). */
static int
fetch_artifact_blobs (struct ib_registry *reg, struct ib_store *s, const struct ib_descriptor *d, const char *text,
                      size_t len, ib_error_t *err)
{
  cJSON *j = cJSON_ParseWithLength (text, len);
  if (j == NULL)
    return ib_error (err, IB_EINTEGRITY, "manifest %s is not valid JSON", d->digest.s);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive (j, "layers"), *l;
  struct ib_descriptor b = { 0 };
  int rc = ib_descriptor_from_json (cJSON_GetObjectItemCaseSensitive (j, "config"), &b, err);
  if (rc == 0)
    rc = ib_registry_fetch_blob (reg, s, &b, err);
  ib_descriptor_clear (&b);
  cJSON_ArrayForEach (l, layers)
  {
    if (rc == 0)
      rc = ib_descriptor_from_json (l, &b, err);
    if (rc == 0)
      rc = ib_registry_fetch_blob (reg, s, &b, err);
    ib_descriptor_clear (&b);
  }
  cJSON_Delete (j);
  return rc;
}

/* One artifact that the referrers tag lists about MANIFEST: its manifest
 * (fetched into the store), and its type, the entry's artifactType or, in
 * an index that lost it, the manifest's own (ib_manifest_artifact_type). */
struct listed
{
  struct ib_descriptor d;
  char *text;
  size_t len;
  const char *type; /* into ENTRY or PARSED; NULL: unknown */
  cJSON *parsed;
  bool missing; /* the registry does not have it */
};

static void
listed_clear (struct listed *l)
{
  ib_descriptor_clear (&l->d);
  free (l->text);
  cJSON_Delete (l->parsed);
}

/* The artifact ENTRY names: its manifest when its type is not told or is
 * an attestation's (others are not fetched). */
static int
listed_fetch (struct ib_registry *reg, struct ib_store *s, const cJSON *entry, struct listed *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  const cJSON *at = cJSON_GetObjectItemCaseSensitive (entry, "artifactType");
  out->type = cJSON_IsString (at) ? at->valuestring : NULL;
  struct ib_descriptor want = { 0 };
  if (ib_descriptor_from_json (entry, &want, err) < 0)
    return -1;
  ib_error_t e = NULL;
  int rc = 0;
  if (out->type == NULL || ib_is_attestation_type (out->type))
    rc = fetch_manifest (reg, s, want.digest.s, &out->d, &out->text, &out->len, &e);
  if (rc < 0 && e->class == IB_ENOTFOUND)
    {
      out->missing = true;
      out->d = want;
      ib_error_release (&e);
      return 0;
    }
  ib_descriptor_clear (&want);
  if (rc < 0)
    {
      *err = e;
      return -1;
    }
  if (out->text && out->type == NULL)
    {
      out->parsed = cJSON_ParseWithLength (out->text, out->len);
      out->type = ib_manifest_artifact_type (out->parsed);
    }
  return 0;
}

/* The provenance records and signatures of MANIFEST, found through the
 * referrers tag.  An artifact it lists that the registry does not have is
 * left out, or with STRICT (imgverify, which checks what the registry
 * serves) is "provenance missing". */
static int
pull_referrer (struct ib_registry *reg, struct ib_store *s, const struct ib_ref *ref,
               const struct ib_descriptor *manifest, bool strict, ib_error_t *err)
{
  cleanup_free char *tag = ib_xasprintf ("sha256-%s", ib_digest_hex (manifest->digest.s));
  cleanup_free char *text = NULL;
  size_t len;
  struct ib_descriptor index = { 0 };
  ib_error_t e = NULL;
  if (fetch_manifest (reg, s, tag, &index, &text, &len, &e) < 0)
    {
      bool none = e->class == IB_ENOTFOUND;
      ib_descriptor_clear (&index);
      if (none)
        {
          ib_error_release (&e);
          return 0;
        }
      *err = e;
      return -1;
    }
  ib_descriptor_clear (&index);
  cJSON *j = cJSON_ParseWithLength (text, len);
  const cJSON *manifests = cJSON_GetObjectItemCaseSensitive (j, "manifests"), *m;
  size_t n = (size_t) cJSON_GetArraySize (manifests), i = 0;
  struct listed *l = ib_xcalloc (n ? n : 1, sizeof (*l));
  int rc = 0;
  cJSON_ArrayForEach (m, manifests)
  if (rc == 0)
    rc = listed_fetch (reg, s, m, &l[i++], err);
  for (size_t k = 0; rc == 0 && k < n; k++)
    if (l[k].missing && (l[k].type == NULL || ib_is_attestation_type (l[k].type)))
      {
        if (strict)
          rc = ib_error (err, IB_EPROVENANCE,
                         "provenance missing: the referrers tag %s of docker://%s lists %s (%s), which the "
                         "registry does not have",
                         tag, ref->location, l[k].d.digest.s, l[k].type ? l[k].type : "of a type it does not say");
        else
          ib_transport_note (ref, "the referrers tag %s of docker://%s lists %s, which the registry does not have",
                             tag, ref->location, l[k].d.digest.s);
      }
  /* The attestations first, then the signatures: listing an attestation
   * drops the signatures of the one it replaces (ib_referrer_replaces). */
  for (int signatures = 0; signatures < 2; signatures++)
    for (size_t k = 0; rc == 0 && k < n; k++)
      if (!l[k].missing && ib_is_attestation_type (l[k].type)
          && (strcmp (l[k].type, IB_MT_COSIGN_SIGNATURE) == 0) == signatures)
        {
          rc = fetch_artifact_blobs (reg, s, &l[k].d, l[k].text, l[k].len, err);
          if (rc == 0)
            rc = ib_store_tag (s, NULL, manifest, &l[k].d, err);
        }
  for (size_t k = 0; k < i; k++)
    listed_clear (&l[k]);
  free (l);
  cJSON_Delete (j);
  return rc < 0 ? ib_error_wrap (err, "provenance") : 0;
}

/* What the blob threads of one pull or push share; all of it only read. */
struct blob_job
{
  struct ib_store *s;
  const char *host;     /* a push's registry, for mounts */
  const char *location; /* HOST/REPO, remembered as each blob's source */
  const struct ib_image *img;               /* a pull's */
  const struct ib_pull_listener *listener; /* a pull's; NULL: none */
};

/* FN on the config and the layers of IMG (index 0 is the config), in
 * parallel up to the client's job count. */
static int
each_image_blob (struct ib_registry *reg, const struct ib_image *img, ib_registry_blob_fn fn, struct blob_job *job,
                 ib_error_t *err)
{
  cleanup_free const struct ib_descriptor **blobs = ib_xcalloc (img->n_layers + 1, sizeof (*blobs));
  blobs[0] = &img->config;
  for (size_t i = 0; i < img->n_layers; i++)
    blobs[i + 1] = &img->layers[i];
  return ib_registry_each_blob (reg, blobs, img->n_layers + 1, fn, job, err);
}

/* A layer is remembered as it arrives; the config once the pull is whole. */
static int
fetch_one (struct ib_registry *reg, const struct ib_descriptor *d, size_t i, void *data, ib_error_t *err)
{
  const struct blob_job *job = data;
  if (ib_registry_fetch_blob (reg, job->s, d, err) < 0)
    return -1;
  if (i > 0)
    remember_source (job->s, &d->digest, job->location);
  if (job->listener)
    return job->listener->arrived (job->listener->data, job->img, i, err);
  return 0;
}

static int
registry_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
               struct ib_descriptor *manifest, ib_error_t *err)
{
  struct ib_registry *reg;
  if (open_registry (ref, false, &reg, err) < 0)
    return -1;
  struct ib_descriptor cur = { 0 };
  struct ib_image *img = NULL;
  cleanup_free char *reference = ib_xstrdup (ref->name);
  int rc = 0;
  for (int depth = 0; rc == 0 && img == NULL; depth++)
    {
      cleanup_free char *text = NULL;
      size_t len;
      struct ib_descriptor next;
      ib_descriptor_clear (&cur);
      rc = depth > 2 ? ib_error (err, IB_EINTEGRITY, "image index nests too deep")
                     : fetch_manifest (reg, s, reference, &cur, &text, &len, err);
      if (rc == 0 && depth == 0)
        ib_descriptor_copy (manifest, &cur);
      if (rc == 0)
        rc = ib_manifest_parse (&cur, text, len, platform, &next, &img, err);
      if (rc == 0 && img == NULL)
        {
          free (reference);
          reference = ib_xstrdup (next.digest.s);
          ib_descriptor_clear (&next);
        }
    }
  uint64_t before = ib_registry_stats (reg)->bytes_down, missing = 0;
  for (size_t i = 0; rc == 0 && i < img->n_layers; i++)
    missing += ib_store_has_blob (s, &img->layers[i].digest) ? 0 : img->layers[i].size;
  cleanup_free char *what = ib_xasprintf ("pull docker://%s:%s", ref->location, ref->name);
  ib_registry_progress_begin (reg, what, missing);
  if (rc == 0)
    {
      struct blob_job job = { .s = s, .location = ref->location, .img = img,
                              .listener = ref->remote ? ref->remote->listener : NULL };
      rc = each_image_blob (reg, img, fetch_one, &job, err);
    }
  ib_registry_progress_end (reg);
  unsigned fetched = ib_registry_stats (reg)->blobs_fetched;
  uint64_t bytes = ib_registry_stats (reg)->bytes_down - before;
  if (rc == 0)
    {
      remember_source (s, &img->config.digest, ref->location);
      rc = pull_referrer (reg, s, ref, &img->manifest, ref->remote && ref->remote->refetch, err);
    }
  if (rc == 0)
    ib_transport_note (ref, "pulled docker://%s:%s: %u blob%s fetched (%llu bytes), %zu already in the store",
             ref->location, ref->name, fetched, fetched == 1 ? "" : "s", (unsigned long long) bytes,
             img->n_layers + 1 - fetched);
  if (rc < 0)
    ib_descriptor_clear (manifest);
  ib_descriptor_clear (&cur);
  ib_image_free (img);
  ib_registry_free (reg);
  return rc;
}

static int
push_one (struct ib_registry *reg, struct ib_store *s, const struct ib_descriptor *d, const char *host,
          const char *location, ib_error_t *err)
{
  cleanup_free char *from = source_repo (s, &d->digest, host);
  unsigned uploaded = ib_registry_stats (reg)->blobs_uploaded;
  if (ib_registry_push_blob (reg, s, d, from, err) < 0)
    return -1;
  if (ib_registry_stats (reg)->blobs_uploaded == uploaded)
    ib_registry_progress_add (reg, d->size); /* there already, or mounted */
  remember_source (s, &d->digest, location);
  return 0;
}

static int
push_job (struct ib_registry *reg, const struct ib_descriptor *d, size_t i, void *data, ib_error_t *err)
{
  (void) i;
  const struct blob_job *job = data;
  return push_one (reg, job->s, d, job->host, job->location, err);
}

static int
put_manifest_blob (struct ib_registry *reg, struct ib_store *s, const struct ib_descriptor *d, const char *reference,
                   ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_store_read_blob (s, &d->digest, IB_MAX_MANIFEST_SIZE, &text, &len, err) < 0)
    return -1;
  const char *mt = d->media_type ? d->media_type : IB_MT_OCI_MANIFEST;
  return ib_registry_put_manifest (reg, reference ? reference : d->digest.s, mt, text, len, err);
}

/* The referrers tag `sha256-HEX` of IMG: an index of the artifacts about
 * it.  Others may have listed theirs (signatures, SBOMs): they are kept;
 * an earlier record of the same definition is replaced, and with it the
 * signatures of it (ib_referrer_replaces).  *TEXT is the index with
 * ARTIFACT listed; *LISTED says whether the registry's is that already. */
static int
referrers_index (struct ib_registry *reg, struct ib_store *s, const struct ib_image *img,
                 const struct ib_descriptor *artifact, char **text, bool *listed, ib_error_t *err)
{
  cleanup_free char *def = ib_store_artifact_definition (s, &artifact->digest);
  cleanup_free char *type = ib_store_artifact_type (s, &artifact->digest);
  cleanup_free char *tag = ib_xasprintf ("sha256-%s", ib_digest_hex (img->manifest.digest.s));
  cleanup_free char *old = NULL, *media = NULL;
  size_t len;
  ib_digest d;
  ib_error_t e = NULL;
  cJSON *index = NULL;
  if (ib_registry_get_manifest (reg, tag, &old, &len, &media, &d, &e) == 0)
    index = cJSON_ParseWithLength (old, len);
  else if (e->class != IB_ENOTFOUND)
    {
      *err = e;
      return -1;
    }
  ib_error_release (&e);
  cJSON *list = cJSON_GetObjectItemCaseSensitive (index, "manifests");
  if (!cJSON_IsArray (list))
    {
      cJSON_Delete (index);
      index = cJSON_CreateObject ();
      cJSON_AddNumberToObject (index, "schemaVersion", 2);
      cJSON_AddStringToObject (index, "mediaType", IB_MT_OCI_INDEX);
      list = cJSON_AddArrayToObject (index, "manifests");
    }
  for (int i = cJSON_GetArraySize (list) - 1; i >= 0; i--)
    {
      const cJSON *e = cJSON_GetArrayItem (list, i);
      const cJSON *dg = cJSON_GetObjectItemCaseSensitive (e, "digest");
      const cJSON *at = cJSON_GetObjectItemCaseSensitive (e, "artifactType");
      const cJSON *ed = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (e, "annotations"),
                                                          IB_ANNOTATION_DEFINITION);
      bool same_def = def && cJSON_IsString (at) && ib_referrer_replaces (type, at->valuestring)
                      && cJSON_IsString (ed) && strcmp (ed->valuestring, def) == 0;
      if ((cJSON_IsString (dg) && strcmp (dg->valuestring, artifact->digest.s) == 0) || same_def)
        cJSON_DeleteItemFromArray (list, i);
    }
  cJSON *entry = ib_descriptor_to_json (artifact);
  cJSON_AddStringToObject (entry, "artifactType", type);
  if (def)
    cJSON_AddStringToObject (cJSON_AddObjectToObject (entry, "annotations"), IB_ANNOTATION_DEFINITION, def);
  cJSON_AddItemToArray (list, entry);
  *text = cJSON_PrintUnformatted (index);
  cJSON_Delete (index);
  *listed = old && strlen (*text) == len && memcmp (*text, old, len) == 0;
  return 0;
}

/* The artifact A (its blobs are there) and the referrers tag that lists
 * it.  A rebuild that changed nothing keeps its record (provenance.c), and
 * the registry has it listed already: nothing is written then, as skopeo
 * writes nothing for a blob that is there. */
static int
push_referrer (struct ib_registry *reg, struct ib_store *s, const struct ib_image *img,
               const struct ib_descriptor *a, ib_error_t *err)
{
  cleanup_free char *index = NULL, *there = NULL, *media = NULL;
  bool listed;
  size_t len;
  ib_digest d;
  ib_error_t e = NULL;
  if (referrers_index (reg, s, img, a, &index, &listed, err) < 0)
    return -1;
  if (listed && ib_registry_get_manifest (reg, a->digest.s, &there, &len, &media, &d, &e) == 0)
    return 0;
  if (e && e->class != IB_ENOTFOUND)
    {
      *err = e;
      return -1;
    }
  ib_error_release (&e);
  if (put_manifest_blob (reg, s, a, NULL, err) < 0)
    return -1;
  if (listed)
    return 0;
  cleanup_free char *tag = ib_xasprintf ("sha256-%s", ib_digest_hex (img->manifest.digest.s));
  return ib_registry_put_manifest (reg, tag, IB_MT_OCI_INDEX, index, strlen (index), err);
}

/* The artifacts about IMG in the store (the provenance), and their blobs
 * (each artifact's manifest first, as ib_store_artifact_blobs lists them). */
struct artifacts
{
  struct ib_descriptor *arts;
  size_t n_arts;
  struct ib_descriptor **blobs;
  size_t *n_blobs;
};

static void
artifacts_clear (struct artifacts *a)
{
  for (size_t k = 0; k < a->n_arts; k++)
    ib_descriptors_free (a->blobs[k], a->n_blobs[k]);
  free (a->blobs);
  free (a->n_blobs);
  ib_descriptors_free (a->arts, a->n_arts);
}

static int
artifacts_of (struct ib_store *s, const struct ib_image *img, struct artifacts *a, ib_error_t *err)
{
  *a = (struct artifacts){ 0 };
  if (ib_store_find_referrers (s, &img->manifest.digest, &a->arts, &a->n_arts, err) < 0)
    return -1;
  a->blobs = ib_xcalloc (a->n_arts + 1, sizeof (*a->blobs));
  a->n_blobs = ib_xcalloc (a->n_arts + 1, sizeof (*a->n_blobs));
  for (size_t k = 0; k < a->n_arts; k++)
    if (ib_store_artifact_blobs (s, &a->arts[k], &a->blobs[k], &a->n_blobs[k], err) < 0)
      return -1;
  return 0;
}

/* Every blob of the push, the image's (config, layers) and its
 * artifacts', on the client's workers at once: the artifacts' blobs are
 * new with every build, and one by one they were most of a thin push's
 * round trips.  The runner joins every thread before it returns, so no
 * manifest is put before all the blobs it names are there. */
static int
push_blobs (struct ib_registry *reg, const struct ib_image *img, const struct artifacts *a, struct blob_job *job,
            const char *what, ib_error_t *err)
{
  size_t n = img->n_layers + 1;
  for (size_t k = 0; k < a->n_arts; k++)
    n += a->n_blobs[k] ? a->n_blobs[k] - 1 : 0;
  cleanup_free const struct ib_descriptor **blobs = ib_xcalloc (n, sizeof (*blobs));
  size_t at = 0;
  blobs[at++] = &img->config;
  for (size_t i = 0; i < img->n_layers; i++)
    blobs[at++] = &img->layers[i];
  for (size_t k = 0; k < a->n_arts; k++)
    for (size_t i = 1; i < a->n_blobs[k]; i++)
      blobs[at++] = &a->blobs[k][i];
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += blobs[i]->size;
  ib_registry_progress_begin (reg, what, total);
  int rc = ib_registry_each_blob (reg, blobs, n, push_job, job, err);
  ib_registry_progress_end (reg);
  return rc;
}

/* The artifacts' manifests, whose blobs are there, and the referrers tag
 * that lists them. */
static int
push_referrers (struct ib_registry *reg, struct ib_store *s, const struct ib_image *img, const struct artifacts *a,
                ib_error_t *err)
{
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < a->n_arts; k++)
    {
      if (a->n_blobs[k] == 0)
        continue;
      rc = push_referrer (reg, s, img, &a->blobs[k][0], err);
    }
  return rc < 0 ? ib_error_wrap (err, "provenance") : 0;
}

static int
registry_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
               ib_error_t *err)
{
  (void) name;
  bool by_digest = strncmp (ref->name, "sha256:", 7) == 0;
  if (by_digest && strcmp (ref->name, img->manifest.digest.s) != 0)
    return ib_error (err, IB_EUSAGE, "the image is %s; it cannot be pushed as @%s", img->manifest.digest.s,
                     ref->name);
  struct artifacts a;
  if (artifacts_of (s, img, &a, err) < 0)
    {
      artifacts_clear (&a);
      return ib_error_wrap (err, "provenance");
    }
  struct ib_registry *reg;
  if (open_registry (ref, true, &reg, err) < 0)
    {
      artifacts_clear (&a);
      return -1;
    }
  cleanup_free char *host = NULL, *repo = NULL;
  split (ref->location, &host, &repo);
  cleanup_free char *what = ib_xasprintf ("push docker://%s:%s", ref->location, ref->name);
  struct blob_job job = { .s = s, .host = host, .location = ref->location };
  int rc = push_blobs (reg, img, &a, &job, what, err);
  if (rc == 0)
    rc = push_referrers (reg, s, img, &a, err);
  /* The manifest last: by digest, or under its tag (one PUT: a registry
   * keeps a manifest put under a tag by its digest as well, as skopeo
   * relies on), so no tag names a manifest with a missing blob. */
  if (rc == 0)
    rc = put_manifest_blob (reg, s, &img->manifest, by_digest ? NULL : ref->name, err);
  if (rc == 0)
    {
      const struct ib_registry_stats *st = ib_registry_stats (reg);
      ib_transport_note (ref,
               "pushed docker://%s:%s: %u blob%s uploaded (%llu bytes), %u mounted, %u already there, "
               "%u retr%s",
               ref->location, ref->name, st->blobs_uploaded, st->blobs_uploaded == 1 ? "" : "s",
               (unsigned long long) st->bytes_up, st->blobs_mounted, st->blobs_present, st->retries,
               st->retries == 1 ? "y" : "ies");
    }
  artifacts_clear (&a);
  ib_registry_free (reg);
  return rc;
}

const struct ib_transport ib_transport_registry = { "docker://", registry_pull, registry_push };
