#include "layers/runner/bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "layers/read/layer_reader.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/tar/tarpath.h"

#define CONTAINER_DRIVER_DIR "/usr/local/nvidia/lib64"

/* ---- layers on disk ------------------------------------------------------ */

/* Does REL (clean, relative) pass through a symbolic link below ROOT, its
 * last component included when WITH_LAST?  Extraction never writes through
 * one, whatever the entries say: the link may point anywhere on this
 * machine (libarchive's SECURE_SYMLINKS covers what it writes itself; the
 * whiteouts and hard links written here are checked here). */
bool
ib_through_symlink (const char *root, const char *rel, bool with_last)
{
  cleanup_free char *path = ib_path_join (root, rel);
  size_t skip = strlen (root);
  for (char *c = path + skip + 1; *c; c++)
    {
      if (*c != '/')
        continue;
      *c = '\0';
      struct stat st;
      bool link = lstat (path, &st) == 0 && S_ISLNK (st.st_mode);
      *c = '/';
      if (link)
        return true;
    }
  struct stat st;
  return with_last && lstat (path, &st) == 0 && S_ISLNK (st.st_mode);
}

static int
write_whiteout (const char *root, const char *path, ib_error_t *err)
{
  const char *name = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;
  const char *gone = name + 4;
  if (strcmp (name, ".wh..wh..opq") != 0 && ib_whiteout_names_nothing (gone))
    return ib_error (err, IB_EINTEGRITY, "whiteout `%s` names no file", path);
  if (ib_through_symlink (root, path, false))
    return ib_error (err, IB_EINTEGRITY, "whiteout `%s` is under a symbolic link", path);
  cleanup_free char *full = ib_path_join (root, path);
  char *slash = strrchr (full, '/');
  const char *base = slash + 1;
  *slash = '\0';
  if (ib_mkdir_p (full, 0755, err) < 0)
    return -1;
  if (strcmp (base, ".wh..wh..opq") == 0)
    {
      if (setxattr (full, "trusted.overlay.opaque", "y", 1, 0) < 0)
        return ib_error_errno (err, errno, IB_EENV, "mark `%s` opaque", full);
      return 0;
    }
  cleanup_free char *target = ib_path_join (full, base + 4);
  if (mknod (target, S_IFCHR | 0000, makedev (0, 0)) < 0 && errno != EEXIST)
    return ib_error_errno (err, errno, IB_EENV, "whiteout `%s`", target);
  return 0;
}

static int
extract_entry (struct archive *disk, struct ib_layer_reader *r, struct archive_entry *ae, const char *root,
               ib_error_t *err)
{
  cleanup_free char *clean = ib_clean_tar_path (archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "");
  if (clean == NULL)
    return 0;
  const char *base = strrchr (clean, '/') ? strrchr (clean, '/') + 1 : clean;
  if (strncmp (base, ".wh.", 4) == 0)
    return write_whiteout (root, clean, err);
  /* Device nodes, FIFOs and sockets are not made: a container gets its
   * /dev from the runtime, and a node in the store would open this
   * machine's devices to whoever reads the store. */
  mode_t type = archive_entry_filetype (ae);
  if (archive_entry_hardlink (ae) == NULL
      && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK))
    return 0;
  if (ib_through_symlink (root, clean, false))
    return ib_error (err, IB_EINTEGRITY, "entry `%s` is under a symbolic link", clean);
  cleanup_free char *full = ib_path_join (root, clean);
  archive_entry_set_pathname (ae, full);
  const char *hard = archive_entry_hardlink (ae);
  if (hard)
    {
      cleanup_free char *hc = ib_clean_tar_path (hard);
      if (hc == NULL || hard[0] == '/')
        return ib_error (err, IB_EINTEGRITY, "hard link `%s` leaves the layer", hard);
      if (ib_through_symlink (root, hc, true))
        return ib_error (err, IB_EINTEGRITY, "hard link `%s` to `%s` goes through a symbolic link", clean, hard);
      cleanup_free char *hfull = ib_path_join (root, hc);
      archive_entry_set_hardlink (ae, hfull);
    }
  if (archive_write_header (disk, ae) != ARCHIVE_OK)
    return ib_error (err, IB_EENV, "extract `%s`: %s", clean, archive_error_string (disk));
  cleanup_free char *buf = ib_xmalloc (1 << 20);
  ssize_t n;
  while ((n = ib_layer_reader_data (r, buf, 1 << 20, err)) > 0)
    if (archive_write_data (disk, buf, (size_t) n) != n)
      return ib_error (err, IB_EENV, "extract `%s`: %s", clean, archive_error_string (disk));
  if (n < 0 || archive_write_finish_entry (disk) != ARCHIVE_OK)
    return n < 0 ? -1 : ib_error (err, IB_EENV, "extract `%s`: %s", clean, archive_error_string (disk));
  return 0;
}

