#include "util/heap.h"

#include <malloc.h>

void
ib_heap_bound (void)
{
  /* A fixed threshold also fixes the trim threshold (128 KiB): the top
   * of a heap is given back as it empties. */
  mallopt (M_MMAP_THRESHOLD, 256 * 1024);
}
