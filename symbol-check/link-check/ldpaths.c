#include "symbol-check/link-check/ldpaths.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

unsigned
ib_link_machine_of_arch (const char *arch)
{
  if (arch == NULL)
    return 0;
  if (strcmp (arch, "amd64") == 0 || strcmp (arch, "x86_64") == 0)
    return EM_X86_64;
  if (strcmp (arch, "arm64") == 0 || strcmp (arch, "aarch64") == 0)
    return EM_AARCH64;
  if (strcmp (arch, "ppc64le") == 0)
    return EM_PPC64;
  if (strcmp (arch, "s390x") == 0)
    return EM_S390;
  if (strcmp (arch, "riscv64") == 0)
    return EM_RISCV;
  return 0;
}

static void
push (char ***list, size_t *n, char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = s;
}

static bool
is_dir (const struct ib_fsview *v, const char *path)
{
  const struct ib_fs_entry *e = ib_fsview_resolve (v, path, NULL);
  return e && e->type == IB_FS_DIR;
}

/* A colon- or semicolon-separated list (LD_LIBRARY_PATH); empty entries
 * mean the current folder, which has no meaning in an image: dropped. */
static void
split_path_list (const char *s, char ***list, size_t *n)
{
  cleanup_free char *copy = ib_xstrdup (s);
  for (char *save = NULL, *t = strtok_r (copy, ":;", &save); t; t = strtok_r (NULL, ":;", &save))
    push (list, n, ib_xstrdup (t));
}

void
ib_link_paths_init (struct ib_link_paths *p, const struct ib_fsview *v, unsigned machine,
                    const char *ld_library_path)
{
  memset (p, 0, sizeof (*p));
  p->machine = machine;
  const char *triplet = machine == EM_AARCH64 ? "aarch64-linux-gnu"
                        : machine == EM_PPC64 ? "powerpc64le-linux-gnu"
                        : machine == EM_S390  ? "s390x-linux-gnu"
                        : machine == EM_RISCV ? "riscv64-linux-gnu"
                                              : "x86_64-linux-gnu";
  p->platform = machine == EM_AARCH64 ? "aarch64" : machine == EM_X86_64 ? "x86_64" : triplet;
  cleanup_free char *lib_multi = ib_xasprintf ("/lib/%s", triplet);
  cleanup_free char *usr_multi = ib_xasprintf ("/usr/lib/%s", triplet);
  /* Debian's glibc searches the multiarch folders first, and $LIB is one;
   * elsewhere (Fedora, RHEL) the 64-bit folders are lib64. */
  if (is_dir (v, lib_multi) || is_dir (v, usr_multi))
    {
      p->lib = machine == EM_AARCH64 ? "lib/aarch64-linux-gnu" : "lib/x86_64-linux-gnu";
      push (&p->defaults, &p->n_defaults, ib_xstrdup (lib_multi));
      push (&p->defaults, &p->n_defaults, ib_xstrdup (usr_multi));
      push (&p->defaults, &p->n_defaults, ib_xstrdup ("/lib"));
      push (&p->defaults, &p->n_defaults, ib_xstrdup ("/usr/lib"));
    }
  else
    {
      p->lib = "lib64";
      push (&p->defaults, &p->n_defaults, ib_xstrdup ("/lib64"));
      push (&p->defaults, &p->n_defaults, ib_xstrdup ("/usr/lib64"));
    }
  if (ld_library_path)
    split_path_list (ld_library_path, &p->env, &p->n_env);
}

void
ib_link_paths_clear (struct ib_link_paths *p)
{
  for (size_t i = 0; i < p->n_env; i++)
    free (p->env[i]);
  for (size_t i = 0; i < p->n_conf; i++)
    free (p->conf[i]);
  for (size_t i = 0; i < p->n_defaults; i++)
    free (p->defaults[i]);
  free (p->env);
  free (p->conf);
  free (p->defaults);
  memset (p, 0, sizeof (*p));
}

void
ib_link_paths_add_conf (struct ib_link_paths *p, const char *dir)
{
  for (size_t i = 0; i < p->n_conf; i++)
    if (strcmp (p->conf[i], dir) == 0)
      return;
  push (&p->conf, &p->n_conf, ib_xstrdup (dir));
}

/* Length of the token at S ("ORIGIN" or "{ORIGIN}") named NAME, else 0. */
static size_t
token (const char *s, const char *name)
{
  size_t n = strlen (name);
  if (strncmp (s, name, n) == 0 && !(s[n] == '_' || (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z')
                                     || (s[n] >= '0' && s[n] <= '9')))
    return n;
  if (s[0] == '{' && strncmp (s + 1, name, n) == 0 && s[n + 1] == '}')
    return n + 2;
  return 0;
}

char *
ib_link_expand (const struct ib_link_paths *p, const char *entry, const char *origin)
{
  char *out = NULL;
  size_t used = 0;
  ib_xappend (&out, &used, "", 0);
  for (const char *c = entry; *c;)
    {
      if (*c != '$')
        {
          size_t run = strcspn (c, "$");
          ib_xappend (&out, &used, c, run);
          c += run;
          continue;
        }
      size_t n;
      const char *val;
      if ((n = token (c + 1, "ORIGIN")))
        val = origin;
      else if ((n = token (c + 1, "LIB")))
        val = p->lib;
      else if ((n = token (c + 1, "PLATFORM")))
        val = p->platform;
      else
        {
          free (out);
          return NULL;
        }
      ib_xappend (&out, &used, val, strlen (val));
      c += 1 + n;
    }
  return out;
}
