/* docker-archive:FILE[:NAME:TAG] — what `docker save` writes and `docker
 * load` reads.  Two layouts exist: the classic one (manifest.json naming
 * <id>.json configs and <id>/layer.tar layers, uncompressed) and the one of
 * Docker 25+, an OCI layout in a tar that also has a manifest.json.  Reading
 * streams the tar once: every blob goes straight into the store, hashed on
 * the way, and the small JSON files stay in memory.  Writing produces both
 * layouts at once (blobs/sha256/… named by manifest.json and index.json), so
 * old and new Docker and skopeo all accept it; `docker load` inflates
 * compressed layers itself, so layer blobs are carried as they are.
 *
 * Read into a view (imgverify), nothing is copied: each member's range of
 * the file is recorded and read in place later.  A compressed archive has
 * no addressable members: it is inflated once into a temporary file of the
 * local store, removed when the view is freed. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/read/layer_reader.h"
#include "layers/tar/tarlayer.h"
#include "layers/transports/transports.h"
#include "layers/tar/tarpath.h"

#define MAX_JSON (16u << 20)
#define CHUNK (1u << 20)

/* A copy buffer for one member: CHUNK, or less for a member that is
 * smaller (most are a few KiB: a 1 MiB allocation each costs more than
 * the read). */
static size_t
member_chunk (struct archive_entry *ae)
{
  la_int64_t size = archive_entry_size (ae);
  return size >= 0 && size < (la_int64_t) CHUNK ? (size_t) size + 4096 : CHUNK;
}

/* libarchive's read block for FILE: CHUNK, or the file's size if smaller. */
static size_t
read_block (const char *file)
{
  struct stat st;
  return stat (file, &st) == 0 && S_ISREG (st.st_mode) && st.st_size < (off_t) CHUNK ? (size_t) st.st_size + 512 : CHUNK;
}

struct member
{
  char *path;
  char *link; /* a symlink or hardlink member: the path it stands for */
  ib_digest digest;
  uint64_t size;
  char *text; /* manifest.json and friends, kept whole */
};

struct archive_members
{
  struct member *m;
  size_t n, cap;
};

static void
members_free (struct archive_members *a)
{
  for (size_t i = 0; i < a->n; i++)
    {
      free (a->m[i].path);
      free (a->m[i].link);
      free (a->m[i].text);
    }
  free (a->m);
}

static const struct member *
members_find (const struct archive_members *a, const char *path, int depth)
{
  for (size_t i = 0; i < a->n; i++)
    if (strcmp (a->m[i].path, path) == 0)
      {
        if (a->m[i].link && depth < 8)
          return members_find (a, a->m[i].link, depth + 1);
        return a->m[i].link ? NULL : &a->m[i];
      }
  return NULL;
}

static bool
is_small_json (const char *path)
{
  return strcmp (path, "manifest.json") == 0 || strcmp (path, "index.json") == 0
         || strcmp (path, "oci-layout") == 0 || strcmp (path, "repositories") == 0;
}

/* A symlink's target is relative to the member's own folder. */
static char *
resolve_link (const char *member, const char *target, bool hard)
{
  if (hard || target[0] == '/')
    return ib_clean_tar_path (target);
  cleanup_free char *dir = ib_xstrdup (member);
  char *slash = strrchr (dir, '/');
  if (slash)
    *slash = '\0';
  else
    dir[0] = '\0';
  cleanup_free char *joined = *dir ? ib_xasprintf ("%s/%s", dir, target) : ib_xstrdup (target);
  /* ib_clean_tar_path refuses "..": fold "a/../b" first. */
  char *parts[256];
  int np = 0;
  char *save = NULL;
  for (char *t = strtok_r (joined, "/", &save); t; t = strtok_r (NULL, "/", &save))
    {
      if (strcmp (t, "..") == 0)
        {
          if (np == 0)
            return NULL;
          np--;
        }
      else if (strcmp (t, ".") != 0 && np < 256)
        parts[np++] = t;
    }
  char *out = ib_xstrdup ("");
  for (int i = 0; i < np; i++)
    {
      char *next = *out ? ib_xasprintf ("%s/%s", out, parts[i]) : ib_xstrdup (parts[i]);
      free (out);
      out = next;
    }
  return out;
}

