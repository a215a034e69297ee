/* TOML 1.0 documents as a plain C tree, parsed by toml++ (Debian's
 * libtomlplusplus-dev, a complete TOML 1.0 parser tested against the
 * toml-test suite) through a small C++ shim (toml_shim.cc): the grammar is
 * not ours to get wrong, and every value keeps the line and column it was
 * written at, so that a check can name the recipe line it judges. */
#ifndef IB_TOML_H
#define IB_TOML_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#include "builder/recipe/toml_tree.h"

/* Parse TEXT (LEN bytes; WHAT names it in messages).  A syntax error is an
 * IB_EDEFINITION error "WHAT:LINE:COL: why". */
int ib_toml_parse (const char *text, size_t len, const char *what, struct ib_toml **out, ib_error_t *err);
void ib_toml_free (struct ib_toml *t);
/* KEY of table T, or NULL (also when T is not a table). */
const struct ib_toml *ib_toml_get (const struct ib_toml *t, const char *key);
const char *ib_toml_type_name (enum ib_toml_type t);

#endif
