/* layers/: digests, store, deterministic layers, the layer reader, fsview. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "layers/view/fscache.h"
#include "layers/view/fsview.h"
#include "layers/read/layer_reader.h"
#include "layers/store/store.h"
#include "layers/tar/tarcheck.h"
#include "layers/tar/tarlayer.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"
#include "layers/tar/tarpath.h"

void
digest_known_values (struct test_ctx *t)
{
  ib_digest d;
  ib_sha256_buf ("", 0, &d);
  CHECK_STR (t, d.s, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  ib_sha256_buf ("abc", 3, &d);
  CHECK_STR (t, d.s, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  /* Streaming in pieces gives the same digest. */
  ib_sha256 *h = ib_sha256_new ();
  ib_sha256_update (h, "a", 1);
  ib_sha256_update (h, "bc", 2);
  ib_digest d2;
  ib_sha256_final (h, &d2);
  ib_sha256_free (h);
  CHECK_STR (t, d2.s, d.s);
}

void
digest_check_rejects_bad (struct test_ctx *t)
{
  ib_error_t err = NULL;
  CHECK (t, ib_digest_check ("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", &err) == 0);
  const char *bad[] = { "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
                        "sha256:e3b0", "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                        "sha256:../../../../etc/passwd", "", NULL };
  for (int i = 0; bad[i]; i++)
    {
      CHECK (t, ib_digest_check (bad[i], &err) < 0);
      CHECK (t, err && err->class == IB_EINTEGRITY);
      ib_error_release (&err);
    }
}

void
clean_tar_path (struct test_ctx *t)
{
  char *p;
  CHECK_STR (t, (p = ib_clean_tar_path ("./usr//lib/./x.so")), "usr/lib/x.so");
  free (p);
  CHECK_STR (t, (p = ib_clean_tar_path ("/a/b/")), "a/b");
  free (p);
  CHECK (t, ib_clean_tar_path ("a/../../etc/passwd") == NULL);
  CHECK (t, ib_clean_tar_path ("./") == NULL);
}

/* The problems that ENTRIES (NAME, TYPE, MODE; NULL NAME ends) raise, one
 * string "NAME: WHY|..." to compare. */
static char *
tar_problems (const char *const *names, const mode_t *types, const mode_t *modes)
{
  struct ib_tar_check *c = ib_tar_check_new ();
  for (size_t i = 0; names[i]; i++)
    {
      struct archive_entry *ae = archive_entry_new ();
      archive_entry_set_pathname (ae, names[i]);
      archive_entry_set_filetype (ae, types[i]);
      archive_entry_set_perm (ae, modes[i]);
      ib_tar_check_entry (c, ae, NULL);
      archive_entry_free (ae);
    }
  size_t n;
  const char *const *p = ib_tar_check_problems (c, &n);
  char *out = ib_xstrdup ("");
  for (size_t i = 0; i < n; i++)
    {
      char *more = ib_xasprintf ("%s%s%s", out, i ? "|" : "", p[i]);
      free (out);
      out = more;
    }
  ib_tar_check_free (c);
  return out;
}

void
tar_check_root_entry_is_not_hostile (struct test_ctx *t)
{
  /* The root folder as umoci (`/`) and GNU tar (`./`, `.`) write it: a real
   * Debian base made by either has it, and it names nothing outside. */
  const char *root[] = { "/", "./", ".", "etc/", "etc/hosts", NULL };
  const mode_t rt[] = { AE_IFDIR, AE_IFDIR, AE_IFDIR, AE_IFDIR, AE_IFREG };
  const mode_t rm[] = { 0755, 0755, 0755, 0755, 0644 };
  cleanup_free char *ok = tar_problems (root, rt, rm);
  CHECK_STR (t, ok, "");
  /* Anything else absolute or climbing is named, the root as a file too. */
  const char *bad[] = { "/", "/etc/passwd", "a/../../x", "./usr/bin/su", NULL };
  const mode_t bt[] = { AE_IFREG, AE_IFREG, AE_IFDIR, AE_IFREG };
  const mode_t bm[] = { 0644, 0644, 0755, 04755 };
  cleanup_free char *named = tar_problems (bad, bt, bm);
  CHECK_STR (t, named, "entry `/`: absolute name|entry `/etc/passwd`: absolute name|entry `a/../../x`: name with a `..` "
                       "component|entry `./usr/bin/su`: setuid or setgid file");
}

/* Each finding's class, by its WHY: the privileged kinds (counted) apart
 * from those that escape or lie (refused), also for a name that holds a
 * WHY of the other class and for a name cut at 200 bytes. */
void
tar_finding_kinds_privileged_apart_from_escaping (struct test_ctx *t)
{
  const char *names[] = { "usr/bin/passwd", "dev/null", "run/fifo", "x`: setuid or setgid file/../y", "dev/z", NULL };
  const mode_t types[] = { AE_IFREG, AE_IFCHR, AE_IFIFO, AE_IFREG, AE_IFBLK };
  const mode_t modes[] = { 04755, 0666, 0644, 04755, 0600 };
  struct ib_tar_check *c = ib_tar_check_new ();
  for (int i = 0; names[i]; i++)
    {
      struct archive_entry *ae = archive_entry_new ();
      archive_entry_set_pathname (ae, names[i]);
      archive_entry_set_filetype (ae, types[i]);
      archive_entry_set_perm (ae, modes[i]);
      ib_tar_check_entry (c, ae, NULL);
      archive_entry_free (ae);
    }
  size_t n;
  const char *const *p = ib_tar_check_problems (c, &n);
  CHECK (t, n == 5);
  if (n == 5)
    {
      CHECK (t, ib_tar_finding_kind (p[0]) == IB_TAR_SETID);
      CHECK (t, ib_tar_finding_kind (p[1]) == IB_TAR_DEVICE);
      CHECK (t, ib_tar_finding_kind (p[2]) == IB_TAR_FIFO);
      CHECK (t, ib_tar_finding_kind (p[3]) == IB_TAR_ESCAPE); /* the `..` name, whatever it says */
      CHECK (t, ib_tar_finding_kind (p[4]) == IB_TAR_DEVICE);
      cleanup_free char *prefixed = ib_xasprintf ("layer sha256:00: %s", p[0]);
      CHECK (t, ib_tar_finding_kind (prefixed) == IB_TAR_SETID);
      cleanup_free char *name = ib_tar_finding_name (prefixed);
      CHECK_STR (t, name, "usr/bin/passwd");
      cleanup_free char *tricky = ib_tar_finding_name (p[3]);
      CHECK_STR (t, tricky, "x`: setuid or setgid file/../y");
    }
  CHECK (t, ib_tar_finding_kind ("entry `a`: socket") == IB_TAR_SOCKET);
  CHECK (t, ib_tar_finding_kind ("entry `a`: the same path twice in the layer") == IB_TAR_ESCAPE);
  CHECK (t, ib_tar_finding_kind ("entry `a`: malformed header: x`: FIFO") == IB_TAR_FIFO); /* why the reader quotes */
  ib_tar_check_free (c);
}

void
store_blob_roundtrip (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  ib_digest d;
  CHECK (t, ib_store_put_blob (s, "hello", 5, &d, &err) == 0);
  CHECK (t, ib_store_has_blob (s, &d));
  char *buf = NULL;
  size_t len = 0;
  CHECK (t, ib_store_read_blob (s, &d, 100, &buf, &len, &err) == 0 && len == 5 && memcmp (buf, "hello", 5) == 0);
  free (buf);
  /* A blob whose bytes were changed on disk is refused when read. */
  cleanup_free char *path = ib_store_blob_path (s, &d);
  FILE *f = fopen (path, "w");
  fputs ("hellO", f);
  fclose (f);
  CHECK (t, ib_store_read_blob (s, &d, 100, &buf, &len, &err) < 0 && err->class == IB_EINTEGRITY);
  ib_error_release (&err);
  ib_store_free (s);
}

void
store_sweeps_stale_temporaries (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  ib_store_free (s);
  /* A killed writer's leftover (two hours old) and a live one's (now). */
  cleanup_free char *blobs = ib_path_join (root, "blobs/sha256");
  const char *stale = test_write (blobs, ".tmp-stale1", "partial");
  cleanup_free char *stale_path = ib_xstrdup (stale);
  const char *live = test_write (blobs, ".tmp-live01", "partial");
  cleanup_free char *live_path = ib_xstrdup (live);
  struct timespec old[2] = { { time (NULL) - 7200, 0 }, { time (NULL) - 7200, 0 } };
  CHECK (t, utimensat (AT_FDCWD, stale_path, old, 0) == 0);
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  CHECK (t, access (stale_path, F_OK) < 0);
  CHECK (t, access (live_path, F_OK) == 0);
  ib_store_free (s);
}

void
store_writer_refuses_wrong_digest (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_blob_writer *w;
  ib_digest expected;
  ib_sha256_buf ("good", 4, &expected);
  CHECK (t, ib_blob_writer_new (s, &w, &err) == 0);
  CHECK (t, ib_blob_writer_write (w, "evil", 4, &err) == 0);
  CHECK (t, ib_blob_writer_commit (w, &expected, 4, NULL, NULL, &err) < 0);
  CHECK (t, err && err->class == IB_EINTEGRITY);
  ib_error_release (&err);
  CHECK (t, !ib_store_has_blob (s, &expected));
  ib_digest evil;
  ib_sha256_buf ("evil", 4, &evil);
  CHECK (t, !ib_store_has_blob (s, &evil));
  /* No temporary file is left behind. */
  cleanup_free char *cmd = ib_xasprintf ("test -z \"$(ls -A %s/blobs/sha256)\"", root);
  CHECK (t, system (cmd) == 0);
  ib_store_free (s);
}

/* Write LEN bytes of BUF in pieces of at most PIECE through a writer. */
static int
write_blob (struct ib_store *s, const char *buf, size_t len, size_t piece, ib_digest *d, ib_error_t *err)
{
  struct ib_blob_writer *w;
  if (ib_blob_writer_new (s, &w, err) < 0)
    return -1;
  for (size_t at = 0; at < len; at += piece)
    if (ib_blob_writer_write (w, buf + at, len - at < piece ? len - at : piece, err) < 0)
      {
        ib_blob_writer_abort (w);
        return -1;
      }
  uint64_t size = 0;
  int r = ib_blob_writer_commit (w, NULL, UINT64_MAX, d, &size, err);
  return r == 0 && size != len ? -1 : r;
}

static ino_t
inode_of (struct ib_store *s, const ib_digest *d, off_t *size)
{
  cleanup_free char *path = ib_store_blob_path (s, d);
  struct stat st;
  if (stat (path, &st) < 0)
    return 0;
  *size = st.st_size;
  return st.st_ino;
}

/* A blob the store already holds is not written again (its file, inode and
 * all, stays), whether its bytes were held in memory or passed the first
 * MiB; a file of another size under its name is replaced. */
void
store_writer_keeps_a_blob_it_holds (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  size_t big = (3u << 20) / 2 + 5;
  cleanup_free char *bytes = ib_xmalloc (big);
  for (size_t i = 0; i < big; i++)
    bytes[i] = (char) (i * 7 + i / 4096);
  ib_digest want_small, want_big, small, big_d;
  ib_sha256_buf (bytes, 10, &want_small);
  ib_sha256_buf (bytes, big, &want_big);
  CHECK (t, write_blob (s, bytes, 10, 3, &small, &err) == 0 && strcmp (small.s, want_small.s) == 0);
  CHECK (t, write_blob (s, bytes, big, 700000, &big_d, &err) == 0 && strcmp (big_d.s, want_big.s) == 0);
  char *back = NULL;
  size_t len = 0;
  CHECK (t, ib_store_read_blob (s, &big_d, big, &back, &len, &err) == 0 && len == big && memcmp (back, bytes, big) == 0);
  free (back);
  off_t size = 0;
  ino_t small_ino = inode_of (s, &small, &size), big_ino = inode_of (s, &big_d, &size);
  CHECK (t, small_ino != 0 && big_ino != 0);
  CHECK (t, write_blob (s, bytes, 10, 10, &small, &err) == 0 && inode_of (s, &small, &size) == small_ino);
  CHECK (t, write_blob (s, bytes, big, 1u << 16, &big_d, &err) == 0 && inode_of (s, &big_d, &size) == big_ino);
  CHECK (t, ib_store_put_blob (s, bytes, 10, &small, &err) == 0 && inode_of (s, &small, &size) == small_ino);
  /* A short file under the digest's name is no copy of the blob. */
  cleanup_free char *path = ib_store_blob_path (s, &small);
  CHECK (t, truncate (path, 4) == 0);
  CHECK (t, write_blob (s, bytes, 10, 10, &small, &err) == 0);
  CHECK (t, inode_of (s, &small, &size) != small_ino && size == 10);
  /* No temporary file is left behind. */
  cleanup_free char *cmd = ib_xasprintf ("test -z \"$(ls -A %s/blobs/sha256 | grep '^[.]')\"", root);
  CHECK (t, system (cmd) == 0);
  ib_error_release (&err);
  ib_store_free (s);
}

void
store_tag_replaces_atomically (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_descriptor a = { .media_type = IB_MT_OCI_MANIFEST }, b = a, got = { 0 };
  CHECK (t, ib_store_put_blob (s, "{\"a\":1}", 7, &a.digest, &err) == 0);
  a.size = 7;
  CHECK (t, ib_store_put_blob (s, "{\"b\":2}", 7, &b.digest, &err) == 0);
  b.size = 7;
  CHECK (t, ib_store_resolve (s, "x:1", &got, &err) < 0 && err->class == IB_ENOTFOUND);
  ib_error_release (&err);
  CHECK (t, ib_store_tag (s, "x:1", &a, NULL, &err) == 0);
  CHECK (t, ib_store_tag (s, "y:1", &a, NULL, &err) == 0);
  CHECK (t, ib_store_tag (s, "x:1", &b, NULL, &err) == 0);
  CHECK (t, ib_store_resolve (s, "x:1", &got, &err) == 0 && strcmp (got.digest.s, b.digest.s) == 0);
  ib_descriptor_clear (&got);
  CHECK (t, ib_store_resolve (s, "y:1", &got, &err) == 0 && strcmp (got.digest.s, a.digest.s) == 0);
  ib_descriptor_clear (&got);
  /* A manifest that is not in the store cannot be tagged. */
  struct ib_descriptor missing = a;
  ib_sha256_buf ("nope", 4, &missing.digest);
  CHECK (t, ib_store_tag (s, "z:1", &missing, NULL, &err) < 0);
  ib_error_release (&err);
  ib_store_free (s);
}

/* An artifact manifest about SUBJECT from DEFINITION (NULL: none). */
static struct ib_descriptor
artifact (struct test_ctx *t, struct ib_store *s, const struct ib_descriptor *subject, const char *definition,
          const char *salt)
{
  ib_error_t err = NULL;
  cleanup_free char *ann = definition ? ib_xasprintf (",\"annotations\":{\"" IB_ANNOTATION_DEFINITION "\":\"%s\"}",
                                                      definition)
                                      : ib_xstrdup ("");
  cleanup_free char *text = ib_xasprintf ("{\"schemaVersion\":2,\"salt\":\"%s\",\"subject\":{\"digest\":\"%s\"}%s}",
                                          salt, subject->digest.s, ann);
  struct ib_descriptor d = { .media_type = IB_MT_OCI_MANIFEST, .size = strlen (text) };
  CHECK (t, ib_store_put_blob (s, text, strlen (text), &d.digest, &err) == 0);
  return d;
}

static size_t
count_referrers (struct test_ctx *t, struct ib_store *s, const struct ib_descriptor *subject, const ib_digest *want)
{
  ib_error_t err = NULL;
  struct ib_descriptor *list;
  size_t n, found = 0;
  CHECK (t, ib_store_find_referrers (s, &subject->digest, &list, &n, &err) == 0);
  for (size_t i = 0; want && i < n; i++)
    found += strcmp (list[i].digest.s, want->s) == 0;
  ib_descriptors_free (list, n);
  return want ? found : n;
}

/* One provenance record per definition: another definition adds one, the
 * same definition replaces its own only. */
void
store_keeps_a_referrer_per_definition (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_descriptor img = { .media_type = IB_MT_OCI_MANIFEST, .size = 7 };
  CHECK (t, ib_store_put_blob (s, "{\"i\":1}", 7, &img.digest, &err) == 0);
  struct ib_descriptor a1 = artifact (t, s, &img, "/x/image.conf", "1");
  struct ib_descriptor b1 = artifact (t, s, &img, "/y/Dockerfile", "1");
  struct ib_descriptor a2 = artifact (t, s, &img, "/x/image.conf", "2");
  CHECK (t, ib_store_tag (s, "x:1", &img, &a1, &err) == 0);
  CHECK (t, count_referrers (t, s, &img, NULL) == 1);
  CHECK (t, ib_store_tag (s, "x:1", &img, &b1, &err) == 0);
  CHECK (t, count_referrers (t, s, &img, NULL) == 2);
  CHECK (t, ib_store_tag (s, NULL, &img, &a2, &err) == 0);
  CHECK (t, count_referrers (t, s, &img, NULL) == 2);
  CHECK (t, count_referrers (t, s, &img, &a2.digest) == 1);
  CHECK (t, count_referrers (t, s, &img, &b1.digest) == 1);
  CHECK (t, count_referrers (t, s, &img, &a1.digest) == 0);
  cleanup_free char *def = ib_store_artifact_definition (s, &b1.digest);
  CHECK (t, def && strcmp (def, "/y/Dockerfile") == 0);
  /* Listing the same artifact twice keeps one entry. */
  CHECK (t, ib_store_tag (s, NULL, &img, &b1, &err) == 0);
  CHECK (t, count_referrers (t, s, &img, NULL) == 2);
  /* Into another layout: both travel. */
  struct ib_store *dst;
  cleanup_free char *root2 = ib_path_join (test_tmpdir (), "store2");
  CHECK (t, ib_store_open (root2, &dst, &err) == 0);
  CHECK (t, ib_store_copy_blob (s, dst, &img, &err) == 0);
  CHECK (t, ib_store_copy_referrer (s, dst, &img, &err) == 0);
  CHECK (t, count_referrers (t, dst, &img, NULL) == 2);
  ib_store_free (dst);
  ib_store_free (s);
}

static void
make_entries (const char *dir, struct ib_layer_entry *e)
{
  e[0] = (struct ib_layer_entry){ .path = "usr/lib/b.py", .type = IB_ENTRY_FILE, .mode = -1 };
  e[0].source = (char *) test_write (dir, "src/b.py", "print('b')\n");
  e[1] = (struct ib_layer_entry){ .path = "usr/lib/a.py", .type = IB_ENTRY_FILE, .mode = -1 };
  e[1].source = (char *) test_write (dir, "src/a.py", "print('a')\n");
  e[2] = (struct ib_layer_entry){ .path = "bin/sh", .type = IB_ENTRY_SYMLINK, .link = "busybox", .mode = -1 };
}

void
layer_is_deterministic (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_layer_entry e[3];
  make_entries (test_tmpdir (), e);
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 6 };
  struct ib_layer_result r1 = { 0 }, r2 = { 0 }, r3 = { 0 };
  CHECK (t, ib_layer_write (s, e, 3, &o, &r1, &err) == 0);
  /* Different source mtimes and group/other bits change nothing (in a
   * store of its own, where the blob is compressed anew, not kept). */
  chmod (e[0].source, 0600);
  chmod (e[1].source, 0666);
  struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };
  utimensat (AT_FDCWD, e[0].source, old, 0);
  struct ib_store *s2;
  cleanup_free char *root2 = ib_path_join (test_tmpdir (), "store2");
  CHECK (t, ib_store_open (root2, &s2, &err) == 0);
  CHECK (t, ib_layer_write (s2, e, 3, &o, &r2, &err) == 0 && !r2.kept);
  ib_store_free (s2);
  CHECK_STR (t, r1.desc.digest.s, r2.desc.digest.s);
  CHECK_STR (t, r1.diff_id.s, r2.diff_id.s);
  /* Parents were added: usr, usr/lib, bin + 3 entries. */
  CHECK (t, r1.n_entries == 6);
  /* The mtime is part of the content. */
  o.mtime = 1700000000;
  CHECK (t, ib_layer_write (s, e, 3, &o, &r3, &err) == 0);
  CHECK (t, strcmp (r1.diff_id.s, r3.diff_id.s) != 0);
  /* The gzip header has no timestamp and no name (RFC 1952: FLG, MTIME). */
  cleanup_free char *blob = ib_store_blob_path (s, &r1.desc.digest);
  unsigned char hdr[10];
  int fd = open (blob, O_RDONLY);
  CHECK (t, read (fd, hdr, 10) == 10);
  close (fd);
  CHECK (t, hdr[0] == 0x1f && hdr[1] == 0x8b && hdr[3] == 0 && hdr[4] == 0 && hdr[5] == 0 && hdr[6] == 0
                && hdr[7] == 0);
  ib_descriptor_clear (&r1.desc);
  ib_descriptor_clear (&r2.desc);
  ib_descriptor_clear (&r3.desc);
  ib_store_free (s);
}

