/* ELF dynamic symbols (symbol-check/elfsyms.c): the input is the file,
 * read through a memory fd with pread as the symbol gate reads one. */
#include <string.h>

#include "symbol-check/elfsyms.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  int fd = fuzz_memfd (data, size);
  struct ib_elf_symbols *s = NULL;
  ib_error_t err = NULL;
  if (ib_elf_dynsyms (fd, "fuzz.so", &s, &err) < 0)
    {
      if (err == NULL || err->msg == NULL)
        fuzz_fail ("ib_elf_dynsyms failed without a message");
      ib_error_release (&err);
      return 0;
    }
  for (size_t i = 0; i < s->n; i++)
    {
      if (i && strcmp (s->names[i - 1], s->names[i]) > 0)
        fuzz_fail ("symbols not sorted: `%s`, `%s`", s->names[i - 1], s->names[i]);
      if (!ib_elf_exports (s, s->names[i]))
        fuzz_fail ("ib_elf_exports misses `%s`", s->names[i]);
    }
  ib_elf_exports (s, "memcpy@GLIBC_2.14");
  ib_elf_symbols_free (s);
  return 0;
}
