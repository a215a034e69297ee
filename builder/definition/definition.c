#include "builder/definition/definition.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layers/image/image.h"
#include "layers/read/layer_reader.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/definition/definition_private.h"
#include "layers/tar/tarpath.h"


void
ib_definition_free (struct ib_definition *d)
{
  if (d == NULL)
    return;
  for (size_t i = 0; i < d->n_items; i++)
    {
      struct ib_copy_item *it = &d->items[i];
      free (it->raw_target);
      free (it->dest);
      free (it->source);
      free (it->link);
      free (it->origin);
    }
  for (size_t i = 0; i < d->n_platform_lines; i++)
    {
      free (d->platform_lines[i].platform);
      free (d->platform_lines[i].line);
      free (d->platform_lines[i].origin);
    }
  free (d->platform_lines);
  for (size_t i = 0; i < d->n_new; i++)
    free (d->new_paths[i]);
  for (size_t i = 0; i < d->n_env; i++)
    free (d->env[i]);
  for (size_t i = 0; i < d->n_labels * 2; i++)
    free (d->labels[i]);
  for (size_t i = 0; i < d->n_check_packages; i++)
    free (d->check_packages[i]);
  free (d->check_packages);
  for (size_t i = 0; i < d->n_allow_missing; i++)
    free (d->allow_missing[i]);
  free (d->allow_missing);
  for (size_t i = 0; i < d->n_py_required; i++)
    ib_requirement_clear (&d->py_required[i]);
  free (d->py_required);
  for (size_t i = 0; i < d->n_native_required; i++)
    ib_requirement_clear (&d->native_required[i]);
  free (d->native_required);
  free (d->python_path);
  free (d->targets);
  ib_target_clear (&d->target);
  for (size_t i = 0; i < d->n_kernel_required; i++)
    ib_requirement_clear (&d->kernel_required[i]);
  free (d->kernel_required);
  for (size_t i = 0; i < d->n_prebake; i++)
    {
      struct ib_prebake_source *p = &d->prebake[i];
      free (p->source);
      free (p->dest);
      free (p->origin);
      for (size_t k = 0; k < p->n_includes; k++)
        free (p->includes[k]);
      free (p->includes);
    }
  free (d->prebake);
  for (size_t i = 0; i < d->n_prebake_arches; i++)
    free (d->prebake_arches[i]);
  free (d->prebake_arches);
  for (size_t i = 0; i < d->n_prebake_flags; i++)
    free (d->prebake_flags[i]);
  free (d->prebake_flags);
  free (d->gate_text);
  ib_native_conf_clear (&d->native);
  for (size_t i = 0; i < d->n_recipes; i++)
    free (d->recipes[i]), free (d->recipe_origins[i]);
  free (d->recipes);
  free (d->recipe_origins);
  free (d->smoke_program);
  free (d->smoke_kernels);
  free (d->smoke_nccl);
  for (size_t i = 0; i < d->n_smoke_args; i++)
    free (d->smoke_args[i]);
  free (d->smoke_args);
  free (d->smoke_expect_transport);
  free (d->smoke_expect_transport_nodes);
  for (size_t i = 0; i < d->n_launch; i++)
    free (d->launch[i].kernel), free (d->launch[i].recipe);
  free (d->launch);
  ib_contract_clear (&d->contract);
  free (d->items);
  free (d->new_paths);
  free (d->env);
  free (d->labels);
  free (d->dir);
  free (d->file);
  free (d->name);
  free (d->from);
  free (d->platform);
  free (d->cmd_json);
  free (d);
}

struct ib_definition *
ib_def_new (const char *dir, const char *file)
{
  struct ib_definition *d = ib_xcalloc (1, sizeof (*d));
  d->dir = ib_xstrdup (dir);
  d->file = ib_xstrdup (file);
  d->gzip_level = 6;
  d->smoke_dcp = 2;
  d->smoke_timeout = 600;
  d->smoke_gpus_per_rank = 1;
  ib_contract_init (&d->contract);
  return d;
}

struct ib_copy_item *
ib_def_add_item (struct ib_definition *d, enum ib_entry_type type, const char *origin)
{
  d->items = ib_xrealloc (d->items, (d->n_items + 1) * sizeof (*d->items));
  struct ib_copy_item *it = &d->items[d->n_items++];
  memset (it, 0, sizeof (*it));
  it->type = type;
  it->mode = -1;
  it->origin = ib_xstrdup (origin);
  return it;
}

void
ib_def_add_string (char ***list, size_t *n, const char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = ib_xstrdup (s);
}

