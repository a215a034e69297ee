/* Unit tests of the library core.  Prints one line per test ("ok NAME" or
 * "FAIL NAME") and a last line "N passed, N failed".
 * Usage: unit-tests [REGEX]   (the tests whose name REGEX, extended, matches) */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "tests/unit/test.h"

#define T(name) void name (struct test_ctx *t);
#include "tests/unit/tests.def"
#undef T

static const struct
{
  const char *name;
  void (*fn) (struct test_ctx *);
} all[] = {
#define T(name) { #name, name },
#include "tests/unit/tests.def"
#undef T
};

static char tmpdir[4096];

const char *
test_tmpdir (void)
{
  return tmpdir;
}

const char *
test_write (const char *dir, const char *name, const char *text)
{
  static char bufs[8][4096];
  static int next;
  char *p = bufs[next++ % 8];
  snprintf (p, 4096, "%s/%s", dir, name);
  char *slash = strrchr (p, '/');
  *slash = '\0';
  ib_mkdir_p (p, 0755, NULL);
  *slash = '/';
  FILE *f = fopen (p, "w");
  if (f == NULL)
    abort ();
  fputs (text, f);
  fclose (f);
  return p;
}

long
test_mapped_kib (const char *path)
{
  FILE *f = fopen ("/proc/self/smaps", "r");
  char line[4096];
  bool in = false;
  long kib = 0, v;
  unsigned long a, b;
  while (f && fgets (line, sizeof (line), f))
    {
      if (sscanf (line, "%lx-%lx ", &a, &b) == 2)
        in = strstr (line, path) != NULL;
      else if (in && sscanf (line, "Rss: %ld kB", &v) == 1)
        kib += v;
    }
  if (f)
    fclose (f);
  return kib;
}

int
main (int argc, char **argv)
{
  int passed = 0, failed = 0;
  const char *base = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  /* The same selection as tests/run.sh's TEST-REGEX for the integration
   * suites (bash's =~: extended, unanchored). */
  regex_t pick;
  if (argc > 1 && regcomp (&pick, argv[1], REG_EXTENDED | REG_NOSUB) != 0)
    {
      fprintf (stderr, "unit-tests: `%s` is no extended regular expression\n", argv[1]);
      return 2;
    }
  for (size_t i = 0; i < sizeof (all) / sizeof (all[0]); i++)
    {
      if (argc > 1 && regexec (&pick, all[i].name, 0, NULL, 0) != 0)
        continue;
      snprintf (tmpdir, sizeof (tmpdir), "%s/ib-unit-XXXXXX", base);
      if (mkdtemp (tmpdir) == NULL)
        abort ();
      struct test_ctx t = { 0, all[i].name };
      all[i].fn (&t);
      ib_remove_tree (tmpdir, NULL);
      printf ("%s %s\n", t.failures ? "FAIL" : "ok", all[i].name);
      fflush (stdout);
      if (t.failures)
        failed++;
      else
        passed++;
    }
  if (argc > 1)
    regfree (&pick);
  printf ("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
