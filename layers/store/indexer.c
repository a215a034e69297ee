#include "layers/store/indexer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/store/store_private.h"

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

/* ---- the pass ----------------------------------------------------------- */

/* The concurrent calls for one file, with its spool (owned: given back to
 * the pass once they have run) and its path and digest (copied: the
 * pass's strings are its own). */
struct index_job
{
  const struct ib_indexer *ix[IB_MAX_INDEXERS];
  size_t n_ix;
  char *path;
  char digest[65];
  int fd;
};

/* Threads of a pass.  Two inspections of GPU code at once keep both
 * cores of a small machine busy while the pass inflates; each holds up to
 * some 12 MiB (NCCL's code, streamed), and the bound is 64 MiB. */
#define PASS_THREADS 2
/* Spools kept: one for each running call, the waiting one and the file
 * the pass reads, so that a pass makes no file after its first few. */
#define SPOOLS_KEPT (PASS_THREADS + 3)

struct ib_index_pass
{
  const struct ib_store *s;
  char *spool_dir;
  /* Held around the calls made in a layer's pass (wants () and the index ()
   * calls not handed to the threads): the layers read at once share P, and
   * those calls were written for one pass at a time. */
  pthread_mutex_t in_pass;
  pthread_t thread[PASS_THREADS];
  size_t n_threads;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a job waits, its slot is free, or stop */
  struct index_job *waiting;
  bool stop;
  int kept[SPOOLS_KEPT]; /* empty spools, offset anywhere */
  size_t n_kept;
};

/* An empty spool: a kept one, else a new unlinked file; -1 when none can
 * be made. */
static int
spool_take (struct ib_index_pass *p)
{
  int fd = -1;
  pthread_mutex_lock (&p->lock);
  if (p->n_kept)
    fd = p->kept[--p->n_kept];
  pthread_mutex_unlock (&p->lock);
  if (fd >= 0)
    {
      if (lseek (fd, 0, SEEK_SET) == 0)
        return fd;
      close (fd);
    }
  cleanup_free char *tmp = ib_path_join (p->spool_dir, ".index-spool-XXXXXX");
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd >= 0)
    unlink (tmp);
  return fd;
}

/* FD's calls have returned: empty it (no stale byte can follow a shorter
 * file, and pages not yet written back are dropped, never written) and
 * keep it, or close it when enough are kept. */
static void
spool_give_back (struct ib_index_pass *p, int fd)
{
  if (fd < 0)
    return;
  bool keep = ftruncate (fd, 0) == 0;
  pthread_mutex_lock (&p->lock);
  keep = keep && !p->stop && p->n_kept < SPOOLS_KEPT;
  if (keep)
    p->kept[p->n_kept++] = fd;
  pthread_mutex_unlock (&p->lock);
  if (!keep)
    close (fd);
}

static void
job_run (struct ib_index_pass *p, struct index_job *j)
{
  for (size_t i = 0; i < j->n_ix; i++)
    j->ix[i]->index (j->ix[i]->data, j->path, j->digest, NULL, 0, j->fd);
  spool_give_back (p, j->fd);
  free (j->path);
  free (j);
}

static void *
pass_thread (void *data)
{
  struct ib_index_pass *p = data;
  pthread_setname_np (pthread_self (), "ib-index");
  pthread_mutex_lock (&p->lock);
  for (;;)
    {
      while (p->waiting == NULL && !p->stop)
        pthread_cond_wait (&p->changed, &p->lock);
      struct index_job *j = p->waiting;
      if (j == NULL)
        break; /* stopped, and nothing left */
      p->waiting = NULL;
      pthread_cond_broadcast (&p->changed);
      pthread_mutex_unlock (&p->lock);
      job_run (p, j);
      pthread_mutex_lock (&p->lock);
    }
  pthread_mutex_unlock (&p->lock);
  return NULL;
}