/* A layer of several blocks (util/pgzip.h) has one digest whatever the
 * thread count that deflated it. */
void
layer_same_digest_for_any_threads (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_layer_entry e[3];
  make_entries (test_tmpdir (), e);
  size_t len = 3 * 1024 * 1024 + 777;
  cleanup_free char *big = malloc (len + 1);
  for (size_t i = 0; i < len; i++)
    big[i] = (char) ('a' + (i * 2654435761u >> 13) % 23);
  big[len] = '\0';
  e[0].source = (char *) test_write (test_tmpdir (), "src/big.bin", big);
  struct ib_layer_result r[3] = { 0 };
  static const int threads[] = { 1, 4, 0 };
  for (int i = 0; i < 3; i++)
    {
      /* A store each: compressed each time, never kept from the last. */
      struct ib_store *s;
      cleanup_free char *root = ib_xasprintf ("%s/store%d", test_tmpdir (), i);
      CHECK (t, ib_store_open (root, &s, &err) == 0);
      struct ib_layer_options o = { .mtime = 0, .gzip_level = 6, .threads = threads[i] };
      CHECK (t, ib_layer_write (s, e, 3, &o, &r[i], &err) == 0 && !r[i].kept);
      ib_store_free (s);
    }
  CHECK_STR (t, r[0].desc.digest.s, r[1].desc.digest.s);
  CHECK_STR (t, r[0].desc.digest.s, r[2].desc.digest.s);
  CHECK_STR (t, r[0].diff_id.s, r[1].diff_id.s);
  CHECK (t, r[0].desc.size > 0 && r[0].desc.size < len / 2);
  for (int i = 0; i < 3; i++)
    ib_descriptor_clear (&r[i].desc);
}

