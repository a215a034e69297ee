#include "symbol-check/link-check/reccache.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

#define MAX_RECORD (1u << 30)

struct slot
{
  struct ib_elf_link *l; /* NULL: not in memory */
  size_t bytes;
  unsigned held;
  size_t prev, next; /* the recency list, most recent first; NONE at its ends */
};

#define NONE ((size_t) -1)

struct ib_reccache
{
  char *dir;
  size_t budget, bytes;
  struct slot *s;
  size_t n;
  size_t head, tail;
  struct ib_reccache_stats st;
};

struct ib_reccache *
ib_reccache_new (const char *dir, size_t budget)
{
  struct ib_reccache *c = ib_xcalloc (1, sizeof (*c));
  c->dir = ib_xstrdup (dir);
  c->budget = budget;
  c->head = c->tail = NONE;
  return c;
}

void
ib_reccache_free (struct ib_reccache *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->n; i++)
    ib_elf_link_free (c->s[i].l);
  free (c->s);
  free (c->dir);
  free (c);
}

static void
grow (struct ib_reccache *c, size_t slot)
{
  if (slot < c->n)
    return;
  c->s = ib_xrealloc (c->s, (slot + 1) * sizeof (*c->s));
  for (size_t i = c->n; i <= slot; i++)
    c->s[i] = (struct slot){ NULL, 0, 0, NONE, NONE };
  c->n = slot + 1;
}

static void
unlink_slot (struct ib_reccache *c, size_t i)
{
  struct slot *s = &c->s[i];
  if (s->prev != NONE)
    c->s[s->prev].next = s->next;
  else
    c->head = s->next;
  if (s->next != NONE)
    c->s[s->next].prev = s->prev;
  else
    c->tail = s->prev;
  s->prev = s->next = NONE;
}

static void
push_front (struct ib_reccache *c, size_t i)
{
  c->s[i].next = c->head;
  c->s[i].prev = NONE;
  if (c->head != NONE)
    c->s[c->head].prev = i;
  c->head = i;
  if (c->tail == NONE)
    c->tail = i;
}

/* Let the least recently used records that are not held go, from the
 * tail, until the cache is within its budget. */
static void
trim (struct ib_reccache *c)
{
  for (size_t i = c->tail; i != NONE && c->bytes > c->budget;)
    {
      size_t prev = c->s[i].prev;
      if (c->s[i].held == 0)
        {
          unlink_slot (c, i);
          ib_elf_link_free (c->s[i].l);
          c->s[i].l = NULL;
          c->bytes -= c->s[i].bytes;
          c->st.evictions++;
        }
      i = prev;
    }
}

static void
insert (struct ib_reccache *c, size_t slot, struct ib_elf_link *l)
{
  c->s[slot].l = l;
  c->s[slot].bytes = ib_elf_link_bytes (l);
  c->bytes += c->s[slot].bytes;
  if (c->bytes > c->st.peak_bytes)
    c->st.peak_bytes = c->bytes;
  push_front (c, slot);
}

void
ib_reccache_add (struct ib_reccache *c, size_t slot, struct ib_elf_link *l)
{
  grow (c, slot);
  if (c->s[slot].l)
    {
      ib_elf_link_free (l); /* the same content, already here */
      return;
    }
  insert (c, slot, l);
  trim (c);
}

static struct ib_elf_link *
load (const struct ib_reccache *c, const char *digest)
{
  cleanup_free char *path = ib_path_join (c->dir, digest);
  char *text = NULL;
  if (ib_read_file (path, MAX_RECORD, &text, NULL, NULL) < 0)
    return NULL;
  struct ib_elf_link *l = ib_elf_link_from_text (text);
  if (l == NULL)
    free (text);
  return l;
}

const struct ib_elf_link *
ib_reccache_get (struct ib_reccache *c, size_t slot, const char *digest)
{
  grow (c, slot);
  struct slot *s = &c->s[slot];
  if (s->l)
    {
      unlink_slot (c, slot);
      push_front (c, slot);
    }
  else
    {
      struct ib_elf_link *l = load (c, digest);
      if (l == NULL)
        return NULL;
      c->st.loads++;
      insert (c, slot, l);
    }
  c->s[slot].held++;
  trim (c);
  return c->s[slot].l;
}

void
ib_reccache_put (struct ib_reccache *c, size_t slot)
{
  if (slot < c->n && c->s[slot].held > 0 && --c->s[slot].held == 0)
    trim (c);
}

void
ib_reccache_stats (const struct ib_reccache *c, struct ib_reccache_stats *out)
{
  *out = c->st;
}
