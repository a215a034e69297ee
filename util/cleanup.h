/* Scope-bound cleanup, as crun does it: a variable declared with one of these
 * attributes is released when it leaves scope, so every early `return` on an
 * error path is leak-free without a goto ladder. */
#ifndef IB_CLEANUP_H
#define IB_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void ib_freep (void *p) { free (*(void **) p); }
static inline void ib_closep (int *fd) { if (*fd >= 0) close (*fd); }
static inline void ib_fclosep (FILE **f) { if (*f) fclose (*f); }

#define cleanup_free __attribute__ ((cleanup (ib_freep)))
#define cleanup_close __attribute__ ((cleanup (ib_closep)))
#define cleanup_file __attribute__ ((cleanup (ib_fclosep)))

/* Hand a cleanup-owned value to the caller. */
#define steal_pointer(pp) __extension__ ({ __typeof__ (*(pp)) _v = *(pp); *(pp) = NULL; _v; })
#define steal_fd(pfd) __extension__ ({ int _fd = *(pfd); *(pfd) = -1; _fd; })

#endif