int
ib_image_layer_dir (struct ib_store *s, const struct ib_image *img, size_t i, char **out, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "rootfs", &cache, err) < 0)
    return -1;
  char *dir = ib_path_join (cache, ib_digest_hex (img->diff_ids[i].s));
  struct stat st;
  /* A view's layer is extracted again until this run has hashed it: the
   * folder of a good copy says nothing about the artifact's bytes. */
  bool trusted = ib_store_blob_trusted (s, &img->layers[i].digest);
  if (stat (dir, &st) == 0)
    {
      if (trusted)
        {
          *out = dir;
          return 0;
        }
    }
  cleanup_free char *tmp = ib_xasprintf ("%s.tmp-XXXXXX", dir);
  struct ib_layer_reader *r = NULL;
  struct archive *disk = archive_write_disk_new ();
  archive_write_disk_set_options (disk, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME
                                            | ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS
                                            | ARCHIVE_EXTRACT_UNLINK);
  int ret = mkdtemp (tmp) ? 0 : ib_error_errno (err, errno, IB_EENV, "mkdtemp `%s`", tmp);
  if (ret == 0)
    ret = ib_layer_reader_open (s, &img->layers[i], &img->diff_ids[i], &r, err);
  struct archive_entry *ae;
  int x = 0;
  while (ret == 0 && (x = ib_layer_reader_next (r, &ae, err)) == 1)
    ret = extract_entry (disk, r, ae, tmp, err);
  if (ret == 0 && x < 0)
    ret = -1;
  if (ret == 0)
    ret = ib_layer_reader_end (r, NULL, err);
  ib_layer_reader_free (r);
  archive_write_free (disk);
  if (ret == 0 && !trusted && stat (dir, &st) == 0)
    {
      /* The same diff_id, now hashed: the folder there is this layer. */
      ib_remove_tree (tmp, NULL);
      *out = dir;
      return 0;
    }
  if (ret == 0 && chmod (tmp, 0755) == 0 && rename (tmp, dir) == 0)
    {
      *out = dir;
      return 0;
    }
  if (ret == 0)
    ib_error_errno (err, errno, IB_EENV, "rename `%s`", tmp);
  ib_remove_tree (tmp, NULL);
  free (dir);
  return ib_error_wrap (err, "layer %s", img->layers[i].digest.s);
}

/* ---- GPUs ---------------------------------------------------------------- */

int
ib_gpu_count (void)
{
  glob_t g;
  int n = 0;
  if (glob ("/dev/nvidia[0-9]*", 0, NULL, &g) == 0)
    n = (int) g.gl_pathc;
  globfree (&g);
  return n;
}

static void
add_device (cJSON *devices, const char *path)
{
  struct stat st;
  if (stat (path, &st) < 0 || !S_ISCHR (st.st_mode))
    return;
  cJSON *d = cJSON_CreateObject ();
  cJSON_AddStringToObject (d, "path", path);
  cJSON_AddStringToObject (d, "type", "c");
  cJSON_AddNumberToObject (d, "major", major (st.st_rdev));
  cJSON_AddNumberToObject (d, "minor", minor (st.st_rdev));
  cJSON_AddNumberToObject (d, "fileMode", st.st_mode & 0777);
  cJSON_AddNumberToObject (d, "uid", 0);
  cJSON_AddNumberToObject (d, "gid", 0);
  cJSON_AddItemToArray (devices, d);
}

