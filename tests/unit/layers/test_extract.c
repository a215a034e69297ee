/* Reading chosen files out of a layer (layers/view/extract.h) by range: after the
 * file-list pass (which records where each file's data starts and, for a
 * large gzip layer, its inflate index), a file near the end of a layer is
 * read from the checkpoint before it, not from the layer's first byte; the
 * bytes handed on are the file's, proven by its digest, and a file whose
 * offset is wrong is read by a whole read instead, still right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/image/image.h"
#include "layers/read/inflate_index.h"
#include "layers/tar/tarlayer.h"
#include "layers/store/store.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"
#include "layers/view/extract.h"
#include "layers/view/fsview.h"
#include "tests/unit/test.h"

#define BIG (24u << 20) /* incompressible: a blob of three spans and more */

/* The bytes read by this process so far (/proc/self/io rchar). */
static unsigned long long
bytes_read (void)
{
  FILE *f = fopen ("/proc/self/io", "r");
  unsigned long long n = 0;
  char line[128];
  while (f && fgets (line, sizeof (line), f))
    if (sscanf (line, "rchar: %llu", &n) == 1)
      break;
  if (f)
    fclose (f);
  return n;
}

struct got
{
  char text[4096];
  size_t len;
  size_t calls;
};

static int
take (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  (void) e;
  struct got *g = data;
  g->calls++;
  ssize_t n;
  while ((n = ib_layer_reader_data (r, g->text + g->len, sizeof (g->text) - 1 - g->len, err)) > 0)
    g->len += (size_t) n;
  g->text[g->len] = '\0';
  return n < 0 ? -1 : 0;
}

void
extract_reads_a_file_by_range_not_the_whole_layer (struct test_ctx *t)
{
  if (ib_gunzip_snapshot_size () == 0)
    return; /* a zlib build: no checkpoints, every read is whole */
  ib_error_t err = NULL;
  struct ib_store *s;
  cleanup_free char *root = ib_path_join (test_tmpdir (), "store");
  CHECK (t, ib_store_open (root, &s, &err) == 0);
  /* A big random file between small ones, in the layer's path order. */
  cleanup_free unsigned char *big = ib_xmalloc (BIG);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < BIG; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      big[i] = (unsigned char) x;
    }
  cleanup_free char *big_path = ib_path_join (test_tmpdir (), "big.bin");
  CHECK (t, ib_write_file_atomic (big_path, big, BIG, 0644, &err) == 0);
  const char *small[] = { "0 before the big file\n", "m one\n", "m two, longer than one\n", "z the last file\n" };
  static char names[][16] = { "a/first.txt", "m/big.bin", "n/one.txt", "n/two.txt", "z/last.txt" };
  struct ib_layer_entry e[5];
  for (size_t i = 0; i < 5; i++)
    {
      e[i] = (struct ib_layer_entry){ .path = names[i], .type = IB_ENTRY_FILE, .mode = -1 };
      if (i == 1)
        e[i].source = big_path;
      else
        {
          char src[32];
          snprintf (src, sizeof (src), "src%zu", i);
          e[i].source = (char *) test_write (test_tmpdir (), src, small[i ? i - 1 : 0]);
        }
    }
  struct ib_layer_options o = { .mtime = 0, .gzip_level = 1 };
  struct ib_layer_result res = { 0 };
  CHECK (t, ib_layer_write (s, e, 5, &o, &res, &err) == 0);
  CHECK (t, res.desc.size >= IB_INFLATE_INDEX_SPAN);
  /* The list pass: offsets, digests, the inflate index. */
  struct ib_fs_list *l = NULL;
  CHECK (t, ib_fs_list_layer (s, &res.desc, &res.diff_id, &l, &err) == 0);
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, l, 0);
  struct ib_image img = { .n_layers = 1, .layers = &res.desc, .diff_ids = &res.diff_id };
  const struct ib_fs_entry *last = ib_fsview_lookup (v, "z/last.txt");
  CHECK (t, last && last->at > BIG);
  /* The list again, as the store's cache keeps it (a warm build's): the
   * same offsets, or a warm read by range reads the wrong bytes. */
  struct ib_fs_list *again = NULL;
  CHECK (t, ib_fs_list_layer (s, &res.desc, &res.diff_id, &again, &err) == 0);
  struct ib_fsview *v2 = ib_fsview_new ();
  ib_fsview_push (v2, again, 0);
  const struct ib_fs_entry *last2 = ib_fsview_lookup (v2, "z/last.txt");
  CHECK (t, last2 && last2->at == last->at);
  ib_fsview_free (v2);
  ib_fs_list_free (again);
  /* Read by range: a few hundred KiB of the blob, not its 24 MiB. */
  struct got g = { 0 };
  unsigned long long before = bytes_read ();
  CHECK (t, ib_extract_entries (s, &img, &last, 1, take, &g, &err) == 0);
  unsigned long long read = bytes_read () - before;
  CHECK_STR (t, g.text, "z the last file\n");
  CHECK (t, g.calls == 1);
  CHECK (t, read < res.desc.size / 2);
  /* Two files after the big one, in one read. */
  const struct ib_fs_entry *two[] = { ib_fsview_lookup (v, "n/two.txt"), ib_fsview_lookup (v, "n/one.txt") };
  struct got g2 = { 0 };
  CHECK (t, two[0] && two[1] && ib_extract_entries (s, &img, two, 2, take, &g2, &err) == 0);
  CHECK_STR (t, g2.text, "m one\nm two, longer than one\n");
  /* An offset that is not the file's (the first file's): the range's
   * bytes are not its content, so the layer is read whole, right. */
  struct ib_fs_entry wrong = *last;
  wrong.at = ib_fsview_lookup (v, "a/first.txt")->at;
  const struct ib_fs_entry *w = &wrong;
  struct got g3 = { 0 };
  before = bytes_read ();
  CHECK (t, ib_extract_entries (s, &img, &w, 1, take, &g3, &err) == 0);
  CHECK_STR (t, g3.text, "z the last file\n");
  CHECK (t, g3.calls == 1);
  CHECK (t, bytes_read () - before >= res.desc.size);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  ib_fsview_free (v);
  ib_fs_list_free (l);
  ib_descriptor_clear (&res.desc);
  ib_store_free (s);
}
