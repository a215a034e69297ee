/* util/gunzip: gzip members back to back, checksums, pieces of any size,
 * whichever engine the build has (ISA-L or zlib): the same bytes out and
 * the same verdicts as zlib's own inflate. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/gunzip.h"
#include "tests/unit/test.h"

/* One gzip member of DATA, written by zlib, with NAME in its header (as
 * gzip(1) writes) when NAME is not NULL. */
static size_t
gzip_member (const unsigned char *data, size_t len, const char *name, unsigned char *out, size_t cap)
{
  z_stream z = { 0 };
  gz_header h = { 0 };
  deflateInit2 (&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (name)
    {
      h.name = (Bytef *) name;
      deflateSetHeader (&z, &h);
    }
  z.next_in = (Bytef *) data;
  z.avail_in = (uInt) len;
  z.next_out = out;
  z.avail_out = (uInt) cap;
  deflate (&z, Z_FINISH);
  size_t n = cap - z.avail_out;
  deflateEnd (&z);
  return n;
}

/* Inflate IN fed PIECE bytes at a time; the output in *OUT; how many
 * members ended in *MEMBERS; 0 or -1 with *ERR. */
static int
gunzip_all (const unsigned char *in, size_t len, size_t piece, unsigned char *out, size_t cap, size_t *out_len,
            int *members, ib_error_t *err)
{
  struct ib_gunzip *g = NULL;
  if (ib_gunzip_new (&g, err) < 0)
    return -1;
  size_t pos = 0, made_all = 0;
  int ret = 0, stuck = 0;
  *members = 0;
  while (ret == 0 && pos < len && stuck < 1000)
    {
      size_t give = len - pos < piece ? len - pos : piece, used = 0, made = 0;
      bool end = false;
      ret = ib_gunzip_run (g, in + pos, give, &used, out + made_all, cap - made_all, &made, &end, err);
      pos += used;
      made_all += made;
      *members += end;
      stuck = used || made || end ? 0 : stuck + 1;
    }
  ib_gunzip_free (g);
  *out_len = made_all;
  return ret;
}

void
gunzip_members_pieces_and_checks (struct test_ctx *t)
{
  enum { N = 300000 };
  unsigned char *data = malloc (N), *gz = malloc (2 * N + 1024), *out = malloc (2 * N);
  unsigned int x = 12345;
  for (size_t i = 0; i < N; i++)
    {
      x = x * 1103515245u + 12345u;
      data[i] = (unsigned char) ("aaaabcdefghijklmnop"[(x >> 16) % 19]);
    }
  size_t a = gzip_member (data, N, "layer.tar", gz, 2 * N + 1024);
  size_t b = gzip_member (data, N / 3, NULL, gz + a, 2 * N + 1024 - a);
  size_t out_len = 0;
  int members = 0;
  ib_error_t err = NULL;
  static const size_t pieces[] = { 1u << 20, 4096, 7, 1 };
  for (size_t i = 0; i < sizeof (pieces) / sizeof (pieces[0]); i++)
    {
      int r = gunzip_all (gz, a + b, pieces[i], out, 2 * N, &out_len, &members, &err);
      CHECK (t, r == 0 && members == 2 && out_len == N + N / 3);
      CHECK (t, r == 0 && memcmp (out, data, N) == 0 && memcmp (out + N, data, N / 3) == 0);
      ib_error_release (&err);
    }
  /* A wrong CRC-32 in the first member's trailer. */
  gz[a - 5] ^= 0x40;
  CHECK (t, gunzip_all (gz, a + b, 4096, out, 2 * N, &out_len, &members, &err) < 0);
  CHECK (t, err && err->class == IB_EINTEGRITY && strstr (err->msg, "gzip data is corrupt (incorrect data check)"));
  ib_error_release (&err);
  gz[a - 5] ^= 0x40;
  /* A wrong length (ISIZE). */
  gz[a - 1] ^= 0x01;
  CHECK (t, gunzip_all (gz, a + b, 4096, out, 2 * N, &out_len, &members, &err) < 0);
  CHECK (t, err && strstr (err->msg, "gzip data is corrupt"));
  ib_error_release (&err);
  gz[a - 1] ^= 0x01;
  /* Bytes after a member that do not start another.  (Fewer than a
   * header's ten may only be taken in: the layer reader calls a stream
   * whose last member did not end truncated.) */
  static const char junk[] = "not gzip: bytes after the member";
  memcpy (gz + a, junk, sizeof junk - 1);
  CHECK (t, gunzip_all (gz, a + sizeof junk - 1, 4096, out, 2 * N, &out_len, &members, &err) < 0);
  CHECK (t, err && strstr (err->msg, "gzip data is corrupt (incorrect header check)"));
  ib_error_release (&err);
  /* A damaged deflate body. */
  gz[a / 2] ^= 0xff;
  CHECK (t, gunzip_all (gz, a, 4096, out, 2 * N, &out_len, &members, &err) < 0);
  CHECK (t, err && strstr (err->msg, "gzip data is corrupt"));
  ib_error_release (&err);
  CHECK (t, strcmp (ib_gunzip_engine (), "isa-l") == 0 || strcmp (ib_gunzip_engine (), "zlib") == 0);
  free (data);
  free (gz);
  free (out);
}
