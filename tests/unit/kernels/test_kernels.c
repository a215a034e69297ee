/* The kernels module's parts that nvcc output cannot reach in the
 * integration tests: streaming payloads larger than the decoders' buffers. */
#include <fcntl.h>
#include <lz4.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "kernels/kgate.h"
#include "kernels/payload.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

/* 5 MiB that compress: random literals and copies of 4..67 bytes from up
 * to 65,000 bytes back, some overlapping themselves (distance < length). */
static unsigned char *
sample (size_t n)
{
  unsigned char *p = malloc (n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n;)
    {
      x = x * 1103515245u + 12345u;
      size_t len = 4 + (x >> 10) % 64, dist = 1 + (x >> 3) % 65000;
      if (i > dist && (x >> 28) < 12)
        for (size_t k = 0; k < len && i < n; k++, i++)
          p[i] = p[i - dist];
      else
        p[i++] = (unsigned char) (x >> 16);
    }
  return p;
}

struct sink
{
  const unsigned char *want;
  uint64_t seen;
  int bad;
};

static int
check_piece (void *data, const unsigned char *p, size_t n, uint64_t off, ib_error_t *err)
{
  (void) err;
  struct sink *s = data;
  if (off != s->seen || memcmp (p, s->want + off, n) != 0)
    s->bad++;
  s->seen += n;
  return 0;
}

static int
payload_file (const void *bytes, size_t n)
{
  char path[4200];
  snprintf (path, sizeof (path), "%s/payload", test_tmpdir ());
  int fd = open (path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (write (fd, "HEAD", 4) != 4 || write (fd, bytes, n) != (ssize_t) n)
    return -1;
  return fd;
}

/* LZ4 decoded a run at a time (kernels/payload.c): literal runs longer
 * than an input chunk (1.5 MiB of random bytes), a byte repeated far past
 * the window (a match 1 back over 3 MiB), matches whose source overlaps
 * them, and a block cut short or claiming bytes before the first, against
 * liblz4's own compressor. */
void
payload_lz4_long_literals_and_runs_cross_the_windows (struct test_ctx *t)
{
  size_t n = 6u << 20, r = 3u << 19, z = 3u << 20;
  cleanup_free unsigned char *plain = malloc (n);
  cleanup_free unsigned char *tail = sample (n - r - z);
  uint32_t x = 777;
  for (size_t i = 0; i < r; i++)
    {
      x = x * 1103515245u + 12345u;
      plain[i] = (unsigned char) (x >> 16);
    }
  memset (plain + r, 0x5a, z);
  memcpy (plain + r + z, tail, n - r - z);
  int bound = LZ4_compressBound ((int) n);
  cleanup_free char *lz = malloc ((size_t) bound);
  int lz_n = LZ4_compress_default ((const char *) plain, lz, (int) n, bound);
  CHECK (t, lz_n > (int) r && lz_n < (int) n);
  int fd = payload_file (lz, (size_t) lz_n);
  struct ib_payload pl = { fd, "payload", 4, (size_t) lz_n, n, IB_PAYLOAD_LZ4, NULL };
  struct sink s = { plain, 0, 0 };
  ib_error_t err = NULL;
  CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) == 0 && s.bad == 0 && s.seen == n);
  ib_error_release (&err);
  /* Cut short: an error, never bytes that are not the payload's. */
  pl.stored = (size_t) lz_n / 2;
  s = (struct sink){ plain, 0, 0 };
  CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) < 0 && err && s.bad == 0);
  ib_error_release (&err);
  close (fd);
  /* A first sequence whose match reaches before the payload's start. */
  const unsigned char bad[] = { 0x10, 'a', 0x05, 0x00, 0x00 };
  fd = payload_file (bad, sizeof (bad));
  pl = (struct ib_payload){ fd, "payload", 4, sizeof (bad), 10, IB_PAYLOAD_LZ4, NULL };
  s = (struct sink){ (const unsigned char *) "aaaaaaaaaa", 0, 0 };
  CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) < 0 && err && strstr (err->msg, "does not decompress"));
  ib_error_release (&err);
  close (fd);
}

