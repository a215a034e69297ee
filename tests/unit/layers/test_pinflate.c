/* A gzip layer's inflate index (layers/read/inflate_index.h) and the parallel
 * inflate that uses it (layers/read/pinflate.h), through the layer reader: the
 * index is recorded at a first read and used at the next, with the same
 * digests; an index forged so that it loads (its hash made right) makes
 * the read fall back, still right, and is dropped; a damaged one is not
 * read; a blob altered after its index was recorded fails with the message
 * of a sequential read. */
#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "layers/read/inflate_index.h"
#include "layers/read/layer_reader.h"
#include "layers/store/digest.h"
#include "layers/store/store.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"
#include "tests/unit/test.h"

#define DATA (40u << 20) /* the big file: five spans of output */
#define HEADER 73        /* inflate_index.c: magic (25), key (32), two sizes */

/* A tar of one file, runs of random bytes and of text, gzip -1: a layer of
 * about 20 MiB. */
static unsigned char *
layer (size_t *tar_len, ib_digest *diff_id, size_t *gz_len)
{
  unsigned char *data = ib_xmalloc (DATA);
  uint32_t x = 88172645u;
  for (size_t i = 0; i < DATA; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      data[i] = (i / 5000) % 2 ? (unsigned char) x : (unsigned char) "inflate index "[(i + (x & 3)) % 14];
    }
  size_t cap = DATA + (1u << 20);
  cleanup_free unsigned char *tar = ib_xmalloc (cap);
  struct archive *a = archive_write_new ();
  archive_write_set_format_pax_restricted (a);
  archive_write_open_memory (a, tar, cap, tar_len);
  struct archive_entry *e = archive_entry_new ();
  archive_entry_set_pathname (e, "usr/lib/big.so");
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, DATA);
  archive_write_header (a, e);
  archive_write_data (a, data, DATA);
  archive_entry_free (e);
  archive_write_close (a);
  archive_write_free (a);
  free (data);
  ib_sha256_buf (tar, *tar_len, diff_id);
  z_stream z = { 0 };
  deflateInit2 (&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  size_t gz_cap = deflateBound (&z, *tar_len);
  unsigned char *gz = ib_xmalloc (gz_cap);
  z.next_in = tar;
  z.avail_in = (uInt) *tar_len;
  z.next_out = gz;
  z.avail_out = (uInt) gz_cap;
  deflate (&z, Z_FINISH);
  *gz_len = gz_cap - z.avail_out;
  deflateEnd (&z);
  return gz;
}

/* Read the layer through with THREADS: 0 and *DIFF_ID, or -1 and *ERR. */
static int
read_layer (struct ib_store *s, const struct ib_descriptor *d, const ib_digest *want, int threads, ib_digest *diff_id,
            ib_error_t *err)
{
  struct ib_layer_reader *r = NULL;
  if (ib_layer_reader_open_threads (s, d, want, threads, &r, err) < 0)
    return -1;
  struct archive_entry *ae;
  int x;
  while ((x = ib_layer_reader_next (r, &ae, err)) == 1)
    ;
  if (x == 0)
    x = ib_layer_reader_end (r, diff_id, err);
  ib_layer_reader_free (r);
  return x;
}

struct fixture
{
  struct ib_store *s;
  struct ib_descriptor d;
  ib_digest diff_id;
  char *index; /* the index's path */
};

/* A store NAME with the layer, read once (the index recorded). */
static void
setup (struct test_ctx *t, struct fixture *f, const char *name)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_path_join (test_tmpdir (), name);
  CHECK (t, ib_store_open (root, &f->s, &err) == 0);
  size_t tar_len = 0, gz_len = 0;
  cleanup_free unsigned char *gz = layer (&tar_len, &f->diff_id, &gz_len);
  CHECK (t, gz_len >= IB_INFLATE_INDEX_SPAN);
  ib_digest got;
  CHECK (t, ib_store_put_blob (f->s, gz, gz_len, &got, &err) == 0);
  f->d = (struct ib_descriptor) { .digest = got, .size = gz_len };
  f->index = ib_xasprintf ("%s/imgbuild/inflate-index/%s", root, ib_digest_hex (got.s));
  ib_digest diff_id = { { 0 } };
  CHECK (t, read_layer (f->s, &f->d, &f->diff_id, 1, &diff_id, &err) == 0);
  CHECK_STR (t, diff_id.s, f->diff_id.s);
  ib_error_release (&err);
}

