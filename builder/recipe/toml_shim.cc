// The only C++ of imgbuild: toml++ (header-only, exceptions off) turned
// into the C tree of toml.h.  Nothing of toml++ leaks out of this file.
#define TOML_EXCEPTIONS 0
// toml++ 3.3.0 asserts on some malformed input (`[[^x]]` reaches parse_key
// with a non-key character: found by tests/fuzz/fuzz_recipe.c): with
// assert() a bad recipe would abort imgbuild, and with NDEBUG the assertion
// becomes an optimizer assumption (undefined behaviour).  The checks are
// off instead: the parser goes on and reports the input as malformed (the
// fuzzer, under ASan and UBSan, keeps that path honest).
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void> (0)
#define TOML_ENABLE_FORMATTERS 1
#include <toml++/toml.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

extern "C" {
#include "builder/recipe/toml_tree.h"
}

namespace
{

char *
dup (std::string_view s)
{
  char *p = static_cast<char *> (std::malloc (s.size () + 1));
  if (p == nullptr)
    std::abort ();
  std::memcpy (p, s.data (), s.size ());
  p[s.size ()] = '\0';
  return p;
}

void convert (const toml::node &n, ib_toml *out);

void
convert_children (const toml::table &t, ib_toml *out)
{
  out->type = IB_TOML_TABLE;
  out->n = t.size ();
  out->items = static_cast<ib_toml *> (std::calloc (out->n ? out->n : 1, sizeof (ib_toml)));
  if (out->items == nullptr)
    std::abort ();
  size_t i = 0;
  for (auto &&[k, v] : t)
    {
      convert (v, &out->items[i]);
      out->items[i].key = dup (k.str ());
      i++;
    }
}

void
convert (const toml::node &n, ib_toml *out)
{
  std::memset (out, 0, sizeof (*out));
  out->line = static_cast<int> (n.source ().begin.line);
  out->column = static_cast<int> (n.source ().begin.column);
  if (auto t = n.as_table ())
    convert_children (*t, out);
  else if (auto a = n.as_array ())
    {
      out->type = IB_TOML_ARRAY;
      out->n = a->size ();
      out->items = static_cast<ib_toml *> (std::calloc (out->n ? out->n : 1, sizeof (ib_toml)));
      if (out->items == nullptr)
        std::abort ();
      for (size_t i = 0; i < out->n; i++)
        convert ((*a)[i], &out->items[i]);
    }
  else if (auto s = n.as_string ())
    {
      out->type = IB_TOML_STRING;
      out->str = dup (s->get ());
      out->len = s->get ().size ();
    }
  else if (auto i = n.as_integer ())
    out->type = IB_TOML_INTEGER, out->i = i->get ();
  else if (auto f = n.as_floating_point ())
    out->type = IB_TOML_FLOAT, out->f = f->get ();
  else if (auto b = n.as_boolean ())
    out->type = IB_TOML_BOOL, out->b = b->get ();
  else
    {
      // Dates and times: their TOML text, which is all a recipe check needs.
      std::ostringstream os;
      n.visit ([&os] (auto &&v) { os << v; });
      out->type = IB_TOML_DATETIME;
      std::string text = os.str ();
      out->str = dup (text);
      out->len = text.size ();
    }
}

} // namespace

extern "C" int
ib_tomlpp_parse (const char *text, size_t len, const char *what, ib_toml **out, char **errmsg, int *line, int *col)
{
  *out = nullptr;
  toml::parse_result res = toml::parse (std::string_view (text, len), std::string_view (what));
  if (!res)
    {
      const toml::parse_error &e = res.error ();
      *errmsg = dup (e.description ());
      *line = static_cast<int> (e.source ().begin.line);
      *col = static_cast<int> (e.source ().begin.column);
      return -1;
    }
  ib_toml *root = static_cast<ib_toml *> (std::calloc (1, sizeof (ib_toml)));
  if (root == nullptr)
    std::abort ();
  convert_children (res.table (), root);
  root->line = 1;
  root->column = 1;
  *out = root;
  return 0;
}
