/* util/pgzip: the same bytes whatever the thread count and however the
 * input is cut into writes; the bytes are the format of util/pgzip.h (a
 * serial reference built here from zlib alone); they inflate to the input
 * with zlib's gunzip and with util/gunzip.c; header, CRC-32 and ISIZE. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/gunzip.h"
#include "util/pgzip.h"
#include "tests/unit/test.h"

struct buf
{
  unsigned char *p;
  size_t n, cap;
  int fail_after; /* the sink fails on this call (0: never) */
  int calls;
};

static void
buf_put (struct buf *b, const void *p, size_t n)
{
  if (b->n + n > b->cap)
    {
      b->cap = (b->n + n) * 2 + 1024;
      b->p = realloc (b->p, b->cap);
    }
  memcpy (b->p + b->n, p, n);
  b->n += n;
}

static int
buf_sink (void *data, const void *p, size_t n, ib_error_t *err)
{
  struct buf *b = data;
  if (b->fail_after && ++b->calls >= b->fail_after)
    return ib_error (err, IB_EENV, "sink refused");
  buf_put (b, p, n);
  return 0;
}

/* Odd write sizes, none a divisor of the block size. */
static const size_t odd_writes[] = { 1, 7, 4093, 65537, 333333, 10, 1048575, 2 };

/* DATA through pgzip with THREADS, in writes of the sizes of WRITES
 * (cycled; NULL: one write).  The gzip bytes in *OUT; 0 or -1. */
static int
pgz_compress (const unsigned char *data, size_t len, int threads, const size_t *writes, size_t n_writes, struct buf *out)
{
  ib_error_t err = NULL;
  struct ib_pgzip *z = NULL;
  int ret = ib_pgzip_new (6, threads, buf_sink, out, &z, &err);
  for (size_t pos = 0, i = 0; ret == 0 && pos < len; i++)
    {
      size_t n = writes ? writes[i % n_writes] : len;
      n = n < len - pos ? n : len - pos;
      ret = ib_pgzip_write (z, data + pos, n, &err);
      pos += n;
    }
  if (ret == 0)
    ret = ib_pgzip_finish (z, &err);
  ib_pgzip_free (z);
  ib_error_release (&err);
  return ret;
}

/* The format of util/pgzip.h, serially, from zlib alone: what every
 * thread count must give. */
static void
reference (const unsigned char *data, size_t len, struct buf *out)
{
  static const unsigned char header[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };
  buf_put (out, header, sizeof header);
  size_t pos = 0;
  unsigned char *tmp = malloc (2 * IB_PGZIP_BLOCK);
  do
    {
      size_t n = len - pos < IB_PGZIP_BLOCK ? len - pos : IB_PGZIP_BLOCK;
      bool last = pos + n == len;
      z_stream zs = { 0 };
      deflateInit2 (&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
      size_t dict = pos < 32768 ? pos : 32768;
      if (dict)
        deflateSetDictionary (&zs, data + pos - dict, (uInt) dict);
      zs.next_in = (unsigned char *) data + pos;
      zs.avail_in = (uInt) n;
      zs.next_out = tmp;
      zs.avail_out = 2 * IB_PGZIP_BLOCK;
      deflate (&zs, last ? Z_FINISH : Z_SYNC_FLUSH);
      buf_put (out, tmp, 2 * IB_PGZIP_BLOCK - zs.avail_out);
      deflateEnd (&zs);
      pos += n;
    }
  while (pos < len);
  free (tmp);
  uLong crc = crc32 (0, data, (uInt) len);
  unsigned char trailer[8];
  for (int i = 0; i < 4; i++)
    {
      trailer[i] = (unsigned char) (crc >> (8 * i));
      trailer[4 + i] = (unsigned char) ((uint32_t) len >> (8 * i));
    }
  buf_put (out, trailer, sizeof trailer);
}

/* Inflate GZ with zlib's own gunzip (windowBits 31: header and trailer
 * checked); true when it gives exactly DATA and the stream ended there. */
static bool
zlib_gunzip_equals (const struct buf *gz, const unsigned char *data, size_t len)
{
  z_stream zs = { 0 };
  unsigned char *out = malloc (len + 1);
  inflateInit2 (&zs, 31);
  zs.next_in = gz->p;
  zs.avail_in = (uInt) gz->n;
  zs.next_out = out;
  zs.avail_out = (uInt) len + 1;
  int r = inflate (&zs, Z_FINISH);
  bool ok = r == Z_STREAM_END && zs.avail_in == 0 && zs.total_out == len && memcmp (out, data, len) == 0;
  inflateEnd (&zs);
  free (out);
  return ok;
}

/* The same with the project's inflater (igzip or zlib), fed 4093 bytes at a time. */
static bool
own_gunzip_equals (const struct buf *gz, const unsigned char *data, size_t len)
{
  struct ib_gunzip *g = NULL;
  ib_error_t err = NULL;
  if (ib_gunzip_new (&g, &err) < 0)
    return false;
  unsigned char *out = malloc (len + 1);
  size_t pos = 0, made_all = 0;
  int members = 0, ret = 0;
  while (ret == 0 && pos < gz->n)
    {
      size_t give = gz->n - pos < 4093 ? gz->n - pos : 4093, used = 0, made = 0;
      bool end = false;
      ret = ib_gunzip_run (g, gz->p + pos, give, &used, out + made_all, len + 1 - made_all, &made, &end, &err);
      pos += used;
      made_all += made;
      members += end;
      if (!used && !made && !end)
        break;
    }
  bool ok = ret == 0 && members == 1 && made_all == len && memcmp (out, data, len) == 0;
  ib_error_release (&err);
  ib_gunzip_free (g);
  free (out);
  return ok;
}

/* ~10 blocks: text-like runs, random bytes, zeros, a repeat of an earlier
 * stretch (a match across a block boundary, through the dictionary). */
static unsigned char *
mixed_input (size_t len)
{
  unsigned char *d = malloc (len);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < len; i++)
    {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      size_t region = (i / 300000) % 4;
      d[i] = region == 0   ? (unsigned char) ("the quick brown fox "[(x >> 8) % 20])
             : region == 1 ? (unsigned char) x
             : region == 2 ? 0
                           : d[i - 200000];
    }
  return d;
}

