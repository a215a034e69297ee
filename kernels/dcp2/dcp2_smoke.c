/* dcp2_smoke: the DCP2 smoke test, run inside the built image, one process
 * per GPU.  It uses the image's own NCCL (dlopen) and the image's prebaked
 * kernels (a fatbin loaded with the CUDA driver API, which refuses it when
 * it has no SASS for this GPU: no JIT happens), and checks that decode
 * context parallel attention, exchanged with the a2a or ag_rs backend and
 * combined by log-sum-exp, equals full attention computed on one GPU.
 *
 *   dcp2_smoke --kernels FATBIN [--nccl LIB] [--ranks N] [--dcp 2] [--quick]
 *              [--probe DIR] [--rank R --world W [--device D]]
 *
 * With --rank, this process is rank R of W, one of the processes a
 * launcher (mpirun, srun) started across nodes, on GPU D (default 0) of
 * its container; the ranks meet through NCCL_COMM_ID (rank 0's address and
 * port), which NCCL's own bootstrap reads: no file, no home-made
 * rendezvous.  Without it, one process per GPU of this container is forked
 * and rank 0 hands the others NCCL's id through a file.
 *
 * --probe first loads, measures and launches every required kernel of the
 * image (kprobe.h, the manifest imgbuild wrote into DIR); when one fails,
 * the ranks do not start and the exit status is 3.
 *
 * Ranks form DCP groups of consecutive ranks (ncclCommSplit with color
 * rank / dcp, key rank % dcp); each group gets its own inputs, so a wrong
 * split cannot pass.  One line per case and rank; NCCL bandwidth lines the
 * way nccl-tests prints them.  Exit status 0 only when every case passed on
 * every rank.  Self-contained (libc, libdl, libm): it runs in any image. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/dcp2/dcp2_math.h"
#include "kernels/dcp2/kprobe.h"

/* ---- the CUDA driver API and NCCL, by dlopen ----------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef unsigned long long CUdeviceptr;

typedef struct
{
  char internal[128];
} ncclUniqueId;
typedef void *ncclComm_t;
typedef int ncclResult_t;
enum
{
  ncclInt8 = 0,
  ncclFloat32 = 7
};
enum
{
  ncclSum = 0
};

struct api
{
  CUresult (*cuInit) (unsigned);
  CUresult (*cuDeviceGetCount) (int *);
  CUresult (*cuDeviceGet) (CUdevice *, int);
  CUresult (*cuDeviceGetAttribute) (int *, int, CUdevice);
  CUresult (*cuDeviceGetName) (char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain) (CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent) (CUcontext);
  CUresult (*cuCtxSynchronize) (void);
  CUresult (*cuModuleLoadData) (CUmodule *, const void *);
  CUresult (*cuModuleGetFunction) (CUfunction *, CUmodule, const char *);
  CUresult (*cuMemAlloc) (CUdeviceptr *, size_t);
  CUresult (*cuMemFree) (CUdeviceptr);
  CUresult (*cuMemcpyHtoD) (CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH) (void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8) (CUdeviceptr, unsigned char, size_t);
  CUresult (*cuLaunchKernel) (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  CUresult (*cuStreamCreate) (CUstream *, unsigned);
  CUresult (*cuStreamSynchronize) (CUstream);
  CUresult (*cuEventCreate) (CUevent *, unsigned);
  CUresult (*cuEventRecord) (CUevent, CUstream);
  CUresult (*cuEventSynchronize) (CUevent);
  CUresult (*cuEventElapsedTime) (float *, CUevent, CUevent);
  CUresult (*cuGetErrorString) (CUresult, const char **);
  ncclResult_t (*ncclGetVersion) (int *);
  ncclResult_t (*ncclGetUniqueId) (ncclUniqueId *);
  ncclResult_t (*ncclCommInitRank) (ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommSplit) (ncclComm_t, int, int, ncclComm_t *, void *);
  ncclResult_t (*ncclAllGather) (const void *, void *, size_t, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclReduceScatter) (const void *, void *, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclSend) (const void *, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclRecv) (void *, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclGroupStart) (void);
  ncclResult_t (*ncclGroupEnd) (void);
  ncclResult_t (*ncclCommDestroy) (ncclComm_t);
  const char *(*ncclGetErrorString) (ncclResult_t);
};

struct rank_ctx
{
  struct api *a;
  int rank, world, dcp, group, grank;
  ncclComm_t world_comm, dcp_comm;
  CUstream stream;
  CUmodule mod;
  int failures;
  bool quiet;
};

static void
die (const char *fmt, ...)
{
  /* One write: the ranks die at once, and their lines must not mix. */
  char msg[2048];
  va_list ap;
  va_start (ap, fmt);
  int n = snprintf (msg, sizeof (msg), "dcp2_smoke: ");
  n += vsnprintf (msg + n, sizeof (msg) - (size_t) n - 1, fmt, ap);
  va_end (ap);
  if (n > (int) sizeof (msg) - 2)
    n = (int) sizeof (msg) - 2;
  msg[n++] = '\n';
  fflush (stdout);
  if (write (2, msg, (size_t) n) < 0)
    exit (2);
  exit (2);
}

