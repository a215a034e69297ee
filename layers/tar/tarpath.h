/* What a tar entry's name means, as every reader of layers takes it: the
 * path it names inside the root, and whether a whiteout names a file.  The
 * layer reader, the hostile-entry check, the view, the extractors and the
 * bundle all read names through these two, so that no two of them can
 * disagree on which file an entry is. */
#ifndef IB_TARPATH_H
#define IB_TARPATH_H

#include <stdbool.h>

/* "a/./b/" -> "a/b"; leading "/" and "./" dropped.  NULL for a path with
 * ".." in it or one that is empty (the root). */
char *ib_clean_tar_path (const char *p);
/* A whiteout ".wh.GONE" whose GONE is empty, `.` or `..` names no file:
 * tarcheck reports it, bundle extraction refuses it, fsview ignores it. */
bool ib_whiteout_names_nothing (const char *gone);

#endif
