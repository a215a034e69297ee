#include "layers/read/pinflate.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"

#define BUF (1u << 20)
/* Buffers and the markers between chunks: a worker waits for room. */
#define QCAP (2 * PINFLATE_BUFFERS + 4)

enum entry_kind
{
  E_BLOB,     /* blob bytes, consumed by the inflater */
  E_DATA,     /* uncompressed bytes */
  E_NEXT,     /* the chunk ended at its checkpoint: the next chunk is the next worker's */
  E_FALLBACK, /* it did not: this worker goes on to the end */
  E_END,      /* the blob ended with a member */
  E_FAIL      /* the worker's error, or the blob ended inside a member */
};

struct entry
{
  enum entry_kind kind;
  unsigned char *buf;
  size_t len;
};

struct worker
{
  struct ib_pinflate *p;
  size_t id;
  size_t chunk; /* the chunk it works on (under the lock) */
  pthread_t thread;
  bool started;
  struct entry q[QCAP];
  size_t q_head, q_n;
  unsigned char *free_bufs[PINFLATE_BUFFERS], *bufs[PINFLATE_BUFFERS];
  size_t n_free, n_bufs;
  unsigned char *snap;
  ib_error_t err; /* with E_FAIL; NULL: truncated */
};

struct ib_pinflate
{
  int fd;
  char *path;
  uint64_t offset, length;
  const struct ib_inflate_index *x;
  size_t threads, n_chunks;
  struct worker *w;
  pthread_mutex_t lock;
  pthread_cond_t more, room;
  bool stop;             /* the reader is done: workers exit */
  bool fell_back;
  size_t fallback_chunk; /* the first chunk that did not end at its checkpoint */
  bool finished;         /* the consumer had the last entry */
  size_t chunk;   /* the chunk the consumer reads */
  struct worker *held_w;
  unsigned char *held;
};

/* Chunk C is [START, END) of the blob: 0 at its first byte, the last one
 * to the blob's end. */
static struct ib_inflate_point
chunk_start (const struct ib_pinflate *p, size_t c)
{
  return c == 0 ? (struct ib_inflate_point) { 0, 0 } : ib_inflate_index_point (p->x, c - 1);
}

static uint64_t
chunk_end (const struct ib_pinflate *p, size_t c)
{
  return c + 1 < p->n_chunks ? ib_inflate_index_point (p->x, c).in : p->length;
}

/* Under the lock: W's work is not wanted any more, the reader being done
 * or W's chunk coming after one that fell back (nobody will read it). */
static bool
unwanted (const struct worker *w)
{
  return w->p->stop || w->chunk > w->p->fallback_chunk;
}

/* A free buffer of W's, once there is one; NULL when told to stop. */
static unsigned char *
take_buffer (struct worker *w)
{
  struct ib_pinflate *p = w->p;
  pthread_mutex_lock (&p->lock);
  while (!unwanted (w) && w->n_free == 0 && w->n_bufs == PINFLATE_BUFFERS)
    pthread_cond_wait (&p->room, &p->lock);
  unsigned char *b = NULL;
  if (!unwanted (w) && w->n_free > 0)
    b = w->free_bufs[--w->n_free];
  else if (!unwanted (w))
    b = w->bufs[w->n_bufs++] = ib_xmalloc (BUF);
  pthread_mutex_unlock (&p->lock);
  return b;
}

/* Queue an entry for the consumer; false when told to stop. */
static bool
push (struct worker *w, enum entry_kind kind, unsigned char *buf, size_t len)
{
  struct ib_pinflate *p = w->p;
  pthread_mutex_lock (&p->lock);
  while (!unwanted (w) && w->q_n == QCAP)
    pthread_cond_wait (&p->room, &p->lock);
  bool ok = !unwanted (w);
  if (ok)
    {
      w->q[(w->q_head + w->q_n++) % QCAP] = (struct entry) { kind, buf, len };
      pthread_cond_broadcast (&p->more);
    }
  pthread_mutex_unlock (&p->lock);
  return ok;
}

/* A worker on one chunk, or on the rest of the blob after a fallback. */
struct run
{
  struct worker *w;
  size_t chunk;
  struct ib_gunzip *gz;
  uint64_t in_pos, in_end; /* the next blob byte to read; where to stop */
  unsigned char *in, *out;
  size_t in_len, in_used, out_len;
  uint64_t made;  /* uncompressed bytes of the chunk */
  bool out_full;  /* the last step filled its output: the inflater may hold more */
  bool member_end; /* the last step ended a member */
};

/* The input consumed goes to the consumer (the blob's digest), the next
 * piece of it is read: 0, 1 told to stop, -1 on a read error. */
