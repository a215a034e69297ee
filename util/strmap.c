#include "util/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

/* 16 bytes: libtorch alone defines some 10^5 symbols, and the table is at
 * most half full; the values are indices (ib_strmap_put checks). */
struct slot
{
  const char *key; /* NULL: empty */
  uint32_t hash;
  uint32_t value;
};

struct ib_strmap
{
  size_t n, cap; /* cap: a power of two, at most half full */
  struct slot *s;
};

/* Eight bytes a step: the keys are mostly C++ mangled names of 50 to 200
 * bytes, and hashing them a byte at a time (FNV-1a) was a fifth of the
 * native gate.  The value only places keys in this process's table, so it
 * may differ between machines; nothing iterates the table. */
uint64_t
ib_str_hash (const char *k)
{
  size_t n = strlen (k);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (; n >= 8; n -= 8, k += 8)
    {
      uint64_t w;
      memcpy (&w, k, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
  uint64_t w = 0;
  memcpy (&w, k, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  h *= 0xff51afd7ed558ccdull;
  return h;
}

static uint32_t
hash_of (const char *k)
{
  uint64_t h = ib_str_hash (k);
  return (uint32_t) (h ^ (h >> 32));
}

struct ib_strmap *
ib_strmap_new (void)
{
  struct ib_strmap *m = ib_xcalloc (1, sizeof (*m));
  m->cap = 64;
  m->s = ib_xcalloc (m->cap, sizeof (*m->s));
  return m;
}

void
ib_strmap_free (struct ib_strmap *m)
{
  if (m == NULL)
    return;
  free (m->s);
  free (m);
}

static struct slot *
find (const struct ib_strmap *m, const char *key, uint32_t h)
{
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
    if (m->s[i].key == NULL || (m->s[i].hash == h && strcmp (m->s[i].key, key) == 0))
      return &m->s[i];
}

bool
ib_strmap_get (const struct ib_strmap *m, const char *key, size_t *value)
{
  const struct slot *s = find (m, key, hash_of (key));
  if (s->key == NULL)
    return false;
  *value = s->value;
  return true;
}

static void
rehash (struct ib_strmap *m, size_t cap)
{
  struct slot *old = m->s;
  size_t n = m->cap;
  m->cap = cap;
  m->s = ib_xcalloc (m->cap, sizeof (*m->s));
  for (size_t i = 0; i < n; i++)
    if (old[i].key)
      *find (m, old[i].key, old[i].hash) = old[i];
  free (old);
}

/* The slot of KEY, made room for: a new key's slot is empty. */
static struct slot *
slot_for (struct ib_strmap *m, const char *key, size_t value, uint32_t *h)
{
  if (value > UINT32_MAX)
    abort (); /* an index past 2^32 entries: memory would have run out first */
  if ((m->n + 1) * 2 > m->cap)
    rehash (m, 2 * m->cap);
  *h = hash_of (key);
  return find (m, key, *h);
}

void
ib_strmap_put (struct ib_strmap *m, const char *key, size_t value)
{
  uint32_t h;
  struct slot *s = slot_for (m, key, value, &h);
  if (s->key == NULL)
    m->n++;
  *s = (struct slot){ key, h, (uint32_t) value };
}

bool
ib_strmap_add (struct ib_strmap *m, const char *key, size_t value, size_t *existing)
{
  uint32_t h;
  struct slot *s = slot_for (m, key, value, &h);
  if (s->key)
    {
      if (existing)
        *existing = s->value;
      return false;
    }
  m->n++;
  *s = (struct slot){ key, h, (uint32_t) value };
  return true;
}

void
ib_strmap_reserve (struct ib_strmap *m, size_t n)
{
  size_t cap = m->cap;
  while (n * 2 > cap)
    cap *= 2;
  if (cap != m->cap)
    rehash (m, cap);
}

size_t
ib_strmap_count (const struct ib_strmap *m)
{
  return m->n;
}
