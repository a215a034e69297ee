/* What a Python module defines and imports, read without running Python.
 *
 * "Defines" means what CPython binds at module level (its symtable and the
 * stores of its bytecode, tests/pyref/): def / async def / class names;
 * assignment targets (=, augmented, annotated with a value; tuple, list and
 * starred unpacking); assignment expressions (NAME := ...) anywhere at module
 * level, comprehensions, defaults, decorators, bases and case guards
 * included, lambda bodies not; case capture patterns; import a.b (binds a),
 * import a.b as c, from m import x [as y]; for, with-as and except-as
 * targets; looking into if/elif/else, try/except/else/finally,
 * for/while/else, with and match bodies, never into def or class bodies.
 * Imports are every import statement of the file, at any depth, with the
 * line of its first keyword; relative ones are resolved against the module's
 * own package.  The scanner knows the whole lexical side of the language
 * (string prefixes, triple quotes, f-strings nesting quotes and braces,
 * comments, continuations, brackets, semicolons, tabs), and agrees with
 * CPython's ast on every file of the standard library (tested). */
#ifndef IB_PYSYMS_H
#define IB_PYSYMS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct ib_py_alias
{
  char *name;
  char *asname; /* or NULL */
};

struct ib_py_import
{
  int line;
  bool is_from;
  int level;      /* leading dots of a from-import */
  char *module;   /* absolute after resolution; ".x" style when it cannot be resolved */
  char *asname;   /* plain `import a.b as c` only */
  size_t n_names; /* from-imports: the names, "*" for a star import */
  struct ib_py_alias *names;
  /* Written to survive its own failure: inside a try whose except catches
   * ImportError (ModuleNotFoundError, Exception, BaseException, or bare),
   * or under `if TYPE_CHECKING:`. */
  bool guarded;
  /* The conditions it runs under, as one Python expression (`(A) and not
   * (B)`: the tests of the if, elif, else, while and case blocks around it,
   * each as its source spells it, an else's as its chain's tests negated),
   * or NULL when it runs whenever its block does; pycond.h decides them.
   * COND_LINE is the line of the innermost one. */
  char *cond;
  int cond_line;
};

struct ib_py_module
{
  size_t n_defs;
  char **defs; /* sorted, unique */
  size_t n_imports;
  struct ib_py_import *imports;
  bool has_getattr;     /* a module-level __getattr__: any name may resolve */
  bool has_star_import; /* a module-level `from x import *` */
  /* The first construct that binds module names at run time, anywhere in
   * the file (globals()[...] =, globals().update(, setattr(sys.modules[
   * __name__], ...), sys.modules[__name__].X =, locals()[...] = and
   * vars()[...] = as module-level code writes them), a static string, or NULL. */
  const char *runtime_binding;
  int runtime_binding_line;
  size_t n_all; /* the string literals of module-level `__all__ = [...]` / `+= [...]` */
  char **all;
};

/* Scan SRC.  PACKAGE is the dotted package the module lives in (for a
 * package's __init__.py, the package itself), used to resolve relative
 * imports; NULL or "" for a top-level module.  Only an unterminated string
 * or bracket is an error. */
int ib_py_scan (const char *src, size_t len, const char *package, struct ib_py_module **out, ib_error_t *err);
/* The construct names ib_py_module.runtime_binding takes, by index (for
 * caches); NULL-terminated. */
extern const char *const ib_py_runtime_bindings[];

void ib_py_module_free (struct ib_py_module *m);
bool ib_py_defines (const struct ib_py_module *m, const char *name);
/* NAME is listed in the module's __all__. */
bool ib_py_promises (const struct ib_py_module *m, const char *name);

/* {"path","definitions":[…],"imports":[{"line","module","level","names":[{"name","asname"}]}]};
 * an import entry has "guarded":true when it is guarded, and "condition" and
 * "condition_line" when it has one. */
cJSON *ib_py_module_json (const char *path, const struct ib_py_module *m);

/* One module-level statement of a file: a def or class with its
 * decorators, an assignment, an if or try with all its branches.  HASH is
 * of its tokens, so comments and blank lines do not change it, a changed
 * body does; [START, END) are its bytes in the source. */
struct ib_py_statement
{
  int line;
  size_t start, end;
  uint64_t hash;
};

/* The module-level statements of SRC, in order (*OUT is malloc'd).  What a
 * statement binds is what ib_py_scan finds in its bytes alone. */
int ib_py_statements (const char *src, size_t len, struct ib_py_statement **out, size_t *n, ib_error_t *err);

/* The dotted module name and package of a file on disk: folders are
 * climbed while they hold an __init__.py. */
int ib_py_module_name_of_path (const char *path, char **module, char **package, ib_error_t *err);

/* The tokens of a Python source, as this module's lexer sees them (strings
 * whole, with prefix and quotes; f-strings as one token; comments and
 * blank lines gone; INDENT/DEDENT from the columns): for other static
 * readers of Python (recipe/'s flag and environment inventory). */
enum ib_py_tok_kind
{
  IB_PY_NAME,
  IB_PY_NUMBER,
  IB_PY_STRING,
  IB_PY_OP,
  IB_PY_NEWLINE,
  IB_PY_INDENT,
  IB_PY_DEDENT,
  IB_PY_END
};

struct ib_py_token
{
  enum ib_py_tok_kind kind;
  const char *s; /* into SRC */
  size_t len;
  int line;
};

/* *OUT (malloc'd, *N tokens, the last IB_PY_END) points into SRC.  Only an
 * unterminated string or bracket is an error. */
int ib_py_tokenize (const char *src, size_t len, struct ib_py_token **out, size_t *n, ib_error_t *err);

#endif
