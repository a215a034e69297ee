#include "layers/view/fscache.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

/* ---- strings ------------------------------------------------------------- */

#define BLOCK_SIZE (64u << 10)

struct ib_fs_strings
{
  struct ib_fs_strings *next;
  void *map; /* a cache file mapped: its strings, unmapped when freed */
  size_t map_len;
  size_t used, cap;
  char data[];
};

char *
ib_fs_strings_add (struct ib_fs_strings **pool, const char *s, size_t len)
{
  struct ib_fs_strings *b = *pool;
  if (b == NULL || b->map || b->cap - b->used < len + 1)
    {
      size_t cap = len + 1 > BLOCK_SIZE ? len + 1 : BLOCK_SIZE;
      b = ib_xmalloc (sizeof (*b) + cap);
      *b = (struct ib_fs_strings){ .next = *pool, .cap = cap };
      *pool = b;
    }
  char *o = b->data + b->used;
  memcpy (o, s, len);
  o[len] = '\0';
  b->used += len + 1;
  return o;
}

void
ib_fs_strings_adopt (struct ib_fs_strings **to, struct ib_fs_strings **from)
{
  struct ib_fs_strings *tail = *from;
  if (tail == NULL)
    return;
  while (tail->next)
    tail = tail->next;
  tail->next = *to;
  *to = *from;
  *from = NULL;
}

void
ib_fs_strings_release (const struct ib_fs_strings *pool)
{
  for (; pool; pool = pool->next)
    if (pool->map)
      madvise (pool->map, pool->map_len, MADV_DONTNEED);
}

void
ib_fs_strings_free (struct ib_fs_strings *pool)
{
  while (pool)
    {
      struct ib_fs_strings *next = pool->next;
      if (pool->map)
        munmap (pool->map, pool->map_len);
      free (pool);
      pool = next;
    }
}

/* ---- the cache file ------------------------------------------------------- */

/* The file: a header, one record per entry in path order, the offsets of
 * the hazards' texts, then the strings, each ending in a NUL (the first
 * is the empty one, so that offset 0 means "no link").  Numbers are in the
 * writer's byte order and records in its layout: the header says which,
 * and a reader of another kind takes the file for a miss.
 *
 * Two kinds of file share the format, told apart by their magic: a layer's
 * list (named by its diff_id), and the merged view of an image's layers
 * (named by their ChainID), whose records also say which layer provides
 * each entry. */
#define BYTE_ORDER_MARK 0x01020304u

struct cache_kind
{
  const char *magic;
  bool layers; /* records say their layer */
};

static const struct cache_kind list_kind = { "imgbuild-files 4", false };
static const struct cache_kind view_kind = { "imgbuild-view 2", true };

struct cache_head
{
  char magic[16];
  char diff_id[80]; /* "sha256:HEX", then NULs */
  uint32_t record_size;
  uint32_t byte_order;
  uint64_t n, n_hazards, strings_size;
};

struct cache_rec
{
  uint64_t size;
  uint64_t at; /* ib_fs_entry.at */
  uint32_t path, link; /* offsets into the strings */
  uint32_t mode;
  char type;
  char digest[65]; /* hex and a NUL; a NUL first when the entry has none */
  uint16_t layer; /* a view's: the layer that provides the entry; a list's: 0 */
};

_Static_assert (sizeof (struct cache_head) == 128, "the header's layout is the file's");
_Static_assert (sizeof (struct cache_rec) == 96, "the record's layout is the file's");

static void
init_head (struct cache_head *h, const struct cache_kind *kind, const ib_digest *id)
{
  memset (h, 0, sizeof (*h));
  memcpy (h->magic, kind->magic, strnlen (kind->magic, sizeof (h->magic))); /* not NUL-ended at 16 */
  snprintf (h->diff_id, sizeof (h->diff_id), "%s", id->s);
  h->record_size = sizeof (struct cache_rec);
  h->byte_order = BYTE_ORDER_MARK;
}

/* The file written through a buffer of its own: a base's view of 190,000
 * entries is 30 MB, and built whole in memory it was the cold build's peak
 * at 16 GB (63 -> 93 MB while it was written). */
#define OUT_BUF (64u << 10)

struct out
{
  struct ib_atomic_file f;
  char buf[OUT_BUF];
  size_t used;
  int failed;
  ib_error_t *err;
};

static void
out_flush (struct out *o)
{
  if (!o->failed && o->used && ib_write_all (o->f.fd, o->buf, o->used, o->f.tmp, o->err) < 0)
    o->failed = 1;
  o->used = 0;
}

