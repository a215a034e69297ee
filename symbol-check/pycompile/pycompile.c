#include "symbol-check/pycompile/pycompile.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/runner/bundle.h"
#include "symbol-check/pycompile/pyroot.h"
#include "symbol-check/pycompile/qemu.h"

/* Reads "LEN\nPATH\n" + LEN bytes records; answers one line each: "ok", or
 * "LINE MESSAGE".  Null bytes are a ValueError before 3.12, a SyntaxError
 * after; import refuses both. */
static const char driver[] = "import sys\n"
                             "r = sys.stdin.buffer\n"
                             "w = sys.stdout\n"
                             "while True:\n"
                             "    h = r.readline()\n"
                             "    if not h:\n"
                             "        break\n"
                             "    n = int(h)\n"
                             "    name = r.readline()[:-1].decode('utf-8', 'surrogateescape')\n"
                             "    src = r.read(n)\n"
                             "    try:\n"
                             "        compile(src, name, 'exec', dont_inherit=True)\n"
                             "        w.write('ok\\n')\n"
                             "    except SyntaxError as e:\n"
                             "        w.write('%d %s\\n' % (e.lineno or 0, str(e.msg).replace('\\n', ' ')))\n"
                             "    except Exception as e:\n"
                             "        w.write('0 %s: %s\\n' % (type(e).__name__, str(e).replace('\\n', ' ')))\n"
                             "    w.flush()\n";

/* Written a file at a time: a copy of every source in one buffer was the
 * peak of a build whose overlay is torch's whole tree (31 MB of Python,
 * 88 MiB of RSS with the sources the gate holds). */
static int
write_input (const char *path, const struct ib_py_source *files, size_t n, ib_error_t *err)
{
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *h = ib_xasprintf ("%zu\n%s\n", files[i].len, files[i].path);
      if (ib_write_all (fd, h, strlen (h), path, err) < 0 || ib_write_all (fd, files[i].src, files[i].len, path, err) < 0)
        return -1;
    }
  return 0;
}

static int
read_answers (const char *path, struct ib_py_source *files, size_t n, ib_error_t *err)
{
  cleanup_free char *out = NULL;
  if (ib_read_file (path, 1u << 30, &out, NULL, err) < 0)
    return -1;
  char *save = NULL, *l = strtok_r (out, "\n", &save);
  for (size_t i = 0; i < n; i++, l = strtok_r (NULL, "\n", &save))
    {
      if (l == NULL)
        return ib_error (err, IB_EENV, "the interpreter answered %zu of %zu files", i, n);
      if (strcmp (l, "ok") == 0)
        continue;
      int off = 0;
      files[i].refused = true;
      sscanf (l, "%d %n", &files[i].line, &off);
      files[i].msg = ib_xstrdup (l + off);
    }
  return 0;
}

/* In the child: the image's layers as / of a private mount namespace; the
 * interpreter run by QEMU (a static qemu-user, opened before the chroot)
 * when it is not NULL. */
