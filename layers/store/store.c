#include "layers/store/store.h"

#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/store/store_private.h"

#define MAX_INDEX_SIZE (64u << 20)

struct ib_blob_writer
{
  struct ib_store *store;
  char *tmp_path; /* NULL while the bytes are held (HELD_MAX) */
  int fd;         /* -1 likewise */
  ib_sha256 *hash; /* NULL: the caller knows the digest (ib_store_put_blob) */
  uint64_t size;
  uint64_t handed; /* bytes of the file given to writeback (writer_hand_on) */
  char *held;
  size_t n_held, held_cap;
};

char *
ib_store_default_path (const char *opt)
{
  if (opt && *opt)
    return ib_xstrdup (opt);
  const char *env = getenv ("IMGBUILD_STORE");
  if (env && *env)
    return ib_xstrdup (env);
  const char *xdg = getenv ("XDG_DATA_HOME");
  if (xdg && *xdg)
    return ib_path_join (xdg, "imgbuild/store");
  const char *home = getenv ("HOME");
  return ib_path_join (home && *home ? home : "/root", ".local/share/imgbuild/store");
}

/* A writer killed mid-blob (a pull of a 20 GB layer, say) leaves its
 * temporary file behind.  One untouched for an hour has no writer left: a
 * live one keeps writing, and a transfer that stalls gives up long before. */
static void
sweep_temporaries (const char *blobs)
{
  DIR *d = opendir (blobs);
  if (d == NULL)
    return;
  time_t now = time (NULL);
  struct dirent *de;
  while ((de = readdir (d)))
    {
      struct stat st;
      if (strncmp (de->d_name, ".tmp-", 5) == 0 && fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
          && S_ISREG (st.st_mode) && now - st.st_mtime > 3600)
        unlinkat (dirfd (d), de->d_name, 0);
    }
  closedir (d);
}

/* The users lock, shared: a garbage collection (store_gc.c) takes it
 * exclusively, so it never runs while a build has blobs that no tag names
 * yet. */
static int
lock_users (const char *root, ib_error_t *err)
{
  cleanup_free char *dir = ib_path_join (root, "imgbuild");
  if (ib_mkdir_p (dir, 0755, err) < 0)
    return -1;
  cleanup_free char *path = ib_path_join (dir, "users.lock");
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  while (flock (fd, LOCK_SH) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return ib_error_errno (err, errno, IB_EENV, "lock `%s`", path);
      }
  return fd;
}

uint64_t
ib_blob_loc_length (const struct ib_blob_loc *l, int fd)
{
  struct stat st;
  if (l->length != UINT64_MAX)
    return l->length;
  return fd >= 0 && fstat (fd, &st) == 0 && (uint64_t) st.st_size > l->offset ? (uint64_t) st.st_size - l->offset
                                                                                : 0;
}

