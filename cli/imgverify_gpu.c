/* imgverify --kernels and --jit-budget: the GPU code of files, or of an
 * image's files, listed (a table, or --json), and with --jit-budget what
 * the driver would compile at load time on the target named by --gpu and
 * --driver.  The checks themselves are kernels/; this file only prints. */
#include "cli/imgverify_gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cudabin.h"
#include "kernels/jitbudget.h"
#include "kernels/kgate.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

static void
print_kernel_table (const char *path, const struct ib_cuda_file *f)
{
  if (f->n == 0)
    {
      printf ("%s: no GPU code\n", path);
      return;
    }
  printf ("%s\n", path);
  size_t relocatable = 0;
  for (size_t i = 0; i < f->n; i++)
    {
      const struct ib_cuda_entry *e = &f->e[i];
      /* Apart: nvlink's input, not code the CUDA runtime loads. */
      if (e->relocatable)
        {
          relocatable++;
          continue;
        }
      char arch[32];
      ib_cuda_entry_arch (e, arch, sizeof (arch));
      printf ("  %-5s %-12s %-5s %10llu B %10llu B  %zu kernel%s", ib_cuda_kind_name (e->kind), arch, e->compression,
              (unsigned long long) e->size, (unsigned long long) e->uncompressed_size, e->n_kernels,
              e->n_kernels == 1 ? "" : "s");
      for (size_t k = 0; k < e->n_kernels && k < 4; k++)
        printf ("%s%s", k ? ", " : ": ", e->kernels[k]);
      printf ("%s\n", e->n_kernels > 4 ? ", ..." : "");
    }
  if (relocatable)
    printf ("  and %zu relocatable entries in __nv_relfatbin (-rdc: linked at build time, never loaded)\n",
            relocatable);
}

/* A JSON value printed unformatted, then freed. */
static void
put_json (cJSON *j)
{
  char *text = cJSON_PrintUnformatted (j);
  fputs (text, stdout);
  free (text);
  cJSON_Delete (j);
}

/* {"path":…,"entries":[…]}, written an entry at a time: as one tree and
 * its text, libtorch_cuda.so's list took the peak from 15 to 125 MB. */
static void
print_kernel_json (const char *path, const struct ib_cuda_file *f)
{
  fputs ("{\"path\":", stdout);
  put_json (cJSON_CreateString (path));
  fputs (",\"entries\":[", stdout);
  for (size_t i = 0; i < f->n; i++)
    {
      if (i)
        putchar (',');
      put_json (ib_cuda_entry_json (&f->e[i]));
    }
  fputs ("]}", stdout);
}

/* The JIT budget, a table or JSON; JB is freed. */
static void
print_budget (struct ib_jit_budget *jb, bool json)
{
  if (json)
    ib_jit_budget_write_json (stdout, jb);
  else
    ib_jit_budget_print (stdout, jb);
  ib_jit_budget_free (jb);
}

/* What --kernels and --jit-budget print: the GPU code of some files. */
struct code_set
{
  size_t n;
  char **paths;
  struct ib_cuda_file **code;
};

static void
code_set_add (struct code_set *cs, const char *path, struct ib_cuda_file *f)
{
  cs->paths = ib_xrealloc (cs->paths, (cs->n + 1) * sizeof (*cs->paths));
  cs->code = ib_xrealloc (cs->code, (cs->n + 1) * sizeof (*cs->code));
  cs->paths[cs->n] = ib_xstrdup (path);
  cs->code[cs->n++] = f;
}

static void
code_set_clear (struct code_set *cs)
{
  for (size_t i = 0; i < cs->n; i++)
    {
      free (cs->paths[i]);
      ib_cuda_file_free (cs->code[i]);
    }
  free (cs->paths);
  free (cs->code);
}

