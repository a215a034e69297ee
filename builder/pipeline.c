#include <stdio.h>
#include <stdlib.h>

#include <string.h>
#include <time.h>

#include "layers/transports/refs.h"
#include "layers/tar/tarcheck.h"
#include "layers/view/pull_lists.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/pipeline.h"
#include "builder/core/privileged.h"
#include "builder/gates/gates.h"
#include "builder/indexers.h"
#include "builder/cluster/load_nodes.h"
#include "builder/junit.h"
#include "builder/attest/provenance.h"
#include "builder/attest/sign.h"

static int
run_gate (struct ib_build *b, const struct ib_gate *g, ib_error_t *err)
{
  size_t errors = ib_report_errors (b->report, g->name);
  double t0 = ib_now ();
  int r = g->run (b, err);
  ib_gate_row (b, g->name, r, ib_now () - t0, errors, NULL, r < 0 ? *err : NULL);
  return r;
}

int
ib_build_run_gates (struct ib_build *b, int phase, ib_error_t *err)
{
  size_t n;
  const struct ib_gate *g = ib_gates (&n);
  ib_error_t first = NULL;
  for (size_t i = 0; i < n; i++)
    {
      if (g[i].phase != (enum ib_gate_phase) phase)
        continue;
      ib_error_t e = NULL;
      if (run_gate (b, &g[i], &e) < 0)
        {
          ib_error_wrap (&e, "gate %s", g[i].name);
          if (first == NULL)
            {
              first = e;
              b->failed_gate = g[i].name;
            }
          else
            ib_error_release (&e);
          if (!b->keep_going)
            break;
        }
    }
  if (first == NULL)
    return 0;
  ib_error_release (err);
  *err = first;
  return -1;
}

static int
run_gates (struct ib_build *b, enum ib_gate_phase phase, ib_error_t *err)
{
  return ib_build_run_gates (b, phase, err);
}

static const char *
config_str (const struct ib_image *img, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (img->config_json, key);
  return cJSON_IsString (v) ? v->valuestring : "";
}

static bool
base_entry_refused (const struct ib_build *b, const char *h)
{
  bool escape = ib_tar_finding_kind (h) == IB_TAR_ESCAPE;
  return escape ? !b->opt->allow_unsafe_base : b->opt->strict_base;
}

/* H's entries into the report (the privileged counted, each refused one a
 * problem, an allowed escape a warning); -1 when any is refused. */
static int
report_base_entries (struct ib_build *b, const char *from, const char *const *h, size_t n, const char *when,
                     ib_error_t *err)
{
  ib_report_privileged (b->report, cJSON_AddObjectToObject (ib_report_json (b->report), "base"), "base", h, n);
  size_t refused = 0;
  const char *first = NULL;
  for (size_t i = 0; i < n; i++)
    {
      bool escape = ib_tar_finding_kind (h[i]) == IB_TAR_ESCAPE;
      if (!escape && !b->opt->strict_base)
        continue;
      bool error = base_entry_refused (b, h[i]);
      ib_report_problem (b->report, "base", error, "%s", h[i]);
      if (error && refused++ == 0)
        first = h[i];
    }
  if (refused == 0)
    return 0;
  return ib_error (err, IB_EINTEGRITY, "base `%s` has %zu unsafe entr%s (the first: %s)%s%s", from, refused,
                   refused == 1 ? "y" : "ies", first,
                   ib_tar_finding_kind (first) == IB_TAR_ESCAPE ? ": it escapes the root or lies about itself"
                                                                : ": --strict-base refuses privileged entries",
                   when);
}

/* The pull's lister judges each layer as it lists it (pull_lists.h). */
static bool
pull_refuses (void *data, const char *hazard)
{
  return base_entry_refused (data, hazard);
}

