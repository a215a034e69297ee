#include "kernels/prebake.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layers/view/extract.h"
#include "util/cpus.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/tar/tarpath.h"

extern char **environ;

#define MAX_SOURCE (256u << 20)

/* ---- argv ---------------------------------------------------------------- */

struct argv
{
  char **v;
  size_t n;
};

static void
argv_add (struct argv *a, const char *s)
{
  a->v = ib_xrealloc (a->v, (a->n + 2) * sizeof (*a->v));
  a->v[a->n++] = ib_xstrdup (s);
  a->v[a->n] = NULL;
}

static void
argv_clear (struct argv *a)
{
  for (size_t i = 0; i < a->n; i++)
    free (a->v[i]);
  free (a->v);
  a->v = NULL;
  a->n = 0;
}

/* Run ARGV with stdout to OUT_PATH (or /dev/null) and stderr to LOG_PATH;
 * returns the pid. */
static int
spawn (const struct argv *a, const char *out_path, const char *log_path, pid_t *pid, ib_error_t *err)
{
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen (&fa, 1, out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen (&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int r = posix_spawn (pid, a->v[0], &fa, NULL, a->v, environ);
  posix_spawn_file_actions_destroy (&fa);
  if (r != 0)
    return ib_error_errno (err, r, IB_EENV, "start `%s`", a->v[0]);
  return 0;
}

static char *
log_tail (const char *path)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (ib_read_file (path, 1u << 24, &text, &len, NULL) < 0)
    return ib_xstrdup ("(no output)");
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
    text[--len] = '\0';
  const char *start = len > 600 ? text + len - 600 : text;
  char *out = ib_xstrdup (start);
  for (char *c = out; *c; c++)
    if (*c == '\n')
      *c = ' ';
  return out;
}

/* ---- nvcc ---------------------------------------------------------------- */

int
ib_find_nvcc (char **out, ib_error_t *err)
{
  const char *env = getenv ("NVCC");
  if (env && *env)
    {
      if (access (env, X_OK) < 0)
        return ib_error (err, IB_EENV, "$NVCC is `%s`, which is not an executable", env);
      *out = ib_xstrdup (env);
      return 0;
    }
  if ((*out = ib_find_in_path ("nvcc", "")) != NULL)
    return 0;
  if (access ("/usr/local/cuda/bin/nvcc", X_OK) == 0)
    {
      *out = ib_xstrdup ("/usr/local/cuda/bin/nvcc");
      return 0;
    }
  return ib_error (err, IB_EENV,
                   "prebake needs nvcc (the CUDA toolkit, 12.9 or later for sm_121a): none as $NVCC, on PATH, "
                   "or at /usr/local/cuda/bin/nvcc");
}

/* What identifies a compiler: the digest of the nvcc binary and of the
 * nvcc.profile beside it (which names the toolkit's cicc and ptxas). */
static int
nvcc_identity (const char *nvcc, ib_digest *out, ib_error_t *err)
{
  char real[PATH_MAX];
  if (realpath (nvcc, real) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "`%s`", nvcc);
  ib_digest bin, profile = { "" };
  if (ib_sha256_file (real, &bin, NULL, err) < 0)
    return -1;
  cleanup_free char *prof = ib_xasprintf ("%s.profile", real);
  if (access (prof, R_OK) == 0 && ib_sha256_file (prof, &profile, NULL, err) < 0)
    return -1;
  cleanup_free char *both = ib_xasprintf ("%s %s", bin.s, profile.s);
  ib_sha256_buf (both, strlen (both), out);
  return 0;
}

/* `nvcc --version`, remembered per identity so a warm build runs no nvcc. */
static int
nvcc_version (const char *nvcc, const char *cache, const ib_digest *id, struct ib_prebake_result *res,
              ib_error_t *err)
{
  cleanup_free char *path = ib_xasprintf ("%s/%s.version", cache, ib_digest_hex (id->s));
  cleanup_free char *text = NULL;
  if (ib_read_file (path, 1 << 16, &text, NULL, NULL) < 0 || strncmp (text, "Cuda", 4) != 0)
    {
      struct argv a = { 0 };
      argv_add (&a, nvcc);
      argv_add (&a, "--version");
      cleanup_free char *out = ib_xasprintf ("%s.out", path), *log = ib_xasprintf ("%s.log", path);
      pid_t pid;
      int status = 0;
      int r = spawn (&a, out, log, &pid, err);
      argv_clear (&a);
      res->nvcc_runs++;
      if (r < 0 || waitpid (pid, &status, 0) < 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
        return r < 0 ? -1 : ib_error (err, IB_EENV, "`%s --version` failed", nvcc);
      free (text);
      text = NULL;
      if (ib_read_file (out, 1 << 16, &text, NULL, err) < 0)
        return -1;
      /* The last line: "Build cuda_13.0.r13.0/compiler.36424714_0" and the one before. */
      char *rel = strstr (text, "release ");
      char *line = rel ? rel : text;
      line[strcspn (line, "\n")] = '\0';
      char *v = ib_xasprintf ("Cuda compilation tools, %s", line);
      free (text);
      text = v;
      ib_write_cache_file (path, text, strlen (text), NULL);
      unlink (out);
      unlink (log);
    }
  res->nvcc_version = steal_pointer (&text);
  return 0;
}

/* ---- sources inside the base image --------------------------------------- */

struct unpack
{
  const char *root;
};

static int
unpack_one (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct unpack *u = data;
  cleanup_free char *path = ib_path_join (u->root, e->path);
  cleanup_free char *dir = ib_xstrdup (path);
  *strrchr (dir, '/') = '\0';
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_mkdir_p (dir, 0755, err) < 0 || ib_reader_slurp (r, MAX_SOURCE, &text, &len, err) < 0)
    return -1;
  return ib_write_cache_file (path, text, len, err);
}

/* The base's files that prebake compiles (sources and include folders),
 * unpacked once per base under the store. */
static int
unpack_image_sources (struct ib_store *s, const struct ib_image *base, const struct ib_fsview *view,
                      const struct ib_prebake_spec *spec, char **root, ib_error_t *err)
{
  cleanup_free char *cache = NULL;
  if (ib_store_cache_dir (s, "prebake-src", &cache, err) < 0)
    return -1;
  *root = ib_path_join (cache, ib_digest_hex (base->manifest.digest.s));
  const struct ib_fs_entry **wanted = NULL;
  size_t n = 0;
  for (size_t i = 0; i < spec->n_sources; i++)
    {
      const struct ib_prebake_source *src = &spec->sources[i];
      if (!src->in_image)
        continue;
      for (size_t k = 0; k < ib_fsview_count (view); k++)
        {
          const struct ib_fs_entry *e = ib_fsview_at (view, k);
          bool take = strcmp (e->path, src->source + 1) == 0;
          for (size_t d = 0; !take && d < src->n_includes; d++)
            {
              size_t l = strlen (src->includes[d] + 1);
              take = strncmp (e->path, src->includes[d] + 1, l) == 0 && e->path[l] == '/';
            }
          cleanup_free char *have = ib_path_join (*root, e->path);
          if (take && e->type == IB_FS_FILE && access (have, F_OK) < 0)
            {
              wanted = ib_xrealloc (wanted, (n + 1) * sizeof (*wanted));
              wanted[n++] = e;
            }
        }
      if (ib_fsview_lookup (view, src->source + 1) == NULL)
        {
          free (wanted);
          return ib_error (err, IB_EDEFINITION, "%s: prebake source %s is not in the base image", src->origin,
                           src->source);
        }
    }
  struct unpack u = { *root };
  int r = ib_extract_entries (s, base, wanted, n, unpack_one, &u, err);
  free (wanted);
  return r;
}

/* ---- compile jobs -------------------------------------------------------- */

enum job_state
{
  JOB_START,
  JOB_DEPS,    /* nvcc -M running */
  JOB_COMPILE, /* nvcc -fatbin running */
  JOB_DONE,
};

struct job
{
  const struct ib_prebake_source *src;
  char *path;        /* the source on this machine */
  struct argv flags; /* everything but -M/-fatbin/-o and the source */
  ib_digest srckey, fullkey;
  enum job_state state;
  pid_t pid;
  char *deps_out, *log, *tmp_out, *output;
};

struct prebake
{
  struct ib_store *store;
  const struct ib_prebake_spec *spec;
  const char *nvcc;
  char *cache; /* store/imgbuild/nvcc */
  ib_digest id;
  struct job *jobs;
  size_t n_jobs;
  struct ib_prebake_result *res;
};

/* "sm_121a" -> -gencode arch=compute_121a,code=sm_121a; "compute_121" -> PTX. */
static int
gencode (const char *arch, struct argv *a, ib_error_t *err)
{
  const char *num = strncmp (arch, "sm_", 3) == 0 ? arch + 3 : strncmp (arch, "compute_", 8) == 0 ? arch + 8 : NULL;
  if (num == NULL || strspn (num, "0123456789") < 2 || strspn (num, "0123456789af") != strlen (num))
    return ib_error (err, IB_EDEFINITION, "prebake arch `%s` is not sm_NN[a|f] or compute_NN[a|f]", arch);
  cleanup_free char *g = ib_xasprintf ("arch=compute_%s,code=%s", num, arch);
  argv_add (a, "-gencode");
  argv_add (a, g);
  return 0;
}

static int
job_init (struct prebake *p, struct job *j, const struct ib_prebake_source *src, const char *image_root,
          ib_error_t *err)
{
  j->src = src;
  j->path = src->in_image ? ib_path_join (image_root, src->source) : ib_xstrdup (src->source);
  argv_add (&j->flags, "-O3");
  for (size_t i = 0; i < p->spec->n_flags; i++)
    argv_add (&j->flags, p->spec->flags[i]);
  for (size_t i = 0; i < p->spec->n_arches; i++)
    if (gencode (p->spec->arches[i], &j->flags, err) < 0)
      return -1;
  for (size_t i = 0; i < src->n_includes; i++)
    {
      cleanup_free char *dir = src->in_image ? ib_path_join (image_root, src->includes[i]) : ib_xstrdup (src->includes[i]);
      cleanup_free char *flag = ib_xasprintf ("-I%s", dir);
      argv_add (&j->flags, flag);
    }
  /* The source key: compiler, flags, content (not its name or place). */
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_read_file (j->path, MAX_SOURCE, &text, &len, err) < 0)
    {
      (*err)->class = IB_EDEFINITION;
      return ib_error_wrap (err, "%s: prebake source", src->origin);
    }
  ib_sha256 *h = ib_sha256_new ();
  ib_sha256_update (h, p->id.s, strlen (p->id.s));
  for (size_t i = 0; i < j->flags.n; i++)
    ib_sha256_update (h, j->flags.v[i], strlen (j->flags.v[i]) + 1);
  ib_sha256_update (h, text, len);
  ib_sha256_final (h, &j->srckey);
  ib_sha256_free (h);
  const char *k = ib_digest_hex (j->srckey.s);
  /* Per process: builds running at once into one store may compile the
   * same source; each writes its own files and renames the result. */
  int pid = (int) getpid ();
  j->deps_out = ib_xasprintf ("%s/%s.deps-out-%d", p->cache, k, pid);
  j->log = ib_xasprintf ("%s/%s.log-%d", p->cache, k, pid);
  j->tmp_out = ib_xasprintf ("%s/%s.fatbin-tmp-%d", p->cache, k, pid);
  return 0;
}