static int
store_member_data (struct ib_store *s, struct archive *a, struct archive_entry *ae, const char *file, struct member *m,
                   ib_error_t *err)
{
  struct ib_blob_writer *w;
  if (ib_blob_writer_new (s, &w, err) < 0)
    return -1;
  size_t chunk = member_chunk (ae);
  cleanup_free char *buf = ib_xmalloc (chunk);
  for (;;)
    {
      la_ssize_t n = archive_read_data (a, buf, chunk);
      if (n < 0)
        {
          ib_blob_writer_abort (w);
          return ib_error (err, IB_EINTEGRITY, "`%s` is damaged or truncated: member `%s`: %s", file, m->path,
                           archive_error_string (a));
        }
      if (n == 0)
        break;
      if (ib_blob_writer_write (w, buf, (size_t) n, err) < 0)
        {
          ib_blob_writer_abort (w);
          return -1;
        }
    }
  return ib_blob_writer_commit (w, NULL, UINT64_MAX, &m->digest, &m->size, err);
}

static int
keep_member_text (struct archive *a, struct archive_entry *ae, struct member *m, ib_error_t *err)
{
  la_int64_t size = archive_entry_size (ae);
  if (size < 0 || (uint64_t) size > MAX_JSON)
    return ib_error (err, IB_EINTEGRITY, "`%s` is larger than %u bytes", m->path, MAX_JSON);
  m->text = ib_xmalloc ((size_t) size + 1);
  la_ssize_t n = archive_read_data (a, m->text, (size_t) size);
  if (n != size)
    return ib_error (err, IB_EINTEGRITY, "`%s`: %s", m->path, n < 0 ? archive_error_string (a) : "short read");
  m->text[size] = '\0';
  return 0;
}

/* A member of an archive read in place: its range is recorded.  One named
 * by its digest (blobs/sha256/HEX) is taken at its name until the verifier
 * hashes it; the others (a classic archive's layer.tar and config) are
 * hashed now, since nothing else names their digest. */
static int
view_member_data (struct ib_store *s, struct archive *a, struct archive_entry *ae, const char *file, struct member *m,
                  ib_error_t *err)
{
  uint64_t offset = (uint64_t) archive_filter_bytes (a, 0);
  la_int64_t size = archive_entry_size (ae);
  if (size < 0 || archive_entry_sparse_count (ae) > 0)
    return ib_error (err, IB_EINTEGRITY, "`%s`: member `%s` is sparse or has no size", file, m->path);
  cleanup_free char *named = strncmp (m->path, "blobs/sha256/", 13) == 0 ? ib_xasprintf ("sha256:%s", m->path + 13)
                                                                        : NULL;
  if (named && ib_digest_check (named, NULL) == 0)
    {
      strcpy (m->digest.s, named);
      m->size = (uint64_t) size;
      archive_read_data_skip (a);
    }
  else
    {
      ib_sha256 *h = ib_sha256_new ();
      size_t chunk = member_chunk (ae);
      cleanup_free char *buf = ib_xmalloc (chunk);
      la_ssize_t n;
      m->size = 0;
      while ((n = archive_read_data (a, buf, chunk)) > 0)
        {
          ib_sha256_update (h, buf, (size_t) n);
          m->size += (uint64_t) n;
        }
      ib_sha256_final (h, &m->digest);
      ib_sha256_free (h);
      if (n < 0)
        return ib_error (err, IB_EINTEGRITY, "`%s` is damaged or truncated: member `%s`: %s", file, m->path,
                         archive_error_string (a));
    }
  ib_store_view_add_range (s, &m->digest, file, offset, (uint64_t) size);
  return 0;
}

/* Inflate a compressed archive into a temporary file that the view S owns,
 * so that its members have ranges.  *PLAIN is that file's name. */
