#include "builder/attest/provenance.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/attest/attest.h"
#include "builder/attest/sbom.h"

static const char *
relative_to (const char *path, const char *dir)
{
  size_t n = strlen (dir);
  return strncmp (path, dir, n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

static void
add_files (cJSON *doc, struct ib_build *b)
{
  cJSON *files = cJSON_AddArrayToObject (doc, "files");
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, NULL) < 0)
    return;
  for (size_t i = 0; i < b->def->n_items; i++)
    {
      const struct ib_copy_item *it = &b->def->items[i];
      if (it->type != IB_ENTRY_FILE)
        continue;
      cleanup_free char *target = ib_copy_item_target (it);
      const struct ib_fs_entry *e = target ? ib_fsview_lookup (view, target + 1) : NULL;
      cJSON *f = cJSON_CreateObject ();
      cJSON_AddStringToObject (f, "target", target ? target : it->raw_target);
      cJSON_AddStringToObject (f, "source", relative_to (it->source, b->def->dir));
      cJSON_AddStringToObject (f, "sha256", e ? e->digest : "");
      cJSON_AddItemToArray (files, f);
    }
}

static void
add_prebake (cJSON *doc, struct ib_build *b)
{
  if (b->prebake_layer.desc.media_type == NULL)
    return;
  cJSON *p = cJSON_AddObjectToObject (doc, "prebake");
  cJSON_AddStringToObject (p, "nvcc_version", b->prebake.nvcc_version);
  cJSON_AddStringToObject (p, "flags", b->prebake.flags);
  cJSON *arches = cJSON_AddArrayToObject (p, "arches");
  for (size_t i = 0; i < b->def->n_prebake_arches; i++)
    cJSON_AddItemToArray (arches, cJSON_CreateString (b->def->prebake_arches[i]));
  cJSON *outs = cJSON_AddArrayToObject (p, "outputs");
  for (size_t i = 0; i < b->prebake.n_entries; i++)
    {
      ib_digest d;
      cJSON *o = cJSON_CreateObject ();
      cleanup_free char *target = ib_xasprintf ("/%s", b->prebake.entries[i].path);
      cJSON_AddStringToObject (o, "target", target);
      if (ib_sha256_file (b->prebake.entries[i].source, &d, NULL, NULL) == 0)
        cJSON_AddStringToObject (o, "sha256", ib_digest_hex (d.s));
      cJSON_AddItemToArray (outs, o);
    }
}

/* The launch contract the image was built (and smoke-tested) with, and
 * what the smoke test proved: which kernels loaded and ran on which GPU,
 * the NCCL version and transports (its output stays in the report). */
static void
add_smoke (cJSON *doc, struct ib_build *b)
{
  const cJSON *sm = cJSON_GetObjectItemCaseSensitive (ib_report_json (b->report), "smoke");
  /* The contract the smoke test ran with (a recipe may size /dev/shm). */
  const cJSON *ran = cJSON_GetObjectItemCaseSensitive (sm, "contract");
  if (ran)
    cJSON_AddItemToObject (doc, "contract", cJSON_Duplicate (ran, true));
  else if (b->def->has_smoke || b->def->contract.set)
    cJSON_AddItemToObject (doc, "contract", ib_contract_json (&b->def->contract));
  if (sm == NULL)
    return;
  cJSON *copy = cJSON_Duplicate (sm, true);
  cJSON_DeleteItemFromObjectCaseSensitive (copy, "output");
  cJSON_DeleteItemFromObjectCaseSensitive (copy, "log");
  cJSON_AddItemToObject (doc, "smoke", copy);
}

cJSON *
ib_provenance_of_build (struct ib_build *b)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON_AddStringToObject (doc, "schema", "imgbuild.provenance/v1");
  cJSON_AddStringToObject (doc, "image", b->name);
  cJSON *base = cJSON_AddObjectToObject (doc, "base");
  cJSON_AddStringToObject (base, "name", b->opt->from ? b->opt->from : b->def->from);
  if (b->base->n_layers)
    cJSON_AddStringToObject (base, "digest", b->base->manifest.digest.s);
  cJSON *def = cJSON_AddObjectToObject (doc, "definition");
  ib_digest dd;
  /* The absolute path names the definition: the same file rebuilt
   * replaces its record, another file adds one. */
  char abs[PATH_MAX];
  cJSON_AddStringToObject (def, "file", realpath (b->def->file, abs) ? abs : b->def->file);
  if (ib_sha256_file (b->def->file, &dd, NULL, NULL) == 0)
    cJSON_AddStringToObject (def, "digest", dd.s);
  cJSON_AddStringToObject (def, "gates", b->def->gate_text ? b->def->gate_text : "");
  cJSON_AddNumberToObject (doc, "overlay_layer", (double) b->first_overlay_layer);
  add_files (doc, b);
  add_prebake (doc, b);
  const cJSON *gates = cJSON_GetObjectItemCaseSensitive (ib_report_json (b->report), "gates");
  cJSON_AddItemToObject (doc, "gates", cJSON_Duplicate (gates, true));
  add_smoke (doc, b);
  return doc;
}

