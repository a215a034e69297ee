/* Between the files of the recipe checks (rcheck.c, rcheck_image.c). */
#ifndef IB_RCHECK_PRIVATE_H
#define IB_RCHECK_PRIVATE_H

#include "builder/recipe/rcheck.h"

void ib_rcheck_add (struct ib_rcheck *c, int line, enum ib_rstatus st, const char *check, const char *subject,
                    const char *fmt, ...) __attribute__ ((format (printf, 6, 7)));
void ib_rcheck_flags (struct ib_rcheck *c, const struct ib_recipe *r, const struct ib_py_inventory *inv);
void ib_rcheck_shape (struct ib_rcheck *c, const struct ib_recipe *r);

#endif