void
ib_def_add_label (struct ib_definition *d, const char *k, const char *v)
{
  d->labels = ib_xrealloc (d->labels, (d->n_labels + 1) * 2 * sizeof (*d->labels));
  d->labels[d->n_labels * 2] = ib_xstrdup (k);
  d->labels[d->n_labels * 2 + 1] = ib_xstrdup (v);
  d->n_labels++;
}

void
ib_def_add_env (struct ib_definition *d, const char *k, const char *v)
{
  cleanup_free char *kv = ib_xasprintf ("%s=%s", k, v);
  ib_def_add_string (&d->env, &d->n_env, kv);
}

char *
ib_def_source_path (const struct ib_definition *d, const char *src)
{
  return src[0] == '/' ? ib_xstrdup (src) : ib_path_join (d->dir, src);
}

char *
ib_copy_item_target (const struct ib_copy_item *it)
{
  const char *t = it->raw_target;
  if (it->dest && t[0] == '/')
    return NULL;
  cleanup_free char *full = it->dest ? ib_path_join (it->dest, t) : ib_xstrdup (t);
  char *clean = ib_clean_tar_path (full);
  if (clean == NULL)
    return NULL;
  char *abs = ib_xasprintf ("/%s", clean);
  free (clean);
  return abs;
}

int
ib_def_parse_mode (const char *s, int *mode, const char *origin, ib_error_t *err)
{
  char *end;
  long v = strtol (s, &end, 8);
  if (*s == '\0' || *end || v < 0 || v > 07777)
    return ib_error (err, IB_EDEFINITION, "%s: mode `%s` is not an octal permission", origin, s);
  *mode = (int) v;
  return 0;
}

/* ---- image.conf ---------------------------------------------------------- */

char *
ib_def_trim (char *s)
{
  while (isspace ((unsigned char) *s))
    s++;
  char *e = s + strlen (s);
  while (e > s && isspace ((unsigned char) e[-1]))
    *--e = '\0';
  return s;
}

/* Cut the next line out of *CURSOR (NULL at the end); line numbers stay
 * exact because empty lines are returned too. */
static char *
next_line (char **cursor)
{
  char *line = *cursor;
  if (line == NULL || *line == '\0')
    return NULL;
  char *nl = strchr (line, '\n');
  if (nl)
    {
      *nl = '\0';
      *cursor = nl + 1;
    }
  else
    *cursor = line + strlen (line);
  return line;
}

/* Split on blanks into at most MAX words; returns the count. */
int
ib_def_split_words (char *s, char **w, int max)
{
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r (s, " \t", &save); t && n < max; t = strtok_r (NULL, " \t", &save))
    w[n++] = t;
  return n;
}

static int
load_manifest (struct ib_definition *d, const char *manifest, const char *sources, const char *dest,
               const char *origin, ib_error_t *err)
{
  cleanup_free char *path = ib_def_source_path (d, manifest);
  cleanup_free char *text = NULL;
  if (ib_read_file (path, MAX_DEFINITION_SIZE, &text, NULL, err) < 0)
    {
      (*err)->class = IB_EDEFINITION;
      return ib_error_wrap (err, "%s: manifest", origin);
    }
  cleanup_free char *src_dir = ib_def_source_path (d, sources);
  int lineno = 0;
  char *cursor = text;
  for (char *line; (line = next_line (&cursor));)
    {
      lineno++;
      char *l = ib_def_trim (line);
      if (*l == '\0' || *l == '#')
        continue;
      char *w[3];
      cleanup_free char *where = ib_xasprintf ("%s:%d", manifest, lineno);
      if (ib_def_split_words (l, w, 3) != 2)
        return ib_error (err, IB_EDEFINITION, "%s: expected `FLAT-NAME TARGET`", where);
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_FILE, where);
      it->source = ib_path_join (src_dir, w[0]);
      it->raw_target = ib_xstrdup (w[1]);
      it->dest = ib_xstrdup (dest);
    }
  return 0;
}

static int
tree_child (struct ib_definition *d, const char *src, const char *target, const char *name, const char *origin,
            ib_error_t *err)
{
  cleanup_free char *s = ib_path_join (src, name);
  cleanup_free char *t = ib_path_join (target, name);
  struct stat st;
  if (lstat (s, &st) < 0)
    return ib_error_errno (err, errno, IB_EDEFINITION, "%s: `%s`", origin, s);
  if (S_ISDIR (st.st_mode))
    return ib_def_add_tree (d, s, t, origin, err);
  if (S_ISLNK (st.st_mode))
    {
      char link[4096];
      ssize_t n = readlink (s, link, sizeof (link) - 1);
      if (n < 0)
        return ib_error_errno (err, errno, IB_EDEFINITION, "%s: readlink `%s`", origin, s);
      link[n] = '\0';
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_SYMLINK, origin);
      it->raw_target = steal_pointer (&t);
      it->link = ib_xstrdup (link);
      return 0;
    }
  struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_FILE, origin);
  it->raw_target = steal_pointer (&t);
  it->source = steal_pointer (&s);
  return 0;
}

