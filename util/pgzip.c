#include "util/pgzip.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "util/cpus.h"
#include "util/fsutil.h"

/* deflate's window: a block's matches reach this far into the one before. */
#define DICT (32u << 10)

/* One block's life: filled by the caller (FREE), deflated by a worker
 * (READY, BUSY), written out in order by the caller (DONE), FREE again. */
enum slot_state
{
  SLOT_FREE,
  SLOT_READY,
  SLOT_BUSY,
  SLOT_DONE,
};

struct slot
{
  unsigned char *in;
  size_t in_len;
  unsigned char *dict; /* the last DICT bytes of the input before this block */
  size_t dict_len;
  unsigned char *out;
  size_t out_len, out_cap;
  uLong crc; /* of IN alone; combined in order when written out */
  bool last;
  bool failed;
  enum slot_state state;
};

struct worker
{
  struct ib_pgzip *z;
  z_stream zs;
  bool zs_ready;
  bool started;
  pthread_t thread;
};

struct ib_pgzip
{
  int level;
  ib_pgzip_sink_fn sink;
  void *data;
  struct slot *slots; /* a ring: block k lives in slot k % n_slots */
  size_t n_slots;
  size_t head; /* the oldest block not yet written out */
  size_t cur;  /* the block being filled */
  size_t in_flight;
  struct worker *workers;
  int n_workers; /* 1 with threads = 1: its stream deflates inline, no thread */
  bool threaded;
  pthread_mutex_t mu;
  pthread_cond_t ready, done;
  bool stop;
  uLong crc;
  uint64_t total;
  bool finished, failed;
};

/* Deflate S on ZS: the same bytes for the same block, dictionary and level
 * whichever stream or thread does it (deflateReset restores a fresh
 * stream's state). */
static int
deflate_block (z_stream *zs, struct slot *s)
{
  if (deflateReset (zs) != Z_OK)
    return -1;
  if (s->dict_len && deflateSetDictionary (zs, s->dict, (uInt) s->dict_len) != Z_OK)
    return -1;
  s->crc = crc32 (0, s->in, (uInt) s->in_len);
  s->out_len = 0;
  zs->next_in = s->in;
  zs->avail_in = (uInt) s->in_len;
  int flush = s->last ? Z_FINISH : Z_SYNC_FLUSH;
  for (;;)
    {
      if (s->out_cap - s->out_len < 64)
        {
          s->out_cap *= 2;
          s->out = ib_xrealloc (s->out, s->out_cap);
        }
      zs->next_out = s->out + s->out_len;
      zs->avail_out = (uInt) (s->out_cap - s->out_len);
      int r = deflate (zs, flush);
      s->out_len = s->out_cap - zs->avail_out;
      if (r == Z_STREAM_ERROR)
        return -1;
      /* A flush is complete when deflate left output space unused. */
      if (s->last ? r == Z_STREAM_END : zs->avail_out != 0)
        return 0;
    }
}

/* The oldest READY block, so blocks finish about in the order they are
 * written out; which worker takes which does not change the bytes. */
static struct slot *
pick_ready (struct ib_pgzip *z)
{
  for (size_t i = 0; i < z->n_slots; i++)
    {
      struct slot *s = &z->slots[(z->head + i) % z->n_slots];
      if (s->state == SLOT_READY)
        return s;
    }
  return NULL;
}

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  struct ib_pgzip *z = w->z;
  pthread_mutex_lock (&z->mu);
  for (;;)
    {
      struct slot *s = NULL;
      while (!z->stop && (s = pick_ready (z)) == NULL)
        pthread_cond_wait (&z->ready, &z->mu);
      if (z->stop)
        break;
      s->state = SLOT_BUSY;
      pthread_mutex_unlock (&z->mu);
      bool failed = deflate_block (&w->zs, s) < 0;
      pthread_mutex_lock (&z->mu);
      s->failed = failed;
      s->state = SLOT_DONE;
      pthread_cond_broadcast (&z->done);
    }
  pthread_mutex_unlock (&z->mu);
  return NULL;
}