static int
inflate_for_view (struct ib_store *s, const char *file, char **plain, ib_error_t *err)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "tmp", &dir, err) < 0)
    return -1;
  cleanup_free char *tmp = ib_path_join (dir, "archive-XXXXXX");
  cleanup_close int fd = mkostemp (tmp, O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
  ib_store_view_own_file (s, tmp);
  struct archive *a = archive_read_new ();
  archive_read_support_format_raw (a);
  archive_read_support_filter_all (a);
  struct archive_entry *ae;
  int ret = archive_read_open_filename (a, file, 1 << 20) == ARCHIVE_OK && archive_read_next_header (a, &ae) == ARCHIVE_OK
                ? 0
                : ib_error (err, IB_EINTEGRITY, "open `%s`: %s", file, archive_error_string (a));
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  la_ssize_t n;
  while (ret == 0 && (n = archive_read_data (a, buf, 1 << 20)) != 0)
    ret = n < 0 ? ib_error (err, IB_EINTEGRITY, "`%s` is damaged or truncated: %s", file, archive_error_string (a))
                : ib_write_all (fd, buf, (size_t) n, tmp, err);
  archive_read_free (a);
  if (ret == 0)
    *plain = steal_pointer (&tmp);
  return ret;
}

static int
read_members (struct ib_store *s, const char *file, struct archive_members *out, ib_error_t *err)
{
  struct archive *a = archive_read_new ();
  archive_read_support_format_tar (a);
  archive_read_support_format_gnutar (a);
  archive_read_support_filter_all (a);
  int ret = 0;
  if (archive_read_open_filename (a, file, read_block (file)) != ARCHIVE_OK)
    ret = ib_error (err, IB_EINTEGRITY, "open `%s`: %s", file, archive_error_string (a));
  if (ret == 0 && ib_store_is_view (s) && archive_filter_count (a) > 1)
    {
      archive_read_free (a);
      cleanup_free char *plain = NULL;
      if (inflate_for_view (s, file, &plain, err) < 0)
        return -1;
      return read_members (s, plain, out, err);
    }
  struct archive_entry *ae;
  int x = ARCHIVE_OK;
  while (ret == 0 && (x = archive_read_next_header (a, &ae)) == ARCHIVE_OK)
    {
      char *path = ib_clean_tar_path (archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "");
      int type = archive_entry_filetype (ae);
      const char *hard = archive_entry_hardlink (ae);
      if (path == NULL || (type != AE_IFREG && type != AE_IFLNK && !hard))
        {
          free (path);
          continue;
        }
      if (out->n == out->cap)
        {
          out->cap = out->cap ? out->cap * 2 : 64;
          out->m = ib_xrealloc (out->m, out->cap * sizeof (*out->m));
        }
      struct member *m = &out->m[out->n++];
      memset (m, 0, sizeof (*m));
      m->path = path;
      if (hard || type == AE_IFLNK)
        {
          m->link = resolve_link (path, hard ? hard : archive_entry_symlink (ae), hard != NULL);
          if (m->link == NULL)
            ret = ib_error (err, IB_EINTEGRITY, "`%s`: member `%s` links outside the archive", file, path);
        }
      else if (is_small_json (path))
        ret = keep_member_text (a, ae, m, err);
      else if (ib_store_is_view (s))
        ret = view_member_data (s, a, ae, file, m, err);
      else
        ret = store_member_data (s, a, ae, file, m, err);
    }
  if (ret == 0 && x != ARCHIVE_EOF)
    ret = ib_error (err, IB_EINTEGRITY, "`%s` is damaged or truncated: %s", file, archive_error_string (a));
  archive_read_free (a);
  return ret;
}

/* A member named blobs/sha256/HEX must hold content of that digest. */
static int
check_blob_names (const struct archive_members *a, const char *file, ib_error_t *err)
{
  for (size_t i = 0; i < a->n; i++)
    {
      const struct member *m = &a->m[i];
      if (m->link || m->text || strncmp (m->path, "blobs/sha256/", 13) != 0)
        continue;
      if (strcmp (m->path + 13, ib_digest_hex (m->digest.s)) != 0)
        return ib_error (err, IB_EINTEGRITY, "`%s`: member `%s` has digest %s", file, m->path, m->digest.s);
    }
  return 0;
}

