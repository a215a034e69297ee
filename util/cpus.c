#include "cpus.h"

#include <unistd.h>

int
ib_online_cpus (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int) n : 1;
}
