#include "builder/verify/verify_image.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/pipeline.h"
#include "builder/gates/gates.h"
#include "builder/indexers.h"
#include "builder/junit.h"
#include "builder/attest/provenance.h"
#include "builder/attest/sign.h"
#include "builder/core/privileged.h"
#include "builder/verify/verify.h"

/* What --require-gates may name, with the class of the failure when one of
 * them did not run. */
static const struct
{
  const char *name;
  int class;
} gate_names[] = {
  { "integrity", IB_EINTEGRITY }, { "provenance", IB_EPROVENANCE }, { "symbols", IB_ESYMBOLS },
  { "native", IB_ESYMBOLS },      { "kernels", IB_EKERNELS },       { "smoke", IB_ESMOKE },
  { "toolchains", IB_EKERNELS },  { "driver", IB_EKERNELS },        { "ptx", IB_EKERNELS },
  { "jit-budget", IB_EKERNELS },  { "recipe", IB_EGATE },
};
#define N_GATES (sizeof (gate_names) / sizeof (gate_names[0]))
#define GATE_PROVENANCE 1 /* its index in gate_names */

/* The failure that decides the exit code, and the gate it came from. */
struct verdict
{
  ib_error_t first;
  const char *gate; /* "verify" when it is no gate's */
};

/* docs/imgverify.md: "when several checks fail, the code is that of the first in the
 * order integrity, provenance, symbols, kernels, smoke"; a failure that kept the checks
 * from running at all (I/O, a reference that does not resolve) before them. */
static int
rank (int class)
{
  switch (class)
    {
    case IB_EINTEGRITY: return 1;
    case IB_EPROVENANCE: return 2;
    case IB_ESYMBOLS: return 3;
    case IB_EKERNELS: return 4;
    case IB_ESMOKE: return 5;
    default: return 0;
    }
}

static void
keep (struct verdict *v, ib_error_t *e, const char *gate)
{
  if (*e == NULL)
    return;
  if (v->first == NULL || rank ((*e)->class) < rank (v->first->class))
    {
      ib_error_release (&v->first);
      v->first = steal_pointer (e);
      v->gate = gate;
    }
  ib_error_release (e);
}

static int
parse_gates (const char *list, bool want[N_GATES], ib_error_t *err)
{
  memset (want, 0, N_GATES * sizeof (*want));
  if (strcmp (list, "none") == 0)
    return 0;
  cleanup_free char *copy = ib_xstrdup (list);
  char *save = NULL;
  for (char *t = strtok_r (copy, ",", &save); t; t = strtok_r (NULL, ",", &save))
    {
      size_t i = 0;
      while (i < N_GATES && strcmp (gate_names[i].name, t) != 0)
        i++;
      if (i == N_GATES)
        return ib_error (err, IB_EUSAGE,
                         "--require-gates: `%s` is not a gate (integrity, provenance, symbols, native, kernels, smoke, "
                         "toolchains, driver, ptx, jit-budget, recipe; or none)",
                         t);
      want[i] = true;
    }
  return 0;
}

int
ib_verify_parse_gates (const char *list, ib_error_t *err)
{
  bool want[N_GATES];
  return parse_gates (list, want, err);
}

/* The default for an image built by imgbuild: the symbol and kernel gates
 * that ran in a recorded build (a recorded pass of a definition that has
 * the gate's section; older records said "pass" for gates with nothing to
 * check).  Not the smoke test, which needs GPUs: --smoke asks for it. */
static void
recorded_gates (cJSON **records, size_t n, bool want[N_GATES])
{
  memset (want, 0, N_GATES * sizeof (*want));
  for (size_t i = 0; i < n; i++)
    {
      const cJSON *text = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (records[i], "definition"),
                                                            "gates");
      const cJSON *g;
      cJSON_ArrayForEach (g, cJSON_GetObjectItemCaseSensitive (records[i], "gates"))
      {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive (g, "name");
        const cJSON *status = cJSON_GetObjectItemCaseSensitive (g, "status");
        if (!cJSON_IsString (name) || !cJSON_IsString (status) || strcmp (status->valuestring, "pass") != 0
            || !cJSON_IsString (text))
          continue;
        for (size_t k = 2; k <= 4; k++) /* symbols, native, kernels */
          {
            cleanup_free char *section = ib_xasprintf ("[%s]", gate_names[k].name);
            want[k] |= strcmp (name->valuestring, gate_names[k].name) == 0 && strstr (text->valuestring, section);
          }
      }
    }
}

