/* The layer reader's digests, computed by the hash worker on a second
 * thread (layers/store/digest.h): for gzip, zstd and plain tar layers larger than
 * the reader's buffer rings (so every buffer is reused many times), equal to
 * digests computed here in one shot by OpenSSL; damage late in a big layer
 * caught with the same message; a reader freed mid-stream.  The plain layer
 * is read faster than it can be hashed, so a buffer reused before the
 * worker hashed it changes the digest (tests/mutations.txt). */
#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "layers/store/digest.h"
#include "layers/read/layer_reader.h"
#include "layers/store/store.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

#define BIG (12u << 20) /* the big file: 12 MiB, 48 input buffers */

static void
oneshot (const void *buf, size_t len, ib_digest *out)
{
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest (buf, len, md, &n, EVP_sha256 (), NULL);
  memcpy (out->s, "sha256:", 7);
  for (int i = 0; i < 32; i++)
    snprintf (out->s + 7 + 2 * i, 3, "%02x", md[i]);
}

/* Half random bytes, half text: compressible, but not to nothing. */
static unsigned char *
big_content (void)
{
  unsigned char *p = ib_xmalloc (BIG);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < BIG; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      p[i] = (i / 4096) % 2 ? (unsigned char) x : (unsigned char) "layer pipeline "[i % 15];
    }
  return p;
}

/* A tar: a small file, the big one, another small file.  *LEN its size. */
static unsigned char *
make_tar (const unsigned char *big, size_t *len)
{
  size_t cap = BIG + (1u << 20);
  unsigned char *buf = ib_xmalloc (cap);
  struct archive *a = archive_write_new ();
  archive_write_set_format_pax_restricted (a);
  archive_write_open_memory (a, buf, cap, len);
  static const char *names[] = { "etc/a", "usr/big.bin", "etc/z" };
  for (int i = 0; i < 3; i++)
    {
      struct archive_entry *e = archive_entry_new ();
      archive_entry_set_pathname (e, names[i]);
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_perm (e, 0644);
      archive_entry_set_size (e, i == 1 ? BIG : 6);
      archive_write_header (a, e);
      archive_write_data (a, i == 1 ? (const void *) big : "hello\n", i == 1 ? BIG : 6);
      archive_entry_free (e);
    }
  archive_write_close (a);
  archive_write_free (a);
  return buf;
}