/* A layer written before is kept: the same tar gives its blob again
 * without compressing it, for as long as the store holds the blob whole
 * and the record is sound; anything else is compressed anew. */
void
layer_kept_blob_is_not_compressed_again (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_layer_entry e[3];
  make_entries (test_tmpdir (), e);
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 6, .threads = 2 };
  struct ib_layer_result r[7] = { 0 };
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[0], &err) == 0 && !r[0].kept);
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[1], &err) == 0 && r[1].kept);
  CHECK_STR (t, r[1].desc.digest.s, r[0].desc.digest.s);
  CHECK_STR (t, r[1].diff_id.s, r[0].diff_id.s);
  CHECK_STR (t, r[1].desc.media_type, r[0].desc.media_type);
  CHECK (t, r[1].desc.size == r[0].desc.size && r[1].n_entries == r[0].n_entries);
  /* Another level is other bytes. */
  o.gzip_level = 9;
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[2], &err) == 0 && !r[2].kept);
  CHECK_STR (t, r[2].diff_id.s, r[0].diff_id.s);
  o.gzip_level = 6;
  /* Another content is another tar. */
  test_write (test_tmpdir (), "src/b.py", "print('B')\n");
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[3], &err) == 0 && !r[3].kept);
  CHECK (t, strcmp (r[3].diff_id.s, r[0].diff_id.s) != 0);
  test_write (test_tmpdir (), "src/b.py", "print('b')\n");
  /* The blob gone (gc) or short: compressed again, to the same bytes. */
  cleanup_free char *blob = ib_store_blob_path (s, &r[0].desc.digest);
  CHECK (t, truncate (blob, 10) == 0);
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[4], &err) == 0 && !r[4].kept);
  CHECK_STR (t, r[4].desc.digest.s, r[0].desc.digest.s);
  CHECK (t, unlink (blob) == 0);
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[5], &err) == 0 && !r[5].kept);
  CHECK_STR (t, r[5].desc.digest.s, r[0].desc.digest.s);
  /* A damaged record is no record. */
  cleanup_free char *cmd = ib_xasprintf ("for f in %s/imgbuild/layer-gz/%s-gz6-*; do echo sha256:12 3 >$f; done",
                                         root, ib_digest_hex (r[0].diff_id.s));
  CHECK (t, system (cmd) == 0);
  CHECK (t, ib_layer_write (s, e, 3, &o, &r[6], &err) == 0 && !r[6].kept);
  CHECK_STR (t, r[6].desc.digest.s, r[0].desc.digest.s);
  for (int i = 0; i < 7; i++)
    ib_descriptor_clear (&r[i].desc);
  ib_error_release (&err);
  ib_store_free (s);
}