/* A folder copied whole, like `COPY dir/ /target/`: its files, symlinks and
 * folders (so that empty ones exist too). */
int
ib_def_add_tree (struct ib_definition *d, const char *src, const char *target, const char *origin, ib_error_t *err)
{
  DIR *dir = opendir (src);
  if (dir == NULL)
    return ib_error_errno (err, errno, IB_EDEFINITION, "%s: source folder `%s`", origin, src);
  if (strcmp (target, "/") != 0)
    {
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_DIR, origin);
      it->raw_target = ib_xstrdup (target);
    }
  struct dirent *de;
  int r = 0;
  while (r == 0 && (de = readdir (dir)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0 || strcmp (de->d_name, "__pycache__") == 0)
        continue;
      r = tree_child (d, src, target, de->d_name, origin, err);
    }
  closedir (dir);
  return r;
}

static int
parse_copy_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[6];
  int n = ib_def_split_words (l, w, 6);
  if (n == 4 && strcmp (w[0], "manifest") == 0)
    return load_manifest (d, w[1], w[2], w[3], origin, err);
  if (n == 3 && strcmp (w[0], "tree") == 0)
    {
      cleanup_free char *src = ib_def_source_path (d, w[1]);
      return ib_def_add_tree (d, src, w[2], origin, err);
    }
  if (n == 3 && strcmp (w[0], "symlink") == 0)
    {
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_SYMLINK, origin);
      it->raw_target = ib_xstrdup (w[1]);
      it->link = ib_xstrdup (w[2]);
      return 0;
    }
  if ((n == 3 || n == 4) && strcmp (w[0], "file") == 0)
    {
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_FILE, origin);
      it->source = ib_def_source_path (d, w[1]);
      it->raw_target = ib_xstrdup (w[2]);
      if (n == 4)
        {
          if (strncmp (w[3], "mode=", 5) != 0)
            return ib_error (err, IB_EDEFINITION, "%s: unknown option `%s`", origin, w[3]);
          return ib_def_parse_mode (w[3] + 5, &it->mode, origin, err);
        }
      return 0;
    }
  return ib_error (err, IB_EDEFINITION,
                   "%s: expected `manifest FILE SOURCES DEST`, `file SRC TARGET [mode=NNNN]`, `tree SRC TARGET` "
                   "or `symlink TARGET LINK`",
                   origin);
}

static void
add_requirement (struct ib_requirement **list, size_t *n, char **w, int nw, const char *origin)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  struct ib_requirement *r = &(*list)[(*n)++];
  memset (r, 0, sizeof (*r));
  r->path = ib_xstrdup (w[1]);
  r->origin = ib_xstrdup (origin);
  for (int i = 2; i < nw; i++)
    ib_def_add_string (&r->names, &r->n_names, w[i]);
}

/* [symbols]: python-path DIR | check-package NAME | unresolved warn|error |
 * allow-missing MODULE... | python FILE NAME... | native PATH-OR-GLOB SYMBOL... */
static int
parse_symbols_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[256];
  int n = ib_def_split_words (l, w, 256);
  if (n == 2 && strcmp (w[0], "python-path") == 0)
    {
      if (w[1][0] != '/')
        return ib_error (err, IB_EDEFINITION, "%s: python-path must be an absolute image path", origin);
      free (d->python_path);
      d->python_path = ib_xstrdup (w[1]);
      return 0;
    }
  if (n == 2 && strcmp (w[0], "check-package") == 0)
    {
      ib_def_add_string (&d->check_packages, &d->n_check_packages, w[1]);
      return 0;
    }
  if (n == 2 && strcmp (w[0], "unresolved") == 0 && (strcmp (w[1], "warn") == 0 || strcmp (w[1], "error") == 0))
    {
      d->unresolved_is_error = strcmp (w[1], "error") == 0;
      return 0;
    }
  if (n >= 2 && strcmp (w[0], "allow-missing") == 0)
    {
      for (int i = 1; i < n; i++)
        ib_def_add_string (&d->allow_missing, &d->n_allow_missing, w[i]);
      return 0;
    }
  if (n >= 3 && strcmp (w[0], "python") == 0)
    {
      if (w[1][0] != '/' && d->python_path == NULL)
        return ib_error (err, IB_EDEFINITION, "%s: a relative file needs python-path first", origin);
      cleanup_free char *full = w[1][0] == '/' ? ib_xstrdup (w[1]) : ib_path_join (d->python_path, w[1]);
      w[1] = full;
      add_requirement (&d->py_required, &d->n_py_required, w, n, origin);
      return 0;
    }
  if (n >= 3 && strcmp (w[0], "native") == 0)
    {
      if (w[1][0] != '/')
        return ib_error (err, IB_EDEFINITION, "%s: a native path must be absolute", origin);
      add_requirement (&d->native_required, &d->n_native_required, w, n, origin);
      return 0;
    }
  return ib_error (err, IB_EDEFINITION,
                   "%s: expected `python-path DIR`, `check-package NAME`, `unresolved warn|error`, "
                   "`allow-missing MODULE...`, `python FILE NAME...` or `native PATH SYMBOL...`",
                   origin);
}