int
ib_store_open (const char *root, struct ib_store **out, ib_error_t *err)
{
  cleanup_free char *blobs = ib_path_join (root, "blobs/sha256");
  if (ib_mkdir_p (blobs, 0755, err) < 0)
    return ib_error_wrap (err, "open store `%s`", root);
  cleanup_free char *layout = ib_path_join (root, "oci-layout");
  if (access (layout, F_OK) < 0)
    {
      static const char text[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
      if (ib_write_file_atomic (layout, text, sizeof (text) - 1, 0644, err) < 0)
        return ib_error_wrap (err, "open store `%s`", root);
    }
  cleanup_free char *index = ib_path_join (root, "index.json");
  if (access (index, F_OK) < 0)
    {
      static const char text[] = "{\"schemaVersion\":2,\"mediaType\":\"" IB_MT_OCI_INDEX "\",\"manifests\":[]}";
      if (ib_write_file_atomic (index, text, sizeof (text) - 1, 0644, err) < 0)
        return ib_error_wrap (err, "open store `%s`", root);
    }
  sweep_temporaries (blobs);
  int users = lock_users (root, err);
  if (users < 0)
    return ib_error_wrap (err, "open store `%s`", root);
  struct ib_store *s = ib_xcalloc (1, sizeof (*s));
  s->users_fd = users;
  s->root = ib_xstrdup (root);
  s->blobs = steal_pointer (&blobs);
  *out = s;
  return 0;
}

int
ib_store_open_existing (const char *root, struct ib_store **out, ib_error_t *err)
{
  cleanup_free char *layout = ib_path_join (root, "oci-layout");
  cleanup_free char *index = ib_path_join (root, "index.json");
  if (access (layout, F_OK) < 0 || access (index, F_OK) < 0)
    return ib_error (err, IB_ENOTFOUND, "`%s` is not an OCI image layout (no oci-layout or index.json)", root);
  return ib_store_open (root, out, err);
}

void
ib_store_free (struct ib_store *s)
{
  if (s == NULL)
    return;
  ib_view_free (s->view);
  if (s->users_fd >= 0)
    close (s->users_fd);
  free (s->root);
  free (s->blobs);
  free (s);
}

const char *
ib_store_root (const struct ib_store *s)
{
  return s->root;
}

char *
ib_store_blob_path (const struct ib_store *s, const ib_digest *d)
{
  return ib_path_join (s->blobs, ib_digest_hex (d->s));
}

bool
ib_store_has_blob (const struct ib_store *s, const ib_digest *d)
{
  if (s->view && ib_view_find (s->view, d))
    return true;
  if (s->view && s->view->layout_blobs == NULL)
    return false;
  struct ib_blob_loc l;
  if (ib_store_locate_blob (s, d, &l, NULL) < 0)
    return false;
  bool there = access (l.path, F_OK) == 0;
  ib_blob_loc_clear (&l);
  return there;
}

int
ib_store_locate_blob (const struct ib_store *s, const ib_digest *d, struct ib_blob_loc *out, ib_error_t *err)
{
  if (s->view)
    return ib_view_locate (s->view, d, out, err);
  out->path = ib_store_blob_path (s, d);
  out->offset = 0;
  out->length = UINT64_MAX;
  return 0;
}

void
ib_blob_loc_clear (struct ib_blob_loc *l)
{
  free (l->path);
  l->path = NULL;
}

int
ib_blob_loc_open (const struct ib_blob_loc *l, const ib_digest *d, ib_error_t *err)
{
  int fd = open (l->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, errno == ENOENT ? IB_EINTEGRITY : IB_EENV, "blob %s: open `%s`", d->s,
                           l->path);
  if (l->offset && lseek (fd, (off_t) l->offset, SEEK_SET) < 0)
    {
      ib_error_errno (err, errno, IB_EENV, "blob %s: seek `%s`", d->s, l->path);
      close (fd);
      return -1;
    }
  return fd;
}

int
ib_store_cache_dir (const struct ib_store *s, const char *kind, char **out, ib_error_t *err)
{
  cleanup_free char *base = ib_path_join (s->root, "imgbuild");
  cleanup_free char *dir = ib_path_join (base, kind);
  if (ib_mkdir_p (dir, 0755, err) < 0)
    return -1;
  *out = steal_pointer (&dir);
  return 0;
}

char *
ib_store_cache_file (const struct ib_store *s, const char *kind, const ib_digest *d, bool create, ib_error_t *err)
{
  cleanup_free char *base = ib_path_join (s->root, "imgbuild");
  cleanup_free char *dir = ib_path_join (base, kind);
  if (create && ib_mkdir_p (dir, 0755, err) < 0)
    return NULL;
  return ib_path_join (dir, ib_digest_hex (d->s));
}

/* The bytes of a blob go to its temporary file only once they pass this:
 * below it they wait in memory for the digest, and a blob the store
 * already holds (a layer built again, an unchanged config) then costs no
 * file, no fsync and no rename. */
#define HELD_MAX (1u << 20)

static int
writer_open (struct ib_store *s, bool hashed, struct ib_blob_writer **out, ib_error_t *err)
{
  if (s->view)
    return ib_error (err, IB_EENV, "`%s` is read in place: nothing is written to it", s->view->source);
  struct ib_blob_writer *w = ib_xcalloc (1, sizeof (*w));
  w->store = s;
  w->fd = -1;
  w->hash = hashed ? ib_sha256_new () : NULL;
  *out = w;
  return 0;
}

int
ib_blob_writer_new (struct ib_store *s, struct ib_blob_writer **out, ib_error_t *err)
{
  return writer_open (s, true, out, err);
}

/* The temporary file, with what was held so far. */
static int
writer_spill (struct ib_blob_writer *w, ib_error_t *err)
{
  /* It sits in blobs/sha256 so that rename() is atomic; a name starting
   * with '.' is never a digest, so readers ignore it. */
  char *tmp = ib_path_join (w->store->blobs, ".tmp-XXXXXX");
  int fd = mkostemp (tmp, O_CLOEXEC);
  if (fd < 0)
    {
      free (tmp);
      return ib_error_errno (err, errno, IB_EENV, "create blob in `%s`", w->store->blobs);
    }
  w->tmp_path = tmp;
  w->fd = fd;
  int r = ib_write_all (fd, w->held, w->n_held, tmp, err);
  free (w->held);
  w->held = NULL;
  w->n_held = w->held_cap = 0;
  return r;
}

/* A blob's bytes go to the disk as they come, a window behind the writer,
 * not all at its fsync.  A layer's copy of 1 GB otherwise left its writer
 * waiting most of a second at publish (writeback that could have run
 * beside the read: the last layer's wait is the build's), and its dirty
 * pages stalled the build's other writers meanwhile (ext4's fsync commits
 * the journal).  Only a head start: the fsync at publish still decides,
 * so a failure here changes nothing. */
#define WRITEBACK_WINDOW (16u << 20)

static void
writer_hand_on (struct ib_blob_writer *w)
{
#ifdef SYNC_FILE_RANGE_WRITE
  if (w->size - w->handed < WRITEBACK_WINDOW)
    return;
  (void) sync_file_range (w->fd, (off_t) w->handed, (off_t) (w->size - w->handed), SYNC_FILE_RANGE_WRITE);
  w->handed = w->size;
#else
  (void) w;
#endif
}

int
ib_blob_writer_write (struct ib_blob_writer *w, const void *buf, size_t len, ib_error_t *err)
{
  if (w->hash)
    ib_sha256_update (w->hash, buf, len);
  w->size += len;
  if (w->fd < 0 && w->size <= HELD_MAX)
    {
      if (w->n_held + len > w->held_cap)
        {
          w->held_cap = w->held_cap ? w->held_cap : 64u << 10;
          while (w->held_cap < w->n_held + len)
            w->held_cap *= 2;
          w->held = ib_xrealloc (w->held, w->held_cap);
        }
      memcpy (w->held + w->n_held, buf, len);
      w->n_held += len;
      return 0;
    }
  if (w->fd < 0 && writer_spill (w, err) < 0)
    return -1;
  if (ib_write_all (w->fd, buf, len, w->tmp_path, err) < 0)
    return -1;
  writer_hand_on (w);
  return 0;
}

void
ib_blob_writer_abort (struct ib_blob_writer *w)
{
  if (w == NULL)
    return;
  if (w->fd >= 0)
    close (w->fd);
  if (w->tmp_path)
    unlink (w->tmp_path);
  free (w->tmp_path);
  free (w->held);
  ib_sha256_free (w->hash);
  free (w);
}

/* Name the writer's bytes D (checked by the caller) and free the writer.
 * A blob is visible under its digest only once it is whole and synced
 * (rename after fsync), so a file already there of the same size is that
 * blob: the new bytes are dropped, and nothing is written or synced.  The
 * folder is not synced here: ib_store_tag syncs it once for all the blobs
 * the tag may name (a crash before loses names no tag holds yet). */
static int
writer_publish (struct ib_blob_writer *w, const ib_digest *d, ib_error_t *err)
{
  cleanup_free char *final = ib_store_blob_path (w->store, d);
  struct stat st;
  if (stat (final, &st) == 0 && S_ISREG (st.st_mode) && (uint64_t) st.st_size == w->size)
    {
      ib_blob_writer_abort (w);
      return 0;
    }
  if (w->fd < 0 && writer_spill (w, err) < 0)
    {
      ib_blob_writer_abort (w);
      return -1;
    }
  if (fchmod (w->fd, 0644) < 0 || fsync (w->fd) < 0)
    {
      ib_error_errno (err, errno, IB_EENV, "sync `%s`", w->tmp_path);
      ib_blob_writer_abort (w);
      return -1;
    }
  if (rename (w->tmp_path, final) < 0)
    {
      ib_error_errno (err, errno, IB_EENV, "rename blob to `%s`", final);
      ib_blob_writer_abort (w);
      return -1;
    }
  free (w->tmp_path);
  w->tmp_path = NULL; /* renamed: nothing left to remove */
  ib_blob_writer_abort (w);
  return 0;
}

int
ib_blob_writer_new_unhashed (struct ib_store *s, struct ib_blob_writer **out, ib_error_t *err)
{
  return writer_open (s, false, out, err);
}

int
ib_blob_writer_commit_hashed (struct ib_blob_writer *w, const ib_digest *d, uint64_t size, ib_error_t *err)
{
  if (w->hash || w->size != size)
    {
      ib_error (err, IB_EINTEGRITY, "blob %s: %s", d->s,
                w->hash ? "its writer hashes, and was not committed by its digest" : "not every byte was copied");
      ib_blob_writer_abort (w);
      return -1;
    }
  return writer_publish (w, d, err);
}

int
ib_blob_writer_commit (struct ib_blob_writer *w, const ib_digest *expected, uint64_t expected_size, ib_digest *out,
                       uint64_t *size, ib_error_t *err)
{
  if (w->hash == NULL)
    {
      ib_error (err, IB_EINTEGRITY, "a writer of bytes hashed by its caller is committed by their digest");
      ib_blob_writer_abort (w);
      return -1;
    }
  ib_digest got;
  ib_sha256_final (w->hash, &got);
  if (expected && strcmp (expected->s, got.s) != 0)
    {
      ib_error (err, IB_EINTEGRITY, "blob %s: content has digest %s", expected->s, got.s);
      ib_blob_writer_abort (w);
      return -1;
    }
  if (expected && expected_size != UINT64_MAX && expected_size != w->size)
    {
      ib_error (err, IB_EINTEGRITY, "blob %s: size is %llu, descriptor says %llu", expected->s,
                (unsigned long long) w->size, (unsigned long long) expected_size);
      ib_blob_writer_abort (w);
      return -1;
    }
  if (out)
    *out = got;
  if (size)
    *size = w->size;
  return writer_publish (w, &got, err);
}

int
ib_store_put_blob (struct ib_store *s, const void *buf, size_t len, ib_digest *out, ib_error_t *err)
{
  ib_digest d;
  ib_sha256_buf (buf, len, &d);
  if (out)
    *out = d;
  if (ib_store_has_blob (s, &d))
    return 0;
  if (s->view)
    {
      /* A made-up blob of a view (a classic archive's manifest). */
      pthread_mutex_lock (&s->view->lock);
      struct ib_store_view *v = s->view;
      v->blobs = ib_xrealloc (v->blobs, (v->n_blobs + 1) * sizeof (*v->blobs));
      struct ib_view_blob *b = &v->blobs[v->n_blobs++];
      memset (b, 0, sizeof (*b));
      b->digest = d;
      b->length = len;
      b->bytes = ib_xmalloc (len ? len : 1);
      memcpy (b->bytes, buf, len);
      pthread_mutex_unlock (&s->view->lock);
      return 0;
    }
  /* The digest is known: the bytes go to the file unhashed, and unheld. */
  struct ib_blob_writer *w;
  if (writer_open (s, false, &w, err) < 0)
    return -1;
  w->size = len;
  if (writer_spill (w, err) < 0 || ib_write_all (w->fd, buf, len, w->tmp_path, err) < 0)
    {
      ib_blob_writer_abort (w);
      return -1;
    }
  return writer_publish (w, &d, err);
}

/* Copy at most LIMIT bytes of FD into a new blob checked against D. */
static int
import_limited (struct ib_store *s, int fd, uint64_t limit, const struct ib_descriptor *d, ib_error_t *err)
{
  if (ib_store_has_blob (s, &d->digest))
    return 0;
  struct ib_blob_writer *w = NULL; /* aarch64 gcc 12 cannot see that a 0 from ib_blob_writer_new set it */
  if (ib_blob_writer_new (s, &w, err) < 0)
    return -1;
  static const size_t bufsz = 1 << 20;
  cleanup_free char *buf = ib_xmalloc (bufsz);
  for (uint64_t left = limit;;)
    {
      ssize_t n = left == 0 ? 0 : read (fd, buf, left < bufsz ? (size_t) left : bufsz);
      if (n > 0)
        left -= (uint64_t) n;
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          ib_blob_writer_abort (w);
          return ib_error_errno (err, errno, IB_EENV, "read blob %s", d->digest.s);
        }
      if (n == 0)
        break;
      if (ib_blob_writer_write (w, buf, (size_t) n, err) < 0)
        {
          ib_blob_writer_abort (w);
          return -1;
        }
    }
  return ib_blob_writer_commit (w, &d->digest, d->size, NULL, NULL, err);
}

