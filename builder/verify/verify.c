#include "builder/verify/verify.h"

#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layers/read/layer_reader.h"
#include "layers/read/readthrough.h"
#include "layers/tar/tarcheck.h"
#include "util/cpus.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* One unit of work: a layer (read through, both digests), or a plain blob
 * (hashed). */
struct item
{
  struct ib_descriptor desc;
  ib_digest diff_id;
  bool is_layer;
  char *path;
  char *problem;  /* NULL when it checks */
  bool lenient;   /* a base layer of --allow-unsafe-base: escaping entries warn */
  bool strict;    /* --strict-base: privileged entries are errors */
  char *warnings; /* those entries then, one per line */
  char **privileged; /* the privileged entries (tarcheck.h), when not STRICT */
  size_t n_privileged;
  bool known;     /* REC: this store read the blob through before */
  bool in_pass;   /* KNOWN, and read where it is by this run's pass: not hashed again */
  struct ib_readthrough rec;
};

/* *LINES with LINE added, one per line. */
static void
add_line (char **lines, const char *line)
{
  char *more = ib_xasprintf ("%s%s%s", *lines ? *lines : "", *lines ? "\n" : "", line);
  free (*lines);
  *lines = more;
}

struct pool
{
  struct ib_store *store;
  struct item *items;
  size_t n;
  size_t next;
  pthread_mutex_t lock;
  struct ib_progress *progress;
  int inflate_threads; /* for each layer read through (layer_reader.h) */
};

static void
on_bytes (void *data, unsigned long long n)
{
  ib_progress_add (data, n);
}

/* Entries that escape the root or lie are integrity errors too, one line
 * each (in a base layer that the caller allows them in, warnings); the
 * privileged ones are listed apart (errors when strict). */
static void
add_hazards (struct item *it, const char *const *h, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      char *line = ib_xasprintf ("layer %s: %s", it->desc.digest.s, h[i]);
      if (ib_tar_finding_kind (h[i]) != IB_TAR_ESCAPE && !it->strict)
        {
          it->privileged = ib_xrealloc (it->privileged, (it->n_privileged + 1) * sizeof (*it->privileged));
          it->privileged[it->n_privileged++] = line;
          continue;
        }
      add_line (it->lenient && ib_tar_finding_kind (h[i]) == IB_TAR_ESCAPE ? &it->warnings : &it->problem, line);
      free (line);
    }
}

/* A layer this store has read through before (readthrough.h): its bytes
 * hashed where they are, which says they are the bytes that were read;
 * its diff_id and hostile entries then are the record's.  The checks and
 * messages are the layer reader's, in its order.  A view's blob that this
 * run's file-list pass already read where it is (a store that never read
 * the image: the pass before this check) is not hashed again: that pass
 * checked its digest, size and diff_id on these very bytes, and wrote the
 * record (on the CUDA base, 3 s of a fresh imgverify's 39 went to hashing
 * 4.7 GB a second time).  A store's own blob is hashed: the question
 * there is whether the bytes on its disk are still those it read. */
static void
check_known_layer (struct pool *p, struct item *it)
{
  ib_error_t err = NULL;
  ib_digest got = it->desc.digest;
  uint64_t size = it->desc.size;
  const char *d = it->desc.digest.s;
  it->in_pass = ib_store_is_view (p->store) && ib_store_blob_trusted (p->store, &it->desc.digest);
  if (it->in_pass)
    ib_progress_add (p->progress, size);
  if (!it->in_pass && ib_store_hash_blob (p->store, &it->desc.digest, &got, &size, on_bytes, p->progress, &err) < 0)
    it->problem = ib_xstrdup (err->msg);
  else if (strcmp (got.s, d) != 0)
    it->problem = ib_xasprintf ("layer blob %s: content has digest %s", d, got.s);
  else if (size != it->desc.size)
    it->problem = ib_xasprintf ("layer blob %s: size is %llu, manifest says %llu", d, (unsigned long long) size,
                                (unsigned long long) it->desc.size);
  else if (strcmp (it->rec.diff_id.s, it->diff_id.s) != 0)
    it->problem = ib_xasprintf ("layer blob %s: uncompressed digest %s, config says diff_id %s", d,
                                it->rec.diff_id.s, it->diff_id.s);
  else
    {
      ib_store_mark_hashed (p->store, &it->desc.digest);
      add_hazards (it, (const char *const *) it->rec.hazards, it->rec.n_hazards);
    }
  ib_error_release (&err);
}

