#include "kernels/payload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

#define IN_CHUNK (1u << 20)
#define OUT_CHUNK (1u << 20)
#define LZ4_HISTORY 65536u  /* the largest offset an LZ4 match can have */

/* A buffer for N bytes of a stream: its chunk, or less for a small
 * payload (most entries are a few KiB, and a 1 MiB buffer is an mmap and
 * its page faults, each time), never under 4 KiB. */
static size_t
chunk_for (uint64_t n, size_t chunk)
{
  return n + 1 < 4096 ? 4096 : n + 1 < chunk ? (size_t) n + 1 : chunk;
}
#define ZSTD_WINDOW_LOG 25  /* 32 MiB: fatbinary's frames use 2 MiB */
#define MAX_COLLECT (48ull << 20)

/* ---- buffers shared by one inspection's streams ------------------------- */

struct ib_payload_scratch
{
  unsigned char *in, *out, *lz4; /* IN_CHUNK, OUT_CHUNK, LZ4_HISTORY + OUT_CHUNK */
  ZSTD_DCtx *dc;
};

struct ib_payload_scratch *
ib_payload_scratch_new (void)
{
  return ib_xcalloc (1, sizeof (struct ib_payload_scratch));
}

void
ib_payload_scratch_free (struct ib_payload_scratch *s)
{
  if (s == NULL)
    return;
  free (s->in);
  free (s->out);
  free (s->lz4);
  ZSTD_freeDCtx (s->dc);
  free (s);
}

/* A buffer of *LEN bytes for a stream: the scratch's own of FULL bytes
 * (*LEN set to FULL), or one of its own to free in OWN. */
static unsigned char *
stream_buffer (unsigned char **kept, size_t full, size_t *len, unsigned char **own)
{
  if (kept == NULL)
    return *own = ib_xmalloc (*len);
  if (*kept == NULL)
    *kept = ib_xmalloc (full);
  *len = full;
  return *kept;
}

/* ---- the stored bytes, a chunk at a time --------------------------------- */

struct in_reader
{
  const struct ib_payload *pl;
  unsigned char *buf;
  size_t len, pos;
  uint64_t done; /* stored bytes read so far */
};

