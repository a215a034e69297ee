/* The view's globs (ib_fsview_glob): a range of the sorted view for a
 * pattern's literal head, and cheap tests before fnmatch. */
#include "fsview.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "fsview_private.h"

/* The entries PATTERN can match: those whose "/PATH" starts with its
 * literal head (what comes before its first `*`, `?`, `[` or `\\`), one
 * range of the sorted view.  fnmatch without flags matches literal
 * characters only by themselves, so nothing outside the range matches:
 * a base of 60,000 entries is otherwise 60,000 fnmatch calls per pattern. */
static void
glob_range (const struct ib_fsview *v, const char *pattern, size_t *from, size_t *to)
{
  size_t head = strcspn (pattern, "*?[\\");
  *from = 0;
  *to = v->n;
  if (head == 0)
    return;
  if (pattern[0] != '/')
    {
      *to = 0; /* every candidate starts with "/" */
      return;
    }
  cleanup_free char *prefix = strndup (pattern + 1, head - 1);
  ib_fsview_prefix_range (v, prefix, from, to);
}

/* The first RUN bytes of C in [AT, END), or NULL.  Runs are short (".so.")
 * and paths rarely hold their first byte: memchr skips ahead with vector
 * instructions where memmem builds its search tables on every call, which
 * was a third of the default kernel globs over a base. */
static const char *
find_run (const char *at, const char *end, const char *c, size_t run)
{
  while ((size_t) (end - at) >= run)
    {
      const char *p = memchr (at, c[0], (size_t) (end - at) - run + 1);
      if (p == NULL)
        return NULL;
      if (memcmp (p, c, run) == 0)
        return p;
      at = p + 1;
    }
  return NULL;
}

/* Whether PATH can match PATTERN, cheaply: the pattern's literal runs
 * (between `*` and `?`) must occur in PATH in their order, the first at
 * its start unless the pattern starts with a wildcard, the last at its
 * end unless it ends with one.  Only a necessary condition (fnmatch
 * decides), and only for patterns without `[` or `\\`.  The default
 * kernel globs ("*.so", "*.so.*") start with `*`: glob_range cannot narrow
 * them, and fnmatch over 60,000 paths four times was a third of a warm
 * build. */
static bool
may_match (const char *pattern, const char *path)
{
  if (strpbrk (pattern, "[\\"))
    return true;
  size_t plen = strlen (path);
  const char *at = path;
  for (const char *c = pattern; *c;)
    {
      size_t run = strcspn (c, "*?");
      if (run == 0)
        {
          at += *c == '?'; /* `?` takes one character */
          if (at > path + plen)
            return false;
          c++;
          continue;
        }
      bool first = c == pattern, last = c[run] == '\0';
      if (last && !first)
        return (size_t) (path + plen - at) >= run && memcmp (path + plen - run, c, run) == 0;
      if (first)
        {
          if (strncmp (at, c, run) != 0 || (last && at[run] != '\0'))
            return false;
          at += run;
        }
      else
        {
          const char *found = find_run (at, path + plen, c, run);
          if (found == NULL)
            return false;
          at = found + run;
        }
      c += run;
    }
  return true;
}

/* Whether "/PATH" (PATH LEN bytes) ends with TAIL. */
static bool
abs_ends_with (const char *path, size_t len, const char *tail, size_t n)
{
  if (n > len + 1)
    return false;
  if (n == len + 1)
    return tail[0] == '/' && memcmp (path, tail + 1, len) == 0;
  return memcmp (path + len - n, tail, n) == 0;
}

/* The files PATTERN matches, added to LIST unless SEEN (by entry index). */
static void
glob_one (const struct ib_fsview *v, const char *pattern, unsigned char *seen, const struct ib_fs_entry ***list,
          size_t *n)
{
  size_t from, to, cap = 0;
  glob_range (v, pattern, &from, &to);
  /* The literal tail after the last wildcard, checked before anything
   * else: "*.so" rejects most of a view with one memcmp each. */
  const char *wild = NULL;
  for (const char *c = pattern; *c; c++)
    if (*c == '*' || *c == '?')
      wild = c;
  bool tail_ok = wild && wild[1] && !strpbrk (pattern, "[\\");
  size_t tail_len = tail_ok ? strlen (wild + 1) : 0;
  cleanup_free char *abs = NULL;
  for (size_t i = from; i < to; i++)
    {
      ib_fsview_walked (v, i);
      /* Only the path until it matches: a view read in place makes an
       * entry of a record only for those. */
      const char *path = ib_fsview_path_at (v, i);
      size_t len = strlen (path);
      if (tail_ok && !abs_ends_with (path, len, wild + 1, tail_len))
        continue;
      if (len + 2 > cap)
        abs = ib_xrealloc (abs, cap = 2 * (len + 2));
      abs[0] = '/';
      memcpy (abs + 1, path, len + 1);
      if (!may_match (pattern, abs) || fnmatch (pattern, abs, 0) != 0)
        continue;
      const struct ib_fs_entry *e = ib_fsview_entry_at (v, i);
      if (v->obs)
        v->obs->seen (v->obs->data, e->path, e);
      const struct ib_fs_entry *file = ib_fsview_follow (v, e);
      if (file == NULL || seen[ib_fsview_id (v, file)])
        continue;
      seen[ib_fsview_id (v, file)] = 1;
      *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
      (*list)[(*n)++] = file;
    }
}

size_t
ib_fsview_glob_all (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                    const struct ib_fs_entry ***out)
{
  const struct ib_fs_entry **list = NULL;
  size_t n = 0;
  cleanup_free unsigned char *seen = ib_xcalloc (ib_fsview_ids (v) + 1, 1);
  for (size_t p = 0; v->obs && p < n_patterns; p++)
    v->obs->pattern (v->obs->data, patterns[p]);
  for (size_t p = 0; p < n_patterns; p++)
    glob_one (v, patterns[p], seen, &list, &n);
  *out = list;
  return n;
}

size_t
ib_fsview_glob (const struct ib_fsview *v, const char *pattern, const struct ib_fs_entry ***out)
{
  return ib_fsview_glob_all (v, &pattern, 1, out);
}
