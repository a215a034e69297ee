/* The recipe reader (builder/recipe/recipe.c over toml++ through builder/recipe/toml_shim.cc):
 * any bytes as a recipe.  An error names the file and a line; a recipe
 * read has the shape the header promises (flags start with "--", lines
 * are positive, the DCP size is a positive count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/recipe/recipe.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct ib_recipe *r = NULL;
  ib_error_t err = NULL;
  if (ib_recipe_parse ((const char *) data, size, "r.toml", &r, &err) < 0)
    {
      if (err == NULL || err->msg == NULL || strncmp (err->msg, "r.toml:", 7) != 0)
        fuzz_fail ("an error without the recipe's name and line: %s", err && err->msg ? err->msg : "(none)");
      ib_error_release (&err);
      return 0;
    }
  if (r->dcp < 1)
    fuzz_fail ("dcp %ld", r->dcp);
  for (size_t i = 0; i < r->n_flags; i++)
    if (strncmp (r->flags[i].name, "--", 2) != 0 || r->flags[i].line < 1)
      fuzz_fail ("flag %zu: `%s` at line %d", i, r->flags[i].name, r->flags[i].line);
  for (size_t i = 0; i < r->n_env; i++)
    if (r->env[i].line < 1 || r->env[i].value == NULL)
      fuzz_fail ("env %s at line %d", r->env[i].name, r->env[i].line);
  for (size_t i = 0; i < r->n_mounts; i++)
    if (r->mounts[i].container == NULL)
      fuzz_fail ("mount %zu without a container path", i);
  ib_recipe_free (r);
  return 0;
}
