/* The smoke test's parts that run without a GPU: which cubin CUDA would
 * load (kplan), NCCL's log (real logs of NCCL 2.28 on two H200s, from
 * tests/gpu/smoke.sh, in tests/unit/data), the launch contract, the kernel
 * probe's results, the GPU list, and the [smoke]/[run] definition lines. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layers/runner/contract.h"
#include "builder/definition/definition.h"
#include "builder/smoke/gpuinfo.h"
#include "builder/smoke/kprobe_result.h"
#include "builder/smoke/nccl_log.h"
#include "kernels/kplan.h"
#include "kernels/payload.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

#ifndef IB_IMAGES_DIR
#define IB_IMAGES_DIR "images"
#endif

static struct ib_cuda_entry
entry (enum ib_cuda_kind kind, unsigned sm, char variant, bool relocatable, char **kernels, size_t n)
{
  struct ib_cuda_entry e = { .kind = kind, .sm = sm, .variant = variant, .relocatable = relocatable,
                             .compression = "none", .n_kernels = n, .kernels = kernels };
  return e;
}

void
kplan_select_follows_cuda_rules (struct test_ctx *t)
{
  char *a[] = { "kernel_a" }, *b[] = { "_Z8kernel_bPf" }, *ab[] = { "kernel_a", "_Z8kernel_bPf" };
  struct ib_cuda_entry es[] = {
    entry (IB_CUDA_SASS, 121, 'a', false, a, 1), /* 0 */
    entry (IB_CUDA_SASS, 90, 0, false, a, 1),    /* 1 */
    entry (IB_CUDA_SASS, 90, 'a', false, a, 1),  /* 2 */
    entry (IB_CUDA_SASS, 80, 0, false, ab, 2),   /* 3 */
    entry (IB_CUDA_PTX, 100, 0, false, ab, 2),   /* 4 */
    entry (IB_CUDA_SASS, 100, 0, true, ab, 2),   /* 5: -rdc, never loaded */
    entry (IB_CUDA_SASS, 120, 0, false, b, 1),   /* 6 */
    entry (IB_CUDA_SASS, 100, 'f', false, a, 1), /* 7 */
  };
  struct ib_cuda_file f = { .n = sizeof (es) / sizeof (es[0]), .e = es };
  const char *sym = NULL;
  struct
  {
    const char *kernel;
    unsigned major, minor;
    long want;
  } cases[] = {
    { "kernel_a", 9, 0, 2 },   /* sm_90a before sm_90 */
    { "kernel_a", 12, 1, 0 },  /* sm_121a on 12.1 */
    { "kernel_a", 12, 0, -1 }, /* sm_121a does not run on 12.0, sm_90/80 not on 12.x */
    { "kernel_a", 8, 6, 3 },   /* sm_80 runs on 8.6 */
    { "kernel_a", 10, 3, 7 },  /* sm_100f on its family */
    { "kernel_b", 12, 1, 6 },  /* the mangled name, sm_120 on 12.1 */
    { "kernel_b", 10, 0, -1 }, /* only relocatable SASS and PTX for 10.0: not loadable */
    { "kernel_b", 8, 9, 3 },   /* sm_80 on 8.9 */
    { "kernel_b", 9, 0, -1 },  /* never across a major version */
    { "kernel_c", 9, 0, -1 },
  };
  for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
    {
      struct ib_compute_capability cc = { cases[i].major, cases[i].minor };
      long got = ib_kplan_select (&f, cases[i].kernel, cc, &sym);
      CHECK (t, got == cases[i].want);
      if (got != cases[i].want)
        fprintf (stderr, "  %s on %u.%u: got %ld, want %ld\n", cases[i].kernel, cases[i].major, cases[i].minor, got,
                 cases[i].want);
    }
  struct ib_compute_capability ada = { 8, 9 };
  CHECK (t, ib_kplan_select (&f, "kernel_b", ada, &sym) == 3);
  CHECK_STR (t, sym, "_Z8kernel_bPf");
}

/* An entry is read back by its recorded place only where the file has it:
 * a place past the end (a kernel cache entry of other content) or none at
 * all is an error naming the file, never a read of whatever lies there. */
