/* The definition gate: the definition itself must make sense before a byte
 * is written.  Targets stay inside their destination (no absolute manifest
 * target, no ".."), no two items write one path, every source is a regular
 * file, and every target replaces a file the base already has, unless the
 * definition declares it new: an overlay that writes beside the file it
 * meant to patch is the mistake this catches. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/diff/drift.h"
#include "builder/gates/gates.h"

/* Every problem of this gate is an error. */
#define problem(k, ...) ib_problemf (ib_gate_sink_problem, (k), true, __VA_ARGS__)

struct target
{
  char *path;
  const struct ib_copy_item *item;
};

static int
cmp_target (const void *a, const void *b)
{
  return strcmp (((const struct target *) a)->path, ((const struct target *) b)->path);
}

static bool
has_dotdot (const char *p)
{
  for (const char *s = p; (s = strstr (s, "..")); s += 2)
    if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
      return true;
  return false;
}

/* Checks of one item on its own; returns its cleaned target or NULL. */
static char *
check_item (struct ib_gate_sink *p, const struct ib_copy_item *it)
{
  const char *t = it->raw_target;
  if (*t == '\0')
    {
      problem (p, "%s: empty target", it->origin);
      return NULL;
    }
  if (it->dest && t[0] == '/')
    {
      problem (p, "%s: target `%s` is absolute; manifest targets are relative to %s",
                         it->origin, t, it->dest);
      return NULL;
    }
  if (!it->dest && t[0] != '/')
    {
      problem (p, "%s: target `%s` is not an absolute image path", it->origin, t);
      return NULL;
    }
  if (has_dotdot (t))
    {
      problem (p, "%s: target `%s` has a `..` part", it->origin, t);
      return NULL;
    }
  if (it->type == IB_ENTRY_FILE)
    {
      struct stat st;
      if (stat (it->source, &st) < 0)
        {
          problem (p, "%s: source `%s`: %s", it->origin, it->source,
                             strerror (errno));
        }
      else if (!S_ISREG (st.st_mode))
        {
          problem (p, "%s: source `%s` is not a regular file", it->origin,
                             it->source);
        }
    }
  char *target = ib_copy_item_target (it);
  if (target == NULL)
    {
      problem (p, "%s: target `%s` is not a clean path", it->origin, t);
    }
  return target;
}

static void
check_in_base (struct ib_gate_sink *p, const struct ib_definition *d, const struct ib_fsview *base, const struct target *t)
{
  if (t->item->type == IB_ENTRY_DIR || ib_definition_declares_new (d, t->path))
    return;
  const struct ib_fs_entry *e = ib_fsview_lookup (base, t->path + 1);
  if (e == NULL)
    {
      problem (p, "%s: target `%s` does not exist in the base %s (declare it under [new] if it is new)",
                         t->item->origin, t->path, d->from);
    }
  else if (e->type == IB_FS_DIR && t->item->type != IB_ENTRY_DIR)
    {
      problem (p, "%s: target `%s` is a folder in the base", t->item->origin,
                         t->path);
    }
}

int
ib_gate_definition (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->n_items == 0)
    return ib_gate_skip (b, "%s copies nothing", ib_gate_definition_name (b));
  const struct ib_fsview *base;
  if (ib_build_base_view (b, &base, err) < 0)
    return -1;
  struct ib_gate_sink p = { b->report, "definition", NULL, 0 };
  struct target *ts = ib_xcalloc (d->n_items, sizeof (*ts));
  size_t n = 0;
  for (size_t i = 0; i < d->n_items; i++)
    {
      char *path = check_item (&p, &d->items[i]);
      if (path)
        ts[n++] = (struct target){ path, &d->items[i] };
    }
  ib_qsort (ts, n, sizeof (*ts), cmp_target);
  for (size_t i = 0; i < n; i++)
    {
      if (i > 0 && strcmp (ts[i - 1].path, ts[i].path) == 0 && ts[i].item->type != IB_ENTRY_DIR)
        problem (&p, "%s: duplicate target `%s` (also %s)", ts[i].item->origin, ts[i].path, ts[i - 1].item->origin);
      check_in_base (&p, d, base, &ts[i]);
    }
  for (size_t i = 0; i < n; i++)
    free (ts[i].path);
  free (ts);
  /* Drift: the base files the targets replace against manifest.lock. */
  size_t pins = 0;
  double t0 = ib_now ();
  if (ib_lock_check (b, ib_gate_sink_problem, &p, &pins, err) < 0)
    {
      ib_gate_sink_finish (&p, IB_EDEFINITION, NULL);
      return -1;
    }
  if (pins)
    ib_report_note (b->report, "drift: %zu pins of " IB_LOCK_FILE " checked against the base (%.2fs)", pins,
                    ib_now () - t0);
  return ib_gate_sink_finish (&p, IB_EDEFINITION, err);
}