/* Hand the block being filled to the workers (or deflate it here). */
static void
submit (struct ib_pgzip *z, bool last)
{
  struct slot *s = &z->slots[z->cur];
  s->last = last;
  z->in_flight++;
  if (!z->threaded)
    {
      s->failed = deflate_block (&z->workers[0].zs, s) < 0;
      s->state = SLOT_DONE;
      return;
    }
  pthread_mutex_lock (&z->mu);
  s->state = SLOT_READY;
  pthread_cond_signal (&z->ready);
  pthread_mutex_unlock (&z->mu);
}

/* Wait for the oldest block and pass its bytes to the sink. */
static int
drain_one (struct ib_pgzip *z, ib_error_t *err)
{
  struct slot *s = &z->slots[z->head];
  pthread_mutex_lock (&z->mu);
  while (s->state != SLOT_DONE)
    pthread_cond_wait (&z->done, &z->mu);
  /* Under the lock: the workers read every slot's state, and the head,
   * to pick one (ThreadSanitizer found the head written outside it). */
  s->state = SLOT_FREE;
  z->head = (z->head + 1) % z->n_slots;
  pthread_mutex_unlock (&z->mu);
  z->in_flight--;
  if (s->failed)
    return ib_error (err, IB_EENV, "deflate failed");
  z->crc = crc32_combine (z->crc, s->crc, (z_off_t) s->in_len);
  z->total += s->in_len;
  return z->sink (z->data, s->out, s->out_len, err);
}

/* Submit the full block being filled and start the next one, primed with
 * this one's last DICT bytes.  The next slot, when still in flight, is the
 * oldest: written out first, which bounds the memory. */
static int
advance (struct ib_pgzip *z, ib_error_t *err)
{
  struct slot *s = &z->slots[z->cur];
  submit (z, false);
  size_t next = (z->cur + 1) % z->n_slots;
  /* Only the caller counts blocks in flight: no lock needed to read it. */
  while (z->in_flight == z->n_slots)
    if (drain_one (z, err) < 0)
      return -1;
  struct slot *n = &z->slots[next];
  size_t keep = s->in_len < DICT ? s->in_len : DICT;
  memcpy (n->dict, s->in + s->in_len - keep, keep);
  n->dict_len = keep;
  n->in_len = 0;
  z->cur = next;
  return 0;
}

int
ib_pgzip_write (struct ib_pgzip *z, const void *buf, size_t len, ib_error_t *err)
{
  const unsigned char *p = buf;
  if (z->failed || z->finished)
    return ib_error (err, IB_EENV, "gzip stream %s", z->failed ? "failed earlier" : "already finished");
  while (len > 0)
    {
      /* A full block is submitted only once more input comes, so the last
       * block (Z_FINISH) is never an extra empty one after a full block:
       * where blocks end depends on the total alone, not on the writes. */
      if (z->slots[z->cur].in_len == IB_PGZIP_BLOCK && advance (z, err) < 0)
        {
          z->failed = true;
          return -1;
        }
      struct slot *s = &z->slots[z->cur];
      size_t take = IB_PGZIP_BLOCK - s->in_len < len ? IB_PGZIP_BLOCK - s->in_len : len;
      memcpy (s->in + s->in_len, p, take);
      s->in_len += take;
      p += take;
      len -= take;
    }
  return 0;
}

static void
put_le32 (unsigned char *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char) (v >> (8 * i));
}

int
ib_pgzip_finish (struct ib_pgzip *z, ib_error_t *err)
{
  if (z->failed || z->finished)
    return ib_error (err, IB_EENV, "gzip stream %s", z->failed ? "failed earlier" : "already finished");
  z->finished = true;
  submit (z, true);
  while (z->in_flight > 0)
    if (drain_one (z, err) < 0)
      {
        z->failed = true;
        return -1;
      }
  unsigned char trailer[8];
  put_le32 (trailer, (uint32_t) z->crc);
  put_le32 (trailer + 4, (uint32_t) z->total); /* ISIZE: the length mod 2^32 */
  return z->sink (z->data, trailer, sizeof trailer, err);
}

/* zlib's own header for deflateInit2 (..., 15 + 16, ...) without
 * deflateSetHeader: the bytes layers had before blocks, so a reader cannot
 * tell the writers apart by the header. */
