/* One layer's file list: computed in one pass over the layer (its digests
 * checked, its regular files hashed and handed to the store's indexers),
 * or read from the cache (fscache.h). */
#include "layers/view/fsview.h"

#include <archive_entry.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/cpus.h"
#include "util/fsutil.h"
#include "layers/image/image.h"
#include "layers/view/fscache.h"
#include "layers/store/indexer.h"
#include "layers/read/layer_reader.h"
#include "layers/tar/tarpath.h"


void
ib_fs_list_free (struct ib_fs_list *l)
{
  if (l == NULL)
    return;
  for (size_t i = 0; i < l->n_hazards; i++)
    free (l->hazards[i]);
  free (l->hazards);
  free (l->e);
  ib_fs_strings_free (l->strings);
  free (l);
}

static void
add_hazard (struct ib_fs_list *l, const char *text)
{
  l->hazards = ib_xrealloc (l->hazards, (l->n_hazards + 1) * sizeof (*l->hazards));
  l->hazards[l->n_hazards++] = ib_xstrdup (text);
}

static int
cmp_entry (const void *a, const void *b)
{
  return strcmp (((const struct ib_fs_entry *) a)->path, ((const struct ib_fs_entry *) b)->path);
}

static struct ib_fs_entry *
list_append (struct ib_fs_list *l, size_t *cap)
{
  if (l->n == *cap)
    {
      *cap = *cap ? *cap * 2 : 256;
      l->e = ib_xrealloc (l->e, *cap * sizeof (*l->e));
    }
  struct ib_fs_entry *e = &l->e[l->n++];
  memset (e, 0, sizeof (*e));
  return e;
}

static char
type_of (struct archive_entry *ae)
{
  if (archive_entry_hardlink (ae))
    return IB_FS_HARDLINK;
  switch (archive_entry_filetype (ae))
    {
    case AE_IFREG:
      return IB_FS_FILE;
    case AE_IFDIR:
      return IB_FS_DIR;
    case AE_IFLNK:
      return IB_FS_SYMLINK;
    default:
      return IB_FS_OTHER;
    }
}

/* Whiteouts are files named ".wh.X" (delete X) or ".wh..wh..opq" (opaque
 * parent); they are turned into markers on the path they act on. */
static void
classify_whiteout (struct ib_fs_entry *e)
{
  char *slash = strrchr (e->path, '/');
  char *base = slash ? slash + 1 : e->path;
  if (strncmp (base, ".wh.", 4) != 0)
    return;
  if (strcmp (base, ".wh..wh..opq") == 0)
    {
      e->type = IB_FS_OPAQUE;
      if (slash)
        *slash = '\0';
      else
        e->path[0] = '\0';
      return;
    }
  e->type = IB_FS_WHITEOUT;
  for (char *c = base; (*c = c[4]) != '\0'; c++)
    ;
}

/* The buffers a layer's file data is read into.  Each file's digest (but
 * a small file's, DATA_INLINE) is taken on the layer reader's hash worker,
 * beside the blob's and the tar's (perf of a cold build over the CUDA
 * base, 2026-12-06: on the thread that
 * also inflates it was a sixth of the build's CPU, and that thread is the
 * one the build waits for); a buffer is read into again only once its
 * bytes are hashed. */
#define DATA_SLOTS 3
#define DATA_SIZE (1u << 20)
/* A file this small is hashed here: handing it to the worker would make
 * this thread wait, at the file's end, for every job queued before it
 * (the blob's and the tar's), once per file of a tree of small ones. */
#define DATA_INLINE (64u << 10)
struct data_ring
{
  char *buf[DATA_SLOTS];
  uint64_t ticket[DATA_SLOTS];
  unsigned i;
};

/* Hash a regular file's content and, when the store's indexers want it
 * (indexer.h), hand it to them in the same read. */