static int
next_input (struct run *r)
{
  struct ib_pinflate *p = r->w->p;
  if (r->in && !push (r->w, E_BLOB, steal_pointer (&r->in), r->in_len))
    return 1;
  if ((r->in = take_buffer (r->w)) == NULL)
    return 1;
  size_t want = r->in_end - r->in_pos < BUF ? (size_t) (r->in_end - r->in_pos) : BUF;
  ssize_t n = ib_pread_full (p->fd, r->in, want, p->offset + r->in_pos);
  if (n < 0)
    return ib_error_errno (&r->w->err, errno, IB_EENV, "read `%s`", p->path);
  /* A file cut shorter than the blob: its end is the input's end. */
  if ((size_t) n < want)
    r->in_end = r->in_pos + (uint64_t) n;
  r->in_pos += (uint64_t) n;
  r->in_len = (size_t) n;
  r->in_used = 0;
  return 0;
}

/* Inflate to IN_END, until the inflater has nothing more to give; full
 * output buffers go to the consumer.  0, 1 told to stop, -1 with W's error. */
static int
inflate_to (struct run *r)
{
  for (;;)
    {
      int x = r->in_used == r->in_len && r->in_pos < r->in_end ? next_input (r) : 0;
      if (x != 0)
        return x;
      /* A member that ended has given all it had, a full output aside. */
      if (r->in_used == r->in_len && r->in_pos >= r->in_end && (!r->out_full || r->member_end))
        return 0;
      if (r->out == NULL && (r->out = take_buffer (r->w)) == NULL)
        return 1;
      size_t used = 0, made = 0, room = BUF - r->out_len;
      if (ib_gunzip_run (r->gz, r->in ? r->in + r->in_used : NULL, r->in_len - r->in_used, &used,
                         r->out + r->out_len, room, &made, &r->member_end, &r->w->err)
          < 0)
        return -1;
      r->in_used += used;
      r->out_len += made;
      r->made += made;
      r->out_full = made == room;
      if (r->out_len == BUF && !push (r->w, E_DATA, steal_pointer (&r->out), BUF))
        return 1;
      if (r->out == NULL)
        r->out_len = 0;
    }
}

/* What the run holds goes to the consumer: false when told to stop. */
static bool
flush (struct run *r)
{
  bool ok = true;
  if (r->in)
    ok = push (r->w, E_BLOB, steal_pointer (&r->in), r->in_len);
  if (ok && r->out && r->out_len)
    ok = push (r->w, E_DATA, steal_pointer (&r->out), r->out_len);
  r->in_len = r->in_used = r->out_len = 0;
  return ok;
}

/* The chunk's inflater: a new one at the blob's start, else resumed at
 * its first checkpoint. */
static int
start (struct run *r)
{
  struct ib_pinflate *p = r->w->p;
  if (r->chunk == 0)
    return ib_gunzip_new (&r->gz, &r->w->err);
  if (ib_inflate_index_snapshot (p->x, r->chunk - 1, r->w->snap, &r->w->err) < 0)
    return -1;
  return ib_gunzip_resume (r->w->snap, &r->gz, &r->w->err);
}

/* The chunk ended where the index says the next one starts: all of its
 * input consumed, its output the checkpoints' distance, and the inflater
 * in the state recorded there. */
static bool
ends_at_checkpoint (struct run *r)
{
  struct ib_pinflate *p = r->w->p;
  struct ib_inflate_point a = chunk_start (p, r->chunk), b = ib_inflate_index_point (p->x, r->chunk);
  ib_error_t e = NULL;
  if (r->in_pos != b.in || r->made != b.out - a.out
      || ib_inflate_index_snapshot (p->x, r->chunk, r->w->snap, &e) < 0)
    {
      ib_error_release (&e);
      return false;
    }
  return ib_gunzip_at (r->gz, r->w->snap);
}

/* This chunk did not end at its checkpoint: unless an earlier one did not
 * either, this worker goes on to the blob's end, and the workers of later
 * chunks stop. */
static bool
fall_back (struct run *r)
{
  struct ib_pinflate *p = r->w->p;
  pthread_mutex_lock (&p->lock);
  bool first = r->chunk < p->fallback_chunk;
  if (first)
    {
      p->fallback_chunk = r->chunk;
      p->fell_back = true;
      pthread_cond_broadcast (&p->room);
    }
  pthread_mutex_unlock (&p->lock);
  return first;
}

/* One chunk: 0 to go on with the worker's next, 1 when it is done. */
static int
do_chunk (struct worker *w, size_t c)
{
  struct ib_pinflate *p = w->p;
  struct run r = { .w = w, .chunk = c, .in_pos = chunk_start (p, c).in, .in_end = chunk_end (p, c) };
  int x = start (&r);
  if (x == 0)
    x = inflate_to (&r);
  bool last = c + 1 == p->n_chunks;
  if (x == 0 && !last && ends_at_checkpoint (&r))
    {
      x = flush (&r) && push (w, E_NEXT, NULL, 0) ? 0 : 1;
      ib_gunzip_free (r.gz);
      return x;
    }
  if (x == 0 && !last)
    {
      /* The inflater stands where the blob's own bytes put it: on from
       * there, sequentially. */
      x = fall_back (&r) && flush (&r) && push (w, E_FALLBACK, NULL, 0) ? 0 : 1;
      r.in_end = p->length;
      if (x == 0)
        x = inflate_to (&r);
    }
  /* The end of the blob (E_FAIL without an error: inside a member), or
   * the inflater's error after the bytes it made before it.  Buffers left
   * with the run stay the worker's, freed with it. */
  if (x != 1 && flush (&r))
    push (w, x == 0 && r.member_end ? E_END : E_FAIL, NULL, 0);
  ib_gunzip_free (r.gz);
  return 1;
}

