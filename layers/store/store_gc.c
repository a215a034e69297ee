/* Garbage collection of the local store: mark from index.json (every tag,
 * every referrer, and everything their manifests and indexes name), sweep
 * the blobs nothing names (and the referrers of images no longer tagged),
 * the blob temporaries and run folders of killed
 * processes, the cache entries derived from a blob that is gone, and those
 * of a layer (by diff_id) that no kept image's config names.
 *
 * It runs under the store's users lock held exclusively: every process
 * that has the store open holds it shared (store.c), so a collection waits
 * for the builds in progress to finish (their blobs are not tagged yet, and
 * a mark from index.json would not see them) and the builds started during
 * it wait for it.  Nothing a tag, a referrer or a running build needs can
 * go. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/store/store.h"
#include "layers/store/store_private.h"

/* The most a manifest or an index may weigh (the distribution spec's own
 * limit for manifests is 4 MiB). */
#define MANIFEST_MAX (4u << 20)

struct marks
{
  char **hex; /* sorted once marking is done */
  size_t n, cap;
};

static void
marks_add (struct marks *m, const char *hex)
{
  if (m->n == m->cap)
    {
      m->cap = m->cap ? m->cap * 2 : 256;
      m->hex = ib_xrealloc (m->hex, m->cap * sizeof (*m->hex));
    }
  m->hex[m->n++] = ib_xstrdup (hex);
}

static bool
marked_linear (const struct marks *m, const char *hex)
{
  for (size_t i = 0; i < m->n; i++)
    if (strcmp (m->hex[i], hex) == 0)
      return true;
  return false;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static bool
marked (const struct marks *m, const char *hex)
{
  return ib_bsearch (&hex, m->hex, m->n, sizeof (*m->hex), cmp_str) != NULL;
}

/* What the mark phase keeps: blobs, and the diff_ids of the layers their
 * configs name (the caches of a layer's content are keyed by diff_id),
 * with the ChainIDs of every stack of two layers or more that a config
 * begins with (a base's merged view, views/, is keyed by its ChainID, and
 * any image's first layers may be another's base). */
struct keep
{
  struct marks blobs, diff_ids;
};

static int mark_descriptor (struct ib_store *s, struct keep *k, const cJSON *desc, int depth, ib_error_t *err);

/* The diff_ids of config blob HEX, when it is one and is here (a missing
 * or unreadable config keeps nothing: its caches can be made again). */
static void
keep_diff_ids (struct ib_store *s, struct keep *k, const char *hex)
{
  cleanup_free char *path = ib_path_join (s->blobs, hex);
  cleanup_free char *body = NULL;
  size_t len;
  if (ib_read_file (path, MANIFEST_MAX, &body, &len, NULL) < 0)
    return;
  cJSON *doc = cJSON_ParseWithLength (body, len);
  const cJSON *id;
  ib_digest chain = { "" };
  cJSON_ArrayForEach (id, cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (doc, "rootfs"), "diff_ids"))
  {
    const char *d = cJSON_GetStringValue (id);
    if (d == NULL || strncmp (d, "sha256:", 7) != 0 || !ib_digest_hex_valid (d + 7))
      break; /* no ChainID goes past a layer that is not a digest */
    if (!marked_linear (&k->diff_ids, d + 7))
      marks_add (&k->diff_ids, d + 7);
    bool first = chain.s[0] == '\0';
    ib_chain_id_next (&chain, d);
    if (!first && !marked_linear (&k->diff_ids, chain.s + 7))
      marks_add (&k->diff_ids, chain.s + 7);
  }
  cJSON_Delete (doc);
}

/* The descriptors a manifest, an index or an artifact manifest names:
 * config, layers, manifests, blobs.  Not `subject`: a referrer keeps its
 * subject alive only when the subject is itself tagged. */
static int
mark_children (struct ib_store *s, struct keep *k, const char *hex, int depth, ib_error_t *err)
{
  cleanup_free char *path = ib_path_join (s->blobs, hex);
  cleanup_free char *body = NULL;
  size_t len;
  if (ib_read_file (path, MANIFEST_MAX, &body, &len, err) < 0)
    return -1;
  cJSON *doc = cJSON_ParseWithLength (body, len);
  if (doc == NULL)
    return ib_error (err, IB_EINTEGRITY, "gc: manifest sha256:%s is not JSON", hex);
  const cJSON *config = cJSON_GetObjectItemCaseSensitive (doc, "config");
  const char *config_digest = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (config, "digest"));
  if (config_digest && strncmp (config_digest, "sha256:", 7) == 0 && ib_digest_hex_valid (config_digest + 7))
    keep_diff_ids (s, k, config_digest + 7);
  int r = mark_descriptor (s, k, config, depth + 1, err);
  static const char *const lists[] = { "layers", "manifests", "blobs" };
  for (size_t i = 0; r == 0 && i < sizeof (lists) / sizeof (*lists); i++)
    {
      const cJSON *d;
      cJSON_ArrayForEach (d, cJSON_GetObjectItemCaseSensitive (doc, lists[i]))
      {
        if ((r = mark_descriptor (s, k, d, depth + 1, err)) < 0)
          break;
      }
    }
  cJSON_Delete (doc);
  return r;
}

