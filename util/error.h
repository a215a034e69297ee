/* Errors: every fallible function is `int f (..., ib_error_t *err)`, returns
 * a negative value on failure and leaves a message in *err.  Callers add their
 * own context with ib_error_wrap() on the way up, so the message the user sees
 * reads outermost-first: "build dsv41-flash-dcp2: copy layer: open foo.py: No
 * such file or directory".  The class decides the process exit code. */
#ifndef IB_ERROR_H
#define IB_ERROR_H

#include <stdarg.h>

/* Exit codes, one per class of failure (documented in --help and the man pages). */
enum ib_error_class
{
  IB_OK = 0,
  IB_EGATE = 1,        /* a gate failed for a reason without its own class */
  IB_EUSAGE = 2,       /* bad command line */
  IB_EDEFINITION = 3,  /* the image definition is wrong (definition gate) */
  IB_EINTEGRITY = 4,   /* digest/size mismatch, malformed or truncated content */
  IB_ESYMBOLS = 5,     /* symbol gate */
  IB_EKERNELS = 6,     /* kernel gate */
  IB_ESMOKE = 7,       /* smoke test */
  IB_EENV = 8,         /* environment: I/O, missing tool, daemon down */
  IB_ENOTFOUND = 9,    /* an image reference that does not resolve */
  IB_EPROVENANCE = 10, /* provenance missing: an attestation an image should carry is not there */
};

struct ib_error_s
{
  int class;
  char *msg;
};
typedef struct ib_error_s *ib_error_t;

/* All return -1 so that `return ib_error (err, ...)` reads naturally. */
int ib_error (ib_error_t *err, int class, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
/* As ib_error, with ": strerror(errnum)" appended. */
int ib_error_errno (ib_error_t *err, int errnum, int class, const char *fmt, ...) __attribute__ ((format (printf, 4, 5)));
/* Prefix the pending error with "context: ". */
int ib_error_wrap (ib_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
void ib_error_release (ib_error_t *err);
/* Print "PROG: message" on stderr, release, and return the class as exit code. */
int ib_error_report (const char *prog, ib_error_t *err);

#endif
