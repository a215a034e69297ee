/* The folders an image's /etc/ld.so.conf puts on the dynamic loader's
 * search path (the ld.so.cache that ldconfig makes of them), with the files
 * it `include`s (the *.conf files of ld.so.conf.d on every distribution), read over the
 * image's view as ldconfig reads them: in order, an include's matches in
 * name order, relative patterns from the including file's folder, `hwcap`
 * lines ignored, at most 8 includes deep.
 *
 * One reader for every check that asks where the loader looks: the native
 * link gate (symbol-check/link-check/) and the driver gate's libcuda rule
 * (kernels/driver.c).  The files' texts are cached by content digest in
 * the store's "ldconf" cache folder, which the native gate's indexer fills
 * in the file-list pass, so that a warm build reads no layer for them. */
#ifndef IB_LDCONF_H
#define IB_LDCONF_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/image/image.h"
#include "layers/store/store.h"
#include "layers/view/fsview.h"
#include "util/error.h"

/* The largest ld.so.conf file read; a larger one is not cached (read as
 * absent). */
#define IB_LDCONF_MAX (1u << 20)

/* One ld.so.conf file: its folders and its include patterns (relative
 * ones made absolute from the file's folder DIR, as ldconfig does), pushed
 * on the malloc'd arrays (the strings malloc'd too). */
void ib_ldconf_parse (const char *text, const char *dir, char ***dirs, size_t *n_dirs, char ***includes,
                      size_t *n_includes);

/* TEXT (LEN bytes), the content of DIGEST, into the cache folder CACHE;
 * -1 when over IB_LDCONF_MAX. */
int ib_ldconf_save (const char *cache, const char *digest, const char *text, size_t len);

struct ib_ldconf
{
  size_t n_dirs;
  char **dirs; /* absolute, as the files name them, each once, in order */
  /* Files of the walk whose text the cache does not hold yet (entries of
   * the view); the walk did not read what they would include. */
  size_t n_missing;
  const struct ib_fs_entry **missing;
};

/* The walk from /etc/ld.so.conf of view V, each file's text from the
 * cache folder CACHE: fills *OUT (cleared first); true when no file was
 * missing.  Reads no layer. */
bool ib_ldconf_walk (const struct ib_fsview *v, const char *cache, struct ib_ldconf *out);

/* The walk complete: the missing files read out of IMG's layers (V is a
 * view over IMG) into S's cache, and the walk again, until nothing is
 * missing.  *LAYER_PASSES (may be NULL) is added the layers read. */
int ib_ldconf_read (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *v, struct ib_ldconf *out,
                    size_t *layer_passes, ib_error_t *err);

void ib_ldconf_clear (struct ib_ldconf *c);

#endif