#define CU(ctx, call)                                                                                                  \
  do                                                                                                                   \
    {                                                                                                                  \
      CUresult _r = (ctx)->a->call;                                                                                    \
      if (_r != 0)                                                                                                     \
        {                                                                                                              \
          const char *_s = "?";                                                                                        \
          (ctx)->a->cuGetErrorString (_r, &_s);                                                                        \
          die ("rank %d: %s failed: %s (%d)", (ctx)->rank, #call, _s, _r);                                             \
        }                                                                                                              \
    }                                                                                                                  \
  while (0)

#define NC(ctx, call)                                                                                                  \
  do                                                                                                                   \
    {                                                                                                                  \
      ncclResult_t _r = (ctx)->a->call;                                                                                \
      if (_r != 0)                                                                                                     \
        die ("rank %d: %s failed: %s", (ctx)->rank, #call, (ctx)->a->ncclGetErrorString (_r));                         \
    }                                                                                                                  \
  while (0)

static void *
sym (void *lib, const char *const *names, const char *what)
{
  for (int i = 0; names[i]; i++)
    {
      void *p = dlsym (lib, names[i]);
      if (p)
        return p;
    }
  die ("%s has no %s", what, names[0]);
  return NULL;
}

#define LOAD(lib, field, what, ...)                                                                                    \
  do                                                                                                                   \
    {                                                                                                                  \
      static const char *const _n[] = { __VA_ARGS__, NULL };                                                           \
      *(void **) &a->field = sym (lib, _n, what);                                                                      \
    }                                                                                                                  \
  while (0)

static void
load_api (struct api *a, const char *nccl_path)
{
  void *cu = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (cu == NULL)
    die ("cannot load the CUDA driver (libcuda.so.1): %s; was the GPU injected into the container?", dlerror ());
  LOAD (cu, cuInit, "libcuda", "cuInit");
  LOAD (cu, cuDeviceGetCount, "libcuda", "cuDeviceGetCount");
  LOAD (cu, cuDeviceGet, "libcuda", "cuDeviceGet");
  LOAD (cu, cuDeviceGetAttribute, "libcuda", "cuDeviceGetAttribute");
  LOAD (cu, cuDeviceGetName, "libcuda", "cuDeviceGetName");
  LOAD (cu, cuDevicePrimaryCtxRetain, "libcuda", "cuDevicePrimaryCtxRetain");
  LOAD (cu, cuCtxSetCurrent, "libcuda", "cuCtxSetCurrent");
  LOAD (cu, cuCtxSynchronize, "libcuda", "cuCtxSynchronize");
  LOAD (cu, cuModuleLoadData, "libcuda", "cuModuleLoadData");
  LOAD (cu, cuModuleGetFunction, "libcuda", "cuModuleGetFunction");
  LOAD (cu, cuMemAlloc, "libcuda", "cuMemAlloc_v2", "cuMemAlloc");
  LOAD (cu, cuMemFree, "libcuda", "cuMemFree_v2", "cuMemFree");
  LOAD (cu, cuMemcpyHtoD, "libcuda", "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
  LOAD (cu, cuMemcpyDtoH, "libcuda", "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
  LOAD (cu, cuMemsetD8, "libcuda", "cuMemsetD8_v2", "cuMemsetD8");
  LOAD (cu, cuLaunchKernel, "libcuda", "cuLaunchKernel");
  LOAD (cu, cuStreamCreate, "libcuda", "cuStreamCreate");
  LOAD (cu, cuStreamSynchronize, "libcuda", "cuStreamSynchronize");
  LOAD (cu, cuEventCreate, "libcuda", "cuEventCreate");
  LOAD (cu, cuEventRecord, "libcuda", "cuEventRecord");
  LOAD (cu, cuEventSynchronize, "libcuda", "cuEventSynchronize");
  LOAD (cu, cuEventElapsedTime, "libcuda", "cuEventElapsedTime_v2", "cuEventElapsedTime");
  LOAD (cu, cuGetErrorString, "libcuda", "cuGetErrorString");
  void *nc = dlopen (nccl_path, RTLD_NOW | RTLD_GLOBAL);
  if (nc == NULL)
    die ("the image has no usable NCCL: cannot load %s: %s", nccl_path, dlerror ());
  LOAD (nc, ncclGetVersion, "NCCL", "ncclGetVersion");
  LOAD (nc, ncclGetUniqueId, "NCCL", "ncclGetUniqueId");
  LOAD (nc, ncclCommInitRank, "NCCL", "ncclCommInitRank");
  LOAD (nc, ncclCommSplit, "NCCL", "ncclCommSplit");
  LOAD (nc, ncclAllGather, "NCCL", "ncclAllGather");
  LOAD (nc, ncclReduceScatter, "NCCL", "ncclReduceScatter");
  LOAD (nc, ncclSend, "NCCL", "ncclSend");
  LOAD (nc, ncclRecv, "NCCL", "ncclRecv");
  LOAD (nc, ncclGroupStart, "NCCL", "ncclGroupStart");
  LOAD (nc, ncclGroupEnd, "NCCL", "ncclGroupEnd");
  LOAD (nc, ncclCommDestroy, "NCCL", "ncclCommDestroy");
  LOAD (nc, ncclGetErrorString, "NCCL", "ncclGetErrorString");
}

/* ---- device memory helpers ----------------------------------------------- */

static CUdeviceptr
dalloc (struct rank_ctx *c, size_t n)
{
  CUdeviceptr p = 0;
  CU (c, cuMemAlloc (&p, n ? n : 16));
  CU (c, cuMemsetD8 (p, 0, n ? n : 16));
  return p;
}

/* Upload doubles as fp32 or bf16. */
static CUdeviceptr
upload (struct rank_ctx *c, const double *x, size_t n, bool bf16)
{
  size_t es = bf16 ? 2 : 4;
  void *h = malloc (n * es + 1);
  for (size_t i = 0; i < n; i++)
    {
      if (bf16)
        ((uint16_t *) h)[i] = dcp2_to_bf16 ((float) x[i]);
      else
        ((float *) h)[i] = (float) x[i];
    }
  CUdeviceptr d = dalloc (c, n * es);
  CU (c, cuMemcpyHtoD (d, h, n * es));
  free (h);
  return d;
}

/* Download fp32 or bf16 into floats. */
static float *
download (struct rank_ctx *c, CUdeviceptr d, size_t n, bool bf16)
{
  size_t es = bf16 ? 2 : 4;
  void *h = malloc (n * es + 1);
  CU (c, cuStreamSynchronize (c->stream));
  CU (c, cuMemcpyDtoH (h, d, n * es));
  float *out = malloc (n * sizeof (float) + 1);
  for (size_t i = 0; i < n; i++)
    out[i] = bf16 ? dcp2_from_bf16 (((uint16_t *) h)[i]) : ((float *) h)[i];
  free (h);
  return out;
}

static CUfunction
kernel (struct rank_ctx *c, const char *base, bool bf16)
{
  char name[128];
  snprintf (name, sizeof (name), "%s_%s", base, bf16 ? "bf16" : "f32");
  CUfunction f;
  CUresult r = c->a->cuModuleGetFunction (&f, c->mod, name);
  if (r != 0)
    {
      /* Named: the cubin that this GPU loaded lacks it (the probe saw no
       * code for this GPU and said so; another architecture may have it). */
      const char *s = "?";
      c->a->cuGetErrorString (r, &s);
      die ("rank %d: kernel %s is not in the prebaked kernels that this GPU loaded: cuModuleGetFunction: %s (%d)",
           c->rank, name, s, r);
    }
  return f;
}

static void
launch (struct rank_ctx *c, CUfunction f, unsigned blocks, void **args)
{
  CU (c, cuLaunchKernel (f, blocks, 1, 1, 128, 1, 1, 0, c->stream, args, NULL));
}

/* ---- one case ------------------------------------------------------------ */

struct smoke_case
{
  const char *name;
  int B, H, D;
  long L;
  int interleave;
  bool bf16, base2, a2a;
};

struct inputs
{
  double *q, *k, *v; /* full sequence */
  size_t nq, nkv;
};

static struct inputs
make_inputs (const struct smoke_case *sc, int group, int case_no)
{
  struct inputs in;
  in.nq = (size_t) sc->B * sc->H * sc->D;
  in.nkv = (size_t) sc->B * sc->L * sc->H * sc->D;
  in.q = malloc (sizeof (double) * in.nq + 8);
  in.k = malloc (sizeof (double) * in.nkv + 8);
  in.v = malloc (sizeof (double) * in.nkv + 8);
  /* Each DCP group its own data: a wrong group split mixes two problems. */
  uint64_t seed = 1000003u * (uint64_t) (group + 1) + 7919u * (uint64_t) case_no;
  dcp2_fill (in.q, in.nq, seed);
  dcp2_fill (in.k, in.nkv, seed + 1);
  dcp2_fill (in.v, in.nkv, seed + 2);
  return in;
}

/* This rank's tokens of K or V: [B, Lr, H, D]. */
static double *
shard (const double *x, const struct smoke_case *sc, const long *pos, long Lr)
{
  size_t row = (size_t) sc->H * sc->D;
  double *out = malloc (sizeof (double) * ((size_t) sc->B * Lr * row) + 8);
  for (int b = 0; b < sc->B; b++)
    for (long t = 0; t < Lr; t++)
      memcpy (out + ((size_t) b * Lr + t) * row, x + ((size_t) b * sc->L + pos[t]) * row, row * sizeof (double));
  return out;
}

static void
partial (struct rank_ctx *c, const struct smoke_case *sc, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, long L,
         CUdeviceptr o, CUdeviceptr lse)
{
  int B = sc->B, H = sc->H, D = sc->D, Li = (int) L, b2 = sc->base2;
  void *args[] = { &q, &k, &v, &o, &lse, &B, &H, &D, &Li, &b2 };
  launch (c, kernel (c, "dcp2_attn_partial", sc->bf16), (unsigned) (B * H), args);
}

/* a2a: pack, one grouped send/recv all-to-all, combine this rank's heads. */
static void
exchange_a2a (struct rank_ctx *c, const struct smoke_case *sc, CUdeviceptr o, CUdeviceptr lse, CUdeviceptr out,
              CUdeviceptr lse_out)
{
  int B = sc->B, H = sc->H, D = sc->D, dcp = c->dcp, Hs = H / dcp, b2 = sc->base2;
  size_t slice = (size_t) B * Hs * (D + DCP2_LSE_LANES);
  CUdeviceptr send = dalloc (c, slice * dcp * 4), recv = dalloc (c, slice * dcp * 4);
  void *pack_args[] = { &o, &lse, &send, &B, &H, &D, &dcp };
  launch (c, kernel (c, "dcp2_a2a_pack", sc->bf16), (unsigned) (B * H), pack_args);
  NC (c, ncclGroupStart ());
  for (int peer = 0; peer < dcp; peer++)
    {
      NC (c, ncclSend ((void *) (send + peer * slice * 4), slice, ncclFloat32, peer, c->dcp_comm, c->stream));
      NC (c, ncclRecv ((void *) (recv + peer * slice * 4), slice, ncclFloat32, peer, c->dcp_comm, c->stream));
    }
  NC (c, ncclGroupEnd ());
  void *comb_args[] = { &recv, &out, &lse_out, &dcp, &B, &Hs, &D, &b2 };
  launch (c, kernel (c, "dcp2_a2a_combine", sc->bf16), (unsigned) (B * Hs), comb_args);
  CU (c, cuStreamSynchronize (c->stream));
  c->a->cuMemFree (send);
  c->a->cuMemFree (recv);
}

/* ag_rs: all-gather the LSEs, rescale, reduce-scatter over heads (fp32). */
static void
exchange_agrs (struct rank_ctx *c, const struct smoke_case *sc, CUdeviceptr o, CUdeviceptr lse, CUdeviceptr out,
               CUdeviceptr lse_out)
{
  int B = sc->B, H = sc->H, D = sc->D, dcp = c->dcp, r = c->grank, b2 = sc->base2;
  size_t nlse = (size_t) B * H, nout = (size_t) B * H * D;
  CUdeviceptr lse_all = dalloc (c, nlse * dcp * 4), scaled = dalloc (c, nout * 4);
  NC (c, ncclAllGather ((void *) lse, (void *) lse_all, nlse, ncclFloat32, c->dcp_comm, c->stream));
  void *args[] = { &o, &lse_all, &scaled, &lse_out, &r, &dcp, &B, &H, &D, &b2 };
  launch (c, kernel (c, "dcp2_agrs_rescale", sc->bf16), (unsigned) (B * H), args);
  NC (c, ncclReduceScatter ((void *) scaled, (void *) out, nout / dcp, ncclFloat32, ncclSum, c->dcp_comm, c->stream));
  CU (c, cuStreamSynchronize (c->stream));
  c->a->cuMemFree (lse_all);
  c->a->cuMemFree (scaled);
}

static float *
slice_of (const float *full, const struct smoke_case *sc, int j, int Hs, int width)
{
  float *s = malloc (sizeof (float) * (size_t) sc->B * Hs * width + 4);
  for (int b = 0; b < sc->B; b++)
    memcpy (s + (size_t) b * Hs * width, full + ((size_t) b * sc->H + (size_t) j * Hs) * width,
            sizeof (float) * Hs * width);
  return s;
}

static void
run_case (struct rank_ctx *c, const struct smoke_case *sc, int case_no)
{
  int dcp = c->dcp, Hs = sc->H / dcp;
  struct inputs in = make_inputs (sc, c->group, case_no);
  long *pos = malloc (sizeof (long) * (size_t) (sc->L + 1));
  long Lr = dcp2_local_positions (sc->L, c->grank, dcp, sc->interleave, pos);
  double *k_local = shard (in.k, sc, pos, Lr), *v_local = shard (in.v, sc, pos, Lr);
  CUdeviceptr q = upload (c, in.q, in.nq, sc->bf16);
  CUdeviceptr k = upload (c, k_local, (size_t) sc->B * Lr * sc->H * sc->D, sc->bf16);
  CUdeviceptr v = upload (c, v_local, (size_t) sc->B * Lr * sc->H * sc->D, sc->bf16);
  size_t es = sc->bf16 ? 2 : 4, nout = in.nq;
  CUdeviceptr o = dalloc (c, nout * es), lse = dalloc (c, (size_t) sc->B * sc->H * 4);
  partial (c, sc, q, k, v, Lr, o, lse);
  bool out_bf16 = sc->bf16 && sc->a2a; /* ag_rs reduces in fp32 */
  CUdeviceptr out = dalloc (c, (size_t) sc->B * Hs * sc->D * 4), lse_out = dalloc (c, (size_t) sc->B * Hs * 4);
  if (sc->a2a)
    exchange_a2a (c, sc, o, lse, out, lse_out);
  else
    exchange_agrs (c, sc, o, lse, out, lse_out);
  /* The reference: full attention over every token, on this one GPU. */
  CUdeviceptr kf = upload (c, in.k, in.nkv, sc->bf16), vf = upload (c, in.v, in.nkv, sc->bf16);
  CUdeviceptr of = dalloc (c, nout * es), lf = dalloc (c, (size_t) sc->B * sc->H * 4);
  partial (c, sc, q, kf, vf, sc->L, of, lf);
  float *ref_o = download (c, of, nout, sc->bf16), *ref_l = download (c, lf, (size_t) sc->B * sc->H, false);
  float *got_o = download (c, out, (size_t) sc->B * Hs * sc->D, out_bf16);
  float *got_l = download (c, lse_out, (size_t) sc->B * Hs, false);
  float *want_o = slice_of (ref_o, sc, c->grank, Hs, sc->D), *want_l = slice_of (ref_l, sc, c->grank, Hs, 1);
  double tol = sc->bf16 ? 3e-2 : 1e-5;
  bool ok_o, ok_l, ok_other = true;
  double eo = dcp2_max_error (got_o, want_o, (size_t) sc->B * Hs * sc->D, tol, tol, &ok_o);
  double el = dcp2_max_error (got_l, want_l, (size_t) sc->B * Hs, 1e-4, 1e-4, &ok_l);
  /* Its own heads, not only the right totals: another slice must differ. */
  if (dcp > 1)
    {
      float *other = slice_of (ref_o, sc, (c->grank + 1) % dcp, Hs, sc->D);
      dcp2_max_error (got_o, other, (size_t) sc->B * Hs * sc->D, tol, tol, &ok_other);
      ok_other = !ok_other;
      free (other);
    }
  bool ok = ok_o && ok_l && ok_other;
  c->failures += !ok;
  printf ("case %-34s group %d rank %d (%ld of %ld tokens, heads %d-%d): %s  max|dO| %.3g  max|dLSE| %.3g%s\n",
          sc->name, c->group, c->grank, Lr, sc->L, c->grank * Hs, (c->grank + 1) * Hs - 1, ok ? "ok" : "FAIL", eo, el,
          ok_other ? "" : "  (matches another rank's heads)");
  fflush (stdout);
  CUdeviceptr bufs[] = { q, k, v, o, lse, out, lse_out, kf, vf, of, lf };
  for (size_t i = 0; i < sizeof (bufs) / sizeof (bufs[0]); i++)
    c->a->cuMemFree (bufs[i]);
  free (ref_o), free (ref_l), free (got_o), free (got_l), free (want_o), free (want_l);
  free (k_local), free (v_local), free (pos), free (in.q), free (in.k), free (in.v);
}

/* ---- bandwidth ----------------------------------------------------------- */

static double
elapsed_ms (struct rank_ctx *c, CUevent a, CUevent b)
{
  float ms = 0;
  CU (c, cuEventSynchronize (b));
  CU (c, cuEventElapsedTime (&ms, a, b));
  return ms;
}

enum coll
{
  COLL_A2A_GROUP,
  COLL_ALLGATHER,
  COLL_REDUCESCATTER,
};

/* Run COLL on BYTES (the whole buffer, as nccl-tests counts it); returns
 * the time of one call in ms, averaged. */
static double
time_coll (struct rank_ctx *c, enum coll which, size_t bytes, ncclComm_t comm, int n)
{
  size_t count = bytes / 4;
  CUdeviceptr send = dalloc (c, bytes), recv = dalloc (c, bytes);
  CUevent e0, e1;
  CU (c, cuEventCreate (&e0, 0));
  CU (c, cuEventCreate (&e1, 0));
  const int warm = 3, iters = 10;
  double ms = 0;
  for (int it = 0; it < warm + iters; it++)
    {
      if (it == warm)
        CU (c, cuEventRecord (e0, c->stream));
      if (which == COLL_A2A_GROUP)
        {
          size_t chunk = count / n;
          NC (c, ncclGroupStart ());
          for (int p = 0; p < n; p++)
            {
              NC (c, ncclSend ((void *) (send + p * chunk * 4), chunk, ncclFloat32, p, comm, c->stream));
              NC (c, ncclRecv ((void *) (recv + p * chunk * 4), chunk, ncclFloat32, p, comm, c->stream));
            }
          NC (c, ncclGroupEnd ());
        }
      else if (which == COLL_ALLGATHER)
        NC (c, ncclAllGather ((void *) send, (void *) recv, count / n, ncclFloat32, comm, c->stream));
      else
        NC (c, ncclReduceScatter ((void *) send, (void *) recv, count / n, ncclFloat32, ncclSum, comm, c->stream));
    }
  CU (c, cuEventRecord (e1, c->stream));
  ms = elapsed_ms (c, e0, e1) / iters;
  c->a->cuMemFree (send);
  c->a->cuMemFree (recv);
  return ms;
}

/* nccl-tests' figures: algbw = BYTES (the whole buffer of one rank: what
 * all-gather receives, what reduce-scatter sends, what all-to-all sends)
 * over the time; busbw = algbw x (n-1)/n for all three (nccl-tests'
 * AllGather, ReduceScatter and AlltoAll).  The all-rank figures are
 * printed by rank 0; a DCP group's by its first rank, naming the group. */
static void
report_bw (struct rank_ctx *c, const char *what, size_t bytes, double ms, int n)
{
  double algbw = (double) bytes / (ms / 1e3) / 1e9, busbw = algbw * (n - 1) / n;
  bool group = strstr (what, "(dcp group)") != NULL || strncmp (what, "a2a ", 4) == 0
               || strncmp (what, "plain ", 6) == 0;
  char label[64];
  if (group && strstr (what, "(dcp group)"))
    snprintf (label, sizeof (label), "all-to-all (dcp group %d)", c->group);
  else
    snprintf (label, sizeof (label), "%s", what);
  if (group ? c->grank == 0 && (c->group == 0 || strstr (what, "(dcp group)")) : c->rank == 0)
    printf ("nccl %-26s ranks %d  %10zu B  %9.1f us  algbw %7.2f GB/s  busbw %7.2f GB/s\n", label, n, bytes,
            ms * 1e3, algbw, busbw);
}

static void
bandwidth (struct rank_ctx *c, bool quick)
{
  static const size_t sizes[] = { 1u << 20, 16u << 20, 128u << 20 };
  for (size_t i = 0; i < (quick ? 1u : 3u); i++)
    {
      report_bw (c, "all-to-all (dcp group)", sizes[i], time_coll (c, COLL_A2A_GROUP, sizes[i], c->dcp_comm, c->dcp),
                 c->dcp);
      report_bw (c, "all-gather (all ranks)", sizes[i], time_coll (c, COLL_ALLGATHER, sizes[i], c->world_comm, c->world),
                 c->world);
      report_bw (c, "reduce-scatter (all ranks)", sizes[i],
                 time_coll (c, COLL_REDUCESCATTER, sizes[i], c->world_comm, c->world), c->world);
    }
  /* The a2a exchange of the largest decode shape beside a plain all-to-all
   * of the same size. */
  const int B = 64, H = 64, D = 512;
  size_t packet = (size_t) B * H * (D + DCP2_LSE_LANES) * 4;
  report_bw (c, "a2a packet B64 H64 D512", packet, time_coll (c, COLL_A2A_GROUP, packet, c->dcp_comm, c->dcp), c->dcp);
  size_t plain = (size_t) B * H * D * 4;
  report_bw (c, "plain all-to-all, same size", plain, time_coll (c, COLL_A2A_GROUP, plain, c->dcp_comm, c->dcp),
             c->dcp);
  /* The combine kernel alone: bytes read and written per second. */
  int n = c->dcp, Hs = H / n, b2 = 0;
  CUdeviceptr pk = dalloc (c, packet), out = dalloc (c, (size_t) B * Hs * D * 4), lo = dalloc (c, (size_t) B * Hs * 4);
  CUfunction f = kernel (c, "dcp2_a2a_combine", false);
  int Bi = B, Di = D;
  void *args[] = { &pk, &out, &lo, &n, &Bi, &Hs, &Di, &b2 };
  CUevent e0, e1;
  CU (c, cuEventCreate (&e0, 0));
  CU (c, cuEventCreate (&e1, 0));
  for (int it = 0; it < 3; it++)
    launch (c, f, (unsigned) (B * Hs), args);
  CU (c, cuEventRecord (e0, c->stream));
  for (int it = 0; it < 20; it++)
    launch (c, f, (unsigned) (B * Hs), args);
  CU (c, cuEventRecord (e1, c->stream));
  double ms = elapsed_ms (c, e0, e1) / 20;
  double bytes = (double) packet + (double) B * Hs * D * 4 + (double) B * Hs * 4;
  if (c->rank == 0)
    printf ("kernel dcp2_a2a_combine_f32 B64 H64 D512 dcp %d: %.1f us, %.1f GB/s\n", n, ms * 1e3, bytes / (ms / 1e3) / 1e9);
  c->a->cuMemFree (pk), c->a->cuMemFree (out), c->a->cuMemFree (lo);
}

/* ---- processes ----------------------------------------------------------- */

static void *
read_all (const char *path, size_t *len)
{
  int fd = open (path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0)
    die ("cannot read %s: %s", path, strerror (errno));
  char *buf = malloc ((size_t) st.st_size + 1);
  size_t got = 0;
  while (got < (size_t) st.st_size)
    {
      ssize_t n = read (fd, buf + got, (size_t) st.st_size - got);
      if (n <= 0)
        die ("cannot read %s", path);
      got += (size_t) n;
    }
  close (fd);
  buf[got] = 0;
  *len = got;
  return buf;
}

/* With NCCL_COMM_ID every rank gets the same id from NCCL itself (rank 0
 * opens the bootstrap root at that address in ncclCommInitRank); without
 * it, rank 0 writes the NCCL unique id to a file and the others wait for it. */
static ncclUniqueId
share_id (struct rank_ctx *c, const char *dir)
{
  char path[4096], tmp[4200];
  snprintf (path, sizeof (path), "%s/nccl-id", dir);
  ncclUniqueId id;
  const char *comm_id = getenv ("NCCL_COMM_ID");
  if ((comm_id && *comm_id) || dir == NULL)
    {
      if (!(comm_id && *comm_id))
        die ("rank %d: --rank needs NCCL_COMM_ID (rank 0's ADDRESS:PORT) in the environment", c->rank);
      NC (c, ncclGetUniqueId (&id));
      return id;
    }
  if (c->rank == 0)
    {
      NC (c, ncclGetUniqueId (&id));
      snprintf (tmp, sizeof (tmp), "%s.tmp", path);
      FILE *f = fopen (tmp, "wb");
      if (f == NULL || fwrite (&id, sizeof (id), 1, f) != 1 || fclose (f) != 0 || rename (tmp, path) != 0)
        die ("cannot write %s", path);
      return id;
    }
  for (int i = 0; i < 6000; i++)
    {
      FILE *f = fopen (path, "rb");
      if (f && fread (&id, sizeof (id), 1, f) == 1)
        {
          fclose (f);
          return id;
        }
      if (f)
        fclose (f);
      usleep (10000);
    }
  die ("rank %d: no NCCL id from rank 0 after 60 s", c->rank);
  return id;
}

static const struct smoke_case *
cases (bool quick, size_t *n)
{
  static const struct smoke_case all[] = {
    { "fp32 B4 H16 D128 L1000 I1", 4, 16, 128, 1000, 1, false, false, true },
    { "fp32 B4 H16 D128 L1000 I16", 4, 16, 128, 1000, 16, false, false, true },
    { "fp32 B2 H16 D128 L1 (empty shard)", 2, 16, 128, 1, 1, false, false, true },
    { "fp32 B4 H64 D512 L129 I16 base2", 4, 64, 512, 129, 16, false, true, true },
    { "bf16 B64 H64 D128 L48 I1", 64, 64, 128, 48, 1, true, false, true },
    { "bf16 B16 H16 D512 L64 I16 base2", 16, 16, 512, 64, 16, true, true, true },
    { "fp32 B4 H16 D128 L1000 I1", 4, 16, 128, 1000, 1, false, false, false },
    { "fp32 B4 H16 D128 L1000 I16", 4, 16, 128, 1000, 16, false, false, false },
    { "fp32 B2 H16 D128 L1 (empty shard)", 2, 16, 128, 1, 1, false, false, false },
    { "fp32 B4 H64 D512 L129 I16 base2", 4, 64, 512, 129, 16, false, true, false },
    { "bf16 B64 H64 D128 L48 I1", 64, 64, 128, 48, 1, true, false, false },
    { "bf16 B16 H16 D512 L64 I16 base2", 16, 16, 512, 64, 16, true, true, false },
  };
  static const struct smoke_case few[] = {
    { "fp32 B2 H16 D128 L1 (empty shard)", 2, 16, 128, 1, 1, false, false, true },
    { "fp32 B2 H16 D128 L1 (empty shard)", 2, 16, 128, 1, 1, false, false, false },
  };
  *n = quick ? 2 : sizeof (all) / sizeof (all[0]);
  return quick ? few : all;
}

static int
rank_main (struct api *a, int rank, int world, int dcp, int device, const char *fatbin, const char *dir, bool quick)
{
  struct rank_ctx c = { .a = a, .rank = rank, .world = world, .dcp = dcp };
  c.group = dcp2_group_of (rank, dcp);
  c.grank = dcp2_rank_in_group (rank, dcp);
  CU (&c, cuInit (0));
  int ndev = 0;
  CU (&c, cuDeviceGetCount (&ndev));
  if (dir && ndev < world)
    die ("rank %d: %d GPUs visible, %d ranks asked for", rank, ndev, world);
  if (device >= ndev)
    die ("rank %d: no GPU %d in this container (%d visible)", rank, device, ndev);
  CUdevice dev;
  CUcontext ctx;
  CU (&c, cuDeviceGet (&dev, device));
  CU (&c, cuDevicePrimaryCtxRetain (&ctx, dev));
  CU (&c, cuCtxSetCurrent (ctx));
  int major = 0, minor = 0;
  CU (&c, cuDeviceGetAttribute (&major, 75, dev));
  CU (&c, cuDeviceGetAttribute (&minor, 76, dev));
  size_t len;
  void *image = read_all (fatbin, &len);
  CUresult r = a->cuModuleLoadData (&c.mod, image);
  if (r != 0)
    {
      const char *s = "?";
      a->cuGetErrorString (r, &s);
      die ("rank %d: the prebaked kernels %s do not load on this GPU (compute %d.%d): %s; no SASS for it?", rank,
           fatbin, major, minor, s);
    }
  free (image);
  CU (&c, cuStreamCreate (&c.stream, 0));
  ncclUniqueId id = share_id (&c, dir);
  NC (&c, ncclCommInitRank (&c.world_comm, world, id, rank));
  NC (&c, ncclCommSplit (c.world_comm, c.group, c.grank, &c.dcp_comm, NULL));
  if (rank == 0)
    {
      int v = 0;
      char name[256] = "";
      a->ncclGetVersion (&v);
      a->cuDeviceGetName (name, sizeof (name), dev);
      /* The size of /dev/shm (NCCL's shared-memory transport): the launch
       * contract's shm_size when a recipe gives the shape. */
      struct statvfs shm;
      double shm_gib = statvfs ("/dev/shm", &shm) == 0 ? (double) shm.f_blocks * shm.f_frsize / (1 << 30) : 0;
      printf ("dcp2_smoke: %d ranks, dcp %d (%d groups), %s (compute %d.%d), NCCL %d.%d.%d, kernels %s, /dev/shm %.1f GiB\n",
              world, dcp, world / dcp, name, major, minor, v / 10000, v / 100 % 100, v % 100, fatbin, shm_gib);
      fflush (stdout);
    }
  size_t n;
  const struct smoke_case *sc = cases (quick, &n);
  for (size_t i = 0; i < n; i++)
    {
      struct smoke_case one = sc[i];
      char name[96];
      snprintf (name, sizeof (name), "%s %s", one.a2a ? "a2a" : "ag_rs", one.name);
      one.name = name;
      run_case (&c, &one, (int) i);
    }
  bandwidth (&c, quick);
  a->ncclCommDestroy (c.dcp_comm);
  a->ncclCommDestroy (c.world_comm);
  return c.failures ? 1 : 0;
}

int
main (int argc, char **argv)
{
  const char *fatbin = NULL, *nccl = "libnccl.so.2", *probe_dir = NULL;
  int ranks = 0, dcp = 2, rank = -1, world = 0, device = 0;
  bool quick = false;
  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--kernels") == 0 && i + 1 < argc)
        fatbin = argv[++i];
      else if (strcmp (argv[i], "--nccl") == 0 && i + 1 < argc)
        nccl = argv[++i];
      else if (strcmp (argv[i], "--ranks") == 0 && i + 1 < argc)
        ranks = atoi (argv[++i]);
      else if (strcmp (argv[i], "--dcp") == 0 && i + 1 < argc)
        dcp = atoi (argv[++i]);
      else if (strcmp (argv[i], "--probe") == 0 && i + 1 < argc)
        probe_dir = argv[++i];
      else if (strcmp (argv[i], "--quick") == 0)
        quick = true;
      else if (strcmp (argv[i], "--rank") == 0 && i + 1 < argc)
        rank = atoi (argv[++i]);
      else if (strcmp (argv[i], "--world") == 0 && i + 1 < argc)
        world = atoi (argv[++i]);
      else if (strcmp (argv[i], "--device") == 0 && i + 1 < argc)
        device = atoi (argv[++i]);
      else
        die ("usage: dcp2_smoke --kernels FATBIN [--nccl LIB] [--ranks N] [--dcp D] [--quick] [--rank R --world W "
             "[--device D]]");
    }
  /* Line by line even into a file: ranks _exit() and their output is the report. */
  setvbuf (stdout, NULL, _IOLBF, 0);
  if (fatbin == NULL)
    die ("usage: dcp2_smoke --kernels FATBIN [--nccl LIB] [--ranks N] [--dcp D] [--quick]");
  if (access (fatbin, R_OK) < 0)
    die ("the image has no prebaked DCP2 kernels at %s", fatbin);
  /* What the container got of its launch contract, for imgbuild to check. */
  struct statvfs sv;
  struct rlimit rl;
  if (statvfs ("/dev/shm", &sv) == 0 && getrlimit (RLIMIT_MEMLOCK, &rl) == 0)
    {
      char ml[32];
      if (rl.rlim_cur == RLIM_INFINITY)
        snprintf (ml, sizeof (ml), "unlimited");
      else
        snprintf (ml, sizeof (ml), "%llu", (unsigned long long) rl.rlim_cur);
      printf ("dcp2_smoke: container: /dev/shm %llu bytes, memlock %s\n",
              (unsigned long long) sv.f_blocks * (unsigned long long) sv.f_frsize, ml);
    }
  if (probe_dir)
    {
      /* In a child: CUDA may not be initialised before the ranks' fork(). */
      fflush (stdout);
      pid_t p = fork ();
      if (p == 0)
        {
          int failed = kprobe_run (probe_dir);
          fflush (stdout);
          _exit (failed < 0 ? 2 : failed > 0 ? 3 : 0);
        }
      int st = 0;
      waitpid (p, &st, 0);
      if (!WIFEXITED (st) || WEXITSTATUS (st) != 0)
        {
          if (!WIFEXITED (st) || WEXITSTATUS (st) == 3)
            printf ("dcp2_smoke: FAIL (kernel probe%s)\n", WIFEXITED (st) ? "" : " killed");
          return WIFEXITED (st) ? WEXITSTATUS (st) : 3;
        }
    }
  struct api api;
  load_api (&api, nccl);
  if (rank >= 0)
    {
      /* One rank of a launcher's job: no fork, the launcher ends the
       * others when this one fails. */
      if (world < 1 || rank >= world || dcp < 1 || world % dcp || device < 0)
        die ("rank %d of %d does not form DCP groups of %d", rank, world, dcp);
      fflush (stdout);
      pid_t p = fork (); /* CUDA in a child: a crash is reported, not silent */
      if (p == 0)
        _exit (rank_main (&api, rank, world, dcp, device, fatbin, NULL, quick));
      int st = 0;
      waitpid (p, &st, 0);
      bool ok = WIFEXITED (st) && WEXITSTATUS (st) == 0;
      if (!WIFEXITED (st))
        fprintf (stderr, "dcp2_smoke: rank %d killed by signal %d\n", rank, WTERMSIG (st));
      printf ("dcp2_smoke: rank %d of %d: %s\n", rank, world, ok ? "PASS" : "FAIL");
      return ok ? 0 : 1;
    }
  if (ranks <= 0)
    {
      /* CUDA may not be initialised before fork(): count in a child. */
      pid_t probe = fork ();
      if (probe == 0)
        {
          int n = 0;
          _exit (api.cuInit (0) == 0 && api.cuDeviceGetCount (&n) == 0 ? (n > 100 ? 100 : n) : 0);
        }
      int st = 0;
      waitpid (probe, &st, 0);
      int n = WIFEXITED (st) ? WEXITSTATUS (st) : 0;
      if (n == 0)
        die ("no GPU is visible");
      ranks = n - n % dcp;
    }
  if (dcp < 1 || dcp > 8 || ranks < dcp || ranks % dcp)
    die ("%d ranks do not form DCP groups of %d", ranks, dcp);
  char dir[] = "/tmp/dcp2-smoke-XXXXXX";
  if (mkdtemp (dir) == NULL)
    die ("mkdtemp: %s", strerror (errno));
  fflush (stdout);
  pid_t *pids = calloc ((size_t) ranks, sizeof (pid_t));
  for (int r = 0; r < ranks; r++)
    {
      pids[r] = fork ();
      if (pids[r] == 0)
        _exit (rank_main (&api, r, ranks, dcp, r, fatbin, dir, quick));
      if (pids[r] < 0)
        die ("fork: %s", strerror (errno));
    }
  /* As the ranks end: once one has failed, the others would wait for it
   * in NCCL until the timeout (a 64 MB /dev/shm did that on the H200s),
   * so they are stopped; the report names the rank that failed first. */
  int failed = 0, stopped = 0, first = -1, left = ranks;
  bool stopping = false;
  while (left > 0)
    {
      int st = 0;
      pid_t w = wait (&st);
      if (w < 0)
        break;
      int r = 0;
      while (r < ranks && pids[r] != w)
        r++;
      if (r == ranks)
        continue;
      pids[r] = 0;
      left--;
      if (WIFEXITED (st) && WEXITSTATUS (st) == 0)
        continue;
      bool ours = stopping && WIFSIGNALED (st) && WTERMSIG (st) == SIGKILL;
      stopped += ours;
      failed += !ours;
      if (first < 0)
        first = r;
      fprintf (stderr, "dcp2_smoke: rank %d %s %d%s\n", r, WIFEXITED (st) ? "exited with" : "killed by signal",
               WIFEXITED (st) ? WEXITSTATUS (st) : WTERMSIG (st), ours ? " (stopped: another rank had failed)" : "");
      for (int k = 0; !stopping && k < ranks; k++)
        if (pids[k] > 0)
          kill (pids[k], SIGKILL);
      stopping = true;
    }
  char id[4200];
  snprintf (id, sizeof (id), "%s/nccl-id", dir);
  unlink (id);
  rmdir (dir);
  if (first >= 0)
    printf ("dcp2_smoke: FAIL (%d of %d ranks failed, rank %d first; %d stopped)\n", failed, ranks, first, stopped);
  else
    printf ("dcp2_smoke: PASS (0 of %d ranks failed)\n", ranks);
  return first >= 0 ? 1 : 0;
}
