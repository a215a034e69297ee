/* Python's tokenizer, as far as the symbol gate needs it: names, numbers,
 * strings (f-strings with their nested expressions), operators, and the
 * logical lines of Python's grammar (NEWLINE, INDENT and DEDENT, lines
 * joined inside brackets and after a backslash), with the errors CPython's
 * tokenizer reports (an unterminated string, a bracket never closed, an
 * inconsistent dedent). */
#include "symbol-check/pylex.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

struct lexer
{
  const char *src, *end, *p;
  int line;
  int depth;         /* open brackets */
  int open_line;     /* where the outermost open bracket is */
  int indents[256];  /* columns of the open blocks */
  int n_indents;
  struct tok *toks;
  size_t n, cap;
  ib_error_t *err;
};

static void
emit (struct lexer *lx, enum tok_kind kind, const char *s, size_t len, int line)
{
  if (lx->n == lx->cap)
    {
      lx->cap = lx->cap ? lx->cap * 2 : 1024;
      lx->toks = ib_xrealloc (lx->toks, lx->cap * sizeof (*lx->toks));
    }
  lx->toks[lx->n++] = (struct tok){ kind, s, len, line };
}

static bool
is_name_start (unsigned char c)
{
  return isalpha (c) || c == '_' || c >= 0x80;
}

static bool
is_name_char (unsigned char c)
{
  return isalnum (c) || c == '_' || c >= 0x80;
}

/* A newline is "\n", "\r\n" or a lone "\r"; returns its length, or 0. */
static int
newline_at (const struct lexer *lx, const char *p)
{
  if (p >= lx->end)
    return 0;
  if (*p == '\n')
    return 1;
  if (*p == '\r')
    return p + 1 < lx->end && p[1] == '\n' ? 2 : 1;
  return 0;
}

static bool
is_string_prefix (const char *s, size_t n)
{
  if (n == 0 || n > 2)
    return false;
  char a = (char) tolower ((unsigned char) s[0]);
  char b = n == 2 ? (char) tolower ((unsigned char) s[1]) : 0;
  if (n == 1)
    return strchr ("rubft", a) != NULL;
  return (a == 'r' && strchr ("bft", b)) || (b == 'r' && strchr ("bft", a));
}

static bool
prefix_has (const char *s, size_t n, char c)
{
  for (size_t i = 0; i < n; i++)
    if (tolower ((unsigned char) s[i]) == c)
      return true;
  return false;
}

static const char *scan_string (struct lexer *lx, const char *p, bool fmt);

/* Inside an f-string's replacement field: an expression (with its own
 * brackets and nested strings), an optional !conversion, an optional
 * :format-spec that may hold further fields.  Returns the position after
 * the closing '}', or NULL. */
static const char *
scan_fexpr (struct lexer *lx, const char *p)
{
  int depth = 0;
  while (p < lx->end)
    {
      unsigned char c = (unsigned char) *p;
      int nl = newline_at (lx, p);
      if (nl)
        {
          lx->line++;
          p += nl;
          continue;
        }
      if (c == '\'' || c == '"')
        {
          if ((p = scan_string (lx, p, false)) == NULL)
            return NULL;
          continue;
        }
      if (is_name_start (c))
        {
          const char *q = p;
          while (q < lx->end && is_name_char ((unsigned char) *q))
            q++;
          if (q < lx->end && (*q == '\'' || *q == '"') && is_string_prefix (p, (size_t) (q - p)))
            {
              if ((p = scan_string (lx, q, prefix_has (p, (size_t) (q - p), 'f') || prefix_has (p, (size_t) (q - p), 't')))
                  == NULL)
                return NULL;
              continue;
            }
          p = q;
          continue;
        }
      if (c == '(' || c == '[' || c == '{')
        depth++;
      else if (c == ')' || c == ']')
        depth--;
      else if (c == '}')
        {
          if (depth == 0)
            return p + 1;
          depth--;
        }
      else if (c == ':' && depth == 0)
        {
          /* The format spec: text up to the closing '}', fields inside. */
          for (p++; p < lx->end; p++)
            {
              int n2 = newline_at (lx, p);
              if (n2)
                {
                  lx->line++;
                  p += n2 - 1;
                }
              else if (*p == '{')
                {
                  if ((p = scan_fexpr (lx, p + 1)) == NULL)
                    return NULL;
                  p--;
                }
              else if (*p == '}')
                return p + 1;
            }
          return NULL;
        }
      p++;
    }
  return NULL;
}