static void
add_bind (cJSON *mounts, const char *src, const char *dst, bool ro)
{
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddStringToObject (m, "destination", dst);
  cJSON_AddStringToObject (m, "type", "bind");
  cJSON_AddStringToObject (m, "source", src);
  cJSON *opt = cJSON_AddArrayToObject (m, "options");
  cJSON_AddItemToArray (opt, cJSON_CreateString ("rbind"));
  cJSON_AddItemToArray (opt, cJSON_CreateString (ro ? "ro" : "rw"));
  cJSON_AddItemToArray (opt, cJSON_CreateString ("nosuid"));
  cJSON_AddItemToArray (mounts, m);
}

/* CDI: the first spec with NVIDIA GPUs; its top-level edits and those of
 * every device. */
static bool
gpus_from_cdi (cJSON *devices, cJSON *mounts, cJSON *env, char **source)
{
  static const char *const dirs[] = { "/etc/cdi/*.json", "/var/run/cdi/*.json", NULL };
  for (int d = 0; dirs[d]; d++)
    {
      glob_t g;
      if (glob (dirs[d], 0, NULL, &g) != 0)
        continue;
      for (size_t i = 0; i < g.gl_pathc; i++)
        {
          cleanup_free char *text = NULL;
          if (ib_read_file (g.gl_pathv[i], 1 << 22, &text, NULL, NULL) < 0)
            continue;
          cJSON *spec = cJSON_Parse (text);
          const cJSON *kind = cJSON_GetObjectItemCaseSensitive (spec, "kind");
          if (!cJSON_IsString (kind) || strncmp (kind->valuestring, "nvidia.com/", 11) != 0)
            {
              cJSON_Delete (spec);
              continue;
            }
          const cJSON *edits[65] = { cJSON_GetObjectItemCaseSensitive (spec, "containerEdits") };
          int n_edits = 1;
          const cJSON *dev;
          cJSON_ArrayForEach (dev, cJSON_GetObjectItemCaseSensitive (spec, "devices"))
          {
            if (n_edits < 65)
              edits[n_edits++] = cJSON_GetObjectItemCaseSensitive (dev, "containerEdits");
          }
          for (int e = 0; e < n_edits; e++)
            {
              const cJSON *x;
              cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive (edits[e], "deviceNodes"))
              {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive (x, "path");
                if (cJSON_IsString (p))
                  add_device (devices, p->valuestring);
              }
              cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive (edits[e], "mounts"))
              {
                const cJSON *hp = cJSON_GetObjectItemCaseSensitive (x, "hostPath");
                const cJSON *cp = cJSON_GetObjectItemCaseSensitive (x, "containerPath");
                if (cJSON_IsString (hp) && cJSON_IsString (cp))
                  add_bind (mounts, hp->valuestring, cp->valuestring, true);
              }
              cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive (edits[e], "env"))
              {
                if (cJSON_IsString (x))
                  cJSON_AddItemToArray (env, cJSON_CreateString (x->valuestring));
              }
            }
          cJSON_Delete (spec);
          *source = ib_xasprintf ("CDI %s", g.gl_pathv[i]);
          globfree (&g);
          return true;
        }
      globfree (&g);
    }
  return false;
}