/* One definition to check: its gate sections, the record it came from. */
struct checked
{
  struct ib_definition *def;
  const cJSON *record; /* NULL: none recorded for this definition */
  char *file;          /* rows and problems name it so */
  char *name;          /* messages name it so */
};

static void
checked_free (struct checked *cs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      ib_definition_free (cs[i].def);
      free (cs[i].file);
      free (cs[i].name);
    }
  free (cs);
}

/* --definition: that one, with its record if the image has one; else each
 * recorded definition. */
static int
definitions_to_check (const struct ib_verify_image_options *o, cJSON **records, size_t n_records,
                      struct checked **out, size_t *n, ib_error_t *err)
{
  *out = ib_xcalloc (n_records + 1, sizeof (**out));
  *n = 0;
  if (o->definition)
    {
      struct checked *c = &(*out)[0];
      if (ib_definition_load (o->definition, &c->def, err) < 0)
        return -1;
      *n = 1;
      char abs[PATH_MAX];
      c->file = ib_xstrdup (realpath (c->def->file, abs) ? abs : c->def->file);
      c->name = ib_xstrdup (c->file);
      for (size_t i = 0; i < n_records && c->record == NULL; i++)
        if (strcmp (ib_provenance_definition (records[i]), c->file) == 0)
          c->record = records[i];
      return 0;
    }
  for (size_t i = 0; i < n_records; i++)
    {
      struct checked *c = &(*out)[i];
      const char *file = ib_provenance_definition (records[i]);
      const cJSON *text = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (records[i], "definition"),
                                                            "gates");
      c->record = records[i];
      c->file = ib_xstrdup (*file ? file : "(a record without a definition file)");
      c->name = ib_xasprintf ("the recorded definition %s", c->file);
      (*n)++;
      if (ib_definition_from_gate_text (cJSON_IsString (text) ? text->valuestring : "", &c->def, err) < 0)
        return ib_error_wrap (err, "%s", c->name);
    }
  return 0;
}

/* The overlay files and prebaked outputs that a record lists, against the
 * digests of the image's files; returns how many it compared. */
static size_t
check_record (const cJSON *doc, const struct ib_fsview *view, struct ib_gate_sink *k)
{
  const cJSON *lists[2] = { cJSON_GetObjectItemCaseSensitive (doc, "files"),
                            cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (doc, "prebake"),
                                                              "outputs") };
  size_t n = 0;
  for (int l = 0; l < 2; l++)
    {
      const cJSON *f;
      cJSON_ArrayForEach (f, lists[l])
      {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive (f, "target");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive (f, "sha256");
        if (!cJSON_IsString (t) || !cJSON_IsString (h) || t->valuestring[0] != '/')
          continue;
        n++;
        const struct ib_fs_entry *e = ib_fsview_lookup (view, t->valuestring + 1);
        if (e == NULL)
          ib_problemf (ib_gate_sink_problem, k, true, "%s is missing from the image (its provenance lists it)",
                       t->valuestring);
        else if (strcmp (e->digest, h->valuestring) != 0)
          ib_problemf (ib_gate_sink_problem, k, true, "%s has sha256 %s, its provenance says %s (layer %zu)",
                       t->valuestring, e->digest, h->valuestring, (size_t) e->layer);
      }
    }
  return n;
}

/* The definition's sources against the image's files. */
static size_t
check_sources (const struct ib_definition *d, const struct ib_fsview *view, struct ib_gate_sink *k)
{
  size_t n = 0;
  for (size_t i = 0; i < d->n_items; i++)
    {
      const struct ib_copy_item *it = &d->items[i];
      cleanup_free char *target = ib_copy_item_target (it);
      ib_digest want;
      if (it->type != IB_ENTRY_FILE || target == NULL || ib_sha256_file (it->source, &want, NULL, NULL) < 0)
        continue;
      n++;
      const struct ib_fs_entry *e = ib_fsview_lookup (view, target + 1);
      if (e == NULL)
        ib_problemf (ib_gate_sink_problem, k, true, "%s: %s is missing from the image", it->origin, target);
      else if (strcmp (e->digest, ib_digest_hex (want.s)) != 0)
        ib_problemf (ib_gate_sink_problem, k, true, "%s: %s in the image (layer %d) differs from its source %s",
                     it->origin, target, e->layer, it->source);
    }
  return n;
}

