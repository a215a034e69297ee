/* The tokens of Python source (pylex.c), for the parsers of this folder. */
#ifndef IB_PYLEX_H
#define IB_PYLEX_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

enum tok_kind
{
  T_NAME,
  T_NUMBER,
  T_STRING,
  T_OP,
  T_NEWLINE,
  T_INDENT,
  T_DEDENT,
  T_END
};

struct tok
{
  enum tok_kind kind;
  const char *s;
  size_t len;
  int line;
};

/* SRC as tokens, the last one T_END; *OUT to free.  -1 with ERR set
 * ("line N: ...") where CPython's tokenizer refuses the source. */
int ib_py_lex (const char *src, size_t len, struct tok **out, size_t *n, ib_error_t *err);

/* T is the name or operator S. */
bool ib_tok_is (const struct tok *t, const char *s);
/* T opens or closes a bracket: ( [ { or ) ] }. */
bool ib_tok_opens (const struct tok *t);
bool ib_tok_closes (const struct tok *t);
/* The index of the bracket closing the one at A, or B if none before B. */
size_t ib_tok_matching (const struct tok *t, size_t a, size_t b);

/* Whether P (LEN bytes from a line's start) is a merge conflict marker:
 * seven of `<`, `=`, `>` or `|` (git's <<<<<<<, =======, >>>>>>>, and
 * diff3's |||||||). */
bool ib_py_is_conflict_marker (const char *p, size_t len);

/* The first line of SRC that starts with a conflict marker outside any
 * string or comment (a token at column 0), which every CPython refuses:
 * two binary operators in a row (`<<` `<<`, `==` `==`, `>>` `>>`, `|` `|`)
 * begin no statement and continue no expression, whatever the version.
 * Where the tokenizer refuses SRC, the tokens before that point count.
 * 0 when there is none. */
int ib_py_conflict_marker_line (const char *src, size_t len);

#endif
