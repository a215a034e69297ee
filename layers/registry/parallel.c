/* Blob transfers on several threads (ib_registry_each_blob).
 *
 * Each extra thread opens its own client, as the caller's was opened: a
 * curl handle, its connections and its token are never shared, so nothing
 * in http.c or auth.c needs a lock.  What the threads do share is the run
 * below (the next blob, the first error) and the caller's progress bar, both
 * under the run's one mutex.  The caller's thread works too, on its own
 * client, so N jobs are N-1 extra clients.
 *
 * The store takes concurrent blobs as it is: each writer has its own
 * temporary file (mkostemp) renamed onto its digest, and two writers of one
 * digest would rename the same bytes; the run still does a digest listed
 * twice once in parallel so that the counts are what a loop would give. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/registry/client.h"
#include "layers/registry/registry.h"

struct run
{
  struct ib_registry *main;
  const struct ib_descriptor *const *blobs;
  ib_registry_blob_fn fn;
  void *ctx;
  size_t *order; /* the blobs done in parallel: the first of each digest */
  size_t n_order;
  pthread_mutex_t lock; /* the fields below, and the caller's progress bar */
  size_t next;
  bool failed;
  ib_error_t err; /* the first error */
};

struct worker
{
  struct run *run;
  pthread_t thread;
  bool started;
  struct ib_registry *reg;      /* its own client; NULL when it could not open one */
  struct ib_registry_stats base; /* the client's stats once opened (its ping is not a transfer) */
};

/* Take blobs until there are none left or one has failed anywhere. */
static void
take_blobs (struct run *run, struct ib_registry *reg)
{
  for (;;)
    {
      pthread_mutex_lock (&run->lock);
      bool stop = run->failed || run->next >= run->n_order;
      size_t i = stop ? 0 : run->order[run->next++];
      pthread_mutex_unlock (&run->lock);
      if (stop)
        return;
      ib_error_t e = NULL;
      if (run->fn (reg, run->blobs[i], i, run->ctx, &e) == 0)
        continue;
      pthread_mutex_lock (&run->lock);
      if (!run->failed)
        {
          run->failed = true;
          run->err = steal_pointer (&e);
        }
      pthread_mutex_unlock (&run->lock);
      ib_error_release (&e);
      return;
    }
}

static void *
work (void *data)
{
  struct worker *w = data;
  struct ib_registry *m = w->run->main;
  ib_error_t e = NULL;
  /* A client that cannot be opened costs a job, not the transfer: the
   * caller's client is there, and a registry really down fails it on a
   * blob, with that blob's error. */
  if (ib_registry_open_like (m, &w->reg, &e) < 0)
    {
      ib_error_release (&e);
      w->reg = NULL;
      return NULL;
    }
  w->base = w->reg->stats;
  ib_registry_bar_feed (&w->reg->bar, &m->bar, &w->run->lock);
  take_blobs (w->run, w->reg);
  return NULL;
}

static bool
listed_before (const struct ib_descriptor *const *blobs, size_t i)
{
  for (size_t j = 0; j < i; j++)
    if (strcmp (blobs[j]->digest.s, blobs[i]->digest.s) == 0)
      return true;
  return false;
}

/* N-1 threads beside the caller's; all joined, their stats added to the
 * caller's client, before it returns. */
static void
run_parallel (struct run *run, size_t jobs)
{
  struct worker *w = ib_xcalloc (jobs, sizeof (*w)); /* jobs - 1 used; never 0 bytes */
  ib_registry_bar_feed (&run->main->bar, NULL, &run->lock);
  for (size_t k = 0; k < jobs - 1; k++)
    {
      w[k].run = run;
      w[k].started = pthread_create (&w[k].thread, NULL, work, &w[k]) == 0;
    }
  take_blobs (run, run->main);
  for (size_t k = 0; k < jobs - 1; k++)
    if (w[k].started)
      pthread_join (w[k].thread, NULL);
  ib_registry_bar_feed (&run->main->bar, NULL, NULL);
  for (size_t k = 0; k < jobs - 1; k++)
    if (w[k].reg)
      {
        ib_registry_stats_add (&run->main->stats, &w[k].reg->stats, &w[k].base);
        ib_registry_free (w[k].reg);
      }
  free (w);
}

int
ib_registry_each_blob (struct ib_registry *r, const struct ib_descriptor *const *blobs, size_t n,
                       ib_registry_blob_fn fn, void *ctx, ib_error_t *err)
{
  size_t jobs = r->jobs < n ? r->jobs : n;
  if (jobs <= 1)
    {
      for (size_t i = 0; i < n; i++)
        if (fn (r, blobs[i], i, ctx, err) < 0)
          return -1;
      return 0;
    }
  cleanup_free size_t *order = ib_xcalloc (n, sizeof (*order));
  cleanup_free size_t *again = ib_xcalloc (n, sizeof (*again));
  size_t n_order = 0, n_again = 0;
  for (size_t i = 0; i < n; i++)
    {
      if (listed_before (blobs, i))
        again[n_again++] = i;
      else
        order[n_order++] = i;
    }
  struct run run = { .main = r, .blobs = blobs, .fn = fn, .ctx = ctx, .order = order, .n_order = n_order };
  pthread_mutex_init (&run.lock, NULL);
  run_parallel (&run, jobs < n_order ? jobs : n_order);
  pthread_mutex_destroy (&run.lock);
  if (run.failed)
    {
      *err = run.err;
      return -1;
    }
  /* The second listing of a digest, once its first is done. */
  for (size_t k = 0; k < n_again; k++)
    if (fn (r, blobs[again[k]], again[k], ctx, err) < 0)
      return -1;
  return 0;
}