int
ib_store_import_fd (struct ib_store *s, int fd, const struct ib_descriptor *d, ib_error_t *err)
{
  return import_limited (s, fd, UINT64_MAX, d, err);
}

/* A blob that DST holds already is not copied, but D's size is what a copy
 * would have checked: a manifest that lies about a layer's size names
 * bytes it does not describe, whoever wrote them first. */
static int
held_blob_fits (const struct ib_store *dst, const struct ib_descriptor *d, ib_error_t *err)
{
  if (d->size == UINT64_MAX)
    return 0;
  struct ib_blob_loc l;
  if (ib_store_locate_blob (dst, &d->digest, &l, err) < 0)
    return -1;
  cleanup_close int fd = ib_blob_loc_open (&l, &d->digest, err);
  uint64_t length = fd < 0 ? 0 : ib_blob_loc_length (&l, fd);
  ib_blob_loc_clear (&l);
  if (fd < 0)
    return -1;
  if (length != d->size)
    return ib_error (err, IB_EINTEGRITY, "blob %s: size is %llu, descriptor says %llu", d->digest.s,
                     (unsigned long long) length, (unsigned long long) d->size);
  return 0;
}

int
ib_store_copy_blob (const struct ib_store *src, struct ib_store *dst, const struct ib_descriptor *d,
                    ib_error_t *err)
{
  if (ib_store_has_blob (dst, &d->digest))
    return held_blob_fits (dst, d, err) < 0 ? ib_error_wrap (err, "copy from `%s`", ib_store_source (src)) : 0;
  struct ib_blob_loc l;
  if (ib_store_locate_blob (src, &d->digest, &l, err) < 0)
    return -1;
  cleanup_close int fd = ib_blob_loc_open (&l, &d->digest, err);
  uint64_t length = l.length;
  ib_blob_loc_clear (&l);
  if (fd < 0 || import_limited (dst, fd, length, d, err) < 0)
    return ib_error_wrap (err, "copy from `%s`", ib_store_source (src));
  return 0;
}

