/* Where CPython of an image would find a module: the image's interpreter
 * and version, and a dotted name resolved to a file of the merged view the
 * way importlib's path finder does for one sys.path entry (package
 * __init__.py, source module, extension module of this interpreter's
 * suffixes, namespace folder, in that order). */
#ifndef IB_PYFINDER_H
#define IB_PYFINDER_H

#include <stdbool.h>

#include "layers/view/fsview.h"
#include "util/error.h"

struct ib_py_layout
{
  const struct ib_fsview *view;
  const char *root;      /* the python path as a view path: "usr/lib/python3/dist-packages" */
  char version[16];      /* "3.11", or "" when the image shows none */
  char triplet[32];      /* "x86_64-linux-gnu" */
  char interpreter[128]; /* "/usr/bin/python3.11", or "" */
};

/* Fill L from the view: the interpreter is python3.X in usr/local/bin or
 * usr/bin, X from ROOT's "python3.X" part when it has one, else from where
 * usr/bin/python3 leads; ARCHITECTURE is the image's (Go's name). */
void ib_py_layout_init (struct ib_py_layout *l, const struct ib_fsview *view, const char *root,
                        const char *architecture);

enum ib_py_kind
{
  IB_PY_NONE,
  IB_PY_PACKAGE,   /* M/__init__.py */
  IB_PY_SOURCE,    /* M.py */
  IB_PY_EXTENSION, /* M.cpython-3XY-TRIPLET.so, M.abi3.so, M.so */
  IB_PY_NAMESPACE, /* a folder M without __init__.py */
  IB_PY_BELOW_EXTENSION, /* M is A.B where A is an extension module: made at run time */
};

struct ib_py_resolved
{
  enum ib_py_kind kind;
  const struct ib_fs_entry *e; /* the file (for a namespace: the folder), or for BELOW_EXTENSION the extension's */
  char *extension;             /* BELOW_EXTENSION: the extension module's dotted name (malloc'd) */
};

/* Resolve the dotted MODULE.  When it resolves to nothing and TRIED is not
 * NULL, *TRIED lists the candidates looked for ("torch/_C/__init__.py,
 * torch/_C.py, ..."), malloc'd. */
void ib_py_resolve (const struct ib_py_layout *l, const char *module, struct ib_py_resolved *out, char **tried);
void ib_py_resolved_clear (struct ib_py_resolved *r);

/* The last part of a dotted name: the NAME of PyInit_NAME. */
const char *ib_py_last_part (const char *module);

#endif
