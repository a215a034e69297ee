/* Conditions decided against the image's interpreter (pycond.h).
 *
 * Only what CPython would decide the same way in every run of the image
 * is decided: its version (major.minor, as the image's files show it) and
 * its platform, Linux.  A micro version, an environment variable or a
 * function of the program is unknown, and unknown spreads by Kleene's
 * three-valued logic: `A or B` is true when either is true, false when
 * both are false, else unknown. */
#include "symbol-check/pycond.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbol-check/pylex.h"

#define MAX_TUPLE 8

struct ev
{
  const struct tok *t;
  int ver[2];
  bool have_ver;
};

/* T[A..] spells the words of WORDS, one token each, all before B. */
static bool
spells (const struct tok *t, size_t a, size_t b, const char *const *words, size_t *next)
{
  size_t i = a;
  for (size_t k = 0; words[k]; k++, i++)
    if (i >= b || t[i].kind == T_STRING || t[i].len != strlen (words[k]) || memcmp (t[i].s, words[k], t[i].len) != 0)
      return false;
  *next = i;
  return true;
}

static enum ib_py_truth
truth (bool v)
{
  return v ? IB_PY_TRUE : IB_PY_FALSE;
}

/* A plain string literal's text ('x' or "x", no prefix, no escapes). */
static bool
string_lit (const struct tok *t, const char **s, size_t *n)
{
  if (t->kind != T_STRING || t->len < 2 || (t->s[0] != '\'' && t->s[0] != '"') || t->s[t->len - 1] != t->s[0]
      || memchr (t->s, '\\', t->len) || (t->len >= 6 && t->s[1] == t->s[0] && t->s[2] == t->s[0]))
    return false;
  *s = t->s + 1;
  *n = t->len - 2;
  return true;
}

static bool
int_lit (const struct tok *t, long *v)
{
  if (t->kind != T_NUMBER || t->len == 0 || t->len > 6)
    return false;
  long x = 0;
  for (size_t i = 0; i < t->len; i++)
    {
      if (t->s[i] < '0' || t->s[i] > '9')
        return false;
      x = x * 10 + (t->s[i] - '0');
    }
  *v = x;
  return true;
}

/* `(N, N, ...)`, `(N,)` or N exactly covering [A, B). */
static int
int_tuple (const struct tok *t, size_t a, size_t b, long *v, bool *is_tuple)
{
  *is_tuple = a < b && ib_tok_is (&t[a], "(");
  if (!*is_tuple)
    return b == a + 1 && int_lit (&t[a], v) ? 1 : -1;
  if (ib_tok_matching (t, a, b) != b - 1)
    return -1;
  int n = 0;
  for (size_t i = a + 1; i < b - 1; i++)
    {
      if (n == MAX_TUPLE || !int_lit (&t[i], &v[n++]))
        return -1;
      if (i + 1 < b - 1 && !ib_tok_is (&t[++i], ","))
        return -1;
    }
  return n;
}

enum op
{
  OP_LT,
  OP_LE,
  OP_GT,
  OP_GE,
  OP_EQ,
  OP_NE,
  OP_IN,
  OP_NOT_IN,
  OP_NONE
};

static enum op
op_at (const struct tok *t, size_t i, size_t b, size_t *next)
{
  static const char *const ops[] = { "<", "<=", ">", ">=", "==", "!=", NULL };
  *next = i + 1;
  for (int k = 0; ops[k]; k++)
    if (i < b && ib_tok_is (&t[i], ops[k]))
      return (enum op) k;
  if (i < b && ib_tok_is (&t[i], "in"))
    return OP_IN;
  if (i + 1 < b && ib_tok_is (&t[i], "not") && ib_tok_is (&t[i + 1], "in"))
    {
      *next = i + 2;
      return OP_NOT_IN;
    }
  return OP_NONE;
}

static enum ib_py_truth
apply (enum op op, int cmp)
{
  switch (op)
    {
    case OP_LT: return truth (cmp < 0);
    case OP_LE: return truth (cmp <= 0);
    case OP_GT: return truth (cmp > 0);
    case OP_GE: return truth (cmp >= 0);
    case OP_EQ: return truth (cmp == 0);
    case OP_NE: return truth (cmp != 0);
    default: return IB_PY_UNKNOWN;
    }
}

