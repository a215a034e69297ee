#include "symbol-check/link-check/memo.h"

#include <elf.h>
#include <errno.h>
#include <fnmatch.h>
#include <link.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/store/digest.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/strmap.h"

#define MAGIC "imgbuild-memo 1"
#define MAX_MEMO (256u << 20)

struct seen
{
  char *path;
  char type; /* an ib_fs_type, or '-': nothing there */
  unsigned mode;
  uint64_t size;
  int layer;
  char digest[65];
  char *link;
};

struct ovl
{
  char type;
  char *path;
};

struct ib_memo
{
  char *kind;
  char *file; /* NULL: no cache folder, nothing kept */
  bool hit;
  struct ib_strmap *by_path; /* path -> index into SEEN; keys are SEEN's */
  struct seen *seen;
  size_t n_seen, cap_seen;
  char **patterns;
  size_t n_patterns;
  struct ovl *was, *now; /* the verdict's overlay; this image's */
  size_t n_was, n_now;
  bool picks; /* this image's overlay has an entry the check picks */
  struct ib_memo_said *said;
  size_t n_said;
  size_t counts[IB_MEMO_COUNTS];
  const struct ib_fsview *view;
  struct ib_fsview_observer obs;
};

/* ---- what was read ------------------------------------------------------- */

static void
seen_put (struct ib_memo *m, struct seen s)
{
  if (m->n_seen == m->cap_seen)
    m->seen = ib_xrealloc (m->seen, (m->cap_seen = m->cap_seen ? 2 * m->cap_seen : 1024) * sizeof (*m->seen));
  m->seen[m->n_seen] = s;
  ib_strmap_put (m->by_path, s.path, m->n_seen);
  m->n_seen++;
}

static const struct seen *
seen_get (const struct ib_memo *m, const char *path)
{
  size_t at;
  return ib_strmap_get (m->by_path, path, &at) ? &m->seen[at] : NULL;
}

static struct seen
seen_of (const char *path, const struct ib_fs_entry *e)
{
  struct seen s = { .path = ib_xstrdup (path), .type = '-' };
  if (e)
    {
      s.type = e->type;
      s.mode = e->mode;
      s.size = e->size;
      s.layer = e->layer;
      snprintf (s.digest, sizeof (s.digest), "%s", e->digest);
      s.link = e->link ? ib_xstrdup (e->link) : NULL;
    }
  return s;
}

/* A read, and the folder above it (looked up in turn, so every folder of
 * a read path is read: see memo.h). */
static void
on_seen (void *data, const char *path, const struct ib_fs_entry *e)
{
  struct ib_memo *m = data;
  if (seen_get (m, path))
    return;
  seen_put (m, seen_of (path, e));
  const char *slash = strrchr (path, '/');
  if (slash)
    {
      cleanup_free char *dir = strndup (path, (size_t) (slash - path));
      ib_fsview_lookup (m->view, dir);
    }
}

static void
on_pattern (void *data, const char *pattern)
{
  struct ib_memo *m = data;
  for (size_t i = 0; i < m->n_patterns; i++)
    if (strcmp (m->patterns[i], pattern) == 0)
      return;
  m->patterns = ib_xrealloc (m->patterns, (m->n_patterns + 1) * sizeof (*m->patterns));
  m->patterns[m->n_patterns++] = ib_xstrdup (pattern);
}

/* Whether an overlay entry of TYPE at PATH leaves every read as it was in
 * VIEW (memo.h). */
static bool
holds (const struct ib_memo *m, const struct ib_fsview *view, char type, const char *path)
{
  cleanup_free char *abs = ib_xasprintf ("/%s", path);
  for (size_t i = 0; i < m->n_patterns; i++)
    if (fnmatch (m->patterns[i], abs, 0) == 0)
      return false;
  const struct seen *s = seen_get (m, path);
  if (s == NULL)
    return true;
  if (type == IB_FS_WHITEOUT || type == IB_FS_OPAQUE)
    return false; /* what was read below it may be gone */
  const struct ib_fs_entry *e = ib_fsview_lookup (view, path);
  if (e == NULL || s->type == '-')
    return e == NULL && s->type == '-';
  if (e->type != s->type)
    return false;
  if (e->type == IB_FS_DIR)
    return true; /* a folder is read for what is in it, and that is read apart */
  return e->mode == s->mode && e->size == s->size && e->layer == s->layer && strcmp (e->digest, s->digest) == 0
         && (e->link == NULL) == (s->link == NULL) && (e->link == NULL || strcmp (e->link, s->link) == 0);
}