int
ib_store_hash_blob (const struct ib_store *s, const ib_digest *d, ib_digest *out, uint64_t *size,
                    void (*progress) (void *, unsigned long long), void *data, ib_error_t *err)
{
  struct ib_blob_loc l;
  if (ib_store_locate_blob (s, d, &l, err) < 0)
    return -1;
  cleanup_close int fd = ib_blob_loc_open (&l, d, err);
  int r = fd < 0 ? -1 : ib_sha256_fd (fd, l.length, l.path, out, size, progress, data, err);
  ib_blob_loc_clear (&l);
  return r;
}

/* The bytes of D, unchecked: from memory, a range of a file, or a file. */
static int
read_blob_bytes (const struct ib_store *s, const ib_digest *d, size_t max, char **out, size_t *len, ib_error_t *err)
{
  const struct ib_view_blob *b = s->view ? ib_view_find (s->view, d) : NULL;
  if (b && b->bytes)
    {
      if (b->length > max)
        return ib_error (err, IB_EINTEGRITY, "blob %s is larger than %zu bytes", d->s, max);
      *out = ib_xmalloc (b->length + 1);
      memcpy (*out, b->bytes, b->length);
      (*out)[b->length] = '\0';
      *len = b->length;
      return 0;
    }
  struct ib_blob_loc l;
  if (ib_store_locate_blob (s, d, &l, err) < 0)
    return -1;
  if (l.offset == 0 && l.length == UINT64_MAX)
    {
      int r = ib_read_file (l.path, max, out, len, err);
      ib_blob_loc_clear (&l);
      return r;
    }
  cleanup_close int fd = ib_blob_loc_open (&l, d, err);
  ib_blob_loc_clear (&l);
  if (fd < 0)
    return -1;
  if (l.length > max)
    return ib_error (err, IB_EINTEGRITY, "blob %s is larger than %zu bytes", d->s, max);
  char *buf = ib_xmalloc (l.length + 1);
  ssize_t got = ib_read_full (fd, buf, l.length);
  if (got != (ssize_t) l.length)
    {
      free (buf);
      return ib_error (err, IB_EINTEGRITY, "blob %s is truncated", d->s);
    }
  buf[got] = '\0';
  *out = buf;
  *len = (size_t) got;
  return 0;
}

