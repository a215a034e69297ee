#include "builder/recipe/toml.h"

#include <stdlib.h>
#include <string.h>

/* toml++ 3.3.0 (Debian 12) reaches __builtin_unreachable() when it asks
 * whether a code point is whitespace and the code point falls in the first
 * or last blocks of its generated table (U+00A1..U+0499, U+2C5E..U+3057,
 * U+FB26..U+FEFE;
 * found by tests/fuzz/fuzz_recipe.c): undefined behaviour on a Latin-1,
 * Greek or Cyrillic letter between tokens.  Inside strings and comments it
 * never asks; a line that starts with '#' is not looked at, and such a code
 * point anywhere else is refused with its line, so that the parser never
 * meets one where it could ask. */
static bool
toml_unsafe (unsigned cp)
{
  /* Its table: blocks of 0x3FA code points from U+00A0; blocks 0, 11 and
   * 63 have no case but for U+00A0, U+3000 and U+FEFF. */
  if (cp < 0xA0 || cp > 0xFEFF || cp == 0xA0 || cp == 0x3000 || cp == 0xFEFF)
    return false;
  unsigned block = (cp - 0xA0) / 0x3FA;
  return block == 0 || block == 11 || block == 63;
}

static int
refuse_unsafe_letters (const char *text, size_t len, const char *what, ib_error_t *err)
{
  int line = 1;
  bool comment = false, start = true;
  for (size_t i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char) text[i];
      if (c == '\n')
        {
          line++, comment = false, start = true;
          continue;
        }
      if (start && (c == ' ' || c == '\t'))
        continue;
      if (start && c == '#')
        comment = true;
      start = false;
      unsigned cp = 0;
      if ((c & 0xE0) == 0xC0 && i + 1 < len)
        cp = (c & 0x1Fu) << 6 | ((unsigned char) text[i + 1] & 0x3Fu);
      else if ((c & 0xF0) == 0xE0 && i + 2 < len)
        cp = (c & 0x0Fu) << 12 | ((unsigned char) text[i + 1] & 0x3Fu) << 6 | ((unsigned char) text[i + 2] & 0x3Fu);
      if (!comment && toml_unsafe (cp))
        return ib_error (err, IB_EDEFINITION,
                         "%s:%d: U+%04X outside a comment line: the TOML parser (toml++ 3.3.0) mishandles it; "
                         "write it as a \\u escape in a string",
                         what, line, cp);
    }
  return 0;
}

int
ib_toml_parse (const char *text, size_t len, const char *what, struct ib_toml **out, ib_error_t *err)
{
  char *msg = NULL;
  int line = 0, col = 0;
  *out = NULL;
  if (refuse_unsafe_letters (text, len, what, err) < 0)
    return -1;
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
