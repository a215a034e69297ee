#include "toml.h"

#include <stdlib.h>
#include <string.h>

int
ib_toml_parse (const char *text, size_t len, const char *what, struct ib_toml **out, ib_error_t *err)
{
  char *msg = NULL;
  int line = 0, col = 0;
  *out = NULL;
  if (ib_tomlpp_parse (text, len, what, out, &msg, &line, &col) < 0)
    {
      ib_error (err, IB_EDEFINITION, "%s:%d:%d: %s", what, line, col, msg);
      free (msg);
      return -1;
    }
  return 0;
}

static void
clear (struct ib_toml *t)
{
  for (size_t i = 0; i < t->n; i++)
    clear (&t->items[i]);
  free (t->items);
  free (t->key);
  free (t->str);
}

void
ib_toml_free (struct ib_toml *t)
{
  if (t == NULL)
    return;
  clear (t);
  free (t);
}

const struct ib_toml *
ib_toml_get (const struct ib_toml *t, const char *key)
{
  if (t == NULL || t->type != IB_TOML_TABLE)
    return NULL;
  for (size_t i = 0; i < t->n; i++)
    if (strcmp (t->items[i].key, key) == 0)
      return &t->items[i];
  return NULL;
}

const char *
ib_toml_type_name (enum ib_toml_type t)
{
  static const char *const names[] = { "table", "array", "string", "integer", "float", "boolean", "date-time" };
  return (unsigned) t < sizeof (names) / sizeof (names[0]) ? names[t] : "value";
}