void
payload_streams_lz4_zstd_and_plain (struct test_ctx *t)
{
  size_t n = 5u << 20;
  unsigned char *plain = sample (n);
  int bound = LZ4_compressBound ((int) n);
  char *lz = malloc ((size_t) bound);
  int lz_n = LZ4_compress_default ((const char *) plain, lz, (int) n, bound);
  size_t zb = ZSTD_compressBound (n);
  unsigned char *zs = malloc (zb);
  size_t zs_n = ZSTD_compress (zs, zb, plain, n, 3);
  CHECK (t, lz_n > 0 && lz_n < (int) n && !ZSTD_isError (zs_n));
  struct
  {
    enum ib_payload_codec codec;
    const void *bytes;
    size_t len;
  } cases[] = { { IB_PAYLOAD_LZ4, lz, (size_t) lz_n }, { IB_PAYLOAD_ZSTD, zs, zs_n }, { IB_PAYLOAD_PLAIN, plain, n } };
  /* Each codec with buffers of its own, then all three with one scratch
   * (an inspection's): a zstd context kept from a stream that failed
   * half-way decompresses the next one from its start. */
  struct ib_payload_scratch *sc = ib_payload_scratch_new ();
  for (size_t k = 0; k < 6; k++)
    {
      size_t c = k % 3;
      int fd = payload_file (cases[c].bytes, cases[c].len);
      struct ib_payload pl = { fd, "payload", 4, cases[c].len, n, cases[c].codec, k < 3 ? NULL : sc };
      struct sink s = { plain, 0, 0 };
      ib_error_t err = NULL;
      CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) == 0);
      if (err)
        fprintf (stderr, "  codec %d: %s\n", (int) cases[c].codec, err->msg);
      ib_error_release (&err);
      CHECK (t, s.bad == 0 && s.seen == n);
      /* Ranges far apart, one of them at the very end. */
      struct ib_payload_range r[2] = { { 100, 10, NULL }, { n - 70000, 70000, NULL } };
      CHECK (t, ib_payload_collect (&pl, r, 2, &err) == 0);
      CHECK (t, r[0].buf && memcmp (r[0].buf, plain + 100, 10) == 0);
      CHECK (t, r[1].buf && memcmp (r[1].buf, plain + n - 70000, 70000) == 0);
      free (r[0].buf);
      free (r[1].buf);
      /* A collection that stops early leaves a zstd frame half read: the
       * next stream over the same scratch starts at the payload's start. */
      struct ib_payload_range head = { 100, 10, NULL };
      CHECK (t, ib_payload_collect (&pl, &head, 1, &err) == 0);
      free (head.buf);
      s = (struct sink){ plain, 0, 0 };
      CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) == 0 && s.bad == 0 && s.seen == n);
      ib_error_release (&err);
      /* A header that claims more than the stream gives is an error. */
      if (cases[c].codec != IB_PAYLOAD_PLAIN)
        {
          pl.size = n + 1;
          s.seen = 0;
          CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) < 0);
          CHECK (t, err && strstr (err->msg, "offset 4"));
          ib_error_release (&err);
          pl.size = n;
          s = (struct sink){ plain, 0, 0 };
          CHECK (t, ib_payload_stream (&pl, check_piece, &s, &err) == 0 && s.bad == 0 && s.seen == n);
          ib_error_release (&err);
        }
      /* Damage in the middle: an error or other bytes, never a crash or
       * a write out of bounds (the ASan build runs this). */
      if (cases[c].codec == IB_PAYLOAD_LZ4)
        {
          unsigned char junk[64];
          memset (junk, 0xff, sizeof (junk));
          CHECK (t, pwrite (fd, junk, sizeof (junk), 4 + (off_t) cases[c].len / 2) == sizeof (junk));
          pl.size = n;
          s.seen = 0;
          int r = ib_payload_stream (&pl, check_piece, &s, &err);
          CHECK (t, r < 0 || s.bad > 0);
          ib_error_release (&err);
        }
      close (fd);
    }
  ib_payload_scratch_free (sc);
  free (plain);
  free (lz);
  free (zs);
}

