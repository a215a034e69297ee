#include "provenance.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"

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

int
ib_provenance_write (struct ib_store *s, const struct ib_image *img, const cJSON *doc, struct ib_descriptor *out,
                     ib_error_t *err)
{
  char *text = cJSON_PrintUnformatted (doc);
  struct ib_descriptor blob = { .media_type = IB_MT_PROVENANCE, .size = strlen (text) };
  struct ib_descriptor empty = { .media_type = IB_MT_OCI_EMPTY, .size = 2 };
  int r = ib_store_put_blob (s, text, blob.size, &blob.digest, err);
  free (text);
  if (r < 0 || ib_store_put_blob (s, "{}", 2, &empty.digest, err) < 0)
    return -1;
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddNumberToObject (m, "schemaVersion", 2);
  cJSON_AddStringToObject (m, "mediaType", IB_MT_OCI_MANIFEST);
  cJSON_AddStringToObject (m, "artifactType", IB_MT_PROVENANCE);
  cJSON_AddItemToObject (m, "config", ib_descriptor_to_json (&empty));
  cJSON *layers = cJSON_AddArrayToObject (m, "layers");
  cJSON_AddItemToArray (layers, ib_descriptor_to_json (&blob));
  cJSON_AddItemToObject (m, "subject", ib_descriptor_to_json (&img->manifest));
  const char *file = ib_provenance_definition (doc);
  if (*file)
    cJSON_AddStringToObject (cJSON_AddObjectToObject (m, "annotations"), IB_ANNOTATION_DEFINITION, file);
  char *mtext = cJSON_PrintUnformatted (m);
  cJSON_Delete (m);
  out->media_type = ib_xstrdup (IB_MT_OCI_MANIFEST);
  out->size = strlen (mtext);
  r = ib_store_put_blob (s, mtext, out->size, &out->digest, err);
  free (mtext);
  return r;
}

const char *
ib_provenance_definition (const cJSON *doc)
{
  const cJSON *f = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (doc, "definition"), "file");
  return cJSON_IsString (f) ? f->valuestring : "";
}

/* The document of the provenance artifact ART about IMG. */
static int
read_one (struct ib_store *s, const struct ib_image *img, const struct ib_descriptor *art, cJSON **doc,
          ib_error_t *err)
{
  cleanup_free char *mtext = NULL, *text = NULL;
  size_t len;
  if (ib_store_read_blob (s, &art->digest, 1 << 20, &mtext, &len, err) < 0)
    return -1;
  cJSON *m = cJSON_ParseWithLength (mtext, len);
  const cJSON *subject = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (m, "subject"), "digest");
  struct ib_descriptor blob = { 0 };
  int r = cJSON_IsString (subject) && strcmp (subject->valuestring, img->manifest.digest.s) == 0
              ? ib_descriptor_from_json (cJSON_GetArrayItem (cJSON_GetObjectItemCaseSensitive (m, "layers"), 0),
                                         &blob, err)
              : ib_error (err, IB_EINTEGRITY, "provenance %s names another subject than %s", art->digest.s,
                          img->manifest.digest.s);
  cJSON_Delete (m);
  if (r == 0)
    r = ib_store_read_blob (s, &blob.digest, 16u << 20, &text, &len, err);
  ib_descriptor_clear (&blob);
  if (r < 0)
    return -1;
  *doc = cJSON_ParseWithLength (text, len);
  return *doc ? 0 : ib_error (err, IB_EINTEGRITY, "provenance %s of %s is not JSON", art->digest.s,
                              img->manifest.digest.s);
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
    if ((r = read_one (s, img, &arts[i], &(*docs)[*n], err)) == 0)
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
