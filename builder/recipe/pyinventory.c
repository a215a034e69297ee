#include "builder/recipe/pyinventory.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "symbol-check/pysyms.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* A module-level `X = Literal[...]`, or a class (an Enum's values as its
 * choices). */
struct named_type
{
  char *name, *file;
  bool is_class;
  enum ib_choices choices;
  size_t n;
  char **values;
};

struct ib_py_inventory
{
  size_t files;
  size_t n_flags, n_env, n_dynamic, n_types, n_arg_files;
  struct ib_cli_flag *flags;
  struct ib_env_read *env, *dynamic;
  struct named_type *types;
  char **arg_files; /* files that define an argument dataclass */
};

typedef struct ib_py_token tok_t;

static bool
is (const tok_t *t, const char *s)
{
  size_t n = strlen (s);
  return t->len == n && memcmp (t->s, s, n) == 0 && t->kind != IB_PY_STRING;
}

static char *
tok_str (const tok_t *t)
{
  return strndup (t->s, t->len);
}

char *
ib_py_string_literal (const char *s, size_t len)
{
  size_t p = 0;
  bool raw = false;
  while (p < len && s[p] != '\'' && s[p] != '"')
    {
      char c = (char) tolower ((unsigned char) s[p++]);
      if (c == 'r')
        raw = true;
      else if (c != 'u')
        return NULL;
    }
  if (p >= len)
    return NULL;
  size_t q = len - p >= 6 && s[p + 1] == s[p] && s[p + 2] == s[p] ? 3 : 1;
  if (len < p + 2 * q)
    return NULL;
  const char *a = s + p + q;
  size_t n = len - p - 2 * q;
  if (!raw && memchr (a, '\\', n))
    return NULL;
  return strndup (a, n);
}

/* The index after the bracket that closes the one at I, or N. */
static size_t
close_of (const tok_t *t, size_t i, size_t n)
{
  int depth = 0;
  for (; i < n; i++)
    {
      if (t[i].kind != IB_PY_OP)
        continue;
      char c = t[i].s[0];
      if (c == '(' || c == '[' || c == '{')
        depth++;
      else if ((c == ')' || c == ']' || c == '}') && --depth == 0)
        return i + 1;
    }
  return n;
}

static void
push_str (char ***v, size_t *n, char *s)
{
  *v = ib_xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = s;
}

static void
free_strs (char **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free (v[i]);
  free (v);
}

/* The literal values of [A, B) (a list display's inside: strings, numbers,
 * negative numbers, True/False/None), comma-separated.  False when an
 * element is anything else. */
static bool
literal_values (const tok_t *t, size_t a, size_t b, char ***out, size_t *n)
{
  *out = NULL;
  *n = 0;
  for (size_t i = a; i < b;)
    {
      char *v = NULL;
      if (t[i].kind == IB_PY_STRING)
        v = ib_py_string_literal (t[i].s, t[i].len);
      else if (t[i].kind == IB_PY_NUMBER || is (&t[i], "True") || is (&t[i], "False") || is (&t[i], "None"))
        v = tok_str (&t[i]);
      else if (is (&t[i], "-") && i + 1 < b && t[i + 1].kind == IB_PY_NUMBER)
        {
          i++;
          v = ib_xasprintf ("-%.*s", (int) t[i].len, t[i].s);
        }
      if (v == NULL)
        {
          free_strs (*out, *n);
          *out = NULL;
          *n = 0;
          return false;
        }
      push_str (out, n, v);
      i++;
      if (i < b && !is (&t[i], ","))
        {
          free_strs (*out, *n);
          *out = NULL;
          *n = 0;
          return false;
        }
      i++;
    }
  return true;
}

static struct ib_cli_flag *
add_flag (struct ib_py_inventory *inv, char *flag, const char *file, int line)
{
  inv->flags = ib_xrealloc (inv->flags, (inv->n_flags + 1) * sizeof (*inv->flags));
  struct ib_cli_flag *f = &inv->flags[inv->n_flags++];
  *f = (struct ib_cli_flag){ .flag = flag, .file = ib_xstrdup (file), .line = line };
  return f;
}

