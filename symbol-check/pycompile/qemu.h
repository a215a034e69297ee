/* Which qemu-user program runs an image's interpreter of another
 * architecture (an arm64 image's python3.13 on an x86-64 build machine):
 * the syntax check's answer is then still the image's own CPython.
 *
 * The program is started inside the chroot of the image's files (opened
 * before the chroot, run with fexecve), where none of the build machine's
 * libraries are: only a statically linked qemu-user runs there (Debian's
 * qemu-user-static, `qemu-aarch64-static`).  No binfmt_misc registration is
 * needed: the program names the interpreter itself. */
#ifndef IB_QEMU_H
#define IB_QEMU_H

#include "util/error.h"

/* The qemu-user program for OCI architecture ARCH ("arm64") on this machine:
 * IMGBUILD_QEMU when set (a program, or `off`), else qemu-T-static or
 * qemu-T (T: "aarch64") in /usr/local/bin, /usr/bin or /bin, the first that
 * is statically linked.  1 and *PATH (malloc'd); 0 and *WHY (malloc'd, for
 * the report: what is missing and how to get it) when none can run here;
 * never an error. */
int ib_qemu_find (const char *arch, char **path, char **why);

#endif
