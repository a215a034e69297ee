/* How many CPUs a thread pool may be sized for. */
#ifndef IB_CPUS_H
#define IB_CPUS_H

/* The online CPUs of the machine (sysconf's _SC_NPROCESSORS_ONLN), at
 * least 1. */
int ib_online_cpus (void);

#endif
