/* imgbuild: the command line over ib_build_run. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/heap.h"
#include "util/pgzip.h"
#include "layers/transports/docker_client.h"
#include "builder/pipeline.h"
#include "builder/diff/drift.h"
#include "builder/smoke/launch.h"
#include "builder/cluster/load_nodes.h"
#include "builder/cluster/smoke_cluster.h"
#include "builder/junit.h"

#ifndef IB_IMAGES_DIR
#define IB_IMAGES_DIR "/usr/local/share/imgbuild/images"
#endif
#ifndef IB_VERSION
#define IB_VERSION "0.1.0"
#endif

static const char usage[] =
    "Usage: imgbuild [OPTIONS] NAME|DIR\n"
    "       imgbuild [OPTIONS] -f DOCKERFILE -t NAME:TAG [CONTEXT]\n"
    "       imgbuild --gc [--store DIR] [--json]\n"
    "\n"
    "Build an image as a thin overlay over its base, run every gate, and tag it\n"
    "in the local store only when all of them pass: definition, symbols, native\n"
    "(the link gate of an image.conf's [native]: every shared object links as\n"
    "ld.so would link it in the image), kernels, smoke.\n"
    "\n"
    "NAME is looked up as $IMGBUILD_IMAGES/NAME, ./images/NAME, then\n"
    "  " IB_IMAGES_DIR "/NAME; DIR is a folder with an image.conf.\n"
    "\n"
    "Options:\n"
    "  -f, --file DOCKERFILE   build from a Dockerfile (FROM/COPY/ENV/LABEL/ARG/CMD);\n"
    "                          sources are relative to CONTEXT, else its folder\n"
    "  -t, --tag NAME:TAG      name the image (overrides the definition's name)\n"
    "      --from REF          build over REF instead of the definition's base;\n"
    "                          the base (this or the definition's) is brought\n"
    "                          into the store, and a blob the store already has\n"
    "                          is taken from the store, not read again (it was\n"
    "                          hashed when written): to check an artifact's own\n"
    "                          bytes, run imgverify on it\n"
    "      --build-arg K=V     set a Dockerfile ARG (repeatable)\n"
    "      --store DIR         the local store (default: $IMGBUILD_STORE, else\n"
    "                          $XDG_DATA_HOME/imgbuild/store, else\n"
    "                          ~/.local/share/imgbuild/store)\n"
    "      --platform OS/ARCH[/VARIANT]\n"
    "                          the platform to take from a multi-platform base\n"
    "                          (default: the base's only one, else this\n"
    "                          machine's), or of a scratch image; the image has\n"
    "                          its base's platform, and a single base of\n"
    "                          another platform is refused (exit 9); selects\n"
    "                          the definition's [copy OS/ARCH] lines\n"
    "      --output REF        after tagging, also write the image to REF\n"
    "                          (oci:DIR[:NAME:TAG], docker-archive:FILE,\n"
    "                          docker://HOST/REPO:TAG, ...); repeatable\n"
    "      --push docker://HOST[:PORT]/REPO[:TAG]\n"
    "                          after tagging, push the image to a registry: only\n"
    "                          the blobs it lacks (base layers from the same\n"
    "                          registry are mounted), the provenance, the manifest,\n"
    "                          the tag last; repeatable\n"
    "      --tls-verify=false  accept a registry's untrusted TLS certificate, or\n"
    "                          plain HTTP (loopback registries may always speak\n"
    "                          plain HTTP)\n"
    "      --authfile FILE     registry credentials (auths.HOST.auth), instead of\n"
    "                          $REGISTRY_AUTH_FILE or ~/.docker/config.json\n"
    "      --transfer-jobs N   registry blobs pushed or pulled at once, each on its\n"
    "                          own connection (1..64; default\n"
    "                          $IMGBUILD_REGISTRY_JOBS, else 4; 1: one by one)\n"
    "      --jobs N            threads that deflate the new layers (1..64; default:\n"
    "                          the online CPUs).  Layers are deflated in 1 MiB\n"
    "                          blocks: the same bytes, so the same digests,\n"
    "                          whatever N\n"
    "      --smoke=MODE        the GPU smoke test in the built container: auto (run\n"
    "                          it when this machine has GPUs, else say that it\n"
    "                          skipped; the default), required (no tag without a\n"
    "                          pass), off\n"
    "      --hosts H1,H2[:GPUS],...\n"
    "                          run the smoke test across these nodes instead of\n"
    "                          this machine (with --push: the candidate is pushed\n"
    "                          there by digest, untagged; each node pulls it by\n"
    "                          digest; the tags come only after a pass).  See\n"
    "                          imgverify --help, --hosts, and docs/clusters.md\n"
    "      --launcher mpirun|srun|auto, --comm-port PORT\n"
    "                          as imgverify's, with --hosts\n"
    "      --load [HOST]       after tagging, load the image into a Docker Engine,\n"
    "                          sending only the layers it does not have (it finds\n"
    "                          them by chain ID), then check that NAME:TAG there is\n"
    "                          our image ID.  HOST as DOCKER_HOST names it:\n"
    "                          ssh://[USER@]HOST[:PORT] (`ssh HOST docker system\n"
    "                          dial-stdio`, with your own SSH configuration, keys\n"
    "                          and known hosts; BatchMode: no prompts) or\n"
    "                          unix:///PATH; none: $DOCKER_HOST, else\n"
    "                          /var/run/docker.sock.  Repeatable: the nodes load in\n"
    "                          parallel (IMGBUILD_LOAD_JOBS at once, default 4); a\n"
    "                          node that fails is named and does not stop the\n"
    "                          others, and the exit code is 0 only when every node\n"
    "                          has the image (a rerun sends only what is missing)\n"
    "      --nodes FILE        --load each host of FILE: one a line, `#` comments;\n"
    "                          a line without \"://\" is ssh://LINE\n"
    "      --lock              build nothing: write NAME's manifest.lock, the drift\n"
    "                          pins of the base files its targets replace (sha256\n"
    "                          and definitions of each) against its base (or\n"
    "                          --from); the definition gate then fails when the\n"
    "                          base's files differ from their pins.  Prints the\n"
    "                          lock's path\n"
    "      --allow-unsafe-base build over a base whose layers have entries that\n"
    "                          escape the root or lie (names with `..` or\n"
    "                          absolute, links leaving the root, hard links to\n"
    "                          nothing earlier, duplicates, whiteouts of . or ..,\n"
    "                          names over PATH_MAX, malformed headers), each a\n"
    "                          warning in the report; without it such a base is\n"
    "                          refused (exit 4, the first entry named).  For a\n"
    "                          base made by a tool that writes duplicate entries.\n"
    "                          A base's setuid/setgid files, device nodes, FIFOs\n"
    "                          and sockets need no flag: the report counts them\n"
    "      --strict-base       refuse a base with setuid/setgid files, device\n"
    "                          nodes, FIFOs or sockets too (exit 4)\n"
    "      --gc                build nothing: remove from the store the blobs no\n"
    "                          tag and no referrer reaches, the temporaries and run\n"
    "                          folders of killed builds, and the caches of removed\n"
    "                          blobs; waits for the builds using the store to end\n"
    "                          (builds started meanwhile wait for it).  With --json\n"
    "                          the figures as JSON on stdout\n"
    "      --json              print the build report as JSON on stdout (schema\n"
    "                          imgbuild.report/v1, docs/imgbuild-report.schema.json):\n"
    "                          each gate's pass, fail or skip (with its reason),\n"
    "                          every problem found, the one that stopped the\n"
    "                          build first and marked \"stopped\"\n"
    "      --report junit:FILE|json:FILE\n"
    "                          also write the report to FILE, pass or fail: JUnit\n"
    "                          XML (one test case per gate and per requirement\n"
    "                          line, a failure naming the file and line), or the\n"
    "                          --json document; repeatable\n"
    "      --sign-with CMD     once every gate passed, before the tag: run\n"
    "                          `/bin/sh -c CMD` with a payload naming the image's\n"
    "                          digest and its attestations (cosign's simple\n"
    "                          signing JSON) on stdin; its stdout (or the file\n"
    "                          $IMGBUILD_SIGNATURE) is the signature, attached\n"
    "                          as a cosign-style referrer that travels with the\n"
    "                          image.  A signer that fails or writes nothing\n"
    "                          fails the build (exit 8), nothing tagged.  E.g.\n"
    "                          'openssl dgst -sha256 -sign key.pem',\n"
    "                          'ssh-keygen -Y sign -f KEY -n imgbuild -q'\n"
    "  -q, --quiet             no progress on stderr (errors still go there)\n"
    "  -h, --help              this text\n"
    "  -V, --version           the version\n"
    "\n"
    "References: NAME:TAG (the store, else the Docker Engine), oci:DIR[:NAME:TAG],\n"
    "  docker-archive:FILE[:NAME:TAG], docker-daemon:NAME:TAG,\n"
    "  docker://HOST[:PORT]/REPO[:TAG|@DIGEST], scratch.\n"
    "\n"
    "Registries: retries with backoff on 429, 5xx and broken connections\n"
    "  (IMGBUILD_REGISTRY_ATTEMPTS, default 5); a transfer that moves no byte for\n"
    "  IMGBUILD_REGISTRY_STALL_S seconds (default 60) is broken; blobs larger\n"
    "  than IMGBUILD_REGISTRY_CHUNK_SIZE bytes (default 64 MiB) go up in chunks;\n"
    "  IMGBUILD_REGISTRY_JOBS blobs move at once (default 4; --transfer-jobs).\n"
    "  A base's layers are listed as they arrive; a pull more than\n"
    "  IMGBUILD_LIST_AHEAD_MIB ahead of that (default: an eighth of the memory)\n"
    "  waits for it.\n"
    "\n"
    "Syntax: the image's own python3.X compiles the overlay's files, in a chroot\n"
    "  (root); an image of another architecture's under this machine's static\n"
    "  qemu-user (qemu-aarch64-static; IMGBUILD_QEMU names another, or `off`).\n"
    "  Where it cannot run and no python3.X of its version is here, the symbol\n"
    "  gate skips, saying why (a conflict marker still fails it).\n"
    "\n"
    "On success stdout has one line: NAME:TAG MANIFEST-DIGEST.\n"
    "\n"
    "Exit codes:\n"
    "  0  built, every gate passed, tagged\n"
    "  1  a gate failed\n"
    "  2  usage\n"
    "  3  the definition gate failed (bad target, missing source, a base file\n"
    "     that drifted from its pin in manifest.lock, ...)\n"
    "  4  integrity: a digest or size does not match, content is malformed,\n"
    "     the base has entries that escape the root (see --allow-unsafe-base)\n"
    "  5  symbol or native link gate    6  kernel gate, [target] checks    7  smoke test\n"
    "  8  environment: I/O error, missing tool, registry or Docker Engine\n"
    "     unreachable, credentials refused, retries exhausted; a --sign-with\n"
    "     signer that failed (nothing tagged); with --load, a node that does\n"
    "     not have the image (the tag in the store is written)\n"
    "  9  an image reference that does not resolve\n";

struct cli
{
  const char *file, *context, *target;
  struct ib_build_options opt;
  char **outputs;
  size_t n_outputs;
  char **build_args;
  size_t n_build_args;
  char **load_hosts;
  size_t n_load_hosts;
  const char *nodes_file;
  char **reports;
  size_t n_reports;
  bool lock;
  bool gc;
  struct ib_cluster_options cluster;
};

static void
push_arg (char ***list, size_t *n, const char *s)
{
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = (char *) s;
}

static int
parse_jobs (const char *arg, int *jobs)
{
  char *end;
  long n = strtol (arg, &end, 10);
  if (*arg == '\0' || *end != '\0' || n < 1 || n > IB_PGZIP_MAX_THREADS)
    {
      fprintf (stderr, "imgbuild: --jobs is a number from 1 to %d, not `%s`\n", IB_PGZIP_MAX_THREADS, arg);
      return -1;
    }
  *jobs = (int) n;
  return 0;
}

static int
parse_args (int argc, char **argv, struct cli *c)
{
  enum
  {
    OPT_FROM = 256,
    OPT_STORE,
    OPT_PLATFORM,
    OPT_OUTPUT,
    OPT_JSON,
    OPT_BUILD_ARG,
    OPT_SMOKE,
    OPT_LOAD,
    OPT_NODES,
    OPT_PUSH,
    OPT_TLS_VERIFY,
    OPT_AUTHFILE,
    OPT_TRANSFER_JOBS,
    OPT_JOBS,
    OPT_LOCK,
    OPT_ALLOW_UNSAFE_BASE,
    OPT_STRICT_BASE,
    OPT_GC,
    OPT_REPORT,
    OPT_SIGN_WITH,
    OPT_HOSTS,
    OPT_LAUNCHER,
    OPT_COMM_PORT,
  };
  static const struct option longopts[] = {
    { "file", required_argument, NULL, 'f' },         { "tag", required_argument, NULL, 't' },
    { "from", required_argument, NULL, OPT_FROM },     { "store", required_argument, NULL, OPT_STORE },
    { "platform", required_argument, NULL, OPT_PLATFORM }, { "output", required_argument, NULL, OPT_OUTPUT },
    { "build-arg", required_argument, NULL, OPT_BUILD_ARG }, { "json", no_argument, NULL, OPT_JSON },
    { "smoke", required_argument, NULL, OPT_SMOKE },
    { "load", optional_argument, NULL, OPT_LOAD },     { "push", required_argument, NULL, OPT_PUSH },
    { "nodes", required_argument, NULL, OPT_NODES },
    { "tls-verify", required_argument, NULL, OPT_TLS_VERIFY }, { "authfile", required_argument, NULL, OPT_AUTHFILE },
    { "transfer-jobs", required_argument, NULL, OPT_TRANSFER_JOBS },
    { "jobs", required_argument, NULL, OPT_JOBS },
    { "lock", no_argument, NULL, OPT_LOCK },
    { "allow-unsafe-base", no_argument, NULL, OPT_ALLOW_UNSAFE_BASE }, { "gc", no_argument, NULL, OPT_GC },
    { "strict-base", no_argument, NULL, OPT_STRICT_BASE },
    { "report", required_argument, NULL, OPT_REPORT },
    { "sign-with", required_argument, NULL, OPT_SIGN_WITH },
    { "hosts", required_argument, NULL, OPT_HOSTS },
    { "launcher", required_argument, NULL, OPT_LAUNCHER },
    { "comm-port", required_argument, NULL, OPT_COMM_PORT },
    { "quiet", no_argument, NULL, 'q' },              { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },            { NULL, 0, NULL, 0 },
  };
  int o;
  while ((o = getopt_long (argc, argv, "f:t:qhV", longopts, NULL)) != -1)
    switch (o)
      {
      case 'f': c->file = optarg; break;
      case 't': c->opt.name = optarg; break;
      case OPT_FROM: c->opt.from = optarg; break;
      case OPT_STORE: c->opt.store = optarg; break;
      case OPT_PLATFORM: c->opt.platform = optarg; break;
      case OPT_OUTPUT: push_arg (&c->outputs, &c->n_outputs, optarg); break;
      case OPT_BUILD_ARG: push_arg (&c->build_args, &c->n_build_args, optarg); break;
      case OPT_JSON: c->opt.json = true; break;
      case OPT_LOAD:
        /* `--load HOST` as well as `--load=HOST`: a definition's name
         * never has "://". */
        if (optarg == NULL && optind < argc && strstr (argv[optind], "://"))
          optarg = argv[optind++];
        push_arg (&c->load_hosts, &c->n_load_hosts, optarg ? optarg : "");
        break;
      case OPT_NODES: c->nodes_file = optarg; break;
      case OPT_HOSTS: c->cluster.hosts = optarg; break;
      case OPT_LAUNCHER: c->cluster.launcher = optarg; break;
      case OPT_COMM_PORT:
        c->cluster.comm_port = atoi (optarg);
        if (c->cluster.comm_port < 1 || c->cluster.comm_port > 65535)
          {
            fprintf (stderr, "imgbuild: --comm-port: `%s` is not a port\n", optarg);
            return -1;
          }
        break;
      case OPT_LOCK: c->lock = true; break;
      case OPT_GC: c->gc = true; break;
      case OPT_PUSH:
        if (strncmp (optarg, "docker://", 9) != 0)
          {
            fprintf (stderr, "imgbuild: --push takes docker://HOST/REPO[:TAG], not `%s`\n", optarg);
            return -1;
          }
        push_arg (&c->outputs, &c->n_outputs, optarg);
        break;
      case OPT_AUTHFILE: c->opt.remote.auth_file = optarg; break;
      case OPT_ALLOW_UNSAFE_BASE: c->opt.allow_unsafe_base = true; break;
      case OPT_STRICT_BASE: c->opt.strict_base = true; break;
      case OPT_SIGN_WITH: c->opt.sign_with = optarg; break;
      case OPT_REPORT:
        {
          ib_error_t e = NULL;
          if (ib_report_spec_check (optarg, &e) < 0)
            {
              fprintf (stderr, "imgbuild: %s\n", e->msg);
              ib_error_release (&e);
              return -1;
            }
          push_arg (&c->reports, &c->n_reports, optarg);
          break;
        }
      case OPT_TLS_VERIFY:
        if (ib_parse_tls_verify (optarg, &c->opt.remote) < 0)
          {
            fprintf (stderr, "imgbuild: --tls-verify is true or false, not `%s`\n", optarg);
            return -1;
          }
        break;
      case OPT_TRANSFER_JOBS:
        if (ib_parse_transfer_jobs (optarg, &c->opt.remote) < 0)
          {
            fprintf (stderr, "imgbuild: --transfer-jobs is a number from 1 to 64, not `%s`\n", optarg);
            return -1;
          }
        break;
      case OPT_JOBS:
        if (parse_jobs (optarg, &c->opt.jobs) < 0)
          return -1;
        break;
      case OPT_SMOKE:
        if (strcmp (optarg, "auto") == 0)
          c->opt.smoke = IB_SMOKE_AUTO;
        else if (strcmp (optarg, "required") == 0)
          c->opt.smoke = IB_SMOKE_REQUIRED;
        else if (strcmp (optarg, "off") == 0)
          c->opt.smoke = IB_SMOKE_OFF;
        else
          {
            fprintf (stderr, "imgbuild: --smoke is auto, required or off, not `%s`\n", optarg);
            return -1;
          }
        break;
      case 'q': c->opt.quiet = true; break;
      case 'h': fputs (usage, stdout); exit (0);
      case 'V': puts ("imgbuild " IB_VERSION); exit (0);
      default: return -1;
      }
  if (c->file)
    {
      if (optind < argc)
        c->context = argv[optind++];
    }
  else if (optind < argc)
    c->target = argv[optind++];
  if (c->gc)
    return optind == argc && !c->file && !c->target ? 0 : -1;
  if (optind != argc || (!c->file && !c->target))
    return -1;
  if (c->file && !c->opt.name)
    {
      fprintf (stderr, "imgbuild: -f needs -t NAME:TAG\n");
      return -1;
    }
  c->opt.outputs = c->outputs;
  c->opt.n_outputs = c->n_outputs;
  c->opt.reports = c->reports;
  c->opt.n_reports = c->n_reports;
  return 0;
}

