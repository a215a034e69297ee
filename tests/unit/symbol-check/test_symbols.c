/* symbol-check/: the Python scanner on syntax the stdlib comparison cannot
 * cover (Python 3.12 f-strings, errors), and ELF dynamic symbols of a shared
 * object built here. */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbol-check/elfsyms.h"
#include "symbol-check/pycond.h"
#include "symbol-check/pylex.h"
#include "symbol-check/pysyms.h"
#include "symbol-check/symcache.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

static struct ib_py_module *
scan (struct test_ctx *t, const char *src, const char *package)
{
  struct ib_py_module *m = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_py_scan (src, strlen (src), package, &m, &err) == 0);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  return m;
}

void
pysyms_pep701_fstrings (struct test_ctx *t)
{
  /* Python 3.12: the same quote inside a replacement field, nested fields,
   * a '}' inside a nested string, a format spec with a field. */
  const char *src = "d = {'a': 1}\n"
                    "s = f\"{d[\"a\"]} {f\"{d[\"a\"]:>{3}}\"} {'}'}\"\n"
                    "t = f'''{\n  d['a']\n}'''\n"
                    "after = 1\n";
  struct ib_py_module *m = scan (t, src, NULL);
  if (m == NULL)
    return;
  CHECK (t, ib_py_defines (m, "after") && ib_py_defines (m, "s") && ib_py_defines (m, "t"));
  CHECK (t, m->n_defs == 4);
  ib_py_module_free (m);
}

void
pysyms_relative_imports_and_flags (struct test_ctx *t)
{
  const char *src = "from .a import x\nfrom ..b.c import y as z\nfrom ... import w\nfrom .q import *\n"
                    "def __getattr__(name):\n    from . import late\n";
  struct ib_py_module *m = scan (t, src, "vllm.v1.core");
  if (m == NULL)
    return;
  CHECK (t, m->n_imports == 5);
  CHECK_STR (t, m->imports[0].module, "vllm.v1.core.a");
  CHECK_STR (t, m->imports[1].module, "vllm.v1.b.c");
  CHECK_STR (t, m->imports[1].names[0].asname, "z");
  CHECK_STR (t, m->imports[2].module, "vllm");
  CHECK (t, m->imports[4].line == 6);
  CHECK (t, m->has_star_import && m->has_getattr);
  CHECK (t, ib_py_defines (m, "z") && !ib_py_defines (m, "y") && !ib_py_defines (m, "late"));
  ib_py_module_free (m);
  /* Beyond the top-level package: kept in its relative form. */
  m = scan (t, "from .... import x\n", "a.b");
  CHECK (t, m && strcmp (m->imports[0].module, "....") == 0);
  ib_py_module_free (m);
}

void
pysyms_errors (struct test_ctx *t)
{
  const char *bad[] = { "s = 'open\n", "x = (1,\n", "s = '''never closed\n", "f = f\"{x\"\n", NULL };
  for (int i = 0; bad[i]; i++)
    {
      struct ib_py_module *m = NULL;
      ib_error_t err = NULL;
      CHECK (t, ib_py_scan (bad[i], strlen (bad[i]), NULL, &m, &err) < 0);
      CHECK (t, err && strstr (err->msg, "line 1"));
      ib_error_release (&err);
    }
}

/* Conflict markers at a line's start outside any string: the line of the
 * first, which every CPython refuses; none in a string, a comment or an
 * indented line (0, whatever CPython says there).  Each case's verdict is
 * CPython 3.11's (refused where the line is not 0). */