static void *
worker_main (void *data)
{
  struct worker *w = data;
  struct ib_pinflate *p = w->p;
  pthread_setname_np (pthread_self (), "ib-inflate");
  for (size_t c = w->id; c < p->n_chunks; c += p->threads)
    {
      pthread_mutex_lock (&p->lock);
      w->chunk = c;
      bool go = !unwanted (w);
      pthread_mutex_unlock (&p->lock);
      if (!go || do_chunk (w, c) != 0)
        break;
    }
  return NULL;
}

int
ib_pinflate_new (int fd, const char *path, uint64_t offset, uint64_t length, const struct ib_inflate_index *x,
                 int threads, struct ib_pinflate **out, ib_error_t *err)
{
  struct ib_pinflate *p = ib_xcalloc (1, sizeof (*p));
  p->fd = fd;
  p->path = ib_xstrdup (path);
  p->offset = offset;
  p->length = length;
  p->x = x;
  p->n_chunks = ib_inflate_index_count (x) + 1;
  p->threads = threads < 2 ? 2 : (size_t) threads;
  p->fallback_chunk = SIZE_MAX;
  pthread_mutex_init (&p->lock, NULL);
  pthread_cond_init (&p->more, NULL);
  pthread_cond_init (&p->room, NULL);
  p->w = ib_xcalloc (p->threads, sizeof (*p->w));
  for (size_t i = 0; i < p->threads; i++)
    {
      struct worker *w = &p->w[i];
      w->p = p;
      w->id = i;
      w->snap = ib_xmalloc (ib_gunzip_snapshot_size ());
      w->started = pthread_create (&w->thread, NULL, worker_main, w) == 0;
      if (!w->started)
        {
          ib_pinflate_free (p);
          return ib_error (err, IB_EENV, "parallel inflate: cannot start a thread");
        }
    }
  *out = p;
  return 0;
}

/* Under the lock: the buffer handed out last goes back to its worker. */
static void
give_back (struct ib_pinflate *p)
{
  if (p->held == NULL)
    return;
  p->held_w->free_bufs[p->held_w->n_free++] = steal_pointer (&p->held);
  pthread_cond_broadcast (&p->room);
}

int
ib_pinflate_next (struct ib_pinflate *p, struct ib_piece *piece, bool *truncated, ib_error_t *err)
{
  *truncated = false;
  pthread_mutex_lock (&p->lock);
  give_back (p);
  int r = 0;
  while (!p->finished)
    {
      struct worker *w = &p->w[p->chunk % p->threads];
      while (w->q_n == 0)
        pthread_cond_wait (&p->more, &p->lock);
      struct entry e = w->q[w->q_head];
      w->q_head = (w->q_head + 1) % QCAP;
      w->q_n--;
      pthread_cond_broadcast (&p->room);
      if (e.kind == E_BLOB || e.kind == E_DATA)
        {
          p->held = e.buf;
          p->held_w = w;
          *piece = (struct ib_piece) { e.kind == E_BLOB ? IB_PIECE_BLOB : IB_PIECE_DATA, e.buf, e.len };
          r = 1;
          break;
        }
      p->chunk += e.kind == E_NEXT;
      p->finished = e.kind == E_END || e.kind == E_FAIL;
      if (e.kind == E_FAIL)
        {
          r = -1;
          *truncated = w->err == NULL;
          *err = steal_pointer (&w->err);
        }
    }
  pthread_mutex_unlock (&p->lock);
  return r;
}

bool
ib_pinflate_fell_back (struct ib_pinflate *p)
{
  pthread_mutex_lock (&p->lock);
  bool fell = p->fell_back;
  pthread_mutex_unlock (&p->lock);
  return fell;
}

void
ib_pinflate_free (struct ib_pinflate *p)
{
  if (p == NULL)
    return;
  pthread_mutex_lock (&p->lock);
  p->stop = true;
  pthread_cond_broadcast (&p->room);
  pthread_mutex_unlock (&p->lock);
  for (size_t i = 0; i < p->threads; i++)
    if (p->w[i].started)
      pthread_join (p->w[i].thread, NULL);
  for (size_t i = 0; i < p->threads; i++)
    {
      struct worker *w = &p->w[i];
      for (size_t b = 0; b < w->n_bufs; b++)
        free (w->bufs[b]);
      free (w->snap);
      ib_error_release (&w->err);
    }
  pthread_cond_destroy (&p->more);
  pthread_cond_destroy (&p->room);
  pthread_mutex_destroy (&p->lock);
  free (p->w);
  free (p->path);
  free (p);
}
