/* The loader, simulated over an image's merged file system: what glibc's
 * ld.so would do to load one object, without running anything, for any
 * architecture.
 *
 * Loading: the DT_NEEDED closure in the loader's breadth-first order; a
 * name already loaded (by its path, a name it was loaded by, or its SONAME)
 * is reused; otherwise the name is searched in the DT_RPATH of the loading
 * object and of its loaders up to the main program (unless the loading
 * object has DT_RUNPATH), LD_LIBRARY_PATH, the loading object's
 * DT_RUNPATH, the ld.so.conf folders and the default folders (the last two
 * not for DF_1_NODEFLIB); a file of another class or machine, or not ELF,
 * is skipped as the loader skips it; the same file reached by two paths is
 * one object.
 *
 * Two ways to load an object.  As `ldd -r OBJ` does: OBJ is the main
 * program, its closure is the global scope.  As the image's Python loads an
 * extension module: the interpreter's closure is the global scope, the
 * PRELOADS (RTLD_GLOBAL) join it, and OBJ is dlopen'd RTLD_LOCAL: the
 * objects it brings look symbols up in the global scope, then in OBJ's
 * closure.
 *
 * Checks, on each object the load brings: every verneed (FILE, VERSION) is
 * defined by the loaded FILE; every undefined non-weak symbol is defined,
 * with glibc's version rules, by an object of its scope. */
#ifndef IB_RESOLVE_H
#define IB_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "symbol-check/link-check/elfdyn.h"
#include "symbol-check/link-check/ldpaths.h"

/* The record of a regular file of the view: returns 1 with *OUT (NULL when
 * the file is not an ELF object), or 0 when it has not been read yet (the
 * caller reads the files it was asked for, then loads again). */
typedef int (*ib_link_record_fn) (void *data, const struct ib_fs_entry *file, const struct ib_elf_link **out);

/* The whole record of FILE, symbols included, when the record function
 * gave a head (ib_elf_link_head): held until RELEASE; NULL when it cannot
 * be had (the functions' owner says so).  Lookups get the records of one
 * or two objects at a time, so that their owner may keep them within a
 * budget (reccache.h).  Without these functions the records are whole. */
typedef const struct ib_elf_link *(*ib_link_symbols_fn) (void *data, const struct ib_fs_entry *file);
typedef void (*ib_link_release_fn) (void *data, const struct ib_fs_entry *file);

/* A library that the container runtime injects (libcuda.so.1): its absence
 * from the image is no error.  An undefined symbol matching PATTERN that
 * nothing in the image defines, in a process that needs it, is checked
 * against DRIVER when one was declared, else reported as unchecked. */
struct ib_link_injected
{
  const char *soname;
  const char *pattern; /* fnmatch; NULL: none of its symbols are expected */
  const struct ib_elf_link *driver;
};

struct ib_linker_config
{
  const struct ib_fsview *view;
  const struct ib_link_paths *paths;
  ib_link_record_fn record;
  ib_link_symbols_fn symbols;
  ib_link_release_fn release;
  void *data;
  const struct ib_link_injected *injected;
  size_t n_injected;
  char *const *allow; /* fnmatch patterns of symbols allowed to stay undefined */
  size_t n_allow;
};

enum ib_link_kind
{
  IB_LINK_MISSING,    /* a DT_NEEDED found nowhere (error) */
  IB_LINK_UNDEFINED,  /* a symbol no object of the scope defines (error) */
  IB_LINK_VERSION,    /* a verneed version the loaded file does not define (error) */
  IB_LINK_MACHINE,    /* the object is for another machine or class (error) */
  IB_LINK_NOT_ELF,    /* the object is not ELF (error when named) */
  IB_LINK_NO_VERINFO, /* versions needed of a file that defines none (warning, as ld.so) */
  IB_LINK_SHADOWED,   /* another copy of a library that the loader does not take (warning) */
  IB_LINK_UNCHECKED,  /* a symbol left to the driver injected at run time (warning) */
  IB_LINK_ALLOWED,    /* undefined, allowed by the definition (note) */
};

struct ib_link_finding
{
  enum ib_link_kind kind;
  bool is_error;
  char *object;  /* the view path of the object concerned */
  char *name;    /* the library, symbol or version */
  char *version; /* a symbol's version, or NULL */
  char *detail;  /* where the loader looked, what the scope was, ... */
};

struct ib_link_loaded
{
  char *name; /* the path the loader named it by (ldd's left column) */
  char *path; /* its file's view path; NULL when not found */
  bool driver; /* injected by the runtime, absent from the image */
};

struct ib_link_object
{
  char *path;      /* view path */
  char *needs[3];  /* the highest GLIBC_, GLIBCXX_, CXXABI_ version needed, or NULL */
};

struct ib_link_report
{
  char *root;     /* view path */
  bool python;    /* loaded into the interpreter */
  size_t n_loaded;
  struct ib_link_loaded *loaded; /* what the load brought, in order, the root first */
  size_t n_objects;
  struct ib_link_object *objects; /* the objects checked */
  size_t n_findings;
  struct ib_link_finding *findings;
  size_t refs_checked;
};

/* How ROOT is loaded: INTERPRETER (a view path) NULL for `ldd -r`. */
struct ib_link_context
{
  const char *interpreter;
  char *const *preloads; /* view paths */
  size_t n_preloads;
  bool python_symbols; /* no interpreter in the image: Py* and _Py* count as defined */
  bool hosted;         /* a symbol defined elsewhere in the image is left to the program that loads
                        * the root (linkgate.h: ib_native_rules.hosted), unchecked */
};

struct ib_linker;

struct ib_linker *ib_linker_new (const struct ib_linker_config *cfg);
void ib_linker_free (struct ib_linker *k);

/* Load ROOT (a view path of a regular file).  1: records are missing (the
 * record function was asked for them); 0: done, and with CHECK the report
 * in *OUT.  Never fails otherwise. */
int ib_linker_load (struct ib_linker *k, const char *root, const struct ib_link_context *ctx, bool check,
                    struct ib_link_report **out);
void ib_link_report_free (struct ib_link_report *r);

/* The highest of the versions named PREFIX ("GLIBC_") that L defines; NULL. */
const char *ib_link_highest_version (const struct ib_elf_link *l, const char *prefix);

extern const char *const ib_link_version_prefixes[3]; /* "GLIBC_", "GLIBCXX_", "CXXABI_" */

#endif
