#include "builder/diff/triage.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/store/digest.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/core/gate.h"
#include "builder/diff/imgdiff.h"
#include "builder/core/report.h"

#define MAX_DEFINITION_SIZE (1u << 20)

struct row
{
  const struct ib_copy_item *item;
  char *target;                     /* "/usr/…/x.py" */
  char overlay[65];                 /* sha256 hex of the source */
  const struct ib_fs_entry *ours;   /* REF's file, symlinks followed */
  const struct ib_fs_entry *theirs; /* their base's */
  const char *bucket;
  struct ib_file_summary *s_ours, *s_theirs, *s_overlay;
};

struct triage
{
  const struct ib_triage_options *o;
  struct ib_definition *def;
  struct ib_store *s;
  struct ib_side ours, theirs;
  struct row *rows;
  size_t n;
  struct ib_report *report;
  struct ib_gate_sink sink;
};

static const char *const buckets[] = { "identical", "clean", "merge", "new-theirs", "new-both",
                                       "new-ours", "differs", "new", NULL };

static const struct ib_fs_entry *
file_of (const struct ib_side *side, const char *target)
{
  if (side->view == NULL)
    return NULL;
  const struct ib_fs_entry *e = ib_fsview_follow (side->view, ib_fsview_lookup (side->view, target + 1));
  return e && e->type == IB_FS_FILE ? e : NULL;
}

static const char *
bucket_of (const struct triage *t, const struct row *r)
{
  bool with_theirs = t->o->their_base != NULL;
  if (r->ours && strcmp (r->ours->digest, r->overlay) == 0)
    return "identical";
  if (!with_theirs)
    return r->ours ? "differs" : "new";
  if (r->ours && r->theirs)
    return strcmp (r->ours->digest, r->theirs->digest) == 0 ? "clean" : "merge";
  if (r->ours)
    return "new-theirs";
  return r->theirs ? "new-ours" : "new-both";
}

static int
plan_rows (struct triage *t, ib_error_t *err)
{
  const struct ib_definition *d = t->def;
  t->rows = ib_xcalloc (d->n_items + 1, sizeof (*t->rows));
  for (size_t i = 0; i < d->n_items; i++)
    {
      const struct ib_copy_item *it = &d->items[i];
      char *target = ib_copy_item_target (it);
      bool dup = false;
      for (size_t k = 0; target && k < t->n && !dup; k++)
        dup = strcmp (t->rows[k].target, target) == 0;
      if (it->type != IB_ENTRY_FILE || target == NULL || dup)
        {
          free (target);
          continue;
        }
      struct row *r = &t->rows[t->n++];
      r->item = it;
      r->target = target;
      ib_digest dg;
      if (ib_sha256_file (it->source, &dg, NULL, err) < 0)
        {
          (*err)->class = IB_EDEFINITION;
          return ib_error_wrap (err, "%s", it->origin);
        }
      snprintf (r->overlay, sizeof (r->overlay), "%s", ib_digest_hex (dg.s));
      r->ours = file_of (&t->ours, target);
      r->theirs = file_of (&t->theirs, target);
      r->bucket = bucket_of (t, r);
    }
  return 0;
}

/* REF's version of every file it has, their base's of the merges, and the
 * overlay's own of every file. */
