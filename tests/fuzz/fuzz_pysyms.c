/* The Python extractor (symbol-check/pysyms.c): the bytes of a module,
 * given as they are (not NUL-terminated, so a read past the end shows),
 * scanned as a module of a package three levels deep (relative imports
 * resolve or stay relative).  What it returns must be what the header
 * promises: sorted unique definitions that ib_py_defines finds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbol-check/pysyms.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct ib_py_module *m = NULL;
  ib_error_t err = NULL;
  if (ib_py_scan ((const char *) data, size, "a.b.c", &m, &err) < 0)
    {
      if (err == NULL || err->msg == NULL)
        fuzz_fail ("ib_py_scan failed without a message");
      ib_error_release (&err);
      return 0;
    }
  for (size_t i = 0; i < m->n_defs; i++)
    {
      if (i && strcmp (m->defs[i - 1], m->defs[i]) >= 0)
        fuzz_fail ("definitions not sorted and unique: `%s`, `%s`", m->defs[i - 1], m->defs[i]);
      if (!ib_py_defines (m, m->defs[i]))
        fuzz_fail ("ib_py_defines misses `%s`", m->defs[i]);
    }
  for (size_t i = 0; i < m->n_imports; i++)
    if (m->imports[i].module == NULL || m->imports[i].line < 1)
      fuzz_fail ("import %zu has no module or line", i);
  cJSON *j = ib_py_module_json ("x.py", m);
  char *s = cJSON_PrintUnformatted (j);
  free (s);
  cJSON_Delete (j);
  ib_py_module_free (m);
  return 0;
}