void
layer_refuses_duplicates_and_bad_sources (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_layer_entry e[3];
  make_entries (test_tmpdir (), e);
  e[1].path = "usr/lib/b.py";
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 6 };
  struct ib_layer_result r = { 0 };
  CHECK (t, ib_layer_write (s, e, 3, &o, &r, &err) < 0 && err->class == IB_EDEFINITION);
  ib_error_release (&err);
  make_entries (test_tmpdir (), e);
  e[0].source = (char *) test_tmpdir (); /* a folder */
  CHECK (t, ib_layer_write (s, e, 3, &o, &r, &err) < 0 && strstr (err->msg, "not a regular file"));
  ib_error_release (&err);
  ib_store_free (s);
}

static bool
same_entry (const struct ib_fs_entry *a, const struct ib_fs_entry *b)
{
  return strcmp (a->path, b->path) == 0 && a->type == b->type && a->mode == b->mode && a->size == b->size && a->at == b->at
         && strcmp (a->digest, b->digest) == 0 && (a->link == NULL) == (b->link == NULL)
         && (a->link == NULL || strcmp (a->link, b->link) == 0);
}

static bool
same_list (const struct ib_fs_list *a, const struct ib_fs_list *b)
{
  if (a->n != b->n)
    return false;
  for (size_t i = 0; i < a->n; i++)
    if (!same_entry (&a->e[i], &b->e[i]))
      return false;
  return true;
}