int
ib_store_read_blob (const struct ib_store *s, const ib_digest *d, size_t max, char **out, size_t *len,
                    ib_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t n;
  if (read_blob_bytes (s, d, max, &buf, &n, err) < 0)
    return ib_error_wrap (err, "read blob %s", d->s);
  ib_digest got;
  ib_sha256_buf (buf, n, &got);
  if (strcmp (got.s, d->s) != 0)
    return ib_error (err, IB_EINTEGRITY, "blob %s in `%s` has digest %s", d->s, ib_store_source (s), got.s);
  *out = steal_pointer (&buf);
  if (len)
    *len = n;
  return 0;
}

static int
load_index (const struct ib_store *s, cJSON **out, ib_error_t *err)
{
  if (s->view)
    {
      pthread_mutex_lock (&s->view->lock);
      *out = cJSON_Duplicate (s->view->index, true);
      pthread_mutex_unlock (&s->view->lock);
      return 0;
    }
  cleanup_free char *path = ib_path_join (s->root, "index.json");
  cleanup_free char *text = NULL;
  if (ib_read_file (path, MAX_INDEX_SIZE, &text, NULL, err) < 0)
    return -1;
  cJSON *j = cJSON_Parse (text);
  if (j == NULL || !cJSON_IsArray (cJSON_GetObjectItemCaseSensitive (j, "manifests")))
    {
      cJSON_Delete (j);
      return ib_error (err, IB_EINTEGRITY, "`%s` is not an OCI image index", path);
    }
  *out = j;
  return 0;
}

