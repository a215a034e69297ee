/* imgverify --native REF with no glob (verify_native.h). */
#include "builder/verify/verify_native.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/attest/provenance.h"
#include "builder/gates/gates.h"

static void
add_stats (struct ib_native_stats *sum, const struct ib_native_stats *st)
{
  sum->objects += st->objects;
  sum->loaded += st->loaded;
  sum->refs += st->refs;
  sum->errors += st->errors;
  sum->warnings += st->warnings;
  sum->unchecked += st->unchecked;
  sum->allowed += st->allowed;
  sum->read += st->read;
  sum->cached += st->cached;
  sum->layers_read += st->layers_read;
  sum->rounds += st->rounds;
}

/* One check with RULES; its objects join JSON's "objects". */
static int
check_once (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view,
            const struct ib_native_rules *rules, ib_problem_fn fn, void *data, struct ib_native_stats *sum,
            cJSON *json, ib_error_t *err)
{
  struct ib_native_stats st;
  cJSON *one = json ? cJSON_CreateObject () : NULL;
  int r = ib_native_check (s, img, view, rules, fn, data, &st, one, err);
  if (r == 0)
    add_stats (sum, &st);
  if (r == 0 && json)
    {
      cJSON *all = cJSON_GetObjectItemCaseSensitive (json, "objects");
      if (all == NULL)
        all = cJSON_AddArrayToObject (json, "objects");
      cJSON *objects = cJSON_DetachItemFromObjectCaseSensitive (one, "objects");
      while (objects && cJSON_GetArraySize (objects) > 0)
        cJSON_AddItemToArray (all, cJSON_DetachItemFromArray (objects, 0));
      cJSON_Delete (objects);
      cJSON *provides = cJSON_DetachItemFromObjectCaseSensitive (one, "provides");
      cJSON_DeleteItemFromObjectCaseSensitive (json, "provides");
      if (provides)
        cJSON_AddItemToObject (json, "provides", provides);
    }
  cJSON_Delete (one);
  return r;
}

/* What RULES check, for people: "the objects of the layers from 3 on and
 * the extension modules of vllm". */
static char *
plan_scope (const struct ib_native_rules *rules)
{
  char *out = NULL;
  size_t used = 0;
  ib_xappend (&out, &used, "", 0);
  const char *parts[3] = { rules->n_check ? "its [native] check lines" : NULL, NULL, NULL };
  cleanup_free char *layers = rules->defaults ? ib_xasprintf ("the objects of the layers from %d on",
                                                              rules->first_checked_layer)
                                              : NULL;
  parts[1] = layers;
  for (size_t i = 0, k = 0; i < 2; i++)
    if (parts[i])
      {
        if (k++)
          ib_xappend (&out, &used, ", ", 2);
        ib_xappend (&out, &used, parts[i], strlen (parts[i]));
      }
  for (size_t i = 0; rules->defaults && i < rules->n_packages; i++)
    {
      const char *sep = i ? ", " : " and the extension modules of ";
      ib_xappend (&out, &used, sep, strlen (sep));
      ib_xappend (&out, &used, rules->packages[i], strlen (rules->packages[i]));
    }
  return out;
}

/* The check of one record: its definition's plan over the layers it built. */
static int
check_record (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, const cJSON *record,
              bool as_ldd, ib_problem_fn fn, void *data, struct ib_native_stats *sum, cJSON *json, char **scope,
              ib_error_t *err)
{
  const cJSON *text = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (record, "definition"),
                                                        "gates");
  struct ib_definition *d = NULL;
  if (ib_definition_from_gate_text (cJSON_IsString (text) ? text->valuestring : "", &d, err) < 0)
    return -1;
  const cJSON *ol = cJSON_GetObjectItemCaseSensitive (record, "overlay_layer");
  size_t first = cJSON_IsNumber (ol) && ol->valuedouble >= 0 ? (size_t) ol->valuedouble : 0;
  size_t n_targets;
  char **targets = ib_provenance_targets (record, &n_targets);
  struct ib_native_plan plan;
  ib_native_plan_init (&plan, d, first, targets, n_targets);
  plan.rules.as_ldd = as_ldd;
  int r = check_once (s, img, view, &plan.rules, fn, data, sum, json, err);
  cleanup_free char *what = plan_scope (&plan.rules);
  const char *file = ib_provenance_definition (record);
  char *more = ib_xasprintf ("%s%sas %s's build checked: %s", *scope ? *scope : "", *scope ? "; " : "",
                             *file ? file : "a recorded definition", what);
  free (*scope);
  *scope = more;
  ib_native_plan_clear (&plan);
  for (size_t i = 0; i < n_targets; i++)
    free (targets[i]);
  free (targets);
  ib_definition_free (d);
  return r;
}

int
ib_verify_native_as_built (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, bool as_ldd,
                           ib_problem_fn fn, void *data, struct ib_native_stats *st, cJSON *json, char **scope,
                           ib_error_t *err)
{
  memset (st, 0, sizeof (*st));
  *scope = NULL;
  cJSON **records = NULL;
  size_t n = 0;
  int r = ib_provenance_read_all (s, img, &records, &n, err);
  for (size_t i = 0; r == 0 && i < n; i++)
    r = check_record (s, img, view, records[i], as_ldd, fn, data, st, json, scope, err);
  ib_provenance_free (records, n);
  if (r == 0 && n == 0)
    {
      /* Nothing says what a build checked: every object of every layer. */
      struct ib_native_rules all = { .defaults = true, .first_checked_layer = 0, .as_ldd = as_ldd, .hosted = true };
      r = check_once (s, img, view, &all, fn, data, st, json, err);
      *scope = ib_xstrdup ("no provenance record: every ELF object of the image");
    }
  if (r == 0 && json)
    cJSON_AddStringToObject (json, "scope", *scope);
  return r;
}
