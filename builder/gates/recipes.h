/* Recipes against images: `imgverify --recipe RECIPE [REF]`, the recipe
 * gate of `imgbuild` ([recipe] file = … in image.conf), and the smoke
 * test's shape taken from the recipe.  The checks themselves are recipe/'s
 * (rcheck.h); this adds what needs definitions: where a missing flag or
 * variable would come from (the overlay of the recipe's docker_image_dir). */
#ifndef IB_RECIPES_H
#define IB_RECIPES_H

#include <stdbool.h>

#include "layers/image/transport.h"
#include "builder/recipe/rcheck.h"
#include "builder/core/build.h"

struct ib_recipe_verify_options
{
  const char *recipe;
  const char *ref; /* NULL: the recipe's docker_image */
  const char *store;
  struct ib_remote_options remote;
  bool json;
};

/* Exit code: 0 every check passed (unchecked and warnings allowed), 1 a
 * check failed, else the class of what stopped it. */
int ib_recipe_verify_run (const struct ib_recipe_verify_options *o);

/* For each failed flag or env line of C: when the definition named by the
 * recipe's docker_image_dir (or its docker_image's name) has an overlay
 * file that declares it, say so.  Definitions that do not load are left
 * alone (this is a hint). */
void ib_recipe_overlay_hints (struct ib_rcheck *c, const struct ib_recipe *r);

/* The recipe gate: each recipe of the definition's [recipe] lines against
 * the candidate image. */
int ib_gate_recipe (struct ib_build *b, ib_error_t *err);

#endif
