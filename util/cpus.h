/* What the machine has, for sizing thread pools and buffers. */
#ifndef IB_CPUS_H
#define IB_CPUS_H

#include <stdint.h>

/* The online CPUs of the machine (sysconf's _SC_NPROCESSORS_ONLN), at
 * least 1. */
int ib_online_cpus (void);
/* The machine's memory in bytes (sysconf's _SC_PHYS_PAGES), 0 unknown. */
uint64_t ib_physical_memory (void);

#endif
