/* A registry client's counters and progress bar (progress.h). */
#include "layers/registry/progress.h"

void
ib_registry_stats_add (struct ib_registry_stats *to, const struct ib_registry_stats *s,
                       const struct ib_registry_stats *base)
{
  to->bytes_down += s->bytes_down - base->bytes_down;
  to->bytes_up += s->bytes_up - base->bytes_up;
  to->blobs_fetched += s->blobs_fetched - base->blobs_fetched;
  to->blobs_uploaded += s->blobs_uploaded - base->blobs_uploaded;
  to->blobs_mounted += s->blobs_mounted - base->blobs_mounted;
  to->blobs_present += s->blobs_present - base->blobs_present;
  to->retries += s->retries - base->retries;
}

void
ib_registry_bar_begin (struct ib_registry_bar *b, const char *what, uint64_t total)
{
  ib_registry_bar_end (b);
  if (b->report && b->report->start && total > 0)
    b->handle = b->report->start (b->report->data, what, total);
}

void
ib_registry_bar_add (struct ib_registry_bar *b, uint64_t n)
{
  struct ib_registry_bar *bar = b->to ? b->to : b;
  if (bar->handle == NULL || bar->report->add == NULL)
    return;
  if (b->lock)
    pthread_mutex_lock (b->lock);
  bar->report->add (bar->handle, n);
  if (b->lock)
    pthread_mutex_unlock (b->lock);
}

void
ib_registry_bar_end (struct ib_registry_bar *b)
{
  if (b->handle && b->report->end)
    b->report->end (b->handle);
  b->handle = NULL;
}

void
ib_registry_bar_feed (struct ib_registry_bar *b, struct ib_registry_bar *to, pthread_mutex_t *lock)
{
  b->to = to;
  b->lock = lock;
}