static const char *
layer_media_type (struct ib_store *s, const ib_digest *d)
{
  struct ib_blob_loc l = { 0 };
  cleanup_close int fd = ib_store_locate_blob (s, d, &l, NULL) == 0 ? ib_blob_loc_open (&l, d, NULL) : -1;
  enum ib_blob_codec codec = ib_blob_codec_at (fd, l.offset, ib_blob_loc_length (&l, fd));
  ib_blob_loc_clear (&l);
  switch (codec)
    {
    case IB_BLOB_GZIP:
      return IB_MT_OCI_LAYER_GZIP;
    case IB_BLOB_ZSTD:
      return IB_MT_OCI_LAYER_ZSTD;
    default:
      return IB_MT_OCI_LAYER;
    }
}

static bool
has_repo_tag (const cJSON *entry, const char *name)
{
  const cJSON *t;
  cJSON_ArrayForEach (t, cJSON_GetObjectItemCaseSensitive (entry, "RepoTags"))
  {
    if (cJSON_IsString (t) && strcmp (t->valuestring, name) == 0)
      return true;
  }
  return false;
}

static int
member_descriptor (const struct archive_members *a, const cJSON *path, const char *what, struct ib_descriptor *d,
                   ib_error_t *err)
{
  const struct member *m = cJSON_IsString (path) ? members_find (a, path->valuestring, 0) : NULL;
  if (m == NULL || m->text)
    return ib_error (err, IB_EINTEGRITY, "manifest.json names %s `%s`, which the archive does not hold", what,
                     cJSON_IsString (path) ? path->valuestring : "(not a string)");
  d->digest = m->digest;
  d->size = m->size;
  return 0;
}

/* manifest.json → an OCI manifest in the store. */
static int
manifest_from_docker (struct ib_store *s, const struct archive_members *a, const cJSON *entry,
                      struct ib_descriptor *out, ib_error_t *err)
{
  struct ib_descriptor config = { 0 };
  if (member_descriptor (a, cJSON_GetObjectItemCaseSensitive (entry, "Config"), "config", &config, err) < 0)
    return -1;
  config.media_type = IB_MT_OCI_CONFIG;
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddNumberToObject (m, "schemaVersion", 2);
  cJSON_AddStringToObject (m, "mediaType", IB_MT_OCI_MANIFEST);
  cJSON_AddItemToObject (m, "config", ib_descriptor_to_json (&config));
  cJSON *layers = cJSON_AddArrayToObject (m, "layers");
  const cJSON *p;
  cJSON_ArrayForEach (p, cJSON_GetObjectItemCaseSensitive (entry, "Layers"))
  {
    struct ib_descriptor l = { 0 };
    if (member_descriptor (a, p, "layer", &l, err) < 0)
      {
        cJSON_Delete (m);
        return -1;
      }
    l.media_type = (char *) layer_media_type (s, &l.digest);
    cJSON_AddItemToArray (layers, ib_descriptor_to_json (&l));
  }
  char *text = cJSON_PrintUnformatted (m);
  cJSON_Delete (m);
  out->media_type = ib_xstrdup (IB_MT_OCI_MANIFEST);
  out->size = strlen (text);
  int r = ib_store_put_blob (s, text, out->size, &out->digest, err);
  free (text);
  return r;
}

static bool
has_blob_member (const struct archive_members *a, const ib_digest *d)
{
  cleanup_free char *path = ib_xasprintf ("blobs/sha256/%s", ib_digest_hex (d->s));
  return members_find (a, path, 0) != NULL;
}

/* An OCI index in the archive naming one image whose manifest is in it:
 * that very manifest (its digest kept), and its provenance records, those
 * listed. */
static int
manifest_from_index (struct ib_store *s, const struct archive_members *a, struct ib_descriptor *out,
                     ib_error_t *err)
{
  const struct member *ij = members_find (a, "index.json", 0);
  cJSON *index = ij && ij->text ? cJSON_Parse (ij->text) : NULL;
  const cJSON *m, *image = NULL;
  int images = 0;
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive (m, "annotations");
    if (!cJSON_GetObjectItemCaseSensitive (ann, IB_ANNOTATION_SUBJECT))
      {
        image = m;
        images++;
      }
  }
  int r = 1; /* not usable: the caller reads manifest.json */
  struct ib_descriptor d = { 0 };
  if (images == 1 && ib_descriptor_from_json (image, &d, NULL) == 0 && has_blob_member (a, &d.digest))
    {
      r = 0;
      cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
      {
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive (m, "annotations");
        struct ib_descriptor p = { 0 };
        if (r == 0 && cJSON_GetObjectItemCaseSensitive (ann, IB_ANNOTATION_SUBJECT)
            && ib_descriptor_from_json (m, &p, NULL) == 0 && has_blob_member (a, &p.digest))
          r = ib_store_tag (s, NULL, &d, &p, err);
        ib_descriptor_clear (&p);
      }
      if (r == 0)
        {
          *out = d;
          d.media_type = NULL;
        }
    }
  ib_descriptor_clear (&d);
  cJSON_Delete (index);
  return r;
}

