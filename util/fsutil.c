#include "util/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

void *
ib_xmalloc (size_t n)
{
  void *p = malloc (n ? n : 1);
  if (p == NULL)
    abort ();
  return p;
}

void *
ib_xcalloc (size_t n, size_t size)
{
  void *p = calloc (n ? n : 1, size ? size : 1);
  if (p == NULL)
    abort ();
  return p;
}

void
ib_qsort (void *base, size_t n, size_t size, int (*cmp) (const void *, const void *))
{
  if (n > 1)
    qsort (base, n, size, cmp);
}

void *
ib_bsearch (const void *key, const void *base, size_t n, size_t size, int (*cmp) (const void *, const void *))
{
  return n ? bsearch (key, base, n, size, cmp) : NULL;
}

void *
ib_xrealloc (void *p, size_t n)
{
  p = realloc (p, n ? n : 1);
  if (p == NULL)
    abort ();
  return p;
}

void
ib_xappend (char **buf, size_t *used, const void *p, size_t len)
{
  *buf = ib_xrealloc (*buf, *used + len + 1);
  memcpy (*buf + *used, p, len);
  *used += len;
  (*buf)[*used] = '\0';
}

char *
ib_xstrdup (const char *s)
{
  char *r = strdup (s);
  if (r == NULL)
    abort ();
  return r;
}