const char *
ib_driver_dir (void)
{
  const char *env = getenv ("IMGBUILD_DRIVER_DIR");
  static const char *const dirs[] = { CONTAINER_DRIVER_DIR, "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                      "/usr/lib64", "/usr/lib", NULL };
  if (env && *env)
    return env;
  for (int i = 0; dirs[i]; i++)
    {
      cleanup_free char *p = ib_path_join (dirs[i], "libcuda.so.1");
      if (access (p, R_OK) == 0)
        return dirs[i];
    }
  return NULL;
}

/* The toolkit's way without CDI: the device nodes, and the driver's user
 * space libraries bound read-only where the container looks for them. */
/* /dev/nvidiaN: a GPU's own node, which the contract's `devices` picks;
 * the others (nvidiactl, nvidia-uvm, ...) every GPU needs. */
static bool
device_wanted (const char *path, const struct ib_contract *c)
{
  const char *tail = path + strlen ("/dev/nvidia");
  if (strncmp (path, "/dev/nvidia", 11) != 0 || *tail == '\0' || tail[strspn (tail, "0123456789")] != '\0')
    return true;
  return ib_contract_has_gpu (c, atoi (tail));
}

static int
gpus_from_devices (cJSON *devices, cJSON *mounts, cJSON *env, const struct ib_contract *c, char **source,
                   ib_error_t *err)
{
  const char *dir = ib_driver_dir ();
  if (dir == NULL)
    return ib_error (err, IB_EENV, "GPUs are present but no libcuda.so.1 was found (set IMGBUILD_DRIVER_DIR)");
  glob_t g;
  if (glob ("/dev/nvidia*", 0, NULL, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++)
      if (device_wanted (g.gl_pathv[i], c))
        add_device (devices, g.gl_pathv[i]);
  globfree (&g);
  static const char *const libs[] = { "libcuda.so*", "libnvidia-*.so*", "libcudadebugger.so*", NULL };
  for (int k = 0; libs[k]; k++)
    {
      cleanup_free char *pat = ib_path_join (dir, libs[k]);
      if (glob (pat, 0, NULL, &g) != 0)
        continue;
      for (size_t i = 0; i < g.gl_pathc; i++)
        {
          cleanup_free char *dst = ib_path_join (CONTAINER_DRIVER_DIR, strrchr (g.gl_pathv[i], '/') + 1);
          add_bind (mounts, g.gl_pathv[i], dst, true);
        }
      globfree (&g);
    }
  cJSON_AddItemToArray (env, cJSON_CreateString ("LD_LIBRARY_PATH=" CONTAINER_DRIVER_DIR));
  *source = ib_xasprintf ("device nodes + driver libraries of %s", dir);
  return 0;
}

/* ---- config.json --------------------------------------------------------- */

static void
add_mount (cJSON *mounts, const char *dst, const char *type, const char *src, const char *const *opts)
{
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddStringToObject (m, "destination", dst);
  cJSON_AddStringToObject (m, "type", type);
  cJSON_AddStringToObject (m, "source", src);
  cJSON *o = cJSON_AddArrayToObject (m, "options");
  for (int i = 0; opts[i]; i++)
    cJSON_AddItemToArray (o, cJSON_CreateString (opts[i]));
  cJSON_AddItemToArray (mounts, m);
}

static cJSON *
string_array (const char *const *v)
{
  cJSON *a = cJSON_CreateArray ();
  for (int i = 0; v[i]; i++)
    cJSON_AddItemToArray (a, cJSON_CreateString (v[i]));
  return a;
}

/* The contract's limits and capabilities on the process. */
static void
contract_process (cJSON *proc, const struct ib_contract *k)
{
  if (k->memlock_set)
    {
      /* Raising it needs CAP_SYS_RESOURCE (CI lacks it): only when asked. */
      cJSON *rl = cJSON_AddArrayToObject (proc, "rlimits");
      cJSON *m = cJSON_CreateObject ();
      cJSON_AddStringToObject (m, "type", "RLIMIT_MEMLOCK");
      /* A uint64 written exactly (a double would print 1.8e+19). */
      char v[32];
      snprintf (v, sizeof (v), "%llu", k->memlock);
      cJSON_AddRawToObject (m, "hard", v);
      cJSON_AddRawToObject (m, "soft", v);
      cJSON_AddItemToArray (rl, m);
    }
  if (k->n_caps)
    {
      cJSON *caps = cJSON_AddObjectToObject (proc, "capabilities");
      static const char *const sets[] = { "bounding", "effective", "permitted", NULL };
      for (int s = 0; sets[s]; s++)
        {
          cJSON *a = cJSON_AddArrayToObject (caps, sets[s]);
          for (size_t i = 0; i < k->n_caps; i++)
            cJSON_AddItemToArray (a, cJSON_CreateString (k->caps[i]));
        }
    }
}

static int
make_config (const struct ib_image *img, const struct ib_run_options *o, const char *rootfs,
             struct ib_run_result *res, cJSON **out, ib_error_t *err)
{
  struct ib_contract defaults;
  ib_contract_init (&defaults);
  const struct ib_contract *k = o->contract ? o->contract : &defaults;
  cJSON *c = cJSON_CreateObject ();
  cJSON_AddStringToObject (c, "ociVersion", "1.0.2");
  cJSON *proc = cJSON_AddObjectToObject (c, "process");
  cJSON_AddBoolToObject (proc, "terminal", false);
  cJSON *user = cJSON_AddObjectToObject (proc, "user");
  cJSON_AddNumberToObject (user, "uid", 0);
  cJSON_AddNumberToObject (user, "gid", 0);
  cJSON *args = cJSON_AddArrayToObject (proc, "args");
  cJSON_AddItemToArray (args, cJSON_CreateString (o->program_target));
  for (size_t i = 0; i < o->n_args; i++)
    cJSON_AddItemToArray (args, cJSON_CreateString (o->args[i]));
  cJSON *env = cJSON_AddArrayToObject (proc, "env");
  const cJSON *e;
  cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (img->config_json, "config"), "Env"))
  {
    if (cJSON_IsString (e))
      cJSON_AddItemToArray (env, cJSON_CreateString (e->valuestring));
  }
  for (size_t i = 0; i < o->n_env; i++)
    cJSON_AddItemToArray (env, cJSON_CreateString (o->env[i]));
  cJSON_AddStringToObject (proc, "cwd", "/");
  /* No rlimits unless the contract asks: raising one needs
   * CAP_SYS_RESOURCE, which CI lacks; the container keeps the build's. */
  contract_process (proc, k);
  cJSON_AddBoolToObject (proc, "noNewPrivileges", true);
  cJSON *root = cJSON_AddObjectToObject (c, "root");
  cJSON_AddStringToObject (root, "path", rootfs);
  cJSON_AddBoolToObject (root, "readonly", true);
  cJSON *mounts = cJSON_AddArrayToObject (c, "mounts");
  add_mount (mounts, "/proc", "proc", "proc", (const char *const[]){ NULL });
  add_mount (mounts, "/dev", "tmpfs", "tmpfs", (const char *const[]){ "nosuid", "strictatime", "mode=755", "size=65536k", NULL });
  add_mount (mounts, "/dev/pts", "devpts", "devpts",
             (const char *const[]){ "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", NULL });
  /* /dev/shm as the contract says: a tmpfs of its size, or the host's. */
  char shm_size[48];
  snprintf (shm_size, sizeof (shm_size), "size=%llu", o->shm_bytes ? o->shm_bytes : k->shm_bytes);
  if (k->ipc_host)
    add_bind (mounts, "/dev/shm", "/dev/shm", false);
  else
    add_mount (mounts, "/dev/shm", "tmpfs", "shm", (const char *const[]){ "nosuid", "nodev", "mode=1777", shm_size, NULL });
  add_mount (mounts, "/sys", "sysfs", "sysfs", (const char *const[]){ "nosuid", "noexec", "nodev", "ro", NULL });
  add_mount (mounts, "/tmp", "tmpfs", "tmpfs", (const char *const[]){ "nosuid", "nodev", "mode=1777", NULL });
  add_bind (mounts, o->program, o->program_target, true);
  if (o->bind_dir && o->bind_target)
    add_bind (mounts, o->bind_dir, o->bind_target, true);
  cJSON *linux_ = cJSON_AddObjectToObject (c, "linux");
  cJSON *devices = cJSON_AddArrayToObject (linux_, "devices");
  if (o->gpus)
    {
      if (!gpus_from_cdi (devices, mounts, env, &res->gpu_source)
          && gpus_from_devices (devices, mounts, env, k, &res->gpu_source, err) < 0)
        {
          cJSON_Delete (c);
          return -1;
        }
      res->n_gpus = 0;
      for (int i = 0; i < ib_gpu_count (); i++)
        res->n_gpus += ib_contract_has_gpu (k, i);
    }
  /* Deny by default (runc adds the usual /dev/null, /dev/zero, ... rules)
   * and allow each injected device: an allow-all rule is refused inside a
   * container whose own device cgroup is narrower (CI, docker-in-docker). */
  cJSON *resources = cJSON_AddObjectToObject (linux_, "resources");
  cJSON *dev_rules = cJSON_AddArrayToObject (resources, "devices");
  cJSON *deny = cJSON_CreateObject ();
  cJSON_AddBoolToObject (deny, "allow", false);
  cJSON_AddStringToObject (deny, "access", "rwm");
  cJSON_AddItemToArray (dev_rules, deny);
  const cJSON *dv;
  cJSON_ArrayForEach (dv, devices)
  {
    cJSON *rule = cJSON_CreateObject ();
    cJSON_AddBoolToObject (rule, "allow", true);
    cJSON_AddStringToObject (rule, "type", "c");
    cJSON_AddNumberToObject (rule, "major", cJSON_GetNumberValue (cJSON_GetObjectItemCaseSensitive (dv, "major")));
    cJSON_AddNumberToObject (rule, "minor", cJSON_GetNumberValue (cJSON_GetObjectItemCaseSensitive (dv, "minor")));
    cJSON_AddStringToObject (rule, "access", "rwm");
    cJSON_AddItemToArray (dev_rules, rule);
  }
  /* No network namespace: NCCL's bootstrap talks over the host's loopback. */
  cJSON_AddItemToObject (linux_, "namespaces",
                         cJSON_Parse (k->ipc_host ? "[{\"type\":\"pid\"},{\"type\":\"uts\"},{\"type\":\"mount\"}]"
                                                  : "[{\"type\":\"pid\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":\"mount\"}]"));
  cJSON_AddItemToObject (linux_, "maskedPaths", string_array ((const char *const[]){ "/proc/kcore", "/proc/keys", NULL }));
  *out = c;
  return 0;
}

