#include "gunzip.h"

#include <stdint.h>
#include <stdlib.h>

#ifdef IB_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#else
#include <zlib.h>
#endif

struct ib_gunzip
{
#ifdef IB_HAVE_ISAL
  struct inflate_state s; /* ~50 KiB: on the heap, never the stack */
#else
  z_stream z;
#endif
  bool at_member_start; /* the previous call ended a member */
};

#ifdef IB_HAVE_ISAL

static const char *
isal_why (int r)
{
  switch (r)
    {
    case ISAL_INVALID_BLOCK:
      return "invalid block";
    case ISAL_INVALID_SYMBOL:
      return "invalid symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER:
      return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD:
      return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "incorrect data check";
    default:
      return "inflate error";
    }
}

static void
member_start (struct ib_gunzip *g)
{
  isal_inflate_reset (&g->s);
  g->s.crc_flag = ISAL_GZIP; /* header parsed, CRC-32 and ISIZE checked */
}

int
ib_gunzip_new (struct ib_gunzip **out, ib_error_t *err)
{
  struct ib_gunzip *g = calloc (1, sizeof (*g));
  if (g == NULL)
    return ib_error (err, IB_EENV, "gunzip: out of memory");
  isal_inflate_init (&g->s);
  member_start (g);
  *out = g;
  return 0;
}

void
ib_gunzip_free (struct ib_gunzip *g)
{
  free (g);
}

int
ib_gunzip_run (struct ib_gunzip *g, const unsigned char *in, size_t in_len, size_t *in_used, unsigned char *out,
               size_t out_len, size_t *out_made, bool *member_end, ib_error_t *err)
{
  if (g->at_member_start)
    member_start (g);
  g->at_member_start = false;
  g->s.next_in = (uint8_t *) in;
  g->s.avail_in = (uint32_t) (in_len > UINT32_MAX ? UINT32_MAX : in_len);
  g->s.next_out = out;
  g->s.avail_out = (uint32_t) (out_len > UINT32_MAX ? UINT32_MAX : out_len);
  int r = isal_inflate (&g->s);
  if (r < 0)
    return ib_error (err, IB_EINTEGRITY, "gzip data is corrupt (%s)", isal_why (r));
  /* At a member's end igzip gives back the input it had read ahead past
   * the trailer, so avail_in counts the next member's bytes. */
  *in_used = (size_t) (g->s.next_in - in);
  *out_made = (size_t) (g->s.next_out - out);
  *member_end = g->s.block_state == ISAL_BLOCK_FINISH;
  g->at_member_start = *member_end;
  return 0;
}

const char *
ib_gunzip_engine (void)
{
  return "isa-l";
}

#else /* zlib */

int
ib_gunzip_new (struct ib_gunzip **out, ib_error_t *err)
{
  struct ib_gunzip *g = calloc (1, sizeof (*g));
  if (g == NULL)
    return ib_error (err, IB_EENV, "gunzip: out of memory");
  if (inflateInit2 (&g->z, 15 + 16) != Z_OK)
    {
      free (g);
      return ib_error (err, IB_EENV, "inflateInit2 failed");
    }
  *out = g;
  return 0;
}

void
ib_gunzip_free (struct ib_gunzip *g)
{
  if (g)
    inflateEnd (&g->z);
  free (g);
}

int
ib_gunzip_run (struct ib_gunzip *g, const unsigned char *in, size_t in_len, size_t *in_used, unsigned char *out,
               size_t out_len, size_t *out_made, bool *member_end, ib_error_t *err)
{
  if (g->at_member_start && inflateReset (&g->z) != Z_OK)
    return ib_error (err, IB_EINTEGRITY, "gzip: inflate reset");
  g->at_member_start = false;
  g->z.next_in = (unsigned char *) in;
  g->z.avail_in = (uInt) (in_len > UINT32_MAX ? UINT32_MAX : in_len);
  g->z.next_out = out;
  g->z.avail_out = (uInt) (out_len > UINT32_MAX ? UINT32_MAX : out_len);
  int z = inflate (&g->z, Z_NO_FLUSH);
  if (z != Z_OK && z != Z_STREAM_END && !(z == Z_BUF_ERROR && g->z.avail_in == 0))
    return ib_error (err, IB_EINTEGRITY, "gzip data is corrupt (%s)", g->z.msg ? g->z.msg : "inflate error");
  *in_used = (size_t) (g->z.next_in - in);
  *out_made = (size_t) (g->z.next_out - out);
  *member_end = z == Z_STREAM_END;
  g->at_member_start = *member_end;
  return 0;
}

const char *
ib_gunzip_engine (void)
{
  return "zlib";
}

#endif
