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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "kernels/kindex.h"

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

/* A record is binary, written while its file is inspected and read back
 * without a tree (issue 18).  As JSON, the list, its cJSON tree and its
 * text were all in memory at once: some 27 MB for cuBLASLt's (47,000
 * kernels), the cold build's peak over CUDA 13's libraries (81 MiB, now
 * 61); and parsing NCCL's record, twice in every warm build, was a sixth
 * of the build's instructions (51 of 315 million, now 3).
 *
 * Layout, little-endian on every machine:
 *   IB_KERNELS_CACHE_MAGIC and its NUL: the version; a record of another
 *     (a JSON one of before, "{...") is not found, and made again;
 *   per entry: 'e', then ENTRY_HEAD bytes: kind, variant, compression,
 *     relocatable (a byte each); sm, PTX major, PTX minor (u32); size,
 *     uncompressed size, offset, stored (u64); the kernel count (u32);
 *     then each kernel name: its length (u32) and its bytes;
 *   the end: 'z', the entry count (u64), and the CRC-32 of every byte
 *     before it (u32), the last bytes of the file.
 * A record is written whole or not at all (renamed into place), so one
 * that is cut short, or damaged (the CRC), or that says anything out of
 * range reads as none, and the file is inspected again: never a crash, a
 * wrong answer, or an allocation larger than what the file still holds. */
#define ENTRY_HEAD 52
#define END_SIZE (1 + 8 + 4)
#define IO_BUF (64u << 10)

static unsigned char *
put_le (unsigned char *p, uint64_t v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char) (v >> (8 * i));
  return p + n;
}