static void
out_put (struct out *o, const void *p, size_t len)
{
  while (len > 0)
    {
      if (o->used == OUT_BUF)
        out_flush (o);
      size_t k = len < OUT_BUF - o->used ? len : OUT_BUF - o->used;
      memcpy (o->buf + o->used, p, k);
      o->used += k;
      p = (const char *) p + k;
      len -= k;
    }
}

/* A string's offset in the file's strings, where the strings are put in
 * the order their offsets were taken. */
static uint32_t
string_at (size_t *used, const char *s)
{
  size_t at = *used;
  *used += strlen (s) + 1;
  return (uint32_t) at;
}

/* Every this many entries written, the pages of the mapped lists that
 * L's entries point into are given back: writing a view reads every
 * entry's digest and path, and the records and strings of a base of
 * 190,000 entries (30 MB of lists) would otherwise all be in memory at
 * once. */
#define RELEASE_EVERY 8192

static void
put_records (struct out *o, const struct cache_kind *kind, const struct ib_fs_list *l, size_t *used)
{
  for (size_t i = 0; i < l->n; i++)
    {
      if (i % RELEASE_EVERY == RELEASE_EVERY - 1)
        ib_fs_strings_release (l->strings);
      const struct ib_fs_entry *e = &l->e[i];
      struct cache_rec r = { .size = e->size, .at = e->at, .mode = e->mode, .type = e->type };
      r.layer = kind->layers ? (uint16_t) e->layer : 0;
      r.path = string_at (used, e->path);
      r.link = e->link ? string_at (used, e->link) : 0;
      memcpy (r.digest, e->digest, e->digest[0] ? 64 : 0);
      out_put (o, &r, sizeof (r));
    }
  for (size_t i = 0; i < l->n_hazards; i++)
    {
      uint32_t at = string_at (used, l->hazards[i]);
      out_put (o, &at, sizeof (at));
    }
}

static void
put_strings (struct out *o, const struct ib_fs_list *l)
{
  out_put (o, "", 1);
  for (size_t i = 0; i < l->n; i++)
    {
      if (i % RELEASE_EVERY == RELEASE_EVERY - 1)
        ib_fs_strings_release (l->strings);
      out_put (o, l->e[i].path, strlen (l->e[i].path) + 1);
      if (l->e[i].link)
        out_put (o, l->e[i].link, strlen (l->e[i].link) + 1);
    }
  for (size_t i = 0; i < l->n_hazards; i++)
    out_put (o, l->hazards[i], strlen (l->hazards[i]) + 1);
}

static int
cache_save (const char *path, const struct cache_kind *kind, const ib_digest *id, const struct ib_fs_list *l,
            ib_error_t *err)
{
  size_t strings_size = 1;
  for (size_t i = 0; i < l->n; i++)
    {
      /* This first read of every path too (a 30 GB base's were 27 MB of
       * its cold build's peak, read while the whole view was held). */
      if ((i + 1) % RELEASE_EVERY == 0)
        ib_fs_strings_release (l->strings);
      strings_size += strlen (l->e[i].path) + 1 + (l->e[i].link ? strlen (l->e[i].link) + 1 : 0);
      if (kind->layers && (l->e[i].layer < 0 || l->e[i].layer > UINT16_MAX))
        return 0; /* more layers than a record holds (OCI runtimes stop at 128): not cached */
      /* A view's order is proven here, once: it is read in place, its
       * records found by binary search and never all checked. */
      if (kind->layers && i > 0 && strcmp (l->e[i - 1].path, l->e[i].path) >= 0)
        return 0;
    }
  for (size_t i = 0; i < l->n_hazards; i++)
    strings_size += strlen (l->hazards[i]) + 1;
  /* Offsets are 32 bits: a layer with more than 4 GB of names (some
   * 40 million paths) is listed again on every build, not cached. */
  if (strings_size > UINT32_MAX)
    return 0;
  struct cache_head h;
  init_head (&h, kind, id);
  h.n = l->n;
  h.n_hazards = l->n_hazards;
  h.strings_size = strings_size;
  cleanup_free struct out *o = ib_xcalloc (1, sizeof (*o));
  o->err = err;
  if (ib_atomic_file_open (&o->f, path, err) < 0)
    return -1;
  out_put (o, &h, sizeof (h));
  size_t used = 1;
  put_records (o, kind, l, &used);
  put_strings (o, l);
  out_flush (o);
  ib_fs_strings_release (l->strings);
  if (o->failed)
    {
      ib_atomic_file_abort (&o->f);
      return -1;
    }
  return ib_atomic_file_commit (&o->f, 0644, true, err);
}

