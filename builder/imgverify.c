/* imgverify: checks an existing image (integrity and gates).  Only its
 * usage exists so far; the checks arrive with the imgverify issue. */
#include <stdio.h>
#include <string.h>

#include "../util/error.h"

static const char usage[] = "Usage: imgverify [OPTIONS] REF\n"
                            "\n"
                            "Verify an existing image: every blob's digest and size, every diff_id,\n"
                            "and the gates of its definition.  (Not built yet: this prints its usage.)\n"
                            "\n"
                            "Exit codes: 0 pass, 2 usage, 4 integrity, 5 symbols, 6 kernels, 7 smoke,\n"
                            "8 environment.\n";

int
main (int argc, char **argv)
{
  if (argc == 2 && (strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "--help") == 0))
    {
      fputs (usage, stdout);
      return 0;
    }
  fputs (usage, stderr);
  return IB_EUSAGE;
}