/* The image's version, as the sequence SHAPE names (WHOLE sys.version_info,
 * its [:2], one of its fields), against the tuple or integer V[0..N):
 * Python's sequence order, where the longer of two equal prefixes is the
 * greater and the micro version is not known. */
enum shape
{
  WHOLE,
  SLICE2,
  MAJOR,
  MINOR
};

static enum ib_py_truth
version_compare (const struct ev *ev, enum shape sh, enum op op, const long *v, int n, bool is_tuple)
{
  if (!ev->have_ver || op >= OP_IN)
    return IB_PY_UNKNOWN;
  if (sh == MAJOR || sh == MINOR)
    {
      if (is_tuple)
        return op == OP_EQ ? IB_PY_FALSE : op == OP_NE ? IB_PY_TRUE : IB_PY_UNKNOWN; /* int vs tuple */
      long x = ev->ver[sh == MINOR];
      return apply (op, x < v[0] ? -1 : x > v[0]);
    }
  if (!is_tuple)
    return op == OP_EQ ? IB_PY_FALSE : op == OP_NE ? IB_PY_TRUE : IB_PY_UNKNOWN; /* tuple vs int */
  for (int i = 0; i < n && i < 2; i++)
    if (ev->ver[i] != v[i])
      return apply (op, ev->ver[i] < v[i] ? -1 : 1);
  if (n <= 2)
    return apply (op, sh == WHOLE || n < 2 ? 1 : 0); /* (3, 13, micro, ...) > (3, 13) */
  return sh == WHOLE ? IB_PY_UNKNOWN : apply (op, -1);
}

/* A string the target fixes, compared with [A, B): a literal, or a tuple or
 * list of them for `in`. */
static enum ib_py_truth
string_compare (const char *have, enum op op, const struct tok *t, size_t a, size_t b)
{
  const char *s;
  size_t n;
  if (op == OP_IN || op == OP_NOT_IN)
    {
      if (a >= b || !(ib_tok_is (&t[a], "(") || ib_tok_is (&t[a], "[")) || ib_tok_matching (t, a, b) != b - 1)
        return IB_PY_UNKNOWN;
      bool found = false;
      for (size_t i = a + 1; i < b - 1; i++)
        {
          if (!string_lit (&t[i], &s, &n))
            return IB_PY_UNKNOWN;
          found |= n == strlen (have) && memcmp (s, have, n) == 0;
          if (i + 1 < b - 1 && !ib_tok_is (&t[++i], ","))
            return IB_PY_UNKNOWN;
        }
      return truth (found == (op == OP_IN));
    }
  if (b != a + 1 || !string_lit (&t[a], &s, &n) || (op != OP_EQ && op != OP_NE))
    return IB_PY_UNKNOWN;
  bool eq = n == strlen (have) && memcmp (s, have, n) == 0;
  return truth (eq == (op == OP_EQ));
}

/* One comparison or name, [A, B) holding no `and`, `or` or `not` at its
 * top level. */
static enum ib_py_truth
atom (const struct ev *ev, size_t a, size_t b)
{
  const struct tok *t = ev->t;
  static const char *const vi[] = { "sys", ".", "version_info", NULL };
  static const char *const slice2[] = { "[", ":", "2", "]", NULL };
  static const char *const plat[] = { "sys", ".", "platform", NULL };
  static const char *const starts[] = { "sys", ".", "platform", ".", "startswith", "(", NULL };
  static const char *const osname[] = { "os", ".", "name", NULL };
  static const char *const system[] = { "platform", ".", "system", "(", ")", NULL };
  size_t i, j;
  if (b == a + 1)
    return ib_tok_is (&t[a], "True") ? IB_PY_TRUE : ib_tok_is (&t[a], "False") || ib_tok_is (&t[a], "TYPE_CHECKING") ? IB_PY_FALSE : IB_PY_UNKNOWN;
  if (b == a + 3 && t[a].kind == T_NAME && ib_tok_is (&t[a + 1], ".") && ib_tok_is (&t[a + 2], "TYPE_CHECKING"))
    return IB_PY_FALSE;
  if (spells (t, a, b, starts, &i))
    {
      const char *s;
      size_t n;
      if (i + 2 != b || !string_lit (&t[i], &s, &n) || !ib_tok_is (&t[i + 1], ")"))
        return IB_PY_UNKNOWN;
      return truth (n <= 5 && memcmp ("linux", s, n) == 0);
    }
  if (spells (t, a, b, vi, &i))
    {
      enum shape sh = WHOLE;
      long idx;
      if (spells (t, i, b, slice2, &j))
        sh = SLICE2, i = j;
      else if (i + 2 < b && ib_tok_is (&t[i], "[") && int_lit (&t[i + 1], &idx) && idx <= 1 && ib_tok_is (&t[i + 2], "]"))
        sh = idx ? MINOR : MAJOR, i += 3;
      else if (i + 1 < b && ib_tok_is (&t[i], ".") && (ib_tok_is (&t[i + 1], "major") || ib_tok_is (&t[i + 1], "minor")))
        sh = ib_tok_is (&t[i + 1], "major") ? MAJOR : MINOR, i += 2;
      enum op op = op_at (t, i, b, &j);
      long v[MAX_TUPLE];
      bool tuple;
      int n = op == OP_NONE ? -1 : int_tuple (t, j, b, v, &tuple);
      return n < 1 ? IB_PY_UNKNOWN : version_compare (ev, sh, op, v, n, tuple);
    }
  const char *have = NULL;
  if (spells (t, a, b, plat, &i))
    have = "linux";
  else if (spells (t, a, b, osname, &i))
    have = "posix";
  else if (spells (t, a, b, system, &i))
    have = "Linux";
  if (have == NULL)
    return IB_PY_UNKNOWN;
  enum op op = op_at (t, i, b, &j);
  return op == OP_NONE ? IB_PY_UNKNOWN : string_compare (have, op, t, j, b);
}

