/* GPU code in a file (kernels/cudabin.c): host ELF with .nv_fatbin or
 * __nv_relfatbin, bare fatbin or cubin, compressed entries.  The input is
 * the file, read through a memory fd.  What it finds must survive the
 * per-content cache: to JSON and back, the same entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cudabin.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  int fd = fuzz_memfd (data, size);
  struct ib_cuda_file *f = NULL;
  ib_error_t err = NULL;
  if (ib_cuda_inspect (fd, "fuzz.bin", &f, &err) < 0)
    {
      if (err == NULL || err->msg == NULL)
        fuzz_fail ("ib_cuda_inspect failed without a message");
      ib_error_release (&err);
      return 0;
    }
  char arch[64];
  for (size_t i = 0; i < f->n; i++)
    {
      ib_cuda_entry_arch (&f->e[i], arch, sizeof (arch));
      ib_sass_runs_on (f->e[i].sm, f->e[i].variant, 12, 1);
    }
  cJSON *j = ib_cuda_file_json (f);
  char *a = cJSON_PrintUnformatted (j);
  struct ib_cuda_file *back = NULL;
  if (ib_cuda_file_from_json (j, &back, &err) < 0)
    fuzz_fail ("the cache form does not read back: %s", err ? err->msg : "?");
  cJSON *j2 = ib_cuda_file_json (back);
  char *b = cJSON_PrintUnformatted (j2);
  if (strcmp (a, b) != 0)
    fuzz_fail ("the cache form changes the entries:\n%s\n%s", a, b);
  free (a);
  free (b);
  cJSON_Delete (j);
  cJSON_Delete (j2);
  ib_cuda_file_free (back);
  ib_cuda_file_free (f);
  return 0;
}