/* ---- the runtime --------------------------------------------------------- */

static char *
find_runtime (void)
{
  const char *env = getenv ("IMGBUILD_RUNTIME");
  if (env && *env)
    return ib_xstrdup (env);
  return ib_find_in_path ("runc", "/usr/sbin:/usr/bin:/sbin:/bin");
}

static int
run_runtime (const char *runtime, const char *state, const char *bundle, const char *id, const char *log,
             int timeout_s, int *code, ib_error_t *err)
{
  pid_t pid = fork ();
  if (pid < 0)
    return ib_error_errno (err, errno, IB_EENV, "fork");
  if (pid == 0)
    {
      int fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int nul = open ("/dev/null", O_RDONLY);
      if (fd < 0 || nul < 0)
        _exit (127);
      dup2 (nul, 0);
      dup2 (fd, 1);
      dup2 (fd, 2);
      execl (runtime, runtime, "--root", state, "run", "--bundle", bundle, id, (char *) NULL);
      _exit (127);
    }
  struct timespec t0;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (;;)
    {
      int status;
      pid_t w = waitpid (pid, &status, WNOHANG);
      if (w == pid)
        {
          *code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
          return 0;
        }
      struct timespec now;
      clock_gettime (CLOCK_MONOTONIC, &now);
      if (now.tv_sec - t0.tv_sec >= timeout_s)
        {
          /* The container, then the runtime. */
          pid_t k = fork ();
          if (k == 0)
            {
              execl (runtime, runtime, "--root", state, "kill", id, "KILL", (char *) NULL);
              _exit (127);
            }
          waitpid (k, NULL, 0);
          sleep (1);
          kill (pid, SIGKILL);
          waitpid (pid, NULL, 0);
          *code = 124;
          return 0;
        }
      usleep (50000);
    }
}