static void
add_read (struct ib_env_read **v, size_t *n, char *name, const char *file, int line)
{
  *v = ib_xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = (struct ib_env_read){ name, ib_xstrdup (file), line };
}

/* add_argument( at I (the name): literal flag names, choices=. */
static void
scan_add_argument (struct ib_py_inventory *inv, const char *file, const tok_t *t, size_t i, size_t n)
{
  size_t open = i + 1, end = close_of (t, open, n) - 1;
  size_t first = inv->n_flags;
  enum ib_choices choices = IB_CHOICES_ANY;
  char **values = NULL;
  size_t n_values = 0;
  cleanup_free char *unsettled = NULL;
  bool names = true;
  for (size_t k = open + 1; k < end;)
    {
      size_t next = k;
      /* One argument: up to the next comma at this depth. */
      while (next < end && !is (&t[next], ","))
        next = t[next].kind == IB_PY_OP && strchr ("([{", t[next].s[0]) ? close_of (t, next, end) : next + 1;
      char *lit = next == k + 1 && t[k].kind == IB_PY_STRING ? ib_py_string_literal (t[k].s, t[k].len) : NULL;
      if (names && lit && lit[0] == '-')
        add_flag (inv, lit, file, t[k].line), lit = NULL;
      else if (names && !(k + 1 < end && is (&t[k + 1], "=")))
        {
          if (k == open + 1)
            add_read (&inv->dynamic, &inv->n_dynamic, tok_str (&t[k]), file, t[k].line);
          names = false;
        }
      else
        names = false;
      free (lit);
      if (k + 1 < end && is (&t[k], "choices") && is (&t[k + 1], "="))
        {
          size_t v = k + 2;
          /* A repeated choices= (argparse refuses it; this reading keeps
           * the last one): the earlier list goes. */
          free_strs (values, n_values);
          values = NULL;
          n_values = 0;
          if (v < next && (is (&t[v], "[") || is (&t[v], "(")) && close_of (t, v, next) == next
              && literal_values (t, v + 1, next - 1, &values, &n_values))
            choices = IB_CHOICES_LIST;
          else
            {
              choices = IB_CHOICES_UNSETTLED;
              free (unsettled);
              unsettled = ib_xasprintf ("choices=%.*s", (int) (t[next - 1].s + t[next - 1].len - t[v].s), t[v].s);
            }
        }
      else if (is (&t[k], "**") && choices == IB_CHOICES_ANY)
        {
          choices = IB_CHOICES_UNSETTLED;
          free (unsettled);
          unsettled = ib_xasprintf ("keyword arguments from %.*s", (int) (t[next - 1].s + t[next - 1].len - t[k + 1].s),
                                    t[k + 1].s);
        }
      k = next + 1;
    }
  for (size_t f = first; f < inv->n_flags; f++)
    {
      inv->flags[f].choices = choices;
      if (choices == IB_CHOICES_LIST)
        for (size_t c = 0; c < n_values; c++)
          push_str (&inv->flags[f].choice, &inv->flags[f].n_choices, ib_xstrdup (values[c]));
      if (unsettled)
        inv->flags[f].unsettled = ib_xstrdup (unsettled);
    }
  free_strs (values, n_values);
}

static const char *const plain_types[] = { "int",   "str",      "float", "bool",     "bytes",    "None",     "Optional",
                                           "Union", "list",     "dict",  "tuple",    "set",      "Any",      "Callable",
                                           "type",  "List",     "Dict",  "Tuple",    "Set",      "typing",   "Sequence",
                                           "Path",  "Mapping",  "object", "frozenset", "Iterable", "TypeAlias", NULL };

static bool
plain_type (const tok_t *t)
{
  for (int i = 0; plain_types[i]; i++)
    if (is (t, plain_types[i]))
      return true;
  return false;
}

