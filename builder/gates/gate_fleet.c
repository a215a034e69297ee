/* The gates of [target]: will the candidate image run on the fleet.  Each
 * is a row of the gate table; without a [target] they are skipped, and so
 * is each one that found nothing to judge (an image without CUDA, a
 * required kernel without PTX): a pass is only for a check that ran. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fleet.h"
#include "kernels/jitbudget.h"
#include "kernels/kindex.h"
#include "layers/store/digest.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/gates/gates.h"

/* A check: 0 when it ran (each thing it judged counted into sc->checked),
 * IB_GATE_SKIPPED when it found nothing to judge (its reason given with
 * ib_gate_skip), -1 on error. */
typedef int (*fleet_check) (struct ib_build *b, const struct ib_fleet_scope *sc, ib_error_t *err);

static int
fleet_gate (struct ib_build *b, const char *name, fleet_check check, const char *nothing, ib_error_t *err)
{
  if (!b->def->target.present)
    return ib_gate_skip (b, "no [target] in %s", ib_gate_definition_name (b));
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  struct ib_gate_sink k = { b->report, name, NULL, 0 };
  size_t checked = 0;
  struct ib_fleet_scope sc
      = { b->store, b->image, view, &b->def->target, ib_gate_sink_problem, &k, NULL, NULL, &checked };
  int r = check (b, &sc, err);
  if (r < 0)
    {
      ib_gate_sink_finish (&k, IB_EKERNELS, NULL);
      return -1;
    }
  /* An error (another platform) fails the gate whatever it judged. */
  if (k.errors == 0 && r == 0 && checked == 0 && nothing)
    r = ib_gate_skip (b, "%s", nothing);
  if (ib_gate_sink_finish (&k, IB_EKERNELS, err) < 0)
    return -1;
  return r;
}

/* The toolchains found also go into the JSON report: "toolchains":
 * [{"kind","path","cuda","note"}]; and a note says how their versions
 * were found: in a cold build, every record made by the file-list pass
 * and no layer read again (kernels/cudaver.h). */
static int
toolchains (struct ib_build *b, const struct ib_fleet_scope *sc, ib_error_t *err)
{
  struct ib_fleet_scope with = *sc;
  struct ib_fleet_reads reads = { 0, 0, 0 };
  with.details = cJSON_CreateArray ();
  with.reads = &reads;
  int r = ib_fleet_toolchains (&with, err);
  ib_report_note (b->report, "toolchains: CUDA versions of %zu files: %zu read in %zu layer passes, %zu cached",
                  reads.cached + reads.read, reads.read, reads.layer_passes, reads.cached);
  cJSON *doc = ib_report_json (b->report);
  cJSON_DeleteItemFromObjectCaseSensitive (doc, "toolchains");
  cJSON_AddItemToObject (doc, "toolchains", with.details);
  return r;
}

static int
driver (struct ib_build *b, const struct ib_fleet_scope *sc, ib_error_t *err)
{
  (void) b;
  return ib_fleet_driver (sc, err);
}

/* PTX of the required kernels: its .version must be one the declared
 * driver's JIT takes (else cudaErrorUnsupportedPtxVersion at first use). */
static int
ptx_versions (struct ib_build *b, const struct ib_fleet_scope *sc, ib_error_t *err)
{
  const struct ib_definition *d = b->def;
  if (d->n_kernel_required == 0)
    return ib_gate_skip (b, "no [kernels] requirement in %s: no required kernel whose PTX to check",
                         ib_gate_definition_name (b));
  size_t files_seen = 0;
  unsigned max = ib_driver_max_ptx (ib_target_driver (&d->target));
  char dv[32];
  ib_driver_version_str (ib_target_driver (&d->target), dv, sizeof (dv));
  for (size_t i = 0; i < d->n_kernel_required; i++)
    {
      const struct ib_requirement *req = &d->kernel_required[i];
      cleanup_free const struct ib_fs_entry **files = NULL;
      size_t n = ib_fsview_glob (sc->view, req->path, &files);
      struct ib_cuda_file **code = ib_xcalloc (n ? n : 1, sizeof (*code));
      int r = ib_kernels_inspect_entries (b->store, b->image, files, n, code, NULL, err);
      for (size_t f = 0; r == 0 && f < n; f++)
        for (size_t e = 0; e < code[f]->n; e++)
          {
            const struct ib_cuda_entry *x = &code[f]->e[e];
            unsigned v = x->ptx_major * 10 + x->ptx_minor;
            if (x->kind != IB_CUDA_PTX || x->relocatable)
              continue;
            for (size_t k = 0; k < req->n_names; k++)
              for (size_t y = 0; y < x->n_kernels; y++)
                if (ib_kernel_name_matches (req->names[k], x->kernels[y]))
                  {
                    (*sc->checked)++;
                    y = x->n_kernels;
                    if (v <= max)
                      continue;
                    char arch[32];
                    ib_cuda_entry_arch (x, arch, sizeof (arch));
                    ib_problemf (sc->fn, sc->data, true,
                                 "%s: kernel %s: %s PTX in /%s has .version %u.%u; the target's driver %s JITs "
                                 "PTX up to %u.%u (cudaErrorUnsupportedPtxVersion)",
                                 req->origin, req->names[k], arch, files[f]->path, x->ptx_major, x->ptx_minor, dv,
                                 max / 10, max % 10);
                  }
          }
      for (size_t f = 0; f < n; f++)
        ib_cuda_file_free (code[f]);
      free (code);
      files_seen += n;
      if (r < 0)
        return -1;
    }
  if (*sc->checked == 0)
    return ib_gate_skip (b, "the required kernels of %s have no PTX in the %zu file(s) [kernels] names: nothing for "
                            "the driver's JIT",
                         ib_gate_definition_name (b), files_seen);
  return 0;
}