void
kplan_entry_place_is_checked (struct test_ctx *t)
{
  char path[4096];
  snprintf (path, sizeof (path), "%s/entry.bin", test_tmpdir ());
  char bytes[100] = { 0 };
  ib_error_t err = NULL;
  CHECK (t, ib_write_file_atomic (path, bytes, sizeof (bytes), 0644, &err) == 0);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  CHECK (t, fd >= 0);
  struct ib_cuda_entry e = entry (IB_CUDA_SASS, 90, 'a', false, NULL, 0);
  struct ib_payload pl;
  e.compression = "zstd", e.offset = 60, e.stored = 40, e.uncompressed_size = 500;
  CHECK (t, ib_cuda_entry_payload (&e, fd, "/x.so", &pl, &err) == 0);
  CHECK (t, pl.off == 60 && pl.stored == 40 && pl.size == 500 && pl.codec == IB_PAYLOAD_ZSTD && pl.fd == fd);
  e.compression = "none", e.offset = 0, e.stored = 100, e.uncompressed_size = 100;
  CHECK (t, ib_cuda_entry_payload (&e, fd, "/x.so", &pl, &err) == 0 && pl.codec == IB_PAYLOAD_PLAIN);
  e.offset = 61, e.stored = 40;
  CHECK (t, ib_cuda_entry_payload (&e, fd, "/x.so", &pl, &err) < 0);
  CHECK (t, err && strstr (err->msg, "`/x.so`: no entry of 40 bytes at offset 61 (the file is 100 bytes)"));
  ib_error_release (&err);
  e.offset = 0, e.stored = 0; /* no place recorded */
  CHECK (t, ib_cuda_entry_payload (&e, fd, "/x.so", &pl, &err) < 0);
  ib_error_release (&err);
  close (fd);
}

static char *
fixture (const char *name)
{
  char path[4096];
  snprintf (path, sizeof (path), "%s/../tests/unit/data/%s", IB_IMAGES_DIR, name);
  char *text = NULL;
  ib_error_t err = NULL;
  if (ib_read_file (path, 1 << 22, &text, NULL, &err) < 0)
    {
      fprintf (stderr, "  %s\n", err->msg);
      ib_error_release (&err);
      return ib_xstrdup ("");
    }
  return text;
}

void
nccl_log_h200_p2p (struct test_ctx *t)
{
  char *text = fixture ("nccl-2.28-h200x2-p2p.log");
  struct ib_nccl_log l;
  ib_nccl_log_parse (text, &l);
  CHECK_STR (t, l.version, "2.28.3+cuda13.0");
  CHECK (t, l.n_pairs == 2);
  for (size_t i = 0; i < l.n_pairs; i++)
    {
      CHECK_STR (t, l.pairs[i].transport, "P2P/CUMEM");
      CHECK (t, l.pairs[i].channels == 32);
      CHECK (t, l.pairs[i].others == NULL);
    }
  /* The world communicator (its commId) and its split, each once for
   * both ranks. */
  CHECK (t, l.n_comms == 2);
  for (size_t i = 0; i < l.n_comms; i++)
    CHECK (t, l.comms[i].nranks == 2 && l.comms[i].nnodes == 1 && l.comms[i].coll_channels == 24
                  && l.comms[i].nvls_channels == 0 && l.comms[i].p2p_channels == 32);
  /* The split is named by its parent's commId, split number and color. */
  CHECK (t, l.n_comms == 2 && strncmp (l.comms[0].id, "0x", 2) == 0 && strncmp (l.comms[1].id, "0x", 2) == 0);
  CHECK (t, l.n_comms == 2 && (strstr (l.comms[0].id, "/1/0") != NULL) != (strstr (l.comms[1].id, "/1/0") != NULL));
  CHECK (t, l.n_settings == 1 && strcmp (l.settings[0], "NCCL_NVLS_ENABLE=0") == 0);
  CHECK (t, ib_nccl_log_unexpected (&l, "P2P") == NULL);
  CHECK (t, ib_nccl_log_unexpected (&l, "NET/IB") != NULL);
  /* Only the name-resolution noise of a machine without DNS. */
  CHECK (t, l.n_warnings >= 1 && ib_nccl_log_cause (&l) == NULL);
  char *shown = ib_nccl_log_strip_info (text);
  CHECK (t, strstr (shown, "NCCL INFO") == NULL && strstr (shown, "dcp2_smoke: PASS") != NULL);
  cJSON *j = ib_nccl_log_json (&l);
  CHECK (t, cJSON_GetArraySize (cJSON_GetObjectItem (j, "pairs")) == 2);
  cJSON_Delete (j);
  free (shown);
  ib_nccl_log_clear (&l);
  free (text);
}