/* Write and read back: entries, digests, and a mismatch caught at the end. */
void
layer_reader_checks_digests (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_layer_entry e[3];
  make_entries (test_tmpdir (), e);
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 6 };
  struct ib_layer_result r = { 0 };
  CHECK (t, ib_layer_write (s, e, 3, &o, &r, &err) == 0);
  cleanup_free char *path = ib_store_blob_path (s, &r.desc.digest);
  struct ib_fs_list *l = NULL;
  CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &l, &err) == 0);
  CHECK (t, l && l->n == 6);
  CHECK (t, l && strcmp (l->e[0].path, "bin") == 0 && l->e[0].type == IB_FS_DIR);
  CHECK (t, l && strcmp (l->e[1].path, "bin/sh") == 0 && strcmp (l->e[1].link, "busybox") == 0);
  ib_digest want;
  ib_sha256_buf ("print('a')\n", 11, &want);
  CHECK (t, l && strcmp (l->e[4].path, "usr/lib/a.py") == 0 && strcmp (l->e[4].digest, want.s + 7) == 0);
  CHECK (t, l && l->e[4].mode == 0644);
  ib_fs_list_free (l);
  /* The cached list reads back the same, field by field. */
  struct ib_fs_list *first = NULL;
  cleanup_free char *cache = ib_xasprintf ("%s/imgbuild/files/%s", root, r.diff_id.s + 7);
  unlink (cache);
  CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &first, &err) == 0);
  CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &l, &err) == 0);
  CHECK (t, first && l && same_list (first, l));
  ib_fs_list_free (l);
  /* A cache file that is not as written makes the whole cache be ignored
   * and the list computed (and cached) again: its end cut off, a
   * record whose path lies past the strings, two records out of order, a
   * type unknown, another record layout (8 bytes more per record, as the
   * header says), a digest not ended where it should be.  (fscache.c: a
   * 128-byte header whose record size is at 96, then REC-byte records, the
   * path's offset at 16 in each, the type at 28, the digest's end at 93.) */
  enum { REC = 96 };
  for (int damage = 0; damage < 6; damage++)
    {
      cleanup_free char *bytes = NULL;
      size_t len = 0;
      CHECK (t, ib_read_file (cache, 1 << 20, &bytes, &len, NULL) == 0 && len > 128 + 6 * REC);
      if (bytes == NULL || len <= 128 + 6 * REC + 32)
        break;
      char *rec = bytes + 128;
      char swap[REC];
      if (damage == 0)
        len -= 2; /* the last string's last character and its NUL */
      else if (damage == 1)
        memset (rec + 2 * REC + 16, 0xff, 4);
      else if (damage == 2)
        {
          memcpy (swap, rec + REC, REC);
          memcpy (rec + REC, rec + 3 * REC, REC);
          memcpy (rec + 3 * REC, swap, REC);
        }
      else if (damage == 3)
        rec[4 * REC + 28] = 'Z';
      else if (damage == 5)
        rec[4 * REC + 93] = 'x';
      else
        {
          char *wide = ib_xcalloc (1, len + 6 * 8);
          memcpy (wide, bytes, 128);
          wide[96] += 8;
          for (size_t k = 0; k < 6; k++)
            memcpy (wide + 128 + k * (REC + 8), rec + k * REC, REC);
          memcpy (wide + 128 + 6 * (REC + 8), rec + 6 * REC, len - 128 - 6 * REC);
          free (bytes);
          bytes = wide;
          len += 6 * 8;
        }
      CHECK (t, ib_write_file_atomic (cache, bytes, len, 0644, &err) == 0);
      l = NULL;
      CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &l, &err) == 0);
      CHECK (t, first && l && same_list (first, l));
      ib_fs_list_free (l);
    }
  ib_fs_list_free (first);
  /* A wrong diff_id is caught by the reader. */
  ib_digest wrong;
  ib_sha256_buf ("x", 1, &wrong);
  struct ib_layer_reader *rd;
  CHECK (t, ib_layer_reader_open (s, &r.desc, &wrong, &rd, &err) == 0);
  struct archive_entry *ae;
  while (ib_layer_reader_next (rd, &ae, &err) == 1)
    ;
  CHECK (t, ib_layer_reader_end (rd, NULL, &err) < 0 && strstr (err->msg, "diff_id"));
  ib_error_release (&err);
  ib_layer_reader_free (rd);
  /* A view over a layout whose copy of the blob is damaged: the cache that
   * the store's good copy left is not used until the view's bytes are
   * hashed, and hashing them fails. */
  cleanup_free char *layout = ib_path_join (test_tmpdir (), "layout");
  struct ib_store *lay = NULL;
  CHECK (t, ib_store_open (layout, &lay, &err) == 0);
  CHECK (t, ib_store_copy_blob (s, lay, &r.desc, &err) == 0);
  ib_store_free (lay);
  cleanup_free char *lblob = ib_xasprintf ("%s/blobs/sha256/%s", layout, r.desc.digest.s + 7);
  FILE *f = fopen (lblob, "r+b");
  int byte = f && fseek (f, (long) r.desc.size / 2, SEEK_SET) == 0 ? fgetc (f) : EOF;
  CHECK (t, byte != EOF && fseek (f, (long) r.desc.size / 2, SEEK_SET) == 0 && fputc (byte ^ 0xff, f) != EOF);
  if (f)
    fclose (f);
  struct ib_store *view = NULL;
  CHECK (t, ib_store_open_layout_view (root, layout, &view, &err) == 0);
  CHECK (t, view && !ib_store_blob_trusted (view, &r.desc.digest));
  CHECK (t, view && ib_fs_list_layer (view, &r.desc, &r.diff_id, &l, &err) < 0 && err->class == IB_EINTEGRITY);
  ib_error_release (&err);
  CHECK (t, view && !ib_store_blob_trusted (view, &r.desc.digest));
  ib_store_free (view);
  /* The good copy, through a view, is hashed once and then trusted. */
  CHECK (t, ib_store_open_layout_view (root, root, &view, &err) == 0);
  CHECK (t, ib_fs_list_layer (view, &r.desc, &r.diff_id, &l, &err) == 0 && l->n == 6);
  ib_fs_list_free (l);
  CHECK (t, ib_store_blob_trusted (view, &r.desc.digest));
  ib_store_free (view);
  /* A truncated blob is an integrity error. */
  CHECK (t, truncate (path, (off_t) r.desc.size / 2) == 0);
  unlink (cache);
  CHECK (t, ib_fs_list_layer (s, &r.desc, &r.diff_id, &l, &err) < 0);
  CHECK (t, err && err->class == IB_EINTEGRITY);
  ib_error_release (&err);
  ib_descriptor_clear (&r.desc);
  ib_store_free (s);
}