char *
ib_xasprintf (const char *fmt, ...)
{
  va_list ap;
  char *s;
  va_start (ap, fmt);
  if (vasprintf (&s, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return s;
}

char *
ib_xvasprintf (const char *fmt, va_list ap)
{
  char *s;
  if (vasprintf (&s, fmt, ap) < 0)
    abort ();
  return s;
}

char *
ib_path_join (const char *a, const char *b)
{
  size_t la = strlen (a);
  while (la > 1 && a[la - 1] == '/')
    la--;
  while (*b == '/')
    b++;
  /* By hand, not asprintf: the link gate joins a folder and a name for
   * every candidate of every DT_NEEDED it searches. */
  size_t lb = strlen (b);
  char *r = ib_xmalloc (la + lb + 2);
  memcpy (r, a, la);
  r[la] = '/';
  memcpy (r + la + 1, b, lb + 1);
  return r;
}

int
ib_mkdir_p (const char *path, mode_t mode, ib_error_t *err)
{
  cleanup_free char *p = ib_xstrdup (path);
  for (char *s = p + 1; *s; s++)
    {
      if (*s != '/')
        continue;
      *s = '\0';
      if (mkdir (p, mode) < 0 && errno != EEXIST)
        return ib_error_errno (err, errno, IB_EENV, "mkdir `%s`", p);
      *s = '/';
    }
  if (mkdir (p, mode) < 0 && errno != EEXIST)
    return ib_error_errno (err, errno, IB_EENV, "mkdir `%s`", p);
  return 0;
}

int
ib_write_all (int fd, const void *buf, size_t len, const char *what, ib_error_t *err)
{
  const char *p = buf;
  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ib_error_errno (err, errno, IB_EENV, "write `%s`", what);
      p += n;
      len -= (size_t) n;
    }
  return 0;
}

/* read(2) or, when AT is not negative, pread(2) from AT, until LEN bytes
 * or the end of the file. */
static ssize_t
read_loop (int fd, void *buf, size_t len, off_t at)
{
  size_t got = 0;
  while (got < len)
    {
      ssize_t n = at < 0 ? read (fd, (char *) buf + got, len - got)
                         : pread (fd, (char *) buf + got, len - got, at + (off_t) got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      if (n == 0)
        break;
      got += (size_t) n;
    }
  return (ssize_t) got;
}

ssize_t
ib_read_full (int fd, void *buf, size_t len)
{
  return read_loop (fd, buf, len, -1);
}

ssize_t
ib_pread_full (int fd, void *buf, size_t len, uint64_t off)
{
  return read_loop (fd, buf, len, (off_t) off);
}

int
ib_fsync_dir (const char *dir, ib_error_t *err)
{
  cleanup_close int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open directory `%s`", dir);
  if (fsync (fd) < 0 && errno != EINVAL)
    return ib_error_errno (err, errno, IB_EENV, "fsync `%s`", dir);
  return 0;
}

int
ib_atomic_file_open (struct ib_atomic_file *f, const char *path, ib_error_t *err)
{
  f->tmp = ib_xasprintf ("%s.tmp-XXXXXX", path);
  f->fd = mkostemp (f->tmp, O_CLOEXEC);
  if (f->fd < 0)
    {
      ib_error_errno (err, errno, IB_EENV, "create `%s`", f->tmp);
      free (f->tmp);
      f->tmp = NULL;
      return -1;
    }
  f->path = ib_xstrdup (path);
  return 0;
}

void
ib_atomic_file_abort (struct ib_atomic_file *f)
{
  if (f->fd >= 0)
    close (f->fd);
  if (f->tmp)
    unlink (f->tmp);
  free (f->tmp);
  free (f->path);
  *f = (struct ib_atomic_file){ .fd = -1 };
}

int
ib_atomic_file_commit (struct ib_atomic_file *f, mode_t mode, bool durable, ib_error_t *err)
{
  if (fchmod (f->fd, mode) < 0 || (durable && fsync (f->fd) < 0))
    {
      ib_error_errno (err, errno, IB_EENV, "write `%s`", f->tmp);
      ib_atomic_file_abort (f);
      return -1;
    }
  if (rename (f->tmp, f->path) < 0)
    {
      ib_error_errno (err, errno, IB_EENV, "rename `%s`", f->path);
      ib_atomic_file_abort (f);
      return -1;
    }
  free (steal_pointer (&f->tmp)); /* renamed: nothing left to unlink */
  cleanup_free char *dir = ib_xstrdup (f->path);
  ib_atomic_file_abort (f);
  if (!durable)
    return 0;
  char *slash = strrchr (dir, '/');
  if (slash == NULL)
    return ib_fsync_dir (".", err);
  *slash = '\0';
  return ib_fsync_dir (*dir ? dir : "/", err);
}

static int
write_whole (const char *path, const void *buf, size_t len, mode_t mode, bool durable, ib_error_t *err)
{
  struct ib_atomic_file f;
  if (ib_atomic_file_open (&f, path, err) < 0)
    return -1;
  if (ib_write_all (f.fd, buf, len, f.tmp, err) < 0)
    {
      ib_atomic_file_abort (&f);
      return -1;
    }
  return ib_atomic_file_commit (&f, mode, durable, err);
}

int
ib_write_file_atomic (const char *path, const void *buf, size_t len, mode_t mode, ib_error_t *err)
{
  return write_whole (path, buf, len, mode, true, err);
}

int
ib_write_cache_file (const char *path, const void *buf, size_t len, ib_error_t *err)
{
  return write_whole (path, buf, len, 0644, false, err);
}

int
ib_read_file (const char *path, size_t max, char **out, size_t *len, ib_error_t *err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "open `%s`", path);
  struct stat st;
  if (fstat (fd, &st) < 0)
    return ib_error_errno (err, errno, IB_EENV, "stat `%s`", path);
  if (!S_ISREG (st.st_mode))
    return ib_error (err, IB_EENV, "`%s` is not a regular file", path);
  if ((size_t) st.st_size > max)
    return ib_error (err, IB_EINTEGRITY, "`%s` is %lld bytes, more than the %zu allowed", path,
                     (long long) st.st_size, max);
  cleanup_free char *buf = ib_xmalloc ((size_t) st.st_size + 1);
  ssize_t n = ib_read_full (fd, buf, (size_t) st.st_size);
  if (n < 0)
    return ib_error_errno (err, errno, IB_EENV, "read `%s`", path);
  buf[n] = '\0';
  *out = steal_pointer (&buf);
  if (len)
    *len = (size_t) n;
  return 0;
}

char *
ib_find_in_path (const char *name, const char *default_path)
{
  const char *path = getenv ("PATH");
  cleanup_free char *copy = ib_xstrdup (path ? path : default_path);
  char *save = NULL;
  for (char *d = strtok_r (copy, ":", &save); d; d = strtok_r (NULL, ":", &save))
    {
      char *p = ib_path_join (d, name);
      if (access (p, X_OK) == 0)
        return p;
      free (p);
    }
  return NULL;
}

static int
remove_one (const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
  (void) st;
  (void) flag;
  (void) ftw;
  return remove (p) < 0 && errno != ENOENT ? -1 : 0;
}

int
ib_remove_tree (const char *path, ib_error_t *err)
{
  if (nftw (path, remove_one, 32, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
    return ib_error_errno (err, errno, IB_EENV, "remove `%s`", path);
  return 0;
}

int
ib_elf_read_at (int fd, void *buf, size_t len, uint64_t off, const char *what, ib_error_t *err)
{
  ssize_t n = pread (fd, buf, len, (off_t) off);
  if (n < 0)
    return ib_error_errno (err, errno, IB_EENV, "read `%s`", what);
  if ((size_t) n != len)
    return ib_error (err, IB_EINTEGRITY, "`%s` is truncated (ELF data past its end)", what);
  return 0;
}

double
ib_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

long
ib_env_number (const char *name, long dflt, long min)
{
  const char *v = getenv (name);
  char *end;
  long n = v ? strtol (v, &end, 10) : dflt;
  return v && (*end || end == v || n < min) ? dflt : n;
}
