#include "util/cpus.h"

#include <unistd.h>

int
ib_online_cpus (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int) n : 1;
}

uint64_t
ib_physical_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t) pages * (uint64_t) page : 0;
}