static int
resolve_base (struct ib_build *b, ib_error_t *err)
{
  const char *from = b->opt->from ? b->opt->from : b->def->from;
  const char *plat = b->opt->platform ? b->opt->platform : b->def->platform;
  struct ib_platform platform;
  if (plat && ib_platform_parse (plat, &platform, err) < 0)
    return -1;
  double t0 = ib_now ();
  struct ib_transfer_report progress;
  struct ib_remote_options remote = b->opt->remote;
  ib_report_transfers (b->report, &progress);
  remote.progress = &progress;
  /* The base's layers are listed as they arrive from a registry, beside
   * the rest of the download (layers/view/pull_lists.h). */
  struct ib_pull_listener listener;
  uint64_t ahead = (uint64_t) ib_env_number ("IMGBUILD_LIST_AHEAD_MIB", 0, 1) << 20; /* 0: the lister's default */
  const struct ib_pull_judge judge = { pull_refuses, b };
  struct ib_pull_lister *lister = ib_pull_lister_start (b->store, ahead, &judge, &listener);
  remote.listener = lister ? &listener : NULL;
  int pulled = ib_image_pull (b->store, from, plat ? &platform : NULL, &remote, &b->base, err);
  struct ib_pull_lister_stats listed;
  ib_pull_lister_finish (lister, pulled < 0, &listed);
  if (pulled < 0 && listed.refused)
    {
      /* Stopped by what the first layers hold: the base's refusal, said as
       * check_base_entries says it. */
      ib_error_release (err);
      cleanup_free char *when = ib_xasprintf (" (in layer %zu of %zu: the pull stopped there)", listed.refused_layer + 1,
                                              listed.layers);
      report_base_entries (b, from, (const char *const *) listed.hazards, listed.n_hazards, when, err);
    }
  ib_pull_lister_stats_clear (&listed);
  if (pulled < 0)
    return -1;
  if (listed.listed > 0)
    ib_report_note (b->report, "base %s: %zu of %zu layers listed while the pull went on", from, listed.listed,
                    listed.layers);
  if (listed.held > 0)
    ib_report_note (b->report, "base %s: transfers waited for the listers %zu time%s, %.1fs in all (more than %.0f MiB "
                    "fetched and not listed)", from, listed.held, listed.held == 1 ? "" : "s", listed.held_seconds,
                    (double) listed.ahead / (1 << 20));
  b->first_overlay_layer = b->base->n_layers;
  /* --platform picks from an index; a single image of another platform is
   * not silently relabelled. */
  const char *os = config_str (b->base, "os"), *arch = config_str (b->base, "architecture");
  const char *variant = config_str (b->base, "variant");
  if (plat && (strcmp (platform.os, os) != 0 || strcmp (platform.architecture, arch) != 0
               || (platform.variant[0] && strcmp (platform.variant, variant) != 0)))
    return ib_error (err, IB_ENOTFOUND, "image `%s`: it is %s/%s%s%s, not the platform %s asked for", from, os, arch,
                     *variant ? "/" : "", variant, plat);
  ib_report_note (b->report, "base %s: %s, %zu layers (%.2fs)", from,
                  b->base->n_layers ? b->base->manifest.digest.s : "scratch", b->base->n_layers, ib_now () - t0);
  /* The image keeps its base's platform: its [copy OS/ARCH] lines are those
   * of that platform. */
  size_t matched;
  if (ib_definition_select_platform (b->def, b->base->config_json, &matched, err) < 0)
    return -1;
  if (b->def->n_platform_lines == 0)
    return 0;
  /* Platform sections say which platforms the definition is for. */
  if (matched == 0)
    return ib_error (err, IB_EDEFINITION, "%s: no [copy OS/ARCH] section for %s/%s, the platform of `%s` (the first is "
                     "[copy %s], %s)", b->def->file, os, arch, from, b->def->platform_lines[0].platform,
                     b->def->platform_lines[0].origin);
  ib_report_note (b->report, "platform %s/%s: %zu of %zu [copy OS/ARCH] lines", os, arch, matched,
                  b->def->n_platform_lines);
  return 0;
}

struct base_judge
{
  struct ib_build *b;
  const char *from;
  bool refused;
};

