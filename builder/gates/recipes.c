#include "builder/gates/recipes.h"

#include <stdlib.h>
#include <string.h>

#include "layers/view/fsview.h"
#include "builder/recipe/pyinventory.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/definition/definition.h"
#include "builder/gates/gates.h"

#define MAX_SOURCE (16u << 20)

/* The definition folder a recipe's image is built from: docker_image_dir,
 * else the name part of docker_image ("dsv41-flash-dcp2:local"). */
static char *
recipe_definition (const struct ib_recipe *r)
{
  if (r->docker_image_dir)
    return ib_definition_find (r->docker_image_dir);
  if (r->docker_image == NULL || strchr (r->docker_image, '/'))
    return NULL;
  cleanup_free char *name = ib_xstrdup (r->docker_image);
  char *colon = strchr (name, ':');
  if (colon)
    *colon = '\0';
  return ib_definition_find (name);
}

/* The declarations of DEF's overlay Python files, under their targets. */
static struct ib_py_inventory *
overlay_inventory (const struct ib_definition *def)
{
  struct ib_py_inventory *inv = ib_py_inventory_new ();
  for (size_t i = 0; i < def->n_items; i++)
    {
      const struct ib_copy_item *it = &def->items[i];
      size_t n = it->source ? strlen (it->source) : 0;
      if (n < 3 || strcmp (it->source + n - 3, ".py") != 0)
        continue;
      cleanup_free char *target = ib_copy_item_target (it);
      cleanup_free char *src = NULL;
      size_t len;
      ib_error_t e = NULL;
      cleanup_free char *what = ib_xasprintf ("%s (%s)", target ? target : it->raw_target, it->origin);
      if (ib_read_file (it->source, MAX_SOURCE, &src, &len, &e) < 0 || ib_py_inventory_add (inv, what, src, len, &e) < 0)
        ib_error_release (&e);
    }
  ib_py_inventory_finish (inv);
  return inv;
}

void
ib_recipe_overlay_hints (struct ib_rcheck *c, const struct ib_recipe *r)
{
  bool any = false;
  for (size_t i = 0; i < c->n; i++)
    any = any || (c->l[i].status == IB_R_FAIL && (!strcmp (c->l[i].check, "flag") || !strcmp (c->l[i].check, "env")));
  cleanup_free char *dir = any ? recipe_definition (r) : NULL;
  struct ib_definition *def = NULL;
  ib_error_t e = NULL;
  if (dir == NULL || ib_definition_load (dir, &def, &e) < 0)
    {
      ib_error_release (&e);
      return;
    }
  struct ib_py_inventory *inv = overlay_inventory (def);
  const char *name = strrchr (dir, '/') ? strrchr (dir, '/') + 1 : dir;
  for (size_t i = 0; i < c->n; i++)
    {
      struct ib_rline *l = &c->l[i];
      if (l->status != IB_R_FAIL)
        continue;
      const char *file = NULL;
      int line = 0;
      if (!strcmp (l->check, "flag") && ib_py_inventory_flag (inv, l->subject))
        file = ib_py_inventory_flag (inv, l->subject)->file, line = ib_py_inventory_flag (inv, l->subject)->line;
      else if (!strcmp (l->check, "env") && ib_py_inventory_env (inv, l->subject))
        file = ib_py_inventory_env (inv, l->subject)->file, line = ib_py_inventory_env (inv, l->subject)->line;
      if (file == NULL)
        continue;
      cleanup_free char *hint = ib_xasprintf ("; the %s overlay adds it, at line %d of %s", name, line, file);
      ib_rcheck_append (c, i, hint);
    }
  ib_py_inventory_free (inv);
  ib_definition_free (def);
}

static void
print_summary (const struct ib_rcheck *c, const char *ref)
{
  fprintf (stderr,
           "recipe: %s against %s: %zu passed, %zu failed, %zu unchecked, %zu warnings (%zu Python files, %zu flags "
           "declared, %zu environment reads, %zu shared objects scanned)\n",
           c->recipe, ref, c->counts[IB_R_PASS], c->counts[IB_R_FAIL], c->counts[IB_R_UNCHECKED],
           c->counts[IB_R_WARN], c->py_files, c->flags_declared, c->env_reads, c->so_scanned);
}