/* A field's annotation [A, B): its choices, or the type name to resolve. */
static void
field_type (struct ib_cli_flag *f, const tok_t *t, size_t a, size_t b)
{
  for (size_t i = a; i < b; i++)
    {
      if (is (&t[i], "Literal") && i + 1 < b && is (&t[i + 1], "["))
        {
          size_t e = close_of (t, i + 1, b);
          char **v;
          size_t n;
          if (literal_values (t, i + 2, e - 1, &v, &n))
            {
              f->choices = IB_CHOICES_LIST;
              for (size_t k = 0; k < n; k++)
                push_str (&f->choice, &f->n_choices, v[k]);
              free (v);
            }
          else
            {
              f->choices = IB_CHOICES_UNSETTLED;
              free (f->unsettled);
              f->unsettled = ib_xasprintf ("Literal[%.*s]", (int) (t[e - 2].s + t[e - 2].len - t[i + 2].s), t[i + 2].s);
            }
          i = e - 1;
        }
      else if (t[i].kind == IB_PY_NAME && !plain_type (&t[i]) && !(i > a && is (&t[i - 1], ".")) && !f->type_name)
        f->type_name = tok_str (&t[i]);
    }
}

static void
kebab (char *s)
{
  for (; *s; s++)
    if (*s == '_')
      *s = '-';
}

/* The body of an argument dataclass: its fields, from the INDENT at I. */
static size_t
scan_args_class (struct ib_py_inventory *inv, const char *file, const tok_t *t, size_t i, size_t n)
{
  int depth = 0;
  bool line_start = true;
  for (; i < n; i++)
    {
      if (t[i].kind == IB_PY_INDENT)
        depth++;
      else if (t[i].kind == IB_PY_DEDENT && --depth == 0)
        return i;
      else if (t[i].kind == IB_PY_NEWLINE)
        line_start = true;
      else if (line_start && depth == 1 && t[i].kind == IB_PY_NAME && i + 1 < n && is (&t[i + 1], ":")
               && t[i].s[0] != '_')
        {
          size_t e = i + 2;
          while (e < n && t[e].kind != IB_PY_NEWLINE && !is (&t[e], "="))
            e = t[e].kind == IB_PY_OP && strchr ("([{", t[e].s[0]) ? close_of (t, e, n) : e + 1;
          if (e > i + 2 && is (&t[i + 2], "ClassVar"))
            continue;
          char *name = ib_xasprintf ("--%.*s", (int) t[i].len, t[i].s);
          kebab (name + 2);
          struct ib_cli_flag *f = add_flag (inv, name, file, t[i].line);
          field_type (f, t, i + 2, e);
          if (e == i + 3 && is (&t[i + 2], "bool"))
            {
              char *no = ib_xasprintf ("--no-%s", name + 2);
              add_flag (inv, no, file, t[i].line)->negated = true;
            }
          line_start = false;
        }
      else
        line_start = false;
    }
  return i;
}

static void
add_type (struct ib_py_inventory *inv, const tok_t *name, const char *file, bool is_class, enum ib_choices c,
          char **values, size_t n)
{
  inv->types = ib_xrealloc (inv->types, (inv->n_types + 1) * sizeof (*inv->types));
  inv->types[inv->n_types++] = (struct named_type){ tok_str (name), ib_xstrdup (file), is_class, c, n, values };
}

