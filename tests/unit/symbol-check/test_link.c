/* link-check/: path resolution inside a view, ld.so.conf and $ORIGIN
 * tokens, and the ELF record of objects built here (glibc's version
 * rules, the cache text). */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/view/fsview.h"
#include "layers/view/ldconf.h"
#include "symbol-check/link-check/elfdyn.h"
#include "symbol-check/link-check/ldpaths.h"
#include "symbol-check/link-check/reccache.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

static struct ib_fs_entry
le (const char *path, char type, const char *link)
{
  return (struct ib_fs_entry){ .path = (char *) path, .type = type, .mode = 0755, .link = (char *) link };
}

void
fsview_resolves_links_in_every_component (struct test_ctx *t)
{
  /* Debian's merged /usr: /lib -> usr/lib; /lib64/ld.so -> /lib/x/ld.so;
   * a relative link up and over; a hard link; a loop. */
  struct ib_fs_entry l0[] = { le ("lib", 'l', "usr/lib"), le ("lib64", 'd', NULL),
                              le ("lib64/ld.so", 'l', "/lib/x/ld.so"), le ("loop", 'l', "loop"),
                              le ("opt", 'd', NULL), le ("opt/hard", 'h', "usr/lib/x/libc.so.6"),
                              le ("opt/up", 'l', "../usr/lib/x"), le ("usr", 'd', NULL), le ("usr/lib", 'd', NULL),
                              le ("usr/lib/x", 'd', NULL), le ("usr/lib/x/ld.so", 'f', NULL),
                              le ("usr/lib/x/libc.so.6", 'f', NULL) };
  struct ib_fs_list list = { .n = sizeof (l0) / sizeof (l0[0]), .e = l0 };
  struct ib_fsview *v = ib_fsview_new ();
  ib_fsview_push (v, &list, 0);
  char *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (v, "/lib64/ld.so", &canon);
  CHECK (t, e && e->type == IB_FS_FILE);
  CHECK_STR (t, canon, "usr/lib/x/ld.so");
  free (canon);
  /* ".." after the folder it follows: /lib/x/.. is /usr/lib, not /. */
  e = ib_fsview_resolve (v, "/lib/x/../x/libc.so.6", &canon);
  CHECK_STR (t, canon, "usr/lib/x/libc.so.6");
  free (canon);
  e = ib_fsview_resolve (v, "/opt/up/libc.so.6", &canon);
  CHECK_STR (t, e ? canon : NULL, "usr/lib/x/libc.so.6");
  free (canon);
  e = ib_fsview_resolve (v, "/opt/hard", &canon);
  CHECK_STR (t, e ? canon : NULL, "usr/lib/x/libc.so.6");
  free (canon);
  CHECK (t, ib_fsview_resolve (v, "/loop/x", NULL) == NULL);
  CHECK (t, ib_fsview_resolve (v, "/usr/lib/x/libc.so.6/x", NULL) == NULL);
  CHECK (t, ib_fsview_resolve (v, "/lib/y/libc.so.6", NULL) == NULL);
  ib_fsview_free (v);
}

void
ldconf_and_origin_tokens (struct test_ctx *t)
{
  char **dirs = NULL, **inc = NULL;
  size_t nd = 0, ni = 0;
  ib_ldconf_parse ("# comment\ninclude ld.so.conf.d/*.conf /etc/x.conf\n/usr/local/lib  # trailing\n"
                   "/opt/a:/opt/b,/opt/c=libc5\nhwcap 0 nosegneg\nrelative/dir\n",
                   "/etc", &dirs, &nd, &inc, &ni);
  CHECK (t, nd == 4 && ni == 2);
  if (nd == 4 && ni == 2)
    {
      CHECK_STR (t, inc[0], "/etc/ld.so.conf.d/*.conf");
      CHECK_STR (t, inc[1], "/etc/x.conf");
      CHECK_STR (t, dirs[0], "/usr/local/lib");
      CHECK_STR (t, dirs[3], "/opt/c");
    }
  for (size_t i = 0; i < nd; i++)
    free (dirs[i]);
  for (size_t i = 0; i < ni; i++)
    free (inc[i]);
  free (dirs);
  free (inc);
  struct ib_link_paths p = { .lib = "lib/x86_64-linux-gnu", .platform = "x86_64" };
  cleanup_free char *a = ib_link_expand (&p, "$ORIGIN/../${LIB}/$PLATFORM", "/opt/app/bin");
  CHECK_STR (t, a, "/opt/app/bin/../lib/x86_64-linux-gnu/x86_64");
  CHECK (t, ib_link_expand (&p, "$ORIGINAL/x", "/o") == NULL);
  CHECK (t, ib_link_machine_of_arch ("arm64") == EM_AARCH64 && ib_link_machine_of_arch ("amd64") == EM_X86_64);
}