/* imgbuild --gc */
static int
run_gc (const struct cli *c)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (c->opt.store);
  struct ib_store *s = NULL;
  struct ib_gc_result g;
  int r = ib_store_open_existing (root, &s, &err);
  if (r == 0)
    r = ib_store_gc (s, &g, &err);
  ib_store_free (s);
  if (r < 0)
    return ib_error_report ("imgbuild", &err);
  if (c->opt.json)
    {
      cJSON *j = cJSON_CreateObject ();
      cJSON_AddStringToObject (j, "store", root);
      cJSON_AddNumberToObject (j, "blobs_removed", (double) g.blobs_removed);
      cJSON_AddNumberToObject (j, "bytes_removed", (double) g.bytes_removed);
      cJSON_AddNumberToObject (j, "blobs_kept", (double) g.blobs_kept);
      cJSON_AddNumberToObject (j, "temporaries", (double) g.temporaries);
      cJSON_AddNumberToObject (j, "cache_entries", (double) g.cache_entries);
      cJSON_AddNumberToObject (j, "referrers_dropped", (double) g.referrers_dropped);
      cleanup_free char *text = cJSON_PrintUnformatted (j);
      cJSON_Delete (j);
      puts (text);
    }
  if (!c->opt.quiet)
    fprintf (stderr, "imgbuild: gc %s: %zu blobs removed (%.1f MB), %zu kept, %zu referrers dropped, %zu temporaries, "
             "%zu cache entries\n",
             root, g.blobs_removed, (double) g.bytes_removed / 1e6, g.blobs_kept, g.referrers_dropped, g.temporaries,
             g.cache_entries);
  return 0;
}

