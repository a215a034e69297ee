#include "tarlayer.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "../util/pgzip.h"

#define CHUNK (256u << 10)

long long
ib_source_date_epoch (void)
{
  const char *s = getenv ("SOURCE_DATE_EPOCH");
  if (s == NULL || *s == '\0')
    return 0;
  char *end;
  errno = 0;
  long long v = strtoll (s, &end, 10);
  return (errno || *end || v < 0) ? 0 : v;
}

/* The sink libarchive writes the tar stream into: hashes it (diff_id) and
 * hands it to the block compressor, whose gzip bytes go to the blob writer
 * (digest). */
struct sink
{
  struct ib_blob_writer *blob;
  ib_sha256 *tar_hash;
  struct ib_pgzip *gz;
  ib_error_t *err;
  bool failed; /* the first error is in *ERR: libarchive's later writes
                * (its close flushes) must not replace it */
};

static int
sink_blob (void *data, const void *buf, size_t len, ib_error_t *err)
{
  struct sink *k = data;
  return ib_blob_writer_write (k->blob, buf, len, err);
}

static la_ssize_t
sink_write (struct archive *a, void *data, const void *buf, size_t len)
{
  (void) a;
  struct sink *k = data;
  if (k->failed)
    return -1;
  ib_sha256_update (k->tar_hash, buf, len);
  if (ib_pgzip_write (k->gz, buf, len, k->err) < 0)
    {
      k->failed = true;
      return -1;
    }
  return (la_ssize_t) len;
}

static int
cmp_entries (const void *a, const void *b)
{
  const struct ib_layer_entry *x = *(const struct ib_layer_entry *const *) a;
  const struct ib_layer_entry *y = *(const struct ib_layer_entry *const *) b;
  return strcmp (x->path, y->path);
}

/* The entries plus one folder entry for every parent that none names,
 * sorted by path.  The array holds pointers: into ENTRIES, or into PARENTS,
 * which the caller frees. */
struct plan
{
  const struct ib_layer_entry **items;
  size_t n;
  struct ib_layer_entry *parents;
  size_t n_parents;
};

static bool
plan_has (const struct plan *p, const char *path)
{
  for (size_t i = 0; i < p->n; i++)
    if (strcmp (p->items[i]->path, path) == 0)
      return true;
  return false;
}

static int
make_plan (const struct ib_layer_entry *entries, size_t n, struct plan *p, ib_error_t *err)
{
  size_t cap = n * 4 + 16;
  p->items = ib_xcalloc (cap, sizeof (*p->items));
  p->parents = ib_xcalloc (cap, sizeof (*p->parents));
  p->n = p->n_parents = 0;
  for (size_t i = 0; i < n; i++)
    p->items[p->n++] = &entries[i];
  ib_qsort (p->items, p->n, sizeof (*p->items), cmp_entries);
  for (size_t i = 1; i < p->n; i++)
    if (strcmp (p->items[i - 1]->path, p->items[i]->path) == 0)
      return ib_error (err, IB_EDEFINITION, "layer: two entries for `/%s`", p->items[i]->path);
  size_t given = p->n;
  for (size_t i = 0; i < given; i++)
    {
      cleanup_free char *dir = ib_xstrdup (p->items[i]->path);
      for (char *slash = strrchr (dir, '/'); slash; slash = strrchr (dir, '/'))
        {
          *slash = '\0';
          if (plan_has (p, dir))
            break;
          if (p->n == cap)
            return ib_error (err, IB_EDEFINITION, "layer: too many folders");
          struct ib_layer_entry *d = &p->parents[p->n_parents++];
          d->path = ib_xstrdup (dir);
          d->type = IB_ENTRY_DIR;
          d->mode = -1;
          p->items[p->n++] = d;
        }
    }
  ib_qsort (p->items, p->n, sizeof (*p->items), cmp_entries);
  return 0;
}

static void
free_plan (struct plan *p)
{
  for (size_t i = 0; i < p->n_parents; i++)
    free (p->parents[i].path);
  free (p->parents);
  free (p->items);
}

static int
la_fail (struct archive *a, const char *what, const char *path, ib_error_t *err)
{
  if (err && *err)
    return ib_error_wrap (err, "%s `%s`", what, path);
  return ib_error (err, IB_EENV, "%s `%s`: %s", what, path, archive_error_string (a));
}

static int
write_file_data (struct archive *a, int fd, const char *source, ib_error_t *err)
{
  cleanup_free char *buf = ib_xmalloc (CHUNK);
  for (;;)
    {
      ssize_t n = read (fd, buf, CHUNK);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ib_error_errno (err, errno, IB_EENV, "read `%s`", source);
      if (n == 0)
        return 0;
      if (archive_write_data (a, buf, (size_t) n) != n)
        return la_fail (a, "write", source, err);
    }
}