/* ---- the memo file ------------------------------------------------------- */

static void
put_field (FILE *f, const char *s)
{
  fputc ('\t', f);
  ib_fs_put_escaped (f, s);
}

/* "TAG[\tHEAD]\tFIELD\n" */
static void
put_line (FILE *f, const char *tag, const char *head, const char *field)
{
  fputs (tag, f);
  if (head)
    fprintf (f, "\t%s", head);
  put_field (f, field);
  fputc ('\n', f);
}

static char *
memo_text (const struct ib_memo *m, const char *kind, size_t *len)
{
  char *text = NULL;
  FILE *f = open_memstream (&text, len);
  fprintf (f, "%s\t%s\nc", MAGIC, kind);
  for (size_t i = 0; i < IB_MEMO_COUNTS; i++)
    fprintf (f, "\t%zu", m->counts[i]);
  fputc ('\n', f);
  for (size_t i = 0; i < m->n_said; i++)
    put_line (f, "p", m->said[i].is_error ? "1" : "0", m->said[i].msg);
  for (size_t i = 0; i < m->n_patterns; i++)
    put_line (f, "g", NULL, m->patterns[i]);
  for (size_t i = 0; i < m->n_now; i++)
    put_line (f, "o", (char[]){ m->now[i].type, '\0' }, m->now[i].path);
  for (size_t i = 0; i < m->n_seen; i++)
    {
      const struct seen *s = &m->seen[i];
      fprintf (f, "s\t%c\t%o\t%" PRIu64 "\t%d\t%s", s->type, s->mode, s->size, s->layer, s->digest[0] ? s->digest : "-");
      put_field (f, s->link ? s->link : "");
      put_field (f, s->path);
      fputc ('\n', f);
    }
  fputs ("end\n", f);
  fclose (f);
  return text;
}

/* Split LINE at its tabs into its fields (escaped tabs are not tabs);
 * the count, MAX + 1 when there are more than MAX. */
static size_t
split (char *line, char **fields, size_t max)
{
  size_t n = 0;
  for (char *c = line;;)
    {
      if (n == max)
        return max + 1;
      char *tab = strchr (c, '\t');
      if (tab)
        *tab = '\0';
      fields[n++] = c;
      if (tab == NULL)
        return n;
      c = tab + 1;
    }
}

/* S as a whole number in BASE; false for anything else. */
static bool
number (const char *s, int base, unsigned long long *out)
{
  char *end;
  errno = 0;
  *out = strtoull (s, &end, base);
  return end != s && *end == '\0' && errno == 0 && s[0] != '-';
}

static bool
parse_line (struct ib_memo *m, char *line)
{
  char *f[IB_MEMO_COUNTS + 1];
  size_t n = split (line, f, IB_MEMO_COUNTS + 1);
  if (strcmp (f[0], "c") == 0 && n == IB_MEMO_COUNTS + 1)
    {
      for (size_t i = 0; i < IB_MEMO_COUNTS; i++)
        {
          unsigned long long v;
          if (!number (f[i + 1], 10, &v))
            return false;
          m->counts[i] = (size_t) v;
        }
      return true;
    }
  if (strcmp (f[0], "p") == 0 && n == 3 && (strcmp (f[1], "0") == 0 || strcmp (f[1], "1") == 0))
    {
      m->said = ib_xrealloc (m->said, (m->n_said + 1) * sizeof (*m->said));
      m->said[m->n_said++] = (struct ib_memo_said){ f[1][0] == '1', ib_fs_unescape (f[2]) };
      return true;
    }
  if (strcmp (f[0], "g") == 0 && n == 2)
    {
      cleanup_free char *p = ib_fs_unescape (f[1]);
      on_pattern (m, p);
      return true;
    }
  if (strcmp (f[0], "o") == 0 && n == 3 && f[1][0] && !f[1][1])
    {
      m->was = ib_xrealloc (m->was, (m->n_was + 1) * sizeof (*m->was));
      m->was[m->n_was++] = (struct ovl){ f[1][0], ib_fs_unescape (f[2]) };
      return true;
    }
  if (strcmp (f[0], "s") == 0 && n == 8 && f[1][0] && !f[1][1] && strlen (f[5]) <= 64)
    {
      unsigned long long mode, size, layer;
      if (!number (f[2], 8, &mode) || !number (f[3], 10, &size) || !number (f[4], 10, &layer) || layer > INT_MAX)
        return false;
      struct seen s = { .type = f[1][0], .mode = (unsigned) mode, .size = size, .layer = (int) layer };
      if (strcmp (f[5], "-") != 0)
        memcpy (s.digest, f[5], strlen (f[5]) + 1);
      s.link = f[6][0] ? ib_fs_unescape (f[6]) : NULL;
      s.path = ib_fs_unescape (f[7]);
      if (seen_get (m, s.path))
        {
          free (s.link);
          free (s.path);
          return false;
        }
      seen_put (m, s);
      return true;
    }
  return false;
}

