/* The GPU-code records (kernels/kindex.c): what a record says is what the
 * inspection said, field by field, for CUDA's own libraries (NCCL's, read
 * twice by every warm build, and cuBLASLt's, the largest); and a record cut
 * short, damaged, forged or of an older version reads as none. */
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "kernels/kindex.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

/* Every field of every entry of A and B the same; the first difference
 * said (WHAT names the file). */
static void
check_same (struct test_ctx *t, const char *what, const struct ib_cuda_file *a, const struct ib_cuda_file *b)
{
  CHECK (t, a != NULL && b != NULL);
  if (a == NULL || b == NULL)
    return;
  CHECK (t, a->n == b->n);
  for (size_t i = 0; i < a->n && i < b->n; i++)
    {
      const struct ib_cuda_entry *x = &a->e[i], *y = &b->e[i];
      bool same = x->kind == y->kind && x->sm == y->sm && x->variant == y->variant
                  && strcmp (x->compression, y->compression) == 0 && x->size == y->size
                  && x->uncompressed_size == y->uncompressed_size && x->relocatable == y->relocatable
                  && x->ptx_major == y->ptx_major && x->ptx_minor == y->ptx_minor && x->offset == y->offset
                  && x->stored == y->stored && x->n_kernels == y->n_kernels;
      for (size_t k = 0; same && k < x->n_kernels; k++)
        same = strcmp (x->kernels[k], y->kernels[k]) == 0;
      if (!same)
        {
          fprintf (stderr, "  %s: entry %zu differs\n", what, i);
          t->failures++;
          return;
        }
    }
}

static char *
slurp (const char *path, size_t *len)
{
  char *text = NULL;
  if (ib_read_file (path, 1u << 30, &text, len, NULL) < 0)
    return NULL;
  return text;
}

/* Both ways a record is made (from a list, and streamed while the file is
 * inspected, as the file-list pass does), read back against the list
 * ib_cuda_inspect makes of the same file. */
void
kernels_record_says_what_cuda_libraries_hold (struct test_ctx *t)
{
  const char *libs[] = { "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib64/libcublasLt.so.*" };
  cleanup_free char *dir = ib_path_join (test_tmpdir (), "kernels");
  ib_mkdir_p (dir, 0755, NULL);
  size_t entries = 0, kernels = 0;
  for (size_t l = 0; l < 2; l++)
    {
      glob_t g;
      CHECK (t, glob (libs[l], 0, NULL, &g) == 0); /* CUDA's libraries are needed, as by the kernels suite */
      if (g.gl_pathc == 0)
        continue;
      const char *lib = g.gl_pathv[0];
      cleanup_close int fd = open (lib, O_RDONLY | O_CLOEXEC);
      struct ib_cuda_file *fresh = NULL;
      ib_error_t err = NULL;
      CHECK (t, fd >= 0 && ib_cuda_inspect (fd, lib, &fresh, &err) == 0);
      CHECK (t, ib_kernels_cache_inspect (dir, "streamed", fd, lib, &err) == 0);
      if (err)
        fprintf (stderr, "  %s: %s\n", lib, err->msg);
      ib_error_release (&err);
      if (fresh == NULL)
        {
          globfree (&g);
          continue;
        }
      ib_kernels_cache_save (dir, "listed", fresh);
      struct ib_cuda_file *listed = ib_kernels_cache_load (dir, "listed");
      struct ib_cuda_file *streamed = ib_kernels_cache_load (dir, "streamed");
      check_same (t, lib, fresh, listed);
      check_same (t, lib, fresh, streamed);
      /* The two ways write the same bytes. */
      cleanup_free char *pa = ib_path_join (dir, "listed"), *pb = ib_path_join (dir, "streamed");
      size_t na = 0, nb = 0;
      cleanup_free char *a = slurp (pa, &na), *b = slurp (pb, &nb);
      CHECK (t, a && b && na == nb && memcmp (a, b, na) == 0);
      CHECK (t, fresh->n > 0);
      entries += fresh->n;
      for (size_t i = 0; i < fresh->n; i++)
        kernels += fresh->e[i].n_kernels;
      ib_cuda_file_free (fresh);
      ib_cuda_file_free (listed);
      ib_cuda_file_free (streamed);
      globfree (&g);
    }
  fprintf (stderr, "  %zu entries, %zu kernels read back as inspected\n", entries, kernels);
}

