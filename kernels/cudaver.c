/* The toolchain files' CUDA versions by content digest, and their indexer
 * (cudaver.h).
 *
 * The indexer asks for the file's spool (IB_INDEX_FD), not its text: NVRTC
 * and nvJitLink are ~100 MB, beyond IB_INDEX_TEXT_MAX and far beyond what
 * the pass may hold (issue 18: 64 MiB for the whole build), and their
 * version string lies ~80% of the way in.  The spool costs nothing more:
 * these files are ELF objects (but for a wrapper script, a few bytes),
 * which the kernels indexer has spooled already (one spool per file for
 * every indexer that wants it), and ib_cuda_version_of_fd scans it in
 * 1 MiB reads, as the gate's own read of the file does. */
#include "kernels/cudaver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "kernels/target.h"

const char *
ib_cudaver_tool_kind (const char *path)
{
  static const char *const exact[] = { "ptxas", "nvcc", "nvdisasm", "cuobjdump", NULL };
  const char *slash = strrchr (path, '/'), *base = slash ? slash + 1 : path;
  /* Asked of every path of a base (the list pass, the toolchains gate's
   * walk): most names start with none of the tools' first letters. */
  if (base[0] != 'p' && base[0] != 'n' && base[0] != 'c' && base[0] != 'l')
    return NULL;
  for (int i = 0; exact[i]; i++)
    if (strcmp (base, exact[i]) == 0)
      return exact[i];
  if (strncmp (base, "libnvrtc.so", 11) == 0)
    return "libnvrtc";
  if (strncmp (base, "libnvJitLink.so", 15) == 0)
    return "libnvJitLink";
  return NULL;
}

const char *const *
ib_cudaver_tool_globs (size_t *n_out)
{
  static const char *const globs[]
      = { "*/ptxas", "*/nvcc", "*/nvdisasm", "*/cuobjdump", "*/libnvrtc.so*", "*/libnvJitLink.so*" };
  *n_out = sizeof (globs) / sizeof (globs[0]);
  return globs;
}

/* ---- the records: the version as a decimal number and a newline --------- */

bool
ib_cudaver_cache_load (const char *dir, const char *digest, unsigned *out)
{
  if (digest == NULL || digest[0] == '\0')
    return false;
  cleanup_free char *path = ib_path_join (dir, digest);
  cleanup_free char *text = NULL;
  if (ib_read_file (path, 64, &text, NULL, NULL) < 0)
    return false;
  *out = (unsigned) strtoul (text, NULL, 10);
  return true;
}

int
ib_cudaver_of_fd_save (const char *dir, const char *digest, int fd, unsigned *out, ib_error_t *err)
{
  if (ib_cuda_version_of_fd (fd, out, err) < 0)
    return -1;
  char text[32];
  int len = snprintf (text, sizeof (text), "%u\n", *out);
  cleanup_free char *path = ib_path_join (dir, digest);
  ib_write_cache_file (path, text, (size_t) len, NULL);
  return 0;
}

/* ---- the indexer --------------------------------------------------------- */

static enum ib_index_need
wants (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data, (void) size, (void) head, (void) n_head;
  return ib_cudaver_tool_kind (path) ? IB_INDEX_FD : IB_INDEX_SKIP;
}

static void
index_file (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  struct ib_cudaver_indexer *x = data;
  (void) path, (void) text, (void) len;
  if (fd < 0)
    return;
  cleanup_free char *cpath = ib_path_join (x->cache, digest);
  if (access (cpath, F_OK) == 0)
    return; /* the same content seen before */
  unsigned v;
  ib_error_t e = NULL;
  if (ib_cudaver_of_fd_save (x->cache, digest, fd, &v, &e) < 0)
    ib_error_release (&e); /* the gate reads the file itself, and says why */
}

int
ib_cudaver_indexer_init (struct ib_store *s, struct ib_cudaver_indexer *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (ib_store_cache_dir (s, "cudaver", &out->cache, err) < 0)
    return -1;
  out->ix = (struct ib_indexer){ IB_CUDAVER_INDEXER, wants, index_file, out, false };
  return 0;
}

void
ib_cudaver_indexer_clear (struct ib_cudaver_indexer *x)
{
  free (x->cache);
  memset (x, 0, sizeof (*x));
}
