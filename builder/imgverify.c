/* imgverify: checks existing images and files.  So far: --python-symbols. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "../kernels/cudabin.h"
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

static void
print_kernel_table (const char *path, const struct ib_cuda_file *f)
{
  if (f->n == 0)
    {
      printf ("%s: no GPU code\n", path);
      return;
    }
  printf ("%s\n", path);
  for (size_t i = 0; i < f->n; i++)
    {
      const struct ib_cuda_entry *e = &f->e[i];
      char arch[32];
      ib_cuda_entry_arch (e, arch, sizeof (arch));
      printf ("  %-5s %-12s %-5s %10llu B %10llu B  %zu kernel%s", ib_cuda_kind_name (e->kind), arch, e->compression,
              (unsigned long long) e->size, (unsigned long long) e->uncompressed_size, e->n_kernels,
              e->n_kernels == 1 ? "" : "s");
      for (size_t k = 0; k < e->n_kernels && k < 4; k++)
        printf ("%s%s", k ? ", " : ": ", e->kernels[k]);
      printf ("%s\n", e->n_kernels > 4 ? ", ..." : "");
    }
}

/* GPU code in files on disk. */
static int
kernels_of_files (int n, char **files, bool json)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON *list = cJSON_AddArrayToObject (doc, "files");
  int rc = 0;
  for (int i = 0; i < n; i++)
    {
      ib_error_t err = NULL;
      struct ib_cuda_file *f = NULL;
      int fd = open (files[i], O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        ib_error_errno (&err, errno, IB_EUSAGE, "open `%s`", files[i]);
      else if (ib_cuda_inspect (fd, files[i], &f, &err) == 0)
        {
          if (json)
            {
              cJSON *j = ib_cuda_file_json (f);
              cJSON_AddItemToObjectCS (j, "path", cJSON_CreateString (files[i]));
              cJSON_AddItemToArray (list, j);
            }
          else
            print_kernel_table (files[i], f);
          ib_cuda_file_free (f);
        }
      if (fd >= 0)
        close (fd);
      if (err)
        rc = ib_error_report ("imgverify", &err);
    }
  if (json)
    {
      char *text = cJSON_PrintUnformatted (doc);
      puts (text);
      free (text);
    }
  cJSON_Delete (doc);
  return rc;
}

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
    OPT_PY = 256,
    OPT_KERNELS,
    OPT_JSON,
  };
  static const struct option longopts[] = {
    { "python-symbols", no_argument, NULL, OPT_PY },
    { "kernels", no_argument, NULL, OPT_KERNELS },
    { "json", no_argument, NULL, OPT_JSON },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  bool py = false, kernels = false, json = false;
  int o;
  while ((o = getopt_long (argc, argv, "h", longopts, NULL)) != -1)
    switch (o)
      {
      case OPT_PY: py = true; break;
      case OPT_KERNELS: kernels = true; break;
      case OPT_JSON: json = true; break;
      case 'h': fputs (usage, stdout); return 0;
      default: fputs (usage, stderr); return IB_EUSAGE;
      }
  if (py && optind < argc)
    return python_symbols (argc - optind, argv + optind);
  if (kernels && optind < argc)
    return kernels_of_files (argc - optind, argv + optind, json);
  fputs (usage, stderr);
  return IB_EUSAGE;
}