static char *k_sass[] = { "_Z10cpp_kernelPi", "trtllm_dcp_alltoall" }, *k_ptx[] = { "ptx_entry" };

/* Every value a field can take, and numbers past 2^53, which the JSON
 * records of before kept as doubles. */
static const struct ib_cuda_entry sample_entries[] = {
  { IB_CUDA_SASS, 121, 'a', "zstd", 1000, (1ull << 53) + 1, false, 0, 0, 2, k_sass, UINT64_MAX - 1, 77 },
  { IB_CUDA_PTX, 120, 'f', "lz4", 10, 20, true, 9, 0, 1, k_ptx, 4096, 10 },
  { IB_CUDA_LTOIR, 100, 0, "none", 5, 5, false, 0, 0, 0, NULL, 0, 5 },
};

/* LEN bytes of P at DIR/bad, read back as a record: true when none. */
static bool
reads_as_none (const char *dir, const void *p, size_t len)
{
  cleanup_free char *path = ib_path_join (dir, "bad");
  ib_write_cache_file (path, p, len, NULL);
  struct ib_cuda_file *f = ib_kernels_cache_load (dir, "bad");
  ib_cuda_file_free (f);
  return f == NULL;
}

/* The CRC at the end of REC (LEN bytes) made right again after an edit:
 * what is refused then is refused by the check of that field. */
static void
reseal (unsigned char *rec, size_t len)
{
  uLong crc = crc32 (0, rec, (uInt) (len - 4));
  for (size_t i = 0; i < 4; i++)
    rec[len - 4 + i] = (unsigned char) (crc >> (8 * i));
}

static void
set_le (unsigned char *p, uint64_t v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char) (v >> (8 * i));
}

/* A copy of REC with N bytes at AT set to V, resealed: read as none?  Read
 * in a child whose address space is bounded (but under ASan, whose shadow
 * needs terabytes), so that a count or a length believed before it is
 * checked against the file, 4 GiB of names, aborts the read there. */
static bool
forged_reads_as_none (const char *dir, const unsigned char *rec, size_t len, size_t at, uint64_t v, size_t n)
{
  cleanup_free unsigned char *c = ib_xmalloc (len);
  memcpy (c, rec, len);
  set_le (c + at, v, n);
  reseal (c, len);
  cleanup_free char *path = ib_path_join (dir, "bad");
  ib_write_cache_file (path, c, len, NULL);
  pid_t pid = fork ();
  if (pid == 0)
    {
#ifndef __SANITIZE_ADDRESS__
      long pages = 0;
      FILE *statm = fopen ("/proc/self/statm", "r");
      if (statm == NULL || fscanf (statm, "%ld", &pages) != 1)
        _exit (2);
      rlim_t bound = (rlim_t) pages * (rlim_t) sysconf (_SC_PAGESIZE) + (512u << 20);
      struct rlimit lim = { bound, bound };
      setrlimit (RLIMIT_AS, &lim);
#endif
      _exit (ib_kernels_cache_load (dir, "bad") == NULL ? 0 : 1);
    }
  int status = 0;
  return pid > 0 && waitpid (pid, &status, 0) == pid && WIFEXITED (status) && WEXITSTATUS (status) == 0;
}

/* A record read back keeps each kernel name once, shared by the entries
 * that list it: a library lists each kernel once per architecture
 * (libtorch_cuda.so: 19,303 kernels named 155,142 times, 36 MB as copies
 * against 4.5 MB), and `imgverify --jit-budget` held the largest list
 * whole.  Names longer than a chunk of the table and a name of no bytes
 * read back as themselves. */
