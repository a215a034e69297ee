#include "builder/junit.h"

#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/gates/gates.h"

int
ib_report_spec_check (const char *spec, ib_error_t *err)
{
  if ((strncmp (spec, "junit:", 6) == 0 && spec[6]) || (strncmp (spec, "json:", 5) == 0 && spec[5]))
    return 0;
  return ib_error (err, IB_EUSAGE, "--report takes junit:FILE or json:FILE, not `%s`", spec);
}

static void
add_lines (struct ib_report *r, const char *gate, const char *kind, const struct ib_requirement *req, size_t n,
           const struct ib_definition *def, const char *recorded)
{
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *text = ib_xasprintf ("%s %s", kind, req[i].path);
      for (size_t k = 0; k < req[i].n_names; k++)
        {
          char *t = ib_xasprintf ("%s %s", text, req[i].names[k]);
          free (text);
          text = t;
        }
      /* The origin names the file by its base name ("image.conf:31"). */
      const char *colon = strrchr (req[i].origin, ':');
      cleanup_free char *base = colon ? ib_xasprintf ("%.*s", (int) (colon - req[i].origin), req[i].origin) : NULL;
      cleanup_free char *file = recorded                ? ib_xstrdup (recorded)
                                : base && def->dir ? ib_path_join (def->dir, base)
                                                   : ib_xstrdup (def->file);
      ib_report_requirement (r, gate, file, recorded || !colon ? "" : colon + 1, req[i].origin, text);
    }
}

void
ib_report_add_requirements (struct ib_report *r, const struct ib_definition *def, const char *recorded)
{
  add_lines (r, "symbols", "python", def->py_required, def->n_py_required, def, recorded);
  add_lines (r, "symbols", "native", def->native_required, def->n_native_required, def, recorded);
  add_lines (r, "kernels", "require", def->kernel_required, def->n_kernel_required, def, recorded);
}

/* A growing string. */
struct buf
{
  char *s;
  size_t len, cap;
};

static void
put (struct buf *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void
put (struct buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *t = ib_xvasprintf (fmt, ap);
  va_end (ap);
  size_t n = strlen (t);
  if (b->len + n + 1 > b->cap)
    {
      b->cap = (b->len + n + 1) * 2;
      b->s = ib_xrealloc (b->s, b->cap);
    }
  memcpy (b->s + b->len, t, n + 1);
  b->len += n;
  free (t);
}

/* S escaped for an XML attribute or text; characters XML 1.0 cannot hold
 * become '?'. */
static char *
esc (const char *s)
{
  struct buf b = { 0 };
  put (&b, "%s", "");
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    switch (*p)
      {
      case '&': put (&b, "&amp;"); break;
      case '<': put (&b, "&lt;"); break;
      case '>': put (&b, "&gt;"); break;
      case '"': put (&b, "&quot;"); break;
      case '\n': put (&b, "&#10;"); break;
      case '\t': put (&b, "&#9;"); break;
      default: put (&b, "%c", *p < 0x20 || *p == 0x7f ? '?' : *p);
      }
  return b.s;
}

static const char *
str (const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, key);
  return cJSON_IsString (v) ? v->valuestring : NULL;
}

static bool
same_def (const cJSON *a, const cJSON *b)
{
  const char *x = str (a, "definition"), *y = str (b, "definition");
  return (!x && !y) || (x && y && strcmp (x, y) == 0);
}

struct counts
{
  int tests, failures, errors, skipped;
};

/* The errors of PROBLEMS that match (gate GATE, or a message beginning
 * with PREFIX), about the definition of WHO: *FIRST the first (the one that
 * stopped the run when it is among them), the text all of them. */
static char *
errors_of (const cJSON *problems, const cJSON *who, const char *gate, const char *prefix, const char **first,
           const char **first_gate)
{
  struct buf b = { 0 };
  put (&b, "%s", "");
  *first = NULL;
  const cJSON *p;
  cJSON_ArrayForEach (p, problems)
  {
    const char *msg = str (p, "message"), *g = str (p, "gate"), *sev = str (p, "severity");
    if (!msg || !g || !sev || strcmp (sev, "error") != 0 || !same_def (p, who))
      continue;
    if (gate ? strcmp (g, gate) != 0 : strncmp (msg, prefix, strlen (prefix)) != 0)
      continue;
    if (*first == NULL)
      {
        *first = msg;
        *first_gate = g;
      }
    put (&b, "%s%s: %s", b.len ? "\n" : "", g, msg);
  }
  return b.s;
}

