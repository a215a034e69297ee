/* Views: an OCI layout or a docker-archive read where it lies (see
 * store.h).  A view owns nothing on disk but, at most, one temporary file
 * (a compressed archive unpacked to make its members addressable). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/store/store_private.h"

#define MAX_INDEX_SIZE (64u << 20)

static struct ib_store *
new_view (const char *local_root, const char *source)
{
  struct ib_store *s = ib_xcalloc (1, sizeof (*s));
  s->root = ib_xstrdup (local_root);
  s->blobs = ib_path_join (local_root, "blobs/sha256");
  s->view = ib_xcalloc (1, sizeof (*s->view));
  s->users_fd = -1;
  s->view->source = ib_xstrdup (source);
  pthread_mutex_init (&s->view->lock, NULL);
  return s;
}

int
ib_store_open_view (const char *local_root, const char *source, struct ib_store **out, ib_error_t *err)
{
  (void) err;
  struct ib_store *s = new_view (local_root, source);
  s->view->index = cJSON_Parse ("{\"schemaVersion\":2,\"mediaType\":\"" IB_MT_OCI_INDEX "\",\"manifests\":[]}");
  *out = s;
  return 0;
}

int
ib_store_open_layout_view (const char *local_root, const char *dir, struct ib_store **out, ib_error_t *err)
{
  cleanup_free char *layout = ib_path_join (dir, "oci-layout");
  cleanup_free char *path = ib_path_join (dir, "index.json");
  if (access (layout, F_OK) < 0 || access (path, F_OK) < 0)
    return ib_error (err, IB_ENOTFOUND, "`%s` is not an OCI image layout (no oci-layout or index.json)", dir);
  cleanup_free char *text = NULL;
  if (ib_read_file (path, MAX_INDEX_SIZE, &text, NULL, err) < 0)
    return -1;
  cJSON *index = cJSON_Parse (text);
  if (index == NULL || !cJSON_IsArray (cJSON_GetObjectItemCaseSensitive (index, "manifests")))
    {
      cJSON_Delete (index);
      return ib_error (err, IB_EINTEGRITY, "`%s` is not an OCI image index", path);
    }
  struct ib_store *s = new_view (local_root, dir);
  s->view->index = index;
  s->view->layout_blobs = ib_path_join (dir, "blobs/sha256");
  *out = s;
  return 0;
}

void
ib_store_view_add_range (struct ib_store *s, const ib_digest *d, const char *path, uint64_t offset, uint64_t length)
{
  struct ib_store_view *v = s->view;
  pthread_mutex_lock (&v->lock);
  v->blobs = ib_xrealloc (v->blobs, (v->n_blobs + 1) * sizeof (*v->blobs));
  struct ib_view_blob *b = &v->blobs[v->n_blobs++];
  memset (b, 0, sizeof (*b));
  b->digest = *d;
  b->path = ib_xstrdup (path);
  b->offset = offset;
  b->length = length;
  pthread_mutex_unlock (&v->lock);
}

void
ib_store_view_own_file (struct ib_store *s, const char *path)
{
  free (s->view->owned_file);
  s->view->owned_file = ib_xstrdup (path);
}

bool
ib_store_is_view (const struct ib_store *s)
{
  return s->view != NULL;
}

const char *
ib_store_source (const struct ib_store *s)
{
  return s->view ? s->view->source : s->root;
}

/* The first entry of D: an archive may hold the same blob twice, and the
 * first is the one its manifest was made from. */
const struct ib_view_blob *
ib_view_find (const struct ib_store_view *v, const ib_digest *d)
{
  for (size_t i = 0; i < v->n_blobs; i++)
    if (strcmp (v->blobs[i].digest.s, d->s) == 0)
      return &v->blobs[i];
  return NULL;
}

int
ib_view_locate (const struct ib_store_view *v, const ib_digest *d, struct ib_blob_loc *out, ib_error_t *err)
{
  const struct ib_view_blob *b = ib_view_find (v, d);
  if (b && b->bytes)
    return ib_error (err, IB_EINTEGRITY, "blob %s of `%s` is held in memory", d->s, v->source);
  if (b)
    {
      out->path = ib_xstrdup (b->path);
      out->offset = b->offset;
      out->length = b->length;
      return 0;
    }
  if (v->layout_blobs == NULL)
    return ib_error (err, IB_EINTEGRITY, "blob %s is missing from `%s`", d->s, v->source);
  out->path = ib_path_join (v->layout_blobs, ib_digest_hex (d->s));
  out->offset = 0;
  out->length = UINT64_MAX;
  return 0;
}

bool
ib_store_blob_trusted (const struct ib_store *s, const ib_digest *d)
{
  if (s->view == NULL)
    return true; /* hashed when it was written */
  pthread_mutex_lock (&s->view->lock);
  bool seen = false;
  for (size_t i = 0; i < s->view->n_hashed && !seen; i++)
    seen = strcmp (s->view->hashed[i].s, d->s) == 0;
  pthread_mutex_unlock (&s->view->lock);
  return seen;
}

void
ib_store_mark_hashed (struct ib_store *s, const ib_digest *d)
{
  if (s->view == NULL || ib_store_blob_trusted (s, d))
    return;
  struct ib_store_view *v = s->view;
  pthread_mutex_lock (&v->lock);
  v->hashed = ib_xrealloc (v->hashed, (v->n_hashed + 1) * sizeof (*v->hashed));
  v->hashed[v->n_hashed++] = *d;
  pthread_mutex_unlock (&v->lock);
}

void
ib_view_free (struct ib_store_view *v)
{
  if (v == NULL)
    return;
  for (size_t i = 0; i < v->n_blobs; i++)
    {
      free (v->blobs[i].path);
      free (v->blobs[i].bytes);
    }
  if (v->owned_file)
    unlink (v->owned_file);
  free (v->owned_file);
  free (v->blobs);
  free (v->hashed);
  free (v->source);
  free (v->layout_blobs);
  cJSON_Delete (v->index);
  pthread_mutex_destroy (&v->lock);
  free (v);
}