/* --hosts: checked before a byte is built; needs a registry (--push) that
 * the nodes pull the candidate from. */
static int
cluster_hosts (struct cli *c, ib_error_t *err)
{
  if (c->cluster.hosts == NULL)
    return c->cluster.launcher || c->cluster.comm_port
               ? ib_error (err, IB_EUSAGE, "--launcher and --comm-port go with --hosts")
               : 0;
  struct ib_hosts h;
  enum ib_launcher l;
  if (ib_hosts_parse (c->cluster.hosts, &h, err) < 0 || ib_launcher_choose (c->cluster.launcher, &l, err) < 0)
    return -1;
  ib_hosts_clear (&h);
  bool pushed = false;
  for (size_t i = 0; i < c->n_outputs; i++)
    pushed |= strncmp (c->outputs[i], "docker://", 9) == 0;
  if (!pushed)
    return ib_error (err, IB_EUSAGE, "--hosts: the nodes pull the image from a registry: add --push docker://HOST/REPO:TAG");
  c->opt.cluster = &c->cluster;
  return 0;
}

/* --load HOST and --nodes FILE, checked before a byte is built. */
static int
load_hosts (struct cli *c, ib_error_t *err)
{
  for (size_t i = 0; i < c->n_load_hosts; i++)
    if (c->load_hosts[i][0] && ib_docker_host_check (c->load_hosts[i], err) < 0)
      return ib_error_wrap (err, "--load");
  if (c->nodes_file && ib_load_nodes_file (c->nodes_file, &c->load_hosts, &c->n_load_hosts, err) < 0)
    return -1;
  c->opt.load_hosts = c->load_hosts;
  c->opt.n_load_hosts = c->n_load_hosts;
  return 0;
}