/* [kernels]: target MAJOR.MINOR... | require PATH-OR-GLOB KERNEL... */
static int
parse_kernels_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[256];
  int n = ib_def_split_words (l, w, 256);
  if (n >= 2 && strcmp (w[0], "target") == 0)
    {
      for (int i = 1; i < n; i++)
        {
          struct ib_compute_capability cc;
          if (ib_compute_capability_parse (w[i], &cc) < 0)
            return ib_error (err, IB_EDEFINITION, "%s: target `%s` is not a compute capability like 12.1", origin,
                             w[i]);
          d->targets = ib_xrealloc (d->targets, (d->n_targets + 1) * sizeof (*d->targets));
          d->targets[d->n_targets++] = cc;
        }
      return 0;
    }
  if (n >= 3 && strcmp (w[0], "require") == 0 && w[1][0] == '/')
    {
      add_requirement (&d->kernel_required, &d->n_kernel_required, w, n, origin);
      return 0;
    }
  return ib_error (err, IB_EDEFINITION, "%s: expected `target 12.1 ...` or `require /PATH-OR-GLOB KERNEL...`",
                   origin);
}

/* SRC of a prebake source: "image:/path" inside the base, else relative
 * to the definition. */
static char *
prebake_path (const struct ib_definition *d, const char *s, bool in_image)
{
  if (strncmp (s, "image:", 6) == 0)
    return ib_xstrdup (s + 6);
  return in_image ? ib_xstrdup (s) : ib_def_source_path (d, s);
}

/* [prebake]: arch ARCH... | flags FLAG... | jobs N |
 * source SRC DEST [include DIR...] */
static int
parse_prebake_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[256];
  int n = ib_def_split_words (l, w, 256);
  if (n >= 2 && (strcmp (w[0], "arch") == 0 || strcmp (w[0], "flags") == 0))
    {
      bool arch = w[0][0] == 'a';
      for (int i = 1; i < n; i++)
        ib_def_add_string (arch ? &d->prebake_arches : &d->prebake_flags, arch ? &d->n_prebake_arches : &d->n_prebake_flags,
                    w[i]);
      return 0;
    }
  if (n == 2 && strcmp (w[0], "jobs") == 0)
    {
      d->prebake_jobs = atoi (w[1]);
      return d->prebake_jobs > 0 ? 0 : ib_error (err, IB_EDEFINITION, "%s: jobs must be a positive number", origin);
    }
  if (n >= 3 && strcmp (w[0], "source") == 0 && (n == 3 || strcmp (w[3], "include") == 0))
    {
      if (w[2][0] != '/')
        return ib_error (err, IB_EDEFINITION, "%s: prebake destination `%s` must be an absolute image path", origin,
                         w[2]);
      d->prebake = ib_xrealloc (d->prebake, (d->n_prebake + 1) * sizeof (*d->prebake));
      struct ib_prebake_source *p = &d->prebake[d->n_prebake++];
      memset (p, 0, sizeof (*p));
      p->in_image = strncmp (w[1], "image:", 6) == 0;
      p->source = prebake_path (d, w[1], p->in_image);
      p->dest = ib_xstrdup (w[2]);
      p->origin = ib_xstrdup (origin);
      for (int i = 4; i < n; i++)
        {
          cleanup_free char *inc = prebake_path (d, w[i], p->in_image);
          ib_def_add_string (&p->includes, &p->n_includes, inc);
        }
      return 0;
    }
  return ib_error (err, IB_EDEFINITION,
                   "%s: expected `arch ARCH...`, `flags FLAG...`, `jobs N` or `source SRC DEST [include DIR...]`",
                   origin);
}

