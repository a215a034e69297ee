/* The symbol gate in the build: the definition's [symbols] rules over the
 * candidate image, checking the imports of the overlay's Python files. */
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/gates/gates.h"
#include "symbol-check/pycompile/pycompile.h"

char **
ib_packages_of_targets (const char *python_path, char *const *targets, size_t n_targets, size_t *n)
{
  char **out = NULL;
  *n = 0;
  size_t pl = strlen (python_path);
  for (size_t i = 0; i < n_targets; i++)
    {
      const char *t = targets[i];
      if (t == NULL || strncmp (t, python_path, pl) != 0 || t[pl] != '/')
        continue;
      const char *rel = t + pl + 1;
      size_t len = strcspn (rel, "/");
      if (len == strlen (rel))
        continue; /* a top-level module, not a package */
      bool seen = false;
      for (size_t k = 0; k < *n; k++)
        seen |= strlen (out[k]) == len && strncmp (out[k], rel, len) == 0;
      if (!seen)
        {
          out = ib_xrealloc (out, (*n + 1) * sizeof (*out));
          out[(*n)++] = strndup (rel, len);
        }
    }
  return out;
}

char **
ib_default_packages (const struct ib_definition *d, size_t *n)
{
  char **targets = ib_xcalloc (d->n_items ? d->n_items : 1, sizeof (*targets));
  for (size_t i = 0; i < d->n_items; i++)
    targets[i] = ib_copy_item_target (&d->items[i]);
  char **out = ib_packages_of_targets (d->python_path, targets, d->n_items, n);
  for (size_t i = 0; i < d->n_items; i++)
    free (targets[i]);
  free (targets);
  return out;
}

int
ib_gate_symbols (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->python_path == NULL && d->n_native_required == 0)
    return ib_gate_skip (b, "no [symbols] in %s", ib_gate_definition_name (b));
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  size_t n_default = 0;
  char **defaults = d->n_check_packages || !d->python_path ? NULL
                    : b->recorded_targets
                        ? ib_packages_of_targets (d->python_path, b->recorded_targets, b->n_recorded_targets, &n_default)
                        : ib_default_packages (d, &n_default);
  struct ib_pycompile pc = { b->store, b->image, view };
  struct ib_symbol_rules rules = {
    .python_path = d->python_path,
    .packages = d->n_check_packages ? d->check_packages : defaults,
    .n_packages = d->n_check_packages ? d->n_check_packages : n_default,
    .python = d->py_required,
    .n_python = d->n_py_required,
    .native = d->native_required,
    .n_native = d->n_native_required,
    .unresolved_is_error = d->unresolved_is_error,
    .allow_missing = d->allow_missing,
    .n_allow_missing = d->n_allow_missing,
    .first_checked_layer = (int) b->first_overlay_layer,
    .compile = ib_py_compile,
    .compile_data = &pc,
  };
  struct ib_gate_sink k = { b->report, "symbols", NULL, 0 };
  struct ib_symbol_stats st;
  int r = ib_symbols_check (b->store, b->image, view, &rules, ib_gate_sink_problem, &k, &st, err);
  for (size_t i = 0; i < n_default; i++)
    free (defaults[i]);
  free (defaults);
  if (r < 0)
    {
      ib_gate_sink_finish (&k, IB_ESYMBOLS, NULL);
      return -1;
    }
  ib_report_note (b->report,
                  "symbols: %zu overlay files, %zu imports, %zu names, %zu importers in the base, %zu shared objects; "
                  "%zu read, %zu cached; %zu warnings, %zu unchecked, %zu never run by this Python",
                  st.files_checked, st.imports_checked, st.names_checked, st.importers, st.native_checked, st.scanned,
                  st.cached, st.warnings, st.unchecked, st.never_run);
  if (st.python[0])
    ib_report_note (b->report, "symbols: Python %s; syntax: %zu compiled%s%s, %zu from the cache", st.python,
                    st.compiled, st.compiler[0] ? " by " : "", st.compiler, st.compile_cached);
  if (st.syntax_unchecked[0])
    ib_report_note (b->report, "symbols: syntax not checked by the image's CPython: %s", st.syntax_unchecked);
  if (st.example_unchecked[0])
    ib_report_note (b->report, "symbols: unchecked, e.g. %s", st.example_unchecked);
  if (ib_gate_sink_finish (&k, IB_ESYMBOLS, err) < 0)
    return -1;
  /* The image's own CPython would judge the files, and nothing of its
   * version did: the gate cannot say they import. */
  if (st.syntax_unchecked[0])
    return ib_gate_skip (b, "syntax not checked: %s (imports checked: %zu files, %zu names)", st.syntax_unchecked,
                         st.files_checked, st.names_checked);
  if (st.files_checked + st.names_checked + st.native_checked == 0)
    return ib_gate_skip (b, "[symbols] of %s matched nothing: no overlay Python file under %s, no python or "
                            "native requirement",
                         ib_gate_definition_name (b), d->python_path ? d->python_path : "(no python-path)");
  return 0;
}
