/* The symbol gate's caches in the store, each keyed by a content digest so
 * that nothing in them can go stale: what a Python file defines and imports
 * (pysyms/), a shared object's dynamic symbols (elfsyms/), and whether an
 * interpreter compiles a file (pysyntax/INTERPRETER/).  Each entry is a
 * header line, lines, and an end marker: an entry cut short is recomputed,
 * never half-trusted.  A cache that cannot be written costs only time. */
#ifndef IB_SYMCACHE_H
#define IB_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "symbol-check/elfsyms.h"
#include "symbol-check/pysyms.h"

void ib_symcache_save (const char *dir, const char *digest, const char *header, char *const *lines, size_t n);
/* The header (in *HEADER, inside *TEXT) and the lines (malloc'd); false when absent or cut. */
bool ib_symcache_load (const char *dir, const char *digest, char **text, char **header, char ***lines, size_t *n);

/* A Python file scanned with PACKAGE (its relative imports resolve there). */
void ib_symcache_save_py (const char *dir, const char *digest, const char *package, const struct ib_py_module *m);
struct ib_py_module *ib_symcache_load_py (const char *dir, const char *digest, const char *package);

void ib_symcache_save_elf (const char *dir, const char *digest, const struct ib_elf_symbols *s);
struct ib_elf_symbols *ib_symcache_load_elf (const char *dir, const char *digest);

/* Syntax: "ok", or the refusal's line and message. */
void ib_symcache_save_syntax (const char *dir, const char *digest, bool refused, int line, const char *msg);
bool ib_symcache_load_syntax (const char *dir, const char *digest, bool *refused, int *line, char **msg);

#endif