#include "kernels/jitbudget.h"
#include "kernels/target.h"

void
target_tables_and_parsing (struct test_ctx *t)
{
  struct ib_driver_version d;
  char buf[32];
  CHECK (t, ib_driver_version_parse ("580.95.05", &d) == 0 && d.major == 580 && d.minor == 95 && d.patch == 5);
  CHECK (t, ib_driver_version_parse ("580", &d) == 0 && d.minor == 0);
  CHECK (t, ib_driver_version_parse ("12.1", &d) < 0 && ib_driver_version_parse ("580.x", &d) < 0);
  ib_driver_version_parse ("580.95.05", &d);
  CHECK (t, ib_driver_max_cuda (d) == 13000 && ib_driver_max_ptx (d) == 90);
  ib_driver_version_parse ("570.124.06", &d);
  CHECK (t, ib_driver_max_cuda (d) == 12080 && ib_driver_max_ptx (d) == 87);
  ib_driver_version_parse ("575.51.02", &d); /* just below 12.9's GA driver */
  CHECK (t, ib_driver_max_cuda (d) == 12080);
  ib_driver_version_parse ("400.1", &d);
  CHECK (t, ib_driver_max_cuda (d) == 0 && ib_driver_max_ptx (d) == 0);
  struct ib_driver_version full, floor;
  CHECK (t, ib_cuda_min_driver (13000, &full, &floor));
  ib_driver_version_str (full, buf, sizeof (buf));
  CHECK_STR (t, buf, "580.65.06");
  ib_driver_version_str (floor, buf, sizeof (buf));
  CHECK_STR (t, buf, "580");
  CHECK (t, ib_cuda_min_driver (11080, &full, &floor) && floor.major == 450 && full.major == 520);
  CHECK (t, ib_cuda_for_gpu ((struct ib_compute_capability) { 12, 1 }) == 12090);
  CHECK (t, ib_cuda_for_gpu ((struct ib_compute_capability) { 8, 0 }) == 11000);
  CHECK (t, ib_cuda_version_parse ("12.9.86") == 12090 && ib_cuda_version_parse ("x") == 0);
  CHECK (t, ib_cuda_version_of_name ("/usr/lib/libcudart.so.11.8.89") == 11080);
  CHECK (t, ib_cuda_version_of_name ("/usr/lib/libcudart.so.13") == 13000);
  CHECK (t, ib_cuda_version_of_name ("/usr/lib/libcudart.so") == 0);
  /* [target] keys, and a bad value names its line. */
  struct ib_target tg = { 0 };
  ib_error_t err = NULL;
  CHECK (t, ib_target_parse (&tg, "gpu", "12.1 9.0", "image.conf:3", &err) == 0 && tg.n_gpus == 2);
  CHECK (t, ib_target_parse (&tg, "driver", "570.124.06", "image.conf:4", &err) == 0);
  CHECK (t, ib_target_driver (&tg).major == 570);
  CHECK (t, ib_target_parse (&tg, "driver", "new", "image.conf:5", &err) < 0);
  CHECK (t, err && strstr (err->msg, "image.conf:5: driver `new`"));
  ib_error_release (&err);
  CHECK (t, ib_target_parse (&tg, "colour", "red", "image.conf:6", &err) < 0);
  ib_error_release (&err);
  ib_target_clear (&tg);
  CHECK (t, ib_target_driver (NULL).major == 580);
  /* PTX JIT reach: plain forward, 'a' exact, 'f' within the family. */
  CHECK (t, ib_ptx_runs_on (120, 0, 12, 1) && ib_ptx_runs_on (80, 0, 12, 1) && !ib_ptx_runs_on (121, 0, 12, 0));
  CHECK (t, ib_ptx_runs_on (121, 'a', 12, 1) && !ib_ptx_runs_on (120, 'a', 12, 1));
  CHECK (t, ib_ptx_runs_on (120, 'f', 12, 1) && !ib_ptx_runs_on (100, 'f', 12, 1));
}