/* `class X(...)` at I: an argument dataclass's fields, an Enum's values. */
static void
scan_class (struct ib_py_inventory *inv, const char *file, const tok_t *t, size_t i, size_t n, bool dataclass)
{
  const tok_t *name = &t[i + 1];
  bool is_enum = false;
  size_t j = i + 2;
  if (j < n && is (&t[j], "("))
    {
      size_t e = close_of (t, j, n);
      for (size_t k = j; k < e; k++)
        if (t[k].kind == IB_PY_NAME && t[k].len >= 4 && memcmp (t[k].s + t[k].len - 4, "Enum", 4) == 0)
          is_enum = true;
      j = e;
    }
  while (j < n && t[j].kind != IB_PY_INDENT && t[j].kind != IB_PY_END)
    j++;
  size_t len = name->len;
  bool args = dataclass && ((len >= 10 && memcmp (name->s + len - 10, "EngineArgs", 10) == 0)
                            || (len >= 12 && memcmp (name->s + len - 12, "FrontendArgs", 12) == 0));
  if (args)
    {
      push_str (&inv->arg_files, &inv->n_arg_files, ib_xstrdup (file));
      scan_args_class (inv, file, t, j, n);
      return;
    }
  char **values = NULL;
  size_t n_values = 0;
  enum ib_choices c = IB_CHOICES_ANY;
  if (is_enum)
    {
      /* Members: `NAME = LITERAL` lines of the body's first level. */
      c = IB_CHOICES_LIST;
      int depth = 0;
      for (size_t k = j; k < n; k++)
        {
          if (t[k].kind == IB_PY_INDENT)
            depth++;
          else if (t[k].kind == IB_PY_DEDENT && --depth == 0)
            break;
          else if (depth == 1 && (t[k - 1].kind == IB_PY_NEWLINE || t[k - 1].kind == IB_PY_INDENT) && t[k].kind == IB_PY_NAME && k + 3 < n && is (&t[k + 1], "=")
                   && t[k + 3].kind == IB_PY_NEWLINE)
            {
              char *v = t[k + 2].kind == IB_PY_STRING ? ib_py_string_literal (t[k + 2].s, t[k + 2].len) : NULL;
              if (v == NULL)
                c = IB_CHOICES_UNSETTLED;
              else
                push_str (&values, &n_values, v);
            }
        }
    }
  add_type (inv, name, file, true, c, values, n_values);
}

static bool
reads_env_at (const tok_t *t, size_t i, size_t n, size_t *arg)
{
  if (is (&t[i], "getenv") && i + 2 < n && is (&t[i + 1], "("))
    return *arg = i + 2, true;
  if (is (&t[i], "environ") && i + 4 < n && is (&t[i + 1], ".")
      && (is (&t[i + 2], "get") || is (&t[i + 2], "setdefault") || is (&t[i + 2], "pop")) && is (&t[i + 3], "("))
    return *arg = i + 4, true;
  if (is (&t[i], "environ") && i + 2 < n && is (&t[i + 1], "["))
    return *arg = i + 2, true;
  return false;
}

/* `def F(P, ...)` at I whose body reads the environment variable named by
 * P: F is a reader; returns the body's end. */
static bool
env_helper (const tok_t *t, size_t i, size_t n)
{
  if (!(i + 3 < n && t[i + 1].kind == IB_PY_NAME && is (&t[i + 2], "(") && t[i + 3].kind == IB_PY_NAME))
    return false;
  const tok_t *p = &t[i + 3];
  size_t j = i;
  while (j < n && t[j].kind != IB_PY_INDENT && t[j].kind != IB_PY_END)
    j++;
  int depth = 0;
  for (; j < n; j++)
    {
      size_t arg;
      if (t[j].kind == IB_PY_INDENT)
        depth++;
      else if (t[j].kind == IB_PY_DEDENT && --depth == 0)
        return false;
      else if (reads_env_at (t, j, n, &arg) && t[arg].len == p->len && memcmp (t[arg].s, p->s, p->len) == 0
               && t[arg].kind == IB_PY_NAME)
        return true;
    }
  return false;
}

static const char *
base_name (const char *path)
{
  const char *s = strrchr (path, '/');
  return s ? s + 1 : path;
}

static void
scan_env (struct ib_py_inventory *inv, const char *file, const tok_t *t, size_t n)
{
  /* The file's reader functions first, then every read. */
  char **helpers = NULL;
  size_t n_helpers = 0;
  for (size_t i = 0; i < n; i++)
    if (is (&t[i], "def") && env_helper (t, i, n))
      push_str (&helpers, &n_helpers, tok_str (&t[i + 1]));
  bool registry = strcmp (base_name (file), "envs.py") == 0;
  int braces = 0;
  for (size_t i = 0; i < n; i++)
    {
      size_t arg = 0;
      const tok_t *lit = NULL;
      if (is (&t[i], "{"))
        braces++;
      else if (is (&t[i], "}") && braces > 0)
        braces--;
      if (reads_env_at (t, i, n, &arg))
        lit = &t[arg];
      else if (t[i].kind == IB_PY_STRING && i + 2 < n && is (&t[i + 1], "in")
               && (is (&t[i + 2], "environ")
                   || (i + 4 < n && is (&t[i + 2], "os") && is (&t[i + 3], ".") && is (&t[i + 4], "environ"))))
        lit = &t[i];
      else if (registry && braces > 0 && t[i].kind == IB_PY_STRING && i + 1 < n && is (&t[i + 1], ":"))
        lit = &t[i];
      else if (t[i].kind == IB_PY_NAME && i + 2 < n && is (&t[i + 1], "(") && !(i > 0 && is (&t[i - 1], "def")))
        for (size_t h = 0; h < n_helpers; h++)
          if (t[i].len == strlen (helpers[h]) && memcmp (t[i].s, helpers[h], t[i].len) == 0)
            lit = &t[i + 2];
      char *name = lit && lit->kind == IB_PY_STRING ? ib_py_string_literal (lit->s, lit->len) : NULL;
      if (name && *name)
        add_read (&inv->env, &inv->n_env, name, file, lit->line);
      else
        free (name);
    }
  free_strs (helpers, n_helpers);
}