static bool
is_manifest_type (const char *mt)
{
  return mt && (strcmp (mt, IB_MT_OCI_MANIFEST) == 0 || strcmp (mt, IB_MT_OCI_INDEX) == 0
                || strcmp (mt, IB_MT_DOCKER_MANIFEST) == 0 || strcmp (mt, IB_MT_DOCKER_LIST) == 0);
}

static int
mark_descriptor (struct ib_store *s, struct keep *k, const cJSON *desc, int depth, ib_error_t *err)
{
  struct marks *m = &k->blobs;
  if (desc == NULL)
    return 0;
  if (depth > 16)
    return ib_error (err, IB_EINTEGRITY, "gc: manifests nest deeper than 16");
  const char *digest = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (desc, "digest"));
  const char *mt = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (desc, "mediaType"));
  if (digest == NULL || strncmp (digest, "sha256:", 7) != 0 || !ib_digest_hex_valid (digest + 7))
    return 0; /* not a blob of this store: nothing to keep */
  const char *hex = digest + 7;
  if (marked_linear (m, hex))
    return 0;
  marks_add (m, hex);
  cleanup_free char *path = ib_path_join (s->blobs, hex);
  if (!is_manifest_type (mt) || access (path, F_OK) < 0)
    return 0; /* a missing blob is imgverify --store's to report */
  return mark_children (s, k, hex, depth, err);
}

static const char *
subject_of (const cJSON *d)
{
  return cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (d, "annotations"),
                                                                 IB_ANNOTATION_SUBJECT));
}

/* Tagged images first, then the referrers of what they kept (a referrer of
 * a referrer too: up to 4 rounds).  A referrer whose subject is gone is
 * dropped from index.json with it. */
static int
mark_from_index (struct ib_store *s, struct keep *k, size_t *dropped, ib_error_t *err)
{
  struct marks *m = &k->blobs;
  cleanup_free char *path = ib_path_join (s->root, "index.json");
  cleanup_free char *body = NULL;
  size_t len;
  if (ib_read_file (path, 64u << 20, &body, &len, err) < 0)
    return -1;
  cJSON *index = cJSON_ParseWithLength (body, len);
  if (index == NULL)
    return ib_error (err, IB_EINTEGRITY, "gc: `%s` is not JSON: nothing removed", path);
  cJSON *list = cJSON_GetObjectItemCaseSensitive (index, "manifests");
  const cJSON *d;
  int r = 0;
  cJSON_ArrayForEach (d, list)
  {
    if (subject_of (d) == NULL && (r = mark_descriptor (s, k, d, 0, err)) < 0)
      break;
  }
  for (int round = 0; r == 0 && round < 4; round++)
    {
      size_t before = m->n;
      cJSON_ArrayForEach (d, list)
      {
        const char *subject = subject_of (d);
        if (subject && strncmp (subject, "sha256:", 7) == 0 && marked_linear (m, subject + 7)
            && (r = mark_descriptor (s, k, d, 0, err)) < 0)
          break;
      }
      if (m->n == before)
        break;
    }
  cJSON *e = list ? list->child : NULL;
  while (r == 0 && e)
    {
      cJSON *next = e->next;
      const char *subject = subject_of (e);
      if (subject && (strncmp (subject, "sha256:", 7) != 0 || !marked_linear (m, subject + 7)))
        {
          cJSON_Delete (cJSON_DetachItemViaPointer (list, e));
          (*dropped)++;
        }
      e = next;
    }
  if (r == 0 && *dropped)
    {
      cleanup_free char *text = cJSON_PrintUnformatted (index);
      r = ib_write_file_atomic (path, text, strlen (text), 0644, err);
    }
  cJSON_Delete (index);
  if (r == 0 && m->n > 0)
    ib_qsort (m->hex, m->n, sizeof (*m->hex), cmp_str);
  if (r == 0 && k->diff_ids.n > 0)
    ib_qsort (k->diff_ids.hex, k->diff_ids.n, sizeof (*k->diff_ids.hex), cmp_str);
  return r;
}

