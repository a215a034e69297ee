#include "layers/view/extract.h"

#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/read/inflate_index.h"
#include "layers/read/inflate_index.h"
#include "layers/read/layer_seek.h"
#include "layers/tar/tarpath.h"

static int
cmp_entry_path (const void *a, const void *b)
{
  return strcmp ((*(const struct ib_fs_entry *const *) a)->path, (*(const struct ib_fs_entry *const *) b)->path);
}

/* WANTED is sorted by path; a view has one entry per path. */
static const struct ib_fs_entry *
find_wanted (const struct ib_fs_entry *const *wanted, size_t n, int layer, const char *path)
{
  struct ib_fs_entry key = { .path = (char *) path };
  const struct ib_fs_entry *kp = &key;
  const struct ib_fs_entry *const *hit = ib_bsearch (&kp, wanted, n, sizeof (*wanted), cmp_entry_path);
  return hit && (*hit)->layer == layer ? *hit : NULL;
}

static int
extract_layer (struct ib_store *s, const struct ib_image *img, int layer, const struct ib_fs_entry *const *wanted,
               size_t n, ib_extract_fn fn, void *data, ib_error_t *err)
{
  struct ib_layer_reader *r;
  if (ib_layer_reader_open (s, &img->layers[layer], &img->diff_ids[layer], &r, err) < 0)
    return -1;
  struct archive_entry *ae;
  int x;
  while ((x = ib_layer_reader_next (r, &ae, err)) == 1)
    {
      cleanup_free char *p = ib_clean_tar_path (archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "");
      const struct ib_fs_entry *e = p ? find_wanted (wanted, n, layer, p) : NULL;
      if (e && fn (data, e, r, err) < 0)
        {
          ib_layer_reader_free (r);
          return -1;
        }
    }
  /* The layer's digests are checked even though only part of it was used. */
  if (x == 0)
    x = ib_layer_reader_end (r, NULL, err);
  ib_layer_reader_free (r);
  return x;
}

/* ---- by range ------------------------------------------------------------- */

static int
cmp_entry_at (const void *a, const void *b)
{
  uint64_t x = (*(const struct ib_fs_entry *const *) a)->at, y = (*(const struct ib_fs_entry *const *) b)->at;
  return x < y ? -1 : x > y;
}

/* Whether LAYER's wanted files can be read by range: its blob trusted (its
 * lists' offsets and digests are of these bytes), each a regular file
 * whose data's offset and digest the list knows. */
static bool
seekable (struct ib_store *s, const struct ib_image *img, int layer, const struct ib_fs_entry *const *wanted,
          size_t n)
{
  if (!ib_store_blob_trusted (s, &img->layers[layer].digest))
    return false;
  for (size_t i = 0; i < n; i++)
    if (wanted[i]->layer == layer
        && (wanted[i]->type != IB_FS_FILE || wanted[i]->at == 0 || wanted[i]->digest == NULL
            || strlen (wanted[i]->digest) != 64))
      return false;
  return true;
}

struct spooling
{
  int fd;
  ib_sha256 *h;
  const char *what;
};

static int
spool_piece (void *data, const void *buf, size_t n, ib_error_t *err)
{
  struct spooling *sp = data;
  ib_sha256_update (sp->h, buf, n);
  return ib_write_all (sp->fd, buf, n, sp->what, err);
}

/* E's bytes by range into SPOOL (emptied first), hashed: 1 when they are
 * its content (its digest), 0 when not (a checkpoint that is not where
 * the stream is, an offset that is not the data's): the layer is then
 * read whole; -1 on an error of the machine. */
static int
spool_entry (struct ib_layer_seek *k, const struct ib_fs_entry *e, int spool, ib_error_t *err)
{
  if (ftruncate (spool, 0) < 0 || lseek (spool, 0, SEEK_SET) < 0)
    return ib_error_errno (err, errno, IB_EENV, "empty a spool");
  struct spooling sp = { spool, ib_sha256_new (), e->path };
  ib_error_t e2 = NULL;
  int x = ib_layer_seek_read (k, e->at - 1, e->size, spool_piece, &sp, &e2);
  ib_digest d;
  ib_sha256_final (sp.h, &d);
  ib_sha256_free (sp.h);
  if (x < 0 && e2->class != IB_EINTEGRITY)
    {
      *err = e2;
      return -1;
    }
  ib_error_release (&e2);
  return x == 0 && strcmp (d.s + 7, e->digest) == 0;
}

/* LAYER's wanted files read by range, in the order of their data, each
 * proven by its digest before FN sees it.  The files FN was not given
 * (every one when the layer cannot be read this way) go to *LEFT, sorted
 * by path, for a whole read. */