static struct ib_elf_link *
read_built (struct test_ctx *t, const char *path)
{
  int fd = open (path, O_RDONLY);
  struct ib_elf_link *l = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_elf_link_read (fd, path, &l, &err) == 0);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  close (fd);
  return l;
}

void
elf_link_record_and_version_rules (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "lib.c", "int v1_fn (void) { return 1; }\nint v2_fn (void) { return 2; }\n"
                            "int both_old (void) { return 3; }\nint both_new (void) { return 4; }\n"
                            "__asm__ (\".symver both_old,both@LIB_1.0\");\n"
                            "__asm__ (\".symver both_new,both@@LIB_2.0\");\n");
  test_write (dir, "lib.map", "LIB_1.0 { global: v1_fn; };\nLIB_2.0 { global: v2_fn; both; local: *; } LIB_1.0;\n");
  test_write (dir, "user.c", "extern int v2_fn (void); extern int both (void); extern int weak_fn (void) "
                             "__attribute__ ((weak));\nint u (void) { return v2_fn () + both () + (weak_fn ? 1 : 0); }\n");
  cleanup_free char *cmd = ib_xasprintf (
      "cd %s && cc -shared -fPIC -Wl,-soname,libv.so.1 -Wl,--version-script=lib.map lib.c -o libv.so && "
      "cc -shared -fPIC -Wl,--enable-new-dtags,-rpath,'$ORIGIN/../lib' user.c -L. -lv -o user.so",
      dir);
  CHECK (t, system (cmd) == 0);
  cleanup_free char *lib_path = ib_path_join (dir, "libv.so");
  cleanup_free char *user_path = ib_path_join (dir, "user.so");
  struct ib_elf_link *lib = read_built (t, lib_path), *user = read_built (t, user_path);
  if (lib == NULL || user == NULL)
    return;
  CHECK_STR (t, lib->soname, "libv.so.1");
  CHECK (t, lib->has_versym && ib_elf_link_defines_version (lib, "LIB_2.0") && ib_elf_link_defines_version (lib, "libv.so.1"));
  CHECK_STR (t, user->runpath, "$ORIGIN/../lib");
  CHECK (t, user->n_needed >= 1 && strcmp (user->needed[0], "libv.so.1") == 0);
  /* The weak reference is not a requirement; v2_fn@LIB_2.0 and both@LIB_2.0 are. */
  size_t refs = 0;
  for (size_t i = 0; i < user->n_refs; i++)
    {
      CHECK (t, strcmp (user->refs[i].name, "weak_fn") != 0);
      if (strcmp (user->refs[i].name, "v2_fn") == 0 || strcmp (user->refs[i].name, "both") == 0)
        {
          refs++;
          CHECK_STR (t, user->refs[i].version, "LIB_2.0");
          CHECK (t, ib_elf_link_satisfies (lib, &user->refs[i]));
        }
    }
  CHECK (t, refs == 2);
  /* glibc's rules: a hidden version only by name; an unversioned reference
   * takes the one non-hidden definition. */
  struct ib_elf_ref old = { "both", "LIB_1.0", "libv.so.1" }, none = { "both", NULL, NULL },
                    wrong = { "v1_fn", "LIB_2.0", "libv.so.1" }, absent = { "nope", NULL, NULL };
  CHECK (t, ib_elf_link_satisfies (lib, &old));
  CHECK (t, ib_elf_link_satisfies (lib, &none));
  CHECK (t, !ib_elf_link_satisfies (lib, &wrong));
  CHECK (t, !ib_elf_link_satisfies (lib, &absent));
  /* The cache text gives back the same record. */
  size_t len;
  char *text = ib_elf_link_to_text (user, &len);
  struct ib_elf_link *back = ib_elf_link_from_text (strdup (text)); /* the record's, its strings in it */
  CHECK (t, back && back->n_refs == user->n_refs && back->n_defs == user->n_defs && back->n_verneed == user->n_verneed);
  CHECK (t, back && back->runpath && strcmp (back->runpath, user->runpath) == 0);
  /* Field by field the same record: text -> record -> text is the identity. */
  size_t len2 = 0;
  char *again = back ? ib_elf_link_to_text (back, &len2) : NULL;
  CHECK (t, again && len2 == len && memcmp (again, text, len) == 0);
  free (again);
  /* An empty field between two others stays empty: a reference with no
   * version but a file reads back so, not with the file as its version. */
  if (back && back->n_refs > 0)
    {
      back->refs[0].version = NULL;
      back->refs[0].file = "libx.so.1";
      size_t len3;
      struct ib_elf_link *odd = ib_elf_link_from_text (ib_elf_link_to_text (back, &len3));
      CHECK (t, odd && odd->refs[0].version == NULL);
      CHECK (t, odd && odd->refs[0].file && strcmp (odd->refs[0].file, "libx.so.1") == 0);
      ib_elf_link_free (odd);
    }
  ib_elf_link_free (back);
  /* A line of no known kind is no record (and the text stays the
   * caller's: freed here). */
  const char *nl = strchr (text, '\n');
  char *bad = ib_xasprintf ("%.*sX\tjunk\n%s", (int) (nl - text + 1), text, nl + 1);
  CHECK (t, ib_elf_link_from_text (bad) == NULL);
  free (bad);
  /* A text cut short is no record. */
  text[len / 2] = '\0';
  CHECK (t, ib_elf_link_from_text (text) == NULL);
  free (text);
  ib_elf_link_free (lib);
  ib_elf_link_free (user);
  /* A name with a tab (a SONAME here) reads with '?' for it: the record's
   * strings lie in the file's string table, cleaned there, and its text
   * keeps one field per tab. */
  test_write (dir, "t.c", "int t_fn (void) { return 0; }\n");
  cleanup_free char *tab_cmd = ib_xasprintf (
      "cd %s && cc -shared -fPIC -Wl,-soname,\"$(printf 'lib\\tt.so.1')\" t.c -o libt.so", dir);
  CHECK (t, system (tab_cmd) == 0);
  cleanup_free char *tab_path = ib_path_join (dir, "libt.so");
  struct ib_elf_link *tab = read_built (t, tab_path);
  if (tab == NULL)
    return;
  CHECK_STR (t, tab->soname, "lib?t.so.1");
  size_t tab_len;
  struct ib_elf_link *tab_back = ib_elf_link_from_text (ib_elf_link_to_text (tab, &tab_len));
  CHECK (t, tab_back && tab_back->soname && strcmp (tab_back->soname, "lib?t.so.1") == 0);
  ib_elf_link_free (tab_back);
  ib_elf_link_free (tab);
}

