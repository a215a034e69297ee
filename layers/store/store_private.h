/* The inside of struct ib_store, shared by store.c (a store on disk) and
 * store_view.c (an artifact read in place).  Nothing outside those two
 * files includes this header. */
#ifndef IB_STORE_PRIVATE_H
#define IB_STORE_PRIVATE_H

#include <pthread.h>

#include "layers/store/indexer.h"
#include "layers/store/store.h"

/* A blob of a view: LENGTH bytes at OFFSET of PATH (an archive member), or
 * BYTES held in memory (a manifest made up for a classic docker-archive). */
struct ib_view_blob
{
  ib_digest digest;
  char *path;
  uint64_t offset, length;
  char *bytes;
};

struct ib_store_view
{
  char *source;       /* the layout folder or archive file, for messages */
  char *layout_blobs; /* a layout's blobs/sha256, or NULL */
  struct ib_view_blob *blobs;
  size_t n_blobs;
  cJSON *index; /* the artifact's index, in memory: tags never reach its disk */
  pthread_mutex_t lock;
  ib_digest *hashed; /* blobs whose bytes this run has hashed */
  size_t n_hashed;
  char *owned_file; /* a temporary file behind the ranges, removed at the end */
};

struct ib_store
{
  char *root;  /* the layout; for a view, the local store that holds the caches */
  char *blobs; /* root/blobs/sha256 */
  struct ib_store_view *view; /* NULL: a store on disk */
  int users_fd; /* imgbuild/users.lock, held shared while open (store_gc.c); -1 for a view */
  const struct ib_indexer *indexers[IB_MAX_INDEXERS]; /* fed by the file-list passes (indexer.h) */
  size_t n_indexers;
};

/* The view's side of store.c's functions. */
const struct ib_view_blob *ib_view_find (const struct ib_store_view *v, const ib_digest *d);
int ib_view_locate (const struct ib_store_view *v, const ib_digest *d, struct ib_blob_loc *out, ib_error_t *err);
void ib_view_free (struct ib_store_view *v);

#endif
