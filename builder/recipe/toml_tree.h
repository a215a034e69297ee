/* The C tree of a TOML document (toml.h), apart so that the C++ shim can
 * include it: plain C, no error API. */
#ifndef IB_TOML_TREE_H
#define IB_TOML_TREE_H

#include <stdbool.h>
#include <stddef.h>

enum ib_toml_type
{
  IB_TOML_TABLE,
  IB_TOML_ARRAY,
  IB_TOML_STRING,
  IB_TOML_INTEGER,
  IB_TOML_FLOAT,
  IB_TOML_BOOL,
  IB_TOML_DATETIME, /* dates and times: STR holds the TOML text */
};

struct ib_toml
{
  enum ib_toml_type type;
  char *key;        /* in a table: the key; in an array: NULL */
  char *str;        /* STRING (may hold NULs: LEN), DATETIME */
  size_t len;
  long long i;      /* INTEGER */
  double f;         /* FLOAT */
  bool b;           /* BOOL */
  int line, column; /* where the value (a table: its header) starts, 1-based; 0 unknown */
  size_t n;         /* TABLE, ARRAY: children, in document order for arrays */
  struct ib_toml *items;
};

/* The shim's entry point (C linkage, no exceptions cross it): 0, or -1 with
 * *ERRMSG malloc'd and *LINE, *COL set. */
int ib_tomlpp_parse (const char *text, size_t len, const char *what, struct ib_toml **out, char **errmsg, int *line,
                     int *col);

#endif