static int
summarize (struct triage *t, ib_error_t *err)
{
  const struct ib_fs_entry **files = ib_xcalloc (t->n + 1, sizeof (*files));
  struct ib_file_summary **sums = ib_xcalloc (t->n + 1, sizeof (*sums));
  int r = 0;
  for (int side = 0; r == 0 && side < 2; side++)
    {
      size_t k = 0;
      for (size_t i = 0; i < t->n; i++)
        if (side == 0 ? t->rows[i].ours != NULL : strcmp (t->rows[i].bucket, "merge") == 0)
          files[k++] = side == 0 ? t->rows[i].ours : t->rows[i].theirs;
      r = ib_side_summaries (t->s, side == 0 ? &t->ours : &t->theirs, files, k, sums, err);
      for (size_t i = 0, j = 0; r == 0 && i < t->n; i++)
        if (side == 0 ? t->rows[i].ours != NULL : strcmp (t->rows[i].bucket, "merge") == 0)
          *(side == 0 ? &t->rows[i].s_ours : &t->rows[i].s_theirs) = sums[j++];
    }
  for (size_t i = 0; r == 0 && i < t->n; i++)
    {
      struct row *row = &t->rows[i];
      cleanup_close int fd = open (row->item->source, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        r = ib_error (err, IB_EDEFINITION, "%s: open `%s`", row->item->origin, row->item->source);
      else
        r = ib_file_summary_fd (row->target, fd, &row->s_overlay, err);
    }
  free (sums);
  free (files);
  return r;
}

/* ---- the checks ---------------------------------------------------------- */

static void
check_superset (struct triage *t)
{
  for (size_t i = 0; i < t->n; i++)
    {
      const struct row *r = &t->rows[i];
      if (r->s_ours == NULL)
        continue;
      struct ib_sym_change *ch = NULL;
      size_t n = ib_file_summary_diff (r->s_ours, r->s_overlay, &ch);
      for (size_t k = 0; k < n; k++)
        if (ch[k].change == '-')
          ib_problemf (ib_gate_sink_problem, &t->sink, true,
                       "%s: %s: %s %s of %s (layer %d) is missing from the overlay's version %s", r->item->origin,
                       r->target, ib_sym_kind_name (ch[k].sym->kind), ch[k].sym->name, t->o->against,
                       r->ours->layer, r->item->source);
      free (ch);
    }
}

static void
check_require (struct triage *t, const char *spec, const char *origin)
{
  const char *at = strrchr (spec, '@');
  if (at == NULL || at == spec || at[1] == '\0')
    {
      ib_problemf (ib_gate_sink_problem, &t->sink, true, "%s: `require %s`: not NAME@FILE", origin, spec);
      return;
    }
  cleanup_free char *name = strndup (spec, (size_t) (at - spec));
  const char *file = at + 1;
  const struct row *hit = NULL;
  size_t hits = 0, fl = strlen (file);
  for (size_t i = 0; i < t->n; i++)
    {
      const char *tg = t->rows[i].target;
      size_t tl = strlen (tg);
      if (strcmp (tg, file) == 0 || (tl > fl && tg[tl - fl - 1] == '/' && strcmp (tg + tl - fl, file) == 0))
        hit = &t->rows[i], hits++;
    }
  if (hits != 1)
    {
      ib_problemf (ib_gate_sink_problem, &t->sink, true, "%s: require %s: %s names %s of the definition's targets",
                   origin, spec, file, hits ? "several" : "none");
      return;
    }
  for (size_t i = 0; i < hit->s_overlay->n; i++)
    if (strcmp (hit->s_overlay->s[i].name, name) == 0)
      return;
  ib_problemf (ib_gate_sink_problem, &t->sink, true, "%s: require %s: %s (the overlay's %s) does not define %s",
               origin, spec, hit->item->source, hit->target, name);
}

/* The [triage] section of the definition file: `require NAME@FILE...`. */
static int
check_requires (struct triage *t, size_t *n_checked, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  if (ib_read_file (t->def->file, MAX_DEFINITION_SIZE, &text, NULL, err) < 0)
    return -1;
  const char *base = strrchr (t->def->file, '/') ? strrchr (t->def->file, '/') + 1 : t->def->file;
  bool in = false;
  int lineno = 0;
  for (char *l = text, *next; l; l = next)
    {
      next = strchr (l, '\n');
      if (next)
        *next++ = '\0';
      lineno++;
      while (*l == ' ' || *l == '\t')
        l++;
      if (*l == '#' || *l == '\0')
        continue;
      if (*l == '[')
        {
          in = strncmp (l, "[triage]", 8) == 0;
          continue;
        }
      if (!in)
        continue;
      cleanup_free char *origin = ib_xasprintf ("%s:%d", base, lineno);
      char *save2 = NULL, *word = strtok_r (l, " \t", &save2);
      if (strcmp (word, "require") != 0)
        return ib_error (err, IB_EDEFINITION, "%s: unknown key `%s` in [triage]", origin, word);
      for (char *spec = strtok_r (NULL, " \t", &save2); spec && *spec != '#'; spec = strtok_r (NULL, " \t", &save2))
        {
          check_require (t, spec, origin);
          (*n_checked)++;
        }
    }
  return 0;
}

/* ---- output -------------------------------------------------------------- */

static const char *
shown (const struct row *r)
{
  return r->item->dest ? r->item->raw_target : r->target;
}

static cJSON *
version_json (const struct ib_side *side, const struct ib_fs_entry *e)
{
  if (e == NULL)
    return cJSON_CreateNull ();
  cJSON *j = cJSON_CreateObject ();
  cleanup_free char *d = ib_xasprintf ("sha256:%s", e->digest);
  cJSON_AddStringToObject (j, "sha256", d);
  cJSON_AddNumberToObject (j, "layer", e->layer);
  if (e->layer >= 0 && (size_t) e->layer < side->img->n_layers)
    cJSON_AddStringToObject (j, "layer_digest", side->img->layers[e->layer].digest.s);
  return j;
}

/* For a merge: what their base's file lacks that ours has, and back. */
static char *
merge_text (const struct row *r)
{
  if (r->s_theirs == NULL || r->s_ours == NULL)
    return NULL;
  struct ib_sym_change *ch = NULL;
  size_t n = ib_file_summary_diff (r->s_theirs, r->s_ours, &ch);
  char *text = ib_sym_changes_text (ch, n, 8);
  free (ch);
  return text;
}

static void
emit (struct triage *t, size_t *count)
{
  cJSON *doc = ib_report_json (t->report);
  cJSON_AddStringToObject (doc, "definition", t->def->file);
  cJSON_AddStringToObject (doc, "against", t->o->against);
  if (t->o->their_base)
    cJSON_AddStringToObject (doc, "their_base", t->o->their_base);
  cJSON *files = cJSON_AddArrayToObject (doc, "files");
  for (size_t i = 0; i < t->n; i++)
    {
      const struct row *r = &t->rows[i];
      cleanup_free char *merge = strcmp (r->bucket, "merge") == 0 ? merge_text (r) : NULL;
      cJSON *f = cJSON_CreateObject ();
      cJSON_AddStringToObject (f, "target", r->target);
      cJSON_AddStringToObject (f, "source", r->item->source);
      cJSON_AddStringToObject (f, "bucket", r->bucket);
      cleanup_free char *ov = ib_xasprintf ("sha256:%s", r->overlay);
      cJSON_AddStringToObject (f, "overlay", ov);
      cJSON_AddItemToObject (f, "ours", version_json (&t->ours, r->ours));
      if (t->o->their_base)
        cJSON_AddItemToObject (f, "theirs", version_json (&t->theirs, r->theirs));
      if (merge)
        cJSON_AddStringToObject (f, "their_base_to_ours", merge);
      cJSON_AddItemToArray (files, f);
      if (!t->o->json)
        {
          printf ("%-10s %s\n", r->bucket, shown (r));
          if (merge)
            printf ("           their base -> ours: %s\n", merge);
        }
    }
  cJSON *b = cJSON_AddObjectToObject (doc, "buckets");
  for (size_t k = 0; buckets[k]; k++)
    if (count[k])
      cJSON_AddNumberToObject (b, buckets[k], (double) count[k]);
  if (!t->o->json)
    {
      const char *sep = "";
      for (size_t k = 0; buckets[k]; k++)
        if (count[k])
          {
            printf ("%s%zu %s", sep, count[k], buckets[k]);
            sep = ", ";
          }
      printf ("%s%zu files\n", sep, t->n);
    }
}

static int
open_all (struct triage *t, ib_error_t *err)
{
  const struct ib_triage_options *o = t->o;
  cleanup_free char *root = ib_store_default_path (o->store);
  if (ib_definition_load (o->definition, &t->def, err) < 0 || ib_store_open (root, &t->s, err) < 0
      || ib_side_open (t->s, o->against, &o->remote, &t->ours, err) < 0
      || ib_definition_select_platform (t->def, t->ours.img->config_json, NULL, err) < 0)
    return -1;
  if (o->their_base && ib_side_open (t->s, o->their_base, &o->remote, &t->theirs, err) < 0)
    return ib_error_wrap (err, "--their-base");
  return 0;
}

static int
run (struct triage *t, ib_error_t *err)
{
  if (open_all (t, err) < 0 || plan_rows (t, err) < 0 || summarize (t, err) < 0)
    return -1;
  size_t count[sizeof (buckets) / sizeof (buckets[0])] = { 0 };
  for (size_t i = 0; i < t->n; i++)
    for (size_t k = 0; buckets[k]; k++)
      count[k] += strcmp (t->rows[i].bucket, buckets[k]) == 0;
  emit (t, count);
  double t0 = ib_now ();
  if (t->o->require_superset)
    {
      t->sink.gate = "superset";
      check_superset (t);
      ib_error_t e = NULL;
      ib_gate_sink_finish (&t->sink, IB_ESYMBOLS, &e);
      ib_report_gate (t->report, "superset", e ? IB_GATE_FAIL : IB_GATE_PASS, ib_now () - t0,
                      e ? e->msg : "every definition of the base's files is in the overlay's");
      if (e)
        {
          ib_error_release (err);
          *err = e;
        }
    }
  size_t n_required = 0;
  t->sink = (struct ib_gate_sink){ t->report, "require", NULL, 0 };
  t0 = ib_now ();
  if (check_requires (t, &n_required, err) < 0)
    return -1;
  ib_error_t e = NULL;
  ib_gate_sink_finish (&t->sink, IB_ESYMBOLS, &e);
  if (n_required)
    {
      cleanup_free char *detail = ib_xasprintf ("%zu named fixes present in the overlay", n_required);
      ib_report_gate (t->report, "require", e ? IB_GATE_FAIL : IB_GATE_PASS, ib_now () - t0, e ? e->msg : detail);
    }
  if (e && *err == NULL)
    *err = e;
  else
    ib_error_release (&e);
  return *err ? -1 : 0;
}

int
ib_triage_run (const struct ib_triage_options *o)
{
  struct triage t = { .o = o };
  t.report = ib_report_new ("imgverify", "imgverify.triage/v1", o->json);
  t.sink = (struct ib_gate_sink){ t.report, "superset", NULL, 0 };
  ib_error_t err = NULL;
  int r = run (&t, &err);
  int code = r < 0 ? (err->class ? err->class : IB_EGATE) : 0;
  cJSON *doc = ib_report_json (t.report);
  cJSON_AddStringToObject (doc, "status", code ? "fail" : "pass");
  cJSON_AddNumberToObject (doc, "exit_code", code);
  if (err)
    cJSON_AddStringToObject (doc, "error", err->msg);
  if (o->json)
    {
      char *text = cJSON_Print (doc);
      puts (text);
      free (text);
    }
  if (err)
    {
      ib_error_wrap (&err, "triage %s", o->definition);
      ib_error_report ("imgverify", &err);
    }
  for (size_t i = 0; i < t.n; i++)
    {
      free (t.rows[i].target);
      ib_file_summary_free (t.rows[i].s_ours);
      ib_file_summary_free (t.rows[i].s_theirs);
      ib_file_summary_free (t.rows[i].s_overlay);
    }
  free (t.rows);
  ib_side_clear (&t.ours);
  ib_side_clear (&t.theirs);
  ib_definition_free (t.def);
  ib_store_free (t.s);
  ib_report_free (t.report);
  return code;
}
