/* The file-list pass's indexers (layers/store/indexer.h): a concurrent indexer's
 * calls run on the pass's threads, once for each file, each with a spool
 * that reads back as the file, and every one has returned before the list
 * does; the others run in the pass itself.  Spools are reused: a pass
 * makes a few files, not one for each file it indexes, and a spool that
 * held a longer file reads back as the shorter one written after it. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "layers/tar/tarlayer.h"
#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "util/cleanup.h"
#include "util/cpus.h"
#include "util/fsutil.h"
#include "layers/view/fsview.h"
#include "tests/unit/test.h"

#define FILES 12

struct seen
{
  pthread_t pass; /* the thread that lists the layer */
  pthread_mutex_t lock; /* the worker's calls may run at once */
  size_t n, off_thread, same_bytes;
  bool path_seen[FILES];
  char spool[FILES][512]; /* the distinct spool files seen, by name */
  size_t n_spools;
};

static enum ib_index_need
wants_all (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data, (void) path, (void) size, (void) head, (void) n_head;
  return IB_INDEX_FD;
}

static void
record (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  (void) text, (void) len;
  struct seen *x = data;
  /* The last file's call outlasts the pass's end: a list that did not
   * wait for its worker would be returned before it returns. */
  char last[32];
  snprintf (last, sizeof (last), "opt/f%02d.so", FILES - 1);
  if (strcmp (path, last) == 0)
    nanosleep (&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
  char buf[4096];
  ssize_t got = pread (fd, buf, sizeof (buf), 0);
  /* A spool's name, unlinked: the same name is the same file written
   * again (an inode's number may come back for a new file). */
  char link[64], name[512];
  snprintf (link, sizeof (link), "/proc/self/fd/%d", fd);
  ssize_t nl = readlink (link, name, sizeof (name) - 1);
  name[nl > 0 ? nl : 0] = '\0';
  ib_digest d;
  if (got >= 0)
    ib_sha256_buf (buf, (size_t) got, &d);
  unsigned k;
  pthread_mutex_lock (&x->lock);
  x->same_bytes += got >= 0 && strcmp (d.s + 7, digest) == 0;
  x->off_thread += !pthread_equal (pthread_self (), x->pass);
  if (sscanf (path, "opt/f%02u.so", &k) == 1 && k < FILES)
    x->path_seen[k] = true;
  bool known = false;
  for (size_t i = 0; nl > 0 && i < x->n_spools; i++)
    known |= strcmp (x->spool[i], name) == 0;
  if (nl > 0 && !known && x->n_spools < FILES)
    snprintf (x->spool[x->n_spools++], sizeof (x->spool[0]), "%s", name);
  x->n++;
  pthread_mutex_unlock (&x->lock);
}

void
indexer_concurrent_calls_end_before_the_list (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_layer_entry e[FILES];
  char names[FILES][32], text[FILES][2048];
  for (size_t i = 0; i < FILES; i++)
    {
      /* Each shorter than the one before, in the layer's order. */
      snprintf (names[i], sizeof (names[i]), "opt/f%02zu.so", i);
      int len = snprintf (text[i], sizeof (text[i]), "file %zu\n", i);
      memset (text[i] + len, 'x', (FILES - i) * 100);
      text[i][len + (int) (FILES - i) * 100] = '\0';
      char src[32];
      snprintf (src, sizeof (src), "src/f%zu", i);
      e[i] = (struct ib_layer_entry){ .path = names[i], .type = IB_ENTRY_FILE, .mode = -1 };
      e[i].source = (char *) test_write (test_tmpdir (), src, text[i]);
    }
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 6 };
  struct ib_layer_result r = { 0 };
  CHECK (t, ib_layer_write (s, e, FILES, &o, &r, &err) == 0);
  struct seen con = { .pass = pthread_self (), .lock = PTHREAD_MUTEX_INITIALIZER };
  struct seen in_pass = { .pass = pthread_self (), .lock = PTHREAD_MUTEX_INITIALIZER };
  struct ib_indexer a = { "concurrent", wants_all, record, &con, true };
  struct ib_indexer b = { "in-pass", wants_all, record, &in_pass, false };
  ib_store_add_indexer (s, &a);
  ib_store_add_indexer (s, &b);
  struct ib_fs_list *l = NULL;
  CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &l, &err) == 0);
  CHECK (t, l && l->n == FILES + 1); /* and opt/ */
  /* Every call returned before the list did, on the worker, once a file. */
  CHECK (t, con.n == FILES);
  CHECK (t, con.off_thread == FILES);
  CHECK (t, con.same_bytes == FILES);
  for (size_t i = 0; i < FILES; i++)
    CHECK (t, con.path_seen[i]);
  /* The other indexer's calls, in the pass, with the same spool. */
  CHECK (t, in_pass.n == FILES && in_pass.off_thread == 0 && in_pass.same_bytes == FILES);
  /* A few spools, each written again: two running, one waiting, one
   * being filled is the most a pass has out at once. */
  CHECK (t, con.n_spools >= 1 && con.n_spools <= 4);
  ib_fs_list_free (l);
  ib_descriptor_clear (&r.desc);
  ib_store_free (s);
}