/* The table or JSON of --kernels, or with BUDGET the JIT budget against it. */
static void
emit_code (const struct code_set *cs, bool json, const struct ib_target *budget)
{
  if (budget)
    {
      print_budget (ib_jit_budget_compute ((const char *const *) cs->paths, cs->code, cs->n, budget), json);
      return;
    }
  if (json)
    fputs ("{\"files\":[", stdout);
  bool first = true;
  for (size_t i = 0; i < cs->n; i++)
    {
      if (json)
        {
          fputs (first ? "" : ",", stdout);
          print_kernel_json (cs->paths[i], cs->code[i]);
          first = false;
        }
      else
        print_kernel_table (cs->paths[i], cs->code[i]);
    }
  if (json)
    fputs ("]}\n", stdout);
}

/* GPU code in files on disk. */
int
iv_kernels_of_files (int n, char **files, bool json, const struct ib_target *budget)
{
  struct code_set cs = { 0 };
  int rc = 0;
  for (int i = 0; i < n; i++)
    {
      ib_error_t err = NULL;
      struct ib_cuda_file *f = NULL;
      int fd = open (files[i], O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        ib_error_errno (&err, errno, IB_EUSAGE, "open `%s`", files[i]);
      else if (ib_cuda_inspect (fd, files[i], &f, &err) == 0)
        code_set_add (&cs, files[i], f);
      if (fd >= 0)
        close (fd);
      if (err)
        rc = ib_error_report ("imgverify", &err);
    }
  emit_code (&cs, json, budget);
  code_set_clear (&cs);
  return rc;
}

/* The walks over an image's files (kgate.h: one file's GPU code in
 * memory at a time): all of an image's at once took --jit-budget over
 * the CUDA base to 113 MB of heap, 90 of it kernel names. */
struct image_walk
{
  const struct ib_fs_entry *const *files;
  bool json, first;
};

static int
walk_print (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err)
{
  (void) err;
  struct image_walk *w = data;
  cleanup_free char *path = ib_xasprintf ("/%s", w->files[i]->path);
  if (w->json)
    {
      fputs (w->first ? "" : ",", stdout);
      print_kernel_json (path, code);
      w->first = false;
    }
  else if (code->n)
    print_kernel_table (path, code);
  return 0;
}

/* The table or JSON of --kernels over N of an image's FILES, or with
 * BUDGET the JIT budget against them.  Nothing is printed on an error
 * before the first file (the JSON of a walk stopped later is cut short). */
static int
walk_image (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files, size_t n,
            bool json, const struct ib_target *budget, ib_error_t *err)
{
  struct image_walk w = { files, json, true };
  int r;
  if (budget)
    {
      struct ib_jit_budget *jb = NULL;
      r = ib_kernels_jit_budget (s, img, files, n, budget, &jb, NULL, err);
      if (r == 0)
        print_budget (jb, json);
      return r;
    }
  if (json)
    fputs ("{\"files\":[", stdout);
  r = ib_kernels_each_file (s, img, files, n, walk_print, &w, err);
  if (json)
    fputs ("]}\n", stdout);
  return r;
}

/* GPU code in the files of an image that match GLOBS (default: shared
 * objects, cubins, fatbins), read out of its layers through the store. */
int
iv_kernels_of_image (const char *store_path, const struct ib_remote_options *remote, const char *ref, int n_globs,
                  char **globs, bool json, const struct ib_target *budget)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (store_path);
  struct ib_store *s = NULL;
  struct ib_image *img = NULL;
  struct ib_fsview *view = NULL;
  const struct ib_fs_entry **files = NULL;
  size_t n = 0;
  int r = ib_image_open_in_place (root, ref, NULL, remote, &s, &img, &err);
  if (r == 0)
    r = ib_fsview_of_image (s, img, &view, &err);
  if (r == 0)
    n = ib_kernels_glob_files (view, globs, (size_t) n_globs, &files);
  if (r == 0)
    r = walk_image (s, img, files, n, json, budget, &err);
  free (files);
  ib_fsview_free (view);
  ib_image_free (img);
  ib_store_free (s);
  return r < 0 ? ib_error_report ("imgverify", &err) : 0;
}