struct ib_index_pass *
ib_index_pass_start (const struct ib_store *s, const char *spool_dir)
{
  struct ib_index_pass *p = ib_xcalloc (1, sizeof (*p));
  p->s = s;
  p->spool_dir = ib_xstrdup (spool_dir);
  pthread_mutex_init (&p->in_pass, NULL);
  pthread_mutex_init (&p->lock, NULL);
  pthread_cond_init (&p->changed, NULL);
  bool any = false;
  for (size_t i = 0; i < s->n_indexers; i++)
    any |= s->indexers[i]->concurrent;
  while (any && p->n_threads < PASS_THREADS
         && pthread_create (&p->thread[p->n_threads], NULL, pass_thread, p) == 0)
    p->n_threads++;
  return p;
}

size_t
ib_index_pass_threads (const struct ib_index_pass *p)
{
  return p->n_threads;
}

void
ib_index_pass_finish (struct ib_index_pass *p)
{
  if (p == NULL)
    return;
  pthread_mutex_lock (&p->lock);
  p->stop = true;
  pthread_cond_broadcast (&p->changed);
  pthread_mutex_unlock (&p->lock);
  for (size_t i = 0; i < p->n_threads; i++)
    pthread_join (p->thread[i], NULL);
  for (size_t i = 0; i < p->n_kept; i++)
    close (p->kept[i]);
  pthread_cond_destroy (&p->changed);
  pthread_mutex_destroy (&p->lock);
  pthread_mutex_destroy (&p->in_pass);
  free (p->spool_dir);
  free (p);
}

static void
pass_push (struct ib_index_pass *p, struct index_job *j)
{
  pthread_mutex_lock (&p->lock);
  while (p->waiting != NULL)
    pthread_cond_wait (&p->changed, &p->lock);
  p->waiting = j;
  pthread_cond_broadcast (&p->changed);
  pthread_mutex_unlock (&p->lock);
}

/* ---- one file ------------------------------------------------------------- */

bool
ib_index_file_begin (struct ib_index_file *f, struct ib_index_pass *p, const char *path, uint64_t size,
                     const unsigned char *head, size_t n_head)
{
  const struct ib_store *s = p->s;
  memset (f, 0, sizeof (*f));
  f->fd = -1;
  f->pass = p;
  f->ix = s->indexers;
  f->n_ix = s->n_indexers;
  bool any = false;
  pthread_mutex_lock (&p->in_pass);
  for (size_t i = 0; i < f->n_ix; i++)
    {
      f->need[i] = f->ix[i]->wants (f->ix[i]->data, path, size, head, n_head);
      if (f->need[i] == IB_INDEX_TEXT && size > IB_INDEX_TEXT_MAX)
        f->need[i] = IB_INDEX_SKIP;
      any |= f->need[i] != IB_INDEX_SKIP;
    }
  pthread_mutex_unlock (&p->in_pass);
  if (!any)
    return false;
  f->path = ib_xstrdup (path);
  if (wants (f, IB_INDEX_FD))
    {
      /* One spool for every indexer that wants the file: ELF readers seek. */
      f->fd = spool_take (p);
      f->failed = f->fd < 0;
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
  pthread_mutex_lock (&f->pass->in_pass);
  for (size_t i = 0; !f->failed && i < f->n_ix; i++)
    {
      if (f->need[i] == IB_INDEX_FD && f->ix[i]->concurrent && f->pass->n_threads)
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
  pthread_mutex_unlock (&f->pass->in_pass);
  if (j)
    {
      /* The spool and the path move to the job: every call in the pass
       * has returned, so nothing here reads the spool again. */
      j->path = steal_pointer (&f->path);
      snprintf (j->digest, sizeof (j->digest), "%s", digest);
      j->fd = f->fd;
      f->fd = -1;
      pass_push (f->pass, j);
    }
  ib_index_file_abort (f);
}

void
ib_index_file_abort (struct ib_index_file *f)
{
  spool_give_back (f->pass, f->fd);
  f->fd = -1;
  free (f->text);
  free (f->path);
  f->text = NULL;
  f->path = NULL;
}