void
indexer_worker_only_for_a_concurrent_indexer (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct seen x = { .pass = pthread_self (), .lock = PTHREAD_MUTEX_INITIALIZER };
  struct ib_indexer a = { "in-pass", wants_all, record, &x, false };
  struct ib_indexer b = { "concurrent", wants_all, record, &x, true };
  /* No indexer, or none concurrent: no thread is made for a pass. */
  struct ib_index_pass *p = ib_index_pass_start (s, test_tmpdir ());
  CHECK (t, ib_index_pass_threads (p) == 0);
  ib_index_pass_finish (p);
  ib_store_add_indexer (s, &a);
  p = ib_index_pass_start (s, test_tmpdir ());
  CHECK (t, ib_index_pass_threads (p) == 0);
  ib_index_pass_finish (p);
  ib_store_add_indexer (s, &b);
  p = ib_index_pass_start (s, test_tmpdir ());
  CHECK (t, ib_index_pass_threads (p) > 0);
  ib_index_pass_finish (p);
  ib_store_free (s);
}

/* ---- layers listed at once ------------------------------------------------ */

struct turns
{
  pthread_mutex_t lock;
  int inside, most_inside;
  pthread_t threads[8];
  size_t n_threads, calls;
};

static enum ib_index_need
wants_text (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data, (void) path, (void) size, (void) head, (void) n_head;
  return IB_INDEX_TEXT;
}

/* A call that lasts: two made at once, from two layers' passes, would be
 * seen inside together. */
static void
take_turn (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  (void) path, (void) digest, (void) text, (void) len, (void) fd;
  struct turns *x = data;
  pthread_mutex_lock (&x->lock);
  x->inside++;
  x->most_inside = x->inside > x->most_inside ? x->inside : x->most_inside;
  bool known = false;
  for (size_t i = 0; i < x->n_threads; i++)
    known |= pthread_equal (x->threads[i], pthread_self ());
  if (!known && x->n_threads < 8)
    x->threads[x->n_threads++] = pthread_self ();
  x->calls++;
  pthread_mutex_unlock (&x->lock);
  nanosleep (&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
  pthread_mutex_lock (&x->lock);
  x->inside--;
  pthread_mutex_unlock (&x->lock);
}

void
indexer_layers_listed_at_once_take_turns_in_the_pass (struct test_ctx *t)
{
  if (ib_online_cpus () < 2)
    return; /* one CPU: layers are listed one at a time, by the caller */
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  enum { LAYERS = 3, PER = 4 };
  struct ib_descriptor desc[LAYERS];
  ib_digest diff_ids[LAYERS];
  for (size_t k = 0; k < LAYERS; k++)
    {
      struct ib_layer_entry e[PER];
      char names[PER][32], src[PER][32], text[PER][32];
      for (size_t i = 0; i < PER; i++)
        {
          snprintf (names[i], sizeof (names[i]), "opt/l%zu/f%zu.txt", k, i);
          snprintf (src[i], sizeof (src[i]), "src-l%zu-f%zu", k, i);
          snprintf (text[i], sizeof (text[i]), "layer %zu file %zu\n", k, i);
          e[i] = (struct ib_layer_entry){ .path = names[i], .type = IB_ENTRY_FILE, .mode = -1 };
          e[i].source = (char *) test_write (test_tmpdir (), src[i], text[i]);
        }
      struct ib_layer_options o = { .mtime = 0, .gzip_level = 6 };
      struct ib_layer_result r = { 0 };
      CHECK (t, ib_layer_write (s, e, PER, &o, &r, &err) == 0);
      desc[k] = r.desc;
      diff_ids[k] = r.diff_id;
    }
  struct turns x = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct ib_indexer ix = { "turns", wants_text, take_turn, &x, false };
  ib_store_add_indexer (s, &ix);
  struct ib_image img = { .n_layers = LAYERS, .layers = desc, .diff_ids = diff_ids };
  ib_fs_list_layers_ahead (s, &img, 0);
  /* Every layer listed and cached, on threads of their own, at once... */
  for (size_t k = 0; k < LAYERS; k++)
    CHECK (t, ib_fs_list_cached (s, &desc[k], &diff_ids[k]));
  CHECK (t, x.calls == LAYERS * PER);
  CHECK (t, x.n_threads >= 2);
  for (size_t i = 0; i < x.n_threads; i++)
    CHECK (t, !pthread_equal (x.threads[i], pthread_self ()));
  /* ...and the calls made in their passes one at a time. */
  CHECK (t, x.most_inside == 1);
  for (size_t k = 0; k < LAYERS; k++)
    ib_descriptor_clear (&desc[k]);
  ib_store_free (s);
}
