#include "extract.h"

#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "../layers/tarpath.h"

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
  const struct ib_fs_entry *const *hit = bsearch (&kp, wanted, n, sizeof (*wanted), cmp_entry_path);
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

int
ib_extract_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *wanted,
                    size_t n, ib_extract_fn fn, void *data, ib_error_t *err)
{
  if (n == 0)
    return 0;
  cleanup_free const struct ib_fs_entry **sorted = ib_xcalloc (n, sizeof (*sorted));
  memcpy (sorted, wanted, n * sizeof (*sorted));
  ib_qsort (sorted, n, sizeof (*sorted), cmp_entry_path);
  for (size_t layer = 0; layer < img->n_layers; layer++)
    {
      bool needed = false;
      for (size_t i = 0; i < n && !needed; i++)
        needed = wanted[i]->layer == (int) layer;
      if (needed && extract_layer (s, img, (int) layer, sorted, n, fn, data, err) < 0)
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
