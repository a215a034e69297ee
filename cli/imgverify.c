/* imgverify: checks existing images and files.  So far: --python-symbols. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "builder/core/build.h"
#include "layers/runner/bundle.h"
#include "builder/gates/gates.h"
#include "builder/diff/imgdiff.h"
#include "builder/junit.h"
#include "builder/diff/triage.h"
#include "builder/attest/provenance.h"
#include "builder/cluster/smoke_cluster.h"
#include "builder/verify/node.h"
#include "builder/smoke/launch.h"
#include "builder/gates/recipes.h"
#include "builder/verify/verify.h"
#include "builder/verify/verify_image.h"
#include "builder/verify/verify_native.h"
#include "layers/view/fsview.h"
#include "cli/imgverify_gpu.h"
#include "kernels/kgate.h"
#include "symbol-check/link-check/linkgate.h"
#include "layers/transports/docker_client.h"
#include "layers/transports/refs.h"
#include <sys/stat.h>
#include "symbol-check/pysyms.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/heap.h"

#define MAX_SOURCE (64u << 20)

static const char usage[] =
    "Usage: imgverify [OPTIONS] REF\n"
    "       imgverify --store [--store-dir DIR]\n"
    "       imgverify --kernels PATH... | --kernels REF [GLOB...]\n"
    "       imgverify --jit-budget [--gpu CC] [--driver VERSION] PATH... | REF [GLOB...]\n"
    "       imgverify --native [--ldd] [--json] REF [GLOB...]\n"
    "       imgverify --python-symbols FILE...\n"
    "       imgverify --smoke --hosts H1,H2[:GPUS],... [--launcher mpirun|srun]\n"
    "                 [--dry-run] docker://REGISTRY/REPO@sha256:DIGEST\n"
    "       imgverify --run REF [--gpus] -- PROGRAM [ARG...]\n"
    "       imgverify --recipe RECIPE.toml [REF]\n"
    "       imgverify --diff A B\n"
    "       imgverify --triage DEFINITION --against REF [--their-base REF2]\n"
    "                 [--require-superset]\n"
    "\n"
    "Verify an existing image: every blob's digest and size, every layer's\n"
    "diff_id, the manifest/config chain and media types (layers in parallel,\n"
    "streaming); then, for each definition it was built from (each provenance\n"
    "record, or only --definition DIR), the recorded files against its content\n"
    "(overlay files' and prebaked kernels' digests) and the definition's gates\n"
    "(symbols, native, kernels; the GPU smoke test with --smoke).  A gate with nothing\n"
    "to check is a skip with its reason, never a pass.\n"
    "REF: NAME:TAG (the store), oci:DIR[:NAME:TAG], docker-archive:FILE,\n"
    "  docker-daemon:NAME:TAG, docker://HOST[:PORT]/REPO[:TAG|@DIGEST].\n"
    "What is checked is REF's own bytes, never the store's copy of the same\n"
    "digests: a layout and an archive are read where they are (streamed,\n"
    "nothing copied into the store or written to them; a compressed archive\n"
    "is inflated once into a temporary file); every blob of a registry image\n"
    "is fetched and hashed as the registry serves it, also those the store\n"
    "has.  Cached file lists and symbol/kernel results are used only for\n"
    "blobs hashed in this run.  A layer blob that this store has read\n"
    "through before (a build, a pull, an earlier imgverify) is hashed, and\n"
    "its diff_id and unsafe entries are those that read found: the\n"
    "digest says the bytes are the same (the report counts such layers).\n"
    "\n"
    "  --host HOST               the Docker Engine of docker-daemon:NAME:TAG, as\n"
    "                            DOCKER_HOST names it: ssh://[USER@]HOST[:PORT]\n"
    "                            (over `ssh HOST docker system dial-stdio`, your\n"
    "                            SSH configuration) or unix:///PATH.  Besides its\n"
    "                            integrity, the image's ID must be ours (the\n"
    "                            config digest of the store's NAME:TAG, when the\n"
    "                            store has it): check every node before a rollout\n"
    "  --definition DIR          check against this definition (its sources'\n"
    "                            digests, its gates)\n"
    "  --allow-unsafe-base       entries that escape the root or lie (exit code\n"
    "                            4: `..` or absolute names, links out, duplicates,\n"
    "                            ...) in the layers of the image's base are\n"
    "                            warnings: the layers below the first overlay\n"
    "                            layer its provenance records, every layer of an\n"
    "                            image with no record (a base itself).  As\n"
    "                            imgbuild --allow-unsafe-base.  Setuid/setgid\n"
    "                            files, device nodes, FIFOs and sockets need no\n"
    "                            flag: the report counts them\n"
    "  --strict-base             setuid/setgid files, device nodes, FIFOs and\n"
    "                            sockets in any layer are integrity errors\n"
    "  --require-gates LIST      gates that must run for at least one definition\n"
    "                            (integrity,provenance,symbols,native,kernels,\n"
    "                            smoke,toolchains,driver,ptx,jit-budget,recipe,\n"
    "                            or none); one that was skipped fails with its\n"
    "                            gate's exit code.  Default: the symbol and\n"
    "                            kernel gates that ran in a recorded build, and\n"
    "                            provenance for an image whose config says\n"
    "                            imgbuild built it (exit 10 when it carries no\n"
    "                            attestation; a docker-daemon: image excepted)\n"
    "  --smoke                   also run the smoke test on this machine's GPUs\n"
    "                            (fails where there are none)\n"
    "  --hosts H1,H2[:GPUS],...  with --smoke: run it across these nodes instead,\n"
    "                            one rank per GPU (GPUS per host, default 1), each\n"
    "                            rank in a container on its node (the same runtime\n"
    "                            and launch contract), started by --launcher; every\n"
    "                            node first pulls REF (docker://...@sha256:...) by\n"
    "                            digest into its own store.  Ranks meet through\n"
    "                            NCCL_COMM_ID (H1:PORT); NCCL_* variables of this\n"
    "                            environment go to every rank.  A node that cannot\n"
    "                            pull, has no GPU, or whose rank dies ends the run\n"
    "                            (exit 7, or the pull's code), naming the node;\n"
    "                            no container is left running.  The report gains\n"
    "                            the nodes, command lines, NCCL's transport per\n"
    "                            peer pair (expect-transport-nodes, default NET/IB)\n"
    "                            and busbw figures.  A node's GPUs: /dev/nvidia*,\n"
    "                            or those IMGBUILD_NODE_GPUS (\"1,3\") names there\n"
    "  --launcher mpirun|srun|auto\n"
    "                            OpenMPI's mpirun (default), or Slurm's srun\n"
    "                            (auto: when SLURM_JOB_ID is set)\n"
    "  --comm-port PORT          NCCL_COMM_ID's port on the first host (29517)\n"
    "  --smoke-program PATH      with --hosts: the smoke program on the nodes\n"
    "                            (default: the definition's, else dcp2_smoke beside\n"
    "                            imgverify there)\n"
    "  --dry-run                 with --hosts: print the launcher's command lines\n"
    "                            (the pull, then the ranks), run nothing\n"
    "  --node-pull REF, --node-rank REF, --node-sweep RUN\n"
    "                            what the launcher starts on each node (with\n"
    "                            --node-slots, --node-definition, --node-program,\n"
    "                            --node-run-id, --dcp); not for use by hand\n"
    "  --jobs N                  threads for the integrity check (default: cores)\n"
    "  --full                    inflate and check every layer again, also those\n"
    "                            this store has read through before\n"
    "  --store                   with no REF: verify the whole local store\n"
    "  --store-dir DIR           the local store (default as imgbuild)\n"
    "  --python-symbols FILE...  print, as JSON on stdout, what each Python file\n"
    "                            defines at module level and imports:\n"
    "                            {\"files\":[{\"path\",\"definitions\":[...],\n"
    "                             \"imports\":[{\"line\",\"module\",\"level\",\n"
    "                             \"names\":[{\"name\",\"asname\"}]}]}]}\n"
    "                            (a plain `import a.b as c` has names [] and an\n"
    "                            \"asname\" on the entry; relative imports are\n"
    "                            resolved from the file's package on disk)\n"
    "  --kernels PATH...         the GPU code of files on disk: per file, each\n"
    "                            fatbin entry or cubin (kind, SM and a/f variant,\n"
    "                            compression, sizes, kernel names); a table, or\n"
    "                            with --json {\"files\":[{\"path\",\"entries\":[{\"kind\",\n"
    "                            \"sm\",\"variant\",\"compression\",\"size\",\n"
    "                            \"uncompressed_size\",\"relocatable\",\"ptx_version\",\n"
    "                            \"kernels\":[...]}]}]}; relocatable entries (-rdc,\n"
    "                            __nv_relfatbin) are nvlink's input, never loaded\n"
    "  --kernels REF [GLOB...]   the same for the files of an image that match the\n"
    "                            globs ('*' crosses '/'; default *.so *.so.* *.cubin\n"
    "                            *.fatbin), read from its layers\n"
    "  --jit-budget PATH... | REF [GLOB...]\n"
    "                            per file with GPU code: loadable SASS and PTX\n"
    "                            entries, kernels, those whose SASS runs on the\n"
    "                            target, those covered by SASS in another file,\n"
    "                            those JIT-compiled from PTX at first use (and the\n"
    "                            PTX bytes), those with neither; PTX entries newer\n"
    "                            than the driver's JIT; the first use's compile\n"
    "                            time estimated (ptxas's measured 0.42 MB/s a\n"
    "                            core).  --json: {\"driver_ptx\",\"jit_ptx_bytes\",\n"
    "                            \"jit_core_seconds_estimate\",\n"
    "                            \"jit_rate_bytes_per_core_second\",\n"
    "                            \"files\":[{\"path\",\"sass_entries\",\"ptx_entries\",\n"
    "                            \"relocatable_entries\",\"kernels\",\"runs\",\n"
    "                            \"covered_elsewhere\",\"jit\",\"jit_ptx_bytes\",\n"
    "                            \"neither\",\"ptx_too_new\",\"jit_kernels\",\n"
    "                            \"neither_kernels\"}]}\n"
    "  --gpu CC                  the target GPU for --jit-budget (repeatable;\n"
    "                            default 12.1)\n"
    "  --driver VERSION          the target driver for --jit-budget (default\n"
    "                            " IB_DEFAULT_DRIVER ")\n"
    "  --native REF [GLOB...]    the native link gate on the objects that match;\n"
    "                            with no GLOB on what the image's build checked\n"
    "                            (each provenance record's [native] rules, the\n"
    "                            objects of the layers it added, its packages'\n"
    "                            extension modules), with no record on every ELF\n"
    "                            object of the image: each loaded as ld.so\n"
    "                            would load it in the image, for any architecture,\n"
    "                            nothing run; extension modules into the image's\n"
    "                            python3.  Missing libraries, undefined symbols,\n"
    "                            versions not found, objects of another machine\n"
    "                            (exit 5); shadowed copies, symbols left to the\n"
    "                            driver (warnings).  --json: {\"objects\":[{\"path\",\n"
    "                            \"loaded_as\",\"loaded\":[{\"name\",\"path\"}],\n"
    "                            \"objects\":[{\"path\",\"needs\":{\"GLIBC\",...}}],\n"
    "                            \"problems\":[{\"kind\",\"error\",\"object\",\"name\",\n"
    "                            \"version\",\"detail\"}]}],\"provides\",\"scope\",\n"
    "                            \"stats\"}\n"
    "  --ldd                     with --native: load every object as `ldd -r` does\n"
    "                            (as the main program; no interpreter)\n"
    "  --run REF [--gpus] -- PROGRAM [ARG...]\n"
    "                            run PROGRAM (a file of this machine, bound in\n"
    "                            read-only) inside image REF with runc, the GPUs\n"
    "                            injected with --gpus, under the launch contract\n"
    "                            recorded for REF ([run]/[smoke]: /dev/shm size,\n"
    "                            ipc, devices, memlock, capabilities); exits with\n"
    "                            its status\n"
    "  --diff A B                what changed from A to B (references, or a\n"
    "                            definition folder: its overlay over its base,\n"
    "                            as it would be built): files added, removed,\n"
    "                            changed (layer, sha256), and per file the Python\n"
    "                            definitions, dynamic symbols and kernels per SM\n"
    "                            added, removed or changed; a table on stdout, or\n"
    "                            --json (schema imgverify.diff/v1)\n"
    "  --recipe RECIPE.toml [REF] a launcher recipe (TOML 1.0) against the image\n"
    "                            it runs (REF, default its docker_image): every\n"
    "                            --flag of args declared by the image's `vllm\n"
    "                            serve` and its value one of the declared choices,\n"
    "                            every [env] variable read by the image (or a\n"
    "                            known outside one), TORCH_CUDA_ARCH_LIST and\n"
    "                            FLASHINFER_CUDA_ARCH_LIST against the SASS the\n"
    "                            image carries, [[extra_mounts]] against its file\n"
    "                            system, the shape (TP, PP, DCP, nodes, shm).  One\n"
    "                            line per check on stderr, RECIPE:LINE: CHECK\n"
    "                            SUBJECT: pass|fail|unchecked|warning: WHY; exit 1\n"
    "                            when one fails.  --json: imgverify.recipe/v1\n"
    "                            {\"recipe\",\"ref\",\"checks\":[{\"file\",\"line\",\n"
    "                            \"check\",\"subject\",\"status\",\"message\"}],\n"
    "                            \"summary\",\"status\",\"exit_code\"}\n"
    "  --triage DEFINITION --against REF [--their-base REF2]\n"
    "                            the port's triage: per file the definition\n"
    "                            writes, one bucket: identical (the overlay's file\n"
    "                            is REF's), clean (their base's == REF's), merge\n"
    "                            (they differ), new-theirs (REF has it, their\n"
    "                            base not), new-both, new-ours; without\n"
    "                            --their-base: identical, differs, new.  The\n"
    "                            definition's [triage] `require NAME@FILE` lines\n"
    "                            must hold in the overlay's files.  A table on\n"
    "                            stdout, or --json (imgverify.triage/v1)\n"
    "  --require-superset        with --triage: every definition, dynamic symbol\n"
    "                            and kernel of REF's version of a file must be in\n"
    "                            the overlay's version\n"
    "  --tls-verify=false        accept a registry's untrusted TLS certificate,\n"
    "                            or plain HTTP (loopback registries may always\n"
    "                            speak plain HTTP)\n"
    "  --authfile FILE           registry credentials (auths.HOST.auth), instead\n"
    "                            of $REGISTRY_AUTH_FILE or ~/.docker/config.json\n"
    "  --transfer-jobs N         registry blobs pulled at once, each on its own\n"
    "                            connection (1..64; default\n"
    "                            $IMGBUILD_REGISTRY_JOBS, else 4)\n"
    "  --json                    machine-readable output\n"
    "  --verify-signature-with CMD\n"
    "                            the signature gate: run `/bin/sh -c CMD` on each\n"
    "                            signature of the image (imgbuild --sign-with,\n"
    "                            or cosign's own), the signed payload on stdin,\n"
    "                            the signature in the file $IMGBUILD_SIGNATURE;\n"
    "                            exit 0 is a good signature.  At least one must\n"
    "                            verify (else exit 4), e.g. 'openssl dgst -sha256\n"
    "                            -verify pub.pem -signature \"$IMGBUILD_SIGNATURE\"'.\n"
    "                            Without it the signatures are listed and checked\n"
    "                            to name this image and the attestations it\n"
    "                            carries, not verified (the gate is a skip)\n"
    "  --report junit:FILE|json:FILE\n"
    "                            also write the verify report to FILE, pass or\n"
    "                            fail: JUnit XML (one test case per gate and per\n"
    "                            requirement line of the definitions checked, a\n"
    "                            failure naming the file and line), or the --json\n"
    "                            document; repeatable\n"
    "  -h, --help                this text\n"
    "\n"
    "With --json, the report is one JSON document on stdout (schema\n"
    "imgverify.report/v1, docs/imgverify-report.schema.json).\n"
    "\n"
    "Syntax: the image's own python3.X compiles the checked files, in a chroot\n"
    "  (root); an image of another architecture's under this machine's static\n"
    "  qemu-user (qemu-aarch64-static; IMGBUILD_QEMU names another, or `off`).\n"
    "  Where it cannot run and no python3.X of its version is here, the symbol\n"
    "  gate skips, saying why (a conflict marker still fails it).\n"
    "\n"
    "Exit codes:\n"
    "  0  everything checked passed\n"
    "  1  --recipe: a check of the recipe against the image failed\n"
    "  2  usage\n"
    "  3  --triage: the definition is malformed\n"
    "  4  integrity: a blob, diff_id, manifest, config or overlay file does not\n"
    "     match (the message names it); a layer has a hostile entry (a name\n"
    "     with `..` or absolute, a link leaving the root, a device node, FIFO,\n"
    "     setuid/setgid file, duplicate, whiteout of . or .., a name over\n"
    "     PATH_MAX, a malformed header: layer and entry named); a signature\n"
    "     about another image or over attestations the image does not carry;\n"
    "     with --verify-signature-with, no signature that verifies\n"
    "  5  symbol or native link gate; --triage: a definition missing from the overlay\n"
    "     (--require-superset) or a `require NAME@FILE` that does not hold\n"
    "  6  kernel gate, [target] checks\n"
    "  7  smoke test (also --smoke on a machine without a GPU)\n"
    "  8  environment: I/O, missing tool, a registry or\n"
    "     Docker Engine unreachable, credentials refused, retries exhausted\n"
    "  9  the reference does not resolve\n"
    "  10  provenance missing: an image imgbuild built (its config says so)\n"
    "      with no attestation where it was copied, an attestation its\n"
    "      referrers list that is not there (both named), a required\n"
    "      provenance gate that did not run\n"
    "When several checks fail, the code is that of the first in this order:\n"
    "integrity, provenance, symbols, native, kernels, smoke (a required gate\n"
    "that did not run counts as its gate's failure).\n";

static void
print_native_problem (void *data, bool is_error, const char *msg)
{
  (void) data;
  fprintf (stderr, "%s%s\n", is_error ? "error: " : "warning: ", msg);
}

/* The native link gate over the objects of an image that match GLOBS;
 * with none, over what the image's build checked (verify_native.h). */