/* With --allow-unsafe-base, how many of the image's layers are its base's:
 * those below the lowest overlay layer its provenance records name (a
 * record's claim, read before its blobs are checked: it can only turn the
 * base's hostile entries into warnings, which the option asks for), all of
 * them when it has no record (imgverify of a base itself). */
static size_t
base_layers (struct ib_build *b, const struct ib_verify_image_options *o)
{
  if (!o->allow_unsafe_base)
    return 0;
  cJSON **records = NULL;
  size_t n = 0, below = b->image->n_layers;
  ib_error_t e = NULL;
  if (ib_provenance_read_all (b->store, b->image, &records, &n, &e) < 0)
    {
      ib_report_note (b->report, "--allow-unsafe-base: no provenance to tell the base's layers (%s): every layer's "
                      "hostile entries are errors", e->msg);
      ib_error_release (&e);
      return 0;
    }
  for (size_t i = 0; i < n; i++)
    {
      const cJSON *first = cJSON_GetObjectItemCaseSensitive (records[i], "overlay_layer");
      size_t l = cJSON_IsNumber (first) && first->valuedouble >= 0 ? (size_t) first->valuedouble : 0;
      below = l < below ? l : below;
    }
  ib_provenance_free (records, n);
  ib_report_note (b->report, "--allow-unsafe-base: hostile entries of the first %zu layer(s) (the base's: %s) are warnings",
                  below, n ? "as the provenance records" : "the image has no provenance record");
  return below;
}

static void
check_integrity (struct ib_build *b, const struct ib_verify_image_options *o, struct verdict *v)
{
  struct ib_gate_sink k = { b->report, "integrity", NULL, 0 };
  struct ib_verify_stats st = { 0 };
  ib_error_t e = NULL;
  size_t errors = ib_report_errors (b->report, "integrity");
  double t0 = ib_now ();
  struct ib_verify_how how
      = { .lenient_layers = base_layers (b, o), .strict = o->strict_base, .jobs = o->jobs, .full = o->full };
  int r = ib_verify_image (b->store, b->image, &how, b->report, ib_gate_sink_problem, &k, &st, &e);
  if (ib_gate_sink_finish (&k, IB_EINTEGRITY, r < 0 ? NULL : &e) < 0)
    r = -1;
  /* Says how each layer was checked: a layer only hashed is never
   * reported as read through. */
  cleanup_free char *detail = ib_xasprintf ("%zu blobs, %llu bytes; %zu layer(s) read through, %zu hashed and known "
                                            "from an earlier read, %zu read where they are by this run's file-list "
                                            "pass (--full reads them)",
                                            st.blobs, st.bytes, st.layers_read, st.layers_known - st.layers_in_pass,
                                            st.layers_in_pass);
  cJSON *in = cJSON_CreateObject ();
  ib_report_privileged (b->report, in, "image", (const char *const *) st.privileged, st.n_privileged);
  ib_verify_stats_clear (&st);
  ib_gate_row (b, "integrity", r, ib_now () - t0, errors, detail, e);
  cJSON_AddItemToObject (ib_report_json (b->report), "integrity", in);
  cJSON_AddNumberToObject (in, "blobs", (double) st.blobs);
  cJSON_AddNumberToObject (in, "bytes", (double) st.bytes);
  cJSON_AddNumberToObject (in, "bad", (double) st.bad);
  cJSON_AddNumberToObject (in, "layers_read", (double) st.layers_read);
  cJSON_AddNumberToObject (in, "layers_known", (double) st.layers_known);
  cJSON_AddNumberToObject (in, "layers_in_pass", (double) st.layers_in_pass);
  keep (v, &e, "integrity");
}

static bool
listed (const struct ib_descriptor *arts, size_t n, const char *digest)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (arts[i].digest.s, digest) == 0)
      return true;
  return false;
}

/* One signature artifact ART (sign.h): about this image, over an
 * attestation the image carries (ARTS, the referrers), and with
 * --verify-signature-with, verified: *OK.  Problems go to K. */
