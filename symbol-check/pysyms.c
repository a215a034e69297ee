#include "symbol-check/pysyms.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/pylex.h"

/* ---- statements ---------------------------------------------------------- */

#define MAX_BLOCKS 512

/* A try statement whose except clauses are not all seen yet: the imports of
 * its body are [start, end), END known at the first except. */
struct open_try
{
  bool active;
  size_t start, end;
};

struct parser
{
  const struct tok *t;
  const char *package;
  struct ib_py_module *m;
  size_t defs_cap, imports_cap;
  int guarded;       /* open blocks (or one-line bodies) under `if TYPE_CHECKING:` */
  bool pending_guard; /* the block an INDENT opens now is one */
  struct open_try tries[MAX_BLOCKS + 1]; /* by block depth */
  /* Conditions (pysyms.h, ib_py_import.cond), by block depth: what the
   * block's body runs under, the line of its header, and the tests an elif
   * or else at that depth has to find false (the chain so far). */
  int depth;
  char *body_cond[MAX_BLOCKS + 1];
  int body_line[MAX_BLOCKS + 1];
  char *chain[MAX_BLOCKS + 1];
  char *pending_cond; /* the body the header just read opens */
  int pending_line;
  bool inline_body;   /* the body is on the header's line (`if C: import x`): pending_cond holds it */
};

static char *
tok_str (const struct tok *t)
{
  return strndup (t->s, t->len);
}

static void
add_def (struct parser *ps, const struct tok *t)
{
  struct ib_py_module *m = ps->m;
  if (m->n_defs == ps->defs_cap)
    {
      ps->defs_cap = ps->defs_cap ? ps->defs_cap * 2 : 64;
      m->defs = ib_xrealloc (m->defs, ps->defs_cap * sizeof (*m->defs));
    }
  m->defs[m->n_defs++] = tok_str (t);
}

static const char *const keywords[] = { "False", "None", "True", "and", "as", "assert", "async", "await", "break",
                                        "class", "continue", "def", "del", "elif", "else", "except", "finally",
                                        "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
                                        "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
                                        NULL };

static bool
is_keyword (const struct tok *t)
{
  for (int i = 0; keywords[i]; i++)
    if (ib_tok_is (t, keywords[i]))
      return true;
  return false;
}

/* Bind the names of an assignment target: NAME, *NAME, and tuples/lists of
 * targets, bracketed or not; attributes, subscripts and calls bind none. */
static void
bind_target (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  if (a >= b)
    return;
  if (ib_tok_opens (&t[a]) && !ib_tok_is (&t[a], "{") && ib_tok_matching (t, a, b) == b - 1)
    {
      bind_target (ps, a + 1, b - 1);
      return;
    }
  size_t start = a;
  int depth = 0;
  for (size_t i = a; i <= b; i++)
    {
      if (i < b && ib_tok_opens (&t[i]))
        depth++;
      else if (i < b && ib_tok_closes (&t[i]))
        depth--;
      if (i < b && !(depth == 0 && ib_tok_is (&t[i], ",")))
        continue;
      size_t s = start, e = i;
      start = i + 1;
      if (s < e && ib_tok_is (&t[s], "*"))
        s++;
      if (e - s == 1 && t[s].kind == T_NAME && !is_keyword (&t[s]))
        add_def (ps, &t[s]);
      else if (e - s > 2 && ib_tok_opens (&t[s]) && !ib_tok_is (&t[s], "{") && ib_tok_matching (t, s, e) == e - 1)
        bind_target (ps, s + 1, e - 1);
    }
}

static bool
is_augassign (const struct tok *t)
{
  return t->kind == T_OP && t->len >= 2 && t->s[t->len - 1] == '=' && !ib_tok_is (t, "==") && !ib_tok_is (t, "!=")
         && !ib_tok_is (t, "<=") && !ib_tok_is (t, ">=") && !ib_tok_is (t, ":=");
}

