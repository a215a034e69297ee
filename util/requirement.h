/* What a definition requires of the files of an image: a path or glob and
 * the names (symbols, kernels) the files there must provide.  Shared by the
 * symbol and kernel gates, with the callback through which a gate reports
 * each problem it finds. */
#ifndef IB_REQUIREMENT_H
#define IB_REQUIREMENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct ib_requirement
{
  char *path;   /* an image path, or a glob */
  size_t n_names;
  char **names;
  char *origin; /* "image.conf:31", for messages */
};

void ib_requirement_clear (struct ib_requirement *r);

/* One problem, one line; IS_ERROR false for a warning. */
typedef void (*ib_problem_fn) (void *data, bool is_error, const char *msg);
/* Format one problem and hand it to FN: what every gate does with what it
 * finds. */
void ib_problemf (ib_problem_fn fn, void *data, bool is_error, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
void ib_vproblemf (ib_problem_fn fn, void *data, bool is_error, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 4, 0)));

#endif
