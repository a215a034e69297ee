/* A string-keyed hash map to a size_t, for the link gate's tables (files by
 * path, symbol definers by name: hundreds of thousands of keys) and the
 * GPU-code records' kernel names (kernels/cudabin.h: each kept once).  Keys are
 * not copied: they must outlive the map. */
#ifndef IB_STRMAP_H
#define IB_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ib_strmap;

struct ib_strmap *ib_strmap_new (void);
void ib_strmap_free (struct ib_strmap *m);
/* The value of KEY in *VALUE; false when absent. */
bool ib_strmap_get (const struct ib_strmap *m, const char *key, size_t *value);
/* Set KEY (replacing its value); VALUE < 2^32 (an index). */
void ib_strmap_put (struct ib_strmap *m, const char *key, size_t value);
/* Set KEY to VALUE unless it is there: true when added, else false with
 * its value in *EXISTING (may be NULL).  One probe where get then put take
 * two. */
bool ib_strmap_add (struct ib_strmap *m, const char *key, size_t value, size_t *existing);
/* Room for N keys in all, so that filling the map never rehashes it. */
void ib_strmap_reserve (struct ib_strmap *m, size_t n);
size_t ib_strmap_count (const struct ib_strmap *m);
/* The map's hash of a string, all 64 bits (the link gate's name filters
 * use it too).  Of this process: it may differ between machines. */
uint64_t ib_str_hash (const char *s);

#endif
