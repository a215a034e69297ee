#include "util/gunzip.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef IB_HAVE_ISAL
#include <isa-l.h>
#include <isa-l/igzip_lib.h>
#include <string.h>
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

#define HIST ISAL_DEF_HIST_SIZE

/* A snapshot is the state up to its output buffer's first HIST bytes, the
 * history: the rest of that buffer, the state's last member, is always
 * empty in a normalized state (38% of its size). */
#define SNAP (offsetof (struct inflate_state, tmp_out_buffer) + HIST)

size_t
ib_gunzip_snapshot_size (void)
{
  return SNAP;
}

const char *
ib_gunzip_snapshot_key (void)
{
#define IB_STR2(x) #x
#define IB_STR(x) IB_STR2 (x)
  /* The state's layout is ISA-L's own: a snapshot is read back only by
   * the version and struct size that wrote it. */
  return "isa-l-" IB_STR (ISAL_MAJOR_VERSION) "." IB_STR (ISAL_MINOR_VERSION) "." IB_STR (ISAL_PATCH_VERSION);
}

/* Inside a member, between whole steps of the decoder: a block to start, a
 * header half read, or a block's data. */
static bool
mid_member (const struct inflate_state *s)
{
  return s->wrapper_flag && s->crc_flag == ISAL_GZIP
         && (s->block_state == ISAL_BLOCK_NEW_HDR || s->block_state == ISAL_BLOCK_HDR
             || s->block_state == ISAL_BLOCK_TYPE0 || s->block_state == ISAL_BLOCK_CODED)
         && s->read_in_length >= 0 && s->read_in_length <= 64 && s->tmp_in_size >= 0
         && s->tmp_in_size <= ISAL_DEF_MAX_HDR_SIZE && s->hist_bits <= ISAL_DEF_MAX_HIST_BITS
         && s->write_overflow_len == 0 && s->copy_overflow_length == 0;
}

/* S in its normal form into N (both of ISA-L's size): what the inflater
 * holds and nothing else.  The history is the last HIST bytes of the
 * output buffer's valid part (igzip keeps it there between calls). */
static void
normalize (const struct inflate_state *s, struct inflate_state *n)
{
  memcpy (n, s, sizeof (*n));
  n->next_in = NULL;
  n->avail_in = 0;
  n->next_out = NULL;
  n->avail_out = 0;
  if (n->read_in_length < 64)
    n->read_in &= (UINT64_C (1) << n->read_in_length) - 1;
  memset (n->tmp_in_buffer + n->tmp_in_size, 0, sizeof (n->tmp_in_buffer) - (size_t) n->tmp_in_size);
  memset (n->tmp_out_buffer, 0, sizeof (n->tmp_out_buffer));
  memcpy (n->tmp_out_buffer, s->tmp_out_buffer + s->tmp_out_valid - HIST, HIST);
  n->tmp_out_valid = HIST;
  n->tmp_out_processed = HIST;
}

/* Every byte delivered, the whole history in the buffer, nothing pending. */
static bool
at_checkpoint (const struct inflate_state *s)
{
  return mid_member (s) && s->avail_in == 0 && s->tmp_out_valid == s->tmp_out_processed && s->tmp_out_valid >= HIST
         && s->tmp_out_valid <= (int32_t) sizeof (s->tmp_out_buffer);
}

bool
ib_gunzip_snapshot (const struct ib_gunzip *g, void *snap)
{
  if (g->at_member_start || !at_checkpoint (&g->s) || g->s.avail_out == 0)
    return false;
  struct inflate_state *n = malloc (sizeof (*n));
  if (n == NULL)
    return false;
  normalize (&g->s, n);
  memcpy (snap, n, SNAP);
  free (n);
  return true;
}

int
ib_gunzip_resume (const void *snap, struct ib_gunzip **out, ib_error_t *err)
{
  struct ib_gunzip *g = calloc (1, sizeof (*g));
  if (g == NULL)
    return ib_error (err, IB_EENV, "gunzip: out of memory");
  memcpy (&g->s, snap, SNAP);
  if (!at_checkpoint (&g->s) || g->s.tmp_out_valid != HIST || g->s.next_in || g->s.next_out)
    {
      free (g);
      return ib_error (err, IB_EINTEGRITY, "gzip checkpoint is not one this build resumes from");
    }
  *out = g;
  return 0;
}

bool
ib_gunzip_at (const struct ib_gunzip *g, const void *snap)
{
  if (g->at_member_start || !at_checkpoint (&g->s))
    return false;
  struct inflate_state *n = malloc (sizeof (*n));
  if (n == NULL)
    return false;
  normalize (&g->s, n);
  bool same = memcmp (n, snap, SNAP) == 0;
  free (n);
  return same;
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

/* zlib's state is private to it: no checkpoints. */
size_t
ib_gunzip_snapshot_size (void)
{
  return 0;
}

const char *
ib_gunzip_snapshot_key (void)
{
  return NULL;
}

bool
ib_gunzip_snapshot (const struct ib_gunzip *g, void *snap)
{
  (void) g;
  (void) snap;
  return false;
}

int
ib_gunzip_resume (const void *snap, struct ib_gunzip **out, ib_error_t *err)
{
  (void) snap;
  (void) out;
  return ib_error (err, IB_EENV, "gzip checkpoints need ISA-L");
}

bool
ib_gunzip_at (const struct ib_gunzip *g, const void *snap)
{
  (void) g;
  (void) snap;
  return false;
}

#endif
