/* The kernels module's parts that nvcc output cannot reach in the
 * integration tests: streaming payloads larger than the decoders' buffers. */
#include <fcntl.h>
#include <lz4.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../../kernels/payload.h"
#include "../../util/fsutil.h"
#include "test.h"

/* 5 MiB that compress: random literals and copies of 4..67 bytes from up
 * to 65,000 bytes back, some overlapping themselves (distance < length). */
static unsigned char *
sample (size_t n)
{
  unsigned char *p = malloc (n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n;)
    {
      x = x * 1103515245u + 12345u;
      size_t len = 4 + (x >> 10) % 64, dist = 1 + (x >> 3) % 65000;
      if (i > dist && (x >> 28) < 12)
        for (size_t k = 0; k < len && i < n; k++, i++)
          p[i] = p[i - dist];
      else
        p[i++] = (unsigned char) (x >> 16);
    }
  return p;
}

struct sink
{
  const unsigned char *want;
  uint64_t seen;
  int bad;
};

static int
check_piece (void *data, const unsigned char *p, size_t n, uint64_t off, ib_error_t *err)
{
  (void) err;
  struct sink *s = data;
  if (off != s->seen || memcmp (p, s->want + off, n) != 0)
    s->bad++;
  s->seen += n;
  return 0;
}

static int
payload_file (const void *bytes, size_t n)
{
  char path[4200];
  snprintf (path, sizeof (path), "%s/payload", test_tmpdir ());
  int fd = open (path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (write (fd, "HEAD", 4) != 4 || write (fd, bytes, n) != (ssize_t) n)
    return -1;
  return fd;
}

void
payload_streams_lz4_zstd_and_plain (struct test_ctx *t)
{
  size_t n = 5u << 20;
  unsigned char *plain = sample (n);
  int bound = LZ4_compressBound ((int) n);
  char *lz = malloc ((size_t) bound);
  int lz_n = LZ4_compress_default ((const char *) plain, lz, (int) n, bound);
  size_t zb = ZSTD_compressBound (n);
  unsigned char *zs = malloc (zb);
  size_t zs_n = ZSTD_compress (zs, zb, plain, n, 3);
  CHECK (t, lz_n > 0 && lz_n < (int) n && !ZSTD_isError (zs_n));
  struct
  {
    enum ib_payload_codec codec;
    const void *bytes;
    size_t len;
  } cases[] = { { IB_PAYLOAD_LZ4, lz, (size_t) lz_n }, { IB_PAYLOAD_ZSTD, zs, zs_n }, { IB_PAYLOAD_PLAIN, plain, n } };
  for (size_t c = 0; c < 3; c++)
    {
      int fd = payload_file (cases[c].bytes, cases[c].len);
      struct ib_payload pl = { fd, "payload", 4, cases[c].len, n, cases[c].codec };
      struct sink s = { plain, 0, 0 };
      ib_error_t err = NULL;
      CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) == 0);
      if (err)
        fprintf (stderr, "  codec %d: %s\n", (int) cases[c].codec, err->msg);
      ib_error_release (&err);
      CHECK (t, s.bad == 0 && s.seen == n);
      /* Ranges far apart, one of them at the very end. */
      struct ib_payload_range r[2] = { { 100, 10, NULL }, { n - 70000, 70000, NULL } };
      CHECK (t, ib_payload_collect (&pl, r, 2, &err) == 0);
      CHECK (t, r[0].buf && memcmp (r[0].buf, plain + 100, 10) == 0);
      CHECK (t, r[1].buf && memcmp (r[1].buf, plain + n - 70000, 70000) == 0);
      free (r[0].buf);
      free (r[1].buf);
      /* A header that claims more than the stream gives is an error. */
      if (cases[c].codec != IB_PAYLOAD_PLAIN)
        {
          pl.size = n + 1;
          s.seen = 0;
          CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) < 0);
          CHECK (t, err && strstr (err->msg, "offset 4"));
          ib_error_release (&err);
        }
      /* Damage in the middle: an error or other bytes, never a crash or
       * a write out of bounds (the ASan build runs this). */
      if (cases[c].codec == IB_PAYLOAD_LZ4)
        {
          unsigned char junk[64];
          memset (junk, 0xff, sizeof (junk));
          CHECK (t, pwrite (fd, junk, sizeof (junk), 4 + (off_t) cases[c].len / 2) == sizeof (junk));
          pl.size = n;
          s.seen = 0;
          int r = ib_payload_stream (&pl, check_piece, &s, &err);
          CHECK (t, r < 0 || s.bad > 0);
          ib_error_release (&err);
        }
      close (fd);
    }
  free (plain);
  free (lz);
  free (zs);
}
