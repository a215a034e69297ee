/* Deterministic tar layers.  The same entries give the same bytes on any
 * machine: entries sorted by path, every parent folder present, mtime fixed
 * (SOURCE_DATE_EPOCH or 0), uid/gid 0 and no user or group names, modes
 * 0644/0755 unless the entry says otherwise, and a gzip stream whose header
 * has no name and no timestamp at a fixed compression level, deflated in
 * fixed-size blocks on several threads (util/pgzip.h: the same bytes for
 * any thread count).  One pass over the sources yields the blob's digest
 * (of the gzip bytes) and its diff_id (of the tar bytes).  The bytes depend
 * on zlib's deflate, which has not changed its output for a given level in
 * many years; the level is part of the definition. */
#ifndef IB_TARLAYER_H
#define IB_TARLAYER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "layers/store/descriptor.h"
#include "layers/store/store.h"

enum ib_entry_type
{
  IB_ENTRY_FILE,
  IB_ENTRY_DIR,
  IB_ENTRY_SYMLINK,
};

struct ib_layer_entry
{
  char *path;   /* inside the image, no leading '/', no "." or ".." parts */
  enum ib_entry_type type;
  char *source; /* IB_ENTRY_FILE: the file on the build machine */
  char *link;   /* IB_ENTRY_SYMLINK: its target */
  int mode;     /* permission bits, or -1 for the default */
};

struct ib_layer_options
{
  long long mtime;
  int gzip_level; /* 1..9 */
  int threads;    /* deflate threads; 0: the online CPUs.  Not in the bytes */
};

struct ib_layer_result
{
  struct ib_descriptor desc; /* blob: media type, digest, size */
  ib_digest diff_id;
  size_t n_entries;          /* with the parent folders added */
  bool kept;                 /* the blob was in the store already, kept from an
                              * earlier build of the same tar: not compressed */
};

/* SOURCE_DATE_EPOCH when it is set and valid, else 0. */
long long ib_source_date_epoch (void);

/* Write ENTRIES as one layer blob into the store.  Two entries with one path
 * are an error; so is a source that is not a regular file.  The blob of a
 * tar written before is kept in the store's cache folder layer-gz/, by the
 * tar's digest and what the gzip bytes depend on: when the sources hold at
 * most 8 MiB, the tar is hashed first, and a blob the store still holds is
 * taken as it is (the same bytes: util/pgzip.h). */
int ib_layer_write (struct ib_store *s, const struct ib_layer_entry *entries, size_t n,
                    const struct ib_layer_options *opt, struct ib_layer_result *out, ib_error_t *err);

#endif
