#include "kernels/dcp2/kprobe.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUlibrary, *CUkernel, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;

/* The driver API's numbers (cuda.h). */
enum
{
  ATTR_CC_MAJOR = 75,
  ATTR_CC_MINOR = 76,
  ATTR_SHARED_OPTIN = 97,
  FUNC_MAX_THREADS = 0,
  FUNC_SHARED = 1,
  FUNC_REGS = 4,
  FUNC_MAX_DYNAMIC_SHARED = 8,
  DEFAULT_SHARED = 48 * 1024,
};

struct cu
{
  CUresult (*Init) (unsigned);
  CUresult (*DeviceGet) (CUdevice *, int);
  CUresult (*DeviceGetAttribute) (int *, int, CUdevice);
  CUresult (*DeviceGetName) (char *, int, CUdevice);
  CUresult (*PrimaryCtxRetain) (CUcontext *, CUdevice);
  CUresult (*PrimaryCtxReset) (CUdevice);
  CUresult (*CtxSetCurrent) (CUcontext);
  CUresult (*CtxSynchronize) (void);
  CUresult (*LibraryLoadData) (CUlibrary *, const void *, void *, void **, unsigned, void *, void **, unsigned);
  CUresult (*LibraryUnload) (CUlibrary);
  CUresult (*LibraryGetKernel) (CUkernel *, CUlibrary, const char *);
  CUresult (*KernelGetFunction) (CUfunction *, CUkernel);
  CUresult (*FuncGetAttribute) (int *, int, CUfunction);
  CUresult (*FuncSetAttribute) (CUfunction, int, int);
  CUresult (*FuncGetParamInfo) (CUfunction, size_t, size_t *, size_t *);
  CUresult (*MemAlloc) (CUdeviceptr *, size_t);
  CUresult (*MemsetD8) (CUdeviceptr, unsigned char, size_t);
  CUresult (*MemFree) (CUdeviceptr);
  CUresult (*LaunchKernel) (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void **, void **);
  CUresult (*GetErrorName) (CUresult, const char **);
  CUresult (*GetErrorString) (CUresult, const char **);
};