static void
check_layer (struct pool *p, struct item *it)
{
  if (it->known)
    {
      check_known_layer (p, it);
      return;
    }
  ib_error_t err = NULL;
  struct ib_layer_reader *r;
  if (ib_layer_reader_open_threads (p->store, &it->desc, &it->diff_id, p->inflate_threads, &r, &err) == 0)
    {
      ib_layer_reader_on_progress (r, on_bytes, p->progress);
      struct archive_entry *ae;
      int x;
      while ((x = ib_layer_reader_next (r, &ae, &err)) == 1)
        ;
      if (x == 0)
        ib_layer_reader_end (r, NULL, &err);
      size_t nh;
      const char *const *h = ib_layer_reader_hazards (r, &nh);
      if (err == NULL)
        add_hazards (it, h, nh);
      ib_layer_reader_free (r);
    }
  if (err)
    it->problem = ib_xstrdup (err->msg);
  ib_error_release (&err);
}

/* A manifest or config: small, read whole through the store (a view may
 * hold it in memory). */
static void
check_small_blob (struct pool *p, struct item *it)
{
  ib_error_t err = NULL;
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (ib_store_read_blob (p->store, &it->desc.digest, 64u << 20, &text, &len, &err) < 0)
    it->problem = ib_xstrdup (err->msg);
  else if (it->desc.size != UINT64_MAX && len != it->desc.size)
    it->problem = ib_xasprintf ("blob %s: size is %zu, descriptor says %llu", it->desc.digest.s, len,
                                (unsigned long long) it->desc.size);
  ib_progress_add (p->progress, len);
  ib_error_release (&err);
}

static void
check_blob (struct pool *p, struct item *it)
{
  if (it->path == NULL)
    {
      check_small_blob (p, it);
      return;
    }
  ib_error_t err = NULL;
  ib_digest got;
  uint64_t size = 0;
  if (ib_sha256_file (it->path, &got, &size, &err) < 0)
    it->problem = ib_xasprintf ("blob %s: %s", it->desc.digest.s, err->msg);
  else if (strcmp (got.s, it->desc.digest.s) != 0)
    it->problem = ib_xasprintf ("blob %s: content has digest %s", it->desc.digest.s, got.s);
  else if (it->desc.size != UINT64_MAX && size != it->desc.size)
    it->problem = ib_xasprintf ("blob %s: size is %llu, descriptor says %llu", it->desc.digest.s,
                                (unsigned long long) size, (unsigned long long) it->desc.size);
  ib_progress_add (p->progress, size);
  ib_error_release (&err);
}

static void *
worker (void *data)
{
  struct pool *p = data;
  for (;;)
    {
      pthread_mutex_lock (&p->lock);
      size_t i = p->next++;
      pthread_mutex_unlock (&p->lock);
      if (i >= p->n)
        return NULL;
      if (p->items[i].is_layer)
        check_layer (p, &p->items[i]);
      else
        check_blob (p, &p->items[i]);
    }
}

/* Layers this large are worth inflating on several threads (when they
 * have an inflate index): below, a layer is over before they start. */
#define BIG_LAYER (16ull << 20)

/* The threads each layer may inflate on: the pool's T threads shared by
 * the big layers, when there are fewer of them than T (one base layer of
 * most of the image's bytes); else one each, the layers themselves
 * keeping every thread busy. */
static int
inflate_threads (const struct item *items, size_t n, int t)
{
  int big = 0;
  for (size_t i = 0; i < n; i++)
    big += items[i].is_layer && !items[i].known && items[i].desc.size != UINT64_MAX
           && items[i].desc.size >= BIG_LAYER;
  return big > 0 && big < t ? t / big : 1;
}

/* What the pass costs, and why it is not the inflate alone: every layer is
 * inflated and both of its streams are hashed, the blob for its digest and
 * the tar for its diff_id.  On gen:30 (14 gzip layers, 14 GB, 30 GB of tar;
 * the 2-core Xeon of bench/RESULTS.md, SHA-NI at ~1.1 GB/s a core) that is
 * ~100 core-seconds of ISA-L (`igzip -dc` of the layers) and 44 GB of
 * SHA-256, ~40 more: 148 core-seconds were measured, and perf puts 93% of a
 * layer's in those two (61% inflate, 33% SHA-256), 4% in the kernel (read's
 * copy), 2% in libarchive, the tar checks and the threads.  The workers keep
 * 2 or more threads runnable 99% of the time, so on 2 cores the pass takes
 * that work over 2 (~74 s alone), not the inflate floor over 2 (50 s). */