void
kernels_record_read_back_keeps_each_name_once (struct test_ctx *t)
{
  cleanup_free char *dir = ib_path_join (test_tmpdir (), "kernels-once");
  ib_mkdir_p (dir, 0755, NULL);
  cleanup_free char *big = ib_xmalloc ((300u << 10) + 1);
  memset (big, 'k', 300u << 10);
  big[300u << 10] = '\0';
  char *k0[] = { "_Z6kernelPf", "trtllm_dcp_alltoall", big }, *k1[] = { "trtllm_dcp_alltoall", "_Z6kernelPf" },
       *k2[] = { big, "", "_Z6kernelPf" };
  struct ib_cuda_entry es[] = {
    { IB_CUDA_SASS, 90, 'a', "none", 10, 10, false, 0, 0, 3, k0, 0, 10 },
    { IB_CUDA_SASS, 80, 0, "none", 10, 10, false, 0, 0, 2, k1, 10, 10 },
    { IB_CUDA_PTX, 90, 0, "none", 10, 10, false, 8, 4, 3, k2, 20, 10 },
  };
  struct ib_cuda_file f = { .n = 3, .e = es };
  CHECK (t, ib_kernels_cache_save (dir, "once", &f));
  struct ib_cuda_file *back = ib_kernels_cache_load (dir, "once");
  check_same (t, "names", &f, back);
  if (back == NULL)
    return;
  char **a = back->e[0].kernels, **b = back->e[1].kernels, **c = back->e[2].kernels;
  CHECK (t, a[0] == b[1] && a[0] == c[2]);
  CHECK (t, a[1] == b[0]);
  CHECK (t, a[2] == c[0] && strlen (c[0]) == 300u << 10);
  CHECK (t, c[1][0] == '\0' && c[1] != a[0] && c[1] != a[1]);
  ib_cuda_file_free (back);
}

void
kernels_record_cut_damaged_or_old_reads_as_none (struct test_ctx *t)
{
  cleanup_free char *dir = ib_path_join (test_tmpdir (), "kernels");
  ib_mkdir_p (dir, 0755, NULL);
  struct ib_cuda_file f = { .n = 3, .e = (struct ib_cuda_entry *) sample_entries };
  ib_kernels_cache_save (dir, "good", &f);
  struct ib_cuda_file *back = ib_kernels_cache_load (dir, "good");
  check_same (t, "sample", &f, back);
  ib_cuda_file_free (back);
  cleanup_free char *good = ib_path_join (dir, "good");
  size_t n = 0;
  cleanup_free unsigned char *rec = (unsigned char *) slurp (good, &n);
  CHECK (t, rec && n > 100);
  if (rec == NULL)
    return;
  /* Cut at every length, every byte's lowest and highest bit flipped,
   * a byte more at the end. */
  size_t bad = 0;
  cleanup_free unsigned char *c = ib_xmalloc (n + 1);
  for (size_t cut = 0; cut < n; cut++)
    bad += !reads_as_none (dir, rec, cut);
  for (size_t i = 0; i < n; i++)
    for (unsigned bit = 0x01; bit <= 0x80; bit <<= 7)
      {
        memcpy (c, rec, n);
        c[i] ^= (unsigned char) bit;
        bad += !reads_as_none (dir, c, n);
      }
  memcpy (c, rec, n);
  c[n] = 'z';
  bad += !reads_as_none (dir, c, n + 1);
  CHECK (t, bad == 0);
  /* Resealed, so each field's own check refuses it: a resealed copy
   * unchanged reads; a kind, variant or compression out of range, a
   * kernel count or a name length larger than the file (allocating
   * nothing for them), a name with a NUL inside, an end that counts
   * other entries. */
  const size_t e0 = sizeof (IB_KERNELS_CACHE_MAGIC) + 1; /* the first entry, after its 'e' */
  CHECK (t, !forged_reads_as_none (dir, rec, n, e0, IB_CUDA_SASS, 1));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0, 3, 1));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 1, 'b', 1));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 2, 3, 1));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 3, 2, 1));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 48, UINT32_MAX, 4));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 52, UINT32_MAX, 4));
  CHECK (t, forged_reads_as_none (dir, rec, n, e0 + 56, 0, 1)); /* a NUL in the first name */
  CHECK (t, forged_reads_as_none (dir, rec, n, n - 12, 2, 8));
  /* A JSON record of before: not found, so made again. */
  cJSON *j = ib_cuda_file_json (&f);
  cJSON_AddStringToObject (j, "cache", "imgbuild-kernels 3");
  cleanup_free char *text = cJSON_PrintUnformatted (j);
  cJSON_Delete (j);
  CHECK (t, reads_as_none (dir, text, strlen (text)));
}