static int
load_cu (struct cu *c)
{
  void *lib = dlopen ("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL)
    {
      fprintf (stderr, "dcp2_smoke: kernel probe: cannot load the CUDA driver: %s\n", dlerror ());
      return -1;
    }
  static const struct
  {
    size_t off;
    const char *names[3];
    int optional;
  } syms[] = {
#define S(f, opt, ...) { offsetof (struct cu, f), { __VA_ARGS__ }, opt }
    S (Init, 0, "cuInit"),
    S (DeviceGet, 0, "cuDeviceGet"),
    S (DeviceGetAttribute, 0, "cuDeviceGetAttribute"),
    S (DeviceGetName, 0, "cuDeviceGetName"),
    S (PrimaryCtxRetain, 0, "cuDevicePrimaryCtxRetain"),
    S (PrimaryCtxReset, 0, "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset"),
    S (CtxSetCurrent, 0, "cuCtxSetCurrent"),
    S (CtxSynchronize, 0, "cuCtxSynchronize"),
    S (LibraryLoadData, 0, "cuLibraryLoadData"),
    S (LibraryUnload, 0, "cuLibraryUnload"),
    S (LibraryGetKernel, 0, "cuLibraryGetKernel"),
    S (KernelGetFunction, 0, "cuKernelGetFunction"),
    S (FuncGetAttribute, 0, "cuFuncGetAttribute"),
    S (FuncSetAttribute, 0, "cuFuncSetAttribute"),
    S (FuncGetParamInfo, 1, "cuFuncGetParamInfo"),
    S (MemAlloc, 0, "cuMemAlloc_v2", "cuMemAlloc"),
    S (MemsetD8, 0, "cuMemsetD8_v2", "cuMemsetD8"),
    S (MemFree, 0, "cuMemFree_v2", "cuMemFree"),
    S (LaunchKernel, 0, "cuLaunchKernel"),
    S (GetErrorName, 0, "cuGetErrorName"),
    S (GetErrorString, 0, "cuGetErrorString"),
#undef S
  };
  for (size_t i = 0; i < sizeof (syms) / sizeof (syms[0]); i++)
    {
      void *p = NULL;
      for (int k = 0; k < 3 && syms[i].names[k] && !p; k++)
        p = dlsym (lib, syms[i].names[k]);
      if (p == NULL && !syms[i].optional)
        {
          fprintf (stderr, "dcp2_smoke: kernel probe: the CUDA driver has no %s (older than CUDA 12?)\n",
                   syms[i].names[0]);
          return -1;
        }
      memcpy ((char *) c + syms[i].off, &p, sizeof (p));
    }
  return 0;
}

/* "STEP: CUDA_ERROR_X (its text)" */
static void
cu_error (const struct cu *c, CUresult r, const char *step, char *buf, size_t n)
{
  const char *name = "?", *text = "?";
  c->GetErrorName (r, &name);
  c->GetErrorString (r, &text);
  snprintf (buf, n, "%s: %s (%s)", step, name, text);
}

struct gpu
{
  int index;
  CUdevice dev;
  CUcontext ctx;
  int optin;
};

static int
use_gpu (const struct cu *c, struct gpu *g, int index, char *err, size_t n)
{
  CUresult r;
  char name[128] = "";
  int major = 0, minor = 0;
  g->index = index;
  if ((r = c->DeviceGet (&g->dev, index)) || (r = c->PrimaryCtxRetain (&g->ctx, g->dev))
      || (r = c->CtxSetCurrent (g->ctx)))
    {
      cu_error (c, r, "open the GPU", err, n);
      return -1;
    }
  c->DeviceGetName (name, sizeof (name), g->dev);
  c->DeviceGetAttribute (&major, ATTR_CC_MAJOR, g->dev);
  c->DeviceGetAttribute (&minor, ATTR_CC_MINOR, g->dev);
  c->DeviceGetAttribute (&g->optin, ATTR_SHARED_OPTIN, g->dev);
  printf ("kprobe-gpu\t%d\t%s\t%d.%d\t%d\n", index, name, major, minor, g->optin);
  return 0;
}

/* A launch recipe: grid=N block=N [shmem=BYTES] [args=SPEC,...]. */
struct recipe
{
  unsigned grid, block, shmem;
  int n_args;
  char kind[32];      /* 'b' buffer, 'i' i32, 'l' i64, 'f' f32 */
  uint64_t value[32]; /* the bytes of a scalar, or a buffer's size */
};

static int
parse_recipe (const char *text, struct recipe *r, char *err, size_t n)
{
  memset (r, 0, sizeof (*r));
  r->grid = r->block = 1;
  char copy[1024];
  snprintf (copy, sizeof (copy), "%s", text);
  for (char *save = NULL, *w = strtok_r (copy, " ", &save); w; w = strtok_r (NULL, " ", &save))
    {
      if (sscanf (w, "grid=%u", &r->grid) == 1 || sscanf (w, "block=%u", &r->block) == 1
          || sscanf (w, "shmem=%u", &r->shmem) == 1)
        continue;
      if (strncmp (w, "args=", 5) != 0)
        return snprintf (err, n, "launch recipe: unknown word `%s`", w), -1;
      for (char *s2 = NULL, *a = strtok_r (w + 5, ",", &s2); a; a = strtok_r (NULL, ",", &s2))
        {
          if (r->n_args == 32)
            return snprintf (err, n, "launch recipe: more than 32 arguments"), -1;
          int i = r->n_args++;
          char *colon = strchr (a, ':');
          if (colon == NULL)
            return snprintf (err, n, "launch recipe: argument `%s` is not TYPE:VALUE", a), -1;
          *colon = '\0';
          const char *v = colon + 1;
          if (strcmp (a, "buf") == 0)
            r->kind[i] = 'b', r->value[i] = strtoull (v, NULL, 0);
          else if (strcmp (a, "i32") == 0)
            {
              int32_t x = (int32_t) strtol (v, NULL, 0);
              r->kind[i] = 'i', memcpy (&r->value[i], &x, 4);
            }
          else if (strcmp (a, "i64") == 0)
            {
              int64_t x = strtoll (v, NULL, 0);
              r->kind[i] = 'l', memcpy (&r->value[i], &x, 8);
            }
          else if (strcmp (a, "f32") == 0)
            {
              float x = strtof (v, NULL);
              r->kind[i] = 'f', memcpy (&r->value[i], &x, 4);
            }
          else
            return snprintf (err, n, "launch recipe: unknown argument type `%s`", a), -1;
        }
    }
  return 0;
}

static size_t
arg_size (char kind)
{
  return kind == 'b' || kind == 'l' ? 8 : 4;
}

/* Launch F once by RECIPE (or with no arguments); LAUNCH says what happened.
 * Returns -1 with ERR set when a step failed. */
static int
launch (const struct cu *c, const struct gpu *g, CUfunction f, int smem, const char *recipe_text, char *launch_,
        size_t ln, char *err, size_t n)
{
  int params = -1;
  for (size_t i = 0; c->FuncGetParamInfo && i < 1024; i++)
    {
      size_t off, size;
      if (c->FuncGetParamInfo (f, i, &off, &size) != 0)
        {
          params = (int) i;
          break;
        }
    }
  struct recipe r;
  if (recipe_text == NULL)
    {
      if (params != 0)
        {
          snprintf (launch_, ln, params < 0 ? "not launched: no launch recipe" : "not launched: takes %d argument%s, no launch recipe", params, params == 1 ? "" : "s");
          return 0;
        }
      memset (&r, 0, sizeof (r));
      r.grid = r.block = 1;
    }
  else if (parse_recipe (recipe_text, &r, err, n) < 0)
    return -1;
  if (params >= 0 && params != r.n_args)
    return snprintf (err, n, "launch recipe: %d argument%s, the kernel takes %d", r.n_args, r.n_args == 1 ? "" : "s",
                     params),
           -1;
  for (int i = 0; params > 0 && i < params; i++)
    {
      size_t off, size;
      c->FuncGetParamInfo (f, (size_t) i, &off, &size);
      if (size != arg_size (r.kind[i]))
        return snprintf (err, n, "launch recipe: argument %d has %zu bytes, the kernel's has %zu", i + 1,
                         arg_size (r.kind[i]), size),
               -1;
    }
  if ((long) smem + r.shmem > g->optin)
    return snprintf (err, n, "shared memory: %d static + %u dynamic bytes > the %d a block may have on this GPU", smem,
                     r.shmem, g->optin),
           -1;
  CUresult cr;
  if (r.shmem > DEFAULT_SHARED && (cr = c->FuncSetAttribute (f, FUNC_MAX_DYNAMIC_SHARED, (int) r.shmem)))
    return cu_error (c, cr, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", err, n), -1;
  CUdeviceptr bufs[32] = { 0 };
  void *args[32];
  int ret = 0;
  for (int i = 0; i < r.n_args && ret == 0; i++)
    {
      if (r.kind[i] == 'b')
        {
          if ((cr = c->MemAlloc (&bufs[i], r.value[i] ? r.value[i] : 16))
              || (cr = c->MemsetD8 (bufs[i], 0, r.value[i] ? r.value[i] : 16)))
            ret = -1, cu_error (c, cr, "cuMemAlloc", err, n);
          args[i] = &bufs[i];
        }
      else
        args[i] = &r.value[i];
    }
  if (ret == 0 && (cr = c->LaunchKernel (f, r.grid, 1, 1, r.block, 1, 1, r.shmem, NULL, args, NULL)))
    ret = -1, cu_error (c, cr, "cuLaunchKernel", err, n);
  if (ret == 0 && (cr = c->CtxSynchronize ()))
    ret = -1, cu_error (c, cr, "the launch (cuCtxSynchronize)", err, n);
  for (int i = 0; i < r.n_args; i++)
    if (bufs[i])
      c->MemFree (bufs[i]);
  if (ret == 0)
    snprintf (launch_, ln, "launched grid %u block %u shmem %u", r.grid, r.block, r.shmem);
  return ret;
}

static void *
read_file (const char *path, char *err, size_t n)
{
  FILE *f = fopen (path, "rb");
  if (f == NULL)
    return snprintf (err, n, "read %.200s: %s", path, strerror (errno)), NULL;
  fseek (f, 0, SEEK_END);
  long len = ftell (f);
  fseek (f, 0, SEEK_SET);
  char *buf = malloc ((size_t) len + 1);
  if (len < 0 || fread (buf, 1, (size_t) len, f) != (size_t) len)
    {
      free (buf);
      buf = NULL;
      snprintf (err, n, "read %.200s", path);
    }
  fclose (f);
  return buf;
}

/* One probe; 0 pass, 1 fail. */
static int
probe (const struct cu *c, struct gpu *g, const char *dir, char *const *w)
{
  const char *cubin = w[1], *arch = w[2], *file = w[3], *symbol = w[4], *recipe = strcmp (w[5], "-") ? w[5] : NULL;
  char err[512] = "", launched[160] = "not launched", path[4096];
  int regs = -1, smem = -1, maxdyn = -1, threads = -1, failed = 1;
  CUlibrary lib = NULL;
  CUkernel k;
  CUfunction f;
  CUresult r;
  snprintf (path, sizeof (path), "%s/%s", dir, cubin);
  void *image = read_file (path, err, sizeof (err));
  if (image == NULL)
    ;
  else if ((r = c->LibraryLoadData (&lib, image, NULL, NULL, 0, NULL, NULL, 0)))
    cu_error (c, r, "cuLibraryLoadData", err, sizeof (err));
  else if ((r = c->LibraryGetKernel (&k, lib, symbol)))
    cu_error (c, r, "cuLibraryGetKernel", err, sizeof (err));
  else if ((r = c->KernelGetFunction (&f, k)))
    cu_error (c, r, "cuKernelGetFunction", err, sizeof (err));
  else if ((r = c->FuncGetAttribute (&regs, FUNC_REGS, f)) || (r = c->FuncGetAttribute (&smem, FUNC_SHARED, f))
           || (r = c->FuncGetAttribute (&maxdyn, FUNC_MAX_DYNAMIC_SHARED, f))
           || (r = c->FuncGetAttribute (&threads, FUNC_MAX_THREADS, f)))
    cu_error (c, r, "cuFuncGetAttribute", err, sizeof (err));
  else if (smem > g->optin)
    snprintf (err, sizeof (err), "shared memory: the kernel asks for %d bytes, a block may have %d on this GPU", smem,
              g->optin);
  else if (launch (c, g, f, smem, recipe, launched, sizeof (launched), err, sizeof (err)) == 0)
    failed = 0;
  if (lib)
    c->LibraryUnload (lib);
  free (image);
  for (char *p = err; *p; p++)
    if (*p == '\t' || *p == '\n')
      *p = ' ';
  printf ("kprobe\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", g->index, failed ? "fail" : "pass", file, symbol,
          arch, regs, smem, maxdyn, threads, launched, err);
  fflush (stdout);
  /* A failed launch can leave the context unusable: start the next probe
   * on a fresh one, so that it is judged on its own. */
  if (failed)
    {
      char e2[256];
      c->PrimaryCtxReset (g->dev);
      if (use_gpu (c, g, g->index, e2, sizeof (e2)) < 0)
        fprintf (stderr, "dcp2_smoke: kernel probe: %s\n", e2);
    }
  return failed;
}

int
kprobe_run (const char *dir)
{
  struct cu c;
  char path[4096], line[8192], err[256];
  if (load_cu (&c) < 0)
    return -1;
  CUresult r = c.Init (0);
  if (r)
    {
      cu_error (&c, r, "cuInit", err, sizeof (err));
      fprintf (stderr, "dcp2_smoke: kernel probe: %s\n", err);
      return -1;
    }
  snprintf (path, sizeof (path), "%s/manifest", dir);
  FILE *m = fopen (path, "r");
  if (m == NULL)
    {
      fprintf (stderr, "dcp2_smoke: kernel probe: cannot read %s: %s\n", path, strerror (errno));
      return -1;
    }
  struct gpu g = { .index = -1 };
  int failed = 0, probes = 0;
  struct timespec t0, t1;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  while (fgets (line, sizeof (line), m))
    {
      line[strcspn (line, "\n")] = '\0';
      char *w[6] = { 0 };
      int n = 0;
      for (char *save = NULL, *t = strtok_r (line, "\t", &save); t && n < 6; t = strtok_r (NULL, "\t", &save))
        w[n++] = t;
      if (n != 6)
        continue;
      int index = atoi (w[0]);
      if (index != g.index && use_gpu (&c, &g, index, err, sizeof (err)) < 0)
        {
          fprintf (stderr, "dcp2_smoke: kernel probe: GPU %d: %s\n", index, err);
          fclose (m);
          return -1;
        }
      failed += probe (&c, &g, dir, w);
      probes++;
    }
  fclose (m);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  printf ("dcp2_smoke: kernel probe: %d of %d kernel%s failed (%.2f s)\n", failed, probes, probes == 1 ? "" : "s",
          (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9);
  return failed;
}