void
nccl_log_h200_fallbacks (struct test_ctx *t)
{
  char *text = fixture ("nccl-2.28-h200x2-socket.log");
  struct ib_nccl_log l;
  ib_nccl_log_parse (text, &l);
  CHECK (t, l.n_pairs == 2);
  const struct ib_nccl_pair *odd = ib_nccl_log_unexpected (&l, "P2P");
  CHECK (t, odd && ib_nccl_transport_is (odd->transport, "NET/Socket"));
  CHECK (t, ib_nccl_log_unexpected (&l, "NET/Socket") == NULL);
  CHECK (t, ib_nccl_log_unexpected (&l, "net") == NULL);
  bool p2p_off = false, shm_off = false;
  for (size_t i = 0; i < l.n_settings; i++)
    {
      p2p_off |= strcmp (l.settings[i], "NCCL_P2P_DISABLE=1") == 0;
      shm_off |= strcmp (l.settings[i], "NCCL_SHM_DISABLE=1") == 0;
    }
  CHECK (t, p2p_off && shm_off);
  ib_nccl_log_clear (&l);
  free (text);
  text = fixture ("nccl-2.28-h200x2-shm.log");
  ib_nccl_log_parse (text, &l);
  CHECK (t, l.n_pairs == 2 && ib_nccl_log_unexpected (&l, "SHM") == NULL);
  CHECK (t, l.n_pairs && strcmp (l.pairs[0].transport, "SHM/direct/direct") == 0);
  CHECK (t, ib_nccl_log_unexpected (&l, "P2P") != NULL);
  ib_nccl_log_clear (&l);
  free (text);
  CHECK (t, ib_nccl_transport_is ("P2P/CUMEM/read", "p2p"));
  CHECK (t, !ib_nccl_transport_is ("P2PX", "P2P"));
  CHECK (t, ib_nccl_transport_is ("NET/IB/0/GDRDMA", "NET/IB"));
  CHECK (t, !ib_nccl_transport_is ("NET/IBX/0", "NET/IB"));
}

void
nccl_log_quotes_the_cause (struct test_ctx *t)
{
  const char *text
      = "h:7:7 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "[2026-11-30 10:00:00] h:7:7 [0] misc/socket.cc:298 NCCL WARN Net : error encountered when getting address "
        "info : Temporary failure in name resolution\n"
        "h:7:7 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes, "
        "error: No space left on device (28)\n"
        "h:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
        "h:7:7 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
        "h:7:7 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/IB/1/GDRDMA\n"
        "dcp2_smoke: rank 0: ncclCommInitRank failed: unhandled system error\n";
  struct ib_nccl_log l;
  ib_nccl_log_parse (text, &l);
  CHECK_STR (t, l.version, "2.21.5+cuda12.4");
  const char *cause = ib_nccl_log_cause (&l);
  CHECK (t, cause && strstr (cause, "failed to extend /dev/shm/nccl-abc") != NULL);
  CHECK (t, l.n_pairs == 2 && l.pairs[0].channels == 2);
  CHECK (t, l.n_pairs && l.pairs[0].others && strcmp (l.pairs[0].others, "NET/IB/1/GDRDMA") == 0);
  CHECK (t, ib_nccl_log_unexpected (&l, "NET/IB") == NULL);
  ib_nccl_log_clear (&l);
  /* The real thing: NCCL 2.28 with its cuMem allocations off, SHM, a 1 MiB
   * /dev/shm (tests/gpu/defs/tiny-shm). */
  char *real = fixture ("nccl-2.28-h200x2-shm1m.log");
  ib_nccl_log_parse (real, &l);
  cause = ib_nccl_log_cause (&l);
  CHECK (t, cause && strstr (cause, "Error: failed to extend /dev/shm/nccl-") == cause);
  CHECK (t, cause && strstr (cause, "to 9637892 bytes, error: No space left on device (28)") != NULL);
  CHECK (t, l.n_pairs == 0);
  ib_nccl_log_clear (&l);
  free (real);
}

