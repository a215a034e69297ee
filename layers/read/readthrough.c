#include "layers/read/readthrough.h"

#include <archive.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/tar/tarcheck.h"

/* The file, text:
 *   imgbuild-read-through 1 RULES LIBARCHIVE\n
 *   size N\n
 *   diff_id sha256:HEX\n
 *   hazard LEN\n BYTES\n     (one per hostile entry; a name may hold any byte)
 *   end sha256:HEX\n         (of everything before this line) */
#define MAGIC "imgbuild-read-through 1"
#define KIND "read-through"

/* The first line: what the hostile entries were found by. */
static char *
first_line (void)
{
  return ib_xasprintf ("%s %d %d\n", MAGIC, IB_TAR_CHECK_RULES, archive_version_number ());
}

int
ib_readthrough_save (struct ib_store *s, const ib_digest *blob, const struct ib_readthrough *rec, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  if (f == NULL)
    abort ();
  cleanup_free char *head = first_line ();
  fprintf (f, "%ssize %" PRIu64 "\ndiff_id %s\n", head, rec->size, rec->diff_id.s);
  for (size_t i = 0; i < rec->n_hazards; i++)
    {
      fprintf (f, "hazard %zu\n", strlen (rec->hazards[i]));
      fputs (rec->hazards[i], f);
      fputc ('\n', f);
    }
  fflush (f);
  ib_digest sum;
  ib_sha256_buf (text, len, &sum);
  fprintf (f, "end %s\n", sum.s);
  if (fclose (f) != 0)
    abort ();
  if (len > IB_READTHROUGH_MAX)
    return 0;
  cleanup_free char *path = ib_store_cache_file (s, KIND, blob, true, err);
  if (path == NULL)
    return -1;
  return ib_write_cache_file (path, text, len, err);
}

/* The number after PREFIX at *P, moving *P past its line: decimal as
 * written (no sign, no leading zero, in range), so that a record reads
 * one way only. */
static bool
take_number (const char **p, const char *end, const char *prefix, uint64_t *out)
{
  size_t n = strlen (prefix);
  if ((size_t) (end - *p) < n || memcmp (*p, prefix, n) != 0)
    return false;
  char *stop;
  const char *at = *p + n;
  if (at >= end || *at < '0' || *at > '9' || (*at == '0' && at + 1 < end && at[1] != '\n'))
    return false;
  errno = 0;
  unsigned long long v = strtoull (at, &stop, 10);
  if (errno == ERANGE || stop >= end || *stop != '\n')
    return false;
  *out = v;
  *p = stop + 1;
  return true;
}

static bool
parse (const char *text, size_t len, struct ib_readthrough *out)
{
  const char *p = text, *end = text + len;
  cleanup_free char *head = first_line ();
  size_t hl = strlen (head);
  if (len < hl || memcmp (p, head, hl) != 0)
    return false;
  p += hl;
  if (!take_number (&p, end, "size ", &out->size))
    return false;
  if ((size_t) (end - p) < 8 + IB_DIGEST_LEN + 1 || memcmp (p, "diff_id ", 8) != 0 || p[8 + IB_DIGEST_LEN] != '\n')
    return false;
  memcpy (out->diff_id.s, p + 8, IB_DIGEST_LEN);
  out->diff_id.s[IB_DIGEST_LEN] = '\0';
  if (ib_digest_check (out->diff_id.s, NULL) < 0)
    return false;
  p += 8 + IB_DIGEST_LEN + 1;
  uint64_t n;
  while (take_number (&p, end, "hazard ", &n))
    {
      if ((uint64_t) (end - p) < n + 1 || p[n] != '\n' || memchr (p, '\0', n))
        return false;
      out->hazards = ib_xrealloc (out->hazards, (out->n_hazards + 1) * sizeof (*out->hazards));
      char *h = ib_xmalloc (n + 1);
      memcpy (h, p, n);
      h[n] = '\0';
      out->hazards[out->n_hazards++] = h;
      p += n + 1;
    }
  /* The end line, and nothing after it. */
  ib_digest sum;
  ib_sha256_buf (text, (size_t) (p - text), &sum);
  return (size_t) (end - p) == 4 + IB_DIGEST_LEN + 1 && memcmp (p, "end ", 4) == 0
         && memcmp (p + 4, sum.s, IB_DIGEST_LEN) == 0 && p[4 + IB_DIGEST_LEN] == '\n';
}

int
ib_readthrough_load (struct ib_store *s, const ib_digest *blob, struct ib_readthrough *out)
{
  memset (out, 0, sizeof (*out));
  cleanup_free char *path = ib_store_cache_file (s, KIND, blob, false, NULL);
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (path == NULL || ib_read_file (path, IB_READTHROUGH_MAX, &text, &len, NULL) < 0)
    return 0;
  if (parse (text, len, out))
    return 1;
  ib_readthrough_clear (out);
  return 0;
}

void
ib_readthrough_clear (struct ib_readthrough *rec)
{
  for (size_t i = 0; i < rec->n_hazards; i++)
    free (rec->hazards[i]);
  free (rec->hazards);
  memset (rec, 0, sizeof (*rec));
}