/* An expression statement or an assignment of any kind. */
static void
bind_assignment (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  int depth = 0;
  size_t part = a;
  bool lambda = false;
  for (size_t i = a; i < b; i++)
    {
      if (ib_tok_opens (&t[i]))
        depth++;
      else if (ib_tok_closes (&t[i]))
        depth--;
      if (depth != 0 || lambda)
        continue;
      if (ib_tok_is (&t[i], "lambda"))
        lambda = true;
      else if (ib_tok_is (&t[i], "=") )
        {
          bind_target (ps, part, i);
          part = i + 1;
        }
      else if (part == a && is_augassign (&t[i]))
        {
          bind_target (ps, a, i);
          return;
        }
      else if (part == a && ib_tok_is (&t[i], ":"))
        {
          /* Annotated: binds only with a value. */
          for (size_t k = i + 1; k < b; k++)
            {
              if (ib_tok_opens (&t[k]))
                depth++;
              else if (ib_tok_closes (&t[k]))
                depth--;
              else if (depth == 0 && ib_tok_is (&t[k], "="))
                {
                  bind_target (ps, a, i);
                  break;
                }
            }
          return;
        }
    }
}

/* Assignment expressions: `NAME :=` anywhere in [A, B) binds NAME where the
 * expression runs, comprehensions included (PEP 572: their targets bind in
 * the enclosing scope), except in a lambda's body (its own scope; its
 * defaults run here). */
static void
bind_walrus (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  int depth = 0, body_depth = -1; /* the depth of the lambda body being skipped */
  int param_depth = -1;           /* the depth of the lambda whose parameters run to ':' */
  for (size_t i = a; i < b; i++)
    {
      if (ib_tok_opens (&t[i]))
        {
          depth++;
          continue;
        }
      if (ib_tok_closes (&t[i]) || (ib_tok_is (&t[i], ",") && depth == body_depth))
        {
          if (ib_tok_closes (&t[i]))
            depth--;
          if (body_depth >= 0 && depth < body_depth + (ib_tok_is (&t[i], ",") ? 1 : 0))
            body_depth = -1;
          continue;
        }
      if (body_depth >= 0)
        continue;
      if (ib_tok_is (&t[i], "lambda") && param_depth < 0)
        param_depth = depth;
      else if (param_depth == depth && ib_tok_is (&t[i], ":"))
        {
          body_depth = depth;
          param_depth = -1;
        }
      else if (ib_tok_is (&t[i], ":=") && i > a && t[i - 1].kind == T_NAME)
        add_def (ps, &t[i - 1]);
    }
}

/* A case pattern binds its capture names: NAME, *NAME, **NAME, `as NAME`;
 * not `_`, dotted value patterns (a.B), class names (C(...)) or keyword
 * names of class patterns (C(x=...)). */
static void
bind_pattern (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  for (size_t i = a; i < b; i++)
    if (t[i].kind == T_NAME && !is_keyword (&t[i]) && !ib_tok_is (&t[i], "_") && !(i > a && ib_tok_is (&t[i - 1], "."))
        && !(i + 1 < b && (ib_tok_is (&t[i + 1], ".") || ib_tok_is (&t[i + 1], "(") || ib_tok_is (&t[i + 1], "="))))
      add_def (ps, &t[i]);
}

/* `case PATTERN [if GUARD]:` */
static void
bind_case (struct parser *ps, size_t a, size_t colon)
{
  const struct tok *t = ps->t;
  int depth = 0;
  size_t guard = colon;
  for (size_t i = a; i < colon && guard == colon; i++)
    {
      if (ib_tok_opens (&t[i]))
        depth++;
      else if (ib_tok_closes (&t[i]))
        depth--;
      else if (depth == 0 && ib_tok_is (&t[i], "if"))
        guard = i;
    }
  bind_pattern (ps, a, guard);
  bind_walrus (ps, guard, colon);
}

static char *
dotted_name (const struct tok *t, size_t *i, size_t b)
{
  char *out = ib_xstrdup ("");
  while (*i < b && t[*i].kind == T_NAME && !ib_tok_is (&t[*i], "as") && !ib_tok_is (&t[*i], "import"))
    {
      char *next = ib_xasprintf ("%s%s%.*s", out, *out ? "." : "", (int) t[*i].len, t[*i].s);
      free (out);
      out = next;
      ++*i;
      if (*i < b && ib_tok_is (&t[*i], "."))
        ++*i;
      else
        break;
    }
  return out;
}

/* The conditions of the blocks open now, joined (NULL for none). */
static char *
import_cond (const struct parser *ps, int *line)
{
  char *out = NULL;
  *line = 0;
  for (int d = 1; d <= ps->depth + 1; d++)
    {
      const char *c = d <= ps->depth ? ps->body_cond[d] : ps->inline_body ? ps->pending_cond : NULL;
      if (c == NULL)
        continue;
      char *next = out ? ib_xasprintf ("%s and %s", out, c) : ib_xstrdup (c);
      free (out);
      out = next;
      *line = d <= ps->depth ? ps->body_line[d] : ps->pending_line;
    }
  return out;
}

