/* fuzz_confine (fuzz.h): the definition harnesses' parsers may name any
 * path; while confined, open() and opendir() of a path outside the scratch
 * folder (or with a ".." component) fail with EACCES, as they would for a
 * user without the rights.  The product sees a plain error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include "tests/fuzz/fuzz.h"

int __real_open (const char *path, int flags, ...);
DIR *__real_opendir (const char *path);
int __wrap_open (const char *path, int flags, ...);
DIR *__wrap_opendir (const char *path);

static bool confined;

void
fuzz_confine (int on)
{
  confined = on;
}

static bool
allowed (const char *path)
{
  if (!confined)
    return true;
  const char *root = fuzz_scratch ();
  size_t n = strlen (root);
  if (strncmp (path, root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
    return strncmp (path, "/tmp/imgverify-def-", 19) == 0 && strstr (path, "/..") == NULL;
  for (const char *p = path; (p = strstr (p, "..")); p += 2)
    if ((p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
      return false;
  return true;
}

int
__wrap_open (const char *path, int flags, ...)
{
  mode_t mode = 0;
  if (flags & (O_CREAT | __O_TMPFILE))
    {
      va_list ap;
      va_start (ap, flags);
      mode = va_arg (ap, mode_t);
      va_end (ap);
    }
  if (!allowed (path))
    {
      errno = EACCES;
      return -1;
    }
  return __real_open (path, flags, mode);
}

DIR *
__wrap_opendir (const char *path)
{
  if (!allowed (path))
    {
      errno = EACCES;
      return NULL;
    }
  return __real_opendir (path);
}
