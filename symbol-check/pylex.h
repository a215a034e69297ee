/* The tokens of Python source (pylex.c), for the parsers of this folder. */
#ifndef IB_PYLEX_H
#define IB_PYLEX_H

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

#endif