/* One layer of the artifact: STATEMENT as a blob, annotated with its
 * predicate type (so that a reader picks the statement it wants without
 * fetching the others, as BuildKit's attestation manifests are). */
static cJSON *
put_statement (struct ib_store *s, const cJSON *statement, ib_error_t *err)
{
  char *text = cJSON_PrintUnformatted (statement);
  struct ib_descriptor blob = { .media_type = IB_MT_INTOTO, .size = strlen (text) };
  int r = ib_store_put_blob (s, text, blob.size, &blob.digest, err);
  free (text);
  if (r < 0)
    return NULL;
  cJSON *l = ib_descriptor_to_json (&blob);
  const cJSON *type = cJSON_GetObjectItemCaseSensitive (statement, "predicateType");
  cJSON_AddStringToObject (cJSON_AddObjectToObject (l, "annotations"), IB_ANNOTATION_PREDICATE,
                           cJSON_IsString (type) ? type->valuestring : "");
  return l;
}

int
ib_artifact_write (struct ib_store *s, const struct ib_image *img, const char *artifact_type, cJSON *layers,
                   const char *definition, struct ib_descriptor *out, ib_error_t *err)
{
  struct ib_descriptor empty = { .media_type = IB_MT_OCI_EMPTY, .size = 2 };
  if (ib_store_put_blob (s, "{}", 2, &empty.digest, err) < 0)
    {
      cJSON_Delete (layers);
      return -1;
    }
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddNumberToObject (m, "schemaVersion", 2);
  cJSON_AddStringToObject (m, "mediaType", IB_MT_OCI_MANIFEST);
  cJSON_AddStringToObject (m, "artifactType", artifact_type);
  cJSON_AddItemToObject (m, "config", ib_descriptor_to_json (&empty));
  cJSON_AddItemToObject (m, "layers", layers);
  cJSON_AddItemToObject (m, "subject", ib_descriptor_to_json (&img->manifest));
  if (definition && *definition)
    cJSON_AddStringToObject (cJSON_AddObjectToObject (m, "annotations"), IB_ANNOTATION_DEFINITION, definition);
  char *mtext = cJSON_PrintUnformatted (m);
  cJSON_Delete (m);
  out->media_type = ib_xstrdup (IB_MT_OCI_MANIFEST);
  out->size = strlen (mtext);
  int r = ib_store_put_blob (s, mtext, out->size, &out->digest, err);
  free (mtext);
  return r;
}

int
ib_provenance_write (struct ib_store *s, const struct ib_image *img, cJSON *const *statements, size_t n,
                     const char *definition, struct ib_descriptor *out, ib_error_t *err)
{
  cJSON *layers = cJSON_CreateArray ();
  for (size_t i = 0; i < n; i++)
    {
      cJSON *l = put_statement (s, statements[i], err);
      if (l == NULL)
        {
          cJSON_Delete (layers);
          return -1;
        }
      cJSON_AddItemToArray (layers, l);
    }
  return ib_artifact_write (s, img, IB_MT_INTOTO, layers, definition, out, err);
}

static int
read_json (struct ib_store *s, const ib_digest *d, size_t max, cJSON **out, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_store_read_blob (s, d, max, &text, &len, err) < 0)
    return -1;
  *out = cJSON_ParseWithLength (text, len);
  return *out ? 0 : ib_error (err, IB_EINTEGRITY, "blob %s is not JSON", d->s);
}

/* Forget the times a build stamps into STATEMENT: SLSA's run metadata
 * (invocation, start, finish), each gate's and the smoke test's seconds,
 * the SBOM's creation time.  Nothing else in the statements changes from
 * one build of the same inputs to the next (the image's own `created`
 * comes from the definition, not the clock). */
static void
drop_times (cJSON *statement)
{
  cJSON *p = cJSON_GetObjectItemCaseSensitive (statement, "predicate");
  cJSON_DeleteItemFromObjectCaseSensitive (cJSON_GetObjectItemCaseSensitive (p, "runDetails"), "metadata");
  cJSON_DeleteItemFromObjectCaseSensitive (cJSON_GetObjectItemCaseSensitive (p, "creationInfo"), "created");
  cJSON_DeleteItemFromObjectCaseSensitive (cJSON_GetObjectItemCaseSensitive (p, "smoke"), "seconds");
  cJSON *g;
  cJSON_ArrayForEach (g, cJSON_GetObjectItemCaseSensitive (p, "gates"))
  cJSON_DeleteItemFromObjectCaseSensitive (g, "seconds");
}