/* The header list remembered for this source key, each header re-hashed:
 * the full key when all are unchanged. */
static bool
direct_key (struct prebake *p, struct job *j)
{
  cleanup_free char *path = ib_xasprintf ("%s/%s.deps", p->cache, ib_digest_hex (j->srckey.s));
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_read_file (path, 1u << 24, &text, &len, NULL) < 0 || len == 0 || text[len - 1] != '\n')
    return false;
  char *save = NULL;
  for (char *l = strtok_r (text, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      ib_digest d;
      if (strlen (l) < 67 || ib_sha256_file (l + 65, &d, NULL, NULL) < 0 || strncmp (d.s + 7, l, 64) != 0)
        return false;
    }
  free (text);
  text = NULL;
  ib_read_file (path, 1u << 24, &text, &len, NULL);
  cleanup_free char *both = ib_xasprintf ("%s\n%s", j->srckey.s, text);
  ib_sha256_buf (both, strlen (both), &j->fullkey);
  return true;
}

/* Parse `nvcc -M` output (make syntax) into "HEX PATH" lines, save them,
 * and compute the full key. */
static int
record_deps (struct prebake *p, struct job *j, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  if (ib_read_file (j->deps_out, 1u << 24, &text, NULL, err) < 0)
    return -1;
  char *colon = strstr (text, ": ");
  char *save = NULL;
  char *lines = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&lines, &len);
  for (char *w = strtok_r (colon ? colon + 1 : text, " \t\n\\", &save); w; w = strtok_r (NULL, " \t\n\\", &save))
    {
      char real[PATH_MAX];
      if (realpath (w, real) == NULL)
        continue;
      char src_real[PATH_MAX];
      if (realpath (j->path, src_real) && strcmp (real, src_real) == 0)
        continue; /* the source itself is in the source key */
      ib_digest d;
      if (ib_sha256_file (real, &d, NULL, err) < 0)
        {
          fclose (f);
          free (lines);
          return -1;
        }
      fprintf (f, "%s %s\n", ib_digest_hex (d.s), real);
    }
  fclose (f);
  cleanup_free char *path = ib_xasprintf ("%s/%s.deps", p->cache, ib_digest_hex (j->srckey.s));
  int r = ib_write_cache_file (path, lines, len, err);
  cleanup_free char *both = ib_xasprintf ("%s\n%s", j->srckey.s, lines);
  ib_sha256_buf (both, strlen (both), &j->fullkey);
  free (lines);
  unlink (j->deps_out);
  return r;
}