void
pylex_conflict_markers_outside_strings (struct test_ctx *t)
{
  static const struct
  {
    const char *src;
    int line;
  } cases[] = {
    { "def g():\n<<<<<<< ours\n    return 1\n=======\n    return 2\n>>>>>>> theirs\n", 2 },
    { "def f():\n    \"\"\"\n=======\n<<<<<<< x\n    \"\"\"\n", 0 },
    { "# <<<<<<< x\ny = 1\n", 0 },
    { "x = f\"\"\"{1}\n>>>>>>> y\n\"\"\"\n", 0 },
    { "x = [\n    1,\n=======\n    2,\n]\n", 3 },
    { "x = 1 + \\\n=======\n", 2 },
    { "a = 1\r\n||||||| base\r\n", 2 },
    { "<<<<<<< a\ns = 'open\n", 1 }, /* the tokenizer refuses line 2: line 1 counts */
    { "s = 'open\n<<<<<<< a\n", 0 }, /* refused at line 1: nothing after it is read */
    { "if x:\n    <<<<<<< a\n", 0 },
    { "x = 1 <<<<<<< 2\n", 0 },
  };
  for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
    {
      int got = ib_py_conflict_marker_line (cases[i].src, strlen (cases[i].src));
      if (got != cases[i].line)
        fprintf (stderr, "  case %zu: line %d, expected %d\n", i, got, cases[i].line);
      CHECK (t, got == cases[i].line);
    }
  CHECK (t, ib_py_is_conflict_marker ("=======", 7) && !ib_py_is_conflict_marker ("======", 6));
  CHECK (t, !ib_py_is_conflict_marker ("<<<<<<=", 7));
}

void
elf_dynsyms_of_a_built_object (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "lib.c", "int visible_fn (void) { return 1; }\n"
                            "int old_fn (void) { return 2; }\n"
                            "__attribute__((visibility(\"hidden\"))) int hidden_fn (void) { return 3; }\n"
                            "__asm__ (\".symver old_fn,old_fn@LIB_1.0\");\n");
  test_write (dir, "lib.map", "LIB_1.0 { global: old_fn; };\nLIB_2.0 { global: visible_fn; local: *; } LIB_1.0;\n");
  cleanup_free char *cmd = ib_xasprintf ("cd %s && cc -shared -fPIC -Wl,--version-script=lib.map lib.c -o lib.so", dir);
  CHECK (t, system (cmd) == 0);
  cleanup_free char *so = ib_path_join (dir, "lib.so");
  int fd = open (so, O_RDONLY);
  struct ib_elf_symbols *s = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_elf_dynsyms (fd, so, &s, &err) == 0);
  close (fd);
  if (s == NULL)
    return;
  CHECK (t, s->machine == 62 || s->machine == 183);
  CHECK (t, ib_elf_exports (s, "visible_fn"));
  CHECK (t, ib_elf_exports (s, "visible_fn@LIB_2.0"));
  CHECK (t, !ib_elf_exports (s, "visible_fn@LIB_1.0"));
  CHECK (t, ib_elf_exports (s, "old_fn@LIB_1.0"));
  CHECK (t, !ib_elf_exports (s, "hidden_fn"));
  CHECK (t, !ib_elf_exports (s, "visible"));
  ib_elf_symbols_free (s);
  /* Not an ELF file. */
  cleanup_free char *c = ib_path_join (dir, "lib.c");
  fd = open (c, O_RDONLY);
  CHECK (t, ib_elf_dynsyms (fd, c, &s, &err) < 0 && strstr (err->msg, "not an ELF"));
  close (fd);
  ib_error_release (&err);
}

/* A module that defines nothing: sorting its (absent) definitions handed
 * qsort a null pointer (found by tests/fuzz/fuzz_pysyms). */
void
pysyms_module_without_definitions (struct test_ctx *t)
{
  struct ib_py_module *m = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_py_scan ("if x:\n    pass\n", 16, NULL, &m, &err) == 0);
  CHECK (t, m && m->n_defs == 0 && m->n_imports == 0);
  ib_py_module_free (m);
  m = NULL;
  CHECK (t, ib_py_scan ("", 0, NULL, &m, &err) == 0);
  CHECK (t, m && m->n_defs == 0);
  ib_py_module_free (m);
}

/* A malformed .dynsym is an error that hands out nothing (it leaked the
 * half-made list; found by tests/fuzz/fuzz_elfsyms). */
