/* The symbol gate over an image's merged file system.
 *
 * Python: every import in the checked files (those of the layers from
 * FIRST_CHECKED_LAYER on, i.e. the overlay) of a module in PACKAGES must
 * resolve: the module exists (M.py or M/__init__.py under PYTHON_PATH), and
 * each imported name is defined there or is a submodule.  A module with a
 * star import or a module-level __getattr__ may define anything: such a
 * name is "unresolved", a warning unless UNRESOLVED_IS_ERROR.  The
 * required-symbol lists name, per file, what it must define.
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

#include "../layers/fsview.h"
#include "../layers/image.h"
#include "../layers/store.h"
#include "../util/requirement.h"

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
  int first_checked_layer;
};

struct ib_symbol_stats
{
  size_t files_checked, imports_checked, names_checked, native_checked;
  size_t errors, warnings;
  size_t scanned, cached; /* files whose symbols were read vs found in the cache */
};

/* Returns -1 only when the check itself could not run (I/O, a damaged
 * layer); problems found go to FN and are counted in STATS. */
int ib_symbols_check (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                      const struct ib_symbol_rules *rules, ib_problem_fn fn, void *data,
                      struct ib_symbol_stats *stats, ib_error_t *err);

#endif