/* Each base layer as it is read: one that holds a refused entry stops the
 * build there, before the layers above it are read (a 4.5 GB base's 19
 * setuid files and devices are all in its first 52 MB layer). */
static int
judge_base_layer (void *data, size_t layer, const char *const *h, size_t n, ib_error_t *err)
{
  struct base_judge *j = data;
  for (size_t i = 0; i < n; i++)
    if (base_entry_refused (j->b, h[i]))
      {
        j->refused = true;
        cleanup_free char *when = NULL;
        if (layer + 1 < j->b->base->n_layers)
          when = ib_xasprintf (" (in layer %zu of %zu: the layers above it were not read)", layer + 1,
                               j->b->base->n_layers);
        return report_base_entries (j->b, j->from, h, n, when ? when : "", err);
      }
  return 0;
}

/* The entries of the base's layers that the tar check names
 * (layers/tar/tarcheck.h).  Those that escape the root or lie about
 * themselves (`..`, absolute names, links out, hard links to nothing,
 * duplicates, ...) are refused: an extractor that follows one writes
 * outside the image, and the image would carry them to every node.
 * --allow-unsafe-base makes each of them a warning (a base from a tool
 * that writes duplicate entries).  The privileged ones (setuid/setgid
 * files, devices, FIFOs, sockets) are what every distribution base holds:
 * counted in the report (privileged.h), refused only with --strict-base.
 * Judged layer by layer as the base's view is made (judge_base_layer). */
static int
check_base_entries (struct ib_build *b, ib_error_t *err)
{
  const struct ib_fsview *view = NULL;
  const char *from = b->opt->from ? b->opt->from : b->def->from;
  /* A base of no layer (scratch) has no entry to check: said so, a skip,
   * never a silent pass. */
  if (b->base->n_layers == 0)
    {
      ib_report_note (b->report, "base entries: skip: `%s` has no layer, nothing to check", from);
      return 0;
    }
  struct base_judge j = { b, from, false };
  const struct ib_fsview_judge judge = { judge_base_layer, &j };
  if (ib_build_base_view_judged (b, &judge, &view, err) < 0)
    return j.refused ? -1 : ib_error_wrap (err, "base `%s`", from);
  size_t n;
  const char *const *h = ib_fsview_hazards (view, &n);
  return report_base_entries (b, from, h, n, "", err);
}

/* The layer entries of the definition's items, targets made relative. */
static int
plan_overlay (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  b->entries = ib_xcalloc (d->n_items, sizeof (*b->entries));
  for (size_t i = 0; i < d->n_items; i++)
    {
      const struct ib_copy_item *it = &d->items[i];
      cleanup_free char *target = ib_copy_item_target (it);
      if (target == NULL)
        return ib_error (err, IB_EDEFINITION, "%s: bad target `%s`", it->origin, it->raw_target);
      struct ib_layer_entry *e = &b->entries[b->n_entries++];
      e->path = ib_xstrdup (target + 1);
      e->type = it->type;
      e->source = it->source ? ib_xstrdup (it->source) : NULL;
      e->link = it->link ? ib_xstrdup (it->link) : NULL;
      e->mode = it->mode;
    }
  return 0;
}

static int
write_overlay (struct ib_build *b, ib_error_t *err)
{
  if (plan_overlay (b, err) < 0)
    return -1;
  struct ib_layer_options lo = { .mtime = ib_source_date_epoch (), .gzip_level = b->def->gzip_level,
                                  .threads = b->opt->jobs };
  double t0 = ib_now ();
  if (ib_layer_write (b->store, b->entries, b->n_entries, &lo, &b->overlay, err) < 0)
    return ib_error_wrap (err, "overlay layer");
  ib_report_note (b->report, "layer %s: %zu entries, %llu bytes (%.2fs)%s", b->overlay.desc.digest.s,
                  b->overlay.n_entries, (unsigned long long) b->overlay.desc.size, ib_now () - t0,
                  b->overlay.kept ? ", kept from an earlier build of the same files" : "");
  return 0;
}