static bool
known_transport (const char *t)
{
  static const char *const known[] = { "P2P", "NVLS", "SHM", "NET/IB", "NET/Socket", "NET", NULL };
  for (int i = 0; known[i]; i++)
    if (strcasecmp (t, known[i]) == 0)
      return true;
  return false;
}

/* [run]: the launch contract only. */
static int
parse_run_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[64];
  int n = ib_def_split_words (l, w, 64);
  int r = n ? ib_contract_line (&d->contract, w, n, origin, err) : 1;
  if (r == 1)
    return ib_error (err, IB_EDEFINITION,
                     "%s: unknown key `%s` in [run] (shm-size, ipc, devices, memlock, cap-add)", origin,
                     n ? w[0] : "");
  return r;
}

/* [smoke] launch KERNEL grid=N block=N [shmem=BYTES] [args=SPEC,...] */
static int
parse_launch (struct ib_definition *d, char *const *w, int n, const char *origin, ib_error_t *err)
{
  if (n < 3)
    return ib_error (err, IB_EDEFINITION, "%s: expected `launch KERNEL grid=N block=N [shmem=BYTES] [args=...]`",
                     origin);
  cleanup_free char *recipe = ib_xstrdup ("");
  for (int i = 2; i < n; i++)
    {
      if (strncmp (w[i], "grid=", 5) && strncmp (w[i], "block=", 6) && strncmp (w[i], "shmem=", 6)
          && strncmp (w[i], "args=", 5))
        return ib_error (err, IB_EDEFINITION, "%s: launch: unknown word `%s` (grid=, block=, shmem=, args=)", origin,
                         w[i]);
      for (const char *a = strncmp (w[i], "args=", 5) == 0 ? w[i] + 5 : ""; *a;)
        {
          size_t len = strcspn (a, ",");
          if (!((strncmp (a, "buf:", 4) == 0 || strncmp (a, "i32:", 4) == 0 || strncmp (a, "i64:", 4) == 0
                 || strncmp (a, "f32:", 4) == 0)
                && len > 4))
            return ib_error (err, IB_EDEFINITION, "%s: launch: argument `%.*s` is not buf:BYTES, i32:N, i64:N or f32:X",
                             origin, (int) len, a);
          a += len + (a[len] == ',');
        }
      char *next = ib_xasprintf ("%s%s%s", recipe, *recipe ? " " : "", w[i]);
      free (recipe);
      recipe = next;
    }
  d->launch = ib_xrealloc (d->launch, (d->n_launch + 1) * sizeof (*d->launch));
  d->launch[d->n_launch++] = (struct ib_launch_recipe){ ib_xstrdup (w[1]), ib_xstrdup (recipe) };
  return 0;
}

/* [smoke]: program PATH | kernels IMAGE-PATH | nccl IMAGE-PATH | dcp N |
 * ranks N | timeout SECONDS | gpus-per-rank 0|1 | args ARG... | expect-transport T |
 * launch KERNEL RECIPE... | a key of the launch contract (contract.h) */