static void
check_one_input (struct test_ctx *t, const unsigned char *data, size_t len)
{
  static const int threads[] = { 1, 2, 3, 8 };
  struct buf ref = { 0 };
  reference (data, len, &ref);
  CHECK (t, zlib_gunzip_equals (&ref, data, len));
  for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++)
    for (int odd = 0; odd < 2; odd++)
      {
        struct buf out = { 0 };
        size_t nw = sizeof odd_writes / sizeof odd_writes[0];
        CHECK (t, pgz_compress (data, len, threads[i], odd ? odd_writes : NULL, nw, &out) == 0);
        if (out.n != ref.n || memcmp (out.p, ref.p, ref.n) != 0)
          {
            fprintf (stderr, "  %zu bytes, %d threads, %s writes: not the format's bytes\n", len, threads[i],
                     odd ? "odd" : "one");
            t->failures++;
          }
        CHECK (t, zlib_gunzip_equals (&out, data, len));
        CHECK (t, own_gunzip_equals (&out, data, len));
        free (out.p);
      }
  free (ref.p);
}

void
pgzip_same_bytes_for_any_threads_and_writes (struct test_ctx *t)
{
  const size_t B = IB_PGZIP_BLOCK;
  const size_t sizes[] = { 0, 1, B, B + 1, 10 * B + 12345 };
  unsigned char *data = mixed_input (sizes[4]);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    check_one_input (t, data, sizes[i]);
  /* The dictionary keeps the ratio: within 1% of one zlib stream. */
  struct buf out = { 0 };
  CHECK (t, pgz_compress (data, sizes[4], 2, NULL, 0, &out) == 0);
  uLongf one_len = compressBound (sizes[4]);
  unsigned char *one = malloc (one_len);
  CHECK (t, compress2 (one, &one_len, data, sizes[4], 6) == Z_OK);
  CHECK (t, out.n < one_len + one_len / 100);
  free (one);
  free (out.p);
  free (data);
}

/* The header is zlib's for deflateInit2 (..., 15 + 16, ...), as layers had
 * before blocks; the trailer is CRC-32 and ISIZE of the input. */
void
pgzip_header_and_trailer (struct test_ctx *t)
{
  static const unsigned char text[] = "a layer's bytes";
  for (int level = 1; level <= 9; level += 4)
    {
      struct buf out = { 0 };
      ib_error_t err = NULL;
      struct ib_pgzip *z = NULL;
      CHECK (t, ib_pgzip_new (level, 2, buf_sink, &out, &z, &err) == 0);
      CHECK (t, ib_pgzip_write (z, text, sizeof text, &err) == 0);
      CHECK (t, ib_pgzip_finish (z, &err) == 0);
      ib_pgzip_free (z);
      z_stream zs = { 0 };
      unsigned char zh[64];
      deflateInit2 (&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
      zs.next_in = (unsigned char *) text;
      zs.avail_in = sizeof text;
      zs.next_out = zh;
      zs.avail_out = sizeof zh;
      deflate (&zs, Z_FINISH);
      deflateEnd (&zs);
      CHECK (t, out.n > 18 && memcmp (out.p, zh, 10) == 0);
      uLong crc = crc32 (0, text, sizeof text);
      const unsigned char *tr = out.p + out.n - 8;
      CHECK (t, tr[0] == (crc & 0xff) && tr[1] == ((crc >> 8) & 0xff) && tr[2] == ((crc >> 16) & 0xff));
      CHECK (t, tr[3] == ((crc >> 24) & 0xff) && tr[4] == sizeof text && tr[5] == 0 && tr[6] == 0 && tr[7] == 0);
      free (out.p);
    }
}

/* A sink that fails: the error comes back from write or finish, and free
 * stops the workers (ASan: nothing leaks; no hang). */
void
pgzip_sink_failure_is_reported (struct test_ctx *t)
{
  size_t len = 6 * IB_PGZIP_BLOCK;
  unsigned char *data = mixed_input (len);
  for (int threads = 1; threads <= 4; threads += 3)
    {
      struct buf out = { .fail_after = 3 };
      ib_error_t err = NULL;
      struct ib_pgzip *z = NULL;
      CHECK (t, ib_pgzip_new (6, threads, buf_sink, &out, &z, &err) == 0);
      int r = ib_pgzip_write (z, data, len, &err);
      if (r == 0)
        r = ib_pgzip_finish (z, &err);
      CHECK (t, r < 0 && err && strstr (err->msg, "sink refused"));
      ib_error_release (&err);
      CHECK (t, ib_pgzip_write (z, data, 1, &err) < 0);
      ib_error_release (&err);
      ib_pgzip_free (z);
      free (out.p);
    }
  ib_error_t err = NULL;
  struct ib_pgzip *z = NULL;
  CHECK (t, ib_pgzip_new (6, 0, buf_sink, NULL, &z, &err) < 0 && err->class == IB_EUSAGE);
  ib_error_release (&err);
  free (data);
}
