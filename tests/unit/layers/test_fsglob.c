/* The view's globs (layers/view/fsglob.c) against fnmatch over every entry: the
 * oracle is glibc's matcher on each path of a small view. */
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/fsview.h"
#include "tests/unit/test.h"

static struct ib_fs_entry
fe (const char *path, char type)
{
  return (struct ib_fs_entry){ .path = (char *) path, .type = type, .mode = 0644 };
}

static int
by_path (const void *a, const void *b)
{
  return strcmp (((const struct ib_fs_entry *) a)->path, ((const struct ib_fs_entry *) b)->path);
}

/* ib_fsview_glob looks only at the range of the view its pattern's literal
 * head allows, and skips fnmatch where the pattern's literal runs are not
 * in the path in order: the same files as fnmatch over every entry, for
 * patterns whose head is empty, is not a path, ends in a folder or
 * mid-name, or stops at `[` or `\\`, and for runs at the start, the end,
 * repeated, between `?` or with their bytes repeated (the search's shift
 * table); as before, the regular files matched or linked to, each once.
 * All the patterns at once (ib_fsview_glob_each, one walk) find what each
 * finds alone, in the same order, and ib_fsview_glob_all what they find
 * one after the other, the files found already left out; ib_fsview_match
 * the entries fnmatch matches, links not followed, in path order, each
 * once however many patterns match it. */
void
fsview_glob_equals_fnmatch_over_every_entry (struct test_ctx *t)
{
  struct ib_fs_entry l0[] = { fe ("a", 'd'),       fe ("a/b", 'd'),      fe ("a/b/c.so", 'f'), fe ("a/b/c.so.1", 'f'),
                              fe ("a/bc", 'f'),    fe ("a/b[x]", 'f'),   fe ("a/b\\y", 'f'),   fe ("ab", 'f'),
                              fe ("b", 'd'),       fe ("b/a/b/c.so", 'f'), fe ("usr", 'd'),   fe ("usr/lib", 'd'),
                              fe ("usr/lib/x.so", 'f'), fe ("usr/lib64", 'f'),
                              { .path = "a/b/c.so.2", .type = IB_FS_SYMLINK, .link = "c.so.1", .mode = 0777 } };
  struct ib_fs_list list0 = { .n = sizeof (l0) / sizeof (l0[0]), .e = l0 };
  qsort (l0, list0.n, sizeof (l0[0]), by_path); /* a layer's list is sorted */
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, &list0, 0);
  static const char *const patterns[] = { "/a/b/*",    "/a/b*",      "*c.so",       "/a/b/c.so", "/usr/lib*/*.so",
                                          "/usr/lib",  "a/b/*",      "/a/b[[]x]",   "/a/b\\\\y", "/a/?c",
                                          "/*/b/c.so", "/",          "",            "/zzz*",     "/a/b/c.so*",
                                          "*.so",      "*.so.*",     "*c.so.?",     "*b*b*",     "*b*b*c*",
                                          "*?.so",     "?a/b/c.so",  "*/b/*.so.?",  "*so.1",     "*a/b",
                                          "*[.]so",    "/a*c.so",    "*bc*",        "*b??c*",    "*c.so.1*",
                                          "*/b/c.so*", "*/lib*",     "*lib64",      "*/c*so.?",  "*c.so.1?",
                                          "*b/?.so",   "*a/b/c.so.1", "*/a/b/c*",   "*/usr/lib/x.so", "*.so.1??" };
  enum
  {
    N_PAT = sizeof (patterns) / sizeof (patterns[0])
  };
  const struct ib_fs_entry **each[N_PAT], **all = NULL, *union_[N_PAT * 32];
  size_t n_each[N_PAT], n_union = 0;
  ib_fsview_glob_each (v, patterns, N_PAT, each, n_each);
  size_t n_all = ib_fsview_glob_all (v, patterns, N_PAT, &all);
  for (size_t p = 0; p < N_PAT; p++)
    {
      const struct ib_fs_entry **got = NULL;
      size_t n = ib_fsview_glob (v, patterns[p], &got), want = 0;
      CHECK (t, n_each[p] == n);
      for (size_t k = 0; k < n && k < n_each[p]; k++)
        CHECK (t, each[p][k] == got[k]);
      for (size_t k = 0; k < n; k++)
        {
          bool dup = false;
          for (size_t j = 0; j < n_union; j++)
            dup = dup || union_[j] == got[k];
          if (!dup)
            union_[n_union++] = got[k];
        }
      free (each[p]);
      /* The oracle: every entry, the files they are or link to, once. */
      const struct ib_fs_entry *files[32];
      for (size_t i = 0; i < ib_fsview_count (v); i++)
        {
          cleanup_free char *abs = ib_xasprintf ("/%s", ib_fsview_at (v, i)->path);
          const struct ib_fs_entry *f = ib_fsview_follow (v, ib_fsview_at (v, i));
          bool dup = false;
          for (size_t k = 0; k < want; k++)
            dup = dup || files[k] == f;
          if (fnmatch (patterns[p], abs, 0) != 0 || f == NULL || dup)
            continue;
          files[want++] = f;
          bool found = false;
          for (size_t k = 0; k < n; k++)
            found = found || got[k] == f;
          CHECK (t, found);
        }
      CHECK (t, n == want);
      if (n != want)
        fprintf (stderr, "  pattern `%s`: %zu matches, fnmatch finds %zu\n", patterns[p], n, want);
      free (got);
      /* the entries themselves, links not followed, in path order */
      const struct ib_fs_entry **named = NULL;
      size_t n_named = ib_fsview_match (v, &patterns[p], 1, &named), k = 0;
      for (size_t i = 0; i < ib_fsview_count (v); i++)
        {
          cleanup_free char *abs = ib_xasprintf ("/%s", ib_fsview_at (v, i)->path);
          if (fnmatch (patterns[p], abs, 0) != 0)
            continue;
          CHECK (t, k < n_named && named[k] == ib_fsview_at (v, i));
          k++;
        }
      CHECK (t, k == n_named);
      free (named);
    }
  /* every pattern at once: each entry that one of them matches, once */
  const struct ib_fs_entry **named = NULL;
  size_t n_named = ib_fsview_match (v, patterns, N_PAT, &named), k = 0;
  for (size_t i = 0; i < ib_fsview_count (v); i++)
    {
      cleanup_free char *abs = ib_xasprintf ("/%s", ib_fsview_at (v, i)->path);
      bool any = false;
      for (size_t p = 0; p < N_PAT; p++)
        any = any || fnmatch (patterns[p], abs, 0) == 0;
      if (!any)
        continue;
      CHECK (t, k < n_named && named[k] == ib_fsview_at (v, i));
      k++;
    }
  CHECK (t, k == n_named);
  free (named);
  CHECK (t, n_all == n_union);
  for (size_t k = 0; k < n_all && k < n_union; k++)
    CHECK (t, all[k] == union_[k]);
  free (all);
  ib_fsview_free (v);
}