static size_t
count_files (const struct ib_definition *d)
{
  size_t n = 0;
  for (size_t i = 0; i < d->n_items; i++)
    n += d->items[i].type == IB_ENTRY_FILE;
  return n;
}

static int
write_prebake (struct ib_build *b, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->n_prebake == 0)
    return 0;
  const struct ib_fsview *base_view = NULL;
  if (ib_build_base_view (b, &base_view, err) < 0)
    return -1;
  struct ib_prebake_spec spec = {
    .sources = d->prebake,
    .n_sources = d->n_prebake,
    .arches = d->prebake_arches,
    .n_arches = d->n_prebake_arches,
    .flags = d->prebake_flags,
    .n_flags = d->n_prebake_flags,
    .jobs = d->prebake_jobs,
  };
  double t0 = ib_now ();
  if (ib_prebake_run (b->store, b->base, base_view, &spec, &b->prebake, err) < 0)
    return ib_error_wrap (err, "prebake");
  struct ib_layer_options lo = { .mtime = ib_source_date_epoch (), .gzip_level = d->gzip_level,
                                  .threads = b->opt->jobs };
  if (ib_layer_write (b->store, b->prebake.entries, b->prebake.n_entries, &lo, &b->prebake_layer, err) < 0)
    return ib_error_wrap (err, "prebake layer");
  ib_report_note (b->report, "prebake: %zu sources, %zu compiled, %zu cached, %zu nvcc runs (jobs %d, %s); layer %s (%.2fs)",
                  d->n_prebake, b->prebake.compiled, b->prebake.cached, b->prebake.nvcc_runs, b->prebake.jobs,
                  b->prebake.nvcc_version, b->prebake_layer.desc.digest.s, ib_now () - t0);
  return 0;
}

static int
commit_image (struct ib_build *b, ib_error_t *err)
{
  /* History lines depend on the content only, so a Dockerfile and a
   * definition with the same content give the same config. */
  cleanup_free char *copy = ib_xasprintf ("imgbuild: COPY %zu files", count_files (b->def));
  cleanup_free char *bake = ib_xasprintf ("imgbuild: PREBAKE %zu kernels sources", b->def->n_prebake);
  bool baked = b->prebake_layer.desc.media_type != NULL;
  struct ib_descriptor layers[2] = { b->overlay.desc, b->prebake_layer.desc };
  ib_digest diff_ids[2] = { b->overlay.diff_id, b->prebake_layer.diff_id };
  const char *history[2] = { copy, bake };
  /* The base, named as the definition names it: the same in a Dockerfile
   * build, so it costs no digest equality. */
  const char *from = b->opt->from ? b->opt->from : b->def->from;
  const char *annotations[4] = { IB_ANNOTATION_BASE_NAME, from, IB_ANNOTATION_BASE_DIGEST,
                                 b->base->manifest.digest.s };
  struct ib_image_delta delta = {
    .n_layers = baked ? 2 : 1,
    .layers = layers,
    .diff_ids = diff_ids,
    .n_env = b->def->n_env,
    .env = b->def->env,
    .n_labels = b->def->n_labels,
    .labels = b->def->labels,
    .cmd_json = b->def->cmd_json,
    .history = history,
    .n_annotations = b->base->n_layers ? 2 : 0,
    .annotations = annotations,
    .created = ib_source_date_epoch (),
  };
  return ib_image_extend (b->store, b->base, &delta, &b->image, err);
}

static int
write_outputs (struct ib_build *b, ib_error_t *err)
{
  struct ib_transfer_report progress;
  struct ib_remote_options remote = b->opt->remote;
  ib_report_transfers (b->report, &progress);
  remote.progress = &progress;
  for (size_t i = 0; i < b->opt->n_outputs; i++)
    {
      double t0 = ib_now ();
      if (ib_image_push (b->store, b->image, b->opt->outputs[i], b->name, &remote, err) < 0)
        return -1;
      ib_report_note (b->report, "wrote %s (%.2fs)", b->opt->outputs[i], ib_now () - t0);
    }
  return 0;
}