static int
choose_manifest (struct ib_store *s, const struct archive_members *a, const struct ib_ref *ref,
                 struct ib_descriptor *out, ib_error_t *err)
{
  if (ref->name == NULL)
    {
      int r = manifest_from_index (s, a, out, err);
      if (r <= 0)
        return r;
    }
  const struct member *mj = members_find (a, "manifest.json", 0);
  if (mj && mj->text)
    {
      cJSON *list = cJSON_Parse (mj->text);
      if (!cJSON_IsArray (list) || cJSON_GetArraySize (list) == 0)
        {
          cJSON_Delete (list);
          return ib_error (err, IB_EINTEGRITY, "`%s`: manifest.json is not a list of images", ref->location);
        }
      const cJSON *chosen = NULL, *e;
      cJSON_ArrayForEach (e, list)
      {
        if (ref->name ? has_repo_tag (e, ref->name) : cJSON_GetArraySize (list) == 1)
          chosen = e;
      }
      int r = chosen ? manifest_from_docker (s, a, chosen, out, err)
                     : ib_error (err, IB_ENOTFOUND, "`%s` holds %s", ref->location,
                                 ref->name ? "no image of that name" : "several images; name one as FILE:NAME:TAG");
      cJSON_Delete (list);
      return r;
    }
  const struct member *ij = members_find (a, "index.json", 0);
  if (ij == NULL || ij->text == NULL)
    return ib_error (err, IB_EINTEGRITY, "`%s` has neither manifest.json nor index.json: not a docker-archive",
                     ref->location);
  cJSON *index = cJSON_Parse (ij->text);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive (index, "manifests");
  int r = cJSON_GetArraySize (list) == 1
              ? ib_descriptor_from_json (cJSON_GetArrayItem (list, 0), out, err)
              : ib_error (err, IB_EINTEGRITY, "`%s`: index.json does not name exactly one image", ref->location);
  cJSON_Delete (index);
  return r;
}

int
ib_docker_archive_read (struct ib_store *s, const struct ib_ref *ref, struct ib_descriptor *manifest,
                        ib_error_t *err)
{
  struct archive_members a = { 0 };
  int r = read_members (s, ref->location, &a, err);
  if (r == 0)
    r = check_blob_names (&a, ref->location, err);
  if (r == 0)
    r = choose_manifest (s, &a, ref, manifest, err);
  members_free (&a);
  return r;
}

static int
archive_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
              struct ib_descriptor *manifest, ib_error_t *err)
{
  (void) platform;
  return ib_docker_archive_read (s, ref, manifest, err);
}

/* ---- writing ------------------------------------------------------------- */

static int
put_member (struct archive *a, const char *path, int type, int64_t size, ib_error_t *err)
{
  struct archive_entry *ae = archive_entry_new ();
  archive_entry_set_pathname (ae, path);
  archive_entry_set_filetype (ae, (unsigned) type);
  archive_entry_set_perm (ae, type == AE_IFDIR ? 0755 : 0644);
  archive_entry_set_size (ae, type == AE_IFDIR ? 0 : size);
  archive_entry_set_mtime (ae, ib_source_date_epoch (), 0);
  int r = archive_write_header (a, ae);
  archive_entry_free (ae);
  return r == ARCHIVE_OK ? 0 : ib_error (err, IB_EENV, "write `%s`: %s", path, archive_error_string (a));
}