static const char *
annotation (const cJSON *entry, const char *key)
{
  const cJSON *ann = cJSON_GetObjectItemCaseSensitive (entry, "annotations");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (ann, key);
  return cJSON_IsString (v) ? v->valuestring : NULL;
}

/* The index entry whose annotation KEY is VALUE: 0 and *OUT, else the
 * IB_ENOTFOUND error WHAT. */
static int
find_by_annotation (struct ib_store *s, const char *key, const char *value, struct ib_descriptor *out,
                    const char *what, ib_error_t *err)
{
  cJSON *index;
  if (load_index (s, &index, err) < 0)
    return -1;
  const cJSON *m;
  int ret = ib_error (err, IB_ENOTFOUND, "%s in store `%s`", what, s->root);
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    const char *v = annotation (m, key);
    if (v && strcmp (v, value) == 0)
      {
        ib_error_release (err);
        ret = ib_descriptor_from_json (m, out, err);
        break;
      }
  }
  cJSON_Delete (index);
  return ret;
}

int
ib_store_resolve (struct ib_store *s, const char *name, struct ib_descriptor *out, ib_error_t *err)
{
  cleanup_free char *what = ib_xasprintf ("`%s` is not tagged", name);
  return find_by_annotation (s, IB_ANNOTATION_REF_NAME, name, out, what, err);
}

int
ib_store_only_image (struct ib_store *s, struct ib_descriptor *out, ib_error_t *err)
{
  cJSON *index;
  if (load_index (s, &index, err) < 0)
    return -1;
  const cJSON *m, *only = NULL;
  int n = 0;
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    if (annotation (m, IB_ANNOTATION_SUBJECT))
      continue; /* provenance about an image, not an image */
    only = m;
    n++;
  }
  int ret = n == 1 ? ib_descriptor_from_json (only, out, err)
                   : ib_error (err, IB_ENOTFOUND, "`%s` holds %d images; name one as oci:DIR:TAG", s->root, n);
  cJSON_Delete (index);
  return ret;
}

static int
lock_store (const struct ib_store *s, ib_error_t *err)
{
  cleanup_free char *dir = ib_path_join (s->root, "imgbuild");
  if (ib_mkdir_p (dir, 0755, err) < 0)
    return -1;
  cleanup_free char *path = ib_path_join (dir, "lock");
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return ib_error_errno (err, errno, IB_EENV, "lock `%s`", path);
      }
  return fd;
}


static void
push_referrer (struct ib_descriptor **out, size_t *n, const cJSON *entry, int *r, ib_error_t *err)
{
  const cJSON *dg = cJSON_GetObjectItemCaseSensitive (entry, "digest");
  for (size_t i = 0; cJSON_IsString (dg) && i < *n; i++)
    if (strcmp ((*out)[i].digest.s, dg->valuestring) == 0)
      return; /* listed both ways */
  *out = ib_xrealloc (*out, (*n + 1) * sizeof (**out));
  if ((*r = ib_descriptor_from_json (entry, &(*out)[*n], err)) == 0)
    (*n)++;
}

/* The artifacts of the referrers tag `sha256-HEX` of SUBJECT, as a copy by
 * tag (skopeo copy --all ...:sha256-HEX oci:DIR:sha256-HEX) puts it in a
 * layout: an index whose manifests are the artifacts. */
static int
tagged_referrers (struct ib_store *s, const cJSON *index, const ib_digest *subject, struct ib_descriptor **out,
                  size_t *n, ib_error_t *err)
{
  cleanup_free char *tag = ib_xasprintf ("sha256-%s", ib_digest_hex (subject->s));
  const cJSON *m;
  int r = 0;
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    const char *name = annotation (m, IB_ANNOTATION_REF_NAME);
    struct ib_descriptor d = { 0 };
    if (r < 0 || name == NULL || strcmp (name, tag) != 0 || ib_descriptor_from_json (m, &d, NULL) < 0)
      continue;
    cleanup_free char *text = NULL;
    size_t len;
    r = ib_store_read_blob (s, &d.digest, MAX_INDEX_SIZE, &text, &len, err);
    ib_descriptor_clear (&d);
    cJSON *list = r == 0 ? cJSON_ParseWithLength (text, len) : NULL;
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive (list, "manifests"))
    if (r == 0)
      push_referrer (out, n, e, &r, err);
    cJSON_Delete (list);
  }
  return r < 0 ? ib_error_wrap (err, "the referrers tag %s", tag) : 0;
}

