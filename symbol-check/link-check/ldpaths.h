/* Where glibc's loader looks for a library, for the image's architecture:
 * the default folders (Debian's multiarch ones when the image has them,
 * else /lib64 and /usr/lib64), the folders of the image's /etc/ld.so.conf
 * (the ld.so.cache that ldconfig makes of them, read by layers/view/ldconf.h),
 * the image config's LD_LIBRARY_PATH, and the dynamic string tokens of DT_RPATH/DT_RUNPATH
 * ($ORIGIN, $LIB, $PLATFORM, with or without braces).
 *
 * Not modelled: the glibc-hwcaps and legacy hwcap subfolders (they depend
 * on the node's CPU, and images rarely have them), a stale ld.so.cache
 * (the cache is taken to be what ldconfig would make now). */
#ifndef IB_LDPATHS_H
#define IB_LDPATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"

struct ib_link_paths
{
  unsigned machine;      /* EM_X86_64, EM_AARCH64, ... */
  const char *lib;       /* $LIB: "lib/x86_64-linux-gnu" on Debian */
  const char *platform;  /* $PLATFORM: "x86_64" */
  size_t n_env, n_conf, n_defaults;
  char **env, **conf, **defaults; /* absolute folders, in search order */
};

/* e_machine for an OCI architecture ("amd64", "arm64"); 0 when unknown. */
unsigned ib_link_machine_of_arch (const char *arch);
/* The defaults for MACHINE in view V, and LD_LIBRARY_PATH (may be NULL). */
void ib_link_paths_init (struct ib_link_paths *p, const struct ib_fsview *v, unsigned machine,
                         const char *ld_library_path);
void ib_link_paths_clear (struct ib_link_paths *p);
void ib_link_paths_add_conf (struct ib_link_paths *p, const char *dir);

/* A DT_RPATH/DT_RUNPATH entry with its tokens expanded; ORIGIN is the
 * loading object's folder.  NULL for an unknown token (the loader drops
 * such an entry). */
char *ib_link_expand (const struct ib_link_paths *p, const char *entry, const char *origin);

#endif