static void
run_pool (struct ib_store *s, struct item *items, size_t n, int jobs, struct ib_report *report, const char *what)
{
  unsigned long long total = 0;
  for (size_t i = 0; i < n; i++)
    total += items[i].desc.size == UINT64_MAX ? 0 : items[i].desc.size;
  struct pool p = { .store = s, .items = items, .n = n, .progress = ib_progress_start (report, what, total) };
  pthread_mutex_init (&p.lock, NULL);
  int t = jobs > 0 ? jobs : ib_online_cpus ();
  p.inflate_threads = inflate_threads (items, n, t);
  if ((size_t) t > n)
    t = (int) (n ? n : 1);
  pthread_t *th = ib_xcalloc ((size_t) t, sizeof (*th));
  for (int i = 0; i < t; i++)
    pthread_create (&th[i], NULL, worker, &p);
  for (int i = 0; i < t; i++)
    pthread_join (th[i], NULL);
  free (th);
  pthread_mutex_destroy (&p.lock);
  ib_progress_end (p.progress);
}

/* Each line of LINES to FN. */
static void
report_lines (char *lines, bool is_error, ib_problem_fn fn, void *data)
{
  for (char *line = lines, *next; line; line = next)
    {
      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      fn (data, is_error, line);
    }
}

static void
report_items (struct item *items, size_t n, ib_problem_fn fn, void *data, struct ib_verify_stats *st)
{
  for (size_t i = 0; i < n; i++)
    {
      st->blobs++;
      st->bytes += items[i].desc.size == UINT64_MAX ? 0 : items[i].desc.size;
      st->bad += items[i].problem != NULL;
      st->layers_read += items[i].is_layer && !items[i].known;
      st->layers_known += items[i].known;
      st->layers_in_pass += items[i].in_pass;
      report_lines (items[i].warnings, false, fn, data);
      report_lines (items[i].problem, true, fn, data);
      st->privileged = ib_xrealloc (st->privileged, (st->n_privileged + items[i].n_privileged + 1)
                                                        * sizeof (*st->privileged));
      for (size_t k = 0; k < items[i].n_privileged; k++)
        st->privileged[st->n_privileged++] = items[i].privileged[k];
      free (items[i].privileged);
      free (items[i].warnings);
      free (items[i].problem);
      free (items[i].path);
      ib_readthrough_clear (&items[i].rec);
      ib_descriptor_clear (&items[i].desc);
    }
}

void
ib_verify_stats_clear (struct ib_verify_stats *st)
{
  for (size_t i = 0; i < st->n_privileged; i++)
    free (st->privileged[i]);
  free (st->privileged);
  st->privileged = NULL;
  st->n_privileged = 0;
}

static const char *const manifest_types[] = { IB_MT_OCI_MANIFEST, IB_MT_DOCKER_MANIFEST, NULL };
static const char *const config_types[] = { IB_MT_OCI_CONFIG, IB_MT_DOCKER_CONFIG, NULL };

static bool
one_of (const char *s, const char *const *list)
{
  for (int i = 0; s && list[i]; i++)
    if (strcmp (s, list[i]) == 0)
      return true;
  return false;
}

int
ib_verify_image (struct ib_store *s, const struct ib_image *img, const struct ib_verify_how *how,
                 struct ib_report *report, ib_problem_fn fn, void *data, struct ib_verify_stats *st, ib_error_t *err)
{
  (void) err;
  memset (st, 0, sizeof (*st));
  /* The manifest and config were read, digests checked, when IMG loaded. */
  if (!one_of (img->manifest.media_type, manifest_types))
    ib_problemf (fn, data, true, "manifest %s: media type `%s` is not an image manifest", img->manifest.digest.s,
             img->manifest.media_type);
  if (!one_of (img->config.media_type, config_types))
    ib_problemf (fn, data, true, "config %s: media type `%s` is not an image config", img->config.digest.s,
             img->config.media_type ? img->config.media_type : "(none)");
  const cJSON *os = cJSON_GetObjectItemCaseSensitive (img->config_json, "os");
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive (img->config_json, "architecture");
  if (!cJSON_IsString (os) || !cJSON_IsString (arch))
    ib_problemf (fn, data, true, "config %s: no os or architecture", img->config.digest.s);
  struct item *items = ib_xcalloc (img->n_layers + 2, sizeof (*items));
  size_t n = 0;
  for (size_t i = 0; i < img->n_layers; i++, n++)
    {
      ib_descriptor_copy (&items[n].desc, &img->layers[i]);
      items[n].diff_id = img->diff_ids[i];
      items[n].is_layer = true;
      items[n].lenient = i < how->lenient_layers;
      items[n].strict = how->strict;
      items[n].known = !how->full && items[n].desc.size != UINT64_MAX
                       && ib_readthrough_load (s, &items[n].desc.digest, &items[n].rec) == 1;
    }
  /* The bytes checked are S's own: a view reads the artifact where it is
   * (the layout's files, the archive's members), never the store's copy. */
  ib_descriptor_copy (&items[n++].desc, &img->config);
  ib_descriptor_copy (&items[n++].desc, &img->manifest);
  run_pool (s, items, n, how->jobs, report, "verify");
  report_items (items, n, fn, data, st);
  free (items);
  return 0;
}