static int
native_of_image (const char *store_path, const struct ib_remote_options *remote, const char *ref, int n_globs,
                 char **globs, bool as_ldd, bool json)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (store_path);
  struct ib_store *s = NULL;
  struct ib_image *img = NULL;
  struct ib_fsview *view = NULL;
  struct ib_native_stats st;
  cJSON *doc = cJSON_CreateObject ();
  int r = ib_store_open (root, &s, &err);
  if (r == 0)
    r = ib_image_pull (s, ref, NULL, remote, &img, &err);
  if (r == 0)
    r = ib_fsview_of_image (s, img, &view, &err);
  struct ib_native_rules rules = { .check = globs, .n_check = (size_t) n_globs, .as_ldd = as_ldd };
  cleanup_free char *scope = NULL;
  if (r == 0 && n_globs > 0)
    r = ib_native_check (s, img, view, &rules, print_native_problem, NULL, &st, doc, &err);
  else if (r == 0)
    r = ib_verify_native_as_built (s, img, view, as_ldd, print_native_problem, NULL, &st, doc, &scope, &err);
  if (r == 0)
    {
      if (scope)
        fprintf (stderr, "native: %s\n", scope);
      fprintf (stderr, "native: %zu objects, %zu loaded, %zu symbol references; %zu errors, %zu warnings, "
                       "%zu unchecked; %zu files read in %zu layer passes, %zu cached\n",
               st.objects, st.loaded, st.refs, st.errors, st.warnings, st.unchecked, st.read, st.layers_read,
               st.cached);
      if (json)
        {
          cJSON *stats = cJSON_AddObjectToObject (doc, "stats");
          cJSON_AddNumberToObject (stats, "objects", (double) st.objects);
          cJSON_AddNumberToObject (stats, "errors", (double) st.errors);
          cJSON_AddNumberToObject (stats, "warnings", (double) st.warnings);
          cJSON_AddNumberToObject (stats, "read", (double) st.read);
          cJSON_AddNumberToObject (stats, "cached", (double) st.cached);
          cJSON_AddNumberToObject (stats, "layers_read", (double) st.layers_read);
          char *text = cJSON_PrintUnformatted (doc);
          puts (text);
          free (text);
        }
    }
  cJSON_Delete (doc);
  ib_fsview_free (view);
  ib_image_free (img);
  ib_store_free (s);
  if (r < 0)
    return ib_error_report ("imgverify", &err);
  return st.errors ? IB_ESYMBOLS : 0;
}

