/* The lister of a pull (pull_lists.h): a few threads, fed by the pull's
 * transfer threads through a queue under one mutex, each listing one layer
 * at a time with the indexers' pass they share (layers/store/indexer.h); a
 * transfer that runs too far ahead of them waits on the same mutex.
 *
 * As many threads as ib_fs_list_layers_ahead reads layers at once: one
 * layer's pass keeps some 1.3 cores busy, and the transfers take a share
 * too. */
#include "layers/view/pull_lists.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "layers/store/indexer.h"
#include "util/cleanup.h"
#include "util/cpus.h"
#include "util/fsutil.h"
#include "layers/view/fsview.h"

#define LISTERS 2

/* A layer that came, to be listed: its number, its blob's size, and
 * whether a lister is done with it. */
struct pending
{
  size_t layer;
  uint64_t size;
  bool done;
  struct ib_blob_loc at; /* where to read it (arriving); path NULL: in the store */
  struct ib_blob_writer *copy; /* its bytes as the lister read them, found to be the blob */
};

struct ib_pull_lister
{
  struct ib_store *s;
  pthread_t thread[LISTERS];
  size_t n_threads;
  struct ib_index_pass *pass; /* shared by the threads' passes; NULL: each its own */
  uint64_t ahead; /* the bytes fetched and not listed yet that hold the pull back */
  pthread_mutex_t lock; /* everything below */
  pthread_cond_t wake;    /* a layer came, or the pull is over */
  pthread_cond_t drained; /* a layer was listed */
  struct ib_descriptor manifest; /* the pulled image's, once its config came */
  bool have_config;
  struct pending *arrived; /* in the order their blobs came */
  size_t n_arrived, cap, next;
  bool over, failed;
  struct ib_pull_judge judge; /* refuses NULL: none */
  struct ib_pull_lister_stats stats;
};

/* An eighth of the memory: the listers' backlog stays in the page cache
 * beside the pull's other reads and writes (a 15 GB download on a 23 GiB
 * machine was read back from the disk without a bound). */
#define AHEAD_MIN (256ull << 20)

static uint64_t
default_ahead (void)
{
  uint64_t ram = ib_physical_memory ();
  return ram / 8 > AHEAD_MIN ? ram / 8 : AHEAD_MIN;
}

/* The bytes of the layers that came before the Nth and are not listed yet. */
static uint64_t
behind (const struct ib_pull_lister *l, size_t n)
{
  uint64_t sum = 0;
  for (size_t j = 0; j < n; j++)
    sum += l->arrived[j].done ? 0 : l->arrived[j].size;
  return sum;
}

/* The transfer thread that brought the Nth layer to come waits, with the
 * lock held, while those that came before it and are not listed yet pass
 * the bound: the listers read a layer from the page cache only while the
 * pull has not pushed it out (a 30 GB base from a loopback registry read
 * 14 GB of its 15 GB back from the disk when the download ran ahead).
 * Only once the config is there: before it nothing is listed, and nothing
 * would drain.  It cannot wait for ever: the layers before it are in the
 * listers' queue, and the listers stop only once the pull is over. */
static void
hold_back (struct ib_pull_lister *l, size_t n)
{
  if (!l->have_config || behind (l, n) <= l->ahead)
    return;
  double t0 = ib_now ();
  while (behind (l, n) > l->ahead)
    pthread_cond_wait (&l->drained, &l->lock);
  l->stats.held++;
  l->stats.held_seconds += ib_now () - t0;
}

/* -1 with ERR set once a layer was refused (the lock held), else 0. */
static int
refusal (const struct ib_pull_lister *l, ib_error_t *err)
{
  if (!l->stats.refused)
    return 0;
  return ib_error (err, IB_EINTEGRITY, "pull stopped: layer %zu holds an entry this build refuses",
                   l->stats.refused_layer + 1);
}

/* Layer I - 1 (I = 0: the config) came, or is coming at AT (NULL: it is
 * in the store). */
static int
came (struct ib_pull_lister *l, const struct ib_image *img, size_t i, const struct ib_blob_loc *at, ib_error_t *err)
{
  pthread_mutex_lock (&l->lock);
  if (i == 0 && !l->have_config)
    {
      ib_descriptor_copy (&l->manifest, &img->manifest);
      l->have_config = true;
    }
  else if (i > 0)
    {
      if (l->n_arrived == l->cap)
        {
          l->cap = l->cap ? 2 * l->cap : 16;
          l->arrived = ib_xrealloc (l->arrived, l->cap * sizeof (*l->arrived));
        }
      struct ib_blob_loc where = { 0 };
      if (at)
        where = (struct ib_blob_loc){ ib_xstrdup (at->path), at->offset, at->length };
      l->arrived[l->n_arrived++] = (struct pending){ i - 1, img->layers[i - 1].size, false, where, NULL };
    }
  pthread_cond_broadcast (&l->wake);
  size_t me = l->n_arrived - 1;
  /* A copy from where the lister reads too is not held back: both read
   * the same pages. */
  if (i > 0 && at == NULL)
    hold_back (l, me);
  /* Judged, the first layer is listed before this transfer goes on (once
   * the config is there: before it nothing is listed). */
  while (i == 1 && l->judge.refuses && l->have_config && !l->arrived[me].done && !l->stats.refused)
    pthread_cond_wait (&l->drained, &l->lock);
  int r = refusal (l, err);
  pthread_mutex_unlock (&l->lock);
  return r;
}