static struct ib_py_import *
add_import (struct parser *ps, int line)
{
  struct ib_py_module *m = ps->m;
  if (m->n_imports == ps->imports_cap)
    {
      ps->imports_cap = ps->imports_cap ? ps->imports_cap * 2 : 32;
      m->imports = ib_xrealloc (m->imports, ps->imports_cap * sizeof (*m->imports));
    }
  struct ib_py_import *im = &m->imports[m->n_imports++];
  memset (im, 0, sizeof (*im));
  im->line = line;
  im->guarded = ps->guarded > 0;
  im->cond = import_cond (ps, &im->cond_line);
  return im;
}

/* import a.b [as c], d ... */
static void
parse_import (struct parser *ps, size_t a, size_t b, bool bind)
{
  const struct tok *t = ps->t;
  size_t i = a + 1;
  while (i < b)
    {
      struct ib_py_import *im = add_import (ps, t[a].line);
      im->module = dotted_name (t, &i, b);
      if (i + 1 < b && ib_tok_is (&t[i], "as"))
        {
          im->asname = tok_str (&t[i + 1]);
          if (bind)
            add_def (ps, &t[i + 1]);
          i += 2;
        }
      else if (bind && i > a + 1)
        {
          /* `import a.b` binds `a`. */
          size_t first = i;
          while (first > a + 1 && !ib_tok_is (&t[first - 1], ",") && !ib_tok_is (&t[first - 1], "import"))
            first--;
          add_def (ps, &t[first]);
        }
      while (i < b && !ib_tok_is (&t[i], ","))
        i++;
      i++;
    }
}

/* "." * LEVEL + MODULE against PACKAGE, as importlib.util.resolve_name. */
static char *
resolve_relative (const char *package, int level, const char *module)
{
  if (level == 0)
    return ib_xstrdup (module);
  cleanup_free char *base = ib_xstrdup (package ? package : "");
  for (int l = 1; l < level; l++)
    {
      char *dot = strrchr (base, '.');
      if (dot == NULL)
        goto unresolved; /* beyond the top-level package */
      *dot = '\0';
    }
  if (*base == '\0')
    goto unresolved;
  return *module ? ib_xasprintf ("%s.%s", base, module) : ib_xstrdup (base);
unresolved:
  {
    char *dots = ib_xmalloc ((size_t) level + strlen (module) + 1);
    memset (dots, '.', (size_t) level);
    strcpy (dots + level, module);
    return dots;
  }
}

/* from .x import a [as b], (c, d) | * */
static void
parse_from (struct parser *ps, size_t a, size_t b, bool bind)
{
  const struct tok *t = ps->t;
  struct ib_py_import *im = add_import (ps, t[a].line);
  im->is_from = true;
  size_t i = a + 1;
  for (; i < b && (ib_tok_is (&t[i], ".") || ib_tok_is (&t[i], "...")); i++)
    im->level += (int) t[i].len;
  cleanup_free char *mod = dotted_name (t, &i, b);
  im->module = resolve_relative (ps->package, im->level, mod);
  while (i < b && !ib_tok_is (&t[i], "import"))
    i++;
  for (i++; i < b; i++)
    {
      if (ib_tok_is (&t[i], "(") || ib_tok_is (&t[i], ")") || ib_tok_is (&t[i], ","))
        continue;
      im->names = ib_xrealloc (im->names, (im->n_names + 1) * sizeof (*im->names));
      struct ib_py_alias *al = &im->names[im->n_names++];
      al->name = tok_str (&t[i]);
      al->asname = NULL;
      const struct tok *bound = &t[i];
      if (i + 2 < b && ib_tok_is (&t[i + 1], "as"))
        {
          al->asname = tok_str (&t[i + 2]);
          bound = &t[i + 2];
          i += 2;
        }
      if (strcmp (al->name, "*") == 0)
        ps->m->has_star_import |= bind;
      else if (bind)
        add_def (ps, bound);
    }
}

/* `__all__ = [...]` / `__all__ += (...)` of plain string literals: the
 * names the module promises, some of which may be bound at run time. */
