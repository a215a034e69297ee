/* The harnesses' shared helpers (fuzz.h).  A harness process is the only
 * user of its scratch folder and memory file: they are made on first use
 * and live until exit. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "tests/fuzz/fuzz.h"

static char scratch[256];

char *
fuzz_text (const uint8_t *data, size_t size)
{
  char *s = malloc (size + 1);
  if (s == NULL)
    abort ();
  memcpy (s, data, size);
  s[size] = '\0';
  return s;
}

void
fuzz_split (char *text, char **parts, int max)
{
  const char *sep = FUZZ_SEP;
  for (int i = 0; i < max; i++)
    parts[i] = "";
  for (int i = 0; i < max && text; i++)
    {
      parts[i] = text;
      char *s = i + 1 < max ? strstr (text, sep) : NULL;
      if (s)
        {
          *s = '\0';
          text = s + strlen (sep);
        }
      else
        text = NULL;
    }
}

/* ib_remove_tree: never follows a symbolic link (the scratch folder holds
 * what mutated archives and definitions made, links to "/" among them). */
void
fuzz_remove_tree (const char *path)
{
  ib_remove_tree (path, NULL);
}

static void
remove_scratch (void)
{
  if (scratch[0])
    fuzz_remove_tree (scratch);
}

const char *
fuzz_scratch (void)
{
  if (scratch[0])
    return scratch;
  const char *tmp = access ("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  snprintf (scratch, sizeof (scratch), "%s/ib-fuzz-XXXXXX", tmp);
  if (mkdtemp (scratch) == NULL)
    fuzz_fail ("mkdtemp %s: %s", scratch, strerror (errno));
  atexit (remove_scratch);
  return scratch;
}

void
fuzz_write (const char *name, const void *buf, size_t len)
{
  char path[4096];
  snprintf (path, sizeof (path), "%s/%s", fuzz_scratch (), name);
  char *slash = strrchr (path, '/');
  *slash = '\0';
  mkdir (path, 0755);
  *slash = '/';
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write (fd, buf, len) != (ssize_t) len || close (fd) < 0)
    fuzz_fail ("write %s: %s", path, strerror (errno));
}

int
fuzz_memfd (const uint8_t *data, size_t size)
{
  static int fd = -1;
  if (fd < 0 && (fd = memfd_create ("fuzz", MFD_CLOEXEC)) < 0)
    fuzz_fail ("memfd_create: %s", strerror (errno));
  if (ftruncate (fd, 0) < 0 || pwrite (fd, data, size, 0) != (ssize_t) size)
    fuzz_fail ("memfd: %s", strerror (errno));
  return fd;
}

void
fuzz_fail (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("fuzz: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
  abort ();
}
