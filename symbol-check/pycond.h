/* Whether an `if` runs in the image: the conditions an import sits under,
 * decided where a static reading can decide them (pycond.c).
 *
 * The symbol gate's verdict on a missing module or name depends on whether
 * the import runs when the image imports its file.  An import under `if
 * sys.version_info < (3, 9):` never runs on CPython 3.13, one under `if
 * sys.platform == "win32":` never runs on Linux: neither is a fault.  One
 * under `if config.is_fbcode():` runs or not as the program decides at run
 * time: a static reading cannot tell, and the gate warns instead of
 * failing (the user states it with `allow-missing`). */
#ifndef IB_PYCOND_H
#define IB_PYCOND_H

enum ib_py_truth
{
  IB_PY_FALSE,
  IB_PY_TRUE,
  IB_PY_UNKNOWN
};

/* What the image's interpreter is: VERSION "3.13" (major.minor; "" when
 * the image shows none: every version test is then unknown) on Linux
 * (sys.platform "linux", os.name "posix", platform.system() "Linux"). */
struct ib_py_target
{
  const char *version;
};

/* TEXT, a Python expression as ib_py_scan records a condition (pysyms.h:
 * `A and not (B)`), evaluated in three-valued logic.  Decided: True,
 * False, TYPE_CHECKING (false at run time), comparisons of
 * sys.version_info (whole, [:2], [0], [1], .major, .minor) with integers
 * or tuples of them, of sys.platform, os.name or platform.system() with a
 * string, sys.platform.startswith(STRING), and not/and/or/parentheses over
 * them.  Anything else is unknown. */
enum ib_py_truth ib_py_condition (const char *text, const struct ib_py_target *tg);

#endif