static void
collect_all (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  if (!(b > a + 3 && ib_tok_is (&t[a], "__all__") && (ib_tok_is (&t[a + 1], "=") || ib_tok_is (&t[a + 1], "+="))
        && (ib_tok_is (&t[a + 2], "[") || ib_tok_is (&t[a + 2], "("))))
    return;
  struct ib_py_module *m = ps->m;
  for (size_t i = a + 3; i < b && !ib_tok_closes (&t[i]); i++)
    {
      if (t[i].kind != T_STRING || t[i].len < 2 || (t[i].s[0] != '\'' && t[i].s[0] != '"'))
        continue;
      m->all = ib_xrealloc (m->all, (m->n_all + 1) * sizeof (*m->all));
      m->all[m->n_all++] = strndup (t[i].s + 1, t[i].len - 2);
    }
}

static void
small_statement (struct parser *ps, size_t a, size_t b, bool bind)
{
  const struct tok *t = ps->t;
  if (a >= b)
    return;
  if (bind)
    collect_all (ps, a, b);
  if (ib_tok_is (&t[a], "import"))
    parse_import (ps, a, b, bind);
  else if (ib_tok_is (&t[a], "from"))
    parse_from (ps, a, b, bind);
  else if (bind)
    {
      bind_assignment (ps, a, b);
      bind_walrus (ps, a, b);
    }
}

static void
simple_statements (struct parser *ps, size_t a, size_t b, bool bind)
{
  int depth = 0;
  size_t start = a;
  for (size_t i = a; i <= b; i++)
    {
      if (i < b && ib_tok_opens (&ps->t[i]))
        depth++;
      else if (i < b && ib_tok_closes (&ps->t[i]))
        depth--;
      if (i == b || (depth == 0 && ib_tok_is (&ps->t[i], ";")))
        {
          small_statement (ps, start, i, bind);
          start = i + 1;
        }
    }
}

/* The ':' ending a compound statement's header: the first at bracket depth 0
 * that no lambda takes. */
static size_t
header_colon (const struct tok *t, size_t a, size_t b)
{
  int depth = 0, lambdas = 0;
  for (size_t i = a; i < b; i++)
    {
      if (ib_tok_opens (&t[i]))
        depth++;
      else if (ib_tok_closes (&t[i]))
        depth--;
      else if (depth == 0 && ib_tok_is (&t[i], "lambda"))
        lambdas++;
      else if (depth == 0 && ib_tok_is (&t[i], ":"))
        {
          if (lambdas == 0)
            return i;
          lambdas--;
        }
    }
  return b;
}

/* `as NAME` targets of with-items and except clauses. */
static void
bind_as_targets (struct parser *ps, size_t a, size_t b)
{
  const struct tok *t = ps->t;
  for (size_t i = a; i < b; i++)
    {
      if (!ib_tok_is (&t[i], "as"))
        continue;
      int depth = 0;
      size_t e = i + 1;
      for (; e < b; e++)
        {
          if (ib_tok_opens (&t[e]))
            depth++;
          else if (ib_tok_closes (&t[e]) && --depth < 0)
            break;
          else if (depth == 0 && ib_tok_is (&t[e], ","))
            break;
        }
      bind_target (ps, i + 1, e);
      i = e;
    }
}

/* `if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:` (any module name). */
static bool
is_type_checking (const struct tok *t, size_t a, size_t colon)
{
  if (colon == a + 1)
    return ib_tok_is (&t[a], "TYPE_CHECKING");
  return colon == a + 3 && t[a].kind == T_NAME && ib_tok_is (&t[a + 1], ".") && ib_tok_is (&t[a + 2], "TYPE_CHECKING");
}

/* The exception list of an except clause [A, COLON) (after `except`)
 * catches a failed import: bare, or naming ImportError,
 * ModuleNotFoundError, Exception or BaseException. */
static bool
catches_import_error (const struct tok *t, size_t a, size_t colon)
{
  static const char *const catching[] = { "ImportError", "ModuleNotFoundError", "Exception", "BaseException", NULL };
  if (a < colon && ib_tok_is (&t[a], "*"))
    a++;
  if (a == colon)
    return true;
  for (size_t i = a; i < colon && !ib_tok_is (&t[i], "as"); i++)
    for (int k = 0; catching[k]; k++)
      if (ib_tok_is (&t[i], catching[k]))
        return true;
  return false;
}

