/* The static reading of an image's Python for `vllm serve` flags and
 * environment reads (builder/recipe/pyinventory.c): any bytes as a module, read
 * twice (as an envs.py registry and as a plain file).  What it records has
 * names and positive lines; a flag with listed choices has them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/recipe/pyinventory.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct ib_py_inventory *inv = ib_py_inventory_new ();
  ib_error_t err = NULL;
  static const char *const paths[] = { "/v/envs.py", "/v/engine/arg_utils.py" };
  for (int i = 0; i < 2; i++)
    if (ib_py_inventory_add (inv, paths[i], (const char *) data, size, &err) < 0)
      {
        if (err == NULL || err->msg == NULL)
          fuzz_fail ("failed without a message");
        ib_error_release (&err);
      }
  ib_py_inventory_finish (inv);
  size_t n;
  const struct ib_env_read *d = ib_py_inventory_dynamic (inv, &n);
  if ((d == NULL) != (n == 0))
    fuzz_fail ("dynamic: %zu sites but %s", n, d ? "one returned" : "none returned");
  for (size_t i = 0; i < n; i++)
    if (d[i].line < 1)
      fuzz_fail ("dynamic site at line %d", d[i].line);
  ib_py_inventory_free (inv);
  return 0;
}
