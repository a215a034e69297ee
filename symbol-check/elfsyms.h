/* The dynamic symbols an ELF shared object exports (.dynsym, defined ones),
 * with their versions from .gnu.version / .gnu.version_d: "name" when
 * unversioned, "name@@V" for the default version, "name@V" for another.
 * 64-bit little-endian objects (x86-64 and aarch64, whatever the host). The
 * file is read section by section with pread, never whole. */
#ifndef IB_ELFSYMS_H
#define IB_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

struct ib_elf_symbols
{
  unsigned machine; /* e_machine: 62 x86-64, 183 aarch64 */
  size_t n;
  char **names; /* sorted */
};

int ib_elf_dynsyms (int fd, const char *what, struct ib_elf_symbols **out, ib_error_t *err);
void ib_elf_symbols_free (struct ib_elf_symbols *s);
/* REQUIRED is "name" (any version) or "name@V" (that version, default or not). */
bool ib_elf_exports (const struct ib_elf_symbols *s, const char *required);

#endif