static int
parse_smoke_line (struct ib_definition *d, char *l, const char *origin, ib_error_t *err)
{
  char *w[64];
  int n = ib_def_split_words (l, w, 64);
  d->has_smoke = true;
  int c = n ? ib_contract_line (&d->contract, w, n, origin, err) : 1;
  if (c <= 0)
    return c;
  if (n >= 1 && strcmp (w[0], "launch") == 0)
    return parse_launch (d, w, n, origin, err);
  if (n == 2 && (strcmp (w[0], "expect-transport") == 0 || strcmp (w[0], "expect-transport-nodes") == 0))
    {
      if (!known_transport (w[1]))
        return ib_error (err, IB_EDEFINITION, "%s: %s `%s`: not P2P, NVLS, SHM, NET/IB or NET/Socket", origin, w[0],
                         w[1]);
      /* expect-transport: peers on one machine; -nodes: peers on two
       * nodes of a --hosts run. */
      char **slot = w[0][16] ? &d->smoke_expect_transport_nodes : &d->smoke_expect_transport;
      free (*slot);
      *slot = ib_xstrdup (w[1]);
      return 0;
    }
  if (n >= 2 && strcmp (w[0], "args") == 0)
    {
      for (int i = 1; i < n; i++)
        ib_def_add_string (&d->smoke_args, &d->n_smoke_args, w[i]);
      return 0;
    }
  if (n != 2)
    return ib_error (err, IB_EDEFINITION, "%s: expected KEY VALUE", origin);
  char **slot = strcmp (w[0], "kernels") == 0 ? &d->smoke_kernels : strcmp (w[0], "nccl") == 0 ? &d->smoke_nccl : NULL;
  if (slot)
    {
      if (w[1][0] != '/')
        return ib_error (err, IB_EDEFINITION, "%s: %s must be an absolute image path", origin, w[0]);
      free (*slot);
      *slot = ib_xstrdup (w[1]);
      return 0;
    }
  if (strcmp (w[0], "program") == 0)
    {
      free (d->smoke_program);
      d->smoke_program = ib_def_source_path (d, w[1]);
      return 0;
    }
  int *num = strcmp (w[0], "dcp") == 0 ? &d->smoke_dcp : strcmp (w[0], "ranks") == 0 ? &d->smoke_ranks
             : strcmp (w[0], "timeout") == 0 ? &d->smoke_timeout
             : strcmp (w[0], "gpus-per-rank") == 0 ? &d->smoke_gpus_per_rank : NULL;
  if (num == NULL)
    return ib_error (err, IB_EDEFINITION, "%s: unknown key `%s` in [smoke]", origin, w[0]);
  *num = atoi (w[1]);
  if (num == &d->smoke_gpus_per_rank && strcmp (w[1], "0") != 0 && strcmp (w[1], "1") != 0)
    return ib_error (err, IB_EDEFINITION, "%s: gpus-per-rank is 0 or 1", origin);
  if (*num < 0 || (num != &d->smoke_ranks && num != &d->smoke_gpus_per_rank && *num == 0))
    return ib_error (err, IB_EDEFINITION, "%s: %s must be a positive number", origin, w[0]);
  return 0;
}

static int
parse_image_key (struct ib_definition *d, const char *k, const char *v, const char *origin, ib_error_t *err)
{
  char **slot = strcmp (k, "name") == 0       ? &d->name
                : strcmp (k, "from") == 0     ? &d->from
                : strcmp (k, "platform") == 0 ? &d->platform
                : strcmp (k, "cmd") == 0      ? &d->cmd_json
                                              : NULL;
  if (slot)
    {
      free (*slot);
      *slot = ib_xstrdup (v);
      return 0;
    }
  if (strcmp (k, "gzip-level") == 0)
    {
      d->gzip_level = atoi (v);
      if (d->gzip_level < 1 || d->gzip_level > 9)
        return ib_error (err, IB_EDEFINITION, "%s: gzip-level must be 1..9", origin);
      return 0;
    }
  return ib_error (err, IB_EDEFINITION, "%s: unknown key `%s` in [image]", origin, k);
}

/* "copy linux/arm64": the line waits for ib_definition_select_platform. */
static int
defer_platform_line (struct ib_definition *d, const char *platform, const char *l, const char *origin,
                     ib_error_t *err)
{
  struct ib_platform p;
  if (ib_platform_parse (platform, &p, err) < 0)
    {
      (*err)->class = IB_EDEFINITION;
      return ib_error_wrap (err, "%s: section [copy %s]", origin, platform);
    }
  d->platform_lines = ib_xrealloc (d->platform_lines, (d->n_platform_lines + 1) * sizeof (*d->platform_lines));
  d->platform_lines[d->n_platform_lines++] = (struct ib_platform_line){ .platform = ib_xstrdup (platform),
                                                                        .line = ib_xstrdup (l),
                                                                        .origin = ib_xstrdup (origin) };
  return 0;
}

static const char *
config_field (const cJSON *config, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (config, key);
  return cJSON_IsString (v) ? v->valuestring : "";
}

int
ib_definition_select_platform (struct ib_definition *d, const cJSON *config, size_t *matched, ib_error_t *err)
{
  size_t n = 0;
  if (matched)
    *matched = 0;
  if (d->platform_selected)
    return 0;
  d->platform_selected = true;
  for (size_t i = 0; i < d->n_platform_lines; i++)
    {
      const struct ib_platform_line *pl = &d->platform_lines[i];
      struct ib_platform p;
      if (ib_platform_parse (pl->platform, &p, err) < 0)
        return -1;
      if (strcmp (p.os, config_field (config, "os")) != 0
          || strcmp (p.architecture, config_field (config, "architecture")) != 0
          || (p.variant[0] && strcmp (p.variant, config_field (config, "variant")) != 0))
        continue;
      cleanup_free char *l = ib_xstrdup (pl->line);
      if (parse_copy_line (d, l, pl->origin, err) < 0)
        return -1;
      n++;
    }
  if (matched)
    *matched = n;
  return 0;
}