int
ib_fs_cache_save (const char *path, const ib_digest *diff_id, const struct ib_fs_list *l, ib_error_t *err)
{
  return cache_save (path, &list_kind, diff_id, l, err);
}

int
ib_fs_view_cache_save (const char *path, const ib_digest *chain_id, const struct ib_fs_list *l, ib_error_t *err)
{
  return cache_save (path, &view_kind, chain_id, l, err);
}

static bool
known_type (char t)
{
  switch (t)
    {
    case IB_FS_FILE:
    case IB_FS_DIR:
    case IB_FS_SYMLINK:
    case IB_FS_HARDLINK:
    case IB_FS_OTHER:
    case IB_FS_WHITEOUT:
    case IB_FS_OPAQUE:
      return true;
    default:
      return false;
    }
}

/* R as entry E, its strings in STRINGS (SIZE bytes, the last a NUL, so
 * that any offset below SIZE starts a terminated string).  The digest is
 * read where it lies: a record's pages given back are read again from the
 * file by the rare check that wants a digest. */
static bool
take_record (const struct cache_rec *r, char *strings, uint64_t size, unsigned n_layers, struct ib_fs_entry *e)
{
  if (r->path >= size || r->link >= size || !known_type (r->type) || r->digest[64] != '\0' || r->layer >= n_layers)
    return false;
  e->path = strings + r->path;
  e->link = r->link ? strings + r->link : NULL;
  e->size = r->size;
  e->at = r->at;
  e->mode = r->mode;
  e->layer = r->layer;
  e->type = r->type;
  e->digest = r->digest;
  return true;
}

/* The records, read where they are mapped; the pages they were on are
 * given back as the loop goes (a base of 500,000 entries has 44 MB of
 * them), so the list costs its entries and the strings it reads. */
static bool
take_records (const char *map, size_t recs_at, struct ib_fs_list *l, char *strings, uint64_t strings_size,
              unsigned n_layers)
{
  const size_t page = (size_t) sysconf (_SC_PAGESIZE), chunk = 16 * page;
  size_t done = recs_at - recs_at % page;
  for (size_t i = 0; i < l->n; i++)
    {
      const struct cache_rec *r = (const struct cache_rec *) (map + recs_at) + i;
      if (!take_record (r, strings, strings_size, n_layers, &l->e[i])
          || (i > 0 && strcmp (l->e[i - 1].path, l->e[i].path) > 0))
        return false;
      size_t end = recs_at + (i + 1) * sizeof (*r);
      if (end - done >= chunk + page)
        {
          madvise ((char *) map + done, chunk, MADV_DONTNEED);
          done += chunk;
        }
    }
  return true;
}

static bool
take_hazards (const char *map, size_t hz_at, uint64_t n, const char *strings, uint64_t strings_size,
              struct ib_fs_list *l)
{
  for (uint64_t i = 0; i < n; i++)
    {
      uint32_t at;
      memcpy (&at, map + hz_at + i * sizeof (at), sizeof (at));
      if (at >= strings_size)
        return false;
      l->hazards = ib_xrealloc (l->hazards, (l->n_hazards + 1) * sizeof (*l->hazards));
      l->hazards[l->n_hazards++] = ib_xstrdup (strings + at);
    }
  return true;
}

static void
clear_list (struct ib_fs_list *l)
{
  for (size_t i = 0; i < l->n_hazards; i++)
    free (l->hazards[i]);
  free (l->hazards);
  free (l->e);
  ib_fs_strings_free (l->strings);
  memset (l, 0, sizeof (*l));
}

/* PATH mapped, its header and the bounds of its parts checked: *MAP and
 * its length, and where the hazards and strings start; false (nothing
 * mapped) when it is not a whole file of KIND for ID. */