/* Module-level `X = Literal[...]` (or `X: TypeAlias = Literal[...]`). */
static void
scan_alias (struct ib_py_inventory *inv, const char *file, const tok_t *t, size_t i, size_t n)
{
  size_t j = i + 1;
  if (j < n && is (&t[j], ":"))
    j += 2;
  if (!(j + 3 < n && is (&t[j], "=") && is (&t[j + 1], "Literal") && is (&t[j + 2], "[")))
    return;
  size_t e = close_of (t, j + 2, n);
  char **v = NULL;
  size_t nv = 0;
  bool ok = literal_values (t, j + 3, e - 1, &v, &nv);
  add_type (inv, &t[i], file, false, ok ? IB_CHOICES_LIST : IB_CHOICES_UNSETTLED, v, nv);
}

int
ib_py_inventory_add (struct ib_py_inventory *inv, const char *path, const char *src, size_t len, ib_error_t *err)
{
  struct ib_py_token *t = NULL;
  size_t n = 0;
  if (ib_py_tokenize (src, len, &t, &n, err) < 0)
    return ib_error_wrap (err, "%s", path);
  inv->files++;
  int depth = 0;
  bool dataclass = false;
  for (size_t i = 0; i < n; i++)
    {
      bool at_line = i == 0 || t[i - 1].kind == IB_PY_NEWLINE || t[i - 1].kind == IB_PY_INDENT
                     || t[i - 1].kind == IB_PY_DEDENT;
      if (t[i].kind == IB_PY_INDENT)
        depth++;
      else if (t[i].kind == IB_PY_DEDENT)
        depth--;
      else if (is (&t[i], "add_argument") && i + 1 < n && is (&t[i + 1], "("))
        scan_add_argument (inv, path, t, i, n);
      else if (at_line && is (&t[i], "@") && i + 1 < n)
        dataclass = dataclass || is (&t[i + 1], "dataclass")
                    || (i + 3 < n && is (&t[i + 1], "dataclasses") && is (&t[i + 3], "dataclass"));
      else if (at_line && is (&t[i], "class") && i + 1 < n && t[i + 1].kind == IB_PY_NAME)
        {
          scan_class (inv, path, t, i, n, dataclass);
          dataclass = false;
        }
      else if (at_line && depth == 0 && t[i].kind == IB_PY_NAME)
        scan_alias (inv, path, t, i, n);
      if (at_line && !is (&t[i], "@") && !is (&t[i], "class") && t[i].kind != IB_PY_INDENT
          && t[i].kind != IB_PY_DEDENT)
        dataclass = false;
    }
  scan_env (inv, path, t, n);
  free (t);
  return 0;
}

static const struct named_type *
find_type (const struct ib_py_inventory *inv, const char *name, bool *ambiguous)
{
  const struct named_type *found = NULL;
  *ambiguous = false;
  for (size_t i = 0; i < inv->n_types; i++)
    if (strcmp (inv->types[i].name, name) == 0)
      {
        if (found && (found->n != inv->types[i].n || found->choices != inv->types[i].choices))
          *ambiguous = true;
        found = &inv->types[i];
      }
  return found;
}

