/* What an image's Python declares to a launcher, read statically: the
 * command-line flags of `vllm serve` (argparse add_argument calls with
 * literal names, and the fields of the dataclasses vLLM generates engine
 * and frontend arguments from: classes named *EngineArgs or *FrontendArgs,
 * a field x_y giving --x-y, a bool field also --no-x-y), each with its
 * declared choices (a literal choices= list, a Literal[...] annotation or
 * alias, an Enum's values) or why they cannot be settled; and the
 * environment variables it reads (os.getenv / os.environ.get / [...] /
 * `in os.environ` with a literal name, a function of the same file whose
 * first parameter reaches one of those called with a literal, and the
 * string keys of the dict displays of an envs.py registry). */
#ifndef IB_PYINVENTORY_H
#define IB_PYINVENTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

enum ib_choices
{
  IB_CHOICES_ANY,       /* no choices declared: any value */
  IB_CHOICES_LIST,      /* a literal list */
  IB_CHOICES_UNSETTLED, /* declared, but not by a literal this reading can settle */
};

struct ib_cli_flag
{
  char *flag; /* "--block-size" */
  char *file;
  int line;
  enum ib_choices choices;
  size_t n_choices;
  char **choice; /* LIST: the values, as text ("128", "a2a") */
  char *unsettled; /* UNSETTLED: what the reading met ("choices=sorted(X)") */
  char *type_name; /* a dataclass field's type name still to resolve */
  bool negated;    /* a --no-x of a bool field */
};

struct ib_env_read
{
  char *name, *file;
  int line;
};

struct ib_py_inventory;

struct ib_py_inventory *ib_py_inventory_new (void);
/* Read one Python file (PATH names it in what the inventory records).  A
 * file the lexer refuses is an error the caller may treat as a warning. */
int ib_py_inventory_add (struct ib_py_inventory *inv, const char *path, const char *src, size_t len,
                         ib_error_t *err);
/* After the last file: resolve dataclass field types against the Literal
 * aliases and classes of all files. */
void ib_py_inventory_finish (struct ib_py_inventory *inv);
const struct ib_cli_flag *ib_py_inventory_flag (const struct ib_py_inventory *inv, const char *flag);
const struct ib_env_read *ib_py_inventory_env (const struct ib_py_inventory *inv, const char *name);
/* add_argument calls whose flag name is not a literal, outside the
 * argument dataclasses' files: the first one, or NULL (*N their count). */
const struct ib_env_read *ib_py_inventory_dynamic (const struct ib_py_inventory *inv, size_t *n);
size_t ib_py_inventory_files (const struct ib_py_inventory *inv);
size_t ib_py_inventory_n_flags (const struct ib_py_inventory *inv);
size_t ib_py_inventory_n_env (const struct ib_py_inventory *inv);
void ib_py_inventory_free (struct ib_py_inventory *inv);

/* The text of a plain string literal token (prefix r or u, any quotes, no
 * escapes outside a raw string), malloc'd, or NULL (f-string, bytes, an
 * escape this reading does not decode). */
char *ib_py_string_literal (const char *tok, size_t len);

#endif
