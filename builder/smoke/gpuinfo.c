#include "builder/smoke/gpuinfo.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/runner/bundle.h"

int
ib_gpu_parse (const char *text, struct ib_gpu **out, size_t *n, ib_error_t *err)
{
  *out = NULL;
  *n = 0;
  for (const char *l = text; l && *l;)
    {
      const char *e = strchr (l, '\n');
      cleanup_free char *line = strndup (l, e ? (size_t) (e - l) : strlen (l));
      l = e ? e + 1 : NULL;
      struct ib_gpu g = { 0 };
      int name_at = 0;
      const char *tab1 = strchr (line, '\t'), *tab2 = tab1 ? strchr (tab1 + 1, '\t') : NULL;
      if (tab2 == NULL || sscanf (line, "%d\t%u.%u\t%n", &g.index, &g.cc.major, &g.cc.minor, &name_at) != 3
          || name_at != tab2 - line + 1)
        {
          free (*out);
          *out = NULL;
          *n = 0;
          return ib_error (err, IB_EENV, "the CUDA driver's GPU list: unexpected line `%s`", line);
        }
      snprintf (g.name, sizeof (g.name), "%s", line + name_at);
      *out = ib_xrealloc (*out, (*n + 1) * sizeof (**out));
      (*out)[(*n)++] = g;
    }
  return 0;
}

/* In the child: the list on FD, or an exit status that says why not. */
static void __attribute__ ((noreturn))
query_child (int fd)
{
  const char *dir = ib_driver_dir ();
  char path[4096];
  snprintf (path, sizeof (path), "%s/libcuda.so.1", dir ? dir : "/nonexistent");
  void *lib = dlopen (path, RTLD_NOW);
  if (lib == NULL)
    _exit (3);
  int (*init) (unsigned) = (int (*) (unsigned)) dlsym (lib, "cuInit");
  int (*count) (int *) = (int (*) (int *)) dlsym (lib, "cuDeviceGetCount");
  int (*get) (int *, int) = (int (*) (int *, int)) dlsym (lib, "cuDeviceGet");
  int (*attr) (int *, int, int) = (int (*) (int *, int, int)) dlsym (lib, "cuDeviceGetAttribute");
  int (*name) (char *, int, int) = (int (*) (char *, int, int)) dlsym (lib, "cuDeviceGetName");
  int n = 0;
  if (!init || !count || !get || !attr || !name || init (0) != 0 || count (&n) != 0)
    _exit (4);
  FILE *f = fdopen (fd, "w");
  for (int i = 0; f && i < n; i++)
    {
      int dev = 0, major = 0, minor = 0;
      char nm[96] = "";
      if (get (&dev, i) != 0 || attr (&major, 75, dev) != 0 || attr (&minor, 76, dev) != 0)
        _exit (5);
      name (nm, sizeof (nm), dev);
      nm[strcspn (nm, "\t\n")] = '\0';
      fprintf (f, "%d\t%d.%d\t%s\n", i, major, minor, nm);
    }
  _exit (f && fclose (f) == 0 ? 0 : 6);
}

int
ib_gpu_query (struct ib_gpu **out, size_t *n, ib_error_t *err)
{
  int p[2];
  if (pipe (p) < 0)
    return ib_error_errno (err, errno, IB_EENV, "pipe");
  fflush (NULL);
  pid_t pid = fork ();
  if (pid < 0)
    return ib_error_errno (err, errno, IB_EENV, "fork");
  if (pid == 0)
    {
      close (p[0]);
      query_child (p[1]);
    }
  close (p[1]);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream (&text, &len);
  char buf[4096];
  ssize_t k;
  while ((k = read (p[0], buf, sizeof (buf))) > 0)
    fwrite (buf, 1, (size_t) k, mem);
  fclose (mem);
  close (p[0]);
  int st = 0;
  waitpid (pid, &st, 0);
  int r;
  if (!WIFEXITED (st) || WEXITSTATUS (st) != 0)
    r = ib_error (err, IB_EENV, "the host's CUDA driver could not list the GPUs (%s %d)",
                  WIFEXITED (st) ? "step" : "signal", WIFEXITED (st) ? WEXITSTATUS (st) : WTERMSIG (st));
  else
    r = ib_gpu_parse (text, out, n, err);
  free (text);
  return r;
}