static uint64_t
get_le (const unsigned char *p, size_t n)
{
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

static const char *const compressions[] = { "none", "lz4", "zstd" };

struct record_out
{
  struct ib_atomic_file f;
  FILE *fp; /* on a duplicate of F.fd: buffered, and closed before the commit */
  uLong crc;
  uint64_t n;
  bool failed; /* something not kept: the record is not written */
};

static void
put (struct record_out *o, const void *p, size_t n)
{
  o->crc = crc32_z (o->crc, p, n);
  if (fwrite (p, 1, n, o->fp) != n)
    o->failed = true;
}

static int
record_open (struct record_out *o, const char *dir, const char *digest, ib_error_t *err)
{
  memset (o, 0, sizeof (*o));
  cleanup_free char *path = ib_path_join (dir, digest);
  if (!digest[0])
    return ib_error (err, IB_EINTEGRITY, "a record for a file without a digest");
  if (ib_atomic_file_open (&o->f, path, err) < 0)
    return -1;
  int fd = fcntl (o->f.fd, F_DUPFD_CLOEXEC, 0);
  o->fp = fd < 0 ? NULL : fdopen (fd, "w");
  if (o->fp == NULL)
    {
      ib_error_errno (err, errno, IB_EENV, "write `%s`", o->f.tmp);
      if (fd >= 0)
        close (fd);
      ib_atomic_file_abort (&o->f);
      return -1;
    }
  setvbuf (o->fp, NULL, _IOFBF, IO_BUF);
  o->crc = crc32_z (0, NULL, 0);
  put (o, IB_KERNELS_CACHE_MAGIC, sizeof (IB_KERNELS_CACHE_MAGIC));
  return 0;
}

/* An entry into the record (ib_cuda_entry_fn).  What a record cannot say
 * exactly (a count past 32 bits, a variant of another letter) leaves the
 * file unrecorded rather than recorded otherwise; so does a write that
 * fails, which stops the inspection (made only for its record) there. */
static int
record_put (void *data, const struct ib_cuda_entry *e, size_t index, ib_error_t *err)
{
  struct record_out *o = data;
  (void) index;
  if (o->failed)
    return ib_error (err, IB_EENV, "`%s`: the record cannot be written", o->f.tmp);
  unsigned c = 0;
  while (c < 3 && strcmp (e->compression, compressions[c]) != 0)
    c++;
  if (c == 3 || (e->variant && e->variant != 'a' && e->variant != 'f') || e->n_kernels > UINT32_MAX)
    o->failed = true;
  unsigned char h[1 + ENTRY_HEAD], *p = h;
  *p++ = 'e';
  *p++ = (unsigned char) e->kind;
  *p++ = (unsigned char) e->variant;
  *p++ = (unsigned char) c;
  *p++ = e->relocatable;
  p = put_le (p, e->sm, 4);
  p = put_le (p, e->ptx_major, 4);
  p = put_le (p, e->ptx_minor, 4);
  p = put_le (p, e->size, 8);
  p = put_le (p, e->uncompressed_size, 8);
  p = put_le (p, e->offset, 8);
  p = put_le (p, e->stored, 8);
  put_le (p, e->n_kernels, 4);
  put (o, h, sizeof (h));
  for (size_t k = 0; k < e->n_kernels; k++)
    {
      size_t len = strlen (e->kernels[k]);
      unsigned char l[4];
      put_le (l, len, 4);
      if (len > UINT32_MAX)
        o->failed = true;
      put (o, l, 4);
      put (o, e->kernels[k], len);
    }
  o->n++;
  return 0;
}

/* The end written and the record renamed into place when WHOLE (and all
 * was written); otherwise nothing is left. */
static bool
record_close (struct record_out *o, bool whole)
{
  if (whole)
    {
      unsigned char end[END_SIZE];
      end[0] = 'z';
      put_le (end + 1, o->n, 8);
      put (o, end, 9);
      put_le (end + 9, o->crc, 4);
      whole = fwrite (end + 9, 1, 4, o->fp) == 4;
    }
  if (fclose (o->fp) != 0)
    whole = false;
  if (whole && !o->failed && ib_atomic_file_commit (&o->f, 0644, false, NULL) == 0)
    return true;
  ib_atomic_file_abort (&o->f);
  return false;
}

bool
ib_kernels_cache_save (const char *dir, const char *digest, const struct ib_cuda_file *f)
{
  struct record_out o;
  if (record_open (&o, dir, digest, NULL) < 0)
    return false;
  for (size_t i = 0; i < f->n; i++)
    record_put (&o, &f->e[i], i, NULL);
  return record_close (&o, true);
}

int
ib_kernels_cache_inspect (const char *dir, const char *digest, int fd, const char *what, ib_error_t *err)
{
  struct record_out o;
  if (record_open (&o, dir, digest, err) < 0)
    return -1;
  int r = ib_cuda_inspect_stream (fd, what, record_put, &o, err);
  record_close (&o, r == 0);
  return r;
}

/* A record read through a buffer of its own, the CRC taken as it goes. */
struct record_in
{
  int fd;
  uint64_t unread; /* bytes of the file not yet taken */
  size_t at, len, crc_from; /* BUF[AT, LEN) is read, not taken; the CRC has BUF up to CRC_FROM */
  uLong crc;
  char *name; /* the name being read, before it is kept (ib_cuda_names_intern) */
  size_t name_cap;
  unsigned char buf[IO_BUF];
};

static void
crc_sync (struct record_in *r)
{
  r->crc = crc32_z (r->crc, r->buf + r->crc_from, r->at - r->crc_from);
  r->crc_from = r->at;
}

static bool
take (struct record_in *r, void *p, size_t n)
{
  if (n > r->unread)
    return false;
  for (unsigned char *q = p; n > 0;)
    {
      if (r->at == r->len)
        {
          crc_sync (r);
          ssize_t got = ib_read_full (r->fd, r->buf, IO_BUF);
          if (got <= 0)
            return false;
          r->at = r->crc_from = 0;
          r->len = (size_t) got;
        }
      size_t k = n < r->len - r->at ? n : r->len - r->at;
      memcpy (q, r->buf + r->at, k);
      r->at += k;
      r->unread -= k;
      q += k;
      n -= k;
    }
  return true;
}

/* One entry (its 'e' taken) into E; false when the record says anything
 * out of range. */
static bool
take_entry (struct record_in *r, struct ib_cuda_file *f, struct ib_cuda_entry *e)
{
  unsigned char h[ENTRY_HEAD];
  if (!take (r, h, sizeof (h)))
    return false;
  const unsigned char *p = h;
  e->kind = (enum ib_cuda_kind) p[0];
  e->variant = (char) p[1];
  if (p[0] > IB_CUDA_LTOIR || (p[1] && p[1] != 'a' && p[1] != 'f') || p[2] > 2 || p[3] > 1)
    return false;
  e->compression = compressions[p[2]];
  e->relocatable = p[3];
  e->sm = (unsigned) get_le (p + 4, 4);
  e->ptx_major = (unsigned) get_le (p + 8, 4);
  e->ptx_minor = (unsigned) get_le (p + 12, 4);
  e->size = get_le (p + 16, 8);
  e->uncompressed_size = get_le (p + 24, 8);
  e->offset = get_le (p + 32, 8);
  e->stored = get_le (p + 40, 8);
  uint64_t n = get_le (p + 48, 4);
  /* Each name takes 4 bytes at least: a count the file cannot hold is
   * damage, and allocates nothing. */
  if (n > r->unread / 4)
    return false;
  e->kernels = n ? ib_xcalloc (n, sizeof (*e->kernels)) : NULL;
  for (; e->n_kernels < n; e->n_kernels++)
    {
      unsigned char l[4];
      if (!take (r, l, 4))
        return false;
      uint64_t len = get_le (l, 4);
      if (len > r->unread)
        return false;
      if (len + 1 > r->name_cap)
        {
          r->name_cap = len + 1 > 2 * r->name_cap ? len + 1 : 2 * r->name_cap;
          r->name = ib_xrealloc (r->name, r->name_cap);
        }
      /* A NUL inside would cut the name short: not what was written. */
      if (!take (r, r->name, len) || memchr (r->name, '\0', len) != NULL)
        return false;
      e->kernels[e->n_kernels] = ib_cuda_names_intern (f, r->name, len);
    }
  return true;
}

/* The entries up to the end, then the end: the count and the CRC of all
 * before it agree, and nothing follows. */
static bool
take_record (struct record_in *r, struct ib_cuda_file *f)
{
  char magic[sizeof (IB_KERNELS_CACHE_MAGIC)];
  if (!take (r, magic, sizeof (magic)) || memcmp (magic, IB_KERNELS_CACHE_MAGIC, sizeof (magic)) != 0)
    return false;
  size_t cap = 0;
  unsigned char tag = 0;
  while (take (r, &tag, 1) && tag == 'e')
    {
      if (f->n == cap)
        {
          cap = cap ? 2 * cap : 16;
          f->e = ib_xrealloc (f->e, cap * sizeof (*f->e));
        }
      struct ib_cuda_entry *e = &f->e[f->n++];
      memset (e, 0, sizeof (*e));
      if (!take_entry (r, f, e))
        return false;
    }
  unsigned char end[END_SIZE - 1];
  if (r->unread != END_SIZE - 1 || tag != 'z' || !take (r, end, 8))
    return false;
  crc_sync (r);
  return take (r, end + 8, 4) && get_le (end, 8) == f->n && get_le (end + 8, 4) == r->crc;
}

struct ib_cuda_file *
ib_kernels_cache_load (const char *dir, const char *digest)
{
  cleanup_free char *path = ib_path_join (dir, digest);
  cleanup_close int fd = digest[0] ? open (path, O_RDONLY | O_CLOEXEC) : -1;
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return NULL;
  cleanup_free struct record_in *r = ib_xmalloc (sizeof (*r)); /* its buffer left as it is */
  r->fd = fd;
  r->unread = (uint64_t) st.st_size;
  r->at = r->len = r->crc_from = 0;
  r->crc = crc32_z (0, NULL, 0);
  r->name = NULL;
  r->name_cap = 0;
  struct ib_cuda_file *f = ib_xcalloc (1, sizeof (*f));
  bool ok = take_record (r, f);
  free (r->name);
  if (!ok)
    {
      ib_cuda_file_free (f);
      return NULL;
    }
  return f;
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

/* Whether DIGEST has a record of this version (its magic: one of an older
 * version is made again, not skipped). */
static bool
record_there (const char *dir, const char *digest)
{
  cleanup_free char *path = ib_path_join (dir, digest);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  char magic[sizeof (IB_KERNELS_CACHE_MAGIC)];
  return fd >= 0 && ib_read_full (fd, magic, sizeof (magic)) == (ssize_t) sizeof (magic)
         && memcmp (magic, IB_KERNELS_CACHE_MAGIC, sizeof (magic)) == 0;
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
  if (record_there (x->cache, digest))
    return; /* the same content seen before */
  cleanup_free char *what = ib_xasprintf ("/%s", path);
  ib_error_t e = NULL;
  if (ib_kernels_cache_inspect (x->cache, digest, fd, what, &e) < 0)
    ib_error_release (&e); /* the reader inspects it itself, and says why */
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
  const struct asked *hit = ib_bsearch (&key, q, n, sizeof (*q), cmp_asked);
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
  /* Concurrent: a file's inspection reads its spool and writes its own
   * record; the digests of files without GPU code (the list above) are
   * kept by the calls made in the pass, which never reach it. */
  out->ix = (struct ib_indexer){ IB_KERNELS_INDEXER, wants, index_file, out, true };
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