int
ib_store_find_referrers (struct ib_store *s, const ib_digest *subject, struct ib_descriptor **out, size_t *n,
                         ib_error_t *err)
{
  *out = NULL;
  *n = 0;
  cJSON *index;
  if (load_index (s, &index, err) < 0)
    return -1;
  const cJSON *m;
  int r = 0;
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    const char *v = annotation (m, IB_ANNOTATION_SUBJECT);
    if (r == 0 && v && strcmp (v, subject->s) == 0)
      push_referrer (out, n, m, &r, err);
  }
  if (r == 0)
    r = tagged_referrers (s, index, subject, out, n, err);
  cJSON_Delete (index);
  if (r < 0)
    {
      ib_descriptors_free (*out, *n);
      *out = NULL;
      *n = 0;
    }
  return r;
}

void
ib_descriptors_free (struct ib_descriptor *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    ib_descriptor_clear (&list[i]);
  free (list);
}

static cJSON *
artifact_manifest (const struct ib_store *s, const ib_digest *art)
{
  cleanup_free char *text = NULL;
  size_t len;
  if (!ib_store_has_blob (s, art) || ib_store_read_blob (s, art, 1 << 20, &text, &len, NULL) < 0)
    return NULL;
  return cJSON_ParseWithLength (text, len);
}

char *
ib_store_artifact_definition (const struct ib_store *s, const ib_digest *art)
{
  cJSON *m = artifact_manifest (s, art);
  const char *v = annotation (m, IB_ANNOTATION_DEFINITION);
  char *out = v ? ib_xstrdup (v) : NULL;
  cJSON_Delete (m);
  return out;
}

char *
ib_store_artifact_type (const struct ib_store *s, const ib_digest *art)
{
  cJSON *m = artifact_manifest (s, art);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive (m, "artifactType");
  char *out = ib_xstrdup (cJSON_IsString (t) ? t->valuestring : IB_MT_PROVENANCE);
  cJSON_Delete (m);
  return out;
}

static bool
same (const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp (a, b) == 0);
}

/* List REFERRER about MANIFEST in LIST, replacing those from the same
 * definition that it supersedes (ib_referrer_replaces; and any listing of
 * the very same artifact). */
static void
list_referrer (struct ib_store *s, cJSON *list, const struct ib_descriptor *manifest,
               const struct ib_descriptor *referrer)
{
  cleanup_free char *def = ib_store_artifact_definition (s, &referrer->digest);
  cleanup_free char *type = ib_store_artifact_type (s, &referrer->digest);
  for (int i = cJSON_GetArraySize (list) - 1; i >= 0; i--)
    {
      const cJSON *e = cJSON_GetArrayItem (list, i);
      const char *sub = annotation (e, IB_ANNOTATION_SUBJECT);
      const cJSON *dg = cJSON_GetObjectItemCaseSensitive (e, "digest");
      const cJSON *at = cJSON_GetObjectItemCaseSensitive (e, "artifactType");
      const char *old_type = cJSON_IsString (at) ? at->valuestring : IB_MT_PROVENANCE;
      if (sub && strcmp (sub, manifest->digest.s) == 0
          && ((same (annotation (e, IB_ANNOTATION_DEFINITION), def) && ib_referrer_replaces (type, old_type))
              || (cJSON_IsString (dg) && strcmp (dg->valuestring, referrer->digest.s) == 0)))
        cJSON_DeleteItemFromArray (list, i);
    }
  cJSON *r = ib_descriptor_to_json (referrer);
  cJSON_AddStringToObject (r, "artifactType", type);
  cJSON *ra = cJSON_AddObjectToObject (r, "annotations");
  cJSON_AddStringToObject (ra, IB_ANNOTATION_SUBJECT, manifest->digest.s);
  if (def)
    cJSON_AddStringToObject (ra, IB_ANNOTATION_DEFINITION, def);
  cJSON_AddItemToArray (list, r);
}