static int
in_fill (struct in_reader *r, ib_error_t *err)
{
  uint64_t left = r->pl->stored - r->done;
  size_t want = left < IN_CHUNK ? (size_t) left : IN_CHUNK;
  size_t got = 0;
  while (got < want)
    {
      ssize_t n = pread (r->pl->fd, r->buf + got, want - got, (off_t) (r->pl->off + r->done + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ib_error_errno (err, errno, IB_EENV, "read `%s`", r->pl->what);
      if (n == 0)
        return ib_error (err, IB_EKERNELS, "`%s`: GPU code at offset %llu is cut short", r->pl->what,
                         (unsigned long long) r->pl->off);
      got += (size_t) n;
    }
  r->done += got;
  r->len = got;
  r->pos = 0;
  return 0;
}

/* The next stored byte; -1 at the end (*ERR untouched) or on error. */
static int
in_byte (struct in_reader *r, ib_error_t *err)
{
  if (r->pos == r->len)
    {
      if (r->done == r->pl->stored)
        return -1;
      if (in_fill (r, err) < 0)
        return -2;
    }
  return r->buf[r->pos++];
}

/* ---- plain --------------------------------------------------------------- */

static int
stream_plain (struct in_reader *in, ib_payload_fn fn, void *data, ib_error_t *err)
{
  while (in->done < in->pl->stored)
    {
      uint64_t at = in->done;
      if (in_fill (in, err) < 0)
        return -1;
      int r = fn (data, in->buf, in->len, at, err);
      if (r != 0)
        return r < 0 ? -1 : 0;
    }
  return 0;
}

/* ---- zstd ---------------------------------------------------------------- */

static void
free_dctx (ZSTD_DCtx **d)
{
  ZSTD_freeDCtx (*d);
}

static int
stream_zstd (struct in_reader *in, ib_payload_fn fn, void *data, ib_error_t *err)
{
  const struct ib_payload *pl = in->pl;
  struct ib_payload_scratch *sc = pl->scratch;
  __attribute__ ((cleanup (free_dctx))) ZSTD_DCtx *own_dc = NULL;
  ZSTD_DCtx *dc = sc && sc->dc ? sc->dc : ZSTD_createDCtx ();
  if (sc)
    sc->dc = dc;
  else
    own_dc = dc;
  /* A context kept from another stream starts afresh, its window kept. */
  ZSTD_DCtx_reset (dc, ZSTD_reset_session_and_parameters);
  ZSTD_DCtx_setParameter (dc, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG);
  size_t out_len = chunk_for (pl->size, OUT_CHUNK);
  cleanup_free unsigned char *own_out = NULL;
  unsigned char *out = stream_buffer (sc ? &sc->out : NULL, OUT_CHUNK, &out_len, &own_out);
  uint64_t produced = 0;
  size_t last = 1;
  for (;;)
    {
      if (in->pos == in->len && in->done < pl->stored && in_fill (in, err) < 0)
        return -1;
      ZSTD_inBuffer src = { in->buf, in->len, in->pos };
      ZSTD_outBuffer dst = { out, out_len, 0 };
      last = ZSTD_decompressStream (dc, &dst, &src);
      in->pos = src.pos;
      if (ZSTD_isError (last))
        return ib_error (err, IB_EKERNELS, "`%s`: zstd entry at offset %llu does not decompress: %s", pl->what,
                         (unsigned long long) pl->off, ZSTD_getErrorName (last));
      if (dst.pos > pl->size - produced)
        break;
      int r = dst.pos ? fn (data, out, dst.pos, produced, err) : 0;
      produced += dst.pos;
      if (r != 0)
        return r < 0 ? -1 : 0;
      /* A full output buffer may leave more to flush without more input;
       * a frame that is complete (0) or cut short ends it. */
      bool all_in = in->pos == in->len && in->done == pl->stored;
      if (all_in && (last == 0 || dst.pos < out_len))
        break;
    }
  if (produced != pl->size || last != 0)
    return ib_error (err, IB_EKERNELS, "`%s`: zstd entry at offset %llu does not give the %llu bytes its header says",
                     pl->what, (unsigned long long) pl->off, (unsigned long long) pl->size);
  return 0;
}

/* ---- LZ4 (a raw block, decoded with a sliding window) -------------------- */

struct lz4_out
{
  unsigned char *w; /* LZ4_HISTORY of history, then ROOM new bytes */
  size_t room;
  size_t pos, flushed;
  uint64_t base; /* payload offset of w[0] */
  uint64_t total, size;
  ib_payload_fn fn;
  void *data;
  bool stopped;
};

static int
lz4_flush (struct lz4_out *o, ib_error_t *err)
{
  if (o->pos > o->flushed && !o->stopped)
    {
      int r = o->fn (o->data, o->w + o->flushed, o->pos - o->flushed, o->base + o->flushed, err);
      if (r < 0)
        return -1;
      o->stopped = r > 0;
    }
  if (o->pos > LZ4_HISTORY)
    {
      memmove (o->w, o->w + o->pos - LZ4_HISTORY, LZ4_HISTORY);
      o->base += o->pos - LZ4_HISTORY;
      o->pos = LZ4_HISTORY;
    }
  o->flushed = o->pos;
  return 0;
}

/* Room for at least one byte; false with *ERR set on error. */
static int
lz4_room (struct lz4_out *o, ib_error_t *err)
{
  if (o->pos < LZ4_HISTORY + o->room)
    return 0;
  return lz4_flush (o, err);
}

static int
lz4_length (struct in_reader *in, size_t *len, ib_error_t *err)
{
  int b;
  do
    {
      if ((b = in_byte (in, err)) < 0)
        return -1;
      *len += (size_t) b;
    }
  while (b == 255);
  return 0;
}

/* Room for at least one byte, and how much there is before the window
 * must be flushed; 0 with *ERR set on error. */
static size_t
lz4_free (struct lz4_out *o, ib_error_t *err)
{
  if (lz4_room (o, err) < 0)
    return 0;
  return LZ4_HISTORY + o->room - o->pos;
}

/* LIT literal bytes, copied a run at a time (as much as the input chunk
 * holds and the window has room for): a byte at a time, the LZ4 entries of
 * torch 2.6's libraries (1.2 GB) were 30% of a cold build's CPU. */
static int
lz4_literals (struct in_reader *in, struct lz4_out *o, size_t lit, ib_error_t *err)
{
  while (lit > 0)
    {
      if (in->pos == in->len && (in->done == in->pl->stored || in_fill (in, err) < 0))
        return -1;
      size_t room = lz4_free (o, err);
      if (room == 0)
        return -1;
      size_t k = in->len - in->pos;
      k = k < lit ? k : lit;
      k = k < room ? k : room;
      memcpy (o->w + o->pos, in->buf + in->pos, k);
      in->pos += k;
      o->pos += k;
      lit -= k;
    }
  return 0;
}

/* A match of LEN bytes OFFSET back.  The bytes it repeats are final, so
 * each copy takes as many as lie between the source and the end: a run
 * of one repeated byte doubles at each copy, as a byte-wise copy would
 * write it. */
static int
lz4_match (struct lz4_out *o, size_t offset, size_t len, ib_error_t *err)
{
  while (len > 0)
    {
      size_t room = lz4_free (o, err);
      if (room == 0)
        return -1;
      size_t k = len < room ? len : room, src = o->pos - offset;
      while (k > 0)
        {
          size_t n = o->pos - src < k ? o->pos - src : k;
          memcpy (o->w + o->pos, o->w + src, n);
          o->pos += n;
          len -= n;
          k -= n;
        }
    }
  return 0;
}

/* The common sequence, decoded without a call per byte or piece: at
 * most 14 literals and a match of at most 18 bytes, with 32 bytes of
 * input at hand (so it is not the last sequence, which has no match) and
 * 64 of room in the window.  Copies of 16 bytes may write past the
 * sequence's end, inside the window's room, where the next sequence
 * writes.  False, nothing taken, for any other: lz4_sequence decodes it,
 * and says what is wrong with one that is. */
static bool
lz4_short_sequence (struct in_reader *in, struct lz4_out *o)
{
  const unsigned char *ip = in->buf + in->pos;
  if (in->len - in->pos < 32 || LZ4_HISTORY + o->room - o->pos < 64)
    return false;
  size_t lit = ip[0] >> 4, len = (size_t) (ip[0] & 15) + 4;
  size_t offset = (size_t) ip[1 + lit] | (size_t) ip[2 + lit] << 8;
  if (lit == 15 || len == 19 || offset < 16 || offset > o->total + lit || o->total + lit + len > o->size)
    return false;
  unsigned char *op = o->w + o->pos;
  memcpy (op, ip + 1, 16);
  op += lit;
  memcpy (op, op - offset, 16);
  memcpy (op + 16, op - offset + 16, 16);
  in->pos += 3 + lit;
  o->pos += lit + len;
  o->total += lit + len;
  return true;
}

static int
lz4_sequence (struct in_reader *in, struct lz4_out *o, int token, ib_error_t *err)
{
  size_t lit = (size_t) token >> 4;
  if (lit == 15 && lz4_length (in, &lit, err) < 0)
    return -1;
  if (o->total + lit > o->size || lz4_literals (in, o, lit, err) < 0)
    return -1;
  o->total += lit;
  if (in->pos == in->len && in->done == in->pl->stored)
    return 1; /* the last sequence has literals only */
  int lo = in_byte (in, err), hi = lo < 0 ? -1 : in_byte (in, err);
  if (hi < 0)
    return -1;
  size_t offset = (size_t) lo | (size_t) hi << 8, len = ((size_t) token & 15) + 4;
  if (len == 19 && lz4_length (in, &len, err) < 0)
    return -1;
  if (offset == 0 || offset > o->total || o->total + len > o->size)
    return -1;
  if (lz4_match (o, offset, len, err) < 0)
    return -1;
  o->total += len;
  return 0;
}

static int
stream_lz4 (struct in_reader *in, ib_payload_fn fn, void *data, ib_error_t *err)
{
  size_t room = chunk_for (in->pl->size, OUT_CHUNK), len = LZ4_HISTORY + room;
  struct ib_payload_scratch *sc = in->pl->scratch;
  cleanup_free unsigned char *own = NULL;
  unsigned char *w = stream_buffer (sc ? &sc->lz4 : NULL, LZ4_HISTORY + OUT_CHUNK, &len, &own);
  struct lz4_out o = { w, len - LZ4_HISTORY, 0, 0, 0, 0, in->pl->size, fn, data, false };
  for (;;)
    {
      if (lz4_short_sequence (in, &o))
        continue;
      int token = in_byte (in, err);
      if (token == -1)
        break;
      int r = token < 0 ? -1 : lz4_sequence (in, &o, token, err);
      if (r < 0 || o.total > o.size)
        {
          if (err && *err)
            return -1;
          return ib_error (err, IB_EKERNELS, "`%s`: lz4 entry at offset %llu does not decompress", in->pl->what,
                           (unsigned long long) in->pl->off);
        }
      if (r == 1)
        break;
      if (o.stopped)
        return 0;
    }
  if (lz4_flush (&o, err) < 0)
    return -1;
  if (o.total != o.size && !o.stopped)
    return ib_error (err, IB_EKERNELS, "`%s`: lz4 entry at offset %llu gives %llu bytes, its header says %llu",
                     in->pl->what, (unsigned long long) in->pl->off, (unsigned long long) o.total,
                     (unsigned long long) o.size);
  return 0;
}

int
ib_payload_stream (const struct ib_payload *pl, ib_payload_fn fn, void *data, ib_error_t *err)
{
  size_t len = chunk_for (pl->stored, IN_CHUNK);
  cleanup_free unsigned char *own = NULL;
  unsigned char *buf = stream_buffer (pl->scratch ? &pl->scratch->in : NULL, IN_CHUNK, &len, &own);
  struct in_reader in = { pl, buf, 0, 0, 0 };
  switch (pl->codec)
    {
    case IB_PAYLOAD_ZSTD:
      return stream_zstd (&in, fn, data, err);
    case IB_PAYLOAD_LZ4:
      return stream_lz4 (&in, fn, data, err);
    default:
      return stream_plain (&in, fn, data, err);
    }
}

/* ---- collecting ranges --------------------------------------------------- */

struct collector
{
  struct ib_payload_range *r;
  size_t n, left;
  uint64_t *filled;
};

static int
collect_piece (void *data, const unsigned char *p, size_t n, uint64_t off, ib_error_t *err)
{
  (void) err;
  struct collector *c = data;
  for (size_t i = 0; i < c->n; i++)
    {
      struct ib_payload_range *r = &c->r[i];
      uint64_t lo = off > r->off ? off : r->off;
      uint64_t hi = off + n < r->off + r->len ? off + n : r->off + r->len;
      if (lo >= hi)
        continue;
      memcpy (r->buf + (lo - r->off), p + (lo - off), hi - lo);
      c->filled[i] += hi - lo;
      if (c->filled[i] == r->len)
        c->left--;
    }
  return c->left == 0;
}

int
ib_payload_collect (const struct ib_payload *pl, struct ib_payload_range *r, size_t n, ib_error_t *err)
{
  uint64_t total = 0;
  size_t left = 0;
  for (size_t i = 0; i < n; i++)
    {
      if (r[i].off > pl->size || r[i].len > pl->size - r[i].off)
        return ib_error (err, IB_EKERNELS, "`%s`: cubin at offset %llu points past its own end", pl->what,
                         (unsigned long long) pl->off);
      total += r[i].len;
      left += r[i].len > 0;
    }
  if (total > MAX_COLLECT)
    return ib_error (err, IB_EKERNELS, "`%s`: cubin at offset %llu has %llu bytes of tables, more than %llu",
                     pl->what, (unsigned long long) pl->off, (unsigned long long) total,
                     (unsigned long long) MAX_COLLECT);
  for (size_t i = 0; i < n; i++)
    r[i].buf = ib_xmalloc (r[i].len ? r[i].len : 1);
  cleanup_free uint64_t *filled = ib_xcalloc (n ? n : 1, sizeof (*filled));
  struct collector c = { r, n, left, filled };
  if (left == 0)
    return 0;
  if (ib_payload_stream (pl, collect_piece, &c, err) < 0)
    return -1;
  if (c.left)
    return ib_error (err, IB_EKERNELS, "`%s`: GPU code at offset %llu ends before its tables", pl->what,
                     (unsigned long long) pl->off);
  return 0;
}