/* Whether the layers of the artifact BLOBS (ib_store_artifact_blobs: its
 * manifest, its config, then one statement a layer) say what STATEMENTS
 * say, times aside.  Any blob that cannot be read means no. */
static bool
says_the_same (struct ib_store *s, const struct ib_descriptor *blobs, size_t n_blobs, cJSON *const *statements,
               size_t n)
{
  if (n_blobs != n + 2)
    return false;
  bool same = true;
  for (size_t i = 0; same && i < n; i++)
    {
      cJSON *old = NULL;
      ib_error_t e = NULL;
      if (blobs[i + 2].media_type == NULL || strcmp (blobs[i + 2].media_type, IB_MT_INTOTO) != 0
          || read_json (s, &blobs[i + 2].digest, 64u << 20, &old, &e) < 0)
        {
          ib_error_release (&e);
          return false;
        }
      cJSON *now = cJSON_Duplicate (statements[i], true);
      drop_times (old);
      drop_times (now);
      same = cJSON_Compare (old, now, true);
      cJSON_Delete (old);
      cJSON_Delete (now);
    }
  return same;
}

/* The attestation artifact about IMG from DEFINITION that the store
 * already lists and that says what STATEMENTS say, times aside: a rebuild
 * that changes nothing keeps it, as it keeps the image's digest, so that a
 * push after it finds all of it in the registry already (three new blobs
 * and two manifest writes a push, otherwise, for a record that says
 * nothing new).  True with *OUT set when there is one; an artifact that
 * cannot be read is not that one (the new record is written). */
static bool
earlier_record (struct ib_store *s, const struct ib_image *img, const char *definition, cJSON *const *statements,
                size_t n, struct ib_descriptor *out)
{
  struct ib_descriptor *arts = NULL;
  size_t n_arts = 0;
  ib_error_t e = NULL;
  if (ib_store_find_referrers (s, &img->manifest.digest, &arts, &n_arts, &e) < 0)
    {
      ib_error_release (&e);
      return false;
    }
  bool found = false;
  for (size_t k = 0; !found && k < n_arts; k++)
    {
      cleanup_free char *def = ib_store_artifact_definition (s, &arts[k].digest);
      cleanup_free char *type = ib_store_artifact_type (s, &arts[k].digest);
      struct ib_descriptor *blobs = NULL;
      size_t n_blobs = 0;
      if (def == NULL || strcmp (def, definition) != 0 || type == NULL || strcmp (type, IB_MT_INTOTO) != 0)
        continue;
      if (ib_store_artifact_blobs (s, &arts[k], &blobs, &n_blobs, &e) == 0)
        found = says_the_same (s, blobs, n_blobs, statements, n);
      ib_error_release (&e);
      ib_descriptors_free (blobs, n_blobs);
      if (found)
        ib_descriptor_copy (out, &arts[k]);
    }
  ib_descriptors_free (arts, n_arts);
  return found;
}

int
ib_provenance_write_build (struct ib_build *b, struct ib_descriptor *out, ib_error_t *err)
{
  cJSON *doc = ib_provenance_of_build (b);
  cleanup_free char *definition = ib_xstrdup (ib_provenance_definition (doc));
  cJSON *st[3];
  size_t n = 0;
  st[n++] = ib_attest_statement (b->image, b->name, IB_PREDICATE_SLSA, ib_attest_slsa (b));
  st[n++] = ib_attest_statement (b->image, b->name, IB_PREDICATE_BUILD, doc);
  cJSON *sbom = NULL;
  int r = ib_sbom_of_build (b, &sbom, err);
  if (r == 0)
    st[n++] = ib_attest_statement (b->image, b->name, IB_PREDICATE_SPDX, sbom);
  if (r == 0 && earlier_record (b->store, b->image, definition, st, n, out))
    ib_report_note (b->report, "the record of an earlier build of the same inputs stands: attestation %s",
                    out->digest.s);
  else if (r == 0)
    r = ib_provenance_write (b->store, b->image, st, n, definition, out, err);
  for (size_t i = 0; i < n; i++)
    cJSON_Delete (st[i]);
  return r;
}

const char *
ib_provenance_definition (const cJSON *doc)
{
  const cJSON *f = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (doc, "definition"), "file");
  return cJSON_IsString (f) ? f->valuestring : "";
}

char **
ib_provenance_targets (const cJSON *doc, size_t *n)
{
  char **out = NULL;
  *n = 0;
  const cJSON *f;
  cJSON_ArrayForEach (f, cJSON_GetObjectItemCaseSensitive (doc, "files"))
  {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive (f, "target");
    if (!cJSON_IsString (t))
      continue;
    out = ib_xrealloc (out, (*n + 1) * sizeof (*out));
    out[(*n)++] = ib_xstrdup (t->valuestring);
  }
  return out;
}

