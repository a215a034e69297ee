/* A record of a whole layer read (layers/read/readthrough.c), as a damaged or
 * hostile store would hold it.  It reads as none or as a record; a record
 * read is written back to the same bytes (one way to read each record:
 * nothing taken on trust and dropped, nothing read two ways).  The input
 * is the record's body: the harness seals it (its end line, the SHA-256
 * of the body), or a mutated body would never get past the seal.  The
 * seal itself is the unit tests' (readthrough_record_round_trip_and_refusals). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/read/readthrough.h"
#include "util/fsutil.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static struct ib_store *s;
  char root[4200];
  snprintf (root, sizeof (root), "%s/store", fuzz_scratch ());
  if (s == NULL && ib_store_open (root, &s, NULL) < 0)
    fuzz_fail ("no store at %s", root);
  ib_digest a, b;
  ib_sha256_buf ("a", 1, &a);
  ib_sha256_buf ("b", 1, &b);
  char *path = ib_store_cache_file (s, "read-through", &a, true, NULL);
  char *again = ib_store_cache_file (s, "read-through", &b, true, NULL);
  ib_digest seal;
  ib_sha256_buf (data, size, &seal);
  char end[IB_DIGEST_LEN + 8];
  snprintf (end, sizeof (end), "end %s\n", seal.s);
  size_t total = size + strlen (end);
  unsigned char *file = malloc (total);
  memcpy (file, data, size);
  memcpy (file + size, end, strlen (end));
  FILE *f = path ? fopen (path, "wb") : NULL;
  if (f == NULL || fwrite (file, 1, total, f) != total || fclose (f) != 0)
    fuzz_fail ("cannot write %s", path ? path : "(none)");
  remove (again);
  struct ib_readthrough rec;
  if (ib_readthrough_load (s, &a, &rec) == 1)
    {
      if (ib_readthrough_save (s, &b, &rec, NULL) < 0)
        fuzz_fail ("a record read cannot be written again");
      char *text = NULL;
      size_t len = 0;
      if (ib_read_file (again, IB_READTHROUGH_MAX, &text, &len, NULL) < 0)
        fuzz_fail ("a record read is not written again");
      if (len != total || memcmp (text, file, total) != 0)
        fuzz_fail ("a record read is written back otherwise (%zu bytes, then %zu)", total, len);
      free (text);
      ib_readthrough_clear (&rec);
    }
  free (file);
  free (path);
  free (again);
  return 0;
}