/* The launch contract recorded for IMG (its latest provenance record that
 * has one), else the defaults. */
static int
recorded_contract (struct ib_store *s, const struct ib_image *img, struct ib_contract *c, ib_error_t *err)
{
  cJSON **docs = NULL;
  size_t n = 0;
  ib_contract_init (c);
  if (ib_provenance_read_all (s, img, &docs, &n, err) < 0)
    return -1;
  int r = 0;
  for (size_t i = n; i-- > 0;)
    {
      const cJSON *j = cJSON_GetObjectItemCaseSensitive (docs[i], "contract");
      if (j)
        {
          ib_contract_clear (c);
          r = ib_contract_from_json (j, c, err);
          break;
        }
    }
  ib_provenance_free (docs, n);
  return r;
}

/* Run PROGRAM (from this machine) inside the image REF with a real runtime,
 * GPUs injected when asked: the smoke gate's runner, by hand, with the
 * launch contract recorded for the image. */
static int
run_in_image (const char *store_path, const struct ib_remote_options *remote, const char *ref, bool gpus, int argc,
              char **argv)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (store_path);
  struct ib_store *s = NULL;
  struct ib_image *img = NULL;
  int r = ib_image_open_in_place (root, ref, NULL, remote, &s, &img, &err);
  cleanup_free char *target = NULL;
  struct ib_run_result res = { 0 };
  struct ib_contract contract;
  ib_contract_init (&contract);
  if (r == 0)
    r = recorded_contract (s, img, &contract, &err);
  if (r == 0)
    {
      const char *base = strrchr (argv[0], '/') ? strrchr (argv[0], '/') + 1 : argv[0];
      target = ib_xasprintf ("/opt/imgbuild/%s", base);
      char *env[] = { "NCCL_NVLS_ENABLE=0" };
      struct ib_run_options o = { .program = argv[0], .program_target = target, .args = argv + 1,
                                  .n_args = (size_t) argc - 1, .env = env, .n_env = 1, .gpus = gpus,
                                  .timeout_s = 600, .contract = &contract, .reaper = true };
      r = ib_run_image (s, img, &o, &res, &err);
    }
  if (r == 0)
    fputs (res.output ? res.output : "", stdout);
  int code = r < 0 ? ib_error_report ("imgverify", &err) : res.exit_code;
  ib_contract_clear (&contract);
  ib_run_result_clear (&res);
  ib_image_free (img);
  ib_store_free (s);
  return code;
}

