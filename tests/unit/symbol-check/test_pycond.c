/* symbol-check/pycond.c: the conditions an import sits under (recorded by
 * pysyms.c, tested in test_symbols.c) as CPython decides them.  The oracle
 * is the build machine's python3: every condition the evaluator decides is
 * evaluated by it too, with its own version as the target, and with what
 * only the run decides (config.is_fbcode()) both true and false: a
 * decided condition is the same either way ("x" where it is not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbol-check/pycond.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

static const char *const decided[] = {
  "True",
  "False",
  "TYPE_CHECKING",
  "typing.TYPE_CHECKING",
  "sys.version_info >= (3, 8)",
  "sys.version_info < (3, 8)",
  "sys.version_info >= (3, 11)",
  "sys.version_info > (3, 11)",
  "sys.version_info < (3, 11)",
  "sys.version_info == (3, 11)",
  "sys.version_info != (3, 11)",
  "sys.version_info >= (3, 12)",
  "sys.version_info >= (3,)",
  "sys.version_info < (4, 0)",
  "sys.version_info >= (3, 10, 4)",
  "sys.version_info < (3, 12, 0)",
  "sys.version_info[:2] == (3, 11)",
  "sys.version_info[:2] >= (3, 11)",
  "sys.version_info[:2] < (3, 11, 1)",
  "sys.version_info[0] == 3",
  "sys.version_info[1] >= 12",
  "sys.version_info.major >= 3",
  "sys.version_info.minor < 9",
  "sys.platform == 'win32'",
  "sys.platform != \"win32\"",
  "sys.platform == \"linux\"",
  "sys.platform.startswith('linux')",
  "sys.platform.startswith('win')",
  "sys.platform in ('win32', 'cygwin')",
  "sys.platform not in ['darwin']",
  "os.name == 'nt'",
  "platform.system() == 'Linux'",
  "platform.system() == \"Darwin\"",
  "not sys.platform == 'win32'",
  "sys.version_info >= (3, 8) and sys.platform == 'win32'",
  "sys.version_info < (3, 8) or sys.platform == 'linux'",
  "(sys.version_info < (3, 8)) or not (os.name == 'posix')",
  "config.is_fbcode() and sys.platform == 'win32'",
  "sys.platform == 'linux' or config.is_fbcode()",
  "not (TYPE_CHECKING) and (sys.version_info >= (3, 9))",
  NULL,
};

/* Only the run decides these (or the micro version, which the image's
 * files do not show). */
static const char *const unknown[] = {
  "config.is_fbcode()",
  "os.environ.get('VLLM_FB')",
  "sys.version_info >= (3, 11, 4)",
  "HAS_TRITON",
  "sys.platform == 'linux' and HAS_TRITON",
  "not torch.cuda.is_available()",
  "sys.version_info >= (3, 8) if x else y",
  "(case _)",
  "version_info >= (3, 8)",
  "sys.platform == f'linux'",
  NULL,
};

static enum ib_py_truth
decide (const char *expr, const char *version)
{
  struct ib_py_target tg = { version };
  return ib_py_condition (expr, &tg);
}

void
pycond_decides_as_cpython_does (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  char *text = NULL;
  size_t len = 0;
  for (int i = 0; decided[i]; i++)
    {
      ib_xappend (&text, &len, decided[i], strlen (decided[i]));
      ib_xappend (&text, &len, "\n", 1);
    }
  ib_xappend (&text, &len, "", 1);
  test_write (dir, "exprs.txt", text);
  free (text);
  cleanup_free char *cmd = ib_xasprintf (
      "cd %s && python3 -c 'import sys, os, platform, typing, types\n"
      "TYPE_CHECKING = typing.TYPE_CHECKING\n"
      "print(\"%%d.%%d\" %% sys.version_info[:2])\n"
      "def run(e, fb): return bool(eval(e, dict(globals(), config=types.SimpleNamespace(is_fbcode=lambda: fb))))\n"
      "for e in open(\"exprs.txt\").read().splitlines(): print(int(run(e, True)) if run(e, True) == run(e, False) else \"x\")' >answers.txt",
      dir);
  CHECK (t, system (cmd) == 0);
  cleanup_free char *path = ib_path_join (dir, "answers.txt");
  FILE *f = fopen (path, "r");
  CHECK (t, f != NULL);
  if (f == NULL)
    return;
  char version[16] = "", line[16];
  CHECK (t, fgets (version, sizeof (version), f) != NULL);
  version[strcspn (version, "\n")] = '\0';
  int n = 0, n_true = 0;
  for (int i = 0; decided[i] && fgets (line, sizeof (line), f); i++, n++)
    {
      enum ib_py_truth want = line[0] == '1' ? IB_PY_TRUE : IB_PY_FALSE, got = decide (decided[i], version);
      if (got != want)
        fprintf (stderr, "  %s: %d, CPython %s says %d\n", decided[i], got, version, want);
      CHECK (t, got == want);
      n_true += want == IB_PY_TRUE;
    }
  fclose (f);
  CHECK (t, n == (int) (sizeof (decided) / sizeof (decided[0])) - 1);
  CHECK (t, n_true > 5 && n - n_true > 5); /* both answers are given */
  for (int i = 0; unknown[i]; i++)
    {
      if (decide (unknown[i], version) != IB_PY_UNKNOWN)
        fprintf (stderr, "  %s: decided, but only the run can\n", unknown[i]);
      CHECK (t, decide (unknown[i], version) == IB_PY_UNKNOWN);
    }
  /* An image whose version is not known decides no version test. */
  CHECK (t, decide ("sys.version_info >= (3, 8)", "") == IB_PY_UNKNOWN);
  CHECK (t, decide ("sys.platform == 'win32'", "") == IB_PY_FALSE);
}