static int
write_header (struct ib_pgzip *z, ib_error_t *err)
{
  unsigned char h[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };
  h[8] = z->level == 9 ? 2 : z->level == 1 ? 4 : 0;
  return z->sink (z->data, h, sizeof h, err);
}

static void
alloc_slots (struct ib_pgzip *z, size_t n)
{
  z->slots = ib_xcalloc (n, sizeof (*z->slots));
  z->n_slots = n;
  for (size_t i = 0; i < n; i++)
    {
      struct slot *s = &z->slots[i];
      s->in = ib_xmalloc (IB_PGZIP_BLOCK);
      s->dict = ib_xmalloc (DICT);
      /* deflate's bound for a block plus the sync marker; grown if not. */
      s->out_cap = IB_PGZIP_BLOCK + IB_PGZIP_BLOCK / 1000 + 4096;
      s->out = ib_xmalloc (s->out_cap);
    }
}

static int
start_workers (struct ib_pgzip *z, int n, ib_error_t *err)
{
  z->workers = ib_xcalloc ((size_t) n, sizeof (*z->workers));
  z->n_workers = n;
  for (int i = 0; i < n; i++)
    {
      struct worker *w = &z->workers[i];
      w->z = z;
      if (deflateInit2 (&w->zs, z->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return ib_error (err, IB_EENV, "deflateInit2 failed");
      w->zs_ready = true;
    }
  if (!z->threaded)
    return 0;
  for (int i = 0; i < n; i++)
    {
      int r = pthread_create (&z->workers[i].thread, NULL, worker_main, &z->workers[i]);
      if (r != 0)
        return ib_error_errno (err, r, IB_EENV, "start a gzip thread");
      z->workers[i].started = true;
    }
  return 0;
}

int
ib_pgzip_new (int level, int threads, ib_pgzip_sink_fn sink, void *data, struct ib_pgzip **out, ib_error_t *err)
{
  if (level < 1 || level > 9 || threads < 1 || threads > IB_PGZIP_MAX_THREADS)
    return ib_error (err, IB_EUSAGE, "gzip: level %d or %d threads out of range", level, threads);
  struct ib_pgzip *z = ib_xcalloc (1, sizeof (*z));
  z->level = level;
  z->sink = sink;
  z->data = data;
  z->threaded = threads > 1;
  z->crc = crc32 (0, NULL, 0);
  pthread_mutex_init (&z->mu, NULL);
  pthread_cond_init (&z->ready, NULL);
  pthread_cond_init (&z->done, NULL);
  /* Two blocks a worker: one being deflated, one waiting, while the caller
   * fills the next; inline, the one block is written out at once. */
  alloc_slots (z, z->threaded ? 2 * (size_t) threads : 1);
  if (start_workers (z, threads, err) < 0 || write_header (z, err) < 0)
    {
      ib_pgzip_free (z);
      return -1;
    }
  *out = z;
  return 0;
}

void
ib_pgzip_free (struct ib_pgzip *z)
{
  if (z == NULL)
    return;
  pthread_mutex_lock (&z->mu);
  z->stop = true;
  pthread_cond_broadcast (&z->ready);
  pthread_mutex_unlock (&z->mu);
  for (int i = 0; i < z->n_workers; i++)
    {
      if (z->workers[i].started)
        pthread_join (z->workers[i].thread, NULL);
      if (z->workers[i].zs_ready)
        deflateEnd (&z->workers[i].zs);
    }
  for (size_t i = 0; i < z->n_slots; i++)
    {
      free (z->slots[i].in);
      free (z->slots[i].dict);
      free (z->slots[i].out);
    }
  free (z->slots);
  free (z->workers);
  pthread_cond_destroy (&z->ready);
  pthread_cond_destroy (&z->done);
  pthread_mutex_destroy (&z->mu);
  free (z);
}

int
ib_pgzip_default_threads (void)
{
  int n = ib_online_cpus ();
  return n > IB_PGZIP_MAX_THREADS ? IB_PGZIP_MAX_THREADS : n;
}