static bool
cache_map (const char *path, const struct cache_kind *kind, const ib_digest *id, char **map_out, size_t *len_out,
           struct cache_head *h, size_t *hz_at, size_t *strings_at)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || (uint64_t) st.st_size < sizeof (struct cache_head))
    return false;
  size_t len = (size_t) st.st_size;
  /* Read-only: the strings are the entries' `char *`, and nobody writes
   * them; so the pages read can be given back at any time (MADV_DONTNEED
   * of a written private page would lose the write). */
  char *map = mmap (NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED)
    return false;
  struct cache_head want;
  memcpy (h, map, sizeof (*h));
  init_head (&want, kind, id);
  size_t recs_at = sizeof (*h);
  bool ok = memcmp (h->magic, want.magic, sizeof (h->magic)) == 0
            && memcmp (h->diff_id, want.diff_id, sizeof (h->diff_id)) == 0 && h->record_size == want.record_size
            && h->byte_order == want.byte_order && h->strings_size >= 1
            && h->n <= (len - recs_at) / sizeof (struct cache_rec)
            && h->n_hazards <= (len - recs_at - h->n * sizeof (struct cache_rec)) / sizeof (uint32_t);
  *hz_at = recs_at + (size_t) h->n * sizeof (struct cache_rec);
  *strings_at = *hz_at + (size_t) h->n_hazards * sizeof (uint32_t);
  ok = ok && *strings_at + h->strings_size == len && map[len - 1] == '\0' && map[*strings_at] == '\0';
  if (!ok)
    {
      munmap (map, len);
      return false;
    }
  *map_out = map;
  *len_out = len;
  return true;
}

/* The mapped file as a block of POOL: unmapped when the pool is freed, its
 * pages given back by ib_fs_strings_release. */
static void
pool_adopt_map (struct ib_fs_strings **pool, char *map, size_t len)
{
  struct ib_fs_strings *b = ib_xmalloc (sizeof (*b));
  *b = (struct ib_fs_strings){ .next = *pool, .map = map, .map_len = len };
  *pool = b;
}

/* N_LAYERS bounds the records' layers: 1 for a list, whose records say 0. */
static bool
cache_load (const char *path, const struct cache_kind *kind, const ib_digest *id, unsigned n_layers,
            struct ib_fs_list *l)
{
  char *map;
  size_t len, hz_at, strings_at;
  struct cache_head h;
  if (!cache_map (path, kind, id, &map, &len, &h, &hz_at, &strings_at))
    return false;
  pool_adopt_map (&l->strings, map, len);
  l->n = (size_t) h.n;
  l->e = ib_xmalloc ((l->n ? l->n : 1) * sizeof (*l->e));
  char *strings = map + strings_at;
  if (!take_records (map, sizeof (h), l, strings, h.strings_size, n_layers)
      || !take_hazards (map, hz_at, h.n_hazards, strings, h.strings_size, l))
    {
      clear_list (l);
      return false;
    }
  /* The order check read every path: given back, a check reads again only
   * what it looks at (a view of 190,000 entries has 13 MB of them). */
  madvise (map, len, MADV_DONTNEED);
  return true;
}

bool
ib_fs_cache_load (const char *path, const ib_digest *diff_id, struct ib_fs_list *l)
{
  return cache_load (path, &list_kind, diff_id, 1, l);
}

/* ---- a view read in place ------------------------------------------------- */

bool
ib_fs_view_cache_map (const char *path, const ib_digest *chain_id, size_t n_layers, struct ib_fs_strings **pool,
                      struct ib_fs_map *m, struct ib_fs_list *hazards)
{
  char *map;
  size_t len, hz_at, strings_at;
  struct cache_head h;
  if (n_layers > UINT16_MAX + 1u || !cache_map (path, &view_kind, chain_id, &map, &len, &h, &hz_at, &strings_at))
    return false;
  struct ib_fs_list hz = { 0 };
  if (!take_hazards (map, hz_at, h.n_hazards, map + strings_at, h.strings_size, &hz))
    {
      clear_list (&hz);
      munmap (map, len);
      return false;
    }
  pool_adopt_map (pool, map, len);
  *m = (struct ib_fs_map){ .recs = map + sizeof (h), .n = (size_t) h.n, .strings = map + strings_at,
                           .strings_size = h.strings_size, .n_layers = (unsigned) n_layers };
  hazards->hazards = hz.hazards;
  hazards->n_hazards = hz.n_hazards;
  return true;
}

const char *
ib_fs_map_path (const struct ib_fs_map *m, size_t i)
{
  uint32_t at = ((const struct cache_rec *) (m->recs + i * sizeof (struct cache_rec)))->path;
  return m->strings + (at < m->strings_size ? at : 0);
}

void
ib_fs_map_entry (const struct ib_fs_map *m, size_t i, struct ib_fs_entry *e)
{
  const struct cache_rec *r = (const struct cache_rec *) (m->recs + i * sizeof (struct cache_rec));
  if (!take_record (r, (char *) m->strings, m->strings_size, m->n_layers, e))
    {
      /* Damaged (the store's own file, written whole and renamed into
       * place: a disk that lied, or a hand): a placeholder that no check
       * reads as a file, never a pointer out of the map. */
      *e = (struct ib_fs_entry){ .path = (char *) m->strings, .digest = "", .type = IB_FS_OTHER };
    }
}