static void
check_signature (struct ib_build *b, const struct ib_verify_image_options *o, const struct ib_descriptor *art,
                 const struct ib_descriptor *arts, size_t n_arts, struct ib_gate_sink *k, bool *ok, cJSON *j)
{
  struct ib_signature sig;
  ib_error_t e = NULL;
  const char *img = b->image->manifest.digest.s;
  *ok = false;
  if (ib_signature_read (b->store, art, &sig, &e) < 0)
    {
      ib_gate_sink_problem (k, true, e->msg);
      ib_error_release (&e);
      return;
    }
  if (sig.attestation)
    cJSON_AddStringToObject (j, "attestation", sig.attestation);
  if (strcmp (sig.subject, img) != 0 || strcmp (sig.image, img) != 0)
    ib_problemf (ib_gate_sink_problem, k, true, "signature %s signs image %s, not %s", art->digest.s, sig.image, img);
  else if (sig.attestation && !listed (arts, n_arts, sig.attestation))
    ib_problemf (ib_gate_sink_problem, k, true,
                 "signature %s signs the attestations %s, which the image does not carry: its attestations "
                 "were changed after signing",
                 art->digest.s, sig.attestation);
  else if (o->verify_signature_with && ib_signature_verify (&sig, o->verify_signature_with, b->name, ok, &e) < 0)
    {
      ib_gate_sink_problem (k, true, e->msg);
      ib_error_release (&e);
    }
  else if (o->verify_signature_with && !*ok)
    ib_problemf (ib_gate_sink_problem, k, false, "signature %s does not verify with `%s`", art->digest.s,
                 o->verify_signature_with);
  if (o->verify_signature_with)
    cJSON_AddBoolToObject (j, "verified", *ok);
  ib_signature_clear (&sig);
}

/* The signature gate: every signature listed about the image is checked
 * (check_signature); with --verify-signature-with at least one must verify,
 * without it the gate says how many there are and that it verified none. */
static void
check_signatures (struct ib_build *b, const struct ib_verify_image_options *o, struct verdict *v)
{
  struct ib_gate_sink k = { b->report, "signature", NULL, 0 };
  size_t errors = ib_report_errors (b->report, "signature");
  double t0 = ib_now ();
  ib_error_t e = NULL;
  struct ib_descriptor *arts = NULL;
  size_t n_arts = 0, n_sigs = 0, n_ok = 0;
  cJSON *list = cJSON_AddArrayToObject (ib_report_json (b->report), "signatures");
  int r = ib_store_find_referrers (b->store, &b->image->manifest.digest, &arts, &n_arts, &e);
  for (size_t i = 0; r == 0 && i < n_arts; i++)
    {
      cleanup_free char *type = ib_store_artifact_type (b->store, &arts[i].digest);
      if (strcmp (type, IB_MT_COSIGN_SIGNATURE) != 0)
        continue;
      bool ok;
      cJSON *j = cJSON_CreateObject ();
      cJSON_AddStringToObject (j, "artifact", arts[i].digest.s);
      check_signature (b, o, &arts[i], arts, n_arts, &k, &ok, j);
      cJSON_AddItemToArray (list, j);
      n_sigs++;
      n_ok += ok;
    }
  ib_descriptors_free (arts, n_arts);
  if (r == 0 && o->verify_signature_with && n_ok == 0 && k.errors == 0)
    ib_problemf (ib_gate_sink_problem, &k, true, "no signature of %s verifies with `%s` (%zu signature%s)",
                 b->image->manifest.digest.s, o->verify_signature_with, n_sigs, n_sigs == 1 ? "" : "s");
  if (r == 0 && ib_gate_sink_finish (&k, IB_EINTEGRITY, &e) < 0)
    r = -1;
  if (r == 0 && !o->verify_signature_with)
    r = ib_gate_skip (b, "%zu signature%s, none verified: no --verify-signature-with", n_sigs, n_sigs == 1 ? "" : "s");
  cleanup_free char *detail = ib_xasprintf ("%zu of %zu signature%s verified with `%s`", n_ok, n_sigs,
                                            n_sigs == 1 ? "" : "s", o->verify_signature_with ? o->verify_signature_with : "");
  ib_gate_row (b, "signature", r, ib_now () - t0, errors, detail, e);
  keep (v, &e, "signature");
}

/* The provenance gate of one definition: its record's files, and with
 * --definition its sources, against the image. */