void
contract_parses_and_refuses (struct test_ctx *t)
{
  unsigned long long v = 0;
  CHECK (t, ib_parse_size ("64m", &v) == 0 && v == 64ull << 20);
  CHECK (t, ib_parse_size ("8G", &v) == 0 && v == 8ull << 30);
  CHECK (t, ib_parse_size ("1MiB", &v) == 0 && v == 1ull << 20);
  CHECK (t, ib_parse_size ("4096", &v) == 0 && v == 4096);
  CHECK (t, ib_parse_size ("0", &v) < 0 && ib_parse_size ("m", &v) < 0 && ib_parse_size ("5x", &v) < 0);
  CHECK (t, ib_parse_size ("99999999999999999999g", &v) < 0);
  struct ib_contract c;
  ib_contract_init (&c);
  CHECK (t, c.shm_bytes == 8ull << 30 && !c.ipc_host && !c.memlock_set && ib_contract_has_gpu (&c, 5));
  ib_error_t err = NULL;
  char *l1[] = { "shm-size", "64m" }, *l2[] = { "ipc", "host" }, *l3[] = { "memlock", "unlimited" };
  char *l4[] = { "cap-add", "ipc_lock", "CAP_SYS_NICE" }, *l5[] = { "devices", "0,2" }, *l6[] = { "dcp", "2" };
  CHECK (t, ib_contract_line (&c, l1, 2, "x:1", &err) == 0 && c.shm_bytes == 64ull << 20);
  CHECK (t, ib_contract_line (&c, l2, 2, "x:2", &err) == 0 && c.ipc_host);
  CHECK (t, ib_contract_line (&c, l3, 2, "x:3", &err) == 0 && c.memlock == IB_CONTRACT_UNLIMITED);
  CHECK (t, ib_contract_line (&c, l4, 3, "x:4", &err) == 0 && c.n_caps == 2);
  CHECK_STR (t, c.n_caps ? c.caps[0] : NULL, "CAP_IPC_LOCK");
  CHECK (t, ib_contract_line (&c, l5, 2, "x:5", &err) == 0);
  CHECK (t, ib_contract_has_gpu (&c, 0) && !ib_contract_has_gpu (&c, 1) && ib_contract_has_gpu (&c, 2));
  CHECK (t, ib_contract_line (&c, l6, 2, "x:6", &err) == 1); /* not the contract's */
  cJSON *j = ib_contract_json (&c);
  char *text = cJSON_PrintUnformatted (j);
  CHECK_STR (t, text, "{\"shm_size\":\"64m\",\"ipc\":\"host\",\"devices\":\"0,2\",\"memlock\":\"unlimited\","
                      "\"capabilities\":[\"CAP_IPC_LOCK\",\"CAP_SYS_NICE\"]}");
  free (text);
  cJSON_Delete (j);
  /* Each key once, [run] and [smoke] together. */
  CHECK (t, ib_contract_line (&c, l1, 2, "x:7", &err) < 0 && err && strstr (err->msg, "x:7: `shm-size`"));
  ib_error_release (&err);
  ib_contract_clear (&c);
  struct
  {
    char *w[3];
    int n;
    const char *msg;
  } bad[] = {
    { { "shm-size", "lots" }, 2, "not a size" },        { { "ipc", "shareable" }, 2, "private` or `host" },
    { { "devices", "0,,1" }, 2, "GPU indexes" },         { { "memlock", "-1" }, 2, "a size" },
    { { "cap-add", "SYS-ADMIN" }, 2, "capability name" }, { { "shm-size", "1g", "2g" }, 3, "expected" },
  };
  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      ib_contract_init (&c);
      CHECK (t, ib_contract_line (&c, bad[i].w, bad[i].n, "x:9", &err) < 0);
      CHECK (t, err && err->class == IB_EDEFINITION && strstr (err->msg, bad[i].msg));
      if (err && !strstr (err->msg, bad[i].msg))
        fprintf (stderr, "  got: %s\n", err->msg);
      ib_error_release (&err);
      ib_contract_clear (&c);
    }
}

