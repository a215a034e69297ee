#include "requirement.h"

#include <stdlib.h>
#include <string.h>

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
