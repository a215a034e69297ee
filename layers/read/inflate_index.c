#include "layers/read/inflate_index.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"

/* The file: a header (MAGIC, the snapshot key, the snapshot size and the
 * blob's size), the snapshots, the points, then the number of points and
 * the SHA-256 of everything before it.  Integers are the machine's own:
 * the file is as local as the snapshots' format. */
#define MAGIC "imgbuild-inflate-index 1"
#define KEY_LEN 32
#define HEADER (sizeof (MAGIC) + KEY_LEN + 16)
#define TRAILER (8 + 32)

struct ib_inflate_index_writer
{
  char *tmp, *path;
  int fd;
  EVP_MD_CTX *hash;
  struct ib_inflate_point *points;
  size_t n, cap;
  bool committed;
};

struct ib_inflate_index
{
  int fd;
  size_t snap_size, n;
  struct ib_inflate_point *points;
};

#define KIND "inflate-index"

/* Where BLOB's index is: created (for a writer) or not. */
static char *
index_path (struct ib_store *s, const ib_digest *blob, bool create, ib_error_t *err)
{
  return ib_store_cache_file (s, KIND, blob, create, err);
}

static void
header (unsigned char h[HEADER], uint64_t blob_size)
{
  memset (h, 0, HEADER);
  memcpy (h, MAGIC, sizeof (MAGIC));
  strncpy ((char *) h + sizeof (MAGIC), ib_gunzip_snapshot_key (), KEY_LEN - 1);
  uint64_t snap = ib_gunzip_snapshot_size ();
  memcpy (h + sizeof (MAGIC) + KEY_LEN, &snap, 8);
  memcpy (h + sizeof (MAGIC) + KEY_LEN + 8, &blob_size, 8);
}

static int
put (struct ib_inflate_index_writer *w, const void *buf, size_t len, ib_error_t *err)
{
  if (EVP_DigestUpdate (w->hash, buf, len) != 1)
    abort ();
  return ib_write_all (w->fd, buf, len, w->tmp, err);
}

int
ib_inflate_index_writer_new (struct ib_store *s, const ib_digest *blob, struct ib_inflate_index_writer **out,
                             ib_error_t *err)
{
  *out = NULL;
  if (ib_gunzip_snapshot_size () == 0)
    return 0;
  cleanup_free char *path = index_path (s, blob, true, err);
  if (path == NULL)
    return -1;
  struct ib_inflate_index_writer *w = ib_xcalloc (1, sizeof (*w));
  w->tmp = ib_xasprintf ("%s.tmp-XXXXXX", path);
  w->path = steal_pointer (&path);
  w->fd = mkostemp (w->tmp, O_CLOEXEC);
  w->hash = EVP_MD_CTX_new ();
  if (w->hash == NULL || EVP_DigestInit_ex (w->hash, EVP_sha256 (), NULL) != 1)
    abort ();
  /* The blob's size is not known yet: the header is written at commit,
   * hashed first. */
  unsigned char h[HEADER];
  header (h, 0);
  if (w->fd < 0 || ib_write_all (w->fd, h, HEADER, w->tmp, err) < 0)
    {
      if (w->fd < 0)
        ib_error_errno (err, errno, IB_EENV, "create `%s`", w->tmp);
      ib_inflate_index_writer_free (w);
      return -1;
    }
  *out = w;
  return 0;
}

bool
ib_inflate_index_writer_due (const struct ib_inflate_index_writer *w, uint64_t out)
{
  uint64_t last = w->n ? w->points[w->n - 1].out : 0;
  return out - last >= IB_INFLATE_INDEX_SPAN;
}

int
ib_inflate_index_writer_add (struct ib_inflate_index_writer *w, uint64_t in, uint64_t out, const void *snap,
                             ib_error_t *err)
{
  if (w->n == w->cap)
    {
      w->cap = w->cap ? 2 * w->cap : 64;
      w->points = ib_xrealloc (w->points, w->cap * sizeof (*w->points));
    }
  w->points[w->n++] = (struct ib_inflate_point) { in, out };
  /* Snapshots are hashed at commit, once the header is final. */
  return ib_write_all (w->fd, snap, ib_gunzip_snapshot_size (), w->tmp, err);
}

/* The header, then the snapshots as written, into the hash. */
static int
hash_body (struct ib_inflate_index_writer *w, uint64_t blob_size, ib_error_t *err)
{
  unsigned char h[HEADER];
  header (h, blob_size);
  if (pwrite (w->fd, h, HEADER, 0) != (ssize_t) HEADER)
    return ib_error_errno (err, errno, IB_EENV, "write `%s`", w->tmp);
  if (EVP_DigestUpdate (w->hash, h, HEADER) != 1)
    abort ();
  size_t snap = ib_gunzip_snapshot_size ();
  cleanup_free unsigned char *buf = ib_xmalloc (snap);
  for (size_t k = 0; k < w->n; k++)
    {
      if (pread (w->fd, buf, snap, (off_t) (HEADER + k * snap)) != (ssize_t) snap)
        return ib_error_errno (err, errno, IB_EENV, "read `%s`", w->tmp);
      if (EVP_DigestUpdate (w->hash, buf, snap) != 1)
        abort ();
    }
  return 0;
}