static int
start_deps (struct prebake *p, struct job *j, ib_error_t *err)
{
  struct argv a = { 0 };
  argv_add (&a, p->nvcc);
  argv_add (&a, "-M");
  for (size_t i = 0; i < j->flags.n; i++)
    argv_add (&a, j->flags.v[i]);
  argv_add (&a, j->path);
  int r = spawn (&a, j->deps_out, j->log, &j->pid, err);
  argv_clear (&a);
  p->res->nvcc_runs++;
  j->state = JOB_DEPS;
  return r;
}

static int
start_compile (struct prebake *p, struct job *j, ib_error_t *err)
{
  struct argv a = { 0 };
  argv_add (&a, p->nvcc);
  argv_add (&a, "-fatbin");
  for (size_t i = 0; i < j->flags.n; i++)
    argv_add (&a, j->flags.v[i]);
  argv_add (&a, "-o");
  argv_add (&a, j->tmp_out);
  argv_add (&a, j->path);
  int r = spawn (&a, NULL, j->log, &j->pid, err);
  argv_clear (&a);
  p->res->nvcc_runs++;
  p->res->compiled++;
  j->state = JOB_COMPILE;
  return r;
}

static char *
output_path (struct prebake *p, const struct job *j)
{
  return ib_xasprintf ("%s/%s.fatbin", p->cache, ib_digest_hex (j->fullkey.s));
}

