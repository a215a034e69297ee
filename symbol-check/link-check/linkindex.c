/* The native gate's indexer: its records made in the file-list pass. */
#include <fnmatch.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/ldconf.h"
#include "symbol-check/link-check/linkgate.h"

static bool
is_ldconf (const char *path)
{
  return strcmp (path, "etc/ld.so.conf") == 0 || strncmp (path, "etc/ld.so.conf.d/", 17) == 0;
}

static enum ib_index_need
wants (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data;
  (void) size;
  if (is_ldconf (path))
    return IB_INDEX_TEXT;
  const char *base = strrchr (path, '/');
  base = base ? base + 1 : path;
  /* What the gate asks records of: "*.so*" files and what links lead to
   * (ELF objects by any name). */
  if (fnmatch ("*.so", base, 0) == 0 || fnmatch ("*.so.*", base, 0) == 0)
    return IB_INDEX_FD;
  return n_head >= 4 && memcmp (head, "\177ELF", 4) == 0 ? IB_INDEX_FD : IB_INDEX_SKIP;
}

static void
index_file (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  struct ib_native_indexer *x = data;
  if (text)
    {
      ib_ldconf_save (x->conf_cache, digest, text, len);
      return;
    }
  cleanup_free char *cpath = ib_path_join (x->elf_cache, digest);
  if (access (cpath, F_OK) == 0)
    return; /* the same content seen before */
  ib_error_t e = NULL;
  if (ib_link_record_save (x->elf_cache, digest, fd, path, NULL, &e) < 0)
    ib_error_release (&e); /* the gate reads the file itself */
}

int
ib_native_indexer_init (struct ib_store *s, struct ib_native_indexer *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (ib_store_cache_dir (s, "elflink", &out->elf_cache, err) < 0 || ib_store_cache_dir (s, "ldconf", &out->conf_cache, err) < 0)
    {
      ib_native_indexer_clear (out);
      return -1;
    }
  out->ix = (struct ib_indexer){ "native", wants, index_file, out, false };
  return 0;
}

void
ib_native_indexer_clear (struct ib_native_indexer *x)
{
  free (x->elf_cache);
  free (x->conf_cache);
  x->elf_cache = x->conf_cache = NULL;
}