int
ib_inflate_index_writer_commit (struct ib_inflate_index_writer *w, uint64_t blob_size, ib_error_t *err)
{
  if (w->n == 0)
    return 0;
  uint64_t n = w->n;
  unsigned char md[32];
  unsigned int md_len = 0;
  if (hash_body (w, blob_size, err) < 0
      || lseek (w->fd, (off_t) (HEADER + w->n * ib_gunzip_snapshot_size ()), SEEK_SET) < 0
      || put (w, w->points, w->n * sizeof (*w->points), err) < 0 || put (w, &n, 8, err) < 0)
    return ib_error_wrap (err, "inflate index");
  if (EVP_DigestFinal_ex (w->hash, md, &md_len) != 1)
    abort ();
  if (ib_write_all (w->fd, md, 32, w->tmp, err) < 0 || fchmod (w->fd, 0644) < 0 || rename (w->tmp, w->path) < 0)
    {
      if (*err == NULL)
        ib_error_errno (err, errno, IB_EENV, "write `%s`", w->path);
      return -1;
    }
  w->committed = true;
  return 0;
}

void
ib_inflate_index_writer_free (struct ib_inflate_index_writer *w)
{
  if (w == NULL)
    return;
  if (w->fd >= 0)
    close (w->fd);
  if (!w->committed && w->fd >= 0)
    unlink (w->tmp);
  EVP_MD_CTX_free (w->hash);
  free (w->points);
  free (w->tmp);
  free (w->path);
  free (w);
}

/* The SHA-256 of the first LEN bytes of FD against MD. */
static bool
hash_matches (int fd, uint64_t len, const unsigned char md[32])
{
  EVP_MD_CTX *h = EVP_MD_CTX_new ();
  if (h == NULL || EVP_DigestInit_ex (h, EVP_sha256 (), NULL) != 1)
    abort ();
  enum { CHUNK = 1 << 20 };
  cleanup_free unsigned char *buf = ib_xmalloc (CHUNK);
  bool ok = true;
  for (uint64_t at = 0; ok && at < len;)
    {
      size_t want = len - at < CHUNK ? (size_t) (len - at) : CHUNK;
      ok = pread (fd, buf, want, (off_t) at) == (ssize_t) want && EVP_DigestUpdate (h, buf, want) == 1;
      at += want;
    }
  unsigned char got[32];
  unsigned int got_len = 0;
  ok = ok && EVP_DigestFinal_ex (h, got, &got_len) == 1 && memcmp (got, md, 32) == 0;
  EVP_MD_CTX_free (h);
  return ok;
}

/* Points strictly ascending, inside the blob, past its first bytes. */
static bool
points_valid (const struct ib_inflate_point *p, size_t n, uint64_t blob_size)
{
  for (size_t k = 0; k < n; k++)
    if (p[k].in == 0 || p[k].in >= blob_size || p[k].out == 0
        || (k > 0 && (p[k].in <= p[k - 1].in || p[k].out <= p[k - 1].out)))
      return false;
  return true;
}

/* FD's header, size and hash say it is BLOB_SIZE's index in this build's
 * format: its number of points in *N. */
static bool
file_valid (int fd, uint64_t blob_size, size_t *n)
{
  struct stat st;
  size_t snap = ib_gunzip_snapshot_size ();
  unsigned char h[HEADER], want[HEADER], trailer[TRAILER];
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || (uint64_t) st.st_size < HEADER + TRAILER
      || pread (fd, trailer, TRAILER, st.st_size - (off_t) TRAILER) != (ssize_t) TRAILER
      || pread (fd, h, HEADER, 0) != (ssize_t) HEADER)
    return false;
  uint64_t count;
  memcpy (&count, trailer, 8);
  header (want, blob_size);
  if (memcmp (h, want, HEADER) != 0 || count == 0 || count > ((uint64_t) st.st_size) / (snap + 16)
      || HEADER + count * (snap + 16) + TRAILER != (uint64_t) st.st_size)
    return false;
  *n = (size_t) count;
  return hash_matches (fd, (uint64_t) st.st_size - 32, trailer + 8);
}

int
ib_inflate_index_load (struct ib_store *s, const ib_digest *blob, uint64_t blob_size,
                       struct ib_inflate_index **out, ib_error_t *err)
{
  *out = NULL;
  if (ib_gunzip_snapshot_size () == 0)
    return 0;
  cleanup_free char *path = index_path (s, blob, false, err);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  size_t n = 0, snap = ib_gunzip_snapshot_size ();
  if (!file_valid (fd, blob_size, &n))
    return 0;
  struct ib_inflate_point *p = ib_xcalloc (n, sizeof (*p));
  if (pread (fd, p, n * sizeof (*p), (off_t) (HEADER + n * snap)) != (ssize_t) (n * sizeof (*p))
      || !points_valid (p, n, blob_size))
    {
      free (p);
      return 0;
    }
  struct ib_inflate_index *x = ib_xcalloc (1, sizeof (*x));
  x->fd = steal_fd (&fd);
  x->snap_size = snap;
  x->n = n;
  x->points = p;
  *out = x;
  return 0;
}

size_t
ib_inflate_index_count (const struct ib_inflate_index *x)
{
  return x->n;
}

struct ib_inflate_point
ib_inflate_index_point (const struct ib_inflate_index *x, size_t k)
{
  return x->points[k];
}

int
ib_inflate_index_snapshot (const struct ib_inflate_index *x, size_t k, void *snap, ib_error_t *err)
{
  if (pread (x->fd, snap, x->snap_size, (off_t) (HEADER + k * x->snap_size)) != (ssize_t) x->snap_size)
    return ib_error_errno (err, errno, IB_EENV, "read inflate index");
  return 0;
}

void
ib_inflate_index_free (struct ib_inflate_index *x)
{
  if (x == NULL)
    return;
  close (x->fd);
  free (x->points);
  free (x);
}

void
ib_inflate_index_drop (struct ib_store *s, const ib_digest *blob)
{
  cleanup_free char *path = index_path (s, blob, false, NULL);
  unlink (path);
}
