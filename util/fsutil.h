/* File-system helpers shared by every module: the one place that knows how to
 * make a write durable and atomic (temporary file, fsync, rename, fsync of the
 * directory), so that a kill at any moment leaves either the old or the new
 * file, never a torn one. */
#ifndef IB_FSUTIL_H
#define IB_FSUTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

int ib_mkdir_p (const char *path, mode_t mode, ib_error_t *err);
/* Write LEN bytes to PATH atomically (PATH.tmp-XXXXXX, fsync, rename). */
int ib_write_file_atomic (const char *path, const void *buf, size_t len, mode_t mode, ib_error_t *err);
/* For derived data that can be recomputed: the same temporary-file-and-rename
 * (never torn), without fsync, so thousands of small cache files cost no
 * disk flushes.  Readers must check that the content is complete. */
int ib_write_cache_file (const char *path, const void *buf, size_t len, ib_error_t *err);
/* The same for a file written in pieces (a cache too large to hold whole
 * in memory): open makes PATH.tmp-XXXXXX, the caller writes FD (e.g. with
 * ib_write_all), commit renames it over PATH (DURABLE: fsync'd first, and
 * its folder after, as ib_write_file_atomic does), abort removes it; both
 * release F. */
struct ib_atomic_file
{
  int fd;
  char *tmp, *path;
};
int ib_atomic_file_open (struct ib_atomic_file *f, const char *path, ib_error_t *err);
int ib_atomic_file_commit (struct ib_atomic_file *f, mode_t mode, bool durable, ib_error_t *err);
void ib_atomic_file_abort (struct ib_atomic_file *f);
/* Read a whole file of at most MAX bytes (a larger one is an error). */
int ib_read_file (const char *path, size_t max, char **out, size_t *len, ib_error_t *err);
int ib_fsync_dir (const char *dir, ib_error_t *err);
/* Write all of BUF to FD, retrying on EINTR and short writes. */
int ib_write_all (int fd, const void *buf, size_t len, const char *what, ib_error_t *err);
/* Read up to LEN bytes; returns bytes read (< LEN only at end of file). */
ssize_t ib_read_full (int fd, void *buf, size_t len);
/* The same from offset OFF (pread: FD's position stays, threads may share it). */
ssize_t ib_pread_full (int fd, void *buf, size_t len, uint64_t off);
/* LEN bytes of the ELF file WHAT at OFF; a short read is IB_EINTEGRITY
 * (the file is truncated), shared by the two ELF readers. */
int ib_elf_read_at (int fd, void *buf, size_t len, uint64_t off, const char *what, ib_error_t *err);
/* "a" + "/" + "b", without doubling slashes.  Never fails (aborts on OOM). */
char *ib_path_join (const char *a, const char *b);
/* NAME as an executable in a folder of $PATH (or of DEFAULT_PATH when
 * $PATH is unset); NULL when there is none. */
char *ib_find_in_path (const char *name, const char *default_path);
/* Remove a tree (used for temporary folders only). */
int ib_remove_tree (const char *path, ib_error_t *err);
/* The number in $NAME; DFLT when it is unset, not a whole number, or
 * below MIN (a knob set wrong behaves as one not set). */
long ib_env_number (const char *name, long dflt, long min);
/* Seconds on the monotonic clock: for durations, never dates. */
double ib_now (void);
void *ib_xmalloc (size_t n);
void *ib_xcalloc (size_t n, size_t size);
void *ib_xrealloc (void *p, size_t n);
/* qsort that takes an empty list as it comes: qsort's base must not be
 * NULL even for no elements (UBSan), and an empty list is often NULL. */
void ib_qsort (void *base, size_t n, size_t size, int (*cmp) (const void *, const void *));
/* bsearch over N items, NULL when there are none: BASE may then be NULL,
 * which bsearch itself may not be given (UBSan reports it). */
void *ib_bsearch (const void *key, const void *base, size_t n, size_t size, int (*cmp) (const void *, const void *));
char *ib_xstrdup (const char *s);
/* Append LEN bytes to the growing text *BUF of *USED bytes, kept
 * NUL-terminated (HTTP response bodies). */
void ib_xappend (char **buf, size_t *used, const void *p, size_t len);
char *ib_xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
char *ib_xvasprintf (const char *fmt, va_list ap) __attribute__ ((format (printf, 1, 0)));

#endif