/* Before the logical line [A, B) at block depth D: the try bookkeeping. */
static void
track_try (struct parser *ps, size_t a, size_t b, int d)
{
  const struct tok *t = ps->t;
  struct open_try *o = &ps->tries[d];
  if (o->active && (ib_tok_is (&t[a], "except") || ib_tok_is (&t[a], "else") || ib_tok_is (&t[a], "finally")))
    {
      if (o->end == (size_t) -1)
        o->end = ps->m->n_imports;
      if (ib_tok_is (&t[a], "except") && catches_import_error (t, a + 1, header_colon (t, a, b)))
        for (size_t i = o->start; i < o->end; i++)
          ps->m->imports[i].guarded = true;
      return;
    }
  o->active = ib_tok_is (&t[a], "try");
  o->start = ps->m->n_imports;
  o->end = (size_t) -1;
}

enum block
{
  BLOCK_DESCEND,
  BLOCK_SKIP,
  BLOCK_MATCH
};

static bool
starts_compound (const struct tok *t, size_t a, size_t b, enum block parent)
{
  static const char *const kws[] = { "if", "elif", "else", "while", "for", "try", "except", "finally", "with",
                                     "def", "class", "async", NULL };
  for (int i = 0; kws[i]; i++)
    if (ib_tok_is (&t[a], kws[i]))
      return true;
  /* Soft keywords: a `match` line ends with its ':'; `case` lives in a match. */
  if (ib_tok_is (&t[a], "match") && b > a + 2 && ib_tok_is (&t[b - 1], ":") && header_colon (t, a, b) == b - 1
      && !ib_tok_is (&t[a + 1], "=") && !ib_tok_is (&t[a + 1], ".") && !ib_tok_is (&t[a + 1], ":"))
    return true;
  return ib_tok_is (&t[a], "case") && parent == BLOCK_MATCH;
}

/* One logical line [A, B); returns the kind of block that an INDENT right
 * after it opens. */
static enum block
logical_line (struct parser *ps, size_t a, size_t b, bool bind, enum block parent)
{
  const struct tok *t = ps->t;
  if (ib_tok_is (&t[a], "@"))
    {
      /* A decorator: nothing follows it but a def or class; its expression
       * runs here. */
      if (bind)
        bind_walrus (ps, a + 1, b);
      return BLOCK_SKIP;
    }
  if (!starts_compound (t, a, b, parent))
    {
      simple_statements (ps, a, b, bind);
      return BLOCK_SKIP;
    }
  size_t k = ib_tok_is (&t[a], "async") ? a + 1 : a;
  size_t colon = header_colon (t, k, b);
  enum block kind = BLOCK_DESCEND;
  if (ib_tok_is (&t[k], "def") || ib_tok_is (&t[k], "class"))
    {
      kind = BLOCK_SKIP;
      if (bind && k + 1 < b)
        {
          add_def (ps, &t[k + 1]);
          if (ib_tok_is (&t[k + 1], "__getattr__") && ib_tok_is (&t[k], "def"))
            ps->m->has_getattr = true;
        }
    }
  else if (ib_tok_is (&t[k], "match"))
    kind = BLOCK_MATCH;
  else if (ib_tok_is (&t[k], "if") && is_type_checking (t, k + 1, colon))
    ps->pending_guard = true;
  else if (bind && ib_tok_is (&t[k], "for"))
    {
      size_t in = k + 1;
      int depth = 0;
      for (; in < colon; in++)
        {
          if (ib_tok_opens (&t[in]))
            depth++;
          else if (ib_tok_closes (&t[in]))
            depth--;
          else if (depth == 0 && ib_tok_is (&t[in], "in"))
            break;
        }
      bind_target (ps, k + 1, in);
    }
  else if (bind && (ib_tok_is (&t[k], "with") || ib_tok_is (&t[k], "except")))
    bind_as_targets (ps, k + 1, colon);
  if (bind && ib_tok_is (&t[k], "case") && parent == BLOCK_MATCH)
    bind_case (ps, k + 1, colon);
  else if (bind)
    bind_walrus (ps, k + 1, colon); /* a header runs here, a def's defaults and a class's bases too */
  if (colon + 1 < b)
    {
      ps->guarded += ps->pending_guard;
      simple_statements (ps, colon + 1, b, bind && kind != BLOCK_SKIP);
      ps->guarded -= ps->pending_guard;
    }
  return kind;
}