static void
check_provenance (struct ib_build *b, const struct checked *c, bool sources, struct verdict *v)
{
  struct ib_gate_sink k = { b->report, "provenance", NULL, 0 };
  size_t errors = ib_report_errors (b->report, "provenance");
  ib_error_t e = NULL;
  double t0 = ib_now ();
  const struct ib_fsview *view;
  size_t n = 0;
  int r = ib_build_image_view (b, &view, &e);
  if (r == 0)
    {
      n += c->record ? check_record (c->record, view, &k) : 0;
      n += sources ? check_sources (c->def, view, &k) : 0;
      r = ib_gate_sink_finish (&k, IB_EINTEGRITY, &e);
    }
  if (r == 0 && n == 0)
    r = c->record ? ib_gate_skip (b, "the record of %s lists no file", c->file)
                  : ib_gate_skip (b, "no provenance recorded for %s, and it copies no file", c->file);
  const char *detail = c->record && sources ? "recorded files and kernels match; definition sources match"
                       : c->record          ? "recorded files and kernels match"
                                            : "definition sources match";
  ib_gate_row (b, "provenance", r, ib_now () - t0, errors, detail, e);
  keep (v, &e, "provenance");
}

/* What the record says the smoke test proved at build time: which kernels
 * were loaded and run on which GPU, and NCCL's transports. */
static void
show_recorded_smoke (struct ib_build *b, const cJSON *record)
{
  const cJSON *sm = cJSON_GetObjectItemCaseSensitive (record, "smoke");
  const cJSON *st = cJSON_GetObjectItemCaseSensitive (sm, "status");
  if (!cJSON_IsString (st))
    return;
  ib_report_note (b->report, "recorded smoke test: %s", st->valuestring);
  const cJSON *k;
  cJSON_ArrayForEach (k, cJSON_GetObjectItemCaseSensitive (sm, "kernels"))
  {
    const char *kernel = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "kernel"));
    const char *status = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "status"));
    const char *arch = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "arch"));
    const char *gpu = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "gpu_name"));
    const char *cc = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "compute_capability"));
    const char *launch = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (k, "launch"));
    ib_report_note (b->report, "  kernel %s: %s (%s, %s)%s%s%s", kernel ? kernel : "?", status ? status : "?",
                    gpu ? gpu : "GPU", cc ? cc : "?", arch ? ", " : "", arch ? arch : "",
                    launch && strncmp (launch, "launched", 8) == 0 ? ", launched" : "");
  }
  const cJSON *nccl = cJSON_GetObjectItemCaseSensitive (sm, "nccl");
  const cJSON *p;
  cJSON_ArrayForEach (p, cJSON_GetObjectItemCaseSensitive (nccl, "pairs"))
  ib_report_note (b->report, "  NCCL %s %s -> %s via %s",
                  cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (nccl, "version")),
                  cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (p, "from")),
                  cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (p, "to")),
                  cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (p, "transport")));
}

static void
check_definition (struct ib_build *b, const struct ib_verify_image_options *o, const struct checked *c,
                  size_t i, size_t n, struct verdict *v)
{
  ib_report_set_definition (b->report, c->file);
  ib_report_note (b->report, "definition %zu of %zu: %s (%s)", i + 1, n, c->file,
                  c->record ? "recorded" : "not recorded for this image: given by --definition");
  /* Its sources are those of the image's platform. */
  ib_error_t pe = NULL;
  if (ib_definition_select_platform (c->def, b->image->config_json, NULL, &pe) < 0)
    keep (v, &pe, "provenance");
  check_provenance (b, c, o->definition != NULL, v);
  show_recorded_smoke (b, c->record);
  ib_report_add_requirements (b->report, c->def, o->definition ? NULL : c->file);
  b->def = c->def;
  b->definition_name = c->name;
  size_t n_targets = 0;
  char **targets = c->record && !o->definition ? ib_provenance_targets (c->record, &n_targets) : NULL;
  b->recorded_targets = targets;
  b->n_recorded_targets = n_targets;
  const cJSON *ol = cJSON_GetObjectItemCaseSensitive (c->record, "overlay_layer");
  size_t own = 1 + (c->def->n_prebake ? 1 : 0);
  b->first_overlay_layer = cJSON_IsNumber (ol)             ? (size_t) ol->valuedouble
                           : b->image->n_layers > own ? b->image->n_layers - own
                                                      : 0;
  b->failed_gate = NULL;
  ib_error_t e = NULL;
  if (ib_build_run_gates (b, IB_PHASE_IMAGE, &e) < 0)
    keep (v, &e, b->failed_gate ? b->failed_gate : "verify");
  b->def = NULL;
  b->definition_name = NULL;
  b->recorded_targets = NULL;
  b->n_recorded_targets = 0;
  for (size_t t = 0; t < n_targets; t++)
    free (targets[t]);
  free (targets);
}

/* The created_by of the config's last history entry when imgbuild made
 * the image's top ("imgbuild: COPY 23 files"), else NULL. */
