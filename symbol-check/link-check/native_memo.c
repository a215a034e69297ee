/* The native gate's verdict kept for the next image over the same base
 * (memo.h): its key (the gate's settings), the problems it said, its
 * counters, and a kept verdict said again.  The check itself is
 * linkgate.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "symbol-check/link-check/linkgate_private.h"
#include "symbol-check/link-check/memo.h"

static void
put_list (FILE *f, const char *what, char *const *list, size_t n)
{
  fprintf (f, "%s %zu\n", what, n);
  for (size_t i = 0; i < n; i++)
    {
      ib_fs_put_escaped (f, list[i]);
      fputc ('\n', f);
    }
}

/* Everything the verdict depends on besides the image's file system and
 * the content-addressed caches: the rules and what the image's config
 * says to the loader. */
static char *
native_settings (const struct ib_image *img, const struct ib_native_rules *r)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  const char *llp = ib_link_config_env (img, "LD_LIBRARY_PATH");
  /* The ELF records' format: a verdict made from records of another one
   * (elfdyn.c: which undefined symbols count) is not this one's. */
  fprintf (f, "records 2\nmachine %u\nld-library-path %d ", ib_link_image_machine (img), llp != NULL);
  ib_fs_put_escaped (f, llp ? llp : "");
  fprintf (f, "\ndefaults %d\nfirst %d\nas-ldd %d\nhosted %d\ninterpreter %d ", r->defaults, r->first_checked_layer,
           r->as_ldd, r->hosted, r->interpreter != NULL);
  ib_fs_put_escaped (f, r->interpreter ? r->interpreter : "");
  fputc ('\n', f);
  put_list (f, "check", r->check, r->n_check);
  put_list (f, "packages", r->packages, r->n_packages);
  put_list (f, "allow", r->allow, r->n_allow);
  put_list (f, "injected", r->injected, r->n_injected);
  fprintf (f, "preloads %zu\n", r->n_preloads);
  for (size_t i = 0; i < r->n_preloads; i++)
    {
      const char *p[3] = { r->preloads[i].package, r->preloads[i].path, r->preloads[i].origin };
      for (int k = 0; k < 3; k++)
        {
          fprintf (f, "%d ", p[k] != NULL);
          ib_fs_put_escaped (f, p[k] ? p[k] : "");
          fputc ('\n', f);
        }
    }
  fclose (f);
  return text;
}

struct said_tap
{
  ib_problem_fn fn;
  void *data;
  struct ib_memo *m;
};

static void
said_tap (void *data, bool is_error, const char *msg)
{
  struct said_tap *t = data;
  ib_memo_said (t->m, is_error, msg);
  t->fn (t->data, is_error, msg);
}

static void
counts_of (const struct ib_native_stats *st, size_t c[IB_MEMO_COUNTS])
{
  memset (c, 0, IB_MEMO_COUNTS * sizeof (*c));
  const size_t v[] = { st->objects, st->loaded, st->refs, st->errors, st->warnings, st->unchecked, st->allowed };
  memcpy (c, v, sizeof (v));
}

/* A kept verdict, said again. */
static void
replay (const struct ib_memo *m, ib_problem_fn fn, void *data, struct ib_native_stats *st)
{
  size_t n;
  const struct ib_memo_said *p = ib_memo_problems (m, &n);
  for (size_t i = 0; i < n; i++)
    fn (data, p[i].is_error, p[i].msg);
  const size_t *c = ib_memo_counts (m);
  *st = (struct ib_native_stats){ .objects = c[0], .loaded = c[1], .refs = c[2], .errors = c[3], .warnings = c[4],
                                  .unchecked = c[5], .allowed = c[6], .reused = true };
}

int
ib_native_check (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view,
                 const struct ib_native_rules *rules, ib_problem_fn fn, void *data, struct ib_native_stats *st,
                 cJSON *json, ib_error_t *err)
{
  memset (st, 0, sizeof (*st));
  /* The per-object detail of JSON and a driver file of the build machine
   * are not kept: those checks always run in full. */
  struct ib_memo *m = NULL;
  if (json == NULL && rules->driver == NULL)
    {
      cleanup_free char *settings = native_settings (img, rules);
      ib_memo_open (s, "native-memo", settings, img, rules->first_checked_layer, view, ib_native_selects,
                    (void *) rules, &m);
      if (m && ib_memo_hit (m))
        {
          replay (m, fn, data, st);
          ib_memo_free (m);
          return 0;
        }
      if (m)
        ib_memo_record (m, view);
    }
  struct said_tap tap = { fn, data, m };
  int r = ib_native_run (s, img, view, rules, m ? said_tap : fn, m ? (void *) &tap : data, st, json, err);
  if (m)
    {
      ib_fsview_observe (view, NULL);
      if (r == 0)
        {
          size_t c[IB_MEMO_COUNTS];
          counts_of (st, c);
          ib_memo_set_counts (m, c);
          ib_memo_save (m);
        }
      ib_memo_free (m);
    }
  return r;
}
