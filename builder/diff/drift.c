#include "builder/diff/drift.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/diff/filesum.h"
#include "builder/core/build.h"

#define MAX_LOCK_SIZE (16u << 20)

char *
ib_lock_path (const struct ib_definition *d)
{
  cleanup_free char *dir = ib_xstrdup (d->file);
  char *slash = strrchr (dir, '/');
  if (slash == NULL)
    return ib_xstrdup (IB_LOCK_FILE);
  *slash = '\0';
  return ib_path_join (dir, IB_LOCK_FILE);
}

/* ---- what the definition's targets are in the base ----------------------- */

struct pin
{
  char *target;                      /* "/usr/…/x.py" */
  const struct ib_copy_item *item;   /* the definition's item, or NULL (a stale pin) */
  const struct ib_fs_entry *found;   /* the base's file, symlinks followed, or NULL */
  bool absent;                       /* the lock: the base lacked it */
  char digest[72];                   /* the lock: "sha256:<hex>" */
  struct ib_file_summary *pinned;    /* the lock's summary */
  int line;                          /* in the lock */
};

struct pins
{
  size_t n;
  struct pin *p;
};

static void
pins_clear (struct pins *ps)
{
  for (size_t i = 0; i < ps->n; i++)
    {
      free (ps->p[i].target);
      ib_file_summary_free (ps->p[i].pinned);
    }
  free (ps->p);
  ps->p = NULL;
  ps->n = 0;
}

static struct pin *
pins_find (struct pins *ps, const char *target)
{
  for (size_t i = 0; i < ps->n; i++)
    if (strcmp (ps->p[i].target, target) == 0)
      return &ps->p[i];
  return NULL;
}

static struct pin *
pins_add (struct pins *ps, const char *target)
{
  ps->p = ib_xrealloc (ps->p, (ps->n + 1) * sizeof (*ps->p));
  struct pin *p = &ps->p[ps->n++];
  *p = (struct pin){ .target = ib_xstrdup (target) };
  return p;
}

static const struct ib_fs_entry *
base_file (const struct ib_fsview *view, const char *target)
{
  const struct ib_fs_entry *e = ib_fsview_lookup (view, target + 1);
  return e ? ib_fsview_follow (view, e) : NULL;
}

/* The file items of D that a lock covers: those that replace a base file,
 * and those declared new that the base lacks.  Others (a target the base
 * lacks without [new]) are the definition gate's own business. */
static void
plan_pins (const struct ib_definition *d, const struct ib_fsview *view, struct pins *ps)
{
  for (size_t i = 0; i < d->n_items; i++)
    {
      const struct ib_copy_item *it = &d->items[i];
      cleanup_free char *target = ib_copy_item_target (it);
      if (it->type != IB_ENTRY_FILE || target == NULL || pins_find (ps, target))
        continue;
      const struct ib_fs_entry *e = base_file (view, target);
      if (e == NULL && !ib_definition_declares_new (d, target))
        continue;
      struct pin *p = pins_add (ps, target);
      p->item = it;
      p->found = e;
    }
}

/* ---- writing ------------------------------------------------------------- */

static void
write_summary (FILE *f, const struct ib_file_summary *s)
{
  for (size_t i = 0; i < s->n; i++)
    if (s->s[i].kind == IB_SYM_PYTHON)
      fprintf (f, " %s %s %016" PRIx64 "\n", ib_sym_kind_name (s->s[i].kind), s->s[i].name, s->s[i].hash);
    else
      fprintf (f, " %s %s\n", ib_sym_kind_name (s->s[i].kind), s->s[i].name);
}

static int
cmp_pin (const void *a, const void *b)
{
  return strcmp (((const struct pin *) a)->target, ((const struct pin *) b)->target);
}

static int
write_lock (struct ib_store *s, const struct ib_image *base, const struct ib_fsview *view,
            const struct ib_definition *d, const char *base_name, size_t *pinned, ib_error_t *err)
{
  struct pins ps = { 0 };
  plan_pins (d, view, &ps);
  ib_qsort (ps.p, ps.n, sizeof (*ps.p), cmp_pin);
  const struct ib_fs_entry **files = ib_xcalloc (ps.n + 1, sizeof (*files));
  struct ib_file_summary **sums = ib_xcalloc (ps.n + 1, sizeof (*sums));
  size_t n = 0;
  for (size_t i = 0; i < ps.n; i++)
    if (ps.p[i].found)
      files[n++] = ps.p[i].found;
  int r = ib_file_summary_entries (s, base, files, n, sums, err);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  fprintf (f, "# %s: written by `imgbuild --lock`, kept in version control.  The base\n"
              "# files this definition replaces, as it was written against them; the\n"
              "# definition gate fails when the base's file differs (README: drift pins).\n"
              "# base %s %s\n",
           IB_LOCK_FILE, base_name, base->n_layers ? base->manifest.digest.s : "scratch");
  for (size_t i = 0, k = 0; r == 0 && i < ps.n; i++)
    {
      if (ps.p[i].found == NULL)
        {
          fprintf (f, "%s absent\n", ps.p[i].target);
          continue;
        }
      fprintf (f, "%s sha256:%s\n", ps.p[i].target, ps.p[i].found->digest);
      write_summary (f, sums[k++]);
    }
  fclose (f);
  cleanup_free char *path = ib_lock_path (d);
  if (r == 0)
    r = ib_write_file_atomic (path, text, len, 0644, err);
  *pinned = ps.n;
  free (text);
  for (size_t i = 0; i < n; i++)
    ib_file_summary_free (sums[i]);
  free (sums);
  free (files);
  pins_clear (&ps);
  return r;
}