static void
runtime_do (const char *runtime, const char *state, const char *verb, const char *id, const char *extra)
{
  pid_t k = fork ();
  if (k == 0)
    {
      if (extra)
        execl (runtime, runtime, "--root", state, verb, extra, id, (char *) NULL);
      else
        execl (runtime, runtime, "--root", state, verb, id, "KILL", (char *) NULL);
      _exit (127);
    }
  if (k > 0)
    waitpid (k, NULL, 0);
}

/* The reaper (ib_run_options.reaper): a process in a session of its own,
 * which a launcher's signals to this one's group do not reach, waiting for
 * the end of the pipe that this process holds.  When this process ends
 * before its run has cleaned up (killed), the pipe closes: it kills and
 * deletes the container (nothing when it has already ended) and removes
 * the bundle.  A run that cleaned up itself writes one byte first, and the
 * reaper leaves at once: its runc calls would otherwise make the bundle's
 * state folder again after the run removed it, and a caller that looks
 * right after the run would see a bundle being removed.  Returns the
 * pipe's end to write and close when the run is over, or -1.  (`runc state` says
 * nothing of a container's end that delete --force does not handle.) */
static int
start_reaper (const char *runtime, const char *state, const char *id, const char *rootfs, const char *bundle,
              const char *also)
{
  int p[2];
  /* A socket pair, not a pipe: the byte that says "done" goes with
   * MSG_NOSIGNAL, so a reaper killed meanwhile costs no SIGPIPE. */
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
    return -1;
  pid_t pid = fork ();
  if (pid < 0)
    {
      close (p[0]);
      close (p[1]);
      return -1;
    }
  if (pid == 0)
    {
      setsid ();
      /* Nothing of the launcher's: its output pipes must close when the
       * rank ends, not when the reaper does. */
      int nul = open ("/dev/null", O_RDWR);
      for (int fd = 0; fd < 3; fd++)
        dup2 (nul, fd);
      for (int fd = 3; fd < 1024; fd++)
        if (fd != p[0])
          close (fd);
      /* A grandchild, so that nobody waits for it. */
      if (fork () != 0)
        _exit (0);
      char c;
      ssize_t got;
      do
        got = read (p[0], &c, 1);
      while (got < 0 && errno == EINTR);
      if (got == 1)
        _exit (0); /* the run ended and cleaned up after itself */
      runtime_do (runtime, state, "kill", id, NULL);
      runtime_do (runtime, state, "delete", id, "--force");
      umount2 (rootfs, MNT_DETACH);
      ib_remove_tree (bundle, NULL);
      if (also)
        ib_remove_tree (also, NULL);
      _exit (0);
    }
  waitpid (pid, NULL, 0);
  close (p[0]);
  return p[1];
}