/* A budget over hand-made entries: runs, JIT, covered elsewhere, neither,
 * relocatable entries never counted. */
void
jit_budget_counts (struct test_ctx *t)
{
  char *k_run[] = { "run" }, *k_ptx[] = { "jit", "elsewhere" }, *k_old[] = { "old" }, *k_rel[] = { "rel" };
  struct ib_cuda_entry a[] = {
    { IB_CUDA_SASS, 120, 0, "none", 10, 10, false, 0, 0, 1, k_run, 0, 0 },
    { IB_CUDA_PTX, 120, 0, "none", 100, 1000, false, 9, 0, 2, k_ptx, 0, 0 },
    { IB_CUDA_SASS, 90, 'a', "none", 10, 10, false, 0, 0, 1, k_old, 0, 0 },
    { IB_CUDA_SASS, 121, 'a', "none", 10, 10, true, 0, 0, 1, k_rel, 0, 0 },
  };
  char *k_else[] = { "elsewhere" };
  struct ib_cuda_entry b[] = { { IB_CUDA_SASS, 121, 'a', "none", 10, 10, false, 0, 0, 1, k_else, 0, 0 } };
  struct ib_cuda_file fa = { .n = 4, .e = a }, fb = { .n = 1, .e = b };
  struct ib_cuda_file *code[] = { &fa, &fb };
  const char *paths[] = { "/a.so", "/b.cubin" };
  struct ib_target tg = { 0 };
  ib_driver_version_parse ("570.124.06", &tg.driver);
  struct ib_jit_budget *jb = ib_jit_budget_compute (paths, code, 2, &tg);
  const struct ib_jit_file *f = &jb->f[0];
  CHECK (t, f->sass_entries == 2 && f->ptx_entries == 1 && f->relocatable_entries == 1);
  CHECK (t, f->kernels == 4 && f->runs == 1 && f->covered == 1 && f->jit == 1 && f->none == 1);
  CHECK (t, f->jit_ptx_bytes == 1000 && f->n_jit_names == 1 && strcmp (f->jit_names[0], "jit") == 0);
  CHECK (t, f->n_none_names == 1 && strcmp (f->none_names[0], "old") == 0);
  CHECK (t, f->ptx_too_new == 1 && jb->driver_ptx == 87);
  CHECK (t, jb->f[1].runs == 1 && jb->f[1].jit == 0);
  ib_jit_budget_free (jb);
  /* No kernel that runs anywhere (only PTX): an empty list to sort, which
   * UBSan caught as qsort of a null pointer in the fleet suite. */
  struct ib_cuda_file only_ptx = { .n = 1, .e = &a[1] };
  struct ib_cuda_file *one[] = { &only_ptx };
  jb = ib_jit_budget_compute (paths, one, 1, &tg);
  CHECK (t, jb->n == 1 && jb->f[0].runs == 0 && jb->f[0].jit + jb->f[0].none == 2);
  ib_jit_budget_free (jb);
}

/* The kernels indexer (kindex.c) keeps a file as "no GPU code" only when
 * the head it was shown proves it neither an ELF object nor a fatbin, by
 * any name; a head too short to tell is inspected (a descriptor asked). */
static struct ib_store *
indexer_in_a_store (struct test_ctx *t, struct ib_kernels_indexer *x)
{
  ib_error_t err = NULL;
  struct ib_store *s = NULL;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "kstore");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  CHECK (t, ib_kernels_indexer_init (s, x, &err) == 0);
  ib_error_release (&err);
  return s;
}