static const char *
ref_name (const cJSON *entry)
{
  const cJSON *name = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (entry, "annotations"),
                                                        IB_ANNOTATION_REF_NAME);
  return cJSON_IsString (name) ? name->valuestring : NULL;
}

/* Each tag: its manifest, config and layers are all in the store. */
static void
check_closures (struct ib_store *s, ib_problem_fn fn, void *data)
{
  cleanup_free char *path = ib_path_join (ib_store_root (s), "index.json");
  cleanup_free char *text = NULL;
  if (ib_read_file (path, 64u << 20, &text, NULL, NULL) < 0)
    {
      ib_problemf (fn, data, true, "store `%s` has no readable index.json", ib_store_root (s));
      return;
    }
  cJSON *index = cJSON_Parse (text);
  const cJSON *m;
  cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive (index, "manifests"))
  {
    struct ib_descriptor d;
    ib_error_t err = NULL;
    const char *name = ref_name (m);
    if (ib_descriptor_from_json (m, &d, &err) < 0)
      {
        ib_problemf (fn, data, true, "index.json entry %s: %s", name ? name : "(untagged)", err->msg);
        ib_error_release (&err);
        continue;
      }
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive (m, "annotations");
    if (cJSON_GetObjectItemCaseSensitive (ann, IB_ANNOTATION_SUBJECT))
      {
        /* An artifact about an image (provenance): its blobs are there. */
        cleanup_free char *text = NULL;
        size_t len;
        if (ib_store_read_blob (s, &d.digest, 1 << 20, &text, &len, &err) < 0)
          ib_problemf (fn, data, true, "provenance artifact %s: %s", d.digest.s, err->msg);
        cJSON *am = text ? cJSON_ParseWithLength (text, len) : NULL;
        const cJSON *l;
        cJSON_ArrayForEach (l, cJSON_GetObjectItemCaseSensitive (am, "layers"))
        {
          struct ib_descriptor ld;
          bool parsed = ib_descriptor_from_json (l, &ld, NULL) == 0;
          if (!parsed || !ib_store_has_blob (s, &ld.digest))
            ib_problemf (fn, data, true, "provenance artifact %s: a blob is missing", d.digest.s);
          if (parsed)
            ib_descriptor_clear (&ld);
        }
        cJSON_Delete (am);
        ib_error_release (&err);
        ib_descriptor_clear (&d);
        continue;
      }
    struct ib_image *img = NULL;
    if (ib_image_load (s, &d, NULL, &img, &err) < 0)
      ib_problemf (fn, data, true, "tag %s: %s", name ? name : d.digest.s, err->msg);
    for (size_t i = 0; img && i < img->n_layers; i++)
      if (!ib_store_has_blob (s, &img->layers[i].digest))
        ib_problemf (fn, data, true, "tag %s: layer %s is missing from the store", name ? name : d.digest.s,
                 img->layers[i].digest.s);
    ib_error_release (&err);
    ib_image_free (img);
    ib_descriptor_clear (&d);
  }
  cJSON_Delete (index);
}

int
ib_verify_store (struct ib_store *s, struct ib_report *report, int jobs, ib_problem_fn fn, void *data,
                 struct ib_verify_stats *st, ib_error_t *err)
{
  memset (st, 0, sizeof (*st));
  cleanup_free char *dir = ib_path_join (ib_store_root (s), "blobs/sha256");
  DIR *d = opendir (dir);
  if (d == NULL)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", dir);
  struct item *items = NULL;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir (d)))
    {
      if (de->d_name[0] == '.')
        continue;
      items = ib_xrealloc (items, (n + 1) * sizeof (*items));
      struct item *it = &items[n++];
      memset (it, 0, sizeof (*it));
      cleanup_free char *digest = ib_xasprintf ("sha256:%s", de->d_name);
      it->path = ib_path_join (dir, de->d_name);
      struct stat stt;
      it->desc.size = stat (it->path, &stt) == 0 ? (uint64_t) stt.st_size : UINT64_MAX;
      if (ib_digest_check (digest, NULL) < 0)
        it->problem = ib_xasprintf ("`%s` in the store is not named by a digest", it->path);
      else
        strcpy (it->desc.digest.s, digest);
    }
  closedir (d);
  struct item *todo = ib_xcalloc (n + 1, sizeof (*todo));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (items[i].problem == NULL)
      todo[k++] = items[i];
  run_pool (s, todo, k, jobs, report, "verify store");
  for (size_t i = 0, j = 0; i < n; i++)
    if (items[i].problem == NULL)
      items[i] = todo[j++];
  free (todo);
  report_items (items, n, fn, data, st);
  free (items);
  check_closures (s, fn, data);
  return 0;
}