static struct ib_fs_entry
fe (const char *path, char type)
{
  return (struct ib_fs_entry){ .path = (char *) path, .type = type, .mode = 0644 };
}

void
fsview_applies_whiteouts (struct test_ctx *t)
{
  struct ib_fs_entry l0[] = { fe ("a", 'd'), fe ("a/x", 'f'), fe ("a/y", 'f'), fe ("b", 'd'), fe ("b/z", 'f'),
                              fe ("c", 'f'), fe ("d", 'd'), fe ("d/q", 'f') };
  /* Layer 1: delete a/x, make b opaque (b/new only), replace folder d by a file. */
  struct ib_fs_entry l1[] = { fe ("a/x", IB_FS_WHITEOUT), fe ("b", IB_FS_OPAQUE), fe ("b/new", 'f'), fe ("d", 'f') };
  struct ib_fs_list list0 = { .n = 8, .e = l0 }, list1 = { .n = 4, .e = l1 };
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, &list0, 0);
  ib_fsview_push (v, &list1, 1);
  CHECK (t, ib_fsview_lookup (v, "a/x") == NULL);
  CHECK (t, ib_fsview_lookup (v, "a/y") != NULL);
  CHECK (t, ib_fsview_lookup (v, "b/z") == NULL);
  CHECK (t, ib_fsview_lookup (v, "b/new") && ib_fsview_lookup (v, "b/new")->layer == 1);
  CHECK (t, ib_fsview_lookup (v, "b") != NULL);
  CHECK (t, ib_fsview_lookup (v, "d") && ib_fsview_lookup (v, "d")->type == 'f');
  CHECK (t, ib_fsview_lookup (v, "d/q") == NULL);
  CHECK (t, ib_fsview_lookup (v, "c") && ib_fsview_lookup (v, "c")->layer == 0);
  CHECK (t, ib_fsview_count (v) == 6);
  /* Deleting a folder deletes what is under it. */
  struct ib_fs_entry l2[] = { fe ("a", IB_FS_WHITEOUT) };
  struct ib_fs_list list2 = { .n = 1, .e = l2 };
  ib_fsview_push (v, &list2, 2);
  CHECK (t, ib_fsview_lookup (v, "a") == NULL && ib_fsview_lookup (v, "a/y") == NULL);
  CHECK (t, ib_fsview_count (v) == 4);
  ib_fsview_free (v);
  /* A first layer of whiteouts (a hostile base's whiteout of `..` is one
   * of "") on an empty view: nothing to remove (UBSan found a memmove of
   * its null array under make test SANITIZE=1). */
  struct ib_fs_entry w[] = { fe ("", IB_FS_WHITEOUT), fe ("x", IB_FS_OPAQUE), fe ("x/y", 'f') };
  struct ib_fs_list wl = { .n = 3, .e = w };
  v = ib_fsview_new ();
  ib_fsview_push (v, &wl, 0);
  CHECK (t, ib_fsview_count (v) == 1 && ib_fsview_lookup (v, "x/y") != NULL);
  /* Whiteouts that name nothing (`.wh.` at the root and in a folder,
   * `.wh..`, `.wh...`) remove nothing: the first one took the whole tree. */
  struct ib_fs_entry z[] = { fe ("", IB_FS_WHITEOUT), fe ("x/", IB_FS_WHITEOUT), fe ("x/.", IB_FS_WHITEOUT),
                             fe ("x/..", IB_FS_WHITEOUT) };
  struct ib_fs_list zl = { .n = 4, .e = z };
  ib_fsview_push (v, &zl, 1);
  CHECK (t, ib_fsview_count (v) == 1 && ib_fsview_lookup (v, "x/y") != NULL);
  ib_fsview_free (v);
}