static int
put_text (struct archive *a, const char *path, const char *text, ib_error_t *err)
{
  size_t len = strlen (text);
  if (put_member (a, path, AE_IFREG, (int64_t) len, err) < 0)
    return -1;
  if (archive_write_data (a, text, len) != (la_ssize_t) len)
    return ib_error (err, IB_EENV, "write `%s`: %s", path, archive_error_string (a));
  return 0;
}

static int
put_blob (struct archive *a, struct ib_store *s, const struct ib_descriptor *d, ib_error_t *err)
{
  cleanup_free char *name = ib_xasprintf ("blobs/sha256/%s", ib_digest_hex (d->digest.s));
  cleanup_free char *path = ib_store_blob_path (s, &d->digest);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EINTEGRITY, "blob %s", d->digest.s);
  if (put_member (a, name, AE_IFREG, (int64_t) d->size, err) < 0)
    return -1;
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  uint64_t left = d->size;
  while (left > 0)
    {
      ssize_t n = ib_read_full (fd, buf, left < (1 << 20) ? left : (1 << 20));
      if (n <= 0)
        return ib_error (err, IB_EINTEGRITY, "blob %s is shorter than its descriptor", d->digest.s);
      if (archive_write_data (a, buf, (size_t) n) != n)
        return ib_error (err, IB_EENV, "write `%s`: %s", name, archive_error_string (a));
      left -= (uint64_t) n;
    }
  return 0;
}

static char *
docker_manifest_json (const struct ib_image *img, const char *name)
{
  cJSON *list = cJSON_CreateArray ();
  cJSON *e = cJSON_CreateObject ();
  cJSON_AddItemToArray (list, e);
  cleanup_free char *cfg = ib_xasprintf ("blobs/sha256/%s", ib_digest_hex (img->config.digest.s));
  cJSON_AddStringToObject (e, "Config", cfg);
  cJSON *tags = cJSON_AddArrayToObject (e, "RepoTags");
  cJSON_AddItemToArray (tags, cJSON_CreateString (name));
  cJSON *layers = cJSON_AddArrayToObject (e, "Layers");
  for (size_t i = 0; i < img->n_layers; i++)
    {
      cleanup_free char *p = ib_xasprintf ("blobs/sha256/%s", ib_digest_hex (img->layers[i].digest.s));
      cJSON_AddItemToArray (layers, cJSON_CreateString (p));
    }
  char *text = cJSON_PrintUnformatted (list);
  cJSON_Delete (list);
  return text;
}

static char *
oci_index_json (struct ib_store *s, const struct ib_image *img, const char *name,
                const struct ib_descriptor *referrers, size_t n)
{
  cJSON *index = cJSON_CreateObject ();
  cJSON_AddNumberToObject (index, "schemaVersion", 2);
  cJSON_AddStringToObject (index, "mediaType", IB_MT_OCI_INDEX);
  cJSON *list = cJSON_AddArrayToObject (index, "manifests");
  cJSON *d = ib_descriptor_to_json (&img->manifest);
  cJSON *ann = cJSON_AddObjectToObject (d, "annotations");
  cJSON_AddStringToObject (ann, IB_ANNOTATION_REF_NAME, name);
  cJSON_AddItemToArray (list, d);
  for (size_t i = 0; i < n; i++)
    {
      cJSON *r = ib_descriptor_to_json (&referrers[i]);
      cleanup_free char *type = ib_store_artifact_type (s, &referrers[i].digest);
      cJSON_AddStringToObject (r, "artifactType", type);
      cJSON *ra = cJSON_AddObjectToObject (r, "annotations");
      cJSON_AddStringToObject (ra, IB_ANNOTATION_SUBJECT, img->manifest.digest.s);
      cJSON_AddItemToArray (list, r);
    }
  char *text = cJSON_PrintUnformatted (index);
  cJSON_Delete (index);
  return text;
}

struct out
{
  ib_stream_write_fn write;
  void *data;
};

static la_ssize_t
out_write_cb (struct archive *a, void *data, const void *buf, size_t len)
{
  /* libarchive reports what the callback says: without it a full disk
   * read "(null)". */
  struct out *o = data;
  ib_error_t e = NULL;
  if (o->write (o->data, buf, len, &e) < 0)
    {
      archive_set_error (a, EIO, "%s", e->msg);
      ib_error_release (&e);
      return -1;
    }
  return (la_ssize_t) len;
}