/* The record of an in-toto artifact M: every statement is checked to be
 * about IMG; the predicate of imgbuild's own is the record (*DOC stays
 * NULL when there is none: someone else's attestation). */
static int
read_statements (struct ib_store *s, const struct ib_image *img, const cJSON *m, cJSON **doc, ib_error_t *err)
{
  const cJSON *l;
  cJSON_ArrayForEach (l, cJSON_GetObjectItemCaseSensitive (m, "layers"))
  {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive (l, "mediaType");
    if (!cJSON_IsString (mt) || strcmp (mt->valuestring, IB_MT_INTOTO) != 0)
      continue;
    struct ib_descriptor blob = { 0 };
    cJSON *st = NULL;
    int r = ib_descriptor_from_json (l, &blob, err);
    if (r == 0)
      r = read_json (s, &blob.digest, 64u << 20, &st, err);
    cleanup_free char *what = ib_xasprintf ("statement %s", blob.digest.s);
    ib_descriptor_clear (&blob);
    if (r == 0)
      r = ib_attest_check_statement (st, &img->manifest.digest, what, err);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive (st, "predicateType");
    if (r == 0 && *doc == NULL && cJSON_IsString (type) && strcmp (type->valuestring, IB_PREDICATE_BUILD) == 0)
      *doc = cJSON_DetachItemFromObjectCaseSensitive (st, "predicate");
    cJSON_Delete (st);
    if (r < 0)
      return -1;
  }
  return 0;
}

/* The record of the provenance artifact ART about IMG: the old format's
 * one document, or the imgbuild predicate of an in-toto artifact. */
static int
read_one (struct ib_store *s, const struct ib_image *img, const struct ib_descriptor *art, cJSON **doc,
          ib_error_t *err)
{
  cJSON *m = NULL;
  *doc = NULL;
  if (!ib_store_has_blob (s, &art->digest))
    return ib_error (err, IB_EPROVENANCE, "provenance missing: artifact %s is listed about image %s, and is not there",
                     art->digest.s, img->manifest.digest.s);
  if (read_json (s, &art->digest, 1 << 20, &m, err) < 0)
    return -1;
  const cJSON *subject = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (m, "subject"), "digest");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive (m, "artifactType");
  struct ib_descriptor blob = { 0 };
  int r = 0;
  if (!cJSON_IsString (subject) || strcmp (subject->valuestring, img->manifest.digest.s) != 0)
    r = ib_error (err, IB_EINTEGRITY, "provenance %s names another subject than %s", art->digest.s,
                  img->manifest.digest.s);
  else if (cJSON_IsString (type) && strcmp (type->valuestring, IB_MT_INTOTO) == 0)
    r = read_statements (s, img, m, doc, err);
  else if (cJSON_IsString (type) && strcmp (type->valuestring, IB_MT_PROVENANCE) != 0)
    ; /* not a record: a signature (sign.h), or someone else's artifact */
  else if ((r = ib_descriptor_from_json (cJSON_GetArrayItem (cJSON_GetObjectItemCaseSensitive (m, "layers"), 0),
                                         &blob, err)) == 0)
    r = read_json (s, &blob.digest, 16u << 20, doc, err);
  ib_descriptor_clear (&blob);
  cJSON_Delete (m);
  if (r < 0)
    {
      /* A statement after imgbuild's own failed: the record taken from it
       * goes too (LeakSanitizer found it kept). */
      cJSON_Delete (*doc);
      *doc = NULL;
      return ib_error_wrap (err, "provenance %s of %s", art->digest.s, img->manifest.digest.s);
    }
  return 0;
}

int
ib_provenance_read_all (struct ib_store *s, const struct ib_image *img, cJSON ***docs, size_t *n, ib_error_t *err)
{
  struct ib_descriptor *arts;
  size_t n_arts;
  *docs = NULL;
  *n = 0;
  if (ib_store_find_referrers (s, &img->manifest.digest, &arts, &n_arts, err) < 0)
    return ib_error_wrap (err, "provenance");
  int r = 0;
  *docs = ib_xcalloc (n_arts + 1, sizeof (**docs));
  for (size_t i = 0; r == 0 && i < n_arts; i++)
    if ((r = read_one (s, img, &arts[i], &(*docs)[*n], err)) == 0 && (*docs)[*n])
      (*n)++;
  ib_descriptors_free (arts, n_arts);
  return r < 0 ? ib_error_wrap (err, "provenance") : 0;
}

void
ib_provenance_free (cJSON **docs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    cJSON_Delete (docs[i]);
  free (docs);
}
