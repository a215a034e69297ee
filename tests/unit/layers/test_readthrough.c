/* Records of whole layer reads (layers/read/readthrough.h) and imgverify's use of
 * them: the bytes are always hashed, the rest is the record's only when the
 * record is whole, of these rules, and of a read that listed every entry. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/core/report.h"
#include "layers/image/image.h"
#include "layers/read/layer_reader.h"
#include "layers/read/readthrough.h"
#include "layers/tar/tarcheck.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/verify/verify.h"
#include "tests/unit/test.h"

static bool
same_record (const struct ib_readthrough *a, const struct ib_readthrough *b)
{
  if (a->size != b->size || strcmp (a->diff_id.s, b->diff_id.s) != 0 || a->n_hazards != b->n_hazards)
    return false;
  for (size_t i = 0; i < a->n_hazards; i++)
    if (strcmp (a->hazards[i], b->hazards[i]) != 0)
      return false;
  return true;
}

static char *
record_file (struct ib_store *s, const ib_digest *blob)
{
  return ib_xasprintf ("%s/imgbuild/read-through/%s", ib_store_root (s), ib_digest_hex (blob->s));
}

/* TEXT with its end line made again: a record whose every byte checks. */
static void
write_sealed (const char *path, const char *body)
{
  ib_digest sum;
  ib_sha256_buf (body, strlen (body), &sum);
  cleanup_free char *text = ib_xasprintf ("%send %s\n", body, sum.s);
  ib_write_file_atomic (path, text, strlen (text), 0644, NULL);
}

void
readthrough_record_round_trip_and_refusals (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  ib_digest blob;
  ib_sha256_buf ("blob", 4, &blob);
  char *hz[] = { "entry `a\nb`: setuid or setgid file", "entry `../x`: name with a `..` component" };
  struct ib_readthrough rec = { .size = 1234, .hazards = hz, .n_hazards = 2 }, got;
  ib_sha256_buf ("tar", 3, &rec.diff_id);
  CHECK (t, ib_readthrough_load (s, &blob, &got) == 0);
  CHECK (t, ib_readthrough_save (s, &blob, &rec, &err) == 0);
  CHECK (t, ib_readthrough_load (s, &blob, &got) == 1 && same_record (&rec, &got));
  ib_readthrough_clear (&got);
  cleanup_free char *path = record_file (s, &blob);
  cleanup_free char *text = NULL;
  size_t len = 0;
  CHECK (t, ib_read_file (path, 1 << 20, &text, &len, &err) == 0);
  /* Cut short, one byte changed, something after the end: no record. */
  for (int damage = 0; text && damage < 3; damage++)
    {
      cleanup_free char *bad = ib_xmalloc (len + 2);
      memcpy (bad, text, len);
      size_t n = len;
      if (damage == 0)
        n--;
      else if (damage == 1)
        bad[len / 2] ^= 1;
      else
        bad[n++] = '\n';
      ib_write_file_atomic (path, bad, n, 0644, NULL);
      CHECK (t, ib_readthrough_load (s, &blob, &got) == 0 && got.n_hazards == 0);
    }
  /* A whole record made under other rules (or another libarchive) is not
   * used either: its hostile entries may not be this build's. */
  cleanup_free char *body = ib_xasprintf ("imgbuild-read-through 1 %d %d\nsize 1234\ndiff_id %s\n",
                                          IB_TAR_CHECK_RULES, archive_version_number (), rec.diff_id.s);
  write_sealed (path, body);
  CHECK (t, ib_readthrough_load (s, &blob, &got) == 1 && got.n_hazards == 0 && got.size == 1234);
  ib_readthrough_clear (&got);
  cleanup_free char *other = ib_xasprintf ("imgbuild-read-through 1 %d %d\nsize 1234\ndiff_id %s\n",
                                           IB_TAR_CHECK_RULES + 1, archive_version_number (), rec.diff_id.s);
  write_sealed (path, other);
  CHECK (t, ib_readthrough_load (s, &blob, &got) == 0);
  cleanup_free char *lib = ib_xasprintf ("imgbuild-read-through 1 %d %d\nsize 1234\ndiff_id %s\n",
                                         IB_TAR_CHECK_RULES, archive_version_number () + 1, rec.diff_id.s);
  write_sealed (path, lib);
  CHECK (t, ib_readthrough_load (s, &blob, &got) == 0);
  /* A number written another way (a leading zero, out of range) is not
   * the record's: each record reads one way only. */
  const char *sizes[] = { "01234", "18446744073709551616", "+1234", "" };
  for (size_t i = 0; i < sizeof (sizes) / sizeof (*sizes); i++)
    {
      cleanup_free char *odd = ib_xasprintf ("imgbuild-read-through 1 %d %d\nsize %s\ndiff_id %s\n", IB_TAR_CHECK_RULES,
                                             archive_version_number (), sizes[i], rec.diff_id.s);
      write_sealed (path, odd);
      CHECK (t, ib_readthrough_load (s, &blob, &got) == 0);
    }
  /* Too many hostile entries to keep: nothing is kept, nothing is left. */
  unlink (path);
  size_t many = IB_READTHROUGH_MAX / 64;
  char **lots = ib_xcalloc (many, sizeof (*lots));
  for (size_t i = 0; i < many; i++)
    lots[i] = "entry `dev/x`: character device, block device, FIFO or socket";
  struct ib_readthrough big = { .size = 1, .diff_id = rec.diff_id, .hazards = lots, .n_hazards = many };
  CHECK (t, ib_readthrough_save (s, &blob, &big, &err) == 0);
  CHECK (t, access (path, F_OK) < 0 && ib_readthrough_load (s, &blob, &got) == 0);
  free (lots);
  ib_error_release (&err);
  ib_store_free (s);
}