static int
hash_entry_data (struct ib_layer_reader *r, struct ib_fs_entry *e, struct ib_fs_strings **strings,
                 struct data_ring *ring, struct ib_index_pass *pass, ib_error_t *err)
{
  struct ib_hash_worker *hw = ib_layer_reader_hash_worker (r);
  ib_sha256 *h = ib_sha256_new ();
  struct ib_index_file ixf;
  bool indexing = false, first = true, here = e->size <= DATA_INLINE;
  uint64_t last = 0;
  for (;;)
    {
      unsigned i = ring->i = (ring->i + 1) % DATA_SLOTS;
      ib_hash_worker_wait (hw, ring->ticket[i]);
      char *buf = ring->buf[i];
      ssize_t n = ib_layer_reader_data (r, buf, DATA_SIZE, err);
      if (n < 0)
        {
          ib_hash_worker_wait (hw, last); /* H is the worker's until then */
          ib_sha256_free (h);
          if (indexing)
            ib_index_file_abort (&ixf);
          return ib_error_wrap (err, "read `%s`", e->path);
        }
      if (first && pass)
        indexing = ib_index_file_begin (&ixf, pass, e->path, e->size, (const unsigned char *) buf, (size_t) n);
      first = false;
      if (n == 0)
        break;
      if (here)
        {
          ring->ticket[i] = 0; /* waited for above */
          ib_sha256_update (h, buf, (size_t) n);
        }
      else
        last = ring->ticket[i] = ib_hash_worker_submit (hw, h, buf, (size_t) n);
      if (indexing)
        ib_index_file_feed (&ixf, buf, (size_t) n);
    }
  ib_hash_worker_wait (hw, last); /* every byte hashed before the digest is taken */
  ib_digest d;
  ib_sha256_final (h, &d);
  ib_sha256_free (h);
  e->digest = ib_fs_strings_add (strings, ib_digest_hex (d.s), 64);
  if (indexing)
    ib_index_file_end (&ixf, e->digest);
  return 0;
}

char *
ib_fs_spool_dir (struct ib_store *s)
{
  size_t n_ix;
  ib_store_indexers (s, &n_ix);
  char *dir = NULL;
  if (n_ix && ib_store_cache_dir (s, "spool", &dir, NULL) < 0)
    dir = NULL;
  return dir;
}

/* The pass of layer BLOB: its indexers' calls go to SHARED (several
 * layers read at once), else to a pass of its own. */
static int
compute_list (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at,
              const ib_digest *diff_id, struct ib_index_pass *shared, struct ib_fs_list *l,
              struct ib_blob_writer **copy, ib_error_t *err)
{
  struct ib_layer_reader *r;
  if ((at ? ib_layer_reader_open_at (s, blob, at, diff_id, &r, err) : ib_layer_reader_open (s, blob, diff_id, &r, err))
      < 0)
    return -1;
  size_t cap = 0;
  /* Freed after the reader: its worker may hold them until then. */
  struct data_ring ring = { 0 };
  for (unsigned i = 0; i < DATA_SLOTS; i++)
    ring.buf[i] = ib_xmalloc (DATA_SIZE);
  /* Its calls end before the list does: a gate reads their records. */
  struct ib_index_pass *own = NULL;
  if (shared == NULL)
    {
      cleanup_free char *spool_dir = ib_fs_spool_dir (s);
      own = spool_dir ? ib_index_pass_start (s, spool_dir) : NULL;
    }
  struct ib_index_pass *pass = shared ? shared : own;
  struct archive_entry *ae;
  int x;
  while ((x = ib_layer_reader_next (r, &ae, err)) == 1)
    {
      cleanup_free char *path = ib_clean_tar_path (archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "");
      if (path == NULL)
        continue; /* the root folder itself, or a hostile ".." entry that no extractor may follow */
      struct ib_fs_entry *e = list_append (l, &cap);
      e->path = ib_fs_strings_add (&l->strings, path, strlen (path));
      e->digest = "";
      e->type = type_of (ae);
      e->mode = archive_entry_perm (ae);
      e->size = (uint64_t) archive_entry_size (ae);
      if (e->type == IB_FS_FILE && archive_entry_sparse_count (ae) == 0)
        e->at = ib_layer_reader_data_at (r) + 1;
      const char *link = e->type == IB_FS_HARDLINK ? archive_entry_hardlink (ae) : archive_entry_symlink (ae);
      if (link)
        e->link = ib_fs_strings_add (&l->strings, link, strlen (link));
      if (e->type == IB_FS_FILE && hash_entry_data (r, e, &l->strings, &ring, pass, err) < 0)
        {
          x = -1;
          break;
        }
      classify_whiteout (e);
    }
  ib_index_pass_finish (own);
  if (x == 0)
    x = ib_layer_reader_end (r, NULL, err);
  if (x == 0 && copy)
    *copy = ib_layer_reader_take_copy (r);
  size_t nh;
  const char *const *h = ib_layer_reader_hazards (r, &nh);
  for (size_t i = 0; x == 0 && i < nh; i++)
    add_hazard (l, h[i]);
  ib_layer_reader_free (r);
  for (unsigned i = 0; i < DATA_SLOTS; i++)
    free (ring.buf[i]);
  if (x < 0)
    return -1;
  ib_qsort (l->e, l->n, sizeof (*l->e), cmp_entry);
  return 0;
}