static int
fd_write (void *data, const void *buf, size_t len, ib_error_t *err)
{
  return ib_write_all (*(int *) data, buf, len, "archive", err);
}

static int
write_members (struct archive *a, struct ib_store *s, const struct ib_image *img, const char *name,
               size_t skip_layers, ib_error_t *err)
{
  /* The provenance records travel in the OCI half of the archive. */
  struct ib_descriptor *arts = NULL;
  size_t n_arts = 0;
  if (ib_store_find_referrers (s, &img->manifest.digest, &arts, &n_arts, err) < 0)
    return -1;
  cleanup_free char *manifest = docker_manifest_json (img, name);
  cleanup_free char *index = oci_index_json (s, img, name, arts, n_arts);
  int r = put_member (a, "blobs", AE_IFDIR, 0, err) < 0 || put_member (a, "blobs/sha256", AE_IFDIR, 0, err) < 0 ? -1 : 0;
  for (size_t k = 0; r == 0 && k < n_arts; k++)
    {
      struct ib_descriptor *prov = NULL;
      size_t n_prov = 0;
      r = ib_store_artifact_blobs (s, &arts[k], &prov, &n_prov, err);
      for (size_t i = 0; r == 0 && i < n_prov; i++)
        r = put_blob (a, s, &prov[i], err);
      ib_descriptors_free (prov, n_prov);
    }
  ib_descriptors_free (arts, n_arts);
  if (r < 0)
    return -1;
  if (put_blob (a, s, &img->config, err) < 0)
    return -1;
  for (size_t i = 0; i < img->n_layers; i++)
    {
      bool seen = false;
      for (size_t j = 0; j < i; j++)
        seen |= strcmp (img->layers[j].digest.s, img->layers[i].digest.s) == 0;
      /* A thin archive leaves out the layers the daemon has: docker load
       * finds them by chain ID. */
      if (!seen && i >= skip_layers && put_blob (a, s, &img->layers[i], err) < 0)
        return -1;
    }
  if (put_blob (a, s, &img->manifest, err) < 0 || put_text (a, "index.json", index, err) < 0
      || put_text (a, "manifest.json", manifest, err) < 0
      || put_text (a, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", err) < 0)
    return -1;
  return 0;
}

int
ib_docker_archive_stream (struct ib_store *s, const struct ib_image *img, const char *tag, size_t skip_layers,
                          ib_stream_write_fn write, void *data, ib_error_t *err)
{
  struct out o = { write, data };
  struct archive *a = archive_write_new ();
  archive_write_set_format_pax_restricted (a);
  int r = archive_write_open2 (a, &o, NULL, out_write_cb, NULL, NULL) == ARCHIVE_OK
              ? write_members (a, s, img, tag, skip_layers, err)
              : ib_error (err, IB_EENV, "archive: %s", archive_error_string (a));
  if (r == 0 && archive_write_close (a) != ARCHIVE_OK)
    r = ib_error (err, IB_EENV, "archive: %s", archive_error_string (a));
  archive_write_free (a);
  return r;
}

int
ib_docker_archive_write (struct ib_store *s, const struct ib_image *img, const char *file, const char *tag,
                         size_t skip_layers, ib_error_t *err)
{
  cleanup_free char *tmp = ib_xasprintf ("%s.tmp-XXXXXX", file);
  cleanup_close int fd = mkostemp (tmp, O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
  int r = ib_docker_archive_stream (s, img, tag, skip_layers, fd_write, &fd, err);
  if (r < 0)
    ib_error_wrap (err, "write `%s`", tmp);
  if (r == 0 && (fchmod (fd, 0644) < 0 || fsync (fd) < 0 || rename (tmp, file) < 0))
    r = ib_error_errno (err, errno, IB_EENV, "write `%s`", file);
  if (r < 0)
    unlink (tmp);
  return r;
}

static int
archive_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
              ib_error_t *err)
{
  return ib_docker_archive_write (s, img, ref->location, ref->name ? ref->name : name, 0, err);
}

const struct ib_transport ib_transport_docker_archive = { "docker-archive:", archive_pull, archive_push };