static enum ib_py_truth
eval (const struct ev *ev, size_t a, size_t b)
{
  const struct tok *t = ev->t;
  if (a >= b)
    return IB_PY_UNKNOWN;
  if (ib_tok_is (&t[a], "(") && ib_tok_matching (t, a, b) == b - 1)
    return eval (ev, a + 1, b - 1);
  /* Split at the loosest operator at the top level: or, then and. */
  for (int pass = 0; pass < 2; pass++)
    {
      const char *word = pass == 0 ? "or" : "and";
      int depth = 0;
      size_t start = a;
      bool split = false;
      enum ib_py_truth acc = pass == 0 ? IB_PY_FALSE : IB_PY_TRUE;
      for (size_t i = a; i <= b; i++)
        {
          if (i < b && ib_tok_opens (&t[i]))
            depth++;
          else if (i < b && ib_tok_closes (&t[i]))
            depth--;
          else if (i < b && depth == 0 && (ib_tok_is (&t[i], "if") || ib_tok_is (&t[i], "lambda") || ib_tok_is (&t[i], ":=")))
            return IB_PY_UNKNOWN;
          if (i == b ? split : depth == 0 && ib_tok_is (&t[i], word))
            {
              enum ib_py_truth v = eval (ev, start, i);
              if (pass == 0)
                acc = v == IB_PY_TRUE || acc == IB_PY_TRUE ? IB_PY_TRUE : v == IB_PY_UNKNOWN || acc == IB_PY_UNKNOWN ? IB_PY_UNKNOWN : IB_PY_FALSE;
              else
                acc = v == IB_PY_FALSE || acc == IB_PY_FALSE ? IB_PY_FALSE : v == IB_PY_UNKNOWN || acc == IB_PY_UNKNOWN ? IB_PY_UNKNOWN : IB_PY_TRUE;
              start = i + 1;
              split = true;
            }
        }
      if (split)
        return acc;
    }
  if (ib_tok_is (&t[a], "not"))
    {
      enum ib_py_truth v = eval (ev, a + 1, b);
      return v == IB_PY_UNKNOWN ? v : truth (v == IB_PY_FALSE);
    }
  return atom (ev, a, b);
}

enum ib_py_truth
ib_py_condition (const char *text, const struct ib_py_target *tg)
{
  struct tok *t = NULL;
  size_t n = 0;
  ib_error_t err = NULL;
  if (text == NULL || ib_py_lex (text, strlen (text), &t, &n, &err) < 0)
    {
      ib_error_release (&err);
      free (t);
      return IB_PY_UNKNOWN;
    }
  size_t b = 0;
  while (b < n && t[b].kind != T_NEWLINE && t[b].kind != T_END)
    b++;
  struct ev ev = { .t = t };
  ev.have_ver = tg && tg->version && sscanf (tg->version, "%d.%d", &ev.ver[0], &ev.ver[1]) == 2;
  enum ib_py_truth v = eval (&ev, 0, b);
  free (t);
  return v;
}