/* The memo in TEXT into M; false when it is not whole or a line does not
 * parse (the caller then empties M: a damaged memo is a miss). */
static bool
parse (struct ib_memo *m, char *text, const char *kind)
{
  char *save = NULL;
  char *line = strtok_r (text, "\n", &save);
  cleanup_free char *magic = ib_xasprintf ("%s\t%s", MAGIC, kind);
  if (line == NULL || strcmp (line, magic) != 0)
    return false;
  bool ended = false;
  while ((line = strtok_r (NULL, "\n", &save)) != NULL)
    {
      if (ended)
        return false;
      if (strcmp (line, "end") == 0)
        ended = true;
      else if (!parse_line (m, line))
        return false;
    }
  return ended;
}

/* ---- the API ------------------------------------------------------------- */

static void
memo_clear_kept (struct ib_memo *m)
{
  for (size_t i = 0; i < m->n_seen; i++)
    {
      free (m->seen[i].path);
      free (m->seen[i].link);
    }
  m->n_seen = 0;
  ib_strmap_free (m->by_path);
  m->by_path = ib_strmap_new ();
  for (size_t i = 0; i < m->n_patterns; i++)
    free (m->patterns[i]);
  m->n_patterns = 0;
  for (size_t i = 0; i < m->n_was; i++)
    free (m->was[i].path);
  m->n_was = 0;
  for (size_t i = 0; i < m->n_said; i++)
    free (m->said[i].msg);
  m->n_said = 0;
  memset (m->counts, 0, sizeof (m->counts));
}

void
ib_memo_free (struct ib_memo *m)
{
  if (m == NULL)
    return;
  memo_clear_kept (m);
  ib_strmap_free (m->by_path);
  free (m->seen);
  free (m->patterns);
  free (m->was);
  for (size_t i = 0; i < m->n_now; i++)
    free (m->now[i].path);
  free (m->now);
  free (m->said);
  free (m->file);
  free (m->kind);
  free (m);
}

/* The GNU build-id of the running program, in hex: a verdict is kept for
 * the code that made it, and any change to the checks is a new id. */
