#include "builder/cluster/load_nodes.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/transports/docker_client.h"
#include "layers/transports/transports.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

enum phase
{
  WAITING,
  ASKING, /* which layers it has */
  SENDING,
  DONE,
  FAILED,
};

struct node
{
  const char *host; /* as given; "" for this machine's daemon */
  atomic_int phase;
  atomic_ullong sent;
  atomic_ullong total;
  double seconds;
  struct ib_docker_load_result res;
  ib_error_t err;
};

struct run
{
  struct ib_store *s;
  const struct ib_image *img;
  const char *name;
  struct node *nodes;
  size_t n;
  atomic_size_t next; /* the next node a worker takes */
  atomic_bool stop_drawing;
};

static const char *
node_name (const struct node *nd)
{
  return nd->host[0] ? nd->host : "local";
}

static void *
bar_start (void *data, const char *what, uint64_t total)
{
  (void) what;
  struct node *nd = data;
  atomic_store (&nd->total, total);
  atomic_store (&nd->phase, SENDING);
  return nd;
}

static void
bar_add (void *handle, uint64_t n)
{
  struct node *nd = handle;
  atomic_fetch_add (&nd->sent, n);
}

static void *
worker (void *data)
{
  struct run *run = data;
  for (;;)
    {
      size_t i = atomic_fetch_add (&run->next, 1);
      if (i >= run->n)
        return NULL;
      struct node *nd = &run->nodes[i];
      struct ib_transfer_report progress = { .start = bar_start, .add = bar_add, .data = nd };
      double t0 = ib_now ();
      atomic_store (&nd->phase, ASKING);
      int r = ib_docker_load (run->s, run->img, run->name, nd->host[0] ? nd->host : NULL, &progress, &nd->res,
                              &nd->err);
      nd->seconds = ib_now () - t0;
      atomic_store (&nd->phase, r < 0 ? FAILED : DONE);
    }
}

/* One line per node, redrawn in place. */
static void
draw (struct run *run, bool first)
{
  static const char *what[] = { "waiting", "asking which layers it has", "sending", "done", "failed" };
  if (!first)
    fprintf (stderr, "\033[%zuA", run->n);
  for (size_t i = 0; i < run->n; i++)
    {
      struct node *nd = &run->nodes[i];
      int ph = atomic_load (&nd->phase);
      unsigned long long sent = atomic_load (&nd->sent), total = atomic_load (&nd->total);
      char s[32], t[32];
      ib_human_bytes ((double) sent, s, sizeof (s));
      ib_human_bytes ((double) total, t, sizeof (t));
      fprintf (stderr, "\r\033[Kimgbuild: load %-28s %s", node_name (nd), what[ph]);
      if (ph == SENDING)
        {
          /* The total leaves out the archive's headers: never 100% early. */
          double frac = total ? (double) sent / (double) total : 0;
          frac = frac > 0.99 ? 0.99 : frac;
          char bar[21];
          for (int k = 0; k < 20; k++)
            bar[k] = k < (int) (frac * 20) ? '#' : '.';
          bar[20] = '\0';
          fprintf (stderr, " [%s] %3.0f%% %s / %s", bar, frac * 100, s, t);
        }
      else if (ph == DONE && nd->res.had_image)
        fprintf (stderr, ": it had the image, named it");
      else if (ph == DONE)
        fprintf (stderr, ": sent %s, %zu of %zu layers were there", s, nd->res.present, nd->res.n_layers);
      fputc ('\n', stderr);
    }
  fflush (stderr);
}

static void *
drawer (void *data)
{
  struct run *run = data;
  draw (run, true);
  while (!atomic_load (&run->stop_drawing))
    {
      usleep (200000);
      draw (run, false);
    }
  return NULL;
}

static unsigned
jobs (size_t n)
{
  const char *env = getenv ("IMGBUILD_LOAD_JOBS");
  long j = env && *env ? strtol (env, NULL, 10) : 4;
  if (j < 1)
    j = 1;
  return (unsigned) ((size_t) j < n ? (size_t) j : n);
}