/* With the full key known: done from the cache, or compile. */
static int
after_key (struct prebake *p, struct job *j, ib_error_t *err)
{
  j->output = output_path (p, j);
  if (access (j->output, F_OK) == 0)
    {
      p->res->cached++;
      j->state = JOB_DONE;
      return 0;
    }
  return start_compile (p, j, err);
}

/* Advance one job by a step that needs no process, or start its next one. */
static int
job_start (struct prebake *p, struct job *j, ib_error_t *err)
{
  if (direct_key (p, j))
    return after_key (p, j, err);
  return start_deps (p, j, err);
}

static int
job_exited (struct prebake *p, struct job *j, int status, ib_error_t *err)
{
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      cleanup_free char *tail = log_tail (j->log);
      return ib_error (err, IB_EKERNELS, "%s: nvcc %s of %s failed: %s", j->src->origin,
                       j->state == JOB_DEPS ? "-M" : "-fatbin", j->src->source, tail);
    }
  if (j->state == JOB_DEPS)
    return record_deps (p, j, err) < 0 ? -1 : after_key (p, j, err);
  if (rename (j->tmp_out, j->output) < 0)
    return ib_error_errno (err, errno, IB_EENV, "rename `%s`", j->tmp_out);
  unlink (j->log);
  j->state = JOB_DONE;
  return 0;
}