static void
runtime_version (const char *runtime, struct ib_run_result *res)
{
  cleanup_free char *cmd = ib_xasprintf ("'%s' --version 2>/dev/null", runtime);
  FILE *p = popen (cmd, "r");
  char line[256] = "";
  if (p && fgets (line, sizeof (line), p))
    line[strcspn (line, "\n")] = '\0';
  if (p)
    pclose (p);
  res->runtime = ib_xstrdup (*line ? line : runtime);
}

int
ib_run_image (struct ib_store *s, const struct ib_image *img, const struct ib_run_options *o,
              struct ib_run_result *res, ib_error_t *err)
{
  memset (res, 0, sizeof (*res));
  cleanup_free char *runtime = find_runtime ();
  if (runtime == NULL)
    return ib_error (err, IB_EENV, "no OCI runtime: runc is not on PATH (install runc, or set IMGBUILD_RUNTIME)");
  runtime_version (runtime, res);
  /* Lower layers first in the image, last in overlayfs' list. */
  cleanup_free char *lower = ib_xstrdup ("");
  for (size_t i = 0; i < img->n_layers; i++)
    {
      cleanup_free char *dir = NULL;
      if (ib_image_layer_dir (s, img, i, &dir, err) < 0)
        return -1;
      char *next = *lower ? ib_xasprintf ("%s:%s", dir, lower) : ib_xstrdup (dir);
      free (lower);
      lower = next;
    }
  cleanup_free char *runs = NULL;
  if (ib_store_cache_dir (s, "run", &runs, err) < 0)
    return -1;
  cleanup_free char *bundle = ib_path_join (runs, "bundle-XXXXXX");
  if (mkdtemp (bundle) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp `%s`", bundle);
  cleanup_free char *rootfs = ib_path_join (bundle, "rootfs"), *upper = ib_path_join (bundle, "upper");
  cleanup_free char *work = ib_path_join (bundle, "work"), *state = ib_path_join (bundle, "state");
  cleanup_free char *log = ib_path_join (bundle, "output"), *cfg_path = ib_path_join (bundle, "config.json");
  cleanup_free char *opts = ib_xasprintf ("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
  int ret = 0;
  bool mounted = false;
  if (mkdir (rootfs, 0755) < 0 || mkdir (upper, 0755) < 0 || mkdir (work, 0755) < 0 || mkdir (state, 0700) < 0)
    ret = ib_error_errno (err, errno, IB_EENV, "bundle `%s`", bundle);
  else if (mount ("overlay", rootfs, "overlay", 0, opts) < 0)
    ret = ib_error_errno (err, errno, IB_EENV, "mount the image's layers with overlayfs at `%s`", rootfs);
  else
    mounted = true;
  cJSON *cfg = NULL;
  if (ret == 0)
    ret = make_config (img, o, rootfs, res, &cfg, err);
  if (ret == 0)
    {
      char *text = cJSON_Print (cfg);
      ret = ib_write_file_atomic (cfg_path, text, strlen (text), 0644, err);
      free (text);
    }
  cJSON_Delete (cfg);
  char id[128];
  snprintf (id, sizeof (id), "imgbuild-%d-%ld", (int) getpid (), (long) time (NULL));
  if (o->container_id)
    snprintf (id, sizeof (id), "%s", o->container_id);
  const char *state_dir = state;
  if (ret == 0 && o->state_root)
    {
      state_dir = o->state_root;
      ret = ib_mkdir_p (state_dir, 0700, err);
    }
  int reaper = ret == 0 && o->reaper ? start_reaper (runtime, state_dir, id, rootfs, bundle, o->reap_also) : -1;
  if (ret == 0)
    ret = run_runtime (runtime, state_dir, bundle, id, log, o->timeout_s > 0 ? o->timeout_s : 600, &res->exit_code,
                       err);
  /* A container stopped at its timeout is killed, not deleted: delete it
   * here, as the reaper would. */
  if (ret == 0 && (o->state_root || res->exit_code == 124))
    runtime_do (runtime, state_dir, "delete", id, "--force");
  if (ret == 0)
    ib_read_file (log, 64u << 20, &res->output, NULL, NULL);
  if (mounted)
    umount2 (rootfs, MNT_DETACH);
  ib_remove_tree (bundle, NULL);
  if (reaper >= 0)
    {
      (void) !send (reaper, "d", 1, MSG_NOSIGNAL); /* cleaned up: the reaper has nothing to do */
      close (reaper);
    }
  return ret;
}

void
ib_run_result_clear (struct ib_run_result *r)
{
  free (r->output);
  free (r->runtime);
  free (r->gpu_source);
  memset (r, 0, sizeof (*r));
}

int
ib_containers_sweep (const char *state_root, const char *prefix, size_t *n, ib_error_t *err)
{
  *n = 0;
  cleanup_free char *runtime = find_runtime ();
  if (runtime == NULL)
    return ib_error (err, IB_EENV, "no OCI runtime: runc is not on PATH (install runc, or set IMGBUILD_RUNTIME)");
  struct stat st;
  if (stat (state_root, &st) < 0)
    return 0; /* no container was ever made here */
  cleanup_free char *cmd = ib_xasprintf ("'%s' --root '%s' list --format json 2>&1", runtime, state_root);
  FILE *p = popen (cmd, "r");
  if (p == NULL)
    return ib_error_errno (err, errno, IB_EENV, "run %s list", runtime);
  char *text = NULL;
  size_t used = 0;
  char buf[4096];
  size_t got;
  ib_xappend (&text, &used, "", 0);
  while ((got = fread (buf, 1, sizeof (buf), p)) > 0)
    ib_xappend (&text, &used, buf, got);
  int rc = pclose (p);
  cJSON *list = cJSON_Parse (text);
  if (rc != 0 || (list == NULL && strcmp (text, "null\n") != 0))
    {
      int r = ib_error (err, IB_EENV, "%s --root %s list: %s", runtime, state_root, text);
      free (text);
      cJSON_Delete (list);
      return r;
    }
  free (text);
  const cJSON *c;
  cJSON_ArrayForEach (c, list)
  {
    const char *id = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (c, "id"));
    const char *bundle = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (c, "bundle"));
    if (id == NULL || strncmp (id, prefix, strlen (prefix)) != 0)
      continue;
    runtime_do (runtime, state_root, "kill", id, NULL);
    runtime_do (runtime, state_root, "delete", id, "--force");
    if (bundle && *bundle == '/')
      {
        cleanup_free char *rootfs = ib_path_join (bundle, "rootfs");
        umount2 (rootfs, MNT_DETACH);
        ib_remove_tree (bundle, NULL);
      }
    (*n)++;
  }
  cJSON_Delete (list);
  return 0;
}