static void
teardown (struct fixture *f)
{
  ib_store_free (f->s);
  free (f->index);
}

/* The index's checkpoints, as it loads (0: none). */
static size_t
checkpoints (struct fixture *f)
{
  struct ib_inflate_index *x = NULL;
  ib_error_t err = NULL;
  if (ib_inflate_index_load (f->s, &f->d.digest, f->d.size, &x, &err) < 0)
    ib_error_release (&err);
  size_t n = x ? ib_inflate_index_count (x) : 0;
  ib_inflate_index_free (x);
  return n;
}

/* Read with two threads: the digests right, the read said so. */
static void
reads_right (struct test_ctx *t, struct fixture *f)
{
  ib_error_t err = NULL;
  ib_digest got = { { 0 } };
  CHECK (t, read_layer (f->s, &f->d, &f->diff_id, 2, &got, &err) == 0);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  CHECK_STR (t, got.s, f->diff_id.s);
}

void
inflate_index_recorded_at_first_read_then_used (struct test_ctx *t)
{
  if (ib_gunzip_snapshot_size () == 0)
    return; /* a zlib build: no checkpoints */
  struct fixture f;
  setup (t, &f, "store");
  /* Five spans of output: a checkpoint past each of the first four. */
  size_t n = checkpoints (&f);
  CHECK (t, n >= 3 && n <= 5);
  for (int round = 0; round < 3; round++)
    reads_right (t, &f);
  /* Used, not dropped: every checkpoint was where the stream was. */
  CHECK (t, checkpoints (&f) == n);
  teardown (&f);
}

/* The index file whole, *LEN its size. */
static unsigned char *
slurp (struct test_ctx *t, const char *path, size_t *len)
{
  char *text = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_read_file (path, 64u << 20, &text, len, &err) == 0);
  ib_error_release (&err);
  return (unsigned char *) text;
}

/* Write BUF as the index, its hash made right again (FIX) or not. */
static void
spill (struct test_ctx *t, const char *path, unsigned char *buf, size_t len, bool fix)
{
  unsigned int n = 0;
  if (fix)
    EVP_Digest (buf, len - 32, buf + len - 32, &n, EVP_sha256 (), NULL);
  ib_error_t err = NULL;
  CHECK (t, ib_write_cache_file (path, buf, len, &err) == 0);
  ib_error_release (&err);
}

/* Forgeries that load (their hash is right) but are not where the stream
 * is: a byte of a checkpoint's history, its output offset, its input
 * offset, two checkpoints' snapshots swapped.  Each read is right, falls
 * back, and drops the index; the next read records it again. */
