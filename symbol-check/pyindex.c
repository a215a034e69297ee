/* The symbol gate's indexer: what each Python file of the checked packages
 * defines and imports, made in the file-list pass (layers/store/indexer.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/read/layer_reader.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/elfsyms.h"
#include "symbol-check/symcache.h"
#include "symbol-check/symgate.h"
#include "layers/tar/tarpath.h"

/* "torch/nn/__init__.py" -> "torch.nn", as the gate names modules. */
static char *
module_of (const char *rel)
{
  char *m = ib_xstrdup (rel);
  size_t n = strlen (m);
  m[n - 3] = '\0';
  n -= 3;
  if (n >= 8 && strcmp (m + n - 8, "__init__") == 0 && (n == 8 || m[n - 9] == '/'))
    m[n > 8 ? n - 9 : 0] = '\0';
  for (char *p = m; *p; p++)
    if (*p == '/')
      *p = '.';
  return m;
}

static bool
in_packages (const struct ib_python_indexer *x, const char *module)
{
  for (size_t i = 0; i < x->n_packages; i++)
    {
      size_t n = strlen (x->packages[i]);
      if (strncmp (module, x->packages[i], n) == 0 && (module[n] == '\0' || module[n] == '.'))
        return true;
    }
  return false;
}

/* PATH relative to the root when it is under it and ends with SUFFIX
 * (".py", ".so"), else NULL. */
static const char *
under_root (const struct ib_python_indexer *x, const char *path, const char *suffix)
{
  size_t pl = strlen (path), rl = strlen (x->root), sl = strlen (suffix);
  if (pl <= sl || strcmp (path + pl - sl, suffix) != 0)
    return NULL;
  if (rl && (strncmp (path, x->root, rl) != 0 || path[rl] != '/'))
    return NULL;
  return rl ? path + rl + 1 : path;
}

/* PATH relative to the root, or NULL when it is not a module of the packages. */
static const char *
rel_of (const struct ib_python_indexer *x, const char *path)
{
  const char *rel = under_root (x, path, ".py");
  if (rel == NULL)
    return NULL;
  cleanup_free char *mod = module_of (rel);
  return in_packages (x, mod) ? rel : NULL;
}

/* An extension module of the packages ("torch/_C.cpython-311-x86_64-linux-gnu.so"
 * is torch._C): its dynamic symbols are what the gate checks an overlay's
 * `from torch._C import X` against. */
static bool
is_extension (const struct ib_python_indexer *x, const char *path)
{
  const char *rel = under_root (x, path, ".so");
  if (rel == NULL)
    return false;
  cleanup_free char *mod = ib_xstrdup (rel);
  char *slash = strrchr (mod, '/');
  char *dot = strchr (slash ? slash : mod, '.');
  *dot = '\0';
  for (char *p = mod; *p; p++)
    if (*p == '/')
      *p = '.';
  return in_packages (x, mod);
}

static enum ib_index_need
wants (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) size;
  (void) head;
  (void) n_head;
  if (is_extension (data, path))
    return IB_INDEX_FD;
  return rel_of (data, path) ? IB_INDEX_TEXT : IB_INDEX_SKIP;
}

/* The record the gate makes of an extension module (symgate.c's
 * native_extracted); one it cannot read it reads itself, and says why. */
static void
index_extension (struct ib_python_indexer *x, const char *path, const char *digest, int fd)
{
  cleanup_free char *cpath = ib_path_join (x->elf_cache, digest);
  if (access (cpath, F_OK) == 0)
    return;
  struct ib_elf_symbols *syms;
  ib_error_t e = NULL;
  if (ib_elf_dynsyms (fd, path, &syms, &e) < 0)
    {
      ib_error_release (&e);
      return;
    }
  ib_symcache_save_elf (x->elf_cache, digest, syms);
  ib_elf_symbols_free (syms);
}

static void
index_file (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  struct ib_python_indexer *x = data;
  if (fd >= 0)
    {
      index_extension (x, path, digest, fd);
      return;
    }
  const char *rel = rel_of (x, path);
  if (rel == NULL)
    return;
  /* The package its relative imports resolve against: its folder. */
  cleanup_free char *package = ib_xstrdup (rel);
  char *slash = strrchr (package, '/');
  if (slash)
    *slash = '\0';
  else
    package[0] = '\0';
  for (char *p = package; *p; p++)
    if (*p == '/')
      *p = '.';
  struct ib_py_module *m = ib_symcache_load_py (x->py_cache, digest, package);
  if (m)
    {
      ib_py_module_free (m);
      return;
    }
  ib_error_t e = NULL;
  if (ib_py_scan (text, len, package, &m, &e) < 0)
    {
      ib_error_release (&e); /* the gate reads it and says why */
      return;
    }
  ib_symcache_save_py (x->py_cache, digest, package, m);
  ib_py_module_free (m);
}

int
ib_python_indexer_init (struct ib_store *s, const char *python_path, char *const *packages, size_t n_packages,
                        struct ib_python_indexer *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (ib_store_cache_dir (s, "pysyms", &out->py_cache, err) < 0
      || ib_store_cache_dir (s, "elfsyms", &out->elf_cache, err) < 0)
    {
      free (out->py_cache);
      return -1;
    }
  out->root = ib_clean_tar_path (python_path ? python_path : "/");
  if (out->root == NULL)
    out->root = ib_xstrdup ("");
  out->packages = packages;
  out->n_packages = n_packages;
  out->ix = (struct ib_indexer){ "symbols", wants, index_file, out, false };
  return 0;
}

void
ib_python_indexer_clear (struct ib_python_indexer *x)
{
  free (x->py_cache);
  free (x->elf_cache);
  free (x->root);
  x->py_cache = x->elf_cache = x->root = NULL;
}