/* A gzip layer: a file, a setuid file (privileged), a `..` name (escaping);
 * its blob in S. */
static void
hostile_layer (struct ib_store *s, struct ib_descriptor *desc)
{
  size_t cap = 1 << 20, len = 0;
  cleanup_free unsigned char *buf = ib_xmalloc (cap);
  struct archive *a = archive_write_new ();
  archive_write_add_filter_gzip (a);
  archive_write_set_format_pax_restricted (a);
  archive_write_open_memory (a, buf, cap, &len);
  static const char *names[] = { "etc/a", "usr/bin/su", "../etc/z" };
  for (int i = 0; i < 3; i++)
    {
      struct archive_entry *e = archive_entry_new ();
      archive_entry_set_pathname (e, names[i]);
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_perm (e, i == 1 ? 04755 : 0644);
      archive_entry_set_size (e, 6);
      archive_write_header (a, e);
      archive_write_data (a, "hello\n", 6);
      archive_entry_free (e);
    }
  archive_write_close (a);
  archive_write_free (a);
  desc->media_type = ib_xstrdup (IB_MT_OCI_LAYER_GZIP);
  desc->size = len;
  ib_store_put_blob (s, buf, len, &desc->digest, NULL);
}

/* Read DESC's layer: every entry (ALL) or only the first; *DIFF_ID. */
static int
read_layer (struct ib_store *s, const struct ib_descriptor *desc, const ib_digest *expected, bool all,
            ib_digest *diff_id, size_t *hazards)
{
  ib_error_t err = NULL;
  struct ib_layer_reader *r;
  if (ib_layer_reader_open (s, desc, expected, &r, &err) < 0)
    return -1;
  struct archive_entry *ae;
  int x;
  while ((x = ib_layer_reader_next (r, &ae, &err)) == 1 && all)
    ;
  if (x >= 0)
    x = ib_layer_reader_end (r, diff_id, &err);
  ib_layer_reader_hazards (r, hazards);
  ib_layer_reader_free (r);
  ib_error_release (&err);
  return x;
}

