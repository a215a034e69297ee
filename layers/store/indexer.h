/* Per-file indexes made in the one pass that makes a layer's file list.
 *
 * Reading a layer is inflating it: at the size of real bases that is the
 * cost of a cold build.  The gates each keep what they learn about a file
 * in a cache keyed by the file's content digest (an ELF object's link
 * record, a Python file's definitions, a library's GPU code); without
 * indexers each gate then reads the layers again for the files it needs,
 * one pass per gate and round.  An indexer, registered on the store before
 * the first file list is made, is handed each file it asks for while the
 * list's pass reads it, and fills its cache then, so that the gate later
 * finds every record cached and reads no layer.
 *
 * An indexer never changes what a gate decides: it writes the same record,
 * under the same digest, that the gate would write after its own read of
 * the file; a record it cannot make (a file it cannot parse, a cache it
 * cannot write) is simply absent, and the gate reads the file as before.
 * The file list itself never depends on an indexer. */
#ifndef IB_INDEXER_H
#define IB_INDEXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ib_store;

enum ib_index_need
{
  IB_INDEX_SKIP = 0,
  IB_INDEX_TEXT, /* the file's bytes in memory (at most IB_INDEX_TEXT_MAX; a larger file is skipped) */
  IB_INDEX_FD,   /* a file descriptor to read with pread (an unlinked spool in the store) */
  IB_INDEX_DIGEST, /* only the file's digest: what its head told WANTS is the whole record */
};

#define IB_INDEX_TEXT_MAX (16u << 20)
#define IB_MAX_INDEXERS 8

struct ib_indexer
{
  const char *name;
  /* Whether a regular file is wanted.  PATH is clean and relative
   * ("usr/lib/x.so"), SIZE its size, HEAD its first N_HEAD bytes (fewer
   * than the file's when it is larger than the first read). */
  enum ib_index_need (*wants) (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head);
  /* The whole file: TEXT and LEN for IB_INDEX_TEXT (NUL-terminated), FD
   * for IB_INDEX_FD (its offset is undefined: use pread); neither (NULL,
   * -1) for IB_INDEX_DIGEST.  DIGEST is its sha256, lowercase hex.
   * Failures are the indexer's to swallow. */
  void (*index) (void *data, const char *path, const char *digest, const char *text, size_t len, int fd);
  void *data;
  /* Whether index () of a file handed by descriptor (IB_INDEX_FD) may run
   * on a thread of the pass (ib_index_pass_start): beside the pass, beside
   * this indexer's wants () and other index () calls, and beside another
   * such call for another file (or another file of the same content).
   * Only an indexer whose FD calls touch nothing of DATA that another call
   * changes may say so.  Inspecting
   * a library's GPU code (inflating every compressed fatbin entry) was a
   * third of a cold build over CUDA's libraries, the pass waiting on it
   * while the machine's other core had little to do. */
  bool concurrent;
};

/* Add IX (kept by pointer: it outlives S's use) to the indexers that S's
 * file-list passes feed; at most IB_MAX_INDEXERS. */
void ib_store_add_indexer (struct ib_store *s, const struct ib_indexer *ix);
const struct ib_indexer *const *ib_store_indexers (const struct ib_store *s, size_t *n);
/* The indexer of S named NAME, NULL when none is registered: how a gate
 * asks its own indexer what the pass learned beyond its cache. */
const struct ib_indexer *ib_store_indexer (const struct ib_store *s, const char *name);

/* ---- the file-list pass's side (fsview.c) -------------------------------- */

/* One pass's indexing: where its spools go, the spools it keeps for the
 * next file, and the threads that run the concurrent indexers' FD calls
 * (two files' calls running and one waiting at most, each holding its
 * file's spool: disk, not memory; the pass waits for room).  No thread is
 * made when none of S's indexers is concurrent, or none could be made: the
 * calls then run in the pass.  Several layers' passes may share one P
 * (their calls made in the pass then take turns).
 *
 * A spool is an unlinked file in SPOOL_DIR, emptied and kept once its
 * calls return, and written again for a later file of the pass: a file
 * made and unlinked for each of the 1,204 libraries of CUDA's toolkit was
 * a tenth of a cold build's CPU time in ext4's inode allocation (which
 * walks the inodes deleted just before). */
struct ib_index_pass;
struct ib_index_pass *ib_index_pass_start (const struct ib_store *s, const char *spool_dir);
/* The threads P runs concurrent calls on (0: they run in the pass). */
size_t ib_index_pass_threads (const struct ib_index_pass *p);
/* Wait for every call handed to P's threads, close its spools, free it;
 * NULL is fine. */
void ib_index_pass_finish (struct ib_index_pass *p);

/* One regular file being read: which indexers want it and its bytes so far. */
struct ib_index_file
{
  const struct ib_indexer *const *ix;
  enum ib_index_need need[IB_MAX_INDEXERS];
  size_t n_ix;
  char *path;
  char *text;
  size_t len, cap;
  int fd;
  int failed; /* a spool that could not be written: no index for this file */
  int digest_only; /* every indexer wants IB_INDEX_DIGEST or nothing: no bytes kept */
  struct ib_index_pass *pass;
};

/* Ask the indexers of P's store about the file; false when none wants it
 * (then nothing else need be called). */
bool ib_index_file_begin (struct ib_index_file *f, struct ib_index_pass *p, const char *path, uint64_t size,
                          const unsigned char *head, size_t n_head);
/* The file's bytes, in order, the first read's included. */
void ib_index_file_feed (struct ib_index_file *f, const void *buf, size_t n);
/* The file is read whole and its digest is DIGEST: index it, then free.
 * The concurrent indexers' calls are handed to P's threads with the
 * spool, after every other indexer's call on it has returned. */
void ib_index_file_end (struct ib_index_file *f, const char *digest);
/* The file was not read whole (an error): free without indexing. */
void ib_index_file_abort (struct ib_index_file *f);

#endif