static int
parse_conf_line (struct ib_definition *d, const char *section, char *l, const char *origin, ib_error_t *err)
{
  if (strncmp (section, "copy ", 5) == 0)
    return defer_platform_line (d, section + 5 + strspn (section + 5, " \t"), l, origin, err);
  if (strcmp (section, "copy") == 0)
    return parse_copy_line (d, l, origin, err);
  if (strcmp (section, "symbols") == 0)
    return parse_symbols_line (d, l, origin, err);
  if (strcmp (section, "kernels") == 0)
    return parse_kernels_line (d, l, origin, err);
  if (strcmp (section, "native") == 0)
    return ib_native_conf_line (&d->native, d->dir, l, origin, err);
  if (strcmp (section, "prebake") == 0)
    return parse_prebake_line (d, l, origin, err);
  if (strcmp (section, "smoke") == 0)
    return parse_smoke_line (d, l, origin, err);
  if (strcmp (section, "run") == 0)
    return parse_run_line (d, l, origin, err);
  if (strcmp (section, "triage") == 0)
    return 0; /* imgverify --triage reads it (triage.c); builds ignore it */
  if (strcmp (section, "new") == 0)
    {
      if (l[0] != '/')
        return ib_error (err, IB_EDEFINITION, "%s: a new path must be absolute", origin);
      ib_def_add_string (&d->new_paths, &d->n_new, l);
      return 0;
    }
  char *eq = strchr (l, '=');
  if (eq == NULL)
    return ib_error (err, IB_EDEFINITION, "%s: expected KEY = VALUE", origin);
  *eq = '\0';
  char *k = ib_def_trim (l), *v = ib_def_trim (eq + 1);
  if (strcmp (section, "image") == 0)
    return parse_image_key (d, k, v, origin, err);
  if (strcmp (section, "target") == 0)
    return ib_target_parse (&d->target, k, v, origin, err);
  if (strcmp (section, "recipe") == 0)
    {
      if (strcmp (k, "file") != 0 || *v == '\0')
        return ib_error (err, IB_EDEFINITION, "%s: [recipe] takes `file = PATH`", origin);
      cleanup_free char *path = ib_def_source_path (d, v);
      size_t n = d->n_recipes;
      ib_def_add_string (&d->recipe_origins, &n, origin);
      ib_def_add_string (&d->recipes, &d->n_recipes, path);
      return 0;
    }
  if (strcmp (section, "env") == 0)
    ib_def_add_env (d, k, v);
  else if (strcmp (section, "label") == 0)
    ib_def_add_label (d, k, v);
  else
    return ib_error (err, IB_EDEFINITION, "%s: unknown section [%s]", origin, section);
  return 0;
}

static void
record_gate_line (struct ib_definition *d, const char *section, const char *line)
{
  static const char *const gates[] = { "symbols", "native", "kernels", "target", "smoke", "run", NULL };
  bool gate = false;
  for (int i = 0; gates[i]; i++)
    gate |= strcmp (section, gates[i]) == 0;
  if (!gate || strncmp (line, "program ", 8) == 0)
    return;
  cleanup_free char *head = ib_xasprintf ("[%s]\n", section);
  const char *old = d->gate_text ? d->gate_text : "";
  /* A section header when the section changes.  The last header is the
   * last line that starts with '[' (a gate line may hold a '[', but never
   * first: such a line is a header). */
  const char *last = NULL;
  for (const char *p = old; *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : p + strlen (p))
    if (*p == '[')
      last = p;
  bool same = last && strncmp (last, head, strlen (head)) == 0;
  char *next = ib_xasprintf ("%s%s%s\n", old, same ? "" : head, line);
  free (d->gate_text);
  d->gate_text = next;
}

int
ib_definition_from_gate_text (const char *text, struct ib_definition **out, ib_error_t *err)
{
  char dir[] = "/tmp/imgverify-def-XXXXXX";
  if (mkdtemp (dir) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "mkdtemp");
  cleanup_free char *conf = ib_xasprintf ("[image]\nname = recorded:definition\nfrom = scratch\n%s", text);
  cleanup_free char *path = ib_path_join (dir, "image.conf");
  int r = ib_write_file_atomic (path, conf, strlen (conf), 0644, err);
  if (r == 0)
    r = ib_definition_load (dir, out, err);
  unlink (path);
  rmdir (dir);
  return r < 0 ? ib_error_wrap (err, "the definition recorded in the image") : 0;
}