int
ib_lock_run (const struct ib_definition *d, const struct ib_build_options *opt, size_t *pinned, ib_error_t *err)
{
  const char *from = opt->from ? opt->from : d->from;
  const char *plat = opt->platform ? opt->platform : d->platform;
  struct ib_platform platform;
  if (plat && ib_platform_parse (plat, &platform, err) < 0)
    return -1;
  cleanup_free char *root = ib_store_default_path (opt->store);
  struct ib_store *s = NULL;
  struct ib_image *base = NULL;
  struct ib_fsview *view = NULL;
  int r = ib_store_open (root, &s, err);
  if (r == 0)
    r = ib_image_pull (s, from, plat ? &platform : NULL, &opt->remote, &base, err);
  if (r == 0)
    r = ib_fsview_of_image (s, base, &view, err);
  if (r == 0)
    r = write_lock (s, base, view, d, from, pinned, err);
  ib_fsview_free (view);
  ib_image_free (base);
  ib_store_free (s);
  return r < 0 ? ib_error_wrap (err, "lock %s against `%s`", d->file, from) : 0;
}

/* ---- reading and checking ------------------------------------------------ */

/* One line of the lock; false when it is malformed. */
static bool
parse_lock_line (struct pins *ps, char *l, int lineno)
{
  if (*l == ' ')
    {
      if (ps->n == 0 || ps->p[ps->n - 1].absent)
        return false;
      char *kind = strtok (l, " "), *rest = strtok (NULL, "");
      if (kind == NULL || rest == NULL)
        return false;
      struct ib_file_summary *f = ps->p[ps->n - 1].pinned;
      if (strcmp (kind, "python") == 0)
        {
          char *sp = strrchr (rest, ' ');
          if (sp == NULL)
            return false;
          *sp = '\0';
          ib_file_summary_add (f, IB_SYM_PYTHON, rest, strtoull (sp + 1, NULL, 16));
        }
      else if (strcmp (kind, "dynamic") == 0 || strcmp (kind, "kernel") == 0)
        ib_file_summary_add (f, kind[0] == 'd' ? IB_SYM_DYNAMIC : IB_SYM_KERNEL, rest, 0);
      else
        return false;
      return true;
    }
  char *target = strtok (l, " "), *what = strtok (NULL, " ");
  if (target == NULL || what == NULL || strtok (NULL, " ") || target[0] != '/' || pins_find (ps, target))
    return false;
  bool absent = strcmp (what, "absent") == 0;
  if (!absent && (strncmp (what, "sha256:", 7) != 0 || strlen (what) != 71))
    return false;
  struct pin *p = pins_add (ps, target);
  p->absent = absent;
  snprintf (p->digest, sizeof (p->digest), "%s", absent ? "" : what);
  p->pinned = ib_xcalloc (1, sizeof (*p->pinned));
  p->line = lineno;
  return true;
}