static int
build_id_of (struct dl_phdr_info *info, size_t size, void *data)
{
  (void) size;
  char **out = data;
  for (int i = 0; i < info->dlpi_phnum; i++)
    {
      const ElfW (Phdr) *ph = &info->dlpi_phdr[i];
      if (ph->p_type != PT_NOTE)
        continue;
      const char *p = (const char *) (info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
      while (p + sizeof (ElfW (Nhdr)) <= end)
        {
          const ElfW (Nhdr) *nh = (const ElfW (Nhdr) *) p;
          const unsigned char *desc = (const unsigned char *) p + sizeof (*nh) + ((nh->n_namesz + 3) & ~3u);
          if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp (p + sizeof (*nh), "GNU", 4) == 0
              && (const char *) desc + nh->n_descsz <= end)
            {
              *out = ib_xmalloc (2 * nh->n_descsz + 1);
              for (size_t k = 0; k < nh->n_descsz; k++)
                sprintf (*out + 2 * k, "%02x", desc[k]);
              return 1;
            }
          p = (const char *) desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
  return 1; /* the first object is the program: only its id counts */
}

/* The file name of the memo; NULL when the program has no build-id.  It
 * begins with the base's ChainID (its layers' OCI ChainID), so that gc
 * sweeps the memos of a base no kept image begins with, as it sweeps the
 * base's merged view (layers/store/store_gc.c). */
static char *
memo_key (const char *kind, const char *settings, const struct ib_image *img, size_t base)
{
  cleanup_free char *id = NULL;
  dl_iterate_phdr (build_id_of, &id);
  if (id == NULL)
    return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fprintf (f, "%s\n%s\n%s\n%s\n%zu\n", MAGIC, id, kind, settings, base);
  for (size_t i = 0; i < base; i++)
    fprintf (f, "%s\n", img->diff_ids[i].s);
  fclose (f);
  ib_digest d, chain = { "" };
  ib_sha256_buf (text, len, &d);
  free (text);
  for (size_t i = 0; i < base; i++)
    ib_chain_id_next (&chain, img->diff_ids[i].s);
  if (base == 0)
    return ib_xstrdup (ib_digest_hex (d.s));
  return ib_xasprintf ("%s-%s", ib_digest_hex (chain.s), ib_digest_hex (d.s));
}

/* This image's overlay: the entries of its layers from BASE on. */
static int
overlay_now (struct ib_memo *m, struct ib_store *s, const struct ib_image *img, size_t base,
             ib_memo_select_fn selects, void *sdata, ib_error_t *err)
{
  for (size_t i = base; i < img->n_layers; i++)
    {
      struct ib_fs_list *l = NULL;
      if (ib_fs_list_layer (s, &img->layers[i], &img->diff_ids[i], &l, err) < 0)
        return -1;
      m->now = ib_xrealloc (m->now, (m->n_now + l->n) * sizeof (*m->now));
      for (size_t j = 0; j < l->n; j++)
        {
          m->now[m->n_now++] = (struct ovl){ l->e[j].type, ib_xstrdup (l->e[j].path) };
          if (l->e[j].type == IB_FS_FILE && selects (sdata, &l->e[j]))
            m->picks = true;
        }
      ib_fs_list_free (l);
    }
  return 0;
}

static bool
verdict_holds (const struct ib_memo *m, const struct ib_fsview *view)
{
  if (m->picks)
    return false;
  for (size_t i = 0; i < m->n_was; i++)
    if (!holds (m, view, m->was[i].type, m->was[i].path))
      return false;
  for (size_t i = 0; i < m->n_now; i++)
    if (!holds (m, view, m->now[i].type, m->now[i].path))
      return false;
  return true;
}

void
ib_memo_open (struct ib_store *s, const char *kind, const char *settings, const struct ib_image *img, int first,
              const struct ib_fsview *view, ib_memo_select_fn selects, void *sdata, struct ib_memo **out)
{
  struct ib_memo *m = ib_xcalloc (1, sizeof (*m));
  m->by_path = ib_strmap_new ();
  m->view = view;
  m->kind = ib_xstrdup (kind);
  size_t base = first >= 1 && (size_t) first < img->n_layers ? (size_t) first : img->n_layers;
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, kind, &dir, NULL) == 0)
    {
      cleanup_free char *key = memo_key (kind, settings, img, base);
      m->file = key ? ib_path_join (dir, key) : NULL;
    }
  ib_error_t e = NULL;
  if (overlay_now (m, s, img, base, selects, sdata, &e) < 0)
    {
      /* Not this memo's to report: the check runs in full, and says so
       * if the layer is really unreadable. */
      ib_error_release (&e);
      ib_memo_free (m);
      *out = NULL;
      return;
    }
  cleanup_free char *text = NULL;
  if (m->file && ib_read_file (m->file, MAX_MEMO, &text, NULL, NULL) == 0)
    {
      m->hit = parse (m, text, kind) && verdict_holds (m, view);
      if (!m->hit)
        memo_clear_kept (m);
    }
  *out = m;
}

bool
ib_memo_hit (const struct ib_memo *m)
{
  return m->hit;
}

const struct ib_memo_said *
ib_memo_problems (const struct ib_memo *m, size_t *n)
{
  *n = m->n_said;
  return m->said;
}

const size_t *
ib_memo_counts (const struct ib_memo *m)
{
  return m->counts;
}

void
ib_memo_record (struct ib_memo *m, struct ib_fsview *view)
{
  m->obs = (struct ib_fsview_observer){ on_seen, on_pattern, m };
  ib_fsview_observe (view, &m->obs);
}

void
ib_memo_said (struct ib_memo *m, bool is_error, const char *msg)
{
  m->said = ib_xrealloc (m->said, (m->n_said + 1) * sizeof (*m->said));
  m->said[m->n_said++] = (struct ib_memo_said){ is_error, ib_xstrdup (msg) };
}

void
ib_memo_set_counts (struct ib_memo *m, const size_t counts[IB_MEMO_COUNTS])
{
  memcpy (m->counts, counts, sizeof (m->counts));
}

void
ib_memo_save (struct ib_memo *m)
{
  if (m->file == NULL || m->picks || m->hit)
    return;
  size_t len = 0;
  cleanup_free char *text = memo_text (m, m->kind, &len);
  ib_write_cache_file (m->file, text, len, NULL);
}
