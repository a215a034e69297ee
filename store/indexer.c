#include "indexer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "store_private.h"

void
ib_store_add_indexer (struct ib_store *s, const struct ib_indexer *ix)
{
  if (s->n_indexers < IB_MAX_INDEXERS)
    s->indexers[s->n_indexers++] = ix;
}

const struct ib_indexer *const *
ib_store_indexers (const struct ib_store *s, size_t *n)
{
  *n = s->n_indexers;
  return s->indexers;
}

const struct ib_indexer *
ib_store_indexer (const struct ib_store *s, const char *name)
{
  for (size_t i = 0; i < s->n_indexers; i++)
    if (strcmp (s->indexers[i]->name, name) == 0)
      return s->indexers[i];
  return NULL;
}

static bool
wants (const struct ib_index_file *f, enum ib_index_need kind)
{
  for (size_t i = 0; i < f->n_ix; i++)
    if (f->need[i] == kind)
      return true;
  return false;
}

/* ---- the pass's worker --------------------------------------------------- */

/* The concurrent calls for one file, with its spool (owned: closed once
 * they have run) and its path and digest (copied: the pass's strings are
 * its own). */
struct index_job
{
  const struct ib_indexer *ix[IB_MAX_INDEXERS];
  size_t n_ix;
  char *path;
  char digest[65];
  int fd;
};

/* Threads of a worker.  Two inspections of GPU code at once keep both
 * cores of a small machine busy while the pass inflates; each holds up to
 * some 12 MiB (NCCL's code, streamed), and the bound is 64 MiB. */
#define WORKER_THREADS 2

struct ib_index_worker
{
  pthread_t thread[WORKER_THREADS];
  size_t n_threads;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a job waits, its slot is free, or stop */
  struct index_job *waiting;
  bool stop;
};

static void
job_run (struct index_job *j)
{
  for (size_t i = 0; i < j->n_ix; i++)
    j->ix[i]->index (j->ix[i]->data, j->path, j->digest, NULL, 0, j->fd);
  close (j->fd);
  free (j->path);
  free (j);
}

static void *
worker_main (void *data)
{
  struct ib_index_worker *w = data;
  pthread_mutex_lock (&w->lock);
  for (;;)
    {
      while (w->waiting == NULL && !w->stop)
        pthread_cond_wait (&w->changed, &w->lock);
      struct index_job *j = w->waiting;
      if (j == NULL)
        break; /* stopped, and nothing left */
      w->waiting = NULL;
      pthread_cond_broadcast (&w->changed);
      pthread_mutex_unlock (&w->lock);
      job_run (j);
      pthread_mutex_lock (&w->lock);
    }
  pthread_mutex_unlock (&w->lock);
  return NULL;
}

struct ib_index_worker *
ib_index_worker_start (const struct ib_store *s)
{
  bool any = false;
  for (size_t i = 0; i < s->n_indexers; i++)
    any |= s->indexers[i]->concurrent;
  if (!any)
    return NULL;
  struct ib_index_worker *w = ib_xcalloc (1, sizeof (*w));
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->changed, NULL);
  while (w->n_threads < WORKER_THREADS && pthread_create (&w->thread[w->n_threads], NULL, worker_main, w) == 0)
    w->n_threads++;
  if (w->n_threads == 0)
    {
      pthread_cond_destroy (&w->changed);
      pthread_mutex_destroy (&w->lock);
      free (w);
      return NULL;
    }
  return w;
}

static void
worker_push (struct ib_index_worker *w, struct index_job *j)
{
  pthread_mutex_lock (&w->lock);
  while (w->waiting != NULL)
    pthread_cond_wait (&w->changed, &w->lock);
  w->waiting = j;
  pthread_cond_broadcast (&w->changed);
  pthread_mutex_unlock (&w->lock);
}

void
ib_index_worker_finish (struct ib_index_worker *w)
{
  if (w == NULL)
    return;
  pthread_mutex_lock (&w->lock);
  w->stop = true;
  pthread_cond_broadcast (&w->changed);
  pthread_mutex_unlock (&w->lock);
  for (size_t i = 0; i < w->n_threads; i++)
    pthread_join (w->thread[i], NULL);
  pthread_cond_destroy (&w->changed);
  pthread_mutex_destroy (&w->lock);
  free (w);
}

/* ---- one file ------------------------------------------------------------- */