void
kprobe_results_against_the_plan (struct test_ctx *t)
{
  struct ib_kplan_item items[] = {
    { .file = "/a.fatbin", .kernel = "ka", .symbol = "ka", .arch = "sm_90a", .gpu = 0, .cc = { 9, 0 },
      .cubin = "x-0.cubin", .gpu_name = "NVIDIA H200" },
    { .file = "/a.fatbin", .kernel = "kb", .symbol = "_Z2kbv", .arch = "sm_90a", .gpu = 0, .cc = { 9, 0 },
      .cubin = "x-0.cubin", .gpu_name = "NVIDIA H200" },
    { .file = "/b.so", .kernel = "kc", .gpu = 0, .cc = { 9, 0 }, .gpu_name = "NVIDIA H200" },
    { .file = "/a.fatbin", .kernel = "kd", .symbol = "kd", .arch = "sm_90a", .gpu = 0, .cc = { 9, 0 },
      .cubin = "x-0.cubin", .gpu_name = "NVIDIA H200" },
  };
  struct ib_kplan plan = { 4, items, 1, 1 };
  const char *out
      = "dcp2_smoke: container: /dev/shm 8589934592 bytes, memlock 8388608\n"
        "kprobe-gpu\t0\tNVIDIA H200\t9.0\t232448\n"
        "kprobe\t0\tpass\t/a.fatbin\tka\tsm_90a\t32\t128\t49024\t128\tlaunched grid 2 block 128 shmem 0\t\n"
        "kprobe\t0\tfail\t/a.fatbin\t_Z2kbv\tsm_90a\t32\t261120\t0\t128\tnot launched\tshared memory: the kernel asks "
        "for 261120 bytes, a block may have 232448 on this GPU\n"
        "kprobe-gpu\t0\tNVIDIA H200\t9.0\t232448\n"
        "dcp2_smoke: kernel probe: 1 of 2 kernels failed (0.50 s)\n";
  struct ib_kprobe_summary s;
  cJSON *j = ib_kprobe_results (&plan, out, &s);
  CHECK (t, s.passed == 1 && s.failed == 1 && s.absent == 1 && s.not_run == 1 && s.launched == 1);
  CHECK_STR (t, s.gpus, "GPU 0 NVIDIA H200 (9.0)");
  CHECK_STR (t, s.first_failure, "kernel kb (/a.fatbin, sm_90a) on GPU 0 (NVIDIA H200, 9.0): shared memory: the "
                                 "kernel asks for 261120 bytes, a block may have 232448 on this GPU");
  const char *want[] = { "pass", "fail", "not on this machine", "not run" };
  for (int i = 0; i < 4; i++)
    CHECK_STR (t, cJSON_GetStringValue (cJSON_GetObjectItem (cJSON_GetArrayItem (j, i), "status")), want[i]);
  CHECK (t, cJSON_GetNumberValue (cJSON_GetObjectItem (cJSON_GetArrayItem (j, 0), "registers")) == 32);
  CHECK (t, cJSON_GetNumberValue (cJSON_GetObjectItem (cJSON_GetArrayItem (j, 1), "shared_static")) == 261120);
  CHECK_STR (t, cJSON_GetStringValue (cJSON_GetObjectItem (cJSON_GetArrayItem (j, 2), "gpu_name")), "NVIDIA H200");
  CHECK (t, cJSON_GetObjectItem (cJSON_GetArrayItem (j, 2), "arch") == NULL);
  cJSON_Delete (j);
  ib_kprobe_summary_clear (&s);
}

/* A cubin that does not load: every kernel in it fails with the same error,
 * and the message blames the cubin and names all its kernels, not the first
 * of them (the corrupted one may be any). */
void
kprobe_results_name_the_cubin_that_does_not_load (struct test_ctx *t)
{
  struct ib_kplan_item items[] = {
    { .file = "/a.fatbin", .kernel = "ka", .symbol = "ka", .arch = "sm_90a", .gpu = 0, .cc = { 9, 0 },
      .cubin = "x-0.cubin", .gpu_name = "NVIDIA H200" },
    { .file = "/a.fatbin", .kernel = "kb", .symbol = "kb", .arch = "sm_90a", .gpu = 0, .cc = { 9, 0 },
      .cubin = "x-0.cubin", .gpu_name = "NVIDIA H200" },
  };
  struct ib_kplan plan = { 2, items, 1, 1 };
  const char *out = "kprobe-gpu\t0\tNVIDIA H200\t9.0\t232448\n"
                    "kprobe\t0\tfail\t/a.fatbin\tka\tsm_90a\t-1\t-1\t-1\t-1\tnot launched\tcuLibraryLoadData: "
                    "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)\n"
                    "kprobe\t0\tfail\t/a.fatbin\tkb\tsm_90a\t-1\t-1\t-1\t-1\tnot launched\tcuLibraryLoadData: "
                    "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)\n";
  struct ib_kprobe_summary s;
  cJSON *j = ib_kprobe_results (&plan, out, &s);
  CHECK (t, s.failed == 2);
  CHECK_STR (t, s.first_failure, "the sm_90a cubin of /a.fatbin does not load on GPU 0 (NVIDIA H200, 9.0): "
                                 "cuLibraryLoadData: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid); "
                                 "its kernels: ka, kb");
  cJSON_Delete (j);
  ib_kprobe_summary_clear (&s);
}