int
main (int argc, char **argv)
{
  ib_heap_bound ();
  struct cli c = { 0 };
  if (parse_args (argc, argv, &c) < 0)
    {
      fputs (usage, stderr);
      return IB_EUSAGE;
    }
  if (c.gc)
    return run_gc (&c);
  ib_error_t err = NULL;
  struct ib_definition *def = NULL;
  size_t n_given = c.n_load_hosts;
  int r = load_hosts (&c, &err);
  if (r == 0)
    r = cluster_hosts (&c, &err);
  if (r == 0 && c.file)
    r = ib_definition_from_dockerfile (c.file, c.context, c.build_args, c.n_build_args, &def, &err);
  else if (r == 0)
    {
      cleanup_free char *dir = ib_definition_find (c.target);
      r = ib_definition_load (dir, &def, &err);
    }
  if (r == 0 && c.lock)
    {
      size_t pinned = 0;
      r = ib_lock_run (def, &c.opt, &pinned, &err);
      if (r == 0)
        {
          cleanup_free char *path = ib_lock_path (def);
          if (!c.opt.quiet)
            fprintf (stderr, "imgbuild: %zu targets pinned against %s\n", pinned, c.opt.from ? c.opt.from : def->from);
          printf ("%s\n", path);
        }
    }
  else if (r == 0)
    {
      ib_digest manifest;
      r = ib_build_run (def, &c.opt, &manifest, &err);
      if (r == 0 && !c.opt.json)
        printf ("%s %s\n", c.opt.name ? c.opt.name : def->name, manifest.s);
    }
  ib_definition_free (def);
  for (size_t i = n_given; i < c.n_load_hosts; i++)
    free (c.load_hosts[i]);
  free (c.load_hosts);
  free (c.outputs);
  free (c.build_args);
  free (c.reports);
  return r < 0 ? ib_error_report ("imgbuild", &err) : 0;
}