void
inflate_index_forged_falls_back_and_is_dropped (struct test_ctx *t)
{
  if (ib_gunzip_snapshot_size () == 0)
    return;
  struct fixture f;
  setup (t, &f, "store");
  size_t len = 0, snap = ib_gunzip_snapshot_size ();
  cleanup_free unsigned char *good = slurp (t, f.index, &len);
  size_t n = checkpoints (&f);
  CHECK (t, n >= 3 && len == HEADER + n * (snap + 16) + 40);
  size_t points = HEADER + n * snap;
  for (int forgery = 0; forgery < 5 && n >= 3; forgery++)
    {
      cleanup_free unsigned char *bad = ib_xmalloc (len);
      memcpy (bad, good, len);
      unsigned char *s1 = bad + HEADER + snap, *s2 = bad + HEADER + 2 * snap;
      if (forgery == 0) /* history: the snapshot's last 32 KiB */
        s1[snap - 32768 + 1000] ^= 1;
      else if (forgery == 1)
        bad[points + 16 + 8] ^= 1; /* checkpoint 1's output offset */
      else if (forgery == 2)
        bad[points + 16] ^= 4; /* its input offset */
      else if (forgery == 3)
        {
          cleanup_free unsigned char *tmp = ib_xmalloc (snap);
          memcpy (tmp, s1, snap);
          memcpy (s1, s2, snap);
          memcpy (s2, tmp, snap);
        }
      else /* the last checkpoint: its chunk is the blob's last */
        bad[HEADER + n * snap - 32768 + 2000] ^= 0x10;
      spill (t, f.index, bad, len, true);
      CHECK (t, checkpoints (&f) == n);
      reads_right (t, &f);
      struct stat st;
      CHECK (t, stat (f.index, &st) < 0);
      ib_digest got = { { 0 } };
      ib_error_t err = NULL;
      CHECK (t, read_layer (f.s, &f.d, &f.diff_id, 1, &got, &err) == 0);
      ib_error_release (&err);
      CHECK (t, checkpoints (&f) == n);
    }
  teardown (&f);
}

/* A byte of the index changed and its hash not: it does not load, the read
 * is right, and records it again. */
void
inflate_index_damaged_is_not_read (struct test_ctx *t)
{
  if (ib_gunzip_snapshot_size () == 0)
    return;
  struct fixture f;
  setup (t, &f, "store");
  size_t len = 0;
  cleanup_free unsigned char *buf = slurp (t, f.index, &len);
  size_t n = checkpoints (&f);
  buf[len / 2] ^= 1;
  spill (t, f.index, buf, len, false);
  CHECK (t, checkpoints (&f) == 0);
  reads_right (t, &f);
  CHECK (t, checkpoints (&f) == n);
  /* Cut short, or another blob's size in its header: no index either. */
  spill (t, f.index, buf, len - 1000, false);
  CHECK (t, checkpoints (&f) == 0);
  teardown (&f);
}

/* Flip the byte at OFFSET of D's file in the store. */
static void
damage (struct test_ctx *t, struct fixture *f, size_t offset)
{
  cleanup_free char *path = ib_store_blob_path (f->s, &f->d.digest);
  FILE *fp = fopen (path, "r+b");
  int c = fp && fseek (fp, (long) offset, SEEK_SET) == 0 ? fgetc (fp) : EOF;
  CHECK (t, c != EOF);
  CHECK (t, fp && fseek (fp, (long) offset, SEEK_SET) == 0 && fputc (c ^ 0x21, fp) != EOF);
  if (fp)
    fclose (fp);
}

/* The blob changed after its index was recorded, in its first chunk, in a
 * middle one, in its trailer: the read with the index fails as one
 * without it does, with the same message. */
void
inflate_index_blob_altered_after_it_fails_alike (struct test_ctx *t)
{
  if (ib_gunzip_snapshot_size () == 0)
    return;
  size_t where[] = { 5000, 0, 0 };
  for (int i = 0; i < 3; i++)
    {
      struct fixture f;
      char name[16];
      snprintf (name, sizeof (name), "store%d", i);
      setup (t, &f, name);
      where[1] = (size_t) f.d.size / 2;
      where[2] = (size_t) f.d.size - 3;
      damage (t, &f, where[i]);
      ib_error_t e2 = NULL, e1 = NULL;
      ib_digest got;
      CHECK (t, read_layer (f.s, &f.d, &f.diff_id, 2, &got, &e2) < 0);
      /* The index was used or dropped; sequentially, without it: */
      unlink (f.index);
      CHECK (t, read_layer (f.s, &f.d, &f.diff_id, 1, &got, &e1) < 0);
      CHECK_STR (t, e2 ? e2->msg : NULL, e1 ? e1->msg : NULL);
      ib_error_release (&e1);
      ib_error_release (&e2);
      teardown (&f);
    }
}
