/* The symbol gate over an image's merged file system.
 *
 * Syntax: every checked file (those of the layers from FIRST_CHECKED_LAYER
 * on, i.e. the overlay) must compile with the image's own CPython (COMPILE
 * runs it; NULL skips the check); the answer is cached by (interpreter,
 * file) content digests.  Where only the build machine's python3 of
 * another version answers, its refusals are warnings, except a merge
 * conflict marker outside a string (every CPython refuses it); where the
 * image has an interpreter, that is a check not done
 * (STATS->syntax_unchecked says why).
 *
 * Python: every import in the checked files of a module in PACKAGES must
 * resolve: the module exists (M/__init__.py, M.py, an extension module
 * M.cpython-3XY-TRIPLET.so / M.abi3.so / M.so of the image's Python, or a
 * namespace folder), and each imported name is defined there or is a
 * submodule.  What cannot be proven statically is counted, never an error:
 * names from an extension module and modules below one are "unchecked"
 * (the extension must export PyInit_NAME); a name from a module with a
 * star import, a module-level __getattr__ or a run-time binding construct
 * is "unresolved", a warning unless UNRESOLVED_IS_ERROR; a guarded import
 * (try/except ImportError, if TYPE_CHECKING) that does not resolve is a
 * warning, and so is one of a module the definition allows to be missing.
 *
 * Reverse edges: when a checked file replaces module M, every import of M
 * by the other files of PACKAGES in the image must still resolve.  The
 * imports of the base's files come from an index per base (its layers'
 * diff_ids, PYTHON_PATH and PACKAGES), one file per imported module, so a
 * warm build reads only the entries of the modules it replaces.
 *
 * The required-symbol lists name, per file, what it must define.
 *
 * Native: every shared object matching a required path or glob must export
 * the required dynamic symbols.
 *
 * What a file defines is cached in the store by its content digest, so a
 * build over a known base reads no base layer. */
#ifndef IB_SYMGATE_H
#define IB_SYMGATE_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "util/requirement.h"

/* One file for the image's CPython to compile, as import compiles it
 * (compile(source_bytes, path, "exec", dont_inherit=True)). */
struct ib_py_source
{
  const char *path; /* absolute, in the image */
  const char *src;
  size_t len;
  bool refused; /* out */
  int line;     /* out: CPython's line, 0 when it gives none */
  char *msg;    /* out: CPython's message (malloc'd) */
};

/* Who answered a syntax check (its strings malloc'd). */
struct ib_py_answerer
{
  char *who;       /* "the image's /usr/bin/python3.13 (under /usr/bin/qemu-aarch64-static, in a chroot)" */
  bool exact;      /* the image's own interpreter, or the build machine's of the same version: refusals are errors */
  char *not_image; /* why the image's interpreter did not answer ("not root"); NULL when it did */
};
void ib_py_answerer_clear (struct ib_py_answerer *a);

/* Compile FILES with the interpreter at INTERPRETER (an absolute path in the
 * image, Python VERSION "3.11"; NULL when the image has none).  *ANS says
 * who answered: when it is neither the image's own nor one of the same
 * version, ANS->exact is false and its refusals are only warnings.  -1 when
 * none could run. */
typedef int (*ib_py_compile_fn) (void *data, const char *interpreter, const char *version, struct ib_py_source *files,
                                 size_t n, struct ib_py_answerer *ans, ib_error_t *err);

struct ib_symbol_rules
{
  const char *python_path; /* "/usr/local/lib/python3.12/dist-packages" */
  char *const *packages;   /* top-level packages whose imports must resolve */
  size_t n_packages;
  const struct ib_requirement *python;
  size_t n_python;
  const struct ib_requirement *native;
  size_t n_native;
  bool unresolved_is_error;
  /* Modules the definition states are absent (allow-missing): an import of
   * one of them, or of a module below one, that does not resolve is a
   * warning that names the line, never an error (torch._inductor.fb, which
   * torch imports only under `if config.is_fbcode():`). */
  char *const *allow_missing;
  size_t n_allow_missing;
  int first_checked_layer;
  ib_py_compile_fn compile; /* NULL: no syntax check */
  void *compile_data;
};

#define IB_EXAMPLE_MAX 400

struct ib_symbol_stats
{
  size_t files_checked, imports_checked, names_checked, native_checked;
  size_t errors, warnings;
  size_t unchecked;      /* names from extension modules, modules below one */
  size_t never_run;      /* imports under a condition the image's Python never meets (pycond.h) */
  size_t importers;      /* reverse edges checked: base files importing a replaced module */
  size_t compiled, compile_cached; /* syntax: files compiled now vs answers from the cache */
  size_t scanned, cached; /* files whose symbols were read vs found in the cache */
  char python[192];       /* "3.11 (/usr/bin/python3.11)", or "" */
  char compiler[200];     /* who answered the syntax check */
  /* Why the syntax check was not done although the image has an
   * interpreter ("" when it was): the image's could not run here and no
   * python3.X of its version on the build machine answered instead. */
  char syntax_unchecked[IB_EXAMPLE_MAX];
  char example_unchecked[IB_EXAMPLE_MAX], example_warning[IB_EXAMPLE_MAX];
};

/* Returns -1 only when the check itself could not run (I/O, a damaged
 * layer); problems found go to FN and are counted in STATS. */
int ib_symbols_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                      const struct ib_symbol_rules *rules, ib_problem_fn fn, void *data,
                      struct ib_symbol_stats *stats, ib_error_t *err);

/* The gate's indexer (layers/store/indexer.h): in the pass that makes a layer's
 * file list, each Python file of PACKAGES under PYTHON_PATH scanned (what
 * it defines and imports) into the cache the gate reads, with the package
 * the gate gives it, and the dynamic symbols of each extension module of
 * PACKAGES, so that the gate's reads of the base (the reverse import
 * index, the definitions and extension modules the overlay imports) read
 * no layer again.
 * PACKAGES is kept by pointer. */
struct ib_python_indexer
{
  struct ib_indexer ix;
  char *py_cache, *elf_cache, *root;
  char *const *packages;
  size_t n_packages;
};
int ib_python_indexer_init (struct ib_store *s, const char *python_path, char *const *packages, size_t n_packages,
                            struct ib_python_indexer *out, ib_error_t *err);
void ib_python_indexer_clear (struct ib_python_indexer *x);

#endif