static void
sweep_blobs (struct ib_store *s, const struct marks *m, struct ib_gc_result *out, struct marks *gone)
{
  DIR *d = opendir (s->blobs);
  if (d == NULL)
    return;
  struct dirent *de;
  while ((de = readdir (d)))
    {
      struct stat st;
      if (de->d_name[0] == '.' && strncmp (de->d_name, ".tmp-", 5) != 0)
        continue;
      if (fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (st.st_mode))
        continue;
      bool tmp = strncmp (de->d_name, ".tmp-", 5) == 0;
      if (!tmp && (!ib_digest_hex_valid (de->d_name) || marked (m, de->d_name)))
        {
          out->blobs_kept++;
          continue;
        }
      if (unlinkat (dirfd (d), de->d_name, 0) < 0)
        continue;
      if (tmp)
        out->temporaries++;
      else
        {
          out->blobs_removed++;
          out->bytes_removed += (uint64_t) st.st_size;
          if (gone->n == gone->cap)
            {
              gone->cap = gone->cap ? gone->cap * 2 : 64;
              gone->hex = ib_xrealloc (gone->hex, gone->cap * sizeof (*gone->hex));
            }
          gone->hex[gone->n++] = ib_xstrdup (de->d_name);
        }
    }
  closedir (d);
  if (gone->n > 0) /* qsort's base may not be NULL, even for no elements */
    ib_qsort (gone->hex, gone->n, sizeof (*gone->hex), cmp_str);
}

/* Most cache entries are derived from the blob whose digest begins their
 * name; entries keyed by content (symbols, nvcc) stay valid for any image
 * and are kept.  A layer's file list (files/) and extracted tree (rootfs/)
 * are keyed by its diff_id, which no blob is named by: they go when no
 * kept image's config names that diff_id, as does the blob kept for it
 * (layer-gz/, layers/tar/tarlayer.c); a merged view (views/) and the
 * verdicts kept per base (native-memo/, sbom-gpu/, sbom-packages/: their
 * names begin with the base's ChainID, symbol-check/link-check/memo.c) go when no kept
 * image begins with those layers.  run/ holds the scratch folders of runs, and none is
 * running. */
static bool
by_diff_id (const char *kind)
{
  static const char *const kinds[] = { "files", "rootfs", "views", "native-memo", "sbom-gpu", "sbom-packages", "layer-gz" };
  for (size_t i = 0; i < sizeof (kinds) / sizeof (*kinds); i++)
    if (strcmp (kind, kinds[i]) == 0)
      return true;
  return false;
}

static void
sweep_caches (struct ib_store *s, const struct keep *keep, const struct marks *gone, struct ib_gc_result *out)
{
  cleanup_free char *base = ib_path_join (s->root, "imgbuild");
  DIR *d = opendir (base);
  if (d == NULL)
    return;
  struct dirent *kind;
  while ((kind = readdir (d)))
    {
      if (kind->d_name[0] == '.' || kind->d_type != DT_DIR)
        continue;
      cleanup_free char *dir = ib_path_join (base, kind->d_name);
      bool runs = strcmp (kind->d_name, "run") == 0, layers = by_diff_id (kind->d_name);
      DIR *k = opendir (dir);
      if (k == NULL)
        continue;
      struct dirent *e;
      while ((e = readdir (k)))
        {
          if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
            continue;
          char hex[65] = "";
          if (strlen (e->d_name) >= 64)
            memcpy (hex, e->d_name, 64);
          bool stale = layers ? ib_digest_hex_valid (hex) && !marked (&keep->diff_ids, hex)
                              : ib_digest_hex_valid (hex) && marked (gone, hex);
          if (!runs && !stale)
            continue;
          cleanup_free char *path = ib_path_join (dir, e->d_name);
          ib_error_t ignored = NULL;
          if (ib_remove_tree (path, &ignored) == 0)
            out->cache_entries++;
          ib_error_release (&ignored);
        }
      closedir (k);
    }
  closedir (d);
}

static void
marks_clear (struct marks *m)
{
  for (size_t i = 0; i < m->n; i++)
    free (m->hex[i]);
  free (m->hex);
}

int
ib_store_gc (struct ib_store *s, struct ib_gc_result *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (s->view || s->users_fd < 0)
    return ib_error (err, IB_EUSAGE, "gc: `%s` is not a local store", s->root);
  while (flock (s->users_fd, LOCK_EX) < 0)
    if (errno != EINTR)
      return ib_error_errno (err, errno, IB_EENV, "gc: lock `%s`", s->root);
  struct keep k = { 0 };
  struct marks gone = { 0 };
  int r = mark_from_index (s, &k, &out->referrers_dropped, err);
  if (r == 0)
    {
      sweep_blobs (s, &k.blobs, out, &gone);
      sweep_caches (s, &k, &gone, out);
      r = ib_fsync_dir (s->blobs, err);
    }
  marks_clear (&k.blobs);
  marks_clear (&k.diff_ids);
  marks_clear (&gone);
  flock (s->users_fd, LOCK_SH);
  return r < 0 ? ib_error_wrap (err, "gc `%s`", s->root) : 0;
}
