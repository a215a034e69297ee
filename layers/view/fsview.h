/* The merged file system of an image, without extracting it: each layer's
 * file list (type, mode, size, sha256 of regular files, link target, and its
 * whiteouts) is computed once, while the layer's digests are checked, and
 * cached in the store by diff_id, which never changes.  A view stacks the
 * lists of an image's layers with OCI whiteout rules (".wh.NAME" deletes
 * NAME and all under it, ".wh..wh..opq" empties a folder of what the lower
 * layers put there), so the checks of a thin build cost nothing per base
 * byte once the base has been seen. */
#ifndef IB_FSVIEW_H
#define IB_FSVIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "layers/image/image.h"
#include "layers/store/store.h"

enum ib_fs_type
{
  IB_FS_FILE = 'f',
  IB_FS_DIR = 'd',
  IB_FS_SYMLINK = 'l',
  IB_FS_HARDLINK = 'h',
  IB_FS_OTHER = 'o',
  IB_FS_WHITEOUT = 'w', /* only in a layer's list: PATH is deleted */
  IB_FS_OPAQUE = 'O',   /* only in a layer's list: PATH's lower content is hidden */
};

struct ib_fs_entry
{
  char *path;      /* clean, relative: "usr/lib/x.so" */
  char *link;      /* symlink or hardlink target, else NULL */
  uint64_t size;
  unsigned mode;
  int layer;       /* in a view: the index of the layer that provides it */
  char type;       /* enum ib_fs_type */
  /* sha256 hex of a regular file's content, else ""; never NULL in a list
   * of ib_fs_list_layer or in a view (a list a caller makes may leave it
   * NULL for "none": pushed on a view, it reads "") */
  const char *digest;
  /* A regular file's data: one more than its offset in its layer's tar
   * stream (layers/read/layer_seek.h); 0 when not known (a list a caller
   * made, a sparse file). */
  uint64_t at;
};

/* Where the paths and link targets of a list or a view live: blocks freed
 * with their owner, never a string at a time. */
struct ib_fs_strings;

struct ib_fs_list
{
  size_t n;
  struct ib_fs_entry *e; /* sorted by path */
  size_t n_hazards;      /* hostile entries (tarcheck.h), "entry `NAME`: WHY" */
  char **hazards;
  /* The entries' strings, for a list of ib_fs_list_layer; NULL for a list
   * its caller made, whose strings stay the caller's. */
  struct ib_fs_strings *strings;
};

/* The file list of one layer of S, computed (and the layer's digests
 * verified), or from the cache once the blob is trusted (a store's blob, or
 * a view's that this run hashed: see ib_store_blob_trusted). */
int ib_fs_list_layer (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id,
                      struct ib_fs_list **out, ib_error_t *err);
void ib_fs_list_free (struct ib_fs_list *l);
/* The same, the indexers' calls of the pass made in PASS (layers/store/indexer.h:
 * several layers read at once share one; NULL: a pass of its own), for a
 * thread of several that list layers at once: the heap is not trimmed at
 * the end (the thread that started them does it once they are done). */
struct ib_index_pass;
int ib_fs_list_layer_in (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id,
                         struct ib_index_pass *pass, struct ib_fs_list **out, ib_error_t *err);
/* The same, BLOB's bytes read at AT (not in S yet: a pull from another
 * layout lists a layer from the source, and its read copies them,
 * ib_layer_reader_open_at); the list is checked and cached in S as a list
 * of S's own blob is.  *COPY: the writer of the bytes read, found to be
 * BLOB, for the caller to commit (ib_blob_writer_commit_hashed) or abort;
 * NULL when nothing was read (a list from the cache) or on error. */
int ib_fs_list_layer_at (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at,
                         const ib_digest *diff_id, struct ib_index_pass *shared, struct ib_fs_list **out,
                         struct ib_blob_writer **copy, ib_error_t *err);
/* Whether BLOB's list is in the cache for ib_fs_list_layer to take (its
 * blob trusted and the file there; whether it loads is the read's to
 * find): a question that loads nothing. */
bool ib_fs_list_cached (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *diff_id);
/* The folder of S's indexers' spools, NULL when S has no indexer (or the
 * folder cannot be made: no indexing, the gates read for themselves). */
char *ib_fs_spool_dir (struct ib_store *s);
/* Compute and cache, several at once, the lists of IMG's layers from
 * number FIRST on that are not cached yet, so that ib_fs_list_layer then
 * reads each from the cache.  A layer that cannot be listed is left as it
 * was: the caller's own ib_fs_list_layer reads it and says why.  Nothing is
 * done for one layer, or on one CPU. */
void ib_fs_list_layers_ahead (struct ib_store *s, const struct ib_image *img, size_t first);


struct ib_fsview;

struct ib_fsview *ib_fsview_new (void);
/* Stack LIST on top of the view as layer number LAYER; its entries and
 * strings are copied, LIST stays the caller's. */
void ib_fsview_push (struct ib_fsview *v, const struct ib_fs_list *list, int layer);
/* The view of a whole image, every layer's list from the store. */
int ib_fsview_of_image (struct ib_store *s, const struct ib_image *img, struct ib_fsview **out, ib_error_t *err);
/* A judge of each layer's hazards (as ib_fsview_hazards gives them) as the
 * layer is stacked, in order: a negative return stops there, and no layer
 * above it is read.  The lowest layer is then read alone first: a
 * distribution's base system, where its setuid files and devices are, is
 * judged after its own bytes, not after every layer of the image.  (A view
 * kept whole in the store is judged by no one: every layer was read.) */