/* 1 when there is no lock; -1 when it cannot be read. */
static int
read_lock (const char *path, struct pins *ps, ib_problem_fn fn, void *data, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  ib_error_t e = NULL;
  if (access (path, F_OK) != 0)
    return 1;
  if (ib_read_file (path, MAX_LOCK_SIZE, &text, NULL, &e) < 0)
    {
      ib_error_release (err);
      *err = e;
      return -1;
    }
  const char *base = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;
  int lineno = 0;
  char *save = NULL;
  for (char *l = strtok_r (text, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      lineno++;
      if (*l == '#' || *l == '\0')
        continue;
      if (!parse_lock_line (ps, l, lineno))
        ib_problemf (fn, data, true, "%s:%d: malformed line (imgbuild --lock writes this file)", base, lineno);
    }
  for (size_t i = 0; i < ps->n; i++)
    ib_file_summary_sort (ps->p[i].pinned);
  return 0;
}

static void
report_drift (const struct pin *p, const struct ib_file_summary *found, const struct ib_image *base, ib_problem_fn fn,
              void *data)
{
  const struct ib_fs_entry *e = p->found;
  const char *layer = e && e->layer >= 0 && (size_t) e->layer < base->n_layers ? base->layers[e->layer].digest.s : "?";
  struct ib_sym_change *ch = NULL;
  size_t n = ib_file_summary_diff (p->pinned, found, &ch);
  cleanup_free char *what = ib_sym_changes_text (ch, n, 12);
  free (ch);
  if (p->absent)
    ib_problemf (fn, data, true,
                 "%s: %s is new in this definition but the base now has it (sha256:%s, layer %s; " IB_LOCK_FILE
                 ":%d pins it absent): upstream landed the file; %s",
                 p->item->origin, p->target, e->digest, layer, p->line, what);
  else if (e == NULL)
    ib_problemf (fn, data, true,
                 "%s: %s is gone from the base (" IB_LOCK_FILE ":%d pins %s); %s", p->item->origin, p->target,
                 p->line, p->digest, what);
  else
    ib_problemf (fn, data, true,
                 "%s: %s drifted from its pin: pinned %s (" IB_LOCK_FILE ":%d), found sha256:%s (layer %s); %s",
                 p->item->origin, p->target, p->digest, p->line, e->digest, layer, what);
}

static bool
drifted (const struct pin *p)
{
  if (p->absent)
    return p->found != NULL;
  return p->found == NULL || strcmp (p->digest + 7, p->found->digest) != 0;
}

/* Pins of the lock against the definition's items: each item covered by a
 * pin, each pin by an item. */
static void
match_items (const struct ib_definition *d, const struct ib_fsview *view, struct pins *lock, ib_problem_fn fn,
             void *data)
{
  struct pins want = { 0 };
  plan_pins (d, view, &want);
  for (size_t i = 0; i < want.n; i++)
    {
      struct pin *p = pins_find (lock, want.p[i].target);
      if (p == NULL)
        ib_problemf (fn, data, true, "%s: %s has no pin in " IB_LOCK_FILE " (imgbuild --lock writes it)",
                     want.p[i].item->origin, want.p[i].target);
      else
        {
          p->item = want.p[i].item;
          p->found = want.p[i].found;
        }
    }
  for (size_t i = 0; i < lock->n; i++)
    if (lock->p[i].item == NULL)
      {
        /* A pin for a target the base lost is not stale: it drifted. */
        const struct ib_copy_item *it = NULL;
        for (size_t k = 0; k < d->n_items && it == NULL; k++)
          {
            cleanup_free char *t = ib_copy_item_target (&d->items[k]);
            if (t && strcmp (t, lock->p[i].target) == 0)
              it = &d->items[k];
          }
        if (it)
          lock->p[i].item = it;
        else
          ib_problemf (fn, data, false, IB_LOCK_FILE ":%d: pin for %s, which the definition does not write "
                       "(imgbuild --lock rewrites the file)", lock->p[i].line, lock->p[i].target);
      }
  pins_clear (&want);
}

int
ib_lock_check (struct ib_build *b, ib_problem_fn fn, void *data, size_t *checked, ib_error_t *err)
{
  *checked = 0;
  cleanup_free char *path = ib_lock_path (b->def);
  struct pins lock = { 0 };
  int r = read_lock (path, &lock, fn, data, err);
  if (r != 0)
    return r < 0 ? ib_error_wrap (err, "%s", path) : 0;
  const struct ib_fsview *view;
  if (ib_build_base_view (b, &view, err) < 0)
    {
      pins_clear (&lock);
      return -1;
    }
  match_items (b->def, view, &lock, fn, data);
  const struct ib_fs_entry **files = ib_xcalloc (lock.n + 1, sizeof (*files));
  struct pin **bad = ib_xcalloc (lock.n + 1, sizeof (*bad));
  size_t n = 0;
  for (size_t i = 0; i < lock.n; i++)
    if (lock.p[i].item && drifted (&lock.p[i]))
      {
        bad[n] = &lock.p[i];
        files[n++] = lock.p[i].found;
      }
  /* Only the drifted files are read, and only those the base has. */
  const struct ib_fs_entry **present = ib_xcalloc (n + 1, sizeof (*present));
  struct ib_file_summary **sums = ib_xcalloc (n + 1, sizeof (*sums));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (files[i])
      present[k++] = files[i];
  r = ib_file_summary_entries (b->store, b->base, present, k, sums, err);
  for (size_t i = 0, j = 0; r == 0 && i < n; i++)
    report_drift (bad[i], files[i] ? sums[j++] : NULL, b->base, fn, data);
  for (size_t i = 0; i < k; i++)
    ib_file_summary_free (sums[i]);
  *checked = lock.n;
  free (sums);
  free (present);
  free (bad);
  free (files);
  pins_clear (&lock);
  return r;
}