/* Tokens [A, B) as their source spells them, comments and line breaks out. */
static char *
tokens_text (const struct tok *t, size_t a, size_t b)
{
  char *out = NULL;
  size_t len = 0;
  for (size_t i = a; i < b; i++)
    {
      if (i > a && t[i].s > t[i - 1].s + t[i - 1].len)
        ib_xappend (&out, &len, " ", 1);
      ib_xappend (&out, &len, t[i].s, t[i].len);
    }
  ib_xappend (&out, &len, "", 1);
  for (char *p = out; *p; p++)
    if (*p == '\n' || *p == '\t' || *p == '\r')
      *p = ' '; /* a multi-line string: the caches keep one line per import */
  return out;
}

static void
set_chain (struct parser *ps, char *chain)
{
  free (ps->chain[ps->depth]);
  ps->chain[ps->depth] = chain;
}

/* Before the logical line [A, B): the conditions its body runs under, if
 * it is an if, elif, else of an if, while or case header, and the chain
 * of its depth (pysyms.h, ib_py_import.cond). */
static void
track_cond (struct parser *ps, size_t a, size_t b, enum block parent)
{
  const struct tok *t = ps->t;
  free (ps->pending_cond);
  ps->pending_cond = NULL;
  ps->inline_body = false;
  size_t k = ib_tok_is (&t[a], "async") ? a + 1 : a;
  bool is_if = ib_tok_is (&t[k], "if"), is_elif = ib_tok_is (&t[k], "elif"), is_else = ib_tok_is (&t[k], "else");
  bool is_case = ib_tok_is (&t[k], "case") && parent == BLOCK_MATCH;
  if (!(is_if || is_elif || is_else || is_case || ib_tok_is (&t[k], "while")))
    {
      set_chain (ps, NULL); /* a try's, a for's or a while's else runs unless it breaks */
      return;
    }
  size_t colon = header_colon (t, k, b);
  cleanup_free char *test = is_case ? tokens_text (t, k, colon) : tokens_text (t, k + 1, colon);
  const char *chain = ps->chain[ps->depth];
  if (is_else)
    ps->pending_cond = chain ? ib_xstrdup (chain) : NULL;
  else if (is_elif)
    ps->pending_cond = chain ? ib_xasprintf ("%s and (%s)", chain, test) : ib_xasprintf ("(%s)", test);
  else if (!(is_if && is_type_checking (t, k + 1, colon))) /* TYPE_CHECKING is a guard (pysyms.h) */
    ps->pending_cond = ib_xasprintf ("(%s)", test);
  if (is_if || is_elif)
    set_chain (ps, chain && is_elif ? ib_xasprintf ("%s and not (%s)", chain, test) : ib_xasprintf ("not (%s)", test));
  else
    set_chain (ps, NULL);
  ps->pending_line = t[k].line;
  ps->inline_body = colon + 1 < b;
}

static void
parse_tokens (struct parser *ps)
{
  const struct tok *t = ps->t;
  enum block stack[MAX_BLOCKS];
  bool guards[MAX_BLOCKS];
  int sp = 0, skipping = 0;
  enum block pending = BLOCK_SKIP;
  size_t i = 0;
  while (t[i].kind != T_END)
    {
      if (t[i].kind == T_INDENT)
        {
          if (sp < MAX_BLOCKS)
            {
              guards[sp] = ps->pending_guard;
              ps->guarded += ps->pending_guard;
              stack[sp++] = pending;
              skipping += pending == BLOCK_SKIP;
              ps->tries[sp].active = false;
              ps->depth = sp;
              ps->body_cond[sp] = ps->pending_cond;
              ps->body_line[sp] = ps->pending_line;
              ps->pending_cond = NULL;
            }
          i++;
          continue;
        }
      if (t[i].kind == T_DEDENT)
        {
          if (sp > 0)
            {
              ps->tries[sp].active = false;
              free (ps->body_cond[sp]);
              ps->body_cond[sp] = NULL;
              set_chain (ps, NULL);
              skipping -= stack[--sp] == BLOCK_SKIP;
              ps->guarded -= guards[sp];
              ps->depth = sp;
            }
          i++;
          continue;
        }
      if (t[i].kind == T_NEWLINE)
        {
          i++;
          continue;
        }
      size_t e = i;
      while (t[e].kind != T_NEWLINE && t[e].kind != T_END)
        e++;
      enum block parent = sp ? stack[sp - 1] : BLOCK_DESCEND;
      track_try (ps, i, e, sp);
      track_cond (ps, i, e, parent);
      ps->pending_guard = false;
      pending = logical_line (ps, i, e, skipping == 0, parent);
      ps->inline_body = false;
      i = e;
    }
  for (int d = 0; d <= MAX_BLOCKS; d++)
    {
      free (ps->body_cond[d]);
      free (ps->chain[d]);
    }
  free (ps->pending_cond);
}