void
elf_dynsyms_malformed_dynsym (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  test_write (dir, "lib.c", "int visible_fn (void) { return 1; }\n");
  cleanup_free char *cmd = ib_xasprintf ("cd %s && cc -shared -fPIC lib.c -o lib.so", dir);
  CHECK (t, system (cmd) == 0);
  cleanup_free char *so = ib_path_join (dir, "lib.so");
  int fd = open (so, O_RDWR);
  Elf64_Ehdr eh;
  CHECK (t, pread (fd, &eh, sizeof (eh), 0) == sizeof (eh));
  for (unsigned i = 0; i < eh.e_shnum; i++)
    {
      Elf64_Shdr sh;
      off_t at = (off_t) (eh.e_shoff + i * sizeof (sh));
      CHECK (t, pread (fd, &sh, sizeof (sh), at) == sizeof (sh));
      if (sh.sh_type != SHT_DYNSYM)
        continue;
      sh.sh_entsize = 7;
      CHECK (t, pwrite (fd, &sh, sizeof (sh), at) == sizeof (sh));
    }
  struct ib_elf_symbols *s = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_elf_dynsyms (fd, so, &s, &err) < 0 && strstr (err->msg, "malformed .dynsym"));
  CHECK (t, s == NULL);
  close (fd);
  ib_error_release (&err);
}

/* One content with relative imports in two packages (torch's several
 * `from .modules import *` __init__.py): each package's record stays in
 * the cache, neither replaces the other. */
void
symcache_py_same_content_two_packages (struct test_ctx *t)
{
  cleanup_free char *dir = ib_path_join (test_tmpdir (), "pysyms-two");
  ib_error_t err = NULL;
  CHECK (t, ib_mkdir_p (dir, 0755, &err) == 0);
  ib_error_release (&err);
  const char *digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const char *src = "from .modules import Linear\n";
  const char *pkgs[] = { "torch.ao.nn.qat", "torch.nn.intrinsic.qat" };
  for (int i = 0; i < 2; i++)
    {
      struct ib_py_module *m = scan (t, src, pkgs[i]);
      if (m == NULL)
        return;
      ib_symcache_save_py (dir, digest, pkgs[i], m);
      ib_py_module_free (m);
    }
  for (int i = 0; i < 2; i++)
    {
      struct ib_py_module *m = ib_symcache_load_py (dir, digest, pkgs[i]);
      CHECK (t, m != NULL);
      ib_py_module_free (m);
    }
  /* A content without relative imports: one record for every package. */
  struct ib_py_module *m = scan (t, "import os\n", "a");
  if (m == NULL)
    return;
  ib_symcache_save_py (dir, "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", "a", m);
  ib_py_module_free (m);
  m = ib_symcache_load_py (dir, "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", "b");
  CHECK (t, m != NULL);
  ib_py_module_free (m);
}

/* A record whose strings would not read back as written (a literal of
 * __all__ across lines, whose lines read as a definition) is not kept:
 * read back, it would define a name the file does not, and a warm build
 * would pass an import that the file's scan refuses. */
void
symcache_py_record_that_would_read_otherwise_is_not_kept (struct test_ctx *t)
{
  cleanup_free char *dir = ib_path_join (test_tmpdir (), "pysyms-lines");
  ib_error_t err = NULL;
  CHECK (t, ib_mkdir_p (dir, 0755, &err) == 0);
  ib_error_release (&err);
  const char *digest = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  struct ib_py_module *m = scan (t, "__all__ = [\"\"\"\nd missing_w\n\"\"\"]\nx = 1\n", "");
  if (m == NULL)
    return;
  CHECK (t, !ib_py_defines (m, "missing_w"));
  ib_symcache_save_py (dir, digest, "", m);
  ib_py_module_free (m);
  m = ib_symcache_load_py (dir, digest, "");
  CHECK (t, m == NULL);
  ib_py_module_free (m);
  /* A plain one is kept, and reads back. */
  m = scan (t, "__all__ = [\"x\"]\nx = 1\n", "");
  if (m == NULL)
    return;
  ib_symcache_save_py (dir, digest, "", m);
  ib_py_module_free (m);
  m = ib_symcache_load_py (dir, digest, "");
  CHECK (t, m != NULL && ib_py_defines (m, "x") && m->n_all == 1);
  ib_py_module_free (m);
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
  struct ib_py_module *m = scan (t, src, NULL);
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