static void
child_in_image (const char *lower, const char *mnt, const char *qemu, const char *interpreter, int in, int out,
                int errfd)
{
  int qemu_fd = qemu ? open (qemu, O_RDONLY | O_CLOEXEC) : -1;
  if ((qemu && qemu_fd < 0) || unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    _exit (120);
  /* overlayfs wants two lower folders when it has no upper one. */
  int ok = strchr (lower, ':') ? mount ("overlay", mnt, "overlay", MS_RDONLY, ib_xasprintf ("lowerdir=%s", lower))
                               : mount (lower, mnt, NULL, MS_BIND | MS_RDONLY, NULL);
  if (ok < 0 || chroot (mnt) < 0 || chdir ("/") < 0)
    _exit (121);
  dup2 (in, 0);
  dup2 (out, 1);
  if (errfd >= 0)
    dup2 (errfd, 2);
  char *const argv[] = { (char *) qemu, (char *) interpreter, "-I", "-S", "-B", "-W", "ignore", "-c", (char *) driver,
                         NULL };
  char *const envp[] = { "PYTHONHASHSEED=0", "LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin", NULL };
  if (qemu_fd >= 0)
    fexecve (qemu_fd, argv, envp);
  else
    execve (interpreter, argv + 1, envp);
  _exit (127);
}

static void
child_on_host (const char *interpreter, int in, int out)
{
  dup2 (in, 0);
  dup2 (out, 1);
  char *const argv[] = { (char *) interpreter, "-I", "-S", "-B", "-W", "ignore", "-c", (char *) driver, NULL };
  execv (interpreter, argv);
  _exit (127);
}

/* LOWER: the image's files (NULL: INTERPRETER is the build machine's);
 * QEMU: the qemu-user that runs it there, or NULL; ERRFD: where the
 * interpreter's stderr goes, -1 for ours. */
static int
run (const char *work, const char *lower, const char *qemu, const char *interpreter, struct ib_py_source *files,
     size_t n, int errfd, ib_error_t *err)
{
  cleanup_free char *in_path = ib_path_join (work, "in"), *out_path = ib_path_join (work, "out");
  cleanup_free char *mnt = ib_path_join (work, "root");
  if (write_input (in_path, files, n, err) < 0)
    return -1;
  if (lower && mkdir (mnt, 0755) < 0)
    return ib_error_errno (err, errno, IB_EENV, "mkdir `%s`", mnt);
  cleanup_close int in = open (in_path, O_RDONLY | O_CLOEXEC);
  cleanup_close int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in < 0 || out < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", work);
  pid_t pid = fork ();
  if (pid < 0)
    return ib_error_errno (err, errno, IB_EENV, "fork");
  if (pid == 0)
    {
      if (lower)
        child_in_image (lower, mnt, qemu, interpreter, in, out, errfd);
      child_on_host (interpreter, in, out);
    }
  int status;
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return ib_error_errno (err, errno, IB_EENV, "waitpid");
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return ib_error (err, IB_EENV, "%s%s%s%s: exit %d", interpreter, lower ? " in a chroot of the image" : "",
                     qemu ? " under " : "", qemu ? qemu : "",
                     WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
  return read_answers (out_path, files, n, err);
}

/* Whether the image's INTERPRETER can run here, in a chroot: as it is, or
 * under qemu-user (*QEMU) when the image is of another architecture; else
 * *WHY says what is missing. */
static bool
image_can_run (const struct ib_image *img, const char *interpreter, char **qemu, char **why)
{
  *qemu = *why = NULL;
  if (interpreter == NULL)
    {
      *why = ib_xstrdup ("the image has no interpreter of its own");
      return false;
    }
  if (geteuid () != 0)
    {
      *why = ib_xasprintf ("the chroot of the image that runs %s needs root", interpreter);
      return false;
    }
  struct ib_platform host;
  ib_platform_host (&host);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive (img->config_json, "architecture");
  if (!cJSON_IsString (a) || strcmp (a->valuestring, host.architecture) == 0)
    return true;
  cleanup_free char *no = NULL;
  if (ib_qemu_find (a->valuestring, qemu, &no))
    return true;
  *why = ib_xasprintf ("%s is for %s, this machine is %s, and %s", interpreter, a->valuestring, host.architecture, no);
  return false;
}

/* Lower layers last, as overlayfs lists them. */
static int
lower_dirs (struct ib_pycompile *pc, char **out, ib_error_t *err)
{
  char *lower = ib_xstrdup ("");
  for (size_t i = 0; i < pc->img->n_layers; i++)
    {
      cleanup_free char *dir = NULL;
      if (ib_image_layer_dir (pc->s, pc->img, i, &dir, err) < 0)
        {
          free (lower);
          return -1;
        }
      char *next = *lower ? ib_xasprintf ("%s:%s", dir, lower) : ib_xstrdup (dir);
      free (lower);
      lower = next;
    }
  *out = lower;
  return 0;
}

/* The system's own interpreters only: a $PATH shim (pyenv) may be another Python. */
static char *
system_program (const char *name)
{
  static const char *const dirs[] = { "/usr/local/bin", "/usr/bin", "/bin", NULL };
  for (int i = 0; dirs[i]; i++)
    {
      char *p = ib_path_join (dirs[i], name);
      if (access (p, X_OK) == 0)
        return p;
      free (p);
    }
  return NULL;
}

/* Are the image's layers all extracted in the store already (a smoke test
 * made them, or an earlier build)?  Then they cost nothing to use. */
static bool
layers_extracted (struct ib_pycompile *pc)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (pc->s, "rootfs", &cache, NULL) < 0)
    return false;
  for (size_t i = 0; i < pc->img->n_layers; i++)
    {
      cleanup_free char *dir = ib_path_join (cache, ib_digest_hex (pc->img->diff_ids[i].s));
      struct stat st;
      if (!ib_store_blob_trusted (pc->s, &pc->img->layers[i].digest) || stat (dir, &st) < 0)
        return false;
    }
  return true;
}

