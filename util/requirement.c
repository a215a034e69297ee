#include "util/requirement.h"

#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

void
ib_vproblemf (ib_problem_fn fn, void *data, bool is_error, const char *fmt, va_list ap)
{
  char *msg = ib_xvasprintf (fmt, ap);
  fn (data, is_error, msg);
  free (msg);
}

void
ib_problemf (ib_problem_fn fn, void *data, bool is_error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  ib_vproblemf (fn, data, is_error, fmt, ap);
  va_end (ap);
}

void
ib_requirement_clear (struct ib_requirement *r)
{
  free (r->path);
  free (r->origin);
  for (size_t i = 0; i < r->n_names; i++)
    free (r->names[i]);
  free (r->names);
  memset (r, 0, sizeof (*r));
}