static int
require_keys (const struct ib_definition *d, ib_error_t *err)
{
  if (d->name == NULL)
    return ib_error (err, IB_EDEFINITION, "%s: [image] has no name", d->file);
  if (d->from == NULL)
    return ib_error (err, IB_EDEFINITION, "%s: [image] has no from", d->file);
  return 0;
}

int
ib_definition_load (const char *path, struct ib_definition **out, ib_error_t *err)
{
  struct stat st;
  if (stat (path, &st) < 0)
    return ib_error_errno (err, errno, IB_EDEFINITION, "definition `%s`", path);
  cleanup_free char *dir = NULL;
  cleanup_free char *file = NULL;
  if (S_ISDIR (st.st_mode))
    {
      dir = ib_xstrdup (path);
      file = ib_path_join (path, "image.conf");
    }
  else
    {
      file = ib_xstrdup (path);
      dir = ib_xstrdup (path);
      char *slash = strrchr (dir, '/');
      if (slash)
        *slash = '\0';
      else
        strcpy (dir, ".");
    }
  cleanup_free char *text = NULL;
  if (ib_read_file (file, MAX_DEFINITION_SIZE, &text, NULL, err) < 0)
    {
      (*err)->class = IB_EDEFINITION;
      return ib_error_wrap (err, "definition");
    }
  struct ib_definition *d = ib_def_new (dir, file);
  const char *base = strrchr (file, '/') ? strrchr (file, '/') + 1 : file;
  cleanup_free char *section = ib_xstrdup ("");
  int lineno = 0, r = 0;
  char *cursor = text;
  for (char *line; r == 0 && (line = next_line (&cursor));)
    {
      lineno++;
      char *l = ib_def_trim (line);
      if (*l == '\0' || *l == '#')
        continue;
      cleanup_free char *origin = ib_xasprintf ("%s:%d", base, lineno);
      if (*l == '[')
        {
          char *close = strchr (l, ']');
          if (close == NULL || close[1])
            r = ib_error (err, IB_EDEFINITION, "%s: malformed section header", origin);
          else
            {
              *close = '\0';
              free (section);
              section = ib_xstrdup (l + 1);
              if (strcmp (section, "native") == 0)
                {
                  /* The section alone turns the gate on, with its defaults. */
                  char on[] = "defaults on";
                  record_gate_line (d, section, on);
                  r = ib_native_conf_line (&d->native, d->dir, on, origin, err);
                }
            }
          continue;
        }
      if (*section == '\0')
        r = ib_error (err, IB_EDEFINITION, "%s: text before the first [section]", origin);
      else
        {
          record_gate_line (d, section, l);
          r = parse_conf_line (d, section, l, origin, err);
        }
    }
  if (r == 0)
    r = require_keys (d, err);
  if (r == 0 && d->has_smoke && d->smoke_kernels == NULL)
    r = ib_error (err, IB_EDEFINITION, "%s: [smoke] names no `kernels` (the prebaked fatbin)", d->file);
  if (r == 0 && d->n_prebake && d->n_prebake_arches == 0)
    r = ib_error (err, IB_EDEFINITION, "%s: [prebake] has sources but no `arch` line", d->file);
  if (r < 0)
    {
      ib_definition_free (d);
      return -1;
    }
  *out = d;
  return 0;
}

char *
ib_definition_find (const char *target)
{
  if (strchr (target, '/') || strcmp (target, ".") == 0)
    return ib_xstrdup (target);
  const char *env = getenv ("IMGBUILD_IMAGES");
  /* An installed imgbuild finds ../share/imgbuild/images beside it. */
  char self[4096] = "";
  ssize_t n = readlink ("/proc/self/exe", self, sizeof (self) - 64);
  if (n > 0)
    {
      self[n] = '\0';
      strcpy (strrchr (self, '/'), "/../share/imgbuild/images");
    }
  const char *roots[] = { env && *env ? env : NULL, "images", IB_IMAGES_DIR, n > 0 ? self : NULL };
  for (size_t i = 0; i < 4; i++)
    {
      if (roots[i] == NULL)
        continue;
      char *p = ib_path_join (roots[i], target);
      struct stat st;
      if (stat (p, &st) == 0 && S_ISDIR (st.st_mode))
        return p;
      free (p);
    }
  return ib_xstrdup (target);
}

bool
ib_definition_declares_new (const struct ib_definition *d, const char *target)
{
  for (size_t i = 0; i < d->n_new; i++)
    {
      const char *n = d->new_paths[i];
      size_t len = strlen (n);
      if (strcmp (n, target) == 0 || (len && n[len - 1] == '/' && strncmp (n, target, len) == 0)
          || strcmp (n, "/") == 0)
        return true;
    }
  return false;
}