/* Sign the image and its attestation artifact PROV with --sign-with, and
 * list both about the image (the attestation first: listing it drops the
 * signatures of the one it replaces); the tag comes after. */
static int
sign (struct ib_build *b, const struct ib_descriptor *prov, ib_error_t *err)
{
  cleanup_free char *def = ib_store_artifact_definition (b->store, &prov->digest);
  struct ib_descriptor sig = { 0 };
  int r = ib_sign_image (b->store, b->image, b->name, prov, def, b->opt->sign_with, &sig, err);
  if (r == 0)
    r = ib_store_tag (b->store, NULL, &b->image->manifest, prov, err);
  if (r == 0)
    r = ib_store_tag (b->store, NULL, &b->image->manifest, &sig, err);
  if (r == 0)
    {
      ib_report_note (b->report, "signed with `%s`: signature %s", b->opt->sign_with, sig.digest.s);
      cJSON *j = cJSON_AddObjectToObject (ib_report_json (b->report), "signature");
      cJSON_AddStringToObject (j, "artifact", sig.digest.s);
      cJSON_AddStringToObject (j, "attestation", prov->digest.s);
    }
  ib_descriptor_clear (&sig);
  return r;
}

static int
pipeline (struct ib_build *b, ib_error_t *err)
{
  if (resolve_base (b, err) < 0 || check_base_entries (b, err) < 0 || run_gates (b, IB_PHASE_INPUTS, err) < 0 || write_overlay (b, err) < 0
      || write_prebake (b, err) < 0 || commit_image (b, err) < 0 || run_gates (b, IB_PHASE_IMAGE, err) < 0)
    return -1;
  /* Every gate passed: the name is written last, in one atomic step, with
   * the provenance listed beside it (and the signature before, when there
   * is one: a signer that fails leaves no tag). */
  struct ib_descriptor prov = { 0 };
  int r = ib_provenance_write_build (b, &prov, err);
  if (r == 0 && b->opt->sign_with)
    r = sign (b, &prov, err);
  if (r == 0)
    r = ib_store_tag (b->store, b->name, &b->image->manifest, b->opt->sign_with ? NULL : &prov, err);
  ib_descriptor_clear (&prov);
  if (r < 0)
    return -1;
  ib_report_note (b->report, "tagged %s %s", b->name, b->image->manifest.digest.s);
  if (write_outputs (b, err) < 0)
    return -1;
  if (b->opt->n_load_hosts == 0)
    return 0;
  return ib_load_nodes (b->store, b->image, b->name, (const char *const *) b->opt->load_hosts, b->opt->n_load_hosts,
                        b->report, err);
}

static void
fill_report (struct ib_build *b, int status)
{
  cJSON *doc = ib_report_json (b->report);
  cJSON_AddStringToObject (doc, "image", b->name);
  cJSON_AddStringToObject (doc, "definition", b->def->file);
  cJSON_AddStringToObject (doc, "status", status == 0 ? "pass" : "fail");
  if (b->base)
    {
      cJSON *base = cJSON_GetObjectItemCaseSensitive (doc, "base"); /* check_base_entries' */
      if (base == NULL)
        base = cJSON_AddObjectToObject (doc, "base");
      cJSON_AddStringToObject (base, "name", b->opt->from ? b->opt->from : b->def->from);
      if (b->base->n_layers)
        cJSON_AddStringToObject (base, "digest", b->base->manifest.digest.s);
      cJSON_AddNumberToObject (base, "layers", (double) b->base->n_layers);
    }
  if (b->overlay.desc.media_type)
    {
      cJSON *l = cJSON_AddObjectToObject (doc, "layer");
      cJSON_AddStringToObject (l, "digest", b->overlay.desc.digest.s);
      cJSON_AddStringToObject (l, "diff_id", b->overlay.diff_id.s);
      cJSON_AddNumberToObject (l, "size", (double) b->overlay.desc.size);
    }
  if (b->prebake_layer.desc.media_type)
    {
      cJSON *p = cJSON_AddObjectToObject (doc, "prebake");
      cJSON_AddStringToObject (p, "layer", b->prebake_layer.desc.digest.s);
      cJSON_AddStringToObject (p, "nvcc", b->prebake.nvcc);
      cJSON_AddStringToObject (p, "nvcc_version", b->prebake.nvcc_version);
      cJSON_AddStringToObject (p, "flags", b->prebake.flags);
      cJSON_AddNumberToObject (p, "compiled", (double) b->prebake.compiled);
      cJSON_AddNumberToObject (p, "cached", (double) b->prebake.cached);
      cJSON_AddNumberToObject (p, "nvcc_runs", (double) b->prebake.nvcc_runs);
      cJSON_AddNumberToObject (p, "jobs", b->prebake.jobs);
    }
  if (status == 0)
    cJSON_AddStringToObject (doc, "manifest", b->image->manifest.digest.s);
}