void
ib_py_inventory_finish (struct ib_py_inventory *inv)
{
  for (size_t i = 0; i < inv->n_flags; i++)
    {
      struct ib_cli_flag *f = &inv->flags[i];
      if (f->type_name == NULL || f->choices != IB_CHOICES_ANY || f->negated)
        continue;
      bool ambiguous;
      const struct named_type *nt = find_type (inv, f->type_name, &ambiguous);
      if (nt == NULL || ambiguous || nt->choices == IB_CHOICES_UNSETTLED)
        {
          f->choices = IB_CHOICES_UNSETTLED;
          f->unsettled = ib_xasprintf (nt == NULL    ? "type %s, not defined in the files read"
                                       : ambiguous ? "type %s, defined differently in several files"
                                                   : "type %s, whose values are not literals",
                                       f->type_name);
          continue;
        }
      f->choices = nt->choices;
      for (size_t k = 0; k < nt->n; k++)
        push_str (&f->choice, &f->n_choices, ib_xstrdup (nt->values[k]));
    }
  /* add_argument calls with computed names in an argument dataclass's
   * file are that dataclass's generator, whose fields were read. */
  size_t k = 0;
  for (size_t i = 0; i < inv->n_dynamic; i++)
    {
      bool generator = false;
      for (size_t a = 0; a < inv->n_arg_files; a++)
        generator = generator || strcmp (inv->arg_files[a], inv->dynamic[i].file) == 0;
      if (generator)
        free (inv->dynamic[i].name), free (inv->dynamic[i].file);
      else
        inv->dynamic[k++] = inv->dynamic[i];
    }
  inv->n_dynamic = k;
}

struct ib_py_inventory *
ib_py_inventory_new (void)
{
  return ib_xcalloc (1, sizeof (struct ib_py_inventory));
}

const struct ib_cli_flag *
ib_py_inventory_flag (const struct ib_py_inventory *inv, const char *flag)
{
  /* The last declaration wins, as argparse's conflict handler "resolve"
   * would have it; a literal declaration beats a dataclass field. */
  const struct ib_cli_flag *found = NULL;
  for (size_t i = 0; i < inv->n_flags; i++)
    if (strcmp (inv->flags[i].flag, flag) == 0)
      found = &inv->flags[i];
  return found;
}

const struct ib_env_read *
ib_py_inventory_env (const struct ib_py_inventory *inv, const char *name)
{
  for (size_t i = 0; i < inv->n_env; i++)
    if (strcmp (inv->env[i].name, name) == 0)
      return &inv->env[i];
  return NULL;
}

const struct ib_env_read *
ib_py_inventory_dynamic (const struct ib_py_inventory *inv, size_t *n)
{
  *n = inv->n_dynamic;
  return inv->n_dynamic ? &inv->dynamic[0] : NULL;
}

size_t
ib_py_inventory_files (const struct ib_py_inventory *inv)
{
  return inv->files;
}

size_t
ib_py_inventory_n_flags (const struct ib_py_inventory *inv)
{
  return inv->n_flags;
}

size_t
ib_py_inventory_n_env (const struct ib_py_inventory *inv)
{
  return inv->n_env;
}

void
ib_py_inventory_free (struct ib_py_inventory *inv)
{
  if (inv == NULL)
    return;
  for (size_t i = 0; i < inv->n_flags; i++)
    {
      struct ib_cli_flag *f = &inv->flags[i];
      free (f->flag), free (f->file), free (f->unsettled), free (f->type_name);
      free_strs (f->choice, f->n_choices);
    }
  for (size_t i = 0; i < inv->n_env; i++)
    free (inv->env[i].name), free (inv->env[i].file);
  for (size_t i = 0; i < inv->n_dynamic; i++)
    free (inv->dynamic[i].name), free (inv->dynamic[i].file);
  for (size_t i = 0; i < inv->n_types; i++)
    {
      free (inv->types[i].name), free (inv->types[i].file);
      free_strs (inv->types[i].values, inv->types[i].n);
    }
  free_strs (inv->arg_files, inv->n_arg_files);
  free (inv->flags);
  free (inv->env);
  free (inv->dynamic);
  free (inv->types);
  free (inv);
}
