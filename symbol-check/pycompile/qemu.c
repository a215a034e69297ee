#include "symbol-check/pycompile/qemu.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/link-check/elfdyn.h"

/* OCI's architecture names and qemu-user's. */
static const char *const names[][2] = {
  { "amd64", "x86_64" }, { "arm64", "aarch64" }, { "386", "i386" },       { "arm", "arm" },
  { "ppc64le", "ppc64le" }, { "s390x", "s390x" }, { "riscv64", "riscv64" }, { "loong64", "loongarch64" },
};

static const char *
qemu_target (const char *arch)
{
  for (size_t i = 0; i < sizeof (names) / sizeof (names[0]); i++)
    if (strcmp (names[i][0], arch) == 0)
      return names[i][1];
  return NULL;
}

/* Whether PATH is an ELF program of this machine that needs no library
 * (a static or static-pie executable). */
static bool
is_static (const char *path)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  struct ib_elf_link *l = NULL;
  ib_error_t e = NULL;
  if (fd < 0 || ib_elf_link_read (fd, path, &l, &e) < 0)
    {
      ib_error_release (&e);
      return false;
    }
  bool ok = l->n_needed == 0;
  ib_elf_link_free (l);
  return ok;
}

int
ib_qemu_find (const char *arch, char **path, char **why)
{
  *path = *why = NULL;
  const char *set = getenv ("IMGBUILD_QEMU");
  if (set && *set)
    {
      if (strcmp (set, "off") == 0)
        *why = ib_xstrdup ("IMGBUILD_QEMU=off");
      else if (access (set, X_OK) < 0 || !is_static (set))
        *why = ib_xasprintf ("IMGBUILD_QEMU=%s is not a statically linked program", set);
      else
        *path = ib_xstrdup (set);
      return *path != NULL;
    }
  const char *t = qemu_target (arch);
  if (t == NULL)
    {
      *why = ib_xasprintf ("qemu-user has no emulator for %s", arch);
      return 0;
    }
  static const char *const dirs[] = { "/usr/local/bin", "/usr/bin", "/bin" };
  cleanup_free char *dynamic = NULL;
  for (size_t d = 0; d < sizeof (dirs) / sizeof (dirs[0]); d++)
    for (int suffix = 0; suffix < 2; suffix++)
      {
        char *p = ib_xasprintf ("%s/qemu-%s%s", dirs[d], t, suffix == 0 ? "-static" : "");
        if (access (p, X_OK) == 0 && is_static (p))
          {
            *path = p;
            return 1;
          }
        if (access (p, X_OK) == 0 && dynamic == NULL)
          dynamic = steal_pointer (&p);
        free (p);
      }
  if (dynamic)
    *why = ib_xasprintf ("%s is dynamically linked and cannot run in the image's chroot (apt-get install "
                         "qemu-user-static)",
                         dynamic);
  else
    *why = ib_xasprintf ("no qemu-%s on this machine (apt-get install qemu-user-static)", t);
  return 0;
}
