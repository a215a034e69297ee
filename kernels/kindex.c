/* The GPU-code inspection's indexer: its records made in the file-list
 * pass.  Without it the SBOM of a cold build reads the base's layers once
 * more, for the ~1,200 shared objects of a Debian + torch base.
 *
 * Which files a reader will ask about is not known in the pass: the
 * default globs also match links ("libOpenCL.so.7.gz", a man page) whose
 * target has any name.  So the indexer goes by content, as
 * ib_cuda_inspect does: an ELF object or a fatbin, by any name, is
 * inspected and its record cached; of every other file only the digest
 * is kept, since ib_cuda_inspect finds no GPU code in it without reading
 * past its head (ib_kernels_indexer_no_code). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "kindex.h"

#define FATBIN_MAGIC 0xBA55ED50u /* read as cudabin.c reads it */
#define ELF_HEAD 64              /* sizeof (Elf64_Ehdr): less is no ELF object for cudabin.c */

/* Whether the head of a file of SIZE bytes proves that it is neither an
 * ELF object nor a fatbin.  A head shorter than what the test needs
 * proves nothing: the file is inspected. */
static bool
surely_no_code (uint64_t size, const unsigned char *head, size_t n_head)
{
  size_t need = size < ELF_HEAD ? (size_t) size : ELF_HEAD;
  if (n_head < need)
    return false;
  uint32_t magic = 0;
  if (n_head >= 4)
    memcpy (&magic, head, 4);
  if (magic == FATBIN_MAGIC)
    return false;
  return n_head < 4 || memcmp (head, "\177ELF", 4) != 0;
}

/* ---- the records, by content digest ------------------------------------ */

struct ib_cuda_file *
ib_kernels_cache_load (const char *dir, const char *digest)
{
  cleanup_free char *path = ib_path_join (dir, digest);
  cleanup_free char *text = NULL;
  if (!digest[0] || ib_read_file (path, 1u << 30, &text, NULL, NULL) < 0)
    return NULL;
  cJSON *j = cJSON_Parse (text);
  const cJSON *magic = cJSON_GetObjectItemCaseSensitive (j, "cache");
  struct ib_cuda_file *f = NULL;
  if (cJSON_IsString (magic) && strcmp (magic->valuestring, IB_KERNELS_CACHE_MAGIC) == 0)
    ib_cuda_file_from_json (j, &f, NULL);
  cJSON_Delete (j);
  return f;
}

void
ib_kernels_cache_save (const char *dir, const char *digest, const struct ib_cuda_file *f)
{
  cJSON *j = ib_cuda_file_json (f);
  /* Last, so that a file cut short does not parse. */
  cJSON_AddStringToObject (j, "cache", IB_KERNELS_CACHE_MAGIC);
  char *text = cJSON_PrintUnformatted (j);
  cJSON_Delete (j);
  cleanup_free char *path = ib_path_join (dir, digest);
  ib_write_cache_file (path, text, strlen (text), NULL);
  free (text);
}

/* ---- the indexer --------------------------------------------------------- */

static enum ib_index_need
wants (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data;
  (void) path;
  return surely_no_code (size, head, n_head) ? IB_INDEX_DIGEST : IB_INDEX_FD;
}

static int
unhex (const char *hex, unsigned char out[32])
{
  for (size_t i = 0; i < 32; i++)
    {
      unsigned v = 0;
      for (size_t k = 0; k < 2; k++)
        {
          char c = hex[2 * i + k];
          unsigned d = c >= '0' && c <= '9' ? (unsigned) (c - '0') : c >= 'a' && c <= 'f' ? (unsigned) (c - 'a' + 10) : 16;
          if (d == 16)
            return -1;
          v = v << 4 | d;
        }
      out[i] = (unsigned char) v;
    }
  return 0;
}

/* The digests go to an unlinked file beside the cache, through a buffer of
 * NONE_BUF of them: a base's ~60,000 files would be 2 MB more of peak RSS
 * (issue 18's bound is 64 MiB) for the one question asked of them once. */
#define NONE_BUF 2048

static void
flush_none (struct ib_kernels_indexer *x)
{
  if (x->n_buf == 0 || x->none_fd < 0)
    return;
  ib_error_t e = NULL;
  if (ib_write_all (x->none_fd, x->buf, x->n_buf * 32, "the kernels indexer's list", &e) < 0)
    {
      /* Digests lost: no answer is "no GPU code" any more (the reader reads). */
      ib_error_release (&e);
      close (x->none_fd);
      x->none_fd = -1;
    }
  x->n_buf = 0;
}