static int
run_jobs (struct prebake *p, int cap, ib_error_t *err)
{
  size_t next = 0, done = 0;
  int running = 0, ret = 0;
  while (done < p->n_jobs)
    {
      while (ret == 0 && running < cap && next < p->n_jobs)
        {
          struct job *j = &p->jobs[next++];
          if (job_start (p, j, err) < 0)
            ret = -1;
          else if (j->state == JOB_DONE)
            done++;
          else
            running++;
        }
      if (running == 0)
        break;
      int status;
      pid_t pid = waitpid (-1, &status, 0);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid < 0)
        return ib_error_errno (err, errno, IB_EENV, "waitpid");
      for (size_t i = 0; i < p->n_jobs; i++)
        {
          struct job *j = &p->jobs[i];
          if (j->pid != pid || j->state == JOB_DONE || j->state == JOB_START)
            continue;
          j->pid = 0;
          running--;
          /* After a failure, the running jobs are only waited for. */
          if (ret == 0 && job_exited (p, j, status, err) < 0)
            ret = -1;
          else if (ret == 0 && j->state != JOB_DONE)
            running++; /* its next process is running */
          if (j->state == JOB_DONE)
            done++;
          break;
        }
      if (ret < 0 && running == 0)
        break;
    }
  return ret;
}

/* ---- the layer entries --------------------------------------------------- */

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* One SHA256SUMS per destination folder ("HEX  NAME" lines, sorted), kept
 * in the store by content so the layer sees a stable source file. */
static int
add_sums (struct prebake *p, struct ib_prebake_result *res, ib_error_t *err)
{
  size_t n_files = res->n_entries;
  for (size_t i = 0; i < n_files; i++)
    {
      cleanup_free char *dir = ib_xstrdup (res->entries[i].path);
      char *slash = strrchr (dir, '/');
      *slash = '\0';
      cleanup_free char *sums_path = ib_xasprintf ("%s/SHA256SUMS", dir);
      bool have = false;
      for (size_t k = n_files; k < res->n_entries && !have; k++)
        have = strcmp (res->entries[k].path, sums_path) == 0;
      if (have)
        continue;
      char **lines = NULL;
      size_t n_lines = 0;
      for (size_t k = 0; k < n_files; k++)
        {
          const char *s2 = strrchr (res->entries[k].path, '/');
          if ((size_t) (s2 - res->entries[k].path) != strlen (dir) || strncmp (res->entries[k].path, dir, strlen (dir)))
            continue;
          ib_digest d;
          if (ib_sha256_file (res->entries[k].source, &d, NULL, err) < 0)
            return -1;
          lines = ib_xrealloc (lines, (n_lines + 1) * sizeof (*lines));
          lines[n_lines++] = ib_xasprintf ("%s  %s\n", ib_digest_hex (d.s), s2 + 1);
        }
      ib_qsort (lines, n_lines, sizeof (*lines), cmp_str);
      char *text = NULL;
      size_t len = 0;
      FILE *f = open_memstream (&text, &len);
      for (size_t k = 0; k < n_lines; k++)
        {
          fputs (lines[k], f);
          free (lines[k]);
        }
      fclose (f);
      free (lines);
      ib_digest d;
      ib_sha256_buf (text, len, &d);
      cleanup_free char *file = ib_xasprintf ("%s/%s.sums", p->cache, ib_digest_hex (d.s));
      int r = ib_write_cache_file (file, text, len, err);
      free (text);
      if (r < 0)
        return -1;
      res->entries = ib_xrealloc (res->entries, (res->n_entries + 1) * sizeof (*res->entries));
      res->entries[res->n_entries++] = (struct ib_layer_entry){ .path = ib_xstrdup (sums_path),
                                                                .type = IB_ENTRY_FILE,
                                                                .source = steal_pointer (&file),
                                                                .mode = 0644 };
    }
  return 0;
}

