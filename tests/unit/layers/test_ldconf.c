/* layers/view/ldconf.c: the walk from /etc/ld.so.conf over a view, as
 * ldconfig reads it (its includes in name order, relative patterns from
 * the including file's folder, each folder once), the texts from a cache
 * folder by content digest, and what the cache does not hold named. */
#include <stdlib.h>
#include <string.h>

#include "layers/view/fsview.h"
#include "layers/view/ldconf.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

static struct ib_fs_entry
ce (const char *path, char type, const char *digest, const char *link)
{
  return (struct ib_fs_entry){ .path = (char *) path, .type = type, .mode = 0644, .digest = digest,
                               .link = (char *) link };
}

void
ldconf_walk_reads_includes_in_order (struct test_ctx *t)
{
  /* ld.so.conf includes the *.conf of ld.so.conf.d (a.conf, and b.conf, a link
   * to z.txt, whose text the cache does not hold yet), then names a folder
   * that a.conf named already (kept where it came first, as ldconfig does). */
  struct ib_fs_entry l0[] = {
    ce ("etc", 'd', "", NULL),
    ce ("etc/ld.so.conf", 'f', "c0", NULL),
    ce ("etc/ld.so.conf.d", 'd', "", NULL),
    ce ("etc/ld.so.conf.d/a.conf", 'f', "c1", NULL),
    ce ("etc/ld.so.conf.d/b.conf", 'l', "", "z.txt"),
    ce ("etc/ld.so.conf.d/z.txt", 'f', "c2", NULL),
  };
  struct ib_fs_list list = { .n = sizeof (l0) / sizeof (l0[0]), .e = l0 };
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, &list, 0);
  cleanup_free char *cache = ib_path_join (test_tmpdir (), "ldconf");
  test_write (cache, "c0", "include ld.so.conf.d/*.conf\n/usr/local/lib/\n");
  test_write (cache, "c1", "/opt/a # CUDA\n/usr/local/lib\n");
  struct ib_ldconf c = { 0 };
  CHECK (t, !ib_ldconf_walk (v, cache, &c));
  CHECK (t, c.n_missing == 1 && strcmp (c.missing[0]->path, "etc/ld.so.conf.d/z.txt") == 0);
  CHECK (t, c.n_dirs == 2);
  if (c.n_dirs == 2)
    {
      CHECK_STR (t, c.dirs[0], "/opt/a");
      CHECK_STR (t, c.dirs[1], "/usr/local/lib");
    }
  test_write (cache, "c2", "/opt/x\n");
  CHECK (t, ib_ldconf_walk (v, cache, &c));
  CHECK (t, c.n_missing == 0 && c.n_dirs == 3);
  if (c.n_dirs == 3)
    {
      CHECK_STR (t, c.dirs[1], "/usr/local/lib");
      CHECK_STR (t, c.dirs[2], "/opt/x");
    }
  ib_ldconf_clear (&c);
  ib_fsview_free (v);
}