void
gpu_list_parses (struct test_ctx *t)
{
  struct ib_gpu *g = NULL;
  size_t n = 0;
  ib_error_t err = NULL;
  CHECK (t, ib_gpu_parse ("0\t9.0\tNVIDIA H200\n1\t12.1\tNVIDIA GB10\n", &g, &n, &err) == 0 && n == 2);
  CHECK (t, n == 2 && g[1].index == 1 && g[1].cc.major == 12 && g[1].cc.minor == 1);
  CHECK_STR (t, n == 2 ? g[1].name : NULL, "NVIDIA GB10");
  free (g);
  CHECK (t, ib_gpu_parse ("0 9.0 H200\n", &g, &n, &err) < 0 && n == 0 && g == NULL);
  CHECK (t, err && strstr (err->msg, "unexpected line"));
  ib_error_release (&err);
  CHECK (t, ib_gpu_parse ("", &g, &n, &err) == 0 && n == 0);
}

void
definition_smoke_run_contract_and_recipes (struct test_ctx *t)
{
  const char *head = "[image]\nname = x:1\nfrom = b:1\n";
  char *conf = ib_xasprintf ("%s[run]\nshm-size 64m\nipc private\n[smoke]\nkernels /k.fatbin\nmemlock unlimited\n"
                             "cap-add IPC_LOCK\nexpect-transport NET/IB\n"
                             "launch k1 grid=2 block=128 shmem=0 args=buf:64,i32:1,i64:-2,f32:0.5\n",
                             head);
  test_write (test_tmpdir (), "image.conf", conf);
  free (conf);
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_definition_load (test_tmpdir (), &d, &err) == 0);
  if (err)
    fprintf (stderr, "  %s\n", err->msg);
  ib_error_release (&err);
  if (d)
    {
      CHECK (t, d->contract.shm_bytes == 64ull << 20 && d->contract.memlock == IB_CONTRACT_UNLIMITED);
      CHECK (t, d->contract.n_caps == 1);
      CHECK_STR (t, d->smoke_expect_transport, "NET/IB");
      CHECK (t, d->n_launch == 1);
      CHECK_STR (t, d->n_launch ? d->launch[0].recipe : NULL, "grid=2 block=128 shmem=0 args=buf:64,i32:1,i64:-2,f32:0.5");
      /* [run] is recorded with the gate sections, for imgverify --smoke. */
      CHECK (t, d->gate_text && strstr (d->gate_text, "[run]\nshm-size 64m\n") != NULL);
      ib_definition_free (d);
    }
  const char *bad[][2] = {
    { "[run]\nkernels /k\n", "unknown key `kernels` in [run]" },
    { "[run]\nshm-size 1g\n[smoke]\nkernels /k\nshm-size 2g\n", "given twice" },
    { "[smoke]\nkernels /k\nexpect-transport TCP\n", "expect-transport `TCP`" },
    { "[smoke]\nkernels /k\nlaunch k1 grid=1 args=ptr:8\n", "argument `ptr:8`" },
    { "[smoke]\nkernels /k\nlaunch k1 grid=1 threads=3\n", "unknown word `threads=3`" },
    { "[smoke]\nkernels /k\nlaunch k1\n", "expected `launch KERNEL" },
  };
  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      char *text = ib_xasprintf ("%s%s", head, bad[i][0]);
      test_write (test_tmpdir (), "image.conf", text);
      free (text);
      d = NULL;
      CHECK (t, ib_definition_load (test_tmpdir (), &d, &err) < 0);
      CHECK (t, err && err->class == IB_EDEFINITION && strstr (err->msg, bad[i][1]));
      if (err && !strstr (err->msg, bad[i][1]))
        fprintf (stderr, "  got: %s\n", err->msg);
      ib_error_release (&err);
      ib_definition_free (d);
    }
}