/* A path as one field of a line of text (symbol-check/link-check/memo.c's): '\\', '\t'
 * and '\n' escaped. */
void
ib_fs_put_escaped (FILE *f, const char *s)
{
  for (; *s; s++)
    {
      if (*s == '\\')
        fputs ("\\\\", f);
      else if (*s == '\n')
        fputs ("\\n", f);
      else if (*s == '\t')
        fputs ("\\t", f);
      else
        fputc (*s, f);
    }
}

/* Undo ib_fs_put_escaped: S in place, and a copy of it. */
char *
ib_fs_unescape (char *s)
{
  /* Most paths have nothing escaped: copied whole, not byte by byte. */
  char *o = strchr (s, '\\');
  if (o == NULL)
    return ib_xstrdup (s);
  for (char *c = o; *c; c++)
    {
      if (*c == '\\' && c[1])
        {
          c++;
          *o++ = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
        }
      else
        *o++ = *c;
    }
  *o = '\0';
  return ib_xstrdup (s);
}

static int
list_layer (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at, const ib_digest *diff_id,
            struct ib_index_pass *shared, struct ib_fs_list **out, struct ib_blob_writer **copy, ib_error_t *err)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "files", &dir, err) < 0)
    return -1;
  cleanup_free char *cache = ib_path_join (dir, ib_digest_hex (diff_id->s));
  struct ib_fs_list *l = ib_xcalloc (1, sizeof (*l));
  if (ib_store_blob_trusted (s, &blob->digest) && ib_fs_cache_load (cache, diff_id, l))
    {
      *out = l;
      return 0;
    }
  ib_fs_list_free (l);
  l = ib_xcalloc (1, sizeof (*l));
  if (compute_list (s, blob, at, diff_id, shared, l, copy, err) < 0 || ib_fs_cache_save (cache, diff_id, l, err) < 0)
    {
      ib_fs_list_free (l);
      return -1;
    }
  /* The list stays as computed.  Read back mapped from its cache instead
   * (its strings file pages, its digests given back), the peak RSS was no
   * lower but higher, the mapped pages counting too: 61,152 KiB against
   * 53,368 over 480,000 entries in 8 layers, 48,772 against 48,344 for a
   * cold build over the CUDA base.  Nor does malloc_trim after each pass
   * lower it (the CUDA base 48,772 / 48,728; 160,000 entries 31,116 /
   * 30,436): the next pass reuses the heap. */
  *out = l;
  return 0;
}

int
ib_fs_list_layer_in (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id,
                     struct ib_index_pass *shared, struct ib_fs_list **out, ib_error_t *err)
{
  return list_layer (s, blob, NULL, diff_id, shared, out, NULL, err);
}

int
ib_fs_list_layer_at (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at,
                     const ib_digest *diff_id, struct ib_index_pass *shared, struct ib_fs_list **out,
                     struct ib_blob_writer **copy, ib_error_t *err)
{
  *copy = NULL;
  return list_layer (s, blob, at, diff_id, shared, out, copy, err);
}

