#include "layers/store/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

struct ib_sha256
{
  EVP_MD_CTX *ctx;
};

ib_sha256 *
ib_sha256_new (void)
{
  ib_sha256 *h = calloc (1, sizeof (*h));
  if (h == NULL || (h->ctx = EVP_MD_CTX_new ()) == NULL || EVP_DigestInit_ex (h->ctx, EVP_sha256 (), NULL) != 1)
    abort ();
  return h;
}

void
ib_sha256_update (ib_sha256 *h, const void *buf, size_t len)
{
  if (len && EVP_DigestUpdate (h->ctx, buf, len) != 1)
    abort ();
}

void
ib_sha256_final (ib_sha256 *h, ib_digest *out)
{
  unsigned char md[32];
  unsigned int n = 0;
  static const char hex[] = "0123456789abcdef";
  if (EVP_DigestFinal_ex (h->ctx, md, &n) != 1 || n != 32)
    abort ();
  memcpy (out->s, "sha256:", 7);
  for (int i = 0; i < 32; i++)
    {
      out->s[7 + 2 * i] = hex[md[i] >> 4];
      out->s[8 + 2 * i] = hex[md[i] & 15];
    }
  out->s[IB_DIGEST_LEN] = '\0';
  /* Ready for the next use. */
  if (EVP_DigestInit_ex (h->ctx, EVP_sha256 (), NULL) != 1)
    abort ();
}

void
ib_sha256_free (ib_sha256 *h)
{
  if (h == NULL)
    return;
  EVP_MD_CTX_free (h->ctx);
  free (h);
}

void
ib_sha256_buf (const void *buf, size_t len, ib_digest *out)
{
  ib_sha256 *h = ib_sha256_new ();
  ib_sha256_update (h, buf, len);
  ib_sha256_final (h, out);
  ib_sha256_free (h);
}

void
ib_chain_id_next (ib_digest *chain, const char *diff_id)
{
  if (chain->s[0] == '\0')
    {
      snprintf (chain->s, sizeof (chain->s), "%s", diff_id);
      return;
    }
  char text[2 * IB_DIGEST_LEN + 2];
  int n = snprintf (text, sizeof (text), "%s %s", chain->s, diff_id);
  ib_sha256_buf (text, (size_t) n < sizeof (text) ? (size_t) n : sizeof (text) - 1, chain);
}

int
ib_sha256_fd (int fd, uint64_t length, const char *what, ib_digest *out, uint64_t *size,
              void (*progress) (void *, unsigned long long), void *data, ib_error_t *err)
{
  ib_sha256 *h = ib_sha256_new ();
  static const size_t bufsz = 1 << 20;
  cleanup_free char *buf = ib_xmalloc (bufsz);
  uint64_t total = 0;
  while (total < length)
    {
      size_t want = length - total < bufsz ? (size_t) (length - total) : bufsz;
      ssize_t n = read (fd, buf, want);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          ib_sha256_free (h);
          return ib_error_errno (err, errno, IB_EENV, "read `%s`", what);
        }
      if (n == 0)
        break;
      ib_sha256_update (h, buf, (size_t) n);
      total += (uint64_t) n;
      if (progress)
        progress (data, (unsigned long long) n);
    }
  ib_sha256_final (h, out);
  ib_sha256_free (h);
  if (size)
    *size = total;
  return 0;
}

int
ib_sha256_file (const char *path, ib_digest *out, uint64_t *size, ib_error_t *err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  return ib_sha256_fd (fd, UINT64_MAX, path, out, size, NULL, NULL, err);
}