void
readthrough_kept_by_a_whole_right_read_only (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_descriptor desc = { 0 };
  hostile_layer (s, &desc);
  struct ib_readthrough got;
  ib_digest diff_id, wrong;
  size_t nh = 0;
  ib_sha256_buf ("x", 1, &wrong);
  /* A read that stops after the first entry: its hostile entries are not
   * all known, so nothing is kept (the digests are right all the same). */
  CHECK (t, read_layer (s, &desc, NULL, false, &diff_id, &nh) == 0 && nh == 0);
  CHECK (t, ib_readthrough_load (s, &desc.digest, &got) == 0);
  /* A whole read against a wrong diff_id fails, and keeps nothing. */
  CHECK (t, read_layer (s, &desc, &wrong, true, NULL, &nh) < 0);
  CHECK (t, ib_readthrough_load (s, &desc.digest, &got) == 0);
  /* A whole right read keeps what it found. */
  CHECK (t, read_layer (s, &desc, &diff_id, true, NULL, &nh) == 0 && nh == 2);
  CHECK (t, ib_readthrough_load (s, &desc.digest, &got) == 1);
  CHECK (t, got.size == desc.size && strcmp (got.diff_id.s, diff_id.s) == 0);
  CHECK (t, got.n_hazards == 2 && strstr (got.hazards[0], "usr/bin/su") && strstr (got.hazards[0], "setuid"));
  CHECK (t, ib_tar_finding_kind (got.hazards[0]) == IB_TAR_SETID && ib_tar_finding_kind (got.hazards[1]) == IB_TAR_ESCAPE);
  ib_readthrough_clear (&got);
  ib_descriptor_clear (&desc);
  ib_store_free (s);
}

struct problems
{
  char *errors, *warnings;
  size_t privileged; /* ib_verify_stats' */
};

static void
on_problem (void *data, bool is_error, const char *msg)
{
  struct problems *p = data;
  char **to = is_error ? &p->errors : &p->warnings;
  char *more = ib_xasprintf ("%s%s\n", *to ? *to : "", msg);
  free (*to);
  *to = more;
}

/* An image of the one layer DESC (diff_id DIFF_ID) in S. */
static struct ib_image *
one_layer_image (struct ib_store *s, const struct ib_descriptor *desc, const ib_digest *diff_id)
{
  struct ib_image *img = ib_xcalloc (1, sizeof (*img));
  cleanup_free char *config = ib_xasprintf ("{\"os\":\"linux\",\"architecture\":\"arm64\",\"rootfs\":{\"type\":"
                                            "\"layers\",\"diff_ids\":[\"%s\"]}}",
                                            diff_id->s);
  img->config_json = cJSON_Parse (config);
  img->config.media_type = ib_xstrdup (IB_MT_OCI_CONFIG);
  img->config.size = strlen (config);
  ib_store_put_blob (s, config, strlen (config), &img->config.digest, NULL);
  const char *manifest = "{\"schemaVersion\":2}";
  img->manifest.media_type = ib_xstrdup (IB_MT_OCI_MANIFEST);
  img->manifest.size = strlen (manifest);
  ib_store_put_blob (s, manifest, strlen (manifest), &img->manifest.digest, NULL);
  img->n_layers = 1;
  img->layers = ib_xcalloc (1, sizeof (*img->layers));
  ib_descriptor_copy (&img->layers[0], desc);
  img->diff_ids = ib_xcalloc (1, sizeof (*img->diff_ids));
  img->diff_ids[0] = *diff_id;
  return img;
}

static void
verify (struct ib_store *s, const struct ib_image *img, const struct ib_verify_how *how, struct problems *p,
        struct ib_verify_stats *st)
{
  free (p->errors);
  free (p->warnings);
  memset (p, 0, sizeof (*p));
  struct ib_report *rep = ib_report_new ("test", "test/v1", true);
  ib_verify_image (s, img, how, rep, on_problem, p, st, NULL);
  p->privileged = st->n_privileged;
  ib_verify_stats_clear (st);
  ib_report_free (rep);
}