/* ---- verifying an image: verify_image.c; the store: ---------------------- */

struct verify_opts
{
  const char *store;
  bool json;
  int jobs;
};

static void
keep_first (ib_error_t *first, ib_error_t *e)
{
  if (*e && *first == NULL)
    *first = steal_pointer (e);
  ib_error_release (e);
}

static int
verify_store (const struct verify_opts *vo)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (vo->store);
  struct ib_store *s = NULL;
  struct ib_report *rep = ib_report_new ("imgverify", "imgverify.report/v1", vo->json);
  struct ib_gate_sink k = { rep, "store", NULL, 0 };
  struct ib_verify_stats st = { 0 };
  double t0 = ib_now ();
  int r = ib_store_open_existing (root, &s, &err);
  if (r == 0)
    r = ib_verify_store (s, rep, vo->jobs, ib_gate_sink_problem, &k, &st, &err);
  ib_error_t e = NULL;
  ib_gate_sink_finish (&k, IB_EINTEGRITY, &e);
  if (r < 0)
    keep_first (&e, &err);
  ib_verify_stats_clear (&st);
  cleanup_free char *detail = ib_xasprintf ("%zu blobs, %llu bytes", st.blobs, st.bytes);
  ib_report_gate (rep, "store", e ? IB_GATE_FAIL : IB_GATE_PASS, ib_now () - t0, e ? e->msg : detail);
  cJSON *doc = ib_report_json (rep);
  cJSON_AddStringToObject (doc, "ref", root);
  int code = e ? e->class : 0;
  cJSON_AddStringToObject (doc, "status", code ? "fail" : "pass");
  cJSON_AddNumberToObject (doc, "exit_code", code);
  if (e)
    {
      cJSON_AddStringToObject (doc, "error", e->msg);
      ib_report_stopped (rep, "store", e->msg);
    }
  ib_report_resources (rep);
  if (vo->json)
    {
      char *text = cJSON_Print (doc);
      puts (text);
      free (text);
    }
  if (e)
    ib_error_report ("imgverify", &e);
  ib_store_free (s);
  ib_report_free (rep);
  return code;
}