static const char *
built_by_imgbuild (const struct ib_image *img)
{
  const cJSON *h = cJSON_GetObjectItemCaseSensitive (img->config_json, "history");
  const cJSON *last = cJSON_GetArrayItem (h, cJSON_GetArraySize (h) - 1);
  const char *by = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (last, "created_by"));
  return by && strncmp (by, "imgbuild: ", 10) == 0 ? by : NULL;
}

/* An image whose config says imgbuild built it carries its attestations
 * wherever it is copied with them (a registry's referrers tag, an OCI
 * layout, a docker-archive): with none, its provenance is missing, unless
 * the user asks for less (--require-gates without provenance, or
 * --definition) or the image is a Docker Engine's, which cannot hold one. */
static void
check_attested (struct ib_build *b, const struct ib_verify_image_options *o, const char *text, size_t n_records,
                struct verdict *v)
{
  bool want[N_GATES];
  const char *by = built_by_imgbuild (b->image);
  if (n_records || o->definition || by == NULL
      || (o->require_gates && (parse_gates (o->require_gates, want, NULL) < 0 || !want[GATE_PROVENANCE])))
    return;
  struct ib_ref ref;
  if (ib_ref_parse (text, &ref, NULL) < 0)
    return;
  bool daemon = ref.kind == IB_REF_DOCKER_DAEMON;
  ib_ref_clear (&ref);
  if (daemon)
    return;
  const char *hex = ib_digest_hex (b->image->manifest.digest.s);
  ib_error_t e = NULL;
  ib_error (&e, IB_EPROVENANCE,
            "provenance missing: the image's config says imgbuild built it (history `%s`), and %s carries no "
            "attestation about %s: copy its referrers tag sha256-%s with it, or pass --require-gates without "
            "provenance to verify it without one",
            by, text, b->image->manifest.digest.s, hex);
  ib_report_problem (b->report, "provenance", true, "%s", e->msg);
  keep (v, &e, "provenance");
}

/* No record and no --definition: nothing but integrity can be checked,
 * and the table says so. */
static void
skip_unchecked (struct ib_build *b)
{
  const char *why = "no provenance recorded for this image, and no --definition";
  size_t n;
  const struct ib_gate *g = ib_gates (&n);
  ib_report_gate (b->report, "provenance", IB_GATE_SKIP, 0, why);
  for (size_t i = 0; i < n; i++)
    if (g[i].phase == IB_PHASE_IMAGE)
      ib_report_gate (b->report, g[i].name, IB_GATE_SKIP, 0, why);
}

/* Each gate in WANT must have run (pass or fail) for at least one of the
 * definitions checked. */
static void
check_required (struct ib_build *b, const bool want[N_GATES], bool by_default, struct verdict *v)
{
  cJSON *doc = ib_report_json (b->report);
  cJSON *list = cJSON_AddArrayToObject (doc, "required_gates");
  ib_report_set_definition (b->report, NULL);
  for (size_t i = 0; i < N_GATES; i++)
    {
      if (!want[i])
        continue;
      cJSON_AddItemToArray (list, cJSON_CreateString (gate_names[i].name));
      if (ib_report_gate_ran (b->report, gate_names[i].name))
        continue;
      /* Why it did not run: the reasons of its skipped rows. */
      cleanup_free char *why = ib_xstrdup ("");
      const cJSON *g;
      cJSON_ArrayForEach (g, cJSON_GetObjectItemCaseSensitive (doc, "gates"))
      {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive (g, "name");
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive (g, "reason");
        if (cJSON_IsString (name) && strcmp (name->valuestring, gate_names[i].name) == 0 && cJSON_IsString (reason))
          {
            char *more = ib_xasprintf ("%s%s%s", why, *why ? "; " : "", reason->valuestring);
            free (why);
            why = more;
          }
      }
      ib_error_t e = NULL;
      ib_error (&e, gate_names[i].class, "gate %s did not run, and %s: %s", gate_names[i].name,
                by_default ? "a recorded build of this image ran it (--require-gates lowers the bar)"
                           : "--require-gates names it",
                *why ? why : "no definition was checked");
      ib_report_problem (b->report, gate_names[i].name, true, "%s", e->msg);
      keep (v, &e, gate_names[i].name);
    }
}