static void
build_clear (struct ib_build *b)
{
  for (size_t i = 0; i < b->n_entries; i++)
    {
      free (b->entries[i].path);
      free (b->entries[i].source);
      free (b->entries[i].link);
    }
  free (b->entries);
  ib_descriptor_clear (&b->overlay.desc);
  ib_descriptor_clear (&b->prebake_layer.desc);
  ib_prebake_result_clear (&b->prebake);
  ib_fsview_free (b->base_view);
  ib_fsview_free (b->image_view);
  ib_image_free (b->base);
  ib_image_free (b->image);
  ib_store_free (b->store);
  ib_report_free (b->report);
}

int
ib_build_run (struct ib_definition *def, const struct ib_build_options *opt, ib_digest *manifest,
              ib_error_t *err)
{
  struct ib_build b = { .def = def, .opt = opt, .name = opt->name ? opt->name : def->name, .started = time (NULL) };
  if (ib_check_image_name (b.name, err) < 0)
    return -1;
  cleanup_free char *store = ib_store_default_path (opt->store);
  if (ib_store_open (store, &b.store, err) < 0)
    return -1;
  /* Before the first file list: the one pass over each layer feeds them. */
  struct ib_build_indexers indexers;
  ib_build_indexers_add (&indexers, def, b.store);
  b.report = ib_report_new ("imgbuild", "imgbuild.report/v1", opt->quiet || opt->json);
  ib_report_add_requirements (b.report, def, NULL);
  int r = pipeline (&b, err);
  if (r == 0)
    *manifest = b.image->manifest.digest;
  fill_report (&b, r);
  cJSON_AddNumberToObject (ib_report_json (b.report), "exit_code", r < 0 ? ((*err)->class ? (*err)->class : IB_EGATE) : 0);
  if (r < 0)
    {
      cJSON_AddStringToObject (ib_report_json (b.report), "error", (*err)->msg);
      ib_report_stopped (b.report, b.failed_gate ? b.failed_gate : "build", (*err)->msg);
    }
  ib_report_resources (b.report);
  if (opt->json)
    {
      char *text = cJSON_Print (ib_report_json (b.report));
      puts (text);
      free (text);
    }
  ib_error_t werr = NULL;
  if (ib_report_write_files (b.report, "imgbuild", opt->reports, opt->n_reports, &werr) < 0)
    {
      /* The build's own failure is what the exit code says; a report that
       * cannot be written fails a build that passed (exit 8). */
      if (r == 0)
        {
          *err = werr;
          r = -1;
        }
      else
        {
          fprintf (stderr, "imgbuild: warning: %s\n", werr->msg);
          ib_error_release (&werr);
        }
    }
  build_clear (&b);
  ib_build_indexers_clear (&indexers);
  return r < 0 ? ib_error_wrap (err, "build %s", opt->name ? opt->name : def->name) : 0;
}