static int
python_symbols (int n, char **files)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON *list = cJSON_AddArrayToObject (doc, "files");
  int rc = 0;
  for (int i = 0; i < n; i++)
    {
      ib_error_t err = NULL;
      cleanup_free char *src = NULL, *module = NULL, *package = NULL;
      size_t len;
      struct ib_py_module *m = NULL;
      if (ib_read_file (files[i], MAX_SOURCE, &src, &len, &err) < 0
          || ib_py_module_name_of_path (files[i], &module, &package, &err) < 0
          || ib_py_scan (src, len, package, &m, &err) < 0)
        {
          ib_error_wrap (&err, "%s", files[i]);
          rc = ib_error_report ("imgverify", &err);
          continue;
        }
      cJSON_AddItemToArray (list, ib_py_module_json (files[i], m));
      ib_py_module_free (m);
    }
  char *text = cJSON_PrintUnformatted (doc);
  puts (text);
  free (text);
  cJSON_Delete (doc);
  return rc;
}

/* ---- the command line ---------------------------------------------------- */

enum
{
  OPT_PY = 256,
  OPT_KERNELS,
  OPT_JSON,
  OPT_STORE,
  OPT_RUN,
  OPT_GPUS,
  OPT_DEFINITION,
  OPT_SMOKE,
  OPT_JOBS,
  OPT_STORE_DIR,
  OPT_TLS_VERIFY,
  OPT_AUTHFILE,
  OPT_TRANSFER_JOBS,
  OPT_REQUIRE_GATES,
  OPT_DIFF,
  OPT_TRIAGE,
  OPT_AGAINST,
  OPT_THEIR_BASE,
  OPT_SUPERSET,
  OPT_JIT,
  OPT_GPU,
  OPT_DRIVER,
  OPT_NATIVE,
  OPT_LDD,
  OPT_RECIPE,
  OPT_HOST,
  OPT_REPORT,
  OPT_VERIFY_SIGNATURE_WITH,
  OPT_HOSTS,
  OPT_LAUNCHER,
  OPT_COMM_PORT,
  OPT_DRY_RUN,
  OPT_NODE_PULL,
  OPT_NODE_RANK,
  OPT_NODE_SLOTS,
  OPT_NODE_DEF,
  OPT_NODE_PROGRAM,
  OPT_DCP,
  OPT_SMOKE_PROGRAM,
  OPT_NODE_SWEEP,
  OPT_NODE_RUN_ID,
  OPT_ALLOW_UNSAFE_BASE,
  OPT_STRICT_BASE,
  OPT_FULL,
};