/* Stacking layers places each entry where a sorted merge would: layers of
 * random files over a shared set of folders (runs of new paths, gaps of
 * every size, paths equal to the view's, before its first and after its
 * last), compared after each push with the oracle of a table that every
 * layer overwrites.  The placement gallops from the previous entry's
 * position (fsview.c): an off-by-one in its bracket or its search puts an
 * entry out of order or drops it. */
void
fsview_stacks_layers_as_a_sorted_merge (struct test_ctx *t)
{
  enum { DIRS = 23, FILES = 97, SLOTS = DIRS * FILES, LAYERS = 9 };
  char names[SLOTS][16];
  int layer_of[SLOTS]; /* the oracle: the top layer with each path, -1: none */
  for (int i = 0; i < SLOTS; i++)
    {
      snprintf (names[i], sizeof (names[i]), "d%02d/f%03d", i / FILES, i % FILES);
      layer_of[i] = -1;
    }
  uint64_t rng = 0x9e3779b97f4a7c15u; /* xorshift64: the same layers every run */
  struct ib_fsview *v = ib_fsview_new ();
  static struct ib_fs_entry l[SLOTS];
  for (int layer = 0; layer < LAYERS; layer++)
    {
      /* A layer holds runs of consecutive paths, or scattered ones. */
      size_t n = 0;
      unsigned keep = layer % 3 == 0 ? 2 : layer % 3 == 1 ? 7 : 31;
      for (int i = 0; i < SLOTS; i++)
        {
          rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
          bool in_run = (i / 64) % 3 == layer % 3;
          if ((layer % 2 == 0 && in_run) || rng % keep == 0)
            {
              l[n++] = fe (names[i], 'f');
              layer_of[i] = layer;
            }
        }
      struct ib_fs_list list = { .n = n, .e = l };
      ib_fsview_push (v, &list, layer);
      size_t want = 0;
      for (int i = 0; i < SLOTS; i++)
        if (layer_of[i] >= 0)
          {
            const struct ib_fs_entry *e = ib_fsview_lookup (v, names[i]);
            CHECK (t, e != NULL && e->layer == layer_of[i]);
            want++;
          }
      CHECK (t, ib_fsview_count (v) == want);
      for (size_t i = 1; i < ib_fsview_count (v); i++)
        CHECK (t, strcmp (ib_fsview_at (v, i - 1)->path, ib_fsview_at (v, i)->path) < 0);
    }
  ib_fsview_free (v);
}

/* A merged view kept whole (fscache.h): read back in place with every
 * entry's layer, link, digest and the hazards; a miss for another ChainID
 * and across the two kinds of file (a layer's list is no view, a view no
 * list); a record whose layer the image does not have reads as a
 * placeholder; entries out of order are not kept. */