int
ib_fs_list_layer (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id,
                  struct ib_fs_list **out, ib_error_t *err)
{
  return list_layer (s, blob, NULL, diff_id, NULL, out, NULL, err);
}

/* ---- layers listed at once ------------------------------------------------ */

/* Layers read at once.  One layer's pass keeps a core and a third busy
 * (inflating and indexing on one, its digests on a thread of their own,
 * GPU code on the indexers' threads), not two: over CUDA's libraries the
 * two layers of the `gpu` bench, listed one after the other, kept 135% of
 * two cores busy.  Each pass holds its rings and buffers (the indexers'
 * threads are shared), so the count is bounded whatever the machine. */
#define AHEAD_MAX 4

struct ahead
{
  struct ib_store *s;
  const struct ib_image *img;
  const size_t *todo;
  size_t n_todo, next;
  struct ib_index_pass *pass;
  pthread_mutex_t lock;
};

static void *
ahead_thread (void *data)
{
  struct ahead *a = data;
  pthread_setname_np (pthread_self (), "ib-list-ahead");
  for (;;)
    {
      pthread_mutex_lock (&a->lock);
      size_t k = a->next < a->n_todo ? a->todo[a->next++] : SIZE_MAX;
      pthread_mutex_unlock (&a->lock);
      if (k == SIZE_MAX)
        return NULL;
      struct ib_fs_list *l = NULL;
      ib_error_t e = NULL;
      /* A layer that cannot be listed is the caller's own read to report. */
      if (ib_fs_list_layer_in (a->s, &a->img->layers[k], &a->img->diff_ids[k], a->pass, &l, &e) < 0)
        ib_error_release (&e);
      ib_fs_list_free (l);
    }
}

bool
ib_fs_list_cached (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "files", &dir, NULL) < 0)
    return false;
  cleanup_free char *cache = ib_path_join (dir, ib_digest_hex (diff_id->s));
  return ib_store_blob_trusted (s, &blob->digest) && access (cache, F_OK) == 0;
}

void
ib_fs_list_layers_ahead (struct ib_store *s, const struct ib_image *img, size_t first)
{
  cleanup_free size_t *todo = ib_xcalloc (img->n_layers + 1, sizeof (*todo));
  size_t n_todo = 0;
  for (size_t k = first; k < img->n_layers; k++)
    {
      /* A layer twice in the image (an empty one, say) is read once. */
      bool again = false;
      for (size_t i = 0; i < n_todo && !again; i++)
        again = strcmp (img->layers[todo[i]].digest.s, img->layers[k].digest.s) == 0;
      if (!again && !ib_fs_list_cached (s, &img->layers[k], &img->diff_ids[k]))
        todo[n_todo++] = k;
    }
  int cpus = ib_online_cpus ();
  size_t jobs = cpus < 2 ? 1 : cpus / 2 < 2 ? 2 : cpus / 2 > AHEAD_MAX ? AHEAD_MAX : (size_t) cpus / 2;
  if (jobs > n_todo)
    jobs = n_todo;
  if (jobs < 2)
    return; /* one layer, or one core: the caller's reads are as fast */
  cleanup_free char *spool_dir = ib_fs_spool_dir (s);
  struct ahead a = { .s = s, .img = img, .todo = todo, .n_todo = n_todo };
  a.pass = spool_dir ? ib_index_pass_start (s, spool_dir) : NULL;
  pthread_mutex_init (&a.lock, NULL);
  pthread_t th[AHEAD_MAX];
  size_t made = 0;
  while (made < jobs && pthread_create (&th[made], NULL, ahead_thread, &a) == 0)
    made++;
  for (size_t i = 0; i < made; i++)
    pthread_join (th[i], NULL);
  ib_index_pass_finish (a.pass);
  pthread_mutex_destroy (&a.lock);
  malloc_trim (0); /* the passes' heap, given back once they are all done */
}