/* Each node's line for people and its entry in the JSON. */
static void
report_node (struct ib_report *report, const struct node *nd)
{
  cJSON *doc = ib_report_json (report);
  cJSON *list = cJSON_GetObjectItemCaseSensitive (doc, "nodes");
  if (list == NULL)
    list = cJSON_AddArrayToObject (doc, "nodes");
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "host", node_name (nd));
  cJSON_AddStringToObject (o, "status", nd->err ? "fail" : "pass");
  cJSON_AddNumberToObject (o, "layers", (double) nd->res.n_layers);
  cJSON_AddNumberToObject (o, "layers_present", (double) nd->res.present);
  cJSON_AddBoolToObject (o, "had_image", nd->res.had_image);
  cJSON_AddNumberToObject (o, "archive_bytes", (double) nd->res.archive);
  cJSON_AddNumberToObject (o, "bytes_up", (double) nd->res.bytes_up);
  cJSON_AddNumberToObject (o, "seconds", nd->seconds);
  if (nd->err)
    cJSON_AddStringToObject (o, "error", nd->err->msg);
  else
    cJSON_AddStringToObject (o, "image_id", nd->res.image_id.s);
  cJSON_AddItemToArray (list, o);
  if (nd->err)
    ib_report_problem (report, "load", true, "%s: %s", node_name (nd), nd->err->msg);
  else
    {
      /* Also a transfer line, as a single --load always wrote it. */
      cleanup_free char *line = ib_xasprintf (
          "docker load %s: sent %llu bytes; %zu of %zu layers were already in the daemon%s; image %s (%.2fs)",
          node_name (nd), (unsigned long long) nd->res.archive, nd->res.present, nd->res.n_layers,
          nd->res.had_image ? " (it had the image: tagged only)" : "", nd->res.image_id.s, nd->seconds);
      struct ib_transfer_report t;
      ib_report_transfers (report, &t);
      t.note (t.data, line);
    }
}

int
ib_load_nodes (struct ib_store *s, const struct ib_image *img, const char *name, const char *const *hosts,
               size_t n, struct ib_report *report, ib_error_t *err)
{
  struct run run = { .s = s, .img = img, .name = name, .n = n };
  run.nodes = ib_xcalloc (n, sizeof (*run.nodes));
  for (size_t i = 0; i < n; i++)
    run.nodes[i].host = hosts[i];
  atomic_init (&run.next, 0);
  atomic_init (&run.stop_drawing, false);
  unsigned nj = jobs (n);
  pthread_t *t = ib_xcalloc (nj, sizeof (*t));
  unsigned started = 0;
  for (; started < nj && pthread_create (&t[started], NULL, worker, &run) == 0; started++)
    ;
  if (started == 0)
    worker (&run);
  pthread_t draw_thread;
  bool drawing = ib_report_interactive (report) && pthread_create (&draw_thread, NULL, drawer, &run) == 0;
  for (unsigned i = 0; i < started; i++)
    pthread_join (t[i], NULL);
  free (t);
  if (drawing)
    {
      atomic_store (&run.stop_drawing, true);
      pthread_join (draw_thread, NULL);
      draw (&run, false);
    }
  size_t failed = 0;
  struct node *first = NULL;
  for (size_t i = 0; i < n; i++)
    {
      report_node (report, &run.nodes[i]);
      if (run.nodes[i].err && failed++ == 0)
        first = &run.nodes[i];
    }
  int r = 0;
  if (first)
    r = ib_error (err, first->err->class ? first->err->class : IB_EENV,
                  "load: %zu of %zu node%s do%s not have %s: %s: %s", failed, n, n == 1 ? "" : "s",
                  failed == 1 ? "es" : "", name, node_name (first), first->err->msg);
  for (size_t i = 0; i < n; i++)
    ib_error_release (&run.nodes[i].err);
  free (run.nodes);
  return r;
}

int
ib_load_nodes_file (const char *file, char ***hosts, size_t *n, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (ib_read_file (file, 1 << 20, &text, &len, err) < 0)
    return ib_error_wrap (err, "--nodes");
  for (char *save = NULL, *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *hash = strchr (line, '#');
      if (hash)
        *hash = '\0';
      while (*line == ' ' || *line == '\t')
        line++;
      size_t l = strlen (line);
      while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\t' || line[l - 1] == '\r'))
        line[--l] = '\0';
      if (l == 0)
        continue;
      char *host = strstr (line, "://") ? ib_xstrdup (line) : ib_xasprintf ("ssh://%s", line);
      if (ib_docker_host_check (host, err) < 0)
        {
          free (host);
          return ib_error_wrap (err, "%s", file);
        }
      *hosts = ib_xrealloc (*hosts, (*n + 1) * sizeof (**hosts));
      (*hosts)[(*n)++] = host;
    }
  return 0;
}
