/* A GPU-code record of the store's cache (kernels/kindex.c), as a damaged
 * or hostile store would hold it.  It reads as none or as a list; a list
 * read is written back to the same bytes (what is read is what was
 * written, nothing taken on trust and dropped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kindex.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_write ("kernels/record", data, size);
  char dir[4200];
  snprintf (dir, sizeof (dir), "%s/kernels", fuzz_scratch ());
  struct ib_cuda_file *f = ib_kernels_cache_load (dir, "record");
  if (f == NULL)
    return 0;
  char arch[64];
  for (size_t i = 0; i < f->n; i++)
    ib_cuda_entry_arch (&f->e[i], arch, sizeof (arch));
  ib_kernels_cache_save (dir, "again", f);
  char path[4300];
  snprintf (path, sizeof (path), "%s/again", dir);
  FILE *again = fopen (path, "rb");
  if (again == NULL)
    fuzz_fail ("a record read is not written again");
  unsigned char *b = malloc (size + 1);
  size_t n = fread (b, 1, size + 1, again);
  fclose (again);
  if (n != size || memcmp (b, data, size) != 0)
    fuzz_fail ("a record read is written back otherwise (%zu bytes, then %zu)", size, n);
  free (b);
  ib_cuda_file_free (f);
  return 0;
}