/* Issue 46: paths through a linked folder (/lib -> usr/lib, merged /usr)
 * and links whose target holds ".." (the .so links of Debian's torch/lib) lead where
 * the kernel takes them: a glob whose literal head goes through /lib finds
 * the files of usr/lib, and a link with ".." is followed to its file. */
void
fsview_glob_and_follow_resolve_as_the_kernel (struct test_ctx *t)
{
  struct ib_fs_entry l0[] = {
    fe ("usr", 'd'),
    fe ("usr/lib", 'd'),
    fe ("usr/lib/x86_64-linux-gnu", 'd'),
    fe ("usr/lib/x86_64-linux-gnu/libc10.so", 'f'),
    fe ("usr/lib/x86_64-linux-gnu/libtorch.so.2.6", 'f'),
    fe ("usr/lib/python3", 'd'),
    fe ("usr/lib/python3/dist-packages", 'd'),
    fe ("usr/lib/python3/dist-packages/torch", 'd'),
    fe ("usr/lib/python3/dist-packages/torch/lib", 'd'),
    { .path = "lib", .type = IB_FS_SYMLINK, .link = "usr/lib", .mode = 0777 },
    { .path = "usr/lib/python3/dist-packages/torch/lib/libc10.so", .type = IB_FS_SYMLINK,
      .link = "../../../../x86_64-linux-gnu/libc10.so", .mode = 0777 },
    { .path = "usr/lib/python3/dist-packages/torch/lib/libtorch.so", .type = IB_FS_SYMLINK,
      .link = "/lib/x86_64-linux-gnu/libtorch.so.2.6", .mode = 0777 },
  };
  struct ib_fs_list list0 = { .n = sizeof (l0) / sizeof (l0[0]), .e = l0 };
  qsort (l0, list0.n, sizeof (l0[0]), by_path);
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, &list0, 0);
  static const struct
  {
    const char *pattern;
    size_t n;
    const char *first;
  } cases[] = {
    { "/lib/x86_64-linux-gnu/*.so*", 2, "usr/lib/x86_64-linux-gnu/libc10.so" },
    { "/lib/x86_64-linux-gnu/libtorch.so.2.6", 1, "usr/lib/x86_64-linux-gnu/libtorch.so.2.6" },
    { "/lib/*/libc10.so", 1, "usr/lib/x86_64-linux-gnu/libc10.so" },
    { "/usr/lib/python3/dist-packages/torch/lib/*.so", 2, "usr/lib/x86_64-linux-gnu/libc10.so" },
    { "/lib/python3/dist-packages/torch/lib/libc10.so", 1, "usr/lib/x86_64-linux-gnu/libc10.so" },
    { "/usr/lib/python3/../x86_64-linux-gnu/libc10.so", 1, "usr/lib/x86_64-linux-gnu/libc10.so" },
    { "/lib/no-such-folder/*.so", 0, NULL },
  };
  for (size_t c = 0; c < sizeof (cases) / sizeof (cases[0]); c++)
    {
      const struct ib_fs_entry **got = NULL;
      size_t n = ib_fsview_glob (v, cases[c].pattern, &got);
      CHECK (t, n == cases[c].n);
      if (n != cases[c].n)
        fprintf (stderr, "  pattern `%s`: %zu files, want %zu\n", cases[c].pattern, n, cases[c].n);
      if (n > 0 && cases[c].first)
        CHECK_STR (t, got[0]->path, cases[c].first);
      free (got);
    }
  const struct ib_fs_entry *f
      = ib_fsview_follow (v, ib_fsview_lookup (v, "usr/lib/python3/dist-packages/torch/lib/libc10.so"));
  CHECK (t, f != NULL);
  CHECK_STR (t, f ? f->path : NULL, "usr/lib/x86_64-linux-gnu/libc10.so");
  ib_fsview_free (v);
}