/* Layer I - 1, told of by arriving, is listed (its read copied it into
 * the store), or its lister gave up on it. */
static int
settled (void *data, const struct ib_image *img, size_t i, ib_error_t *err)
{
  struct ib_pull_lister *l = data;
  pthread_mutex_lock (&l->lock);
  size_t me = l->n_arrived;
  for (size_t j = 0; j < l->n_arrived && me == l->n_arrived; j++)
    if (l->arrived[j].layer == i - 1 && l->arrived[j].at.path)
      me = j;
  while (me < l->n_arrived && !l->arrived[me].done && !l->stats.refused)
    pthread_cond_wait (&l->drained, &l->lock);
  int r = refusal (l, err);
  struct ib_blob_writer *copy = me < l->n_arrived ? steal_pointer (&l->arrived[me].copy) : NULL;
  pthread_mutex_unlock (&l->lock);
  /* Named here, not on the lister's thread: its fsync waits for the disk
   * (0.3-0.9 s for a gigabyte), and the lister has the next layer to read. */
  if (copy && r == 0)
    return ib_blob_writer_commit_hashed (copy, &img->layers[i - 1].digest, img->layers[i - 1].size, err);
  ib_blob_writer_abort (copy);
  return r;
}

static int
arrived (void *data, const struct ib_image *img, size_t i, ib_error_t *err)
{
  return came (data, img, i, NULL, err);
}

static int
arriving (void *data, const struct ib_image *img, size_t i, const struct ib_blob_loc *at, ib_error_t *err)
{
  return came (data, img, i, at, err);
}

/* The next layer to list (*N: its place in l->arrived), with the lock
 * held: false when the lister is to stop (the pull failed, or it is over
 * and every layer that came is done). */
static bool
next_layer (struct ib_pull_lister *l, size_t *n)
{
  while (!l->failed && !(l->over && (!l->have_config || l->next == l->n_arrived))
         && !(l->have_config && l->next < l->n_arrived))
    pthread_cond_wait (&l->wake, &l->lock);
  if (l->failed || !l->have_config || l->next == l->n_arrived)
    return false;
  *n = l->next++;
  return true;
}

/* LIST's hostile entries, named as a view names them; kept in the stats
 * when the judge refuses one and no layer was refused before. */
static void
judge_layer (struct ib_pull_lister *l, const struct ib_image *img, size_t k, const struct ib_fs_list *list)
{
  char **h = ib_xcalloc (list->n_hazards + 1, sizeof (*h));
  bool refused = false;
  for (size_t j = 0; j < list->n_hazards; j++)
    {
      h[j] = ib_xasprintf ("layer %s: %s", img->layers[k].digest.s, list->hazards[j]);
      refused = refused || l->judge.refuses (l->judge.data, h[j]);
    }
  pthread_mutex_lock (&l->lock);
  if (refused && !l->stats.refused)
    {
      l->stats.refused = true;
      l->stats.refused_layer = k;
      l->stats.hazards = steal_pointer (&h);
      l->stats.n_hazards = list->n_hazards;
    }
  pthread_mutex_unlock (&l->lock);
  for (size_t j = 0; h && j < list->n_hazards; j++)
    free (h[j]);
  free (h);
}

/* List layer K of IMG as the build would (fsview.c caches it), and judge
 * it; a layer it cannot list is the build's own pass's to report. */
static void
list_layer (struct ib_pull_lister *l, const struct ib_image *img, size_t k, const struct ib_blob_loc *at,
            struct ib_blob_writer **copy)
{
  if (k >= img->n_layers)
    return;
  struct ib_fs_list *list = NULL;
  ib_error_t e = NULL;
  /* Listed before (a warm build): counted, and nothing is loaded for
   * nothing (the build's view judges it, from the list, before any gate). */
  bool listed = ib_fs_list_cached (l->s, &img->layers[k], &img->diff_ids[k])
                || (at->path ? ib_fs_list_layer_at (l->s, &img->layers[k], at, &img->diff_ids[k], l->pass, &list,
                                                    copy, &e)
                             : ib_fs_list_layer_in (l->s, &img->layers[k], &img->diff_ids[k], l->pass, &list, &e))
                       == 0;
  if (list && l->judge.refuses)
    judge_layer (l, img, k, list);
  ib_fs_list_free (list);
  ib_error_release (&e);
  if (!listed)
    return;
  pthread_mutex_lock (&l->lock);
  l->stats.listed++;
  pthread_mutex_unlock (&l->lock);
}