static void
flip_byte (const char *path, off_t at)
{
  int fd = open (path, O_RDWR);
  unsigned char c = 0;
  if (fd >= 0 && pread (fd, &c, 1, at) == 1)
    {
      c ^= 0x20;
      if (pwrite (fd, &c, 1, at) != 1)
        c = 0;
    }
  if (fd >= 0)
    close (fd);
}

void
verify_hashes_a_known_layer_and_takes_the_rest_from_its_record (struct test_ctx *t)
{
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  struct ib_descriptor desc = { 0 };
  hostile_layer (s, &desc);
  ib_digest diff_id;
  size_t nh;
  CHECK (t, read_layer (s, &desc, NULL, false, &diff_id, &nh) == 0);
  struct ib_image *img = one_layer_image (s, &desc, &diff_id);
  struct ib_verify_how how = { .lenient_layers = 0, .jobs = 2 };
  struct problems p = { 0 }, first = { 0 };
  struct ib_verify_stats st;
  /* No record yet: read through, the `..` name an error, the setuid file
   * only counted; then kept. */
  verify (s, img, &how, &first, &st);
  CHECK (t, st.layers_read == 1 && st.layers_known == 0 && st.bad == 1 && first.privileged == 1);
  CHECK (t, first.errors && strstr (first.errors, "../etc/z") && strstr (first.errors, desc.digest.s));
  CHECK (t, !strstr (first.errors, "usr/bin/su"));
  /* Again: hashed only, the same verdict, word for word. */
  verify (s, img, &how, &p, &st);
  CHECK (t, st.layers_read == 0 && st.layers_known == 1 && st.bad == 1 && p.privileged == 1);
  CHECK_STR (t, p.errors, first.errors);
  /* --strict-base: the setuid file is an error too, from the record. */
  how.strict = true;
  verify (s, img, &how, &p, &st);
  CHECK (t, st.layers_known == 1 && p.privileged == 0 && p.errors && strstr (p.errors, "usr/bin/su"));
  how.strict = false;
  /* A base layer's hostile entries are warnings, from the record too. */
  how.lenient_layers = 1;
  verify (s, img, &how, &p, &st);
  CHECK (t, st.layers_known == 1 && st.bad == 0 && p.errors == NULL);
  CHECK_STR (t, p.warnings, first.errors);
  /* The blob's bytes damaged: found by their digest, record or not. */
  cleanup_free char *blob = ib_store_blob_path (s, &desc.digest);
  flip_byte (blob, 40);
  verify (s, img, &how, &p, &st);
  CHECK (t, st.layers_known == 1 && st.bad == 1 && p.errors && strstr (p.errors, "content has digest"));
  flip_byte (blob, 40);
  /* A record that disagrees with the config: the reader's message. */
  ib_digest wrong;
  ib_sha256_buf ("x", 1, &wrong);
  struct ib_readthrough rec = { .size = desc.size, .diff_id = wrong };
  CHECK (t, ib_readthrough_save (s, &desc.digest, &rec, &err) == 0);
  verify (s, img, &how, &p, &st);
  cleanup_free char *says = ib_xasprintf ("layer blob %s: uncompressed digest %s, config says diff_id %s",
                                          desc.digest.s, wrong.s, diff_id.s);
  CHECK (t, st.layers_known == 1 && p.errors && strstr (p.errors, says));
  /* --full reads it through (the record unused), and keeps it right. */
  how.full = true;
  verify (s, img, &how, &p, &st);
  CHECK (t, st.layers_read == 1 && st.layers_known == 0 && p.errors == NULL);
  CHECK_STR (t, p.warnings, first.errors);
  struct ib_readthrough got;
  CHECK (t, ib_readthrough_load (s, &desc.digest, &got) == 1 && strcmp (got.diff_id.s, diff_id.s) == 0);
  CHECK (t, got.n_hazards == 2);
  ib_readthrough_clear (&got);
  free (p.errors);
  free (p.warnings);
  free (first.errors);
  free (first.warnings);
  ib_image_free (img);
  ib_descriptor_clear (&desc);
  ib_error_release (&err);
  ib_store_free (s);
}
