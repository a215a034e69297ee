/* The symbol gate's state, shared by the files that make up the gate
 * (symgate.c: the passes over the overlay's own imports and the native
 * symbols; symgate_imports.c: the context's lookups and one import
 * checked, which the others share; revimports.c: the base's importers of
 * what the overlay replaces; checked_memo.c: the checked files taken from
 * the caches).
 * Private to symbol-check/: nothing outside includes it. */
#ifndef IB_SYMGATE_PRIVATE_H
#define IB_SYMGATE_PRIVATE_H

#include <stdbool.h>

#include "symbol-check/pyfinder.h"
#include "symbol-check/pycond.h"
#include "symbol-check/pysyms.h"
#include "symbol-check/symgate.h"

/* The largest Python source the gate reads. */
#define MAX_PY_SOURCE (64u << 20)

struct sg_known
{
  const struct ib_fs_entry *e;
  struct ib_py_module *m;
  bool checked;     /* an overlay file: its imports are checked */
  char *scan_error; /* our scanner could not read it (CPython is asked too) */
};

/* An extension module some checked import needs: it must export PyInit_NAME. */
struct sg_extension
{
  const struct ib_fs_entry *e;
  char *module;
  char *where; /* "file:line" of the first import */
};

struct sg_ctx
{
  struct ib_store *s;
  const struct ib_image *img;
  const struct ib_fsview *view;
  const struct ib_symbol_rules *r;
  char *root; /* the python path as a view path: "usr/local/…/dist-packages" */
  struct ib_py_layout layout;
  char *py_cache, *elf_cache, *syntax_cache;
  struct sg_known **known; /* each its own allocation: pointers stay valid as it grows */
  size_t n_known;
  struct ib_py_source *sources; /* checked files the syntax cache does not know */
  const struct ib_fs_entry **source_entries;
  size_t n_sources;
  struct sg_extension *ext;
  size_t n_ext;
  /* The checked files as the layers gave them, duplicates included
   * (checked_memo.c keeps their order). */
  const struct ib_fs_entry **read_order;
  size_t n_read_order;
  ib_problem_fn fn;
  void *data;
  struct ib_symbol_stats *st;
};

/* What is known of E, or NULL. */
struct sg_known *sg_known_find (struct sg_ctx *c, const struct ib_fs_entry *e);
/* Adds what is known of E (M taken); CHECKED: an overlay file. */
struct sg_known *sg_known_add (struct sg_ctx *c, const struct ib_fs_entry *e, struct ib_py_module *m, bool checked);
/* Queues a checked file's syntax answer, or its source for the interpreter. */
void sg_source_add (struct sg_ctx *c, const struct ib_fs_entry *e, struct ib_py_source src);
/* Whether the checked files' syntax is asked of CPython. */
bool sg_syntax_checked (const struct sg_ctx *c);
/* Counts a problem (an error or a warning, the first warning kept as the
 * example) and hands it to the caller's callback. */
void sg_problem (struct sg_ctx *c, bool is_error, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
/* "usr/…/dist-packages/vllm/x.py" -> "vllm/x.py" */
const char *sg_display (const struct sg_ctx *c, const char *path);
/* The digest of the layer an entry comes from, "?" when it has none. */
const char *sg_layer_of (const struct sg_ctx *c, const struct ib_fs_entry *e);
/* Whether a dotted module is one of the checked packages or below one. */
bool sg_in_packages (const struct sg_ctx *c, const char *module);
/* The package a file's relative imports resolve against (allocated). */
char *sg_package_of (const struct sg_ctx *c, const char *path);
/* The dotted module a .py file is: "torch/nn/__init__.py" -> "torch.nn" (allocated). */
char *sg_module_of (const struct sg_ctx *c, const char *path);
/* A regular .py file below the python path; a path that may be one. */
bool sg_is_py_under_root (const struct sg_ctx *c, const struct ib_fs_entry *e);
bool sg_is_py_path_under_root (const struct sg_ctx *c, const char *path);
/* Adds E to a list of entries to extract, once. */
void sg_want (const struct ib_fs_entry ***list, size_t *n, const struct ib_fs_entry *e);
/* Checks one import of FILE against the merged image; VIA is appended to
 * each problem ("" or where the import comes from). */
void sg_check_import (struct sg_ctx *c, const char *file, const struct ib_py_import *im, const char *via);
/* Whether IM runs when its file does, as the image's interpreter decides
 * its conditions (pycond.h); one that never runs is counted as such. */
enum ib_py_truth sg_import_runs (struct sg_ctx *c, const struct ib_py_import *im);
/* Why IM's failure would be a warning (written to survive it, stated
 * absent by ALLOWED, under a condition only the run decides), or "" for an
 * error; malloc'd. */
char *sg_why_a_warning (const struct ib_py_import *im, enum ib_py_truth runs, const char *allowed);

/* checked_memo.c: the checked files WANTED (N of them) from the caches,
 * in the order the layers hold them, as reading them would have added
 * them; false, C untouched, when that order or a record is not known. */
bool sg_checked_from_caches (struct sg_ctx *c, const struct ib_fs_entry *const *wanted, size_t n);
/* Keep the order of the checked files just read (C->read_order). */
void sg_checked_order_save (struct sg_ctx *c);

/* revimports.c: the base's modules that import names from a module the
 * overlay replaces, checked against the overlay's version. */
int sg_check_reverse_edges (struct sg_ctx *c, ib_error_t *err);

#endif