static bool
is_lower_hex (char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int
ib_digest_check (const char *s, ib_error_t *err)
{
  if (s == NULL || strncmp (s, "sha256:", 7) != 0)
    return ib_error (err, IB_EINTEGRITY, "digest `%s` is not a sha256 digest", s ? s : "(null)");
  const char *h = s + 7;
  size_t i = 0;
  for (; h[i]; i++)
    if (!is_lower_hex (h[i]))
      return ib_error (err, IB_EINTEGRITY, "digest `%s` has a character that is not lowercase hex", s);
  if (i != 64)
    return ib_error (err, IB_EINTEGRITY, "digest `%s` does not have 64 hex digits", s);
  return 0;
}

bool
ib_digest_hex_valid (const char *hex)
{
  size_t i = 0;
  while (hex[i] && is_lower_hex (hex[i]))
    i++;
  return i == 64 && hex[i] == '\0';
}

/* The hash worker (digest.h).  A ring of QUEUE jobs under one lock: the
 * producer appends at SUBMITTED, the thread takes them in order and counts
 * DONE; tickets are job numbers from 1, so "job T is hashed" is DONE >= T. */
#define QUEUE 16

struct hash_job
{
  ib_sha256 *h;
  const void *buf;
  size_t len;
};

struct ib_hash_worker
{
  bool threaded, stop;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work, done_cond; /* jobs to take; a job finished */
  struct hash_job q[QUEUE];
  uint64_t submitted, taken, done;
};

static void *
hash_worker_main (void *data)
{
  struct ib_hash_worker *w = data;
  /* Named for top -H and perf: which thread of the pass is busy. */
  pthread_setname_np (pthread_self (), "ib-hash");
  pthread_mutex_lock (&w->lock);
  for (;;)
    {
      while (!w->stop && w->taken == w->submitted)
        pthread_cond_wait (&w->work, &w->lock);
      if (w->stop)
        break;
      uint64_t ticket = ++w->taken;
      struct hash_job j = w->q[(ticket - 1) % QUEUE];
      pthread_mutex_unlock (&w->lock);
      ib_sha256_update (j.h, j.buf, j.len);
      pthread_mutex_lock (&w->lock);
      w->done = ticket;
      pthread_cond_broadcast (&w->done_cond);
    }
  pthread_mutex_unlock (&w->lock);
  return NULL;
}

struct ib_hash_worker *
ib_hash_worker_new (bool threaded)
{
  struct ib_hash_worker *w = calloc (1, sizeof (*w));
  if (w == NULL)
    abort ();
  if (!threaded)
    return w;
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->work, NULL);
  pthread_cond_init (&w->done_cond, NULL);
  /* No thread (resource limits): hash inline, the same bytes, only slower. */
  w->threaded = pthread_create (&w->thread, NULL, hash_worker_main, w) == 0;
  if (!w->threaded)
    {
      pthread_cond_destroy (&w->done_cond);
      pthread_cond_destroy (&w->work);
      pthread_mutex_destroy (&w->lock);
    }
  return w;
}

uint64_t
ib_hash_worker_submit (struct ib_hash_worker *w, ib_sha256 *h, const void *buf, size_t len)
{
  if (!w->threaded)
    {
      ib_sha256_update (h, buf, len);
      return ++w->submitted;
    }
  pthread_mutex_lock (&w->lock);
  while (w->submitted - w->done >= QUEUE)
    pthread_cond_wait (&w->done_cond, &w->lock);
  w->q[w->submitted % QUEUE] = (struct hash_job){ h, buf, len };
  uint64_t ticket = ++w->submitted;
  pthread_cond_signal (&w->work);
  pthread_mutex_unlock (&w->lock);
  return ticket;
}

void
ib_hash_worker_wait (struct ib_hash_worker *w, uint64_t ticket)
{
  if (!w->threaded)
    return;
  pthread_mutex_lock (&w->lock);
  while (w->done < ticket)
    pthread_cond_wait (&w->done_cond, &w->lock);
  pthread_mutex_unlock (&w->lock);
}

void
ib_hash_worker_drain (struct ib_hash_worker *w)
{
  if (!w->threaded)
    return;
  pthread_mutex_lock (&w->lock);
  uint64_t last = w->submitted;
  pthread_mutex_unlock (&w->lock);
  ib_hash_worker_wait (w, last);
}

void
ib_hash_worker_free (struct ib_hash_worker *w)
{
  if (w == NULL)
    return;
  if (w->threaded)
    {
      pthread_mutex_lock (&w->lock);
      w->stop = true;
      pthread_cond_signal (&w->work);
      pthread_mutex_unlock (&w->lock);
      pthread_join (w->thread, NULL);
      pthread_cond_destroy (&w->done_cond);
      pthread_cond_destroy (&w->work);
      pthread_mutex_destroy (&w->lock);
    }
  free (w);
}

bool
ib_hash_worker_threaded (const struct ib_hash_worker *w)
{
  return w->threaded;
}
