/* GPU code in a file (kernels/cudabin.c): host ELF with .nv_fatbin or
 * __nv_relfatbin, bare fatbin or cubin, compressed entries.  The input is
 * the file, read through a memory fd.  What it finds must survive the
 * per-content cache (kernels/kindex.c): its record, made from the list or
 * streamed while the file is inspected again, reads back as the same
 * entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kindex.h"
#include "tests/fuzz/fuzz.h"

/* F and the record NAME read back, compared in their JSON form. */
static void
same_as_record (const struct ib_cuda_file *f, const char *name)
{
  struct ib_cuda_file *back = ib_kernels_cache_load (fuzz_scratch (), name);
  if (back == NULL)
    fuzz_fail ("the record `%s` does not read back", name);
  cJSON *j = ib_cuda_file_json (f), *j2 = ib_cuda_file_json (back);
  char *a = cJSON_PrintUnformatted (j), *b = cJSON_PrintUnformatted (j2);
  if (strcmp (a, b) != 0)
    fuzz_fail ("the record `%s` changes the entries:\n%s\n%s", name, a, b);
  free (a);
  free (b);
  cJSON_Delete (j);
  cJSON_Delete (j2);
  ib_cuda_file_free (back);
}

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
  ib_kernels_cache_save (fuzz_scratch (), "listed", f);
  same_as_record (f, "listed");
  if (ib_kernels_cache_inspect (fuzz_scratch (), "streamed", fd, "fuzz.bin", &err) < 0)
    fuzz_fail ("the streamed inspection fails where the listed one did not: %s", err ? err->msg : "?");
  same_as_record (f, "streamed");
  ib_cuda_file_free (f);
  return 0;
}