static const struct option longopts[] = {
  { "python-symbols", no_argument, NULL, OPT_PY },
  { "kernels", no_argument, NULL, OPT_KERNELS },
  { "json", no_argument, NULL, OPT_JSON },
  { "store", no_argument, NULL, OPT_STORE },
  { "store-dir", required_argument, NULL, OPT_STORE_DIR },
  { "definition", required_argument, NULL, OPT_DEFINITION },
  { "smoke", no_argument, NULL, OPT_SMOKE },
  { "jobs", required_argument, NULL, OPT_JOBS },
  { "run", required_argument, NULL, OPT_RUN },
  { "gpus", no_argument, NULL, OPT_GPUS },
  { "tls-verify", required_argument, NULL, OPT_TLS_VERIFY },
  { "authfile", required_argument, NULL, OPT_AUTHFILE },
  { "transfer-jobs", required_argument, NULL, OPT_TRANSFER_JOBS },
  { "require-gates", required_argument, NULL, OPT_REQUIRE_GATES },
  { "diff", no_argument, NULL, OPT_DIFF },
  { "triage", required_argument, NULL, OPT_TRIAGE },
  { "against", required_argument, NULL, OPT_AGAINST },
  { "their-base", required_argument, NULL, OPT_THEIR_BASE },
  { "require-superset", no_argument, NULL, OPT_SUPERSET },
  { "jit-budget", no_argument, NULL, OPT_JIT },
  { "gpu", required_argument, NULL, OPT_GPU },
  { "driver", required_argument, NULL, OPT_DRIVER },
  { "native", no_argument, NULL, OPT_NATIVE },
  { "ldd", no_argument, NULL, OPT_LDD },
  { "recipe", required_argument, NULL, OPT_RECIPE },
  { "host", required_argument, NULL, OPT_HOST },
  { "report", required_argument, NULL, OPT_REPORT },
  { "verify-signature-with", required_argument, NULL, OPT_VERIFY_SIGNATURE_WITH },
  { "hosts", required_argument, NULL, OPT_HOSTS },
  { "launcher", required_argument, NULL, OPT_LAUNCHER },
  { "comm-port", required_argument, NULL, OPT_COMM_PORT },
  { "dry-run", no_argument, NULL, OPT_DRY_RUN },
  { "node-pull", required_argument, NULL, OPT_NODE_PULL },
  { "node-rank", required_argument, NULL, OPT_NODE_RANK },
  { "node-slots", required_argument, NULL, OPT_NODE_SLOTS },
  { "node-definition", required_argument, NULL, OPT_NODE_DEF },
  { "node-program", required_argument, NULL, OPT_NODE_PROGRAM },
  { "dcp", required_argument, NULL, OPT_DCP },
  { "smoke-program", required_argument, NULL, OPT_SMOKE_PROGRAM },
  { "node-sweep", required_argument, NULL, OPT_NODE_SWEEP },
  { "node-run-id", required_argument, NULL, OPT_NODE_RUN_ID },
  { "allow-unsafe-base", no_argument, NULL, OPT_ALLOW_UNSAFE_BASE },
  { "strict-base", no_argument, NULL, OPT_STRICT_BASE },
  { "full", no_argument, NULL, OPT_FULL },
  { "help", no_argument, NULL, 'h' },
  { NULL, 0, NULL, 0 },
};