void
kernels_indexer_judges_by_content_not_name (struct test_ctx *t)
{
  struct ib_kernels_indexer x;
  struct ib_store *s = indexer_in_a_store (t, &x);
  unsigned char elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
  unsigned char fatbin[64] = { 0x50, 0xed, 0x55, 0xba, 1, 0 };
  unsigned char man[64] = ".TH libOpenCL 7 \"2023\" man page, gzip-free for the test ....";
  const struct ib_indexer *ix = &x.ix;
  CHECK (t, ix->wants (ix->data, "usr/bin/ls", 64, elf, 64) == IB_INDEX_FD);
  CHECK (t, ix->wants (ix->data, "usr/lib/k.bin", 64, fatbin, 64) == IB_INDEX_FD);
  CHECK (t, ix->wants (ix->data, "usr/lib/libOpenCL.so.7", 64, man, 64) == IB_INDEX_DIGEST);
  /* A first read of 3 bytes of a larger file tells nothing yet. */
  CHECK (t, ix->wants (ix->data, "usr/share/man/x.7", 64, man, 3) == IB_INDEX_FD);
  /* A file of 3 bytes is whole in its head: no magic fits in it. */
  CHECK (t, ix->wants (ix->data, "usr/share/x", 3, man, 3) == IB_INDEX_DIGEST);
  /* The digests it keeps, past its buffer (kept in a file): 3000 of them,
   * each answered, any other not, a question asked twice answered twice. */
  char d[3000][65];
  for (size_t i = 0; i < 3000; i++)
    {
      snprintf (d[i], sizeof (d[i]), "%064zx", i * 7919);
      ix->index (ix->data, "usr/share/man/x.7", d[i], NULL, 0, -1);
    }
  const char *ask[] = { d[0], d[2999], "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", d[2047],
                        d[2999], "not hex" };
  bool none[6];
  ib_kernels_indexer_no_code (&x, ask, 6, none);
  CHECK (t, none[0] && none[1] && !none[2] && none[3] && none[4] && !none[5]);
  /* Registered, a gate finds it by its name. */
  ib_store_add_indexer (s, ix);
  CHECK (t, ib_store_indexer (s, IB_KERNELS_INDEXER) == ix);
  ib_kernels_indexer_clear (&x);
  ib_store_free (s);
}

/* The file-list pass makes the record of a file again over an old one
 * (it skips only a record of this version). */
void
kernels_indexer_redoes_an_old_record (struct test_ctx *t)
{
  struct ib_kernels_indexer x;
  struct ib_store *s = indexer_in_a_store (t, &x);
  const char *digest = "00000000000000000000000000000000000000000000000000000000000000aa";
  cleanup_free char *path = ib_path_join (x.cache, digest);
  const char *old = "{\"entries\":[],\"cache\":\"imgbuild-kernels 3\"}";
  ib_write_cache_file (path, old, strlen (old), NULL);
  CHECK (t, ib_kernels_cache_load (x.cache, digest) == NULL);
  /* An ELF object with no sections: no GPU code, an empty record. */
  unsigned char elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
  cleanup_free char *obj = ib_path_join (test_tmpdir (), "lib.so");
  ib_write_cache_file (obj, elf, sizeof (elf), NULL);
  cleanup_close int fd = open (obj, O_RDONLY | O_CLOEXEC);
  x.ix.index (x.ix.data, "usr/lib/libx.so", digest, NULL, 0, fd);
  struct ib_cuda_file *f = ib_kernels_cache_load (x.cache, digest);
  CHECK (t, f != NULL && f->n == 0);
  ib_cuda_file_free (f);
  ib_kernels_indexer_clear (&x);
  ib_store_free (s);
}

/* NVIDIA's tables as NVIDIA prints them (CUDA Toolkit release notes, "CUDA
 * Toolkit and Corresponding Driver Versions", the Linux GA driver of each
 * release; PTX ISA reference, the ISA each release introduced; the minor-
 * version floors; the first release for each GPU), written out again here
 * so that a row of kernels/target.c that drifts from them fails: each
 * driver at its boundary gives its release and ISA, one step below it the
 * release and ISA before. */