struct ib_fsview_judge
{
  int (*layer) (void *data, size_t layer, const char *const *hazards, size_t n, ib_error_t *err);
  void *data;
};
int ib_fsview_of_image_judged (struct ib_store *s, const struct ib_image *img, const struct ib_fsview_judge *judge,
                               struct ib_fsview **out, ib_error_t *err);
/* Stack the layers of IMG from number FIRST on, with their hazards: V is
 * the view of IMG's layers below FIRST (a base's view, for the image built
 * over it). */
int ib_fsview_push_layers (struct ib_fsview *v, struct ib_store *s, const struct ib_image *img, size_t first,
                           ib_error_t *err);
const struct ib_fs_entry *ib_fsview_lookup (const struct ib_fsview *v, const char *path);
/* The hostile entries of the image's layers (tarcheck.h), each "layer
 * DIGEST: entry `NAME`: WHY"; *N is their count. */
const char *const *ib_fsview_hazards (const struct ib_fsview *v, size_t *n);
size_t ib_fsview_count (const struct ib_fsview *v);
/* E with its symlinks followed as the kernel follows them
 * (ib_fsview_resolve of its path: ".." in a target and linked folders
 * taken) to a regular file of the view; NULL when they lead nowhere. */
const struct ib_fs_entry *ib_fsview_follow (const struct ib_fsview *v, const struct ib_fs_entry *e);
/* PATH ("/usr/lib/../lib64/x.so", absolute or relative to the root) as the
 * kernel resolves it inside the image: symlinks followed in every
 * component (an absolute target starts again at the image's root, never
 * outside it), ".." taken after the folder it follows is resolved, hard
 * links to the entry they name; at most 40 links.  The entry reached (any
 * type), and in *CANON (malloc'd, may be NULL) its clean view path; NULL
 * when the path leads nowhere. */
const struct ib_fs_entry *ib_fsview_resolve (const struct ib_fsview *v, const char *path, char **canon);
/* The regular files whose absolute path ("/usr/lib/x.so") matches the shell
 * glob PATTERN ('*' also crosses '/'), symlinks followed, each once, in path
 * order.  The folders of the pattern's literal head are resolved first as
 * the kernel resolves them (ib_fsview_resolve): a pattern under
 * /lib/x86_64-linux-gnu finds the files of usr/lib/x86_64-linux-gnu when
 * /lib links to usr/lib.
 * *OUT is malloc'd; returns the count. */
size_t ib_fsview_glob (const struct ib_fsview *v, const char *pattern, const struct ib_fs_entry ***out);
/* The same for several patterns: the files of the first, then those of the
 * second not found already, and so on. */
size_t ib_fsview_glob_all (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                           const struct ib_fs_entry ***out);
/* Each pattern's files as ib_fsview_glob finds them: OUT[P] (malloc'd)
 * and N_OUT[P] for PATTERNS[P].  One walk of the view for all of them. */
void ib_fsview_glob_each (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                          const struct ib_fs_entry ***out, size_t *n_out);
/* The entries themselves (any type, links not followed) whose absolute
 * path matches one of PATTERNS, in path order, each once: *OUT malloc'd;
 * their count.  A walk that picks entries by name, without walking: over
 * a base read in place, what a pattern that starts with a wildcard
 * matches in the base is kept beside it (fsglob.c). */
size_t ib_fsview_match (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                        const struct ib_fs_entry ***out);
/* The view's entry I, in path order.  A walk gives back, every 8,192
 * entries, the pages of the view's mapped lists that it read: its entries'
 * strings stay valid, read again from the files when needed. */
const struct ib_fs_entry *ib_fsview_at (const struct ib_fsview *v, size_t i);
/* The path of entry I, its entry not made: a walk that picks entries by
 * name tests the name first (a base's view read in place makes an entry
 * of a record only when it is read: fscache.h). */
const char *ib_fsview_path (const struct ib_fsview *v, size_t i);
/* The entries of layer FIRST and above, in path order (*OUT malloc'd, NULL
 * when none); their count.  Over a view read in place whose base is below
 * FIRST, only the layers pushed on it are looked at: a check of an
 * overlay costs the overlay, not a walk of the base. */
size_t ib_fsview_from_layer (const struct ib_fsview *v, int first, const struct ib_fs_entry ***out);
void ib_fsview_free (struct ib_fsview *v);

/* What a check reads of a view, told as it reads (symbol-check/link-check/memo.h keeps
 * it to reuse the check's verdict): SEEN gets every path looked up, with
 * the entry found there (NULL: none), and every entry a glob pattern
 * matched before its links are followed; PATTERN every glob pattern.  Any
 * lookup counts, those inside ib_fsview_resolve, _follow and _glob too.
 * Entries at ib_fsview_at are not told: a check that walks the view says
 * itself what it would pick there. */
struct ib_fsview_observer
{
  void (*seen) (void *data, const char *path, const struct ib_fs_entry *e);
  void (*pattern) (void *data, const char *pattern);
  void *data;
};
/* Tell O (NULL: nobody) of the reads of V from now on.  O must outlive
 * its use; the view's entries are not changed. */
void ib_fsview_observe (struct ib_fsview *v, const struct ib_fsview_observer *o);

/* A path or link target as one field of a cache line: `\`, newline and
 * tab escaped; and back: S unescaped in place, a malloc'd copy returned. */
void ib_fs_put_escaped (FILE *f, const char *s);
char *ib_fs_unescape (char *s);

#endif