static unsigned char *
gzip_of (const unsigned char *in, size_t len, size_t *out_len)
{
  z_stream z = { 0 };
  deflateInit2 (&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  size_t cap = deflateBound (&z, len);
  unsigned char *out = ib_xmalloc (cap);
  z.next_in = (Bytef *) in;
  z.avail_in = (uInt) len;
  z.next_out = out;
  z.avail_out = (uInt) cap;
  deflate (&z, Z_FINISH);
  *out_len = cap - z.avail_out;
  deflateEnd (&z);
  return out;
}

static unsigned char *
zstd_of (const unsigned char *in, size_t len, size_t *out_len)
{
  size_t cap = ZSTD_compressBound (len);
  unsigned char *out = ib_xmalloc (cap);
  *out_len = ZSTD_compress (out, cap, in, len, 1);
  return out;
}

/* Put BLOB in S; D its descriptor, the digest computed by OpenSSL. */
static void
put (struct test_ctx *t, struct ib_store *s, const unsigned char *blob, size_t len, struct ib_descriptor *d)
{
  ib_error_t err = NULL;
  ib_digest got;
  oneshot (blob, len, &d->digest);
  d->size = len;
  d->media_type = NULL;
  CHECK (t, ib_store_put_blob (s, blob, len, &got, &err) == 0);
  CHECK_STR (t, got.s, d->digest.s);
  ib_error_release (&err);
}

/* Read every entry (the big file's data too, compared with BIG_DATA, when
 * BIG_DATA is not NULL; else the data is skipped, which goes faster than
 * the hashing), then end; 0 and *DIFF_ID, or -1 and *ERR. */
static int
read_all (struct test_ctx *t, struct ib_store *s, const struct ib_descriptor *d, const ib_digest *want,
          const unsigned char *big_data, ib_digest *diff_id, ib_error_t *err)
{
  struct ib_layer_reader *r = NULL;
  if (ib_layer_reader_open (s, d, want, &r, err) < 0)
    return -1;
  struct archive_entry *ae;
  int x;
  cleanup_free unsigned char *buf = ib_xmalloc (100000);
  while ((x = ib_layer_reader_next (r, &ae, err)) == 1)
    {
      bool is_big = big_data && strcmp (archive_entry_pathname (ae), "usr/big.bin") == 0;
      size_t off = 0;
      ssize_t n = 0;
      while (big_data && (n = ib_layer_reader_data (r, buf, 100000, err)) > 0)
        {
          CHECK (t, !is_big || (off + (size_t) n <= BIG && memcmp (buf, big_data + off, (size_t) n) == 0));
          off += (size_t) n;
        }
      x = n < 0 ? -1 : x;
      if (x < 0)
        break;
      CHECK (t, !is_big || off == BIG);
    }
  if (x == 0)
    x = ib_layer_reader_end (r, diff_id, err);
  ib_layer_reader_free (r);
  return x;
}

void
layer_reader_pipeline_digests_equal_oneshot (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s = NULL;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  cleanup_free unsigned char *big = big_content ();
  size_t tar_len = 0, gz_len = 0, zs_len = 0;
  cleanup_free unsigned char *tar = make_tar (big, &tar_len);
  cleanup_free unsigned char *gz = gzip_of (tar, tar_len, &gz_len);
  cleanup_free unsigned char *zs = zstd_of (tar, tar_len, &zs_len);
  CHECK (t, tar_len > BIG && gz_len > (2u << 20) && zs_len > (2u << 20));
  ib_digest want;
  oneshot (tar, tar_len, &want);
  const unsigned char *blobs[] = { tar, gz, zs };
  size_t lens[] = { tar_len, gz_len, zs_len };
  for (int i = 0; i < 3; i++)
    {
      struct ib_descriptor d;
      put (t, s, blobs[i], lens[i], &d);
      /* Several times: a race would not show on every run. */
      for (int round = 0; round < 3; round++)
        {
          ib_digest got = { { 0 } };
          CHECK (t, read_all (t, s, &d, &want, round ? NULL : big, &got, &err) == 0);
          if (err)
            fprintf (stderr, "  layer %d: %s\n", i, err->msg);
          ib_error_release (&err);
          CHECK_STR (t, got.s, want.s);
        }
    }
  ib_store_free (s);
}

/* Flip the byte at OFFSET of D's file in the store. */
static void
damage (struct test_ctx *t, struct ib_store *s, const struct ib_descriptor *d, long offset)
{
  cleanup_free char *path = ib_store_blob_path (s, &d->digest);
  FILE *f = fopen (path, "r+b");
  int c = f && fseek (f, offset, SEEK_SET) == 0 ? fgetc (f) : EOF;
  CHECK (t, c != EOF);
  CHECK (t, f && fseek (f, offset, SEEK_SET) == 0 && fputc (c ^ 0x5a, f) != EOF);
  if (f)
    fclose (f);
}

void
layer_reader_pipeline_catches_late_damage (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s = NULL;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  cleanup_free unsigned char *big = big_content ();
  size_t tar_len = 0, gz_len = 0;
  cleanup_free unsigned char *tar = make_tar (big, &tar_len);
  cleanup_free unsigned char *gz = gzip_of (tar, tar_len, &gz_len);
  ib_digest want, bad;
  oneshot (tar, tar_len, &want);
  /* Plain: a byte of the big file's last MiB; the message names the digest
   * of the bytes as they are now, computed here. */
  struct ib_descriptor d;
  put (t, s, tar, tar_len, &d);
  long off = (long) tar_len - 3000;
  damage (t, s, &d, off);
  tar[off] ^= 0x5a;
  oneshot (tar, tar_len, &bad);
  CHECK (t, read_all (t, s, &d, &want, NULL, NULL, &err) < 0);
  cleanup_free char *msg = ib_xasprintf ("layer blob %s: content has digest %s", d.digest.s, bad.s);
  CHECK_STR (t, err ? err->msg : NULL, msg);
  ib_error_release (&err);
  /* Gzip: inflate or its CRC-32 fails, named by the layer. */
  put (t, s, gz, gz_len, &d);
  damage (t, s, &d, (long) gz_len - 20000);
  CHECK (t, read_all (t, s, &d, &want, NULL, NULL, &err) < 0);
  cleanup_free char *prefix = ib_xasprintf ("layer %s: gzip data is corrupt (", d.digest.s);
  CHECK (t, err && strncmp (err->msg, prefix, strlen (prefix)) == 0);
  ib_error_release (&err);
  ib_store_free (s);
}

void
layer_reader_pipeline_freed_mid_stream (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s = NULL;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  cleanup_free unsigned char *big = big_content ();
  size_t tar_len = 0, gz_len = 0;
  cleanup_free unsigned char *tar = make_tar (big, &tar_len);
  cleanup_free unsigned char *gz = gzip_of (tar, tar_len, &gz_len);
  struct ib_descriptor d;
  put (t, s, gz, gz_len, &d);
  /* Right after open, after the first entry, and inside the big file. */
  for (int stop = 0; stop < 3; stop++)
    {
      struct ib_layer_reader *r = NULL;
      CHECK (t, ib_layer_reader_open (s, &d, NULL, &r, &err) == 0);
      struct archive_entry *ae;
      for (int e = 0; r && e < stop; e++)
        CHECK (t, ib_layer_reader_next (r, &ae, &err) == 1);
      char buf[4096];
      if (r && stop == 2)
        CHECK (t, ib_layer_reader_data (r, buf, sizeof (buf), &err) == (ssize_t) sizeof (buf));
      ib_layer_reader_free (r);
    }
  CHECK (t, err == NULL);
  ib_store_free (s);
}

/* A big buffer written as soon as wait returns: wait must mean "hashed",
 * not "taken" (hashing 8 MiB takes milliseconds, the write microseconds). */
static void
wait_means_hashed (struct test_ctx *t, struct ib_hash_worker *w)
{
  enum { LEN = 8 << 20 };
  cleanup_free unsigned char *buf = ib_xmalloc (LEN);
  for (int round = 0; round < 3; round++)
    {
      memset (buf, 'a' + round, LEN);
      ib_digest want, got;
      oneshot (buf, LEN, &want);
      ib_sha256 *h = ib_sha256_new ();
      ib_hash_worker_wait (w, ib_hash_worker_submit (w, h, buf, LEN));
      memset (buf, 0, LEN);
      ib_hash_worker_drain (w);
      ib_sha256_final (h, &got);
      ib_sha256_free (h);
      CHECK_STR (t, got.s, want.s);
    }
}

/* The worker alone: many jobs, more than its queue, on two contexts; wait;
 * a worker freed with jobs queued. */
void
hash_worker_keeps_order_per_context (struct test_ctx *t)
{
  enum { N = 200, PIECE = 1000 };
  cleanup_free unsigned char *data = ib_xmalloc (N * PIECE);
  for (size_t i = 0; i < N * PIECE; i++)
    data[i] = (unsigned char) (i * 7 + i / 977);
  for (int threaded = 0; threaded < 2; threaded++)
    {
      struct ib_hash_worker *w = ib_hash_worker_new (threaded);
      CHECK (t, ib_hash_worker_threaded (w) == (bool) threaded);
      ib_sha256 *a = ib_sha256_new (), *b = ib_sha256_new ();
      uint64_t last = 0;
      for (size_t i = 0; i < N; i++)
        {
          uint64_t tk = ib_hash_worker_submit (w, i % 3 ? a : b, data + i * PIECE, PIECE);
          CHECK (t, tk == last + 1);
          last = tk;
        }
      ib_hash_worker_drain (w);
      ib_digest ga, gb, wa, wb;
      ib_sha256_final (a, &ga);
      ib_sha256_final (b, &gb);
      ib_sha256 *ra = ib_sha256_new (), *rb = ib_sha256_new ();
      for (size_t i = 0; i < N; i++)
        ib_sha256_update (i % 3 ? ra : rb, data + i * PIECE, PIECE);
      ib_sha256_final (ra, &wa);
      ib_sha256_final (rb, &wb);
      CHECK_STR (t, ga.s, wa.s);
      CHECK_STR (t, gb.s, wb.s);
      wait_means_hashed (t, w);
      for (size_t i = 0; i < N; i++)
        ib_hash_worker_submit (w, a, data + i * PIECE, PIECE);
      ib_hash_worker_free (w);
      ib_sha256_free (a), ib_sha256_free (b), ib_sha256_free (ra), ib_sha256_free (rb);
    }
}