bool
ib_index_file_begin (struct ib_index_file *f, const struct ib_store *s, const char *spool_dir,
                     struct ib_index_worker *worker, const char *path, uint64_t size, const unsigned char *head,
                     size_t n_head)
{
  memset (f, 0, sizeof (*f));
  f->fd = -1;
  f->worker = worker;
  f->ix = s->indexers;
  f->n_ix = s->n_indexers;
  bool any = false;
  for (size_t i = 0; i < f->n_ix; i++)
    {
      f->need[i] = f->ix[i]->wants (f->ix[i]->data, path, size, head, n_head);
      if (f->need[i] == IB_INDEX_TEXT && size > IB_INDEX_TEXT_MAX)
        f->need[i] = IB_INDEX_SKIP;
      any |= f->need[i] != IB_INDEX_SKIP;
    }
  if (!any)
    return false;
  f->path = ib_xstrdup (path);
  f->spool_dir = spool_dir;
  if (wants (f, IB_INDEX_FD))
    {
      /* One spool for every indexer that wants the file: ELF readers seek. */
      cleanup_free char *tmp = ib_path_join (spool_dir, ".index-spool-XXXXXX");
      f->fd = mkostemp (tmp, O_CLOEXEC);
      if (f->fd < 0)
        f->failed = 1;
      else
        unlink (tmp);
    }
  else if (wants (f, IB_INDEX_TEXT))
    {
      f->cap = size + 1;
      f->text = ib_xmalloc (f->cap);
    }
  else
    f->digest_only = 1; /* nothing to keep of the bytes */
  return true;
}

void
ib_index_file_feed (struct ib_index_file *f, const void *buf, size_t n)
{
  if (f->failed || f->digest_only || n == 0)
    return;
  if (f->fd >= 0)
    {
      ib_error_t e = NULL;
      if (ib_write_all (f->fd, buf, n, f->path, &e) < 0)
        {
          ib_error_release (&e);
          f->failed = 1;
        }
      return;
    }
  if (f->len + n + 1 > f->cap)
    {
      /* A tar entry holds what its header says; more is damage: no index. */
      f->failed = 1;
      return;
    }
  memcpy (f->text + f->len, buf, n);
  f->len += n;
}

void
ib_index_file_end (struct ib_index_file *f, const char *digest)
{
  if (!f->failed && f->fd >= 0 && wants (f, IB_INDEX_TEXT) && f->len == 0)
    {
      /* Both kinds wanted: the text is read back from the spool. */
      off_t size = lseek (f->fd, 0, SEEK_END);
      if (size >= 0 && (size_t) size <= IB_INDEX_TEXT_MAX)
        {
          f->text = ib_xmalloc ((size_t) size + 1);
          f->len = pread (f->fd, f->text, (size_t) size, 0) == size ? (size_t) size : 0;
          if (f->len != (size_t) size)
            f->failed = 1;
        }
    }
  if (f->text)
    f->text[f->len] = '\0';
  struct index_job *j = NULL;
  for (size_t i = 0; !f->failed && i < f->n_ix; i++)
    {
      if (f->need[i] == IB_INDEX_FD && f->ix[i]->concurrent && f->worker)
        {
          if (j == NULL)
            j = ib_xcalloc (1, sizeof (*j));
          j->ix[j->n_ix++] = f->ix[i];
        }
      else if (f->need[i] == IB_INDEX_FD || f->need[i] == IB_INDEX_DIGEST
               || (f->need[i] == IB_INDEX_TEXT && f->text))
        f->ix[i]->index (f->ix[i]->data, f->path, digest, f->need[i] == IB_INDEX_TEXT ? f->text : NULL,
                         f->need[i] == IB_INDEX_TEXT ? f->len : 0, f->need[i] == IB_INDEX_FD ? f->fd : -1);
    }
  if (j)
    {
      /* The spool and the path move to the job: every call in the pass
       * has returned, so nothing here reads the spool again. */
      j->path = steal_pointer (&f->path);
      snprintf (j->digest, sizeof (j->digest), "%s", digest);
      j->fd = f->fd;
      f->fd = -1;
      worker_push (f->worker, j);
    }
  ib_index_file_abort (f);
}

void
ib_index_file_abort (struct ib_index_file *f)
{
  if (f->fd >= 0)
    close (f->fd);
  f->fd = -1;
  free (f->text);
  free (f->path);
  f->text = NULL;
  f->path = NULL;
}
