/* What a registry client has moved: its counters, and the progress bar its
 * blob bytes feed.  Neither knows the client: the client holds one of each,
 * and the HTTP exchange (http.c) counts into them as bytes go by, so the
 * exchange need not reach up into the API above it (registry.c) to show
 * progress.  Not a public contract, but for ib_registry_stats, which
 * registry.h hands on. */
#ifndef IB_REGISTRY_PROGRESS_H
#define IB_REGISTRY_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

#include "layers/image/transport.h"

/* Bytes and blobs moved by one client: the tests and the report count them. */
struct ib_registry_stats
{
  uint64_t bytes_down, bytes_up;
  unsigned blobs_fetched, blobs_uploaded, blobs_mounted, blobs_present, retries;
};

/* TO gains what S counted since it stood at BASE (a worker's client: its
 * ping before the transfers is not one). */
void ib_registry_stats_add (struct ib_registry_stats *to, const struct ib_registry_stats *s,
                            const struct ib_registry_stats *base);

/* A client's progress bar, drawn by the caller's callbacks (REPORT). */
struct ib_registry_bar
{
  const struct ib_transfer_report *report; /* NULL: none asked for */
  void *handle;                            /* a bar is being drawn */
  /* A worker's client feeds the bar of the client it works for (TO), under
   * that run's lock: the caller's callbacks need not be thread-safe.  Both
   * NULL outside ib_registry_each_blob. */
  struct ib_registry_bar *to;
  pthread_mutex_t *lock;
};

/* Bytes counted from now until ib_registry_bar_end go to a bar of TOTAL
 * bytes named WHAT (none when no report was asked for, or TOTAL is 0). */
void ib_registry_bar_begin (struct ib_registry_bar *b, const char *what, uint64_t total);
void ib_registry_bar_add (struct ib_registry_bar *b, uint64_t n);
void ib_registry_bar_end (struct ib_registry_bar *b);
/* B's bytes go to TO's bar (NULL: its own), under LOCK (NULL: none); both
 * NULL again once the run is over. */
void ib_registry_bar_feed (struct ib_registry_bar *b, struct ib_registry_bar *to, pthread_mutex_t *lock);

#endif