/* P is at the opening quote.  Returns the position after the closing one. */
static const char *
scan_string (struct lexer *lx, const char *p, bool fmt)
{
  char q = *p;
  bool triple = p + 2 < lx->end && p[1] == q && p[2] == q;
  p += triple ? 3 : 1;
  while (p < lx->end)
    {
      int nl = newline_at (lx, p);
      /* A backslash keeps the next quote, backslash or newline from
       * counting; before an f-string's brace it is only itself. */
      if (*p == '\\' && p + 1 < lx->end && !(fmt && (p[1] == '{' || p[1] == '}')))
        {
          int n2 = newline_at (lx, p + 1);
          lx->line += n2 ? 1 : 0;
          p += n2 ? 1 + n2 : 2;
          continue;
        }
      if (nl)
        {
          if (!triple)
            return NULL;
          lx->line++;
          p += nl;
          continue;
        }
      if (*p == q && (!triple || (p + 2 < lx->end && p[1] == q && p[2] == q)))
        return p + (triple ? 3 : 1);
      if (fmt && *p == '{')
        {
          if (p + 1 < lx->end && p[1] == '{')
            p += 2;
          else if ((p = scan_fexpr (lx, p + 1)) == NULL)
            return NULL;
          continue;
        }
      p++;
    }
  return NULL;
}

static const char *const ops3[] = { "**=", "//=", ">>=", "<<=", "...", NULL };
static const char *const ops2[] = { "**", "//", ">>", "<<", "<=", ">=", "==", "!=", "->", ":=", "+=", "-=", "*=",
                                    "/=", "%=", "&=", "|=", "^=", "@=", NULL };

static size_t
op_length (const char *p, const char *end)
{
  for (int i = 0; ops3[i]; i++)
    if (end - p >= 3 && strncmp (p, ops3[i], 3) == 0)
      return 3;
  for (int i = 0; ops2[i]; i++)
    if (end - p >= 2 && strncmp (p, ops2[i], 2) == 0)
      return 2;
  return 1;
}

/* At the start of a logical line: blank and comment-only lines are skipped;
 * otherwise INDENT/DEDENT tokens follow from the column.  Returns false at
 * the end of the input. */
static bool
line_start (struct lexer *lx)
{
  for (;;)
    {
      int col = 0;
      const char *p = lx->p;
      for (; p < lx->end; p++)
        {
          if (*p == ' ')
            col++;
          else if (*p == '\t')
            col = (col / 8 + 1) * 8;
          else if (*p == '\f')
            col = 0;
          else
            break;
        }
      lx->p = p;
      if (p >= lx->end)
        return false;
      int nl = newline_at (lx, p);
      if (nl || *p == '#' || (*p == '\\' && newline_at (lx, p + 1)))
        {
          /* Blank, comment-only, or a lone continuation: no statement. */
          while (lx->p < lx->end && !newline_at (lx, lx->p))
            lx->p++;
          if (lx->p >= lx->end)
            return false;
          lx->p += newline_at (lx, lx->p);
          lx->line++;
          continue;
        }
      if (col > lx->indents[lx->n_indents - 1] && lx->n_indents < 256)
        {
          lx->indents[lx->n_indents++] = col;
          emit (lx, T_INDENT, p, 0, lx->line);
        }
      while (lx->n_indents > 1 && col < lx->indents[lx->n_indents - 1])
        {
          lx->n_indents--;
          emit (lx, T_DEDENT, p, 0, lx->line);
        }
      return true;
    }
}