static void
list_definitions (struct ib_build *b, const struct checked *cs, size_t n)
{
  cJSON *list = cJSON_AddArrayToObject (ib_report_json (b->report), "definitions");
  for (size_t i = 0; i < n; i++)
    {
      cJSON *d = cJSON_CreateObject ();
      cJSON_AddStringToObject (d, "file", cs[i].file);
      cJSON_AddBoolToObject (d, "recorded", cs[i].record != NULL);
      const cJSON *image = cJSON_GetObjectItemCaseSensitive (cs[i].record, "image");
      if (cJSON_IsString (image))
        cJSON_AddStringToObject (d, "image", image->valuestring);
      cJSON_AddItemToArray (list, d);
    }
}

static int
finish (struct ib_build *b, const struct ib_verify_image_options *o, struct verdict *v)
{
  cJSON *doc = ib_report_json (b->report);
  int code = v->first ? (v->first->class ? v->first->class : IB_EGATE) : 0;
  cJSON_AddStringToObject (doc, "status", code ? "fail" : "pass");
  cJSON_AddNumberToObject (doc, "exit_code", code);
  if (v->first)
    {
      ib_report_set_definition (b->report, NULL);
      cJSON_AddStringToObject (doc, "error", v->first->msg);
      ib_report_stopped (b->report, v->gate, v->first->msg);
    }
  ib_report_resources (b->report);
  if (o->json)
    {
      char *text = cJSON_Print (doc);
      puts (text);
      free (text);
    }
  ib_error_t werr = NULL;
  if (ib_report_write_files (b->report, "imgverify", o->reports, o->n_reports, &werr) < 0)
    {
      /* The verdict stands; a report that cannot be written is an
       * environment failure only when everything passed. */
      if (v->first == NULL)
        return ib_error_report ("imgverify", &werr);
      fprintf (stderr, "imgverify: warning: %s\n", werr->msg);
      ib_error_release (&werr);
    }
  if (v->first)
    ib_error_report ("imgverify", &v->first);
  return code;
}

/* A Docker Engine's image (docker-daemon:NAME:TAG, on this machine or a
 * node's with --host) has our image ID: the config digest of the store's
 * NAME:TAG, which a pipeline checks on every node before a rollout.  No
 * comparison when the store has no NAME:TAG. */
static void
check_image_id (struct ib_build *b, const struct ib_verify_image_options *o, const char *text, struct verdict *v)
{
  struct ib_ref ref;
  if (ib_ref_parse (text, &ref, NULL) < 0)
    return;
  struct ib_descriptor ours = { 0 };
  struct ib_image *img = NULL;
  ib_error_t e = NULL;
  if (ref.kind == IB_REF_DOCKER_DAEMON && ib_store_resolve (b->store, ref.location, &ours, &e) == 0
      && ib_image_load (b->store, &ours, NULL, &img, &e) == 0)
    {
      cJSON *id = cJSON_AddObjectToObject (ib_report_json (b->report), "image_id");
      const char *host = o->remote.docker_host ? o->remote.docker_host : "local";
      cJSON_AddStringToObject (id, "host", host);
      cJSON_AddStringToObject (id, "daemon", b->image->config.digest.s);
      cJSON_AddStringToObject (id, "ours", img->config.digest.s);
      bool same = strcmp (b->image->config.digest.s, img->config.digest.s) == 0;
      cJSON_AddBoolToObject (id, "match", same);
      if (!same)
        {
          ib_report_problem (b->report, "integrity", true, "%s at %s is image %s, not ours (%s in the store is %s)",
                             text, host, b->image->config.digest.s, ref.location, img->config.digest.s);
          ib_error (&e, IB_EINTEGRITY, "%s at %s is not our image %s", text, host, img->config.digest.s);
          keep (v, &e, "integrity");
        }
    }
  ib_error_release (&e);
  ib_image_free (img);
  ib_descriptor_clear (&ours);
  ib_ref_clear (&ref);
}

static int
pull (struct ib_build *b, const struct ib_verify_image_options *o, const char *ref, ib_error_t *err)
{
  cleanup_free char *root = ib_store_default_path (o->store);
  struct ib_transfer_report progress;
  struct ib_remote_options remote = o->remote;
  ib_report_transfers (b->report, &progress);
  remote.progress = &progress;
  /* REF's own bytes: a layout or archive in place, a registry's as served. */
  if (ib_image_open_in_place (root, ref, NULL, &remote, &b->store, &b->image, err) < 0)
    return -1;
  cJSON_AddStringToObject (ib_report_json (b->report), "manifest", b->image->manifest.digest.s);
  return 0;
}

/* What read_layers_once registered its indexers for: they borrow from
 * the definition until the store is freed. */