static const struct
{
  const char *cuda, *driver, *ptx;
} nvidia_releases[] = {
  { "11.0", "450.36.06", "7.0" }, { "11.1", "455.23", "7.1" },    { "11.2", "460.27.03", "7.2" },
  { "11.3", "465.19.01", "7.3" }, { "11.4", "470.42.01", "7.4" }, { "11.5", "495.29.05", "7.5" },
  { "11.6", "510.39.01", "7.6" }, { "11.7", "515.43.04", "7.7" }, { "11.8", "520.61.05", "7.8" },
  { "12.0", "525.60.13", "8.0" }, { "12.1", "530.30.02", "8.1" }, { "12.2", "535.54.03", "8.2" },
  { "12.3", "545.23.06", "8.3" }, { "12.4", "550.54.14", "8.4" }, { "12.5", "555.42.02", "8.5" },
  { "12.6", "560.28.03", "8.5" }, { "12.7", "565.57.01", "8.6" }, { "12.8", "570.26", "8.7" },
  { "12.9", "575.51.03", "8.8" }, { "13.0", "580.65.06", "9.0" }, { "13.1", "590.44.01", "9.1" },
};

static unsigned
ptx_number (const char *s)
{
  unsigned a = 0, b = 0;
  return sscanf (s, "%u.%u", &a, &b) == 2 ? a * 10 + b : 0;
}

/* The newest driver version before D. */
static struct ib_driver_version
just_below (struct ib_driver_version d)
{
  if (d.patch)
    return (struct ib_driver_version) { d.major, d.minor, d.patch - 1 };
  if (d.minor)
    return (struct ib_driver_version) { d.major, d.minor - 1, 99 };
  return (struct ib_driver_version) { d.major - 1, 999, 99 };
}

void
target_every_table_row_at_its_boundary (struct test_ctx *t)
{
  static const char *const floors[][2] = { { "11", "450.80.02" }, { "12", "525.60.13" }, { "13", "580" } };
  size_t n = sizeof (nvidia_releases) / sizeof (nvidia_releases[0]);
  for (size_t i = 0; i < n; i++)
    {
      struct ib_driver_version d, full, floor, want_floor = { 0, 0, 0 };
      unsigned cuda = ib_cuda_version_parse (nvidia_releases[i].cuda);
      unsigned ptx = ptx_number (nvidia_releases[i].ptx);
      unsigned before = i ? ib_cuda_version_parse (nvidia_releases[i - 1].cuda) : 0;
      unsigned ptx_before = i ? ptx_number (nvidia_releases[i - 1].ptx) : 0;
      CHECK (t, ib_driver_version_parse (nvidia_releases[i].driver, &d) == 0);
      unsigned got = ib_driver_max_cuda (d), got_ptx = ib_driver_max_ptx (d);
      unsigned below = ib_driver_max_cuda (just_below (d)), below_ptx = ib_driver_max_ptx (just_below (d));
      if (got != cuda || got_ptx != ptx || below != before || below_ptx != ptx_before)
        fprintf (stderr, "  driver %s: CUDA %u PTX %u (want %u %u); just below: CUDA %u PTX %u (want %u %u)\n",
                 nvidia_releases[i].driver, got, got_ptx, cuda, ptx, below, below_ptx, before, ptx_before);
      CHECK (t, got == cuda && got_ptx == ptx);
      CHECK (t, below == before && below_ptx == ptx_before);
      CHECK (t, ib_cuda_min_driver (cuda, &full, &floor) && ib_driver_version_cmp (full, d) == 0);
      for (size_t f = 0; f < 3; f++)
        if ((unsigned) atoi (floors[f][0]) == cuda / 1000)
          ib_driver_version_parse (floors[f][1], &want_floor);
      CHECK (t, ib_driver_version_cmp (floor, want_floor) == 0);
    }
  static const struct
  {
    unsigned major, minor;
    const char *cuda;
  } gpus[] = { { 7, 0, "9.0" },   { 7, 5, "10.0" },  { 8, 0, "11.0" },  { 8, 6, "11.1" },
               { 8, 7, "11.4" },  { 8, 9, "11.8" },  { 9, 0, "12.0" },  { 10, 0, "12.8" },
               { 10, 3, "12.9" }, { 11, 0, "13.0" }, { 12, 0, "12.8" }, { 12, 1, "12.9" } };
  for (size_t i = 0; i < sizeof (gpus) / sizeof (gpus[0]); i++)
    CHECK (t, ib_cuda_for_gpu ((struct ib_compute_capability) { gpus[i].major, gpus[i].minor })
                  == ib_cuda_version_parse (gpus[i].cuda));
}