void
fscache_keeps_a_view_with_its_layers (struct test_ctx *t)
{
  static const char digest[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  struct ib_fs_entry e[] = { fe ("a", 'd'), fe ("a/b", 'f'), fe ("c", 'l'), fe ("d", 'f') };
  e[0].layer = 0, e[1].layer = 2, e[2].layer = 1, e[3].layer = 2;
  e[1].digest = digest;
  e[0].digest = e[2].digest = e[3].digest = "";
  e[2].link = "a/b";
  char *hz[] = { "layer sha256:x: entry `y`: setuid or setgid file" };
  struct ib_fs_list l = { .n = 4, .e = e, .n_hazards = 1, .hazards = hz };
  ib_digest chain = { "" }, other = { "" };
  ib_chain_id_next (&chain, "sha256:1111111111111111111111111111111111111111111111111111111111111111");
  CHECK (t, strcmp (chain.s, "sha256:1111111111111111111111111111111111111111111111111111111111111111") == 0);
  ib_chain_id_next (&chain, "sha256:2222222222222222222222222222222222222222222222222222222222222222");
  /* sha256 of "sha256:1...1 sha256:2...2", by sha256sum */
  CHECK (t, strcmp (chain.s, "sha256:9932074217c35353d2e03a3f5a86549f7c67bfeb0ba53e23d69f4d4c8f7958f5") == 0);
  ib_chain_id_next (&other, "sha256:2222222222222222222222222222222222222222222222222222222222222222");
  cleanup_free char *path = ib_xasprintf ("%s/view", test_tmpdir ());
  ib_error_t err = NULL;
  CHECK (t, ib_fs_view_cache_save (path, &chain, &l, &err) == 0);
  struct ib_fs_strings *pool = NULL;
  struct ib_fs_map m;
  struct ib_fs_list got = { 0 };
  CHECK (t, ib_fs_view_cache_map (path, &chain, 3, &pool, &m, &got));
  CHECK (t, m.n == 4 && got.n_hazards == 1 && strcmp (got.hazards[0], hz[0]) == 0);
  for (size_t i = 0; i < m.n && i < 4; i++)
    {
      struct ib_fs_entry g;
      ib_fs_map_entry (&m, i, &g);
      CHECK (t, strcmp (g.path, e[i].path) == 0 && g.layer == e[i].layer && g.type == e[i].type
                    && strcmp (g.digest, e[i].digest) == 0 && strcmp (ib_fs_map_path (&m, i), e[i].path) == 0);
      CHECK (t, i == 2 ? g.link && strcmp (g.link, "a/b") == 0 : g.link == NULL);
    }
  for (size_t i = 0; i < got.n_hazards; i++)
    free (got.hazards[i]);
  free (got.hazards);
  ib_fs_strings_free (pool);
  pool = NULL;
  struct ib_fs_list miss = { 0 };
  CHECK (t, !ib_fs_view_cache_map (path, &other, 3, &pool, &m, &miss) && pool == NULL && miss.n_hazards == 0);
  /* Over 2 layers, the record of layer 2 is damaged: read as nothing a
   * check takes for a file, the others as they are. */
  CHECK (t, ib_fs_view_cache_map (path, &chain, 2, &pool, &m, &miss) && m.n == 4);
  for (size_t i = 0; i < miss.n_hazards; i++)
    free (miss.hazards[i]);
  free (miss.hazards);
  miss = (struct ib_fs_list){ 0 };
  struct ib_fs_entry d0, d1;
  ib_fs_map_entry (&m, 0, &d0);
  ib_fs_map_entry (&m, 1, &d1);
  CHECK (t, strcmp (d0.path, "a") == 0 && d0.type == 'd');
  CHECK (t, d1.type == IB_FS_OTHER && strcmp (d1.path, "") == 0 && strcmp (d1.digest, "") == 0 && d1.link == NULL);
  ib_fs_strings_free (pool);
  pool = NULL;
  CHECK (t, !ib_fs_cache_load (path, &chain, &miss) && miss.n == 0);
  /* Paths out of order: a view is read in place, by binary search, so
   * the writer keeps nothing rather than a file that would answer wrong. */
  struct ib_fs_entry unsorted[] = { e[1], e[0] };
  struct ib_fs_list ul = { .n = 2, .e = unsorted };
  cleanup_free char *upath = ib_xasprintf ("%s/unsorted", test_tmpdir ());
  CHECK (t, ib_fs_view_cache_save (upath, &chain, &ul, &err) == 0 && access (upath, F_OK) != 0);
  cleanup_free char *lpath = ib_xasprintf ("%s/list", test_tmpdir ());
  CHECK (t, ib_fs_cache_save (lpath, &chain, &l, &err) == 0);
  CHECK (t, !ib_fs_view_cache_map (lpath, &chain, 3, &pool, &m, &miss) && pool == NULL);
  CHECK (t, ib_fs_cache_load (lpath, &chain, &miss) && miss.n == 4 && miss.e[1].layer == 0);
  for (size_t i = 0; i < miss.n_hazards; i++)
    free (miss.hazards[i]);
  free (miss.hazards);
  free (miss.e);
  ib_fs_strings_free (miss.strings);
}

/* A "Key:" line of /proc/self/status, in KiB (-1: none). */
static long
status_kib (const char *key)
{
  FILE *f = fopen ("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets (line, sizeof (line), f))
    if (strncmp (line, key, strlen (key)) == 0)
      kib = strtol (line + strlen (key), NULL, 10);
  if (f)
    fclose (f);
  return kib;
}

/* A list loaded from its cache holds none of the file's pages that its
 * check read, and those that a walk read are given back on demand: a base
 * of 190,000 entries has 30 MB of lists, and a build walks its views a few
 * times at once (issue 18). */
void
fscache_gives_back_the_pages_it_read (struct test_ctx *t)
{
  static const char digest[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const size_t n = 50000;
  struct ib_fs_entry *e = ib_xcalloc (n, sizeof (*e));
  for (size_t i = 0; i < n; i++)
    {
      e[i] = fe (ib_xasprintf ("usr/share/generated/package-%05zu/module_with_a_longer_name_%06zu.py", i / 100, i), 'f');
      e[i].digest = digest;
    }
  struct ib_fs_list l = { .n = n, .e = e };
  ib_digest id = { "sha256:1111111111111111111111111111111111111111111111111111111111111111" };
  cleanup_free char *path = ib_xasprintf ("%s/many", test_tmpdir ());
  ib_error_t err = NULL;
  CHECK (t, ib_fs_cache_save (path, &id, &l, &err) == 0);
  struct ib_fs_list got = { 0 };
  CHECK (t, ib_fs_cache_load (path, &id, &got) && got.n == n);
  long loaded = test_mapped_kib (path);
  size_t sum = 0;
  for (size_t i = 0; i < got.n; i++)
    sum += strlen (got.e[i].path) + (size_t) got.e[i].digest[0];
  long walked = test_mapped_kib (path);
  ib_fs_strings_release (got.strings);
  long released = test_mapped_kib (path);
  /* 50,000 records of 96 bytes and 3.5 MB of paths, all read */
  CHECK (t, sum > n * 64);
  CHECK (t, walked > 4096);
  CHECK (t, loaded < walked / 8);
  CHECK (t, released < walked / 8);
  CHECK (t, strcmp (got.e[n - 1].path, e[n - 1].path) == 0); /* read again from the file */
  /* Written as a view (the lists' entries, as a cold build's merged view
   * points into them), it reads a window of the list at a time: the
   * process's peak, reset before, rises by less than the list's pages. */
  ib_fs_strings_release (got.strings);
  cleanup_free char *vpath = ib_xasprintf ("%s/many-view", test_tmpdir ());
  FILE *refs = fopen ("/proc/self/clear_refs", "w");
  bool reset = refs && fputs ("5", refs) >= 0;
  if (refs)
    reset = fclose (refs) == 0 && reset;
  long before = status_kib ("VmRSS:");
  CHECK (t, ib_fs_view_cache_save (vpath, &id, &got, &err) == 0);
  long peak = status_kib ("VmHWM:");
  if (reset)
    CHECK (t, peak - before < walked / 3);
  else
    fprintf (stderr, "  (no /proc/self/clear_refs: the view's peak is not measured)\n");
  for (size_t i = 0; i < n; i++)
    free ((char *) e[i].path);
  free (e);
  free (got.e);
  ib_fs_strings_free (got.strings);
}
