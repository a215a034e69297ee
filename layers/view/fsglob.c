/* The view's globs (ib_fsview_glob): a range of the sorted view for a
 * pattern's literal head, and cheap tests before fnmatch. */
#include "layers/view/fsview.h"

#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/view/fsview_private.h"

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

/* ---- patterns compiled once for a walk ---------------------------------- */

/* A literal run of a pattern (between `*` and `?`), with the shift table
 * of Horspool's search: a run such as "/libcudart.so" starts with a byte
 * that every path holds several times, where memchr on its first byte
 * stopped at every "/" of every path; the table skips up to its length at
 * each step and is made once per pattern, not once per path. */
struct glob_lit
{
  const char *s;
  size_t len;
  size_t qmarks; /* the `?` just before it: each takes one character */
  bool first, last;
  unsigned char skip[256];
};

/* A pattern as a walk tests it.  PLAIN: no `[` or `\\`, so the cheap
 * tests below are sound (they read every other byte as itself). */
struct glob_prog
{
  const char *pattern;
  size_t from, to; /* the range of the view it can match */
  bool plain;
  const char *tail; /* the literal after the last wildcard ("" none) */
  size_t tail_len;
  struct glob_lit *lit;
  size_t n_lit;
  size_t trailing_qmarks; /* the `?` after the last run */
  size_t *hits; /* entries it matched, in path order */
  size_t n_hits;
  char *own; /* PATTERN, when it is the resolved one (pattern_resolved) */
};

static void
lit_init (struct glob_lit *l, const char *s, size_t len, size_t qmarks, bool first, bool last)
{
  *l = (struct glob_lit) { .s = s, .len = len, .qmarks = qmarks, .first = first, .last = last };
  memset (l->skip, len > 255 ? 255 : (int) len, sizeof (l->skip));
  for (size_t i = 0; i + 1 < len; i++)
    if (len - 1 - i < 256)
      l->skip[(unsigned char) s[i]] = (unsigned char) (len - 1 - i);
}

/* The first place of L in [AT, END), or NULL. */
static const char *
lit_find (const struct glob_lit *l, const char *at, const char *end)
{
  size_t m = l->len;
  if (m == 1)
    return memchr (at, l->s[0], (size_t) (end - at));
  while ((size_t) (end - at) >= m)
    {
      unsigned char c = (unsigned char) at[m - 1];
      if (c == (unsigned char) l->s[m - 1] && memcmp (at, l->s, m - 1) == 0)
        return at;
      at += l->skip[c];
    }
  return NULL;
}

static void
prog_init (struct glob_prog *g, const struct ib_fsview *v, const char *pattern)
{
  *g = (struct glob_prog) { .pattern = pattern, .tail = "" };
  glob_range (v, pattern, &g->from, &g->to);
  g->plain = strpbrk (pattern, "[\\") == NULL;
  if (!g->plain)
    return;
  const char *wild = NULL;
  for (const char *c = pattern; *c; c++)
    if (*c == '*' || *c == '?')
      wild = c;
  /* A pattern without wildcards is its own tail. */
  g->tail = wild ? wild + 1 : pattern;
  g->tail_len = strlen (g->tail);
  size_t qmarks = 0;
  for (const char *c = pattern; *c;)
    {
      size_t run = strcspn (c, "*?");
      if (run == 0)
        {
          qmarks += *c++ == '?';
          continue;
        }
      g->lit = ib_xrealloc (g->lit, (g->n_lit + 1) * sizeof (*g->lit));
      lit_init (&g->lit[g->n_lit++], c, run, qmarks, c == pattern, c[run] == '\0');
      qmarks = 0;
      c += run;
    }
  g->trailing_qmarks = qmarks;
}

/* Whether PATH (PLEN bytes, "/..." absolute) can match G, cheaply: its
 * literal runs must occur in PATH in their order, the first at its start
 * unless the pattern starts with a wildcard, the last at its end unless it
 * ends with one.  Only a necessary condition (fnmatch decides), and only
 * for plain patterns.  The default kernel globs ("*.so", "*.so.*") start
 * with `*`: glob_range cannot narrow them, and fnmatch over 60,000 paths
 * four times was a third of a warm build. */
