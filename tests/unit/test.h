/* A minimal test runner: each TEST is a function registered in main.c;
 * CHECK records a failure with its line and goes on. */
#ifndef IB_TEST_H
#define IB_TEST_H

#include <stdio.h>
#include <string.h>

struct test_ctx
{
  int failures;
  const char *name;
};

#define CHECK(ctx, cond)                                                                                               \
  do                                                                                                                   \
    {                                                                                                                  \
      if (!(cond))                                                                                                     \
        {                                                                                                              \
          fprintf (stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                  \
          (ctx)->failures++;                                                                                           \
        }                                                                                                              \
    }                                                                                                                  \
  while (0)

#define CHECK_STR(ctx, a, b)                                                                                           \
  do                                                                                                                   \
    {                                                                                                                  \
      const char *_a = (a), *_b = (b);                                                                                 \
      if (!_a || !_b || strcmp (_a, _b) != 0)                                                                          \
        {                                                                                                              \
          fprintf (stderr, "  %s:%d: `%s` != `%s`\n", __FILE__, __LINE__, _a ? _a : "(null)", _b ? _b : "(null)");     \
          (ctx)->failures++;                                                                                           \
        }                                                                                                              \
    }                                                                                                                  \
  while (0)

/* A scratch folder under $TMPDIR, removed by the runner after the test. */
const char *test_tmpdir (void);
/* Write TEXT to DIR/NAME (creating folders); returns the path (static buffer rotation). */
const char *test_write (const char *dir, const char *name, const char *text);
/* The resident KiB of this process's maps of PATH (/proc/self/smaps). */
long test_mapped_kib (const char *path);

#endif
