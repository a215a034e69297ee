/* Port triage: what a Python file defines, compared between versions. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "builder/diff/filesum.h"
#include "tests/unit/test.h"

static struct ib_file_summary *
summary_of (struct test_ctx *t, const char *name, const char *text)
{
  const char *path = test_write (test_tmpdir (), name, text);
  int fd = open (path, O_RDONLY);
  struct ib_file_summary *f = NULL;
  ib_error_t err = NULL;
  CHECK (t, fd >= 0 && ib_file_summary_fd (path, fd, &f, &err) == 0);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  if (fd >= 0)
    close (fd);
  return f;
}

void
filesum_python_definitions_changed (struct test_ctx *t)
{
  /* B: comments and blank lines moved in f (no change), g's body changed,
   * h added, k removed, one more name on the import line (the others on
   * it unchanged), a decorator of d changed (d changed). */
  struct ib_file_summary *a = summary_of (t, "a.py",
                                          "from typing import Any, Optional\n"
                                          "def f(x):\n    return x  # one\n\n"
                                          "@cache\ndef d():\n    pass\n"
                                          "def g():\n    return 1\n"
                                          "def k():\n    '''doc'''\n"
                                          "X = {'a': (1,\n  2)}\n");
  struct ib_file_summary *b = summary_of (t, "b.py",
                                          "from typing import Any, List, Optional\n"
                                          "# a comment\n"
                                          "def f(x):\n\n    return x  # two\n"
                                          "@cache(1)\ndef d():\n    pass\n"
                                          "def g():\n    return 2\n"
                                          "def h(): pass\n"
                                          "X = {'a': (1,\n        2)}\n");
  if (a == NULL || b == NULL)
    return;
  struct ib_sym_change *ch = NULL;
  size_t n = ib_file_summary_diff (a, b, &ch);
  char *text = ib_sym_changes_text (ch, n, 10);
  CHECK_STR (t, text, "definitions changed: d, g; definitions added: List, h; definitions removed: k");
  free (text);
  free (ch);
  /* Nothing changed: the sentence says so. */
  n = ib_file_summary_diff (a, a, &ch);
  CHECK (t, n == 0);
  text = ib_sym_changes_text (ch, n, 10);
  CHECK_STR (t, text, "no definition, symbol or kernel changed");
  free (text);
  free (ch);
  ib_file_summary_free (a);
  ib_file_summary_free (b);
  /* A def appended after the last one leaves the last one as it was. */
  a = summary_of (t, "c.py", "class C:\n    def f(self):\n        return 1\n");
  b = summary_of (t, "d.py", "class C:\n    def f(self):\n        return 1\n\n\ndef g():\n    pass\n");
  if (a == NULL || b == NULL)
    return;
  n = ib_file_summary_diff (a, b, &ch);
  text = ib_sym_changes_text (ch, n, 10);
  CHECK_STR (t, text, "definitions added: g");
  free (text);
  free (ch);
  ib_file_summary_free (a);
  ib_file_summary_free (b);
}