const char *const ib_py_runtime_bindings[] = { "globals()[...] =", "globals().update(...)",
                                                "setattr(sys.modules[__name__], ...)",
                                                "sys.modules[__name__].NAME =", "locals()[...] =", "vars()[...] =",
                                                NULL };

static bool
seq (const struct tok *t, size_t i, const char *const *words)
{
  for (size_t k = 0; words[k]; k++, i++)
    if (t[i].kind == T_END || !ib_tok_is (&t[i], words[k]))
      return false;
  return true;
}

/* The first construct that binds module names at run time (see pysyms.h). */
static void
find_runtime_binding (const struct tok *t, struct ib_py_module *m)
{
  static const char *const globals_call[] = { "globals", "(", ")", NULL };
  static const char *const locals_call[] = { "locals", "(", ")", "[", NULL };
  static const char *const vars_call[] = { "vars", "(", ")", "[", NULL };
  static const char *const self_module[] = { "sys", ".", "modules", "[", "__name__", "]", NULL };
  for (size_t i = 0; t[i].kind != T_END; i++)
    {
      int kind = -1;
      bool loc = seq (t, i, locals_call), var = seq (t, i, vars_call);
      if ((seq (t, i, globals_call) || loc || var) && (i == 0 || !ib_tok_is (&t[i - 1], ".")))
        {
          size_t j = i + 3;
          if (ib_tok_is (&t[j], "["))
            {
              int depth = 0;
              for (; t[j].kind != T_END; j++)
                if (ib_tok_opens (&t[j]))
                  depth++;
                else if (ib_tok_closes (&t[j]) && --depth == 0)
                  break;
              kind = t[j].kind != T_END && ib_tok_is (&t[j + 1], "=") ? (loc ? 4 : var ? 5 : 0) : -1;
            }
          else if (ib_tok_is (&t[j], ".") && ib_tok_is (&t[j + 1], "update"))
            kind = 1;
        }
      else if (ib_tok_is (&t[i], "setattr") && ib_tok_is (&t[i + 1], "(") && seq (t, i + 2, self_module))
        kind = 2;
      else if (seq (t, i, self_module) && ib_tok_is (&t[i + 6], ".") && t[i + 7].kind == T_NAME && ib_tok_is (&t[i + 8], "="))
        kind = 3;
      if (kind >= 0)
        {
          m->runtime_binding = ib_py_runtime_bindings[kind];
          m->runtime_binding_line = t[i].line;
          return;
        }
    }
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
sort_unique (struct ib_py_module *m)
{
  if (m->n_defs > 1) /* ib_qsort (NULL, 0, ...) is undefined */
    ib_qsort (m->defs, m->n_defs, sizeof (*m->defs), cmp_str);
  size_t o = 0;
  for (size_t i = 0; i < m->n_defs; i++)
    {
      if (o > 0 && strcmp (m->defs[o - 1], m->defs[i]) == 0)
        free (m->defs[i]);
      else
        m->defs[o++] = m->defs[i];
    }
  m->n_defs = o;
}

int
ib_py_scan (const char *src, size_t len, const char *package, struct ib_py_module **out, ib_error_t *err)
{
  struct tok *toks;
  size_t n_toks;
  if (ib_py_lex (src, len, &toks, &n_toks, err) < 0)
    return -1;
  struct ib_py_module *m = ib_xcalloc (1, sizeof (*m));
  struct parser ps = { .t = toks, .package = package, .m = m };
  parse_tokens (&ps);
  find_runtime_binding (toks, m);
  free (toks);
  sort_unique (m);
  *out = m;
  return 0;
}

void
ib_py_module_free (struct ib_py_module *m)
{
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n_defs; i++)
    free (m->defs[i]);
  free (m->defs);
  for (size_t i = 0; i < m->n_all; i++)
    free (m->all[i]);
  free (m->all);
  for (size_t i = 0; i < m->n_imports; i++)
    {
      struct ib_py_import *im = &m->imports[i];
      free (im->module);
      free (im->asname);
      free (im->cond);
      for (size_t k = 0; k < im->n_names; k++)
        {
          free (im->names[k].name);
          free (im->names[k].asname);
        }
      free (im->names);
    }
  free (m->imports);
  free (m);
}

