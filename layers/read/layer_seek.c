#include "layers/read/layer_seek.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"
#include "layers/read/inflate_index.h"
#include "layers/read/layer_reader.h"

#define IN_CHUNK (256u << 10)
#define OUT_CHUNK (1u << 20)

struct ib_layer_seek
{
  int fd;
  char *path;
  uint64_t offset, length; /* the blob's bytes in the file */
  ib_digest digest;
  bool gzip;
  struct ib_inflate_index *index; /* NULL: every range inflates from the start */
  struct ib_gunzip *gz;           /* the inflater, standing at IN_NEXT - (IN_LEN - IN_POS), OUT_AT */
  uint64_t in_next, out_at;
  unsigned char *in, *out, *snap;
  size_t in_len, in_pos;
};

struct ib_layer_seek *
ib_layer_seek_open (struct ib_store *s, const struct ib_descriptor *blob)
{
  __attribute__ ((cleanup (ib_blob_loc_clear))) struct ib_blob_loc loc = { 0 };
  ib_error_t e = NULL;
  if (ib_store_locate_blob (s, &blob->digest, &loc, &e) < 0)
    {
      ib_error_release (&e);
      return NULL;
    }
  cleanup_close int fd = ib_blob_loc_open (&loc, &blob->digest, &e);
  ib_error_release (&e);
  uint64_t length = ib_blob_loc_length (&loc, fd);
  enum ib_blob_codec codec = ib_blob_codec_at (fd, loc.offset, length);
  if (fd < 0 || codec == IB_BLOB_ZSTD || blob->size != length)
    return NULL;
  struct ib_layer_seek *k = ib_xcalloc (1, sizeof (*k));
  k->fd = steal_fd (&fd);
  k->path = steal_pointer (&loc.path);
  k->offset = loc.offset;
  k->length = length;
  k->digest = blob->digest;
  k->gzip = codec == IB_BLOB_GZIP;
  if (k->gzip && ib_gunzip_snapshot_size () && ib_inflate_index_load (s, &blob->digest, length, &k->index, &e) < 0)
    ib_error_release (&e);
  k->in = ib_xmalloc (IN_CHUNK);
  k->out = ib_xmalloc (OUT_CHUNK);
  return k;
}

void
ib_layer_seek_free (struct ib_layer_seek *k)
{
  if (k == NULL)
    return;
  ib_gunzip_free (k->gz);
  ib_inflate_index_free (k->index);
  if (k->fd >= 0)
    close (k->fd);
  free (k->path);
  free (k->in);
  free (k->out);
  free (k->snap);
  free (k);
}

static int
read_plain (struct ib_layer_seek *k, uint64_t at, uint64_t len, int (*fn) (void *, const void *, size_t, ib_error_t *),
            void *data, ib_error_t *err)
{
  if (at > k->length || len > k->length - at)
    return ib_error (err, IB_EINTEGRITY, "layer %s: bytes %llu-%llu are past its end", k->digest.s,
                     (unsigned long long) at, (unsigned long long) (at + len));
  while (len > 0)
    {
      size_t want = len < OUT_CHUNK ? (size_t) len : OUT_CHUNK;
      ssize_t n = pread (k->fd, k->out, want, (off_t) (k->offset + at));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return n < 0 ? ib_error_errno (err, errno, IB_EENV, "read `%s`", k->path)
                     : ib_error (err, IB_EINTEGRITY, "layer %s is truncated", k->digest.s);
      if (fn (data, k->out, (size_t) n, err) < 0)
        return -1;
      at += (uint64_t) n;
      len -= (uint64_t) n;
    }
  return 0;
}

/* The inflater for a range from AT: the one there is when it stands at or
 * before AT with no checkpoint between, else a new one at the last
 * checkpoint at or before AT (the stream's start when none). */
static int
position (struct ib_layer_seek *k, uint64_t at, ib_error_t *err)
{
  size_t n = k->index ? ib_inflate_index_count (k->index) : 0, lo = 0, hi = n;
  while (lo < hi) /* the first checkpoint past AT */
    {
      size_t mid = lo + (hi - lo) / 2;
      if (ib_inflate_index_point (k->index, mid).out <= at)
        lo = mid + 1;
      else
        hi = mid;
    }
  struct ib_inflate_point p = lo ? ib_inflate_index_point (k->index, lo - 1) : (struct ib_inflate_point){ 0, 0 };
  if (k->gz && k->out_at <= at && k->out_at >= p.out)
    return 0;
  ib_gunzip_free (steal_pointer (&k->gz));
  k->in_len = k->in_pos = 0;
  if (lo == 0)
    {
      k->in_next = k->out_at = 0;
      return ib_gunzip_new (&k->gz, err);
    }
  if (k->snap == NULL)
    k->snap = ib_xmalloc (ib_gunzip_snapshot_size ());
  if (ib_inflate_index_snapshot (k->index, lo - 1, k->snap, err) < 0 || ib_gunzip_resume (k->snap, &k->gz, err) < 0)
    return ib_error_wrap (err, "layer %s: its inflate index", k->digest.s);
  k->in_next = p.in;
  k->out_at = p.out;
  return 0;
}

static int
fill (struct ib_layer_seek *k, ib_error_t *err)
{
  if (k->in_pos < k->in_len)
    return 0;
  uint64_t left = k->length - k->in_next;
  size_t want = left < IN_CHUNK ? (size_t) left : IN_CHUNK;
  ssize_t n;
  do
    n = want ? pread (k->fd, k->in, want, (off_t) (k->offset + k->in_next)) : 0;
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return ib_error_errno (err, errno, IB_EENV, "read `%s`", k->path);
  if (n == 0)
    return ib_error (err, IB_EINTEGRITY, "layer %s is truncated", k->digest.s);
  k->in_next += (uint64_t) n;
  k->in_len = (size_t) n;
  k->in_pos = 0;
  return 0;
}

int
ib_layer_seek_read (struct ib_layer_seek *k, uint64_t at, uint64_t len,
                    int (*fn) (void *, const void *, size_t, ib_error_t *), void *data, ib_error_t *err)
{
  if (!k->gzip)
    return read_plain (k, at, len, fn, data, err);
  if (position (k, at, err) < 0)
    return -1;
  uint64_t end = at + len;
  while (k->out_at < end)
    {
      if (fill (k, err) < 0)
        return -1;
      size_t used = 0, made = 0;
      bool member_end = false;
      /* Never past the range: the next range, often the next file a few
       * hundred bytes on, starts where this one ends. */
      size_t room = end - k->out_at < OUT_CHUNK ? (size_t) (end - k->out_at) : OUT_CHUNK;
      if (ib_gunzip_run (k->gz, k->in + k->in_pos, k->in_len - k->in_pos, &used, k->out, room, &made,
                         &member_end, err)
          < 0)
        return ib_error_wrap (err, "layer %s", k->digest.s);
      k->in_pos += used;
      if (used == 0 && made == 0 && !member_end)
        return ib_error (err, IB_EINTEGRITY, "layer %s: gzip data is corrupt (no progress)", k->digest.s);
      /* The part of [OUT_AT, OUT_AT + MADE) in the range. */
      uint64_t from = k->out_at > at ? k->out_at : at, to = k->out_at + made < end ? k->out_at + made : end;
      if (from < to && fn (data, k->out + (from - k->out_at), (size_t) (to - from), err) < 0)
        return -1;
      k->out_at += made;
    }
  return 0;
}
