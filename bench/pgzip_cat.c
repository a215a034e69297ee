/* bench/pgzip.sh's filter: stdin through util/pgzip.c (level 6, THREADS
 * threads) to stdout, as gzip -6 and pigz -6 are timed on the same input. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/pgzip.h"

static int
to_stdout (void *data, const void *buf, size_t len, ib_error_t *err)
{
  (void) data;
  if (fwrite (buf, 1, len, stdout) != len)
    return ib_error (err, IB_EENV, "write stdout");
  return 0;
}

int
main (int argc, char **argv)
{
  int threads = argc > 1 ? atoi (argv[1]) : ib_pgzip_default_threads ();
  ib_error_t err = NULL;
  struct ib_pgzip *z = NULL;
  if (ib_pgzip_new (6, threads, to_stdout, NULL, &z, &err) < 0)
    return ib_error_report ("pgzip_cat", &err);
  cleanup_free char *buf = malloc (1 << 16);
  ssize_t n;
  int ret = 0;
  while (ret == 0 && (n = read (0, buf, 1 << 16)) > 0)
    ret = ib_pgzip_write (z, buf, (size_t) n, &err);
  if (ret == 0)
    ret = ib_pgzip_finish (z, &err);
  ib_pgzip_free (z);
  if (ret < 0 || fflush (stdout) != 0)
    return ib_error_report ("pgzip_cat", &err);
  return 0;
}