/* INDEX with NAME pointing at MANIFEST and REFERRER listed about it. */
static void
index_tag (struct ib_store *s, cJSON *index, const char *name, const struct ib_descriptor *manifest,
           const struct ib_descriptor *referrer)
{
  cJSON *list = cJSON_GetObjectItemCaseSensitive (index, "manifests");
  for (int i = cJSON_GetArraySize (list) - 1; name && i >= 0; i--)
    {
      const char *ref = annotation (cJSON_GetArrayItem (list, i), IB_ANNOTATION_REF_NAME);
      if (ref && strcmp (ref, name) == 0)
        cJSON_DeleteItemFromArray (list, i);
    }
  if (name)
    {
      cJSON *entry = ib_descriptor_to_json (manifest);
      cJSON *ann = cJSON_AddObjectToObject (entry, "annotations");
      cJSON_AddStringToObject (ann, IB_ANNOTATION_REF_NAME, name);
      cJSON_AddItemToArray (list, entry);
    }
  if (referrer)
    list_referrer (s, list, manifest, referrer);
}

int
ib_store_tag (struct ib_store *s, const char *name, const struct ib_descriptor *manifest,
              const struct ib_descriptor *referrer, ib_error_t *err)
{
  if (!ib_store_has_blob (s, &manifest->digest))
    return ib_error (err, IB_EINTEGRITY, "tag `%s`: manifest %s is not in the store", name ? name : "-",
                     manifest->digest.s);
  if (s->view)
    {
      /* A view's index is in memory: the artifact is never written. */
      pthread_mutex_lock (&s->view->lock);
      index_tag (s, s->view->index, name, manifest, referrer);
      pthread_mutex_unlock (&s->view->lock);
      return 0;
    }
  cleanup_close int lock = lock_store (s, err);
  if (lock < 0)
    return -1;
  cJSON *index;
  if (load_index (s, &index, err) < 0)
    return -1;
  index_tag (s, index, name, manifest, referrer);
  char *text = cJSON_PrintUnformatted (index);
  cJSON_Delete (index);
  cleanup_free char *path = ib_path_join (s->root, "index.json");
  /* Every blob the tag names is synced, and so is its name, before the tag
   * is: one sync of the folder for all the blobs written since the last
   * (by this run or another: a blob found there is used as it is). */
  int ret = ib_fsync_dir (s->blobs, err);
  if (ret == 0)
    ret = ib_write_file_atomic (path, text, strlen (text), 0644, err);
  free (text);
  return ret < 0 ? ib_error_wrap (err, "tag `%s`", name ? name : manifest->digest.s) : 0;
}

int
ib_store_artifact_blobs (struct ib_store *s, const struct ib_descriptor *art, struct ib_descriptor **out, size_t *n,
                         ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;
  *out = NULL;
  *n = 0;
  int r = ib_store_read_blob (s, &art->digest, 1 << 20, &text, &len, err);
  cJSON *m = r == 0 ? cJSON_ParseWithLength (text, len) : NULL;
  if (r == 0 && m == NULL)
    r = ib_error (err, IB_EINTEGRITY, "provenance %s is not JSON", art->digest.s);
  struct ib_descriptor *list = ib_xcalloc (2 + (size_t) cJSON_GetArraySize (cJSON_GetObjectItemCaseSensitive (m, "layers")),
                                           sizeof (*list));
  size_t k = 0;
  ib_descriptor_copy (&list[k++], art);
  /* An artifact may have no config. */
  const cJSON *config = cJSON_GetObjectItemCaseSensitive (m, "config");
  if (r == 0 && config && ib_descriptor_from_json (config, &list[k], NULL) == 0)
    k++;
  const cJSON *l;
  cJSON_ArrayForEach (l, cJSON_GetObjectItemCaseSensitive (m, "layers"))
  {
    if (r == 0 && (r = ib_descriptor_from_json (l, &list[k], err)) == 0)
      k++;
  }
  cJSON_Delete (m);
  *out = list;
  *n = k;
  return r;
}

int
ib_store_copy_referrer (struct ib_store *src, struct ib_store *dst, const struct ib_descriptor *subject,
                        ib_error_t *err)
{
  struct ib_descriptor *arts;
  size_t n_arts;
  int r = ib_store_find_referrers (src, &subject->digest, &arts, &n_arts, err);
  for (size_t a = 0; r == 0 && a < n_arts; a++)
    {
      struct ib_descriptor *blobs;
      size_t n;
      r = ib_store_artifact_blobs (src, &arts[a], &blobs, &n, err);
      /* The artifact's manifest last: it names the others. */
      for (size_t i = n; r == 0 && i-- > 1;)
        r = ib_store_copy_blob (src, dst, &blobs[i], err);
      if (r == 0)
        r = ib_store_copy_blob (src, dst, &blobs[0], err);
      if (r == 0)
        r = ib_store_tag (dst, NULL, subject, &blobs[0], err);
      ib_descriptors_free (blobs, n);
    }
  ib_descriptors_free (arts, n_arts);
  return r < 0 ? ib_error_wrap (err, "provenance of %s", subject->digest.s) : 0;
}