static void
remember_no_code (struct ib_kernels_indexer *x, const char *digest)
{
  if (x->none_fd < 0 || unhex (digest, x->buf + 32 * x->n_buf) < 0)
    return;
  if (++x->n_buf == NONE_BUF)
    flush_none (x);
}

static void
index_file (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  struct ib_kernels_indexer *x = data;
  (void) text;
  (void) len;
  if (fd < 0)
    {
      remember_no_code (x, digest);
      return;
    }
  cleanup_free char *cpath = ib_path_join (x->cache, digest);
  if (access (cpath, F_OK) == 0)
    return; /* the same content seen before */
  cleanup_free char *what = ib_xasprintf ("/%s", path);
  struct ib_cuda_file *f;
  ib_error_t e = NULL;
  if (ib_cuda_inspect (fd, what, &f, &e) < 0)
    {
      ib_error_release (&e); /* the reader inspects it itself, and says why */
      return;
    }
  ib_kernels_cache_save (x->cache, digest, f);
  ib_cuda_file_free (f);
}

struct asked
{
  unsigned char d[32];
  size_t i;
};

static int
cmp_asked (const void *a, const void *b)
{
  return memcmp (((const struct asked *) a)->d, ((const struct asked *) b)->d, 32);
}

/* Mark in OUT every question equal to the digest D. */
static void
answer (const struct asked *q, size_t n, const unsigned char *d, bool *out)
{
  struct asked key;
  memcpy (key.d, d, 32);
  const struct asked *hit = bsearch (&key, q, n, sizeof (*q), cmp_asked);
  if (hit == NULL)
    return;
  const struct asked *lo = hit, *hi = hit;
  while (lo > q && memcmp (lo[-1].d, d, 32) == 0)
    lo--;
  while (hi + 1 < q + n && memcmp (hi[1].d, d, 32) == 0)
    hi++;
  for (const struct asked *p = lo; p <= hi; p++)
    out[p->i] = true;
}

void
ib_kernels_indexer_no_code (struct ib_kernels_indexer *x, const char *const *digests, size_t n, bool *out)
{
  memset (out, 0, n * sizeof (*out));
  flush_none (x);
  if (n == 0 || x->none_fd < 0)
    return;
  cleanup_free struct asked *q = ib_xcalloc (n, sizeof (*q));
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (unhex (digests[i], q[m].d) == 0)
      q[m++].i = i;
  ib_qsort (q, m, sizeof (*q), cmp_asked);
  /* One read of the list, in the buffer's size. */
  off_t at = 0;
  ssize_t got;
  while ((got = pread (x->none_fd, x->buf, NONE_BUF * 32, at)) > 0)
    {
      for (ssize_t k = 0; k + 32 <= got; k += 32)
        answer (q, m, x->buf + k, out);
      at += got - got % 32;
      if (got % 32)
        break; /* cannot happen: whole digests are written */
    }
  if (got < 0)
    memset (out, 0, n * sizeof (*out)); /* unknown, so read */
}

int
ib_kernels_indexer_init (struct ib_store *s, struct ib_kernels_indexer *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  out->none_fd = -1;
  if (ib_store_cache_dir (s, "kernels", &out->cache, err) < 0)
    return -1;
  /* Beside the cache, as the file-list pass's spool: unlinked at once. */
  cleanup_free char *tmp = ib_path_join (out->cache, ".no-code-XXXXXX");
  out->none_fd = mkostemp (tmp, O_CLOEXEC);
  if (out->none_fd < 0)
    {
      ib_kernels_indexer_clear (out);
      return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
    }
  unlink (tmp);
  out->buf = ib_xmalloc (NONE_BUF * 32);
  out->ix = (struct ib_indexer){ IB_KERNELS_INDEXER, wants, index_file, out };
  return 0;
}

void
ib_kernels_indexer_clear (struct ib_kernels_indexer *x)
{
  free (x->cache);
  free (x->buf);
  if (x->none_fd >= 0)
    close (x->none_fd);
  memset (x, 0, sizeof (*x));
  x->none_fd = -1;
}
