/* imgverify: checks existing images and files.  So far: --python-symbols. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../symbol-check/pysyms.h"
#include "../util/cleanup.h"
#include "../util/fsutil.h"

#define MAX_SOURCE (64u << 20)

static const char usage[] =
    "Usage: imgverify [OPTIONS] REF\n"
    "       imgverify --python-symbols FILE...\n"
    "\n"
    "Verify an existing image: every blob's digest and size, every diff_id,\n"
    "and the gates of its definition.  (Image verification is not built yet.)\n"
    "\n"
    "  --python-symbols FILE...  print, as JSON on stdout, what each Python file\n"
    "                            defines at module level and imports:\n"
    "                            {\"files\":[{\"path\",\"definitions\":[...],\n"
    "                             \"imports\":[{\"line\",\"module\",\"level\",\n"
    "                             \"names\":[{\"name\",\"asname\"}]}]}]}\n"
    "                            (a plain `import a.b as c` has names [] and an\n"
    "                            \"asname\" on the entry; relative imports are\n"
    "                            resolved from the file's package on disk)\n"
    "  -h, --help                this text\n"
    "\n"
    "Exit codes: 0 pass, 2 usage, 4 integrity, 5 symbols, 6 kernels, 7 smoke,\n"
    "8 environment.\n";

static int
python_symbols (int n, char **files)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON *list = cJSON_AddArrayToObject (doc, "files");
  int rc = 0;
  for (int i = 0; i < n; i++)
    {
      ib_error_t err = NULL;
      cleanup_free char *src = NULL, *module = NULL, *package = NULL;
      size_t len;
      struct ib_py_module *m = NULL;
      if (ib_read_file (files[i], MAX_SOURCE, &src, &len, &err) < 0
          || ib_py_module_name_of_path (files[i], &module, &package, &err) < 0
          || ib_py_scan (src, len, package, &m, &err) < 0)
        {
          ib_error_wrap (&err, "%s", files[i]);
          rc = ib_error_report ("imgverify", &err);
          continue;
        }
      cJSON_AddItemToArray (list, ib_py_module_json (files[i], m));
      ib_py_module_free (m);
    }
  char *text = cJSON_PrintUnformatted (doc);
  puts (text);
  free (text);
  cJSON_Delete (doc);
  return rc;
}

int
main (int argc, char **argv)
{
  enum
  {
    OPT_PY = 256
  };
  static const struct option longopts[] = {
    { "python-symbols", no_argument, NULL, OPT_PY },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  bool py = false;
  int o;
  while ((o = getopt_long (argc, argv, "h", longopts, NULL)) != -1)
    switch (o)
      {
      case OPT_PY: py = true; break;
      case 'h': fputs (usage, stdout); return 0;
      default: fputs (usage, stderr); return IB_EUSAGE;
      }
  if (py && optind < argc)
    return python_symbols (argc - optind, argv + optind);
  fputs (usage, stderr);
  return IB_EUSAGE;
}
