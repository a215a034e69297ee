#include "layers/tar/tarlayer.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/pgzip.h"

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

/* A layer whose sources hold no more than this is read twice when its blob
 * is not kept already: once for its diff_id alone, once to compress it.
 * A larger one is read once, and compressed whatever is kept. */
#define KEPT_MAX_SOURCE (8u << 20)

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
  if (k->gz && ib_pgzip_write (k->gz, buf, len, k->err) < 0)
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

/* The bytes of the plan's sources, up to LIMIT + 1 (past it, the sum no
 * longer matters); a source that cannot be read counts as 0, for the tar
 * pass to refuse it with its own error. */
static uint64_t
plan_source_bytes (const struct plan *p, uint64_t limit)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < p->n && sum <= limit; i++)
    {
      struct stat st;
      if (p->items[i]->type == IB_ENTRY_FILE && stat (p->items[i]->source, &st) == 0)
        sum += (uint64_t) st.st_size;
    }
  return sum;
}

/* Where the blob of the tar whose digest is DIFF_ID is kept: its name holds
 * everything the gzip bytes depend on besides the tar (util/pgzip.h: the
 * level, the block size; and zlib's version, whose deflate makes them). */
static char *
kept_path (struct ib_store *s, const ib_digest *diff_id, int level)
{
  cleanup_free char *dir = NULL;
  ib_error_t ignored = NULL;
  if (ib_store_cache_dir (s, "layer-gz", &dir, &ignored) < 0)
    {
      ib_error_release (&ignored);
      return NULL;
    }
  cleanup_free char *name = ib_xasprintf ("%s-gz%d-b%u-zlib%s", ib_digest_hex (diff_id->s), level,
                                          IB_PGZIP_BLOCK, zlibVersion ());
  return ib_path_join (dir, name);
}

/* The blob kept at PATH for the tar DIFF_ID, when the store still holds it
 * whole: "DIGEST SIZE\n". */
static bool
kept_blob (struct ib_store *s, const char *path, const ib_digest *diff_id, struct ib_layer_result *out)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (ib_read_file (path, 256, &text, &len, NULL) < 0)
    return false;
  char hex[65];
  unsigned long long size;
  char nl;
  if (sscanf (text, "sha256:%64[0-9a-f] %llu%c", hex, &size, &nl) != 3 || nl != '\n' || !ib_digest_hex_valid (hex))
    return false;
  ib_digest d;
  snprintf (d.s, sizeof (d.s), "sha256:%s", hex);
  cleanup_free char *blob = ib_store_blob_path (s, &d);
  struct stat st;
  if (stat (blob, &st) < 0 || !S_ISREG (st.st_mode) || (uint64_t) st.st_size != size)
    return false;
  out->desc.media_type = ib_xstrdup (IB_MT_OCI_LAYER_GZIP);
  out->desc.digest = d;
  out->desc.size = size;
  out->diff_id = *diff_id;
  out->kept = true;
  return true;
}

static int
gzip_level (const struct ib_layer_options *opt)
{
  return opt->gzip_level >= 1 && opt->gzip_level <= 9 ? opt->gzip_level : 6;
}

/* The plan's diff_id alone: its tar hashed, not compressed. */
static int
tar_digest (const struct plan *p, long long mtime, ib_digest *out, ib_error_t *err)
{
  struct sink k = { .err = err, .tar_hash = ib_sha256_new () };
  int r = write_tar (&k, p, mtime, err);
  ib_sha256_final (k.tar_hash, out);
  ib_sha256_free (k.tar_hash);
  return r;
}

/* The tar compressed into a new blob. */
static int
write_blob (struct ib_store *s, const struct plan *p, const struct ib_layer_options *opt, struct ib_layer_result *out,
            ib_error_t *err)
{
  struct sink k = { .err = err };
  if (ib_blob_writer_new (s, &k.blob, err) < 0)
    return -1;
  k.tar_hash = ib_sha256_new ();
  int level = gzip_level (opt);
  /* The thread count changes how fast, never the bytes (util/pgzip.h). */
  int threads = opt->threads > 0 ? opt->threads : ib_pgzip_default_threads ();
  int ret = ib_pgzip_new (level, threads, sink_blob, &k, &k.gz, err);
  if (ret == 0)
    ret = write_tar (&k, p, opt->mtime, err);
  if (ret == 0)
    ret = ib_pgzip_finish (k.gz, err);
  ib_pgzip_free (k.gz);
  if (ret == 0)
    {
      ib_sha256_final (k.tar_hash, &out->diff_id);
      out->desc.media_type = ib_xstrdup (IB_MT_OCI_LAYER_GZIP);
      ret = ib_blob_writer_commit (k.blob, NULL, UINT64_MAX, &out->desc.digest, &out->desc.size, err);
    }
  else
    ib_blob_writer_abort (k.blob);
  ib_sha256_free (k.tar_hash);
  return ret;
}

int
ib_layer_write (struct ib_store *s, const struct ib_layer_entry *entries, size_t n,
                const struct ib_layer_options *opt, struct ib_layer_result *out, ib_error_t *err)
{
  struct plan p;
  int ret = make_plan (entries, n, &p, err);
  int level = gzip_level (opt);
  out->kept = false;
  /* A layer built before (a warm build of the same overlay) has its blob
   * in the store: its tar's digest finds it, and deflate, the build's
   * largest cost after the gates, is not run again. */
  cleanup_free char *kept = NULL;
  if (ret == 0 && plan_source_bytes (&p, KEPT_MAX_SOURCE) <= KEPT_MAX_SOURCE)
    {
      ib_digest diff_id;
      ret = tar_digest (&p, opt->mtime, &diff_id, err);
      kept = ret == 0 ? kept_path (s, &diff_id, level) : NULL;
      if (kept && kept_blob (s, kept, &diff_id, out))
        {
          out->n_entries = p.n;
          free_plan (&p);
          return 0;
        }
    }
  if (ret == 0)
    ret = write_blob (s, &p, opt, out, err);
  if (ret == 0)
    out->n_entries = p.n;
  /* Kept under the digest of the tar just compressed (a source changed
   * since the first pass gives another name, never a wrong blob). */
  cleanup_free char *name = ret == 0 && kept ? kept_path (s, &out->diff_id, level) : NULL;
  cleanup_free char *line = name ? ib_xasprintf ("%s %llu\n", out->desc.digest.s,
                                                 (unsigned long long) out->desc.size)
                                 : NULL;
  ib_error_t ignored = NULL;
  if (line && ib_write_cache_file (name, line, strlen (line), &ignored) < 0)
    ib_error_release (&ignored);
  free_plan (&p);
  return ret;
}
