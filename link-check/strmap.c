#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/fsutil.h"

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

static uint32_t
hash_of (const char *k)
{
  uint64_t h = 1469598103934665603ull; /* FNV-1a, folded to 32 bits */
  for (; *k; k++)
    h = (h ^ (unsigned char) *k) * 1099511628211ull;
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
grow (struct ib_strmap *m)
{
  struct slot *old = m->s;
  size_t n = m->cap;
  m->cap *= 2;
  m->s = ib_xcalloc (m->cap, sizeof (*m->s));
  for (size_t i = 0; i < n; i++)
    if (old[i].key)
      *find (m, old[i].key, old[i].hash) = old[i];
  free (old);
}

void
ib_strmap_put (struct ib_strmap *m, const char *key, size_t value)
{
  if (value > UINT32_MAX)
    abort (); /* an index past 2^32 entries: memory would have run out first */
  if ((m->n + 1) * 2 > m->cap)
    grow (m);
  uint32_t h = hash_of (key);
  struct slot *s = find (m, key, h);
  if (s->key == NULL)
    m->n++;
  *s = (struct slot){ key, h, (uint32_t) value };
}

size_t
ib_strmap_count (const struct ib_strmap *m)
{
  return m->n;
}
