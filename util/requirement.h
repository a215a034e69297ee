/* What a definition requires of the files of an image: a path or glob and
 * the names (symbols, kernels) the files there must provide.  Shared by the
 * symbol and kernel gates, with the callback through which a gate reports
 * each problem it finds. */
#ifndef IB_REQUIREMENT_H
#define IB_REQUIREMENT_H

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

#endif