static int
write_entry (struct archive *a, const struct ib_layer_entry *e, long long mtime, ib_error_t *err)
{
  struct archive_entry *ae = archive_entry_new ();
  cleanup_close int fd = -1;
  int mode = e->mode;
  archive_entry_set_pathname (ae, e->path);
  archive_entry_set_mtime (ae, mtime, 0);
  archive_entry_set_uid (ae, 0);
  archive_entry_set_gid (ae, 0);
  switch (e->type)
    {
    case IB_ENTRY_DIR:
      archive_entry_set_filetype (ae, AE_IFDIR);
      mode = mode >= 0 ? mode : 0755;
      break;
    case IB_ENTRY_SYMLINK:
      archive_entry_set_filetype (ae, AE_IFLNK);
      archive_entry_set_symlink (ae, e->link);
      mode = 0777;
      break;
    case IB_ENTRY_FILE:
      {
        struct stat st;
        fd = open (e->source, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat (fd, &st) < 0)
          {
            archive_entry_free (ae);
            return ib_error_errno (err, errno, IB_EDEFINITION, "source `%s`", e->source);
          }
        if (!S_ISREG (st.st_mode))
          {
            archive_entry_free (ae);
            return ib_error (err, IB_EDEFINITION, "source `%s` is not a regular file", e->source);
          }
        archive_entry_set_filetype (ae, AE_IFREG);
        archive_entry_set_size (ae, st.st_size);
        /* Only the owner's execute bit is taken from the source: git keeps
         * it, while umask and the other bits differ between checkouts. */
        mode = mode >= 0 ? mode : ((st.st_mode & S_IXUSR) ? 0755 : 0644);
        break;
      }
    }
  archive_entry_set_perm (ae, (mode_t) mode);
  int r = archive_write_header (a, ae);
  archive_entry_free (ae);
  if (r != ARCHIVE_OK)
    return la_fail (a, "write header for", e->path, err);
  if (e->type == IB_ENTRY_FILE)
    return write_file_data (a, fd, e->source, err);
  return 0;
}

static int
write_tar (struct sink *k, const struct plan *p, long long mtime, ib_error_t *err)
{
  struct archive *a = archive_write_new ();
  /* pax_restricted writes plain ustar headers unless an entry needs more,
   * which is what Docker and umoci expect. */
  archive_write_set_format_pax_restricted (a);
  archive_write_add_filter_none (a);
  archive_write_set_bytes_per_block (a, 10240);
  int ret = 0;
  if (archive_write_open2 (a, k, NULL, sink_write, NULL, NULL) != ARCHIVE_OK)
    ret = la_fail (a, "open", "layer", err);
  for (size_t i = 0; ret == 0 && i < p->n; i++)
    ret = write_entry (a, p->items[i], mtime, err);
  if (ret == 0 && archive_write_close (a) != ARCHIVE_OK)
    ret = la_fail (a, "close", "layer", err);
  archive_write_free (a);
  return ret;
}

int
ib_layer_write (struct ib_store *s, const struct ib_layer_entry *entries, size_t n,
                const struct ib_layer_options *opt, struct ib_layer_result *out, ib_error_t *err)
{
  struct plan p;
  if (make_plan (entries, n, &p, err) < 0)
    {
      free_plan (&p);
      return -1;
    }
  struct sink k = { .err = err };
  if (ib_blob_writer_new (s, &k.blob, err) < 0)
    {
      free_plan (&p);
      return -1;
    }
  k.tar_hash = ib_sha256_new ();
  int level = opt->gzip_level >= 1 && opt->gzip_level <= 9 ? opt->gzip_level : 6;
  /* The thread count changes how fast, never the bytes (util/pgzip.h). */
  int threads = opt->threads > 0 ? opt->threads : ib_pgzip_default_threads ();
  int ret = ib_pgzip_new (level, threads, sink_blob, &k, &k.gz, err);
  if (ret == 0)
    ret = write_tar (&k, &p, opt->mtime, err);
  if (ret == 0)
    ret = ib_pgzip_finish (k.gz, err);
  ib_pgzip_free (k.gz);
  if (ret == 0)
    {
      ib_sha256_final (k.tar_hash, &out->diff_id);
      out->desc.media_type = ib_xstrdup (IB_MT_OCI_LAYER_GZIP);
      out->n_entries = p.n;
      ret = ib_blob_writer_commit (k.blob, NULL, UINT64_MAX, &out->desc.digest, &out->desc.size, err);
    }
  else
    ib_blob_writer_abort (k.blob);
  ib_sha256_free (k.tar_hash);
  free_plan (&p);
  return ret;
}