static void
outcome (struct buf *x, struct counts *c, const char *first, const char *type, const char *text)
{
  cleanup_free char *m = esc (first), *t = esc (type), *body = esc (text);
  put (x, ">\n      <failure message=\"%s\" type=\"%s\">%s</failure>\n    </testcase>\n", m, t, body);
  c->failures++;
}

/* ` file="…" line="…"` for the first error MSG of a gate: the place of
 * the requirement line it is about, else, when MSG begins with FILE:LINE:
 * (the definition gate names manifest lines so), FILE in the folder of
 * DEFINITION (NULL: imgverify's recorded definitions, whose lines are not
 * their files'). */
static void
put_location (struct buf *x, const char *msg, const cJSON *reqs, const char *definition)
{
  const cJSON *q;
  if (msg == NULL)
    return;
  cJSON_ArrayForEach (q, reqs)
  {
    size_t k = strlen (str (q, "origin"));
    if (strncmp (msg, str (q, "origin"), k) == 0 && msg[k] == ':')
      {
        cleanup_free char *f = esc (str (q, "file"));
        put (x, " file=\"%s\"", f);
        if (*str (q, "line"))
          put (x, " line=\"%s\"", str (q, "line"));
        return;
      }
  }
  if (definition == NULL)
    return;
  size_t n = strcspn (msg, ": /");
  if (n == 0 || msg[n] != ':')
    return;
  const char *line = msg + n + 1;
  size_t k = strspn (line, "0123456789");
  if (k == 0 || line[k] != ':')
    return;
  cleanup_free char *copy = ib_xstrdup (definition);
  cleanup_free char *file = ib_xasprintf ("%s/%.*s", dirname (copy), (int) n, msg);
  cleanup_free char *f = esc (file);
  put (x, " file=\"%s\" line=\"%.*s\"", f, (int) k, line);
}

static void
gate_case (struct buf *x, struct counts *c, const cJSON *row, const cJSON *problems, const cJSON *reqs,
           const char *prog, const char *top_def)
{
  const char *name = str (row, "name"), *status = str (row, "status"), *def = str (row, "definition");
  const cJSON *sec = cJSON_GetObjectItemCaseSensitive (row, "seconds");
  cleanup_free char *label = def ? ib_xasprintf ("%s [%s]", name, def) : ib_xstrdup (name);
  cleanup_free char *n = esc (label);
  put (x, "    <testcase classname=\"%s.gates\" name=\"%s\" time=\"%.3f\"", prog, n,
       cJSON_IsNumber (sec) ? sec->valuedouble : 0.0);
  c->tests++;
  if (strcmp (status, "fail") == 0)
    {
      const char *first, *g;
      cleanup_free char *text = errors_of (problems, row, name, NULL, &first, &g);
      const char *d = str (row, "detail");
      put_location (x, first, reqs, def ? NULL : top_def);
      outcome (x, c, first ? first : d ? d : "failed", name, *text ? text : d ? d : "failed");
    }
  else if (strcmp (status, "skip") == 0)
    {
      cleanup_free char *m = esc (str (row, "reason") ? str (row, "reason") : "skipped");
      put (x, ">\n      <skipped message=\"%s\"/>\n    </testcase>\n", m);
      c->skipped++;
    }
  else
    put (x, "/>\n");
}

/* The row of GATE about the definition of Q that ran (pass or fail), or
 * the reason it did not. */
static bool
gate_ran (const cJSON *gates, const cJSON *q, const char *gate, const char **why)
{
  const cJSON *row;
  *why = NULL;
  cJSON_ArrayForEach (row, gates)
  {
    const char *name = str (row, "name"), *status = str (row, "status");
    if (!name || strcmp (name, gate) != 0 || !same_def (row, q))
      continue;
    if (strcmp (status, "skip") != 0)
      return true;
    *why = str (row, "reason");
  }
  return false;
}

