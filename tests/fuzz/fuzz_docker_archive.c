/* docker-archive manifest.json and index.json
 * (layers/transports/docker_archive.c), as `docker save` writes them, read from a
 * real tar.  The input is manifest.json, index.json, a config and an OCI
 * manifest, separated by FUZZ_SEP lines, then an optional NAME:TAG asked
 * for, then an optional mode.  The archive holds them as manifest.json,
 * index.json, cfg.json and blobs/sha256/<digest> (an empty part is left
 * out), beside a layer l1/layer.tar, a symlink l2/layer.tar to it and an
 * oci-layout; it is written in memory and lands in one write on the
 * scratch folder (a tmpfs where there is one).
 *
 * By default the archive is read in place, as `imgverify` reads it: into a
 * view, no store, nothing written (the bytes it cannot trust are the
 * verifier's).  With the mode `store` it is pulled into a store, as
 * `imgbuild --from` does (every blob written and fsync'd, the index of
 * the store rewritten: slower, so two seeds carry that mode).  An image the reader
 * accepts is then loaded (manifest and config parsed). */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/transports/transports.h"
#include "tests/fuzz/fuzz.h"

static void
add (struct archive *a, const char *path, const char *text, const char *symlink)
{
  struct archive_entry *e = archive_entry_new ();
  archive_entry_set_pathname (e, path);
  archive_entry_set_mode (e, 0644);
  if (symlink)
    {
      archive_entry_set_filetype (e, AE_IFLNK);
      archive_entry_set_symlink (e, symlink);
    }
  else
    {
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_size (e, (la_int64_t) strlen (text));
    }
  if (archive_write_header (a, e) != ARCHIVE_OK
      || (!symlink && archive_write_data (a, text, strlen (text)) != (la_ssize_t) strlen (text)))
    fuzz_fail ("tar: %s", archive_error_string (a));
  archive_entry_free (e);
}

static void
add_blob (struct archive *a, const char *text)
{
  ib_digest d;
  ib_sha256_buf (text, strlen (text), &d);
  char path[128];
  snprintf (path, sizeof (path), "blobs/sha256/%s", ib_digest_hex (d.s));
  add (a, path, text, NULL);
}

static void
write_archive (const char *name, char **parts)
{
  size_t cap = 64 * 1024, used = 0;
  for (int i = 0; i < 4; i++)
    cap += 2 * strlen (parts[i]) + 1024;
  char *buf = malloc (cap);
  struct archive *a = archive_write_new ();
  archive_write_set_format_pax_restricted (a);
  archive_write_set_bytes_in_last_block (a, 1);
  if (buf == NULL || archive_write_open_memory (a, buf, cap, &used) != ARCHIVE_OK)
    fuzz_fail ("tar: %s", archive_error_string (a));
  add (a, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", NULL);
  if (*parts[0])
    add (a, "manifest.json", parts[0], NULL);
  if (*parts[1])
    add (a, "index.json", parts[1], NULL);
  if (*parts[2])
    {
      add (a, "cfg.json", parts[2], NULL);
      add_blob (a, parts[2]);
    }
  if (*parts[3])
    add_blob (a, parts[3]);
  add (a, "l1/layer.tar", "layer", NULL);
  add_blob (a, "layer");
  add (a, "l2/layer.tar", NULL, "../l1/layer.tar");
  if (archive_write_close (a) != ARCHIVE_OK)
    fuzz_fail ("tar: %s", archive_error_string (a));
  archive_write_free (a);
  fuzz_write (name, buf, used);
  free (buf);
}

/* A fresh store now and then: every accepted input adds a manifest blob. */
static struct ib_store *
store (void)
{
  static struct ib_store *s;
  static unsigned uses;
  char dir[4096];
  snprintf (dir, sizeof (dir), "%s/store", fuzz_scratch ());
  if (s && ++uses % 4096 == 0)
    {
      ib_store_free (s);
      s = NULL;
      fuzz_remove_tree (dir);
    }
  ib_error_t err = NULL;
  if (s == NULL && ib_store_open (dir, &s, &err) < 0)
    fuzz_fail ("store: %s", err->msg);
  return s;
}

static void
read_archive (struct ib_store *s, const struct ib_ref *ref)
{
  struct ib_descriptor m = { 0 };
  ib_error_t err = NULL;
  if (ib_docker_archive_read (s, ref, &m, &err) == 0)
    {
      if (ib_digest_check (m.digest.s, NULL) < 0)
        fuzz_fail ("an accepted archive gave a bad manifest digest `%s`", m.digest.s);
      struct ib_image *img = NULL;
      if (ib_image_load (s, &m, NULL, &img, &err) == 0)
        ib_image_free (img);
      ib_descriptor_clear (&m);
    }
  else if (err == NULL || err->msg == NULL)
    fuzz_fail ("ib_docker_archive_read failed without a message");
  ib_error_release (&err);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_text (data, size);
  char *parts[6];
  fuzz_split (text, parts, 6);
  write_archive ("archive.tar", parts);
  char file[4096];
  snprintf (file, sizeof (file), "%s/archive.tar", fuzz_scratch ());
  for (int i = 4; i < 6; i++)
    {
      char *nl = strchr (parts[i], '\n');
      if (nl)
        *nl = '\0';
    }
  struct ib_ref ref = { .kind = IB_REF_DOCKER_ARCHIVE, .location = file, .name = *parts[4] ? parts[4] : NULL };
  if (strcmp (parts[5], "store") == 0)
    read_archive (store (), &ref);
  else
    {
      char root[4096];
      snprintf (root, sizeof (root), "%s/view-root", fuzz_scratch ());
      struct ib_store *v = NULL;
      ib_error_t err = NULL;
      if (ib_store_open_view (root, file, &v, &err) < 0)
        fuzz_fail ("view: %s", err->msg);
      read_archive (v, &ref);
      ib_store_free (v);
    }
  free (text);
  return 0;
}