int
ib_recipe_verify_run (const struct ib_recipe_verify_options *o)
{
  ib_error_t err = NULL;
  struct ib_recipe *r = NULL;
  if (ib_recipe_load (o->recipe, &r, &err) < 0)
    return ib_error_report ("imgverify", &err);
  const char *ref = o->ref ? o->ref : r->docker_image;
  if (ref == NULL)
    {
      ib_recipe_free (r);
      fprintf (stderr, "imgverify: error: recipe %s: names no docker_image: give the image as REF\n", o->recipe);
      return IB_EUSAGE;
    }
  cleanup_free char *root = ib_store_default_path (o->store);
  struct ib_store *s = NULL;
  struct ib_image *img = NULL;
  struct ib_fsview *view = NULL;
  struct ib_rcheck *c = NULL;
  int rc = ib_image_open_in_place (root, ref, NULL, &o->remote, &s, &img, &err);
  if (rc == 0)
    rc = ib_fsview_of_image (s, img, &view, &err);
  if (rc == 0)
    rc = ib_recipe_check_image (s, img, view, r, &c, &err);
  int code = 0;
  if (rc == 0)
    {
      ib_recipe_overlay_hints (c, r);
      ib_rcheck_print (stderr, c, false);
      print_summary (c, ref);
      code = c->counts[IB_R_FAIL] ? IB_EGATE : 0;
      if (o->json)
        {
          cJSON *doc = ib_rcheck_json (c);
          cJSON_AddStringToObject (doc, "schema", "imgverify.recipe/v1");
          cJSON_AddStringToObject (doc, "ref", ref);
          cJSON_AddStringToObject (doc, "status", code ? "fail" : "pass");
          cJSON_AddNumberToObject (doc, "exit_code", code);
          char *text = cJSON_PrintUnformatted (doc);
          puts (text);
          free (text);
          cJSON_Delete (doc);
        }
      if (code)
        fprintf (stderr, "imgverify: error: recipe %s does not fit %s: %zu check%s failed (listed above)\n",
                 o->recipe, ref, c->counts[IB_R_FAIL], c->counts[IB_R_FAIL] == 1 ? "" : "s");
    }
  else
    code = ib_error_report ("imgverify", &err);
  ib_rcheck_free (c);
  ib_fsview_free (view);
  ib_image_free (img);
  ib_store_free (s);
  ib_recipe_free (r);
  return code;
}

/* One recipe against the candidate: failures are the gate's errors,
 * unchecked lines and warnings its warnings, each a line of the report. */
static int
gate_one_recipe (struct ib_build *b, const struct ib_fsview *view, size_t i, struct ib_gate_sink *k, size_t *ran,
                 ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  struct ib_recipe *r = NULL;
  struct ib_rcheck *c = NULL;
  if (ib_recipe_load (d->recipes[i], &r, err) < 0)
    return ib_error_wrap (err, "%s", d->recipe_origins[i]);
  if (r->docker_image && d->name && strcmp (r->docker_image, d->name) != 0)
    {
      cleanup_free char *w = ib_xasprintf ("%s:%d: the recipe runs %s; this definition builds %s", r->path,
                                           r->docker_image_line, r->docker_image, d->name);
      ib_gate_sink_problem (k, false, w);
    }
  if (ib_recipe_check_image (b->store, b->image, view, r, &c, err) < 0)
    {
      ib_recipe_free (r);
      return -1;
    }
  ib_recipe_overlay_hints (c, r);
  for (size_t j = 0; j < c->n; j++)
    {
      const struct ib_rline *l = &c->l[j];
      if (l->status == IB_R_PASS)
        continue;
      cleanup_free char *msg = ib_xasprintf ("%s:%d: %s %s: %s%s", c->recipe, l->line, l->check, l->subject,
                                             l->status == IB_R_UNCHECKED ? "unchecked: " : "", l->message);
      ib_gate_sink_problem (k, l->status == IB_R_FAIL, msg);
    }
  ib_report_note (b->report, "recipe: %s: %zu passed, %zu failed, %zu unchecked, %zu warnings", c->recipe,
                  c->counts[IB_R_PASS], c->counts[IB_R_FAIL], c->counts[IB_R_UNCHECKED], c->counts[IB_R_WARN]);
  /* What ran: a check of something the recipe says (a line of it), not
   * the shape its defaults give (line 0) or a line left unchecked. */
  for (size_t j = 0; j < c->n; j++)
    *ran += c->l[j].line > 0 && c->l[j].status != IB_R_UNCHECKED;
  ib_rcheck_free (c);
  ib_recipe_free (r);
  return 0;
}

int
ib_gate_recipe (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->n_recipes == 0)
    return ib_gate_skip (b, "no [recipe] in %s", ib_gate_definition_name (b));
  const struct ib_fsview *view = NULL;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  struct ib_gate_sink k = { b->report, "recipe", NULL, 0 };
  size_t ran = 0;
  for (size_t i = 0; i < d->n_recipes; i++)
    if (gate_one_recipe (b, view, i, &k, &ran, err) < 0)
      {
        free (k.first_error);
        return -1;
      }
  if (ib_gate_sink_finish (&k, IB_EGATE, err) < 0)
    return -1;
  if (ran == 0)
    return ib_gate_skip (b, "no check of the [recipe] files of %s could run (each unchecked)",
                         ib_gate_definition_name (b));
  return 0;
}