static bool
may_match (const struct glob_prog *g, const char *path, size_t plen)
{
  if (!g->plain)
    return true;
  const char *at = path, *end = path + plen;
  for (size_t k = 0; k < g->n_lit; k++)
    {
      const struct glob_lit *l = &g->lit[k];
      at += l->qmarks;
      if (at > end)
        return false;
      if (l->last && !l->first)
        return (size_t) (end - at) >= l->len && memcmp (end - l->len, l->s, l->len) == 0;
      if (l->first)
        {
          if ((size_t) (end - at) < l->len || memcmp (at, l->s, l->len) != 0 || (l->last && at + l->len != end))
            return false;
          at += l->len;
        }
      else
        {
          const char *found = lit_find (l, at, end);
          if (found == NULL)
            return false;
          at = found + l->len;
        }
    }
  return (size_t) (end - at) >= g->trailing_qmarks;
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

/* A path ("usr/lib/x.so", LEN bytes) tested against the N patterns of G,
 * I added to the hits of those it matches.  ABS: room for "/PATH". */
static void
test_path (struct glob_prog *const *g, size_t n, const char *path, size_t i, char **abs, size_t *cap)
{
  size_t len = strlen (path);
  bool made = false;
  for (size_t p = 0; p < n; p++)
    {
      struct glob_prog *q = g[p];
      /* The literal tail first: "*.so" rejects most of a view with one
       * memcmp each. */
      if (q->plain && !abs_ends_with (path, len, q->tail, q->tail_len))
        continue;
      if (!made)
        {
          if (len + 2 > *cap)
            *abs = ib_xrealloc (*abs, *cap = 2 * (len + 2));
          (*abs)[0] = '/';
          memcpy (*abs + 1, path, len + 1);
          made = true;
        }
      if (!may_match (q, *abs, len + 1) || fnmatch (q->pattern, *abs, 0) != 0)
        continue;
      q->hits = ib_xrealloc (q->hits, (q->n_hits + 1) * sizeof (*q->hits));
      q->hits[q->n_hits++] = i;
    }
}

/* Entries [FROM, TO) of V tested against the N patterns of G, once each
 * path: a walk for several patterns reads each record once (a view read
 * in place reads its path from the mapped file), where a walk per
 * pattern read it once per pattern. */
static void
walk (const struct ib_fsview *v, struct glob_prog *const *g, size_t n, size_t from, size_t to)
{
  cleanup_free char *abs = NULL;
  size_t cap = 0;
  for (size_t i = from; i < to; i++)
    {
      ib_fsview_walked (v, i);
      /* Only the path until it matches: a view read in place makes an
       * entry of a record only for those. */
      test_path (g, n, ib_fsview_path_at (v, i), i, &abs, &cap);
    }
}

/* ---- the base's hits, kept ---------------------------------------------- */

/* A view read in place is a kept base (fscache.h) and the few entries
 * pushed on it.  The patterns that start with a wildcard ("*.so", the
 * fleet gates' library names) walk every path; over the base
 * the answer is the same on every build, so it is kept beside the view's
 * file, one file per pattern: the records it matched.  A warm build then
 * tests only the entries pushed: over CUDA's libraries (51,000 paths)
 * the fleet gates' two walks were a quarter of a warm build.
 *
 * The file: KEPT_MAGIC, the pattern, the view file's identity when mapped
 * (device, inode, size, mtime: a view rewritten is another file), the
 * record count, the hits' count, then the hits (record numbers, 32 bits,
 * increasing).  Anything else reads as none kept, and the base is
 * walked. */
#define KEPT_MAGIC "imgbuild glob hits 1\n"

struct kept_head
{
  uint64_t id[4];
  uint64_t n_records, n_hits;
};

static char *
kept_path (const struct ib_fsview *v, const char *pattern)
{
  uint64_t h = 0xcbf29ce484222325u; /* FNV-1a: the file says its pattern in full */
  for (const char *c = pattern; *c; c++)
    h = (h ^ (unsigned char) *c) * 0x100000001b3u;
  return ib_xasprintf ("%s.glob-%016llx", v->map_path, (unsigned long long) h);
}

static bool
kept_load (const struct ib_fsview *v, struct glob_prog *q)
{
  cleanup_free char *path = kept_path (v, q->pattern), *text = NULL;
  size_t len = 0, magic = strlen (KEPT_MAGIC), plen = strlen (q->pattern), at = magic + plen + 1;
  struct kept_head h;
  if (ib_read_file (path, (size_t) 1 << 30, &text, &len, NULL) < 0 || len < at + sizeof (h)
      || memcmp (text, KEPT_MAGIC, magic) != 0 || memcmp (text + magic, q->pattern, plen) != 0
      || text[magic + plen] != '\n')
    return false;
  memcpy (&h, text + at, sizeof (h));
  at += sizeof (h);
  if (memcmp (h.id, v->map_id, sizeof (h.id)) != 0 || h.n_records != v->map.n || h.n_hits > v->map.n
      || len != at + h.n_hits * sizeof (uint32_t))
    return false;
  q->hits = ib_xcalloc (h.n_hits + 1, sizeof (*q->hits));
  for (size_t k = 0; k < h.n_hits; k++)
    {
      uint32_t r;
      memcpy (&r, text + at + k * sizeof (r), sizeof (r));
      if (r >= v->map.n || (k && r <= q->hits[k - 1]))
        {
          free (q->hits);
          q->hits = NULL;
          return false;
        }
      q->hits[k] = r;
    }
  q->n_hits = h.n_hits;
  return true;
}

/* Q's hits over the base kept; a store that cannot be written costs the
 * walk again next time, nothing else. */
static void
kept_save (const struct ib_fsview *v, const struct glob_prog *q)
{
  if (strchr (q->pattern, '\n') || v->map.n > UINT32_MAX)
    return;
  struct kept_head h = { .n_records = v->map.n, .n_hits = q->n_hits };
  memcpy (h.id, v->map_id, sizeof (h.id));
  size_t magic = strlen (KEPT_MAGIC), plen = strlen (q->pattern), at = magic + plen + 1 + sizeof (h);
  cleanup_free char *buf = ib_xcalloc (at + q->n_hits * sizeof (uint32_t) + 1, 1);
  memcpy (buf, KEPT_MAGIC, magic);
  memcpy (buf + magic, q->pattern, plen);
  buf[magic + plen] = '\n';
  memcpy (buf + magic + plen + 1, &h, sizeof (h));
  for (size_t k = 0; k < q->n_hits; k++)
    {
      uint32_t r = (uint32_t) q->hits[k];
      memcpy (buf + at + k * sizeof (r), &r, sizeof (r));
    }
  cleanup_free char *path = kept_path (v, q->pattern);
  ib_write_cache_file (path, buf, at + q->n_hits * sizeof (uint32_t), NULL);
}

/* The base's hits of the N patterns of G, as record numbers in their
 * HITS: kept ones read, the others found by one walk of the records and
 * kept. */
static void
base_hits (const struct ib_fsview *v, struct glob_prog *const *g, size_t n)
{
  cleanup_free struct glob_prog **todo = ib_xcalloc (n ? n : 1, sizeof (*todo));
  size_t n_todo = 0;
  for (size_t p = 0; p < n; p++)
    if (!kept_load (v, g[p]))
      todo[n_todo++] = g[p];
  if (n_todo == 0)
    return;
  cleanup_free char *abs = NULL;
  size_t cap = 0;
  for (size_t r = 0; r < v->map.n; r++)
    {
      ib_fsview_walked (v, r);
      test_path (todo, n_todo, ib_fs_map_path (&v->map, r), r, &abs, &cap);
    }
  for (size_t p = 0; p < n_todo; p++)
    kept_save (v, todo[p]);
}

/* The hits of the N patterns of G over a view read in place: the base's,
 * of the records its pieces show, and the pushed entries tested. */
static void
walk_in_place (const struct ib_fsview *v, struct glob_prog *const *g, size_t n)
{
  base_hits (v, g, n);
  cleanup_free size_t **rec = ib_xcalloc (n, sizeof (*rec));
  cleanup_free size_t *n_rec = ib_xcalloc (n, sizeof (*n_rec));
  for (size_t p = 0; p < n; p++)
    {
      rec[p] = g[p]->hits;
      n_rec[p] = g[p]->n_hits;
      g[p]->hits = NULL;
      g[p]->n_hits = 0;
    }
  cleanup_free char *abs = NULL;
  size_t cap = 0;
  for (size_t k = 0; k < v->n_pieces; k++)
    {
      const struct ib_fsview_piece *pc = &v->pieces[k];
      if (pc->up)
        {
          for (size_t i = pc->start; i < pc->start + pc->len; i++)
            test_path (g, n, ib_fsview_path_at (v, i), i, &abs, &cap);
          continue;
        }
      for (size_t p = 0; p < n; p++)
        {
          /* The records FROM.. of this piece among the hits: a binary
           * search, then those below its end. */
          size_t lo = 0, hi = n_rec[p];
          while (lo < hi)
            {
              size_t mid = lo + (hi - lo) / 2;
              if (rec[p][mid] < pc->from)
                lo = mid + 1;
              else
                hi = mid;
            }
          for (; lo < n_rec[p] && rec[p][lo] < pc->from + pc->len; lo++)
            {
              struct glob_prog *q = g[p];
              q->hits = ib_xrealloc (q->hits, (q->n_hits + 1) * sizeof (*q->hits));
              q->hits[q->n_hits++] = pc->start + (rec[p][lo] - pc->from);
            }
        }
    }
  for (size_t p = 0; p < n; p++)
    free (rec[p]);
}

/* Every pattern's hits: a pattern with a literal head walks its own
 * (narrow) range; those that start with a wildcard share one walk of the
 * whole view, or of what was pushed on a base read in place. */
static void
match_all (const struct ib_fsview *v, struct glob_prog *g, size_t n)
{
  cleanup_free struct glob_prog **wide = ib_xcalloc (n ? n : 1, sizeof (*wide));
  size_t n_wide = 0;
  for (size_t p = 0; p < n; p++)
    {
      struct glob_prog *q = &g[p];
      if (q->from == 0 && q->to == v->n)
        wide[n_wide++] = q;
      else
        walk (v, &q, 1, q->from, q->to);
    }
  if (n_wide && v->pieces && v->map_path)
    walk_in_place (v, wide, n_wide);
  else if (n_wide)
    walk (v, wide, n_wide, 0, v->n);
}

/* The files G's hits are or link to, added to LIST unless SEEN (entry ids
 * marked with MARK): the observer told of each hit as it is taken. */
static void
take_hits (const struct ib_fsview *v, const struct glob_prog *g, unsigned *seen, unsigned mark,
           const struct ib_fs_entry ***list, size_t *n)
{
  for (size_t k = 0; k < g->n_hits; k++)
    {
      ib_fsview_walked (v, k); /* thousands of hits ("*.so") read as a walk */
      const struct ib_fs_entry *e = ib_fsview_entry_at (v, g->hits[k]);
      if (v->obs)
        v->obs->seen (v->obs->data, e->path, e);
      const struct ib_fs_entry *file = ib_fsview_follow (v, e);
      if (file == NULL || seen[ib_fsview_id (v, file)] == mark)
        continue;
      seen[ib_fsview_id (v, file)] = mark;
      *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
      (*list)[(*n)++] = file;
    }
}

/* PATTERN with the folders of its literal head as the kernel resolves them
 * (malloc'd), or NULL when they are the view's own: a pattern under
 * /lib/x86_64-linux-gnu is one under /usr/lib/x86_64-linux-gnu where /lib
 * links to usr/lib, and the view's paths are those a layer wrote, never
 * through a link. */
static char *
pattern_resolved (const struct ib_fsview *v, const char *pattern)
{
  if (pattern[0] != '/')
    return NULL;
  size_t cut = strcspn (pattern, "*?[\\");
  while (cut > 0 && pattern[cut - 1] != '/')
    cut--;
  if (cut <= 1)
    return NULL;
  cleanup_free char *folder = strndup (pattern, cut - 1), *canon = NULL;
  const struct ib_fs_entry *e = ib_fsview_resolve (v, folder, &canon);
  if (e == NULL || e->type != IB_FS_DIR || canon == NULL || strcmp (canon, folder + 1) == 0)
    return NULL;
  return *canon ? ib_xasprintf ("/%s/%s", canon, pattern + cut) : ib_xasprintf ("/%s", pattern + cut);
}

/* The patterns compiled and matched: *G (malloc'd, N of them). */
static struct glob_prog *
glob_match (const struct ib_fsview *v, const char *const *patterns, size_t n)
{
  struct glob_prog *g = ib_xcalloc (n ? n : 1, sizeof (*g));
  for (size_t p = 0; p < n; p++)
    {
      if (v->obs)
        v->obs->pattern (v->obs->data, patterns[p]);
      char *resolved = pattern_resolved (v, patterns[p]);
      if (resolved && v->obs)
        v->obs->pattern (v->obs->data, resolved);
      prog_init (&g[p], v, resolved ? resolved : patterns[p]);
      g[p].own = resolved;
    }
  match_all (v, g, n);
  return g;
}

static void
glob_free (struct glob_prog *g, size_t n)
{
  for (size_t p = 0; p < n; p++)
    {
      free (g[p].lit);
      free (g[p].hits);
      free (g[p].own);
    }
  free (g);
}

size_t
ib_fsview_glob_all (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                    const struct ib_fs_entry ***out)
{
  const struct ib_fs_entry **list = NULL;
  size_t n = 0;
  struct glob_prog *g = glob_match (v, patterns, n_patterns);
  cleanup_free unsigned *seen = ib_xcalloc (ib_fsview_ids (v) + 1, sizeof (*seen));
  for (size_t p = 0; p < n_patterns; p++)
    take_hits (v, &g[p], seen, 1, &list, &n);
  glob_free (g, n_patterns);
  *out = list;
  return n;
}

void
ib_fsview_glob_each (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                     const struct ib_fs_entry ***out, size_t *n_out)
{
  struct glob_prog *g = glob_match (v, patterns, n_patterns);
  cleanup_free unsigned *seen = ib_xcalloc (ib_fsview_ids (v) + 1, sizeof (*seen));
  for (size_t p = 0; p < n_patterns; p++)
    {
      out[p] = NULL;
      n_out[p] = 0;
      take_hits (v, &g[p], seen, (unsigned) p + 1, &out[p], &n_out[p]);
    }
  glob_free (g, n_patterns);
}

static int
by_index (const void *a, const void *b)
{
  size_t x = *(const size_t *) a, y = *(const size_t *) b;
  return x < y ? -1 : x > y;
}

size_t
ib_fsview_match (const struct ib_fsview *v, const char *const *patterns, size_t n_patterns,
                 const struct ib_fs_entry ***out)
{
  struct glob_prog *g = glob_match (v, patterns, n_patterns);
  size_t n_all = 0;
  for (size_t p = 0; p < n_patterns; p++)
    n_all += g[p].n_hits;
  cleanup_free size_t *all = ib_xcalloc (n_all + 1, sizeof (*all));
  for (size_t p = 0, k = 0; p < n_patterns; p++)
    for (size_t h = 0; h < g[p].n_hits; h++)
      all[k++] = g[p].hits[h];
  glob_free (g, n_patterns);
  if (n_all > 1)
    ib_qsort (all, n_all, sizeof (*all), by_index);
  const struct ib_fs_entry **list = ib_xcalloc (n_all + 1, sizeof (*list));
  size_t n = 0;
  for (size_t k = 0; k < n_all; k++)
    {
      if (k && all[k] == all[k - 1])
        continue;
      const struct ib_fs_entry *e = ib_fsview_entry_at (v, all[k]);
      if (v->obs)
        v->obs->seen (v->obs->data, e->path, e);
      list[n++] = e;
    }
  *out = list;
  return n;
}

size_t
ib_fsview_glob (const struct ib_fsview *v, const char *pattern, const struct ib_fs_entry ***out)
{
  return ib_fsview_glob_all (v, &pattern, 1, out);
}