static void
forget_answers (struct ib_py_source *files, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      free (files[i].msg);
      files[i].msg = NULL;
      files[i].refused = false;
      files[i].line = 0;
    }
}

/* In a chroot of the interpreter's own files (pyroot.h) rather than of the
 * whole image: 1 when that cannot answer (a record not cached, or the
 * interpreter failed there: the caller then runs it over the extracted
 * layers, which give the same answers or the same error as always). */
static int
run_in_pyroot (struct ib_pycompile *pc, const char *work, const char *qemu, const char *interpreter,
               const char *version, struct ib_py_source *files, size_t n, ib_error_t *err)
{
  if (pc->view == NULL || layers_extracted (pc))
    return 1;
  cleanup_free char *sub = ib_path_join (work, "pyroot");
  cleanup_free char *root = ib_path_join (sub, "files");
  if (mkdir (sub, 0700) < 0)
    return ib_error_errno (err, errno, IB_EENV, "mkdir `%s`", sub);
  int r = ib_pyroot_write (pc->s, pc->img, pc->view, interpreter, version, root, err);
  if (r != 0)
    return r;
  /* Its complaints, if it cannot start there, are not the build's. */
  cleanup_close int quiet = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  ib_error_t e = NULL;
  if (run (sub, root, qemu, interpreter, files, n, quiet, &e) == 0)
    return 0;
  ib_error_release (&e);
  forget_answers (files, n);
  return 1;
}

/* The image's INTERPRETER in a chroot: of its own files, else of the
 * image's layers. */
static int
run_in_image (struct ib_pycompile *pc, const char *work, const char *qemu, const char *interpreter,
              const char *version, struct ib_py_source *files, size_t n, ib_error_t *err)
{
  int r = run_in_pyroot (pc, work, qemu, interpreter, version, files, n, err);
  if (r != 1)
    return r;
  cleanup_free char *lower = NULL;
  if (lower_dirs (pc, &lower, err) < 0)
    return -1;
  return run (work, lower, qemu, interpreter, files, n, -1, err);
}

/* The build machine's python3.X of VERSION, else its python3 (not exact). */
static int
run_on_host (const char *work, const char *version, struct ib_py_source *files, size_t n, struct ib_py_answerer *ans,
             ib_error_t *err)
{
  cleanup_free char *name = ib_xasprintf ("python%s", version);
  cleanup_free char *host = system_program (name);
  ans->exact = host != NULL;
  if (host == NULL)
    host = system_program ("python3");
  if (host == NULL)
    return ib_error (err, IB_EENV, "no Python to check the syntax with: %s and the build machine has no python3",
                     ans->not_image);
  ans->who = ib_xasprintf ("the build machine's %s", host);
  return run (work, NULL, NULL, host, files, n, -1, err);
}

int
ib_py_compile (void *data, const char *interpreter, const char *version, struct ib_py_source *files, size_t n,
               struct ib_py_answerer *ans, ib_error_t *err)
{
  struct ib_pycompile *pc = data;
  *ans = (struct ib_py_answerer){ 0 };
  cleanup_free char *runs = NULL;
  if (ib_store_cache_dir (pc->s, "run", &runs, err) < 0)
    return -1;
  cleanup_free char *work = ib_path_join (runs, "pycompile-XXXXXX");
  if (mkdtemp (work) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp `%s`", work);
  cleanup_free char *qemu = NULL;
  int r;
  if (image_can_run (pc->img, interpreter, &qemu, &ans->not_image))
    {
      r = run_in_image (pc, work, qemu, interpreter, version, files, n, err);
      ans->who = qemu ? ib_xasprintf ("the image's %s (under %s, in a chroot)", interpreter, qemu)
                      : ib_xasprintf ("the image's %s (in a chroot)", interpreter);
      ans->exact = true;
    }
  else
    r = run_on_host (work, version, files, n, ans, err);
  ib_remove_tree (work, NULL);
  return r < 0 ? ib_error_wrap (err, "syntax check") : 0;
}