struct cli
{
  bool py, kernels, json, jit, native, as_ldd, gpus, whole_store, diff;
  struct ib_target target; /* --gpu, --driver */
  const char *store, *run, *recipe;
  struct ib_verify_image_options vo;
  struct ib_triage_options to;
  char *reports[16];
  size_t n_reports;
  struct ib_cluster_options cluster;
  struct ib_node_options node;
  const char *node_step; /* --node-pull, --node-rank, --node-sweep */
};

static int usage_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static int
usage_error (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("imgverify: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
  return IB_EUSAGE;
}

/* The options whose values are checked as they are read: -1, or the exit
 * code of a usage error. */
static int
checked_option (struct cli *c, int o, const char *arg)
{
  ib_error_t e = NULL;
  switch (o)
    {
    case OPT_HOST:
      if (ib_docker_host_check (arg, &e) < 0)
        return ib_error_report ("imgverify", &e);
      c->vo.remote.docker_host = arg;
      return -1;
    case OPT_REQUIRE_GATES:
      if (ib_verify_parse_gates (arg, &e) < 0)
        return ib_error_report ("imgverify", &e);
      c->vo.require_gates = arg;
      return -1;
    case OPT_COMM_PORT:
      c->cluster.comm_port = atoi (arg);
      if (c->cluster.comm_port < 1 || c->cluster.comm_port > 65535)
        return usage_error ("error: --comm-port: `%s` is not a port", arg);
      return -1;
    case OPT_REPORT:
      if (ib_report_spec_check (arg, &e) < 0)
        return ib_error_report ("imgverify", &e);
      if (c->n_reports == sizeof (c->reports) / sizeof (*c->reports))
        {
          fprintf (stderr, "imgverify: at most %zu --report\n", c->n_reports);
          return IB_EUSAGE;
        }
      c->reports[c->n_reports++] = (char *) arg;
      return -1;
    case OPT_GPU:
    case OPT_DRIVER:
      if (ib_target_parse (&c->target, o == OPT_GPU ? "gpu" : "driver", arg, o == OPT_GPU ? "--gpu" : "--driver",
                           &e) < 0)
        {
          e->class = IB_EUSAGE;
          return ib_error_report ("imgverify", &e);
        }
      return -1;
    case OPT_TLS_VERIFY:
      if (ib_parse_tls_verify (arg, &c->vo.remote) < 0)
        return usage_error ("--tls-verify is true or false, not `%s`", arg);
      return -1;
    case OPT_TRANSFER_JOBS:
      if (ib_parse_transfer_jobs (arg, &c->vo.remote) < 0)
        return usage_error ("--transfer-jobs is a number from 1 to 64, not `%s`", arg);
      return -1;
    default:
      fputs (usage, stderr);
      return IB_EUSAGE;
    }
}

/* -1: run what C asks for, on argv[optind..]; else the exit code (0 for
 * --help). */
static int
parse_args (int argc, char **argv, struct cli *c)
{
  int o;
  while ((o = getopt_long (argc, argv, "h", longopts, NULL)) != -1)
    switch (o)
      {
      case OPT_PY: c->py = true; break;
      case OPT_KERNELS: c->kernels = true; break;
      case OPT_NATIVE: c->native = true; break;
      case OPT_LDD: c->as_ldd = true; break;
      case OPT_RECIPE: c->recipe = optarg; break;
      case OPT_JSON: c->json = true; break;
      case OPT_STORE: c->whole_store = true; break;
      case OPT_STORE_DIR: c->store = optarg; break;
      case OPT_DEFINITION: c->vo.definition = optarg; break;
      case OPT_SMOKE: c->vo.smoke = true; break;
      case OPT_JOBS: c->vo.jobs = atoi (optarg); break;
      case OPT_RUN: c->run = optarg; break;
      case OPT_GPUS: c->gpus = true; break;
      case OPT_DIFF: c->diff = true; break;
      case OPT_TRIAGE: c->to.definition = optarg; break;
      case OPT_AGAINST: c->to.against = optarg; break;
      case OPT_THEIR_BASE: c->to.their_base = optarg; break;
      case OPT_SUPERSET: c->to.require_superset = true; break;
      case OPT_ALLOW_UNSAFE_BASE: c->vo.allow_unsafe_base = true; break;
      case OPT_STRICT_BASE: c->vo.strict_base = true; break;
      case OPT_FULL: c->vo.full = true; break;
      case OPT_AUTHFILE: c->vo.remote.auth_file = optarg; break;
      case OPT_VERIFY_SIGNATURE_WITH: c->vo.verify_signature_with = optarg; break;
      case OPT_JIT: c->jit = true; break;
      case OPT_HOSTS: c->cluster.hosts = optarg; break;
      case OPT_LAUNCHER: c->cluster.launcher = optarg; break;
      case OPT_DRY_RUN: c->cluster.dry_run = true; break;
      case OPT_NODE_PULL: c->node_step = "pull"; c->node.ref = optarg; break;
      case OPT_NODE_RANK: c->node_step = "rank"; c->node.ref = optarg; break;
      case OPT_NODE_SLOTS: c->node.slots = optarg; break;
      case OPT_NODE_DEF: c->node.definition = optarg; break;
      case OPT_NODE_PROGRAM: c->node.program = optarg; break;
      case OPT_DCP: c->node.dcp = atoi (optarg); break;
      case OPT_SMOKE_PROGRAM: c->cluster.program = optarg; break;
      case OPT_NODE_SWEEP: c->node_step = "sweep"; c->node.run_id = optarg; break;
      case OPT_NODE_RUN_ID: c->node.run_id = optarg; break;
      case 'h': fputs (usage, stdout); return 0;
      default:
        {
          int rc = checked_option (c, o, optarg);
          if (rc >= 0)
            return rc;
        }
      }
  c->vo.store = c->store;
  c->vo.json = c->json;
  c->vo.reports = c->reports;
  c->vo.n_reports = c->n_reports;
  return -1;
}

/* The smoke test across nodes: --hosts and its options go together, with
 * --smoke and one REF.  -1, or the exit code of a usage error. */
static int
cluster_options (struct cli *c, int n_args)
{
  struct ib_cluster_options *cl = &c->cluster;
  if (!(cl->hosts || cl->launcher || cl->dry_run || cl->comm_port || cl->program))
    return -1;
  if (!(cl->hosts && c->vo.smoke && n_args == 1))
    {
      fprintf (stderr, "imgverify: error: --hosts, --launcher, --comm-port, --smoke-program and --dry-run go "
                       "with --smoke --hosts H1,H2,... REF\n");
      return IB_EUSAGE;
    }
  ib_error_t e = NULL;
  struct ib_hosts h;
  enum ib_launcher l;
  if (ib_hosts_parse (cl->hosts, &h, &e) < 0 || ib_launcher_choose (cl->launcher, &l, &e) < 0)
    return ib_error_report ("imgverify", &e);
  ib_hosts_clear (&h);
  c->vo.cluster = cl;
  return -1;
}

/* What compares images: --recipe, --diff, --triage.  -1 when none is asked. */
static int
comparisons (struct cli *c, int n, char **args)
{
  const struct ib_remote_options *remote = &c->vo.remote;
  if (c->recipe && n <= 1)
    {
      struct ib_recipe_verify_options ro = { .recipe = c->recipe, .ref = n ? args[0] : NULL,
                                             .store = c->store, .remote = *remote, .json = c->json };
      return ib_recipe_verify_run (&ro);
    }
  if (c->recipe)
    {
      fputs (usage, stderr);
      return IB_EUSAGE;
    }
  if (c->diff && n == 2)
    {
      struct ib_diff_options dop = { .store = c->store, .remote = *remote, .json = c->json };
      return ib_image_diff_run (args[0], args[1], &dop);
    }
  if (c->to.definition && c->to.against && n == 0)
    {
      c->to.store = c->store;
      c->to.json = c->json;
      c->to.remote = *remote;
      return ib_triage_run (&c->to);
    }
  if (c->diff || c->to.definition || c->to.against || c->to.their_base || c->to.require_superset)
    {
      fputs (usage, stderr);
      return IB_EUSAGE;
    }
  return -1;
}

/* Runs the mode the options chose on the N ARGS left after them. */
static int
dispatch (struct cli *c, int n, char **args)
{
  if (c->py && n > 0)
    return python_symbols (n, args);
  if (c->node_step && n == 0)
    {
      c->node.store = c->store;
      c->node.remote = c->vo.remote;
      return strcmp (c->node_step, "pull") == 0   ? ib_node_pull_main (&c->node)
             : strcmp (c->node_step, "rank") == 0 ? ib_node_rank_main (&c->node)
                                                  : ib_node_sweep_main (&c->node);
    }
  int rc = cluster_options (c, n);
  if (rc >= 0)
    return rc;
  if (c->run && n > 0)
    return run_in_image (c->store, &c->vo.remote, c->run, c->gpus, n, args);
  if ((rc = comparisons (c, n, args)) >= 0)
    return rc;
  if (c->whole_store && n == 0)
    return verify_store (&(struct verify_opts){ c->store, c->json, c->vo.jobs });
  if (c->native && n > 0)
    return native_of_image (c->store, &c->vo.remote, args[0], n - 1, args + 1, c->as_ldd, c->json);
  if (!c->py && !c->kernels && !c->jit && !c->run && !c->native && n == 1)
    return ib_verify_image_ref (args[0], &c->vo);
  struct stat st;
  const struct ib_target *budget = c->jit ? &c->target : NULL;
  if ((c->kernels || c->jit) && n > 0 && stat (args[0], &st) == 0 && !S_ISDIR (st.st_mode))
    return iv_kernels_of_files (n, args, c->json, budget);
  if ((c->kernels || c->jit) && n > 0)
    return iv_kernels_of_image (c->store, &c->vo.remote, args[0], n - 1, args + 1, c->json, budget);
  fputs (usage, stderr);
  return IB_EUSAGE;
}

int
main (int argc, char **argv)
{
  ib_heap_bound ();
  struct cli c = { 0 };
  int rc = parse_args (argc, argv, &c);
  if (rc < 0)
    rc = dispatch (&c, argc - optind, argv + optind);
  ib_target_clear (&c.target);
  return rc;
}