/* The whole records held within a budget (reccache.h): a held record stays
 * (its pointer good) however small the budget; one let go leaves at once
 * when over it, and comes back from its cache file; a head keeps what the
 * loader reads and the hashes of the names defined, no symbols. */
void
link_record_cache_holds_within_its_budget (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "a", "imgbuild-elflink 2 machine=62 type=3 nodeflib=0 versym=0 elf32=0\nS\tliba.so.1\n"
                        "N\tlibc.so.6\nD\tfoo\t1\t0\t\nD\tbar\t1\t0\t\nF\tmalloc\t\t\n\x01end\n");
  test_write (dir, "b", "imgbuild-elflink 2 machine=62 type=3 nodeflib=0 versym=0 elf32=0\nS\tlibb.so.1\n"
                        "D\tbaz\t1\t0\t\n\x01end\n");
  struct ib_reccache *c = ib_reccache_new (dir, 1);
  const struct ib_elf_link *a = ib_reccache_get (c, 0, "a");
  const struct ib_elf_link *b = ib_reccache_get (c, 1, "b");
  CHECK (t, a && b);
  struct ib_reccache_stats st;
  ib_reccache_stats (c, &st);
  CHECK (t, st.loads == 2 && st.evictions == 0);
  CHECK_STR (t, a ? a->soname : NULL, "liba.so.1"); /* held: still there, over the budget */
  CHECK (t, ib_reccache_get (c, 0, "a") == a);   /* held twice now, no new read */
  ib_reccache_put (c, 0);
  ib_reccache_stats (c, &st);
  CHECK (t, st.loads == 2 && st.evictions == 0);
  ib_reccache_put (c, 0);
  ib_reccache_put (c, 1);
  ib_reccache_stats (c, &st);
  CHECK (t, st.evictions == 2 && st.peak_bytes > 0);
  a = ib_reccache_get (c, 0, "a");
  CHECK (t, a && a->n_defs == 2 && a->n_refs == 1);
  ib_reccache_stats (c, &st);
  CHECK (t, st.loads == 3);
  CHECK (t, ib_reccache_get (c, 2, "absent") == NULL);
  struct ib_elf_link *h = a ? ib_elf_link_head (a) : NULL;
  CHECK (t, h && h->n_defs == 0 && h->n_refs == 0 && h->n_hashes == 2 && h->n_needed == 1);
  CHECK_STR (t, h ? h->soname : NULL, "liba.so.1");
  uint32_t foo = ib_elf_name_hash ("foo");
  CHECK (t, h && (h->hashes[0] == foo || h->hashes[1] == foo) && h->hashes[0] < h->hashes[1]);
  ib_elf_link_free (h);
  ib_reccache_put (c, 0);
  ib_reccache_free (c);
}