static void
requirement_case (struct buf *x, struct counts *c, const cJSON *q, const cJSON *doc, const char *prog)
{
  const char *gate = str (q, "gate"), *origin = str (q, "origin"), *line = str (q, "line");
  cleanup_free char *label = ib_xasprintf ("%s: %s", origin, str (q, "text"));
  cleanup_free char *n = esc (label), *f = esc (str (q, "file"));
  put (x, "    <testcase classname=\"%s.requirements.%s\" name=\"%s\" file=\"%s\"", prog, gate, n, f);
  if (*line)
    put (x, " line=\"%s\"", line);
  c->tests++;
  cleanup_free char *prefix = ib_xasprintf ("%s: ", origin);
  const char *first, *g = NULL, *why;
  cleanup_free char *text = errors_of (cJSON_GetObjectItemCaseSensitive (doc, "problems"), q, NULL, prefix, &first, &g);
  if (first)
    outcome (x, c, first, g, text);
  else if (!gate_ran (cJSON_GetObjectItemCaseSensitive (doc, "gates"), q, gate, &why))
    {
      cleanup_free char *reason = why ? ib_xasprintf ("gate %s skipped: %s", gate, why)
                                      : ib_xasprintf ("gate %s did not run", gate);
      cleanup_free char *m = esc (reason);
      put (x, ">\n      <skipped message=\"%s\"/>\n    </testcase>\n", m);
      c->skipped++;
    }
  else
    put (x, "/>\n");
}

static bool
has_row (const cJSON *gates, const char *name)
{
  const cJSON *row;
  cJSON_ArrayForEach (row, gates)
  {
    if (strcmp (str (row, "name"), name) == 0)
      return true;
  }
  return false;
}

char *
ib_junit_render (struct ib_report *r, const char *prog)
{
  cJSON *doc = ib_report_json (r);
  const cJSON *gates = cJSON_GetObjectItemCaseSensitive (doc, "gates"), *row, *q;
  struct buf x = { 0 };
  struct counts c = { 0 };
  bool gate_failed = false;
  double seconds = 0;
  cJSON_ArrayForEach (row, gates)
  {
    gate_case (&x, &c, row, cJSON_GetObjectItemCaseSensitive (doc, "problems"), ib_report_requirements (r), prog,
               str (doc, "definition"));
    gate_failed |= strcmp (str (row, "status"), "fail") == 0;
    seconds += cJSON_GetObjectItemCaseSensitive (row, "seconds")->valuedouble;
  }
  /* The gates a stopped build never reached: skipped, saying so. */
  size_t n_gates;
  const struct ib_gate *all = ib_gates (&n_gates);
  for (size_t i = 0; str (doc, "error") && i < n_gates; i++)
    if (!has_row (gates, all[i].name))
      {
        put (&x, "    <testcase classname=\"%s.gates\" name=\"%s\" time=\"0.000\">\n"
                 "      <skipped message=\"did not run: the run stopped before it\"/>\n    </testcase>\n",
             prog, all[i].name);
        c.tests++;
        c.skipped++;
      }
  cJSON_ArrayForEach (q, ib_report_requirements (r))
  requirement_case (&x, &c, q, doc, prog);
  const char *error = str (doc, "error");
  if (error && !gate_failed)
    {
      /* A failure outside the gates (a base that does not resolve, I/O). */
      cleanup_free char *m = esc (error);
      put (&x, "    <testcase classname=\"%s\" name=\"%s\">\n      <error message=\"%s\" type=\"error\">%s</error>\n"
               "    </testcase>\n", prog, prog, m, m);
      c.tests++;
      c.errors++;
    }
  const char *what = str (doc, "image") ? str (doc, "image") : str (doc, "ref") ? str (doc, "ref") : "";
  cleanup_free char *suite = ib_xasprintf ("%s %s", prog, what);
  cleanup_free char *sname = esc (suite);
  struct buf out = { 0 };
  put (&out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  put (&out, "<testsuites name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n", prog, c.tests,
       c.failures, c.errors, seconds);
  put (&out, "  <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", sname,
       c.tests, c.failures, c.errors, c.skipped, seconds);
  put (&out, "%s", x.s ? x.s : "");
  put (&out, "  </testsuite>\n</testsuites>\n");
  free (x.s);
  return out.s;
}

int
ib_report_write_files (struct ib_report *r, const char *prog, char *const *specs, size_t n, ib_error_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      bool junit = strncmp (specs[i], "junit:", 6) == 0;
      const char *path = strchr (specs[i], ':') + 1;
      char *text = junit ? ib_junit_render (r, prog) : cJSON_Print (ib_report_json (r));
      cleanup_free char *body = junit ? text : ib_xasprintf ("%s\n", text);
      if (!junit)
        free (text);
      /* Whole or not there (a temporary renamed over it), but not synced:
       * the report is for whoever reads it after the run, not state the
       * store depends on, and two disk flushes were a tenth of a thin push. */
      if (ib_write_cache_file (path, body, strlen (body), err) < 0)
        return ib_error_wrap (err, "--report %s", specs[i]);
    }
  return 0;
}