static void *
run (void *data)
{
  struct ib_pull_lister *l = data;
  pthread_setname_np (pthread_self (), "ib-list");
  struct ib_image *img = NULL;
  size_t n;
  pthread_mutex_lock (&l->lock);
  while (next_layer (l, &n))
    {
      size_t k = l->arrived[n].layer;
      struct ib_blob_loc at = l->arrived[n].at; /* its path stays until finish: arrived may move */
      pthread_mutex_unlock (&l->lock);
      /* The config is in the store now: the manifest was put there before
       * any blob was fetched.  An image that does not load is not listed. */
      ib_error_t e = NULL;
      if (img == NULL && ib_image_load (l->s, &l->manifest, NULL, &img, &e) < 0)
        ib_error_release (&e);
      struct ib_blob_writer *copy = NULL;
      if (img)
        list_layer (l, img, k, &at, &copy);
      pthread_mutex_lock (&l->lock);
      if (img)
        l->stats.layers = img->n_layers;
      l->arrived[n].copy = copy;
      l->arrived[n].done = true;
      pthread_cond_broadcast (&l->drained);
    }
  pthread_mutex_unlock (&l->lock);
  ib_image_free (img);
  return NULL;
}

struct ib_pull_lister *
ib_pull_lister_start (struct ib_store *s, uint64_t ahead, const struct ib_pull_judge *judge,
                      struct ib_pull_listener *listener)
{
  struct ib_pull_lister *l = ib_xcalloc (1, sizeof (*l));
  l->s = s;
  if (judge)
    l->judge = *judge;
  l->ahead = ahead ? ahead : default_ahead ();
  pthread_mutex_init (&l->lock, NULL);
  pthread_cond_init (&l->wake, NULL);
  pthread_cond_init (&l->drained, NULL);
  cleanup_free char *spool_dir = ib_fs_spool_dir (s);
  l->pass = spool_dir ? ib_index_pass_start (s, spool_dir) : NULL;
  size_t want = ib_online_cpus () > 1 ? LISTERS : 1;
  while (l->n_threads < want && pthread_create (&l->thread[l->n_threads], NULL, run, l) == 0)
    l->n_threads++;
  if (l->n_threads == 0)
    {
      /* No thread: no listener either; the build lists after the pull. */
      ib_index_pass_finish (l->pass);
      pthread_cond_destroy (&l->drained);
      pthread_cond_destroy (&l->wake);
      pthread_mutex_destroy (&l->lock);
      free (l);
      *listener = (struct ib_pull_listener){ 0 };
      return NULL;
    }
  *listener = (struct ib_pull_listener){ .arrived = arrived, .arriving = arriving, .settled = settled, .data = l };
  return l;
}

void
ib_pull_lister_finish (struct ib_pull_lister *l, bool pull_failed, struct ib_pull_lister_stats *stats)
{
  if (stats)
    *stats = (struct ib_pull_lister_stats){ 0 };
  if (l == NULL)
    return;
  pthread_mutex_lock (&l->lock);
  l->over = true;
  l->failed = pull_failed;
  pthread_cond_broadcast (&l->wake);
  pthread_cond_broadcast (&l->drained);
  pthread_mutex_unlock (&l->lock);
  for (size_t i = 0; i < l->n_threads; i++)
    pthread_join (l->thread[i], NULL);
  ib_index_pass_finish (l->pass);
  malloc_trim (0); /* the listers' heap, given back once they are done */
  if (stats)
    {
      *stats = l->stats;
      stats->ahead = l->ahead;
    }
  else
    ib_pull_lister_stats_clear (&l->stats);
  pthread_cond_destroy (&l->drained);
  pthread_cond_destroy (&l->wake);
  pthread_mutex_destroy (&l->lock);
  ib_descriptor_clear (&l->manifest);
  for (size_t i = 0; i < l->n_arrived; i++)
    {
      ib_blob_loc_clear (&l->arrived[i].at);
      ib_blob_writer_abort (l->arrived[i].copy); /* the pull stopped before it was named */
    }
  free (l->arrived);
  free (l);
}

void
ib_pull_lister_stats_clear (struct ib_pull_lister_stats *stats)
{
  for (size_t i = 0; i < stats->n_hazards; i++)
    free (stats->hazards[i]);
  free (stats->hazards);
  stats->hazards = NULL;
  stats->n_hazards = 0;
}