static int
tokenize (struct lexer *lx)
{
  lx->indents[0] = 0;
  lx->n_indents = 1;
  lx->line = 1;
  bool at_start = true, pending = false;
  if (lx->end - lx->p >= 3 && memcmp (lx->p, "\xef\xbb\xbf", 3) == 0)
    lx->p += 3;
  for (;;)
    {
      if (at_start && lx->depth == 0)
        {
          if (!line_start (lx))
            break;
          at_start = false;
        }
      if (lx->p >= lx->end)
        break;
      const char *p = lx->p;
      unsigned char c = (unsigned char) *p;
      int nl = newline_at (lx, p);
      if (c == ' ' || c == '\t' || c == '\f')
        lx->p++;
      else if (c == '#')
        while (lx->p < lx->end && !newline_at (lx, lx->p))
          lx->p++;
      else if (c == '\\' && newline_at (lx, p + 1))
        {
          lx->p += 1 + newline_at (lx, p + 1);
          lx->line++;
        }
      else if (nl)
        {
          if (lx->depth == 0 && pending)
            {
              emit (lx, T_NEWLINE, p, 0, lx->line);
              pending = false;
              at_start = true;
            }
          lx->p += nl;
          lx->line++;
        }
      else if (c == '\'' || c == '"' || is_name_start (c))
        {
          const char *q = p;
          bool fmt = false;
          if (c != '\'' && c != '"')
            {
              while (q < lx->end && is_name_char ((unsigned char) *q))
                q++;
              if (!(q < lx->end && (*q == '\'' || *q == '"') && is_string_prefix (p, (size_t) (q - p))))
                {
                  emit (lx, T_NAME, p, (size_t) (q - p), lx->line);
                  lx->p = q;
                  pending = true;
                  continue;
                }
              fmt = prefix_has (p, (size_t) (q - p), 'f') || prefix_has (p, (size_t) (q - p), 't');
            }
          int line = lx->line;
          const char *e = scan_string (lx, q, fmt);
          if (e == NULL)
            return ib_error (lx->err, IB_ESYMBOLS, "line %d: unterminated string", line);
          emit (lx, T_STRING, p, (size_t) (e - p), line);
          lx->p = e;
        }
      else if (isdigit (c) || (c == '.' && p + 1 < lx->end && isdigit ((unsigned char) p[1])))
        {
          const char *q = p + 1;
          while (q < lx->end && (is_name_char ((unsigned char) *q) || *q == '.'
                                 || ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E') && !(p[0] == '0' && (p[1] == 'x' || p[1] == 'X')))))
            q++;
          emit (lx, T_NUMBER, p, (size_t) (q - p), lx->line);
          lx->p = q;
        }
      else
        {
          size_t n = op_length (p, lx->end);
          if ((c == '(' || c == '[' || c == '{') && lx->depth++ == 0)
            lx->open_line = lx->line;
          else if ((c == ')' || c == ']' || c == '}') && lx->depth > 0)
            lx->depth--;
          emit (lx, T_OP, p, n, lx->line);
          lx->p += n;
        }
      pending = true;
    }
  if (lx->depth > 0)
    return ib_error (lx->err, IB_ESYMBOLS, "line %d: bracket never closed", lx->open_line);
  if (pending)
    emit (lx, T_NEWLINE, lx->end, 0, lx->line);
  while (lx->n_indents-- > 1)
    emit (lx, T_DEDENT, lx->end, 0, lx->line);
  emit (lx, T_END, lx->end, 0, lx->line);
  return 0;
}

int
ib_py_lex (const char *src, size_t len, struct tok **out, size_t *n, ib_error_t *err)
{
  struct lexer lx = { .src = src, .end = src + len, .p = src, .err = err };
  if (tokenize (&lx) < 0)
    {
      free (lx.toks);
      return -1;
    }
  *out = lx.toks;
  *n = lx.n;
  return 0;
}

bool
ib_py_is_conflict_marker (const char *p, size_t len)
{
  if (len < 7 || strchr ("<=>|", p[0]) == NULL || p[0] == '\0')
    return false;
  for (int i = 1; i < 7; i++)
    if (p[i] != p[0])
      return false;
  return true;
}

int
ib_py_conflict_marker_line (const char *src, size_t len)
{
  ib_error_t e = NULL;
  struct lexer lx = { .src = src, .end = src + len, .p = src, .err = &e };
  tokenize (&lx);
  ib_error_release (&e);
  int line = 0;
  for (size_t i = 0; line == 0 && i < lx.n; i++)
    {
      const struct tok *t = &lx.toks[i];
      bool column0 = t->s == src || t->s[-1] == '\n' || t->s[-1] == '\r';
      if (t->kind == T_OP && column0 && ib_py_is_conflict_marker (t->s, (size_t) (lx.end - t->s)))
        line = t->line;
    }
  free (lx.toks);
  return line;
}

bool
ib_tok_is (const struct tok *t, const char *s)
{
  return (t->kind == T_NAME || t->kind == T_OP) && t->len == strlen (s) && memcmp (t->s, s, t->len) == 0;
}

bool
ib_tok_opens (const struct tok *t)
{
  return t->kind == T_OP && t->len == 1 && strchr ("([{", t->s[0]);
}

bool
ib_tok_closes (const struct tok *t)
{
  return t->kind == T_OP && t->len == 1 && strchr (")]}", t->s[0]);
}

size_t
ib_tok_matching (const struct tok *t, size_t a, size_t b)
{
  int depth = 0;
  for (size_t i = a; i < b; i++)
    {
      if (ib_tok_opens (&t[i]))
        depth++;
      else if (ib_tok_closes (&t[i]) && --depth == 0)
        return i;
    }
  return b;
}