/* The budget kept: its warnings are a function of the image's GPU-code
 * files (their paths and contents) and of the target alone, so they are
 * kept in the store's cache `jitbudget` under a digest of both, and a
 * build whose overlay leaves the base's GPU files alone (Python files, a
 * rebuild) reads no record: the two walks over CUDA 13.0's lib64 were
 * 2.3 s of every warm build.  The file is the counts on a line (files,
 * kernels that would JIT, kernels without code, files with GPU code), then one
 * warning a line; a warning with a newline in it (a hostile path) is not
 * kept, and the budget is walked again next time. */
#define BUDGET_MEMO "imgbuild jit-budget 2"

static char *
budget_memo_path (struct ib_store *s, const struct ib_target *t, const struct ib_fs_entry *const *files, size_t n)
{
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "jitbudget", &dir, NULL) < 0)
    return NULL;
  char dv[32];
  ib_driver_version_str (ib_target_driver (t), dv, sizeof (dv));
  ib_sha256 *h = ib_sha256_new ();
  ib_sha256_update (h, BUDGET_MEMO, sizeof (BUDGET_MEMO));
  ib_sha256_update (h, IB_KERNELS_CACHE_MAGIC, sizeof (IB_KERNELS_CACHE_MAGIC));
  ib_sha256_update (h, dv, strlen (dv) + 1);
  size_t ng;
  const struct ib_compute_capability *g = ib_target_gpus (t, &ng);
  for (size_t i = 0; i < ng; i++)
    ib_sha256_update (h, &g[i], sizeof (g[i]));
  for (size_t i = 0; i < n; i++)
    {
      ib_sha256_update (h, files[i]->path, strlen (files[i]->path) + 1);
      ib_sha256_update (h, files[i]->digest, strlen (files[i]->digest) + 1);
    }
  ib_digest d;
  ib_sha256_final (h, &d);
  ib_sha256_free (h);
  return ib_path_join (dir, ib_digest_hex (d.s));
}

/* The summary line: the kernels that would JIT, with their PTX and what
 * compiling it would take (kernels/jitbudget.h says where the rate comes
 * from: the first request that needs them waits that long). */
static void
budget_note (struct ib_build *b, size_t n, size_t jit, uint64_t ptx, size_t none, const char *kept)
{
  cleanup_free char *cost = NULL;
  if (jit)
    cost = ib_xasprintf (" (%.1f MB of PTX: about %.0f core-seconds of ptxas at %.2f MB/s)", ptx / 1e6,
                         ib_jit_core_seconds (ptx), IB_JIT_PTX_BYTES_PER_CORE_SECOND / 1e6);
  ib_report_note (b->report, "jit-budget: %zu files, %zu kernels would JIT at first use%s, %zu have no code for the "
                  "target%s", n, jit, cost ? cost : "", none, kept);
}

/* The kept budget at PATH told as the walk would tell it; false when there
 * is none (or it does not parse).  *WITH_CODE: its files with GPU code. */
static bool
budget_memo_replay (struct ib_build *b, const struct ib_fleet_scope *sc, const char *path, size_t *with_code)
{
  cleanup_free char *text = NULL;
  size_t len, n, jit, none;
  unsigned long long ptx;
  int at = 0;
  if (path == NULL || ib_read_file (path, 64u << 20, &text, &len, NULL) < 0
      || sscanf (text, "%zu %zu %zu %zu %llu\n%n", &n, &jit, &none, with_code, &ptx, &at) != 5 || at == 0)
    return false;
  for (char *line = text + at, *nl; *line; line = nl + 1)
    {
      if ((nl = strchr (line, '\n')) == NULL)
        break;
      *nl = '\0';
      ib_problemf (sc->fn, sc->data, false, "%s", line);
    }
  if (*with_code)
    budget_note (b, n, jit, ptx, none, " (kept from a build with the same GPU files and target)");
  return true;
}

/* A warning of the walk: told, and written to the memo (MEMO NULL once a
 * warning cannot be kept). */