bool
ib_py_promises (const struct ib_py_module *m, const char *name)
{
  for (size_t i = 0; i < m->n_all; i++)
    if (strcmp (m->all[i], name) == 0)
      return true;
  return false;
}

bool
ib_py_defines (const struct ib_py_module *m, const char *name)
{
  return ib_bsearch (&name, m->defs, m->n_defs, sizeof (*m->defs), cmp_str) != NULL;
}

/* ---- module-level statements --------------------------------------------- */

static uint64_t
fnv1a (uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* A statement starts at each logical line at depth 0, except the line after
 * a decorator, which belongs to the decorated def or class. */
int
ib_py_statements (const char *src, size_t len, struct ib_py_statement **out, size_t *n, ib_error_t *err)
{
  struct tok *toks;
  size_t n_toks;
  *out = NULL;
  *n = 0;
  if (ib_py_lex (src, len, &toks, &n_toks, err) < 0)
    return -1;
  size_t cap = 0;
  int depth = 0;
  bool at_line = true, after_decorator = false;
  struct ib_py_statement *cur = NULL;
  for (size_t i = 0; toks[i].kind != T_END; i++)
    {
      const struct tok *t = &toks[i];
      depth += t->kind == T_INDENT ? 1 : t->kind == T_DEDENT ? -1 : 0;
      if (at_line && depth == 0 && t->kind != T_NEWLINE && t->kind != T_INDENT && t->kind != T_DEDENT)
        {
          if (!after_decorator)
            {
              if (*n == cap)
                *out = ib_xrealloc (*out, (cap = cap ? cap * 2 : 64) * sizeof (**out));
              cur = &(*out)[(*n)++];
              *cur = (struct ib_py_statement){ t->line, (size_t) (t->s - src), 0, 0xcbf29ce484222325ull };
            }
          after_decorator = ib_tok_is (t, "@");
        }
      at_line = t->kind == T_NEWLINE || (at_line && (t->kind == T_INDENT || t->kind == T_DEDENT));
      /* The lexer may close the last line twice at the end of the input. */
      if (cur == NULL || (t->kind == T_NEWLINE && i > 0 && toks[i - 1].kind == T_NEWLINE))
        continue;
      unsigned char kind = (unsigned char) t->kind;
      cur->hash = fnv1a (fnv1a (fnv1a (cur->hash, &kind, 1), &t->len, sizeof (t->len)), t->s, t->len);
      if (t->len)
        cur->end = (size_t) (t->s + t->len - src);
    }
  free (toks);
  return 0;
}

int
ib_py_tokenize (const char *src, size_t len, struct ib_py_token **out, size_t *n, ib_error_t *err)
{
  struct tok *toks;
  size_t n_toks;
  *out = NULL;
  *n = 0;
  if (ib_py_lex (src, len, &toks, &n_toks, err) < 0)
    return -1;
  /* The same order as enum tok_kind, but kept apart: the lexer's own type
   * may grow without changing this contract. */
  static const enum ib_py_tok_kind kinds[] = { [T_NAME] = IB_PY_NAME,       [T_NUMBER] = IB_PY_NUMBER,
                                               [T_STRING] = IB_PY_STRING,   [T_OP] = IB_PY_OP,
                                               [T_NEWLINE] = IB_PY_NEWLINE, [T_INDENT] = IB_PY_INDENT,
                                               [T_DEDENT] = IB_PY_DEDENT,   [T_END] = IB_PY_END };
  struct ib_py_token *t = ib_xcalloc (n_toks ? n_toks : 1, sizeof (*t));
  for (size_t i = 0; i < n_toks; i++)
    t[i] = (struct ib_py_token){ kinds[toks[i].kind], toks[i].s, toks[i].len, toks[i].line };
  free (toks);
  *out = t;
  *n = n_toks;
  return 0;
}