static int
extract_by_range (struct ib_store *s, const struct ib_image *img, int layer, const struct ib_fs_entry *const *wanted,
                  size_t n, ib_extract_fn fn, void *data, const struct ib_fs_entry **left, size_t *n_left,
                  ib_error_t *err)
{
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (wanted[i]->layer == layer)
      left[m++] = wanted[i];
  *n_left = m;
  if (m == 0)
    return 0; /* nothing of this layer: it is not even opened */
  struct ib_layer_seek *k = NULL;
  cleanup_free char *dir = NULL;
  if (!seekable (s, img, layer, wanted, n) || ib_store_cache_dir (s, "spool", &dir, NULL) < 0
      || (k = ib_layer_seek_open (s, &img->layers[layer])) == NULL)
    return 0;
  cleanup_free char *tmp = ib_path_join (dir, ".extract-XXXXXX");
  cleanup_close int spool = mkostemp (tmp, O_CLOEXEC);
  if (spool < 0)
    {
      ib_layer_seek_free (k);
      return 0;
    }
  unlink (tmp);
  ib_qsort (left, m, sizeof (*left), cmp_entry_at);
  size_t done = 0;
  int x = 0;
  while (x == 0 && done < m)
    {
      const struct ib_fs_entry *e = left[done];
      int got = spool_entry (k, e, spool, err);
      if (got == 0) /* not its bytes: the next whole read records the index again */
        ib_inflate_index_drop (s, &img->layers[layer].digest);
      if (got <= 0)
        {
          x = got;
          break;
        }
      struct ib_layer_reader *r = ib_layer_reader_of_file (spool, e->size);
      x = fn (data, e, r, err);
      ib_layer_reader_free (r);
      done++;
    }
  ib_layer_seek_free (k);
  memmove (left, left + done, (m - done) * sizeof (*left));
  *n_left = m - done;
  ib_qsort (left, *n_left, sizeof (*left), cmp_entry_path);
  return x;
}

int
ib_extract_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *wanted,
                    size_t n, ib_extract_fn fn, void *data, ib_error_t *err)
{
  if (n == 0)
    return 0;
  cleanup_free const struct ib_fs_entry **sorted = ib_xcalloc (n, sizeof (*sorted));
  memcpy (sorted, wanted, n * sizeof (*sorted));
  ib_qsort (sorted, n, sizeof (*sorted), cmp_entry_path);
  cleanup_free const struct ib_fs_entry **left = ib_xcalloc (n, sizeof (*left));
  for (size_t layer = 0; layer < img->n_layers; layer++)
    {
      size_t n_left = 0;
      if (extract_by_range (s, img, (int) layer, sorted, n, fn, data, left, &n_left, err) < 0)
        return -1;
      if (n_left && extract_layer (s, img, (int) layer, left, n_left, fn, data, err) < 0)
        return -1;
    }
  return 0;
}

int
ib_reader_slurp (struct ib_layer_reader *r, size_t max, char **out, size_t *len, ib_error_t *err)
{
  size_t cap = 64 << 10, n = 0;
  char *buf = ib_xmalloc (cap + 1);
  for (;;)
    {
      if (n == cap)
        {
          if (cap >= max)
            {
              free (buf);
              return ib_error (err, IB_EINTEGRITY, "file is larger than %zu bytes", max);
            }
          cap *= 2;
          buf = ib_xrealloc (buf, cap + 1);
        }
      ssize_t got = ib_layer_reader_data (r, buf + n, cap - n, err);
      if (got < 0)
        {
          free (buf);
          return -1;
        }
      if (got == 0)
        break;
      n += (size_t) got;
    }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

int
ib_reader_spool (struct ib_layer_reader *r, const char *dir, int *fd, ib_error_t *err)
{
  cleanup_free char *tmp = ib_path_join (dir, ".spool-XXXXXX");
  cleanup_close int f = mkostemp (tmp, O_CLOEXEC);
  if (f < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
  unlink (tmp);
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  ssize_t n;
  while ((n = ib_layer_reader_data (r, buf, 1 << 20, err)) > 0)
    if (ib_write_all (f, buf, (size_t) n, tmp, err) < 0)
      return -1;
  if (n < 0 || lseek (f, 0, SEEK_SET) < 0)
    return n < 0 ? -1 : ib_error_errno (err, errno, IB_EENV, "seek `%s`", tmp);
  *fd = steal_fd (&f);
  return 0;
}

size_t
ib_extract_layer_count (const struct ib_fs_entry *const *wanted, size_t n)
{
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    {
      size_t j = 0;
      while (j < i && wanted[j]->layer != wanted[i]->layer)
        j++;
      k += j == i;
    }
  return k;
}