static void budget_warn (const struct ib_fleet_scope *sc, FILE **memo, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static void
budget_warn (const struct ib_fleet_scope *sc, FILE **memo, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *msg = NULL;
  if (vasprintf (&msg, fmt, ap) < 0)
    msg = NULL;
  va_end (ap);
  if (msg == NULL)
    return;
  ib_problemf (sc->fn, sc->data, false, "%s", msg);
  if (*memo && strchr (msg, '\n'))
    {
      fclose (*memo);
      *memo = NULL;
    }
  if (*memo)
    fprintf (*memo, "%s\n", msg);
}

/* A budget over files none of which has GPU code judged nothing. */
static int
budget_verdict (struct ib_build *b, size_t n, size_t with_code)
{
  if (with_code == 0)
    return ib_gate_skip (b, "none of the image's %zu shared objects, cubins and fatbins has GPU code", n);
  return 0;
}

/* Every shared object, cubin and fatbin of the image: what would JIT at
 * first use.  Warnings only; the required list is the kernel gate's. */
static int
jit_budget (struct ib_build *b, const struct ib_fleet_scope *sc, ib_error_t *err)
{
  cleanup_free const struct ib_fs_entry **files = NULL;
  size_t n = ib_kernels_glob_files (sc->view, NULL, 0, &files);
  if (n == 0)
    return ib_gate_skip (b, "no shared object, cubin or fatbin in the image: no GPU code to budget");
  cleanup_free char *memo_path = budget_memo_path (b->store, sc->target, files, n);
  size_t kept_with_code = 0;
  if (budget_memo_replay (b, sc, memo_path, &kept_with_code))
    return budget_verdict (b, n, kept_with_code);
  struct ib_jit_budget *jb = NULL;
  size_t with_code = 0;
  int r = ib_kernels_jit_budget (b->store, b->image, files, n, sc->target, &jb, &with_code, err);
  cleanup_free char *memo_text = NULL;
  size_t memo_len = 0;
  FILE *memo = jb && memo_path ? open_memstream (&memo_text, &memo_len) : NULL;
  size_t jit = 0, none = 0;
  uint64_t ptx = jb ? ib_jit_budget_ptx_bytes (jb) : 0;
  for (size_t i = 0; jb && i < jb->n; i++)
    {
      const struct ib_jit_file *f = &jb->f[i];
      if (f->jit)
        budget_warn (sc, &memo, "%s: %zu kernel%s JIT-compiled from PTX at first use (%llu bytes of PTX): %s%s", f->path,
                     f->jit, f->jit == 1 ? "" : "s", (unsigned long long) f->jit_ptx_bytes, f->jit_names[0],
                     f->jit > 1 ? ", ..." : "");
      if (f->none)
        budget_warn (sc, &memo, "%s: %zu kernel%s with neither SASS nor PTX for the target: %s%s", f->path, f->none,
                     f->none == 1 ? "" : "s", f->none_names[0], f->none > 1 ? ", ..." : "");
      if (f->ptx_too_new)
        budget_warn (sc, &memo, "%s: %zu PTX entr%s of .version %u.%u, newer than the driver's JIT takes (%u.%u)",
                     f->path, f->ptx_too_new, f->ptx_too_new == 1 ? "y" : "ies", f->newest_ptx / 10,
                     f->newest_ptx % 10, jb->driver_ptx / 10, jb->driver_ptx % 10);
      jit += f->jit;
      none += f->none;
    }
  if (jb && with_code)
    budget_note (b, n, jit, ptx, none, "");
  if (memo && fclose (memo) == 0)
    {
      /* The counts first: the warnings are already in the stream's text. */
      cleanup_free char *all = ib_xasprintf ("%zu %zu %zu %zu %llu\n%s", n, jit, none, with_code,
                                             (unsigned long long) ptx, memo_text ? memo_text : "");
      ib_write_cache_file (memo_path, all, strlen (all), NULL);
    }
  ib_jit_budget_free (jb);
  return r < 0 ? r : budget_verdict (b, n, with_code);
}

int
ib_gate_toolchains (struct ib_build *b, ib_error_t *err)
{
  return fleet_gate (b, "toolchains", toolchains,
                     "no CUDA toolchain in the image (ptxas, nvcc, nvdisasm, cuobjdump, NVRTC, nvJitLink) and no "
                     "TRITON_PTXAS_PATH, TRITON_CUOBJDUMP_PATH or CUDA_HOME in its Env",
                     err);
}

int
ib_gate_driver (struct ib_build *b, ib_error_t *err)
{
  return fleet_gate (b, "driver", driver,
                     "no CUDA runtime, NVRTC or nvJitLink with a version, no CUDA_VERSION, NVIDIA_REQUIRE_CUDA or "
                     "libcuda.so* in the image: nothing that asks anything of the driver",
                     err);
}

int
ib_gate_ptx (struct ib_build *b, ib_error_t *err)
{
  return fleet_gate (b, "ptx", ptx_versions, NULL, err);
}

int
ib_gate_jit_budget (struct ib_build *b, ib_error_t *err)
{
  return fleet_gate (b, "jit-budget", jit_budget, NULL, err);
}
