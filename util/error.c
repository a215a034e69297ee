#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *
vformat (const char *fmt, va_list ap)
{
  char *s = NULL;
  if (vasprintf (&s, fmt, ap) < 0)
    return NULL;
  return s;
}

static int
set_error (ib_error_t *err, int class, char *msg)
{
  if (err == NULL)
    {
      free (msg);
      return -1;
    }
  ib_error_release (err);
  *err = calloc (1, sizeof (**err));
  if (*err == NULL)
    {
      free (msg);
      return -1;
    }
  (*err)->class = class;
  (*err)->msg = msg ? msg : strdup ("out of memory");
  return -1;
}

int
ib_error (ib_error_t *err, int class, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = vformat (fmt, ap);
  va_end (ap);
  return set_error (err, class, msg);
}

int
ib_error_errno (ib_error_t *err, int errnum, int class, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = vformat (fmt, ap);
  va_end (ap);
  char *full = NULL;
  if (msg && asprintf (&full, "%s: %s", msg, strerror (errnum)) < 0)
    full = NULL;
  free (msg);
  return set_error (err, class, full);
}

int
ib_error_wrap (ib_error_t *err, const char *fmt, ...)
{
  if (err == NULL || *err == NULL)
    return -1;
  va_list ap;
  va_start (ap, fmt);
  char *ctx = vformat (fmt, ap);
  va_end (ap);
  char *full = NULL;
  if (ctx && asprintf (&full, "%s: %s", ctx, (*err)->msg) >= 0)
    {
      free ((*err)->msg);
      (*err)->msg = full;
    }
  free (ctx);
  return -1;
}

void
ib_error_release (ib_error_t *err)
{
  if (err == NULL || *err == NULL)
    return;
  free ((*err)->msg);
  free (*err);
  *err = NULL;
}

int
ib_error_report (const char *prog, ib_error_t *err)
{
  int class = IB_EGATE;
  if (err && *err)
    {
      class = (*err)->class ? (*err)->class : IB_EGATE;
      fprintf (stderr, "%s: error: %s\n", prog, (*err)->msg);
    }
  ib_error_release (err);
  return class;
}
