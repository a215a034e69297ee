/* symbol-check/pycond.c: the conditions an import sits under, as the
 * scanner records them (pysyms.c) and as CPython decides them.  The oracle
 * is the build machine's python3: every condition the evaluator decides is
 * evaluated by it too, with its own version as the target, and with what
 * only the run decides (config.is_fbcode()) both true and false: a
 * decided condition is the same either way ("x" where it is not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbol-check/pycond.h"
#include "symbol-check/pysyms.h"
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

static struct ib_py_module *
scan (struct test_ctx *t, const char *src)
{
  struct ib_py_module *m = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_py_scan (src, strlen (src), NULL, &m, &err) == 0);
  ib_error_release (&err);
  return m;
}

/* What each import runs under: the if, elif and else chain, nesting, a
 * one-line body, TYPE_CHECKING (a guard, not a condition), and blocks that
 * are no condition (def, try, for, with). */
void
pysyms_records_the_conditions_of_an_import (struct test_ctx *t)
{
  const char *src = "import a0\n"
                    "if config.is_fbcode():\n"
                    "    import a1\n"
                    "elif sys.platform == 'win32':  # a comment\n"
                    "    import a2\n"
                    "else:\n"
                    "    import a3\n"
                    "    if (X and\n"
                    "        Y): import a4\n"
                    "if TYPE_CHECKING:\n"
                    "    import a5\n"
                    "else:\n"
                    "    import a6\n"
                    "def f():\n"
                    "    try:\n"
                    "        import a7\n"
                    "    except ImportError:\n"
                    "        pass\n"
                    "    else:\n"
                    "        import a8\n"
                    "    while more():\n"
                    "        import a9\n"
                    "import a10\n";
  static const struct
  {
    const char *module, *cond;
    int line;
  } want[] = {
    { "a0", NULL, 0 },
    { "a1", "(config.is_fbcode())", 2 },
    { "a2", "not (config.is_fbcode()) and (sys.platform == 'win32')", 4 },
    { "a3", "not (config.is_fbcode()) and not (sys.platform == 'win32')", 6 },
    { "a4", "not (config.is_fbcode()) and not (sys.platform == 'win32') and ((X and Y))", 8 },
    { "a5", NULL, 0 },
    { "a6", "not (TYPE_CHECKING)", 12 },
    { "a7", NULL, 0 },
    { "a8", NULL, 0 },
    { "a9", "(more())", 21 },
    { "a10", NULL, 0 },
  };
  struct ib_py_module *m = scan (t, src);
  if (m == NULL)
    return;
  CHECK (t, m->n_imports == sizeof (want) / sizeof (want[0]));
  for (size_t i = 0; i < m->n_imports && i < sizeof (want) / sizeof (want[0]); i++)
    {
      const struct ib_py_import *im = &m->imports[i];
      CHECK_STR (t, im->module, want[i].module);
      if ((im->cond == NULL) != (want[i].cond == NULL) || (im->cond && strcmp (im->cond, want[i].cond) != 0))
        fprintf (stderr, "  %s: [%s], expected [%s]\n", im->module, im->cond ? im->cond : "-",
                 want[i].cond ? want[i].cond : "-");
      CHECK (t, (im->cond == NULL) == (want[i].cond == NULL));
      CHECK (t, im->cond == NULL || strcmp (im->cond, want[i].cond) == 0);
      CHECK (t, im->cond_line == want[i].line);
    }
  CHECK (t, m->imports[5].guarded && !m->imports[6].guarded);
  struct ib_py_target tg = { "3.11" };
  CHECK (t, ib_py_condition (m->imports[6].cond, &tg) == IB_PY_TRUE);
  CHECK (t, ib_py_condition (m->imports[1].cond, &tg) == IB_PY_UNKNOWN);
  CHECK (t, ib_py_condition (m->imports[2].cond, &tg) == IB_PY_FALSE); /* unknown and false */
  CHECK (t, ib_py_condition (m->imports[3].cond, &tg) == IB_PY_UNKNOWN);
  ib_py_module_free (m);
}