static void
describe_flags (struct prebake *p, struct ib_prebake_result *res)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fputs ("-fatbin", f);
  for (size_t i = 0; p->n_jobs && i < p->jobs[0].flags.n; i++)
    if (strncmp (p->jobs[0].flags.v[i], "-I", 2) != 0)
      fprintf (f, " %s", p->jobs[0].flags.v[i]);
  fclose (f);
  res->flags = text;
}

int
ib_prebake_run (struct ib_store *s, const struct ib_image *base, const struct ib_fsview *base_view,
                const struct ib_prebake_spec *spec, struct ib_prebake_result *res, ib_error_t *err)
{
  memset (res, 0, sizeof (*res));
  if (spec->n_sources == 0)
    return 0;
  struct prebake p = { .store = s, .spec = spec, .res = res };
  cleanup_free char *image_root = NULL;
  const char *max_jobs = getenv ("MAX_JOBS");
  int cap = spec->jobs > 0 ? spec->jobs : max_jobs && atoi (max_jobs) > 0 ? atoi (max_jobs) : ib_online_cpus ();
  res->jobs = cap;
  int r = ib_find_nvcc (&res->nvcc, err);
  p.nvcc = res->nvcc;
  if (r == 0)
    r = ib_store_cache_dir (s, "nvcc", &p.cache, err);
  if (r == 0)
    r = nvcc_identity (p.nvcc, &p.id, err);
  if (r == 0)
    r = nvcc_version (p.nvcc, p.cache, &p.id, res, err);
  if (r == 0)
    r = unpack_image_sources (s, base, base_view, spec, &image_root, err);
  p.jobs = ib_xcalloc (spec->n_sources, sizeof (*p.jobs));
  for (size_t i = 0; r == 0 && i < spec->n_sources; i++, p.n_jobs++)
    r = job_init (&p, &p.jobs[i], &spec->sources[i], image_root, err);
  if (r == 0)
    r = run_jobs (&p, cap, err);
  for (size_t i = 0; r == 0 && i < p.n_jobs; i++)
    {
      res->entries = ib_xrealloc (res->entries, (res->n_entries + 1) * sizeof (*res->entries));
      cleanup_free char *clean = ib_clean_tar_path (p.jobs[i].src->dest);
      res->entries[res->n_entries++] = (struct ib_layer_entry){ .path = steal_pointer (&clean),
                                                                .type = IB_ENTRY_FILE,
                                                                .source = ib_xstrdup (p.jobs[i].output),
                                                                .mode = 0644 };
    }
  if (r == 0)
    r = add_sums (&p, res, err);
  describe_flags (&p, res);
  for (size_t i = 0; i < p.n_jobs; i++)
    {
      struct job *j = &p.jobs[i];
      argv_clear (&j->flags);
      free (j->path);
      free (j->deps_out);
      free (j->log);
      free (j->tmp_out);
      free (j->output);
    }
  free (p.jobs);
  free (p.cache);
  return r;
}

void
ib_prebake_result_clear (struct ib_prebake_result *r)
{
  for (size_t i = 0; i < r->n_entries; i++)
    {
      free (r->entries[i].path);
      free (r->entries[i].source);
    }
  free (r->entries);
  free (r->nvcc);
  free (r->nvcc_version);
  free (r->flags);
  memset (r, 0, sizeof (*r));
}