struct once
{
  struct ib_build_indexers ix;
  cJSON **records;
  size_t n_records, n_cs;
  struct checked *cs;
};

/* One read of each layer for every gate (issue 46).  A store that never
 * read the image's layers (a CI step on another machine) read them once
 * for the integrity check, then again for the file list, the symbol
 * gate's interpreter files, the native gate's objects and the GPU code:
 * 91 s over the CUDA base.  Here, before the integrity check, the image's
 * file list is made with the indexers that the first definition's gates
 * read (builder/indexers.h), in the one pass a build makes over its base;
 * that pass checks each layer's blob digest and diff_id and keeps a
 * read-through record, so the integrity check then hashes the blobs only,
 * and the gates find their records.  What fails in this pass is left to
 * the checks after it, which read again and say what is wrong as they
 * always did: the verdicts do not depend on it.  (The attestations are
 * read here and again after the integrity check, as before: a few small
 * blobs, so that their verdicts stay where they were.) */
static void
read_layers_once (struct ib_build *b, const struct ib_verify_image_options *o, struct once *w)
{
  ib_error_t e = NULL;
  if (ib_provenance_read_all (b->store, b->image, &w->records, &w->n_records, &e) == 0
      && definitions_to_check (o, w->records, w->n_records, &w->cs, &w->n_cs, &e) == 0 && w->n_cs > 0)
    {
      ib_build_indexers_add (&w->ix, w->cs[0].def, b->store);
      const struct ib_fsview *view;
      if (ib_build_image_view (b, &view, &e) < 0)
        {
          ib_fsview_free (b->image_view);
          b->image_view = NULL;
        }
    }
  ib_error_release (&e);
}

static void
once_clear (struct once *w)
{
  ib_build_indexers_clear (&w->ix);
  checked_free (w->cs, w->n_cs);
  ib_provenance_free (w->records, w->n_records);
}

int
ib_verify_image_ref (const char *ref, const struct ib_verify_image_options *o)
{
  ib_error_t err = NULL;
  bool want[N_GATES];
  if (o->require_gates && parse_gates (o->require_gates, want, &err) < 0)
    return ib_error_report ("imgverify", &err);
  struct ib_build_options bo = { .json = o->json,
                                 .quiet = o->json,
                                 .smoke = o->smoke ? IB_SMOKE_REQUIRED : IB_SMOKE_OFF,
                                 .remote = o->remote,
                                 .cluster = o->cluster };
  struct ib_build b = { .opt = &bo, .name = ref, .keep_going = true };
  b.report = ib_report_new ("imgverify", "imgverify.report/v1", o->json);
  cJSON_AddStringToObject (ib_report_json (b.report), "ref", ref);
  struct verdict v = { 0 };
  cJSON **records = NULL;
  size_t n_records = 0, n_cs = 0;
  struct checked *cs = NULL;
  int r = pull (&b, o, ref, &err);
  struct once once = { 0 };
  if (r == 0)
    read_layers_once (&b, o, &once);
  if (r == 0)
    check_integrity (&b, o, &v);
  if (r == 0)
    check_image_id (&b, o, ref, &v);
  bool gates = r == 0 && v.first == NULL;
  if (gates)
    check_signatures (&b, o, &v);
  if (gates && ib_provenance_read_all (b.store, b.image, &records, &n_records, &err) < 0)
    {
      ib_report_problem (b.report, "provenance", true, "%s", err->msg);
      keep (&v, &err, "provenance");
      gates = false;
    }
  if (gates)
    check_attested (&b, o, ref, n_records, &v);
  if (gates && definitions_to_check (o, records, n_records, &cs, &n_cs, &err) < 0)
    r = -1;
  if (gates && r == 0)
    {
      for (size_t i = 0; i < n_cs; i++)
        check_definition (&b, o, &cs[i], i, n_cs, &v);
      if (n_cs == 0)
        skip_unchecked (&b);
      list_definitions (&b, cs, n_cs);
      if (o->require_gates == NULL)
        recorded_gates (records, n_records, want);
      check_required (&b, want, o->require_gates == NULL, &v);
    }
  if (r < 0)
    keep (&v, &err, "verify");
  int code = finish (&b, o, &v);
  checked_free (cs, n_cs);
  ib_provenance_free (records, n_records);
  ib_fsview_free (b.image_view);
  ib_image_free (b.image);
  ib_store_free (b.store);
  once_clear (&once);
  ib_report_free (b.report);
  return code;
}
