#include "kernels/target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

/* ---- what NVIDIA documents ----------------------------------------------- */

/* Each CUDA release: the Linux driver it needs for full support (CUDA
 * Toolkit release notes, table "CUDA Toolkit and Corresponding Driver
 * Versions", the GA row of each release), and the PTX ISA its compilers
 * write, which is the newest a driver of that branch can JIT (PTX ISA
 * reference, "Release Notes": PTX ISA X.Y is introduced by CUDA A.B).
 * 12.7 was never released as a toolkit; the 565 branch reports it
 * (nvidia-smi "CUDA Version: 12.7") and its JIT takes PTX ISA 8.6. */
static const struct
{
  unsigned cuda;
  struct ib_driver_version driver;
  unsigned ptx;
} releases[] = {
  { 11000, { 450, 36, 6 }, 70 },  { 11010, { 455, 23, 0 }, 71 },  { 11020, { 460, 27, 3 }, 72 },
  { 11030, { 465, 19, 1 }, 73 },  { 11040, { 470, 42, 1 }, 74 },  { 11050, { 495, 29, 5 }, 75 },
  { 11060, { 510, 39, 1 }, 76 },  { 11070, { 515, 43, 4 }, 77 },  { 11080, { 520, 61, 5 }, 78 },
  { 12000, { 525, 60, 13 }, 80 }, { 12010, { 530, 30, 2 }, 81 },  { 12020, { 535, 54, 3 }, 82 },
  { 12030, { 545, 23, 6 }, 83 },  { 12040, { 550, 54, 14 }, 84 }, { 12050, { 555, 42, 2 }, 85 },
  { 12060, { 560, 28, 3 }, 85 },  { 12070, { 565, 57, 1 }, 86 },  { 12080, { 570, 26, 0 }, 87 },
  { 12090, { 575, 51, 3 }, 88 },  { 13000, { 580, 65, 6 }, 90 },  { 13010, { 590, 44, 1 }, 91 },
};

/* Minor-version compatibility (CUDA release notes, table "CUDA Toolkit and
 * Minimum Required Driver Version for CUDA Minor Version Compatibility"):
 * an application built with any X.Y runtime runs on a driver of at least
 * this for X, without the features (and PTX JIT) newer than the driver. */
static const struct
{
  unsigned major;
  struct ib_driver_version driver;
} major_floors[] = {
  { 11, { 450, 80, 2 } },
  { 12, { 525, 60, 13 } },
  { 13, { 580, 0, 0 } },
};

/* The first CUDA release whose nvcc/ptxas accepts each GPU (CUDA release
 * notes of that release, and `nvcc --list-gpu-arch` of 13.0): the arch-
 * specific sm_90a came with 12.0, sm_100/sm_120 with 12.8, sm_103/sm_121
 * with 12.9 (ptxas 12.8 says "Value 'sm_121a' is not defined for option
 * 'gpu-name'"), sm_110 (formerly sm_101) with 13.0. */
static const struct
{
  struct ib_compute_capability cc;
  unsigned cuda;
} gpus[] = {
  { { 7, 0 }, 9000 },   { { 7, 5 }, 10000 },  { { 8, 0 }, 11000 },  { { 8, 6 }, 11010 },
  { { 8, 7 }, 11040 },  { { 8, 9 }, 11080 },  { { 9, 0 }, 12000 },  { { 10, 0 }, 12080 },
  { { 10, 3 }, 12090 }, { { 11, 0 }, 13000 }, { { 12, 0 }, 12080 }, { { 12, 1 }, 12090 },
};

#define N(a) (sizeof (a) / sizeof ((a)[0]))

int
ib_driver_version_cmp (struct ib_driver_version a, struct ib_driver_version b)
{
  if (a.major != b.major)
    return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor)
    return a.minor < b.minor ? -1 : 1;
  return a.patch < b.patch ? -1 : a.patch > b.patch;
}

unsigned
ib_driver_max_cuda (struct ib_driver_version d)
{
  unsigned best = 0;
  for (size_t i = 0; i < N (releases); i++)
    if (ib_driver_version_cmp (d, releases[i].driver) >= 0)
      best = releases[i].cuda;
  return best;
}

unsigned
ib_driver_max_ptx (struct ib_driver_version d)
{
  unsigned best = 0;
  for (size_t i = 0; i < N (releases); i++)
    if (ib_driver_version_cmp (d, releases[i].driver) >= 0 && releases[i].ptx > best)
      best = releases[i].ptx;
  return best;
}

bool
ib_cuda_min_driver (unsigned cuda, struct ib_driver_version *full, struct ib_driver_version *major_floor)
{
  bool known = false;
  for (size_t i = 0; i < N (releases); i++)
    if (releases[i].cuda <= cuda)
      {
        *full = releases[i].driver;
        known = true;
      }
  *major_floor = *full;
  for (size_t i = 0; i < N (major_floors); i++)
    if (major_floors[i].major == cuda / 1000)
      *major_floor = major_floors[i].driver;
  return known;
}

unsigned
ib_cuda_for_gpu (struct ib_compute_capability cc)
{
  for (size_t i = 0; i < N (gpus); i++)
    if (gpus[i].cc.major == cc.major && gpus[i].cc.minor == cc.minor)
      return gpus[i].cuda;
  return 0;
}

/* ---- versions ------------------------------------------------------------ */

void
ib_cuda_version_str (unsigned v, char *buf, size_t n)
{
  snprintf (buf, n, "%u.%u", v / 1000, v % 1000 / 10);
}

void
ib_driver_version_str (struct ib_driver_version d, char *buf, size_t n)
{
  if (d.patch)
    snprintf (buf, n, "%u.%02u.%02u", d.major, d.minor, d.patch);
  else if (d.minor)
    snprintf (buf, n, "%u.%02u", d.major, d.minor);
  else
    snprintf (buf, n, "%u", d.major);
}

int
ib_driver_version_parse (const char *s, struct ib_driver_version *out)
{
  unsigned a = 0, b = 0, c = 0;
  int used = 0;
  int k = sscanf (s, "%u%n.%u%n.%u%n", &a, &used, &b, &used, &c, &used);
  if (k < 1 || s[used] != '\0' || a < 100 || a > 9999)
    return -1;
  *out = (struct ib_driver_version) { a, b, c };
  return 0;
}

unsigned
ib_cuda_version_parse (const char *s)
{
  unsigned a = 0, b = 0;
  int k = sscanf (s, "%u.%u", &a, &b);
  if (k < 1 || a < 1 || a > 99 || b > 99)
    return 0;
  return a * 1000 + b * 10;
}

unsigned
ib_cuda_version_of_name (const char *path)
{
  const char *base = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;
  const char *so = strstr (base, ".so.");
  return so ? ib_cuda_version_parse (so + 4) : 0;
}

#define MARK "Cuda compilation tools, release "
#define SCAN (1u << 20)

int
ib_cuda_version_of_fd (int fd, unsigned *out, ib_error_t *err)
{
  cleanup_free char *buf = ib_xmalloc (SCAN + 1);
  size_t keep = 0;
  *out = 0;
  for (off_t at = 0;;)
    {
      ssize_t n = pread (fd, buf + keep, SCAN - keep, at);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ib_error_errno (err, errno, IB_EENV, "read");
      if (n == 0)
        return 0;
      at += n;
      size_t len = keep + (size_t) n;
      buf[len] = '\0';
      for (char *p = buf; (p = memmem (p, len - (size_t) (p - buf), MARK, strlen (MARK)));)
        {
          p += strlen (MARK);
          unsigned a, b;
          /* The format string "release %d.%d," is there too: skipped. */
          if ((size_t) (p - buf) + 8 <= len && sscanf (p, "%2u.%2u,", &a, &b) == 2 && a >= 1)
            {
              *out = a * 1000 + b * 10;
              return 0;
            }
        }
      /* Keep a tail so that a mark cut between two reads is found. */
      keep = len < 64 ? len : 64;
      memmove (buf, buf + len - keep, keep);
    }
}

/* ---- [target] ------------------------------------------------------------ */

static void
add_str (char ***v, size_t *n, const char *s)
{
  *v = ib_xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = ib_xstrdup (s);
}

int
ib_target_parse (struct ib_target *t, const char *key, const char *value, const char *origin, ib_error_t *err)
{
  t->present = true;
  if (strcmp (key, "gpu") == 0)
    {
      cleanup_free char *copy = ib_xstrdup (value);
      char *save = NULL;
      for (char *w = strtok_r (copy, " \t,", &save); w; w = strtok_r (NULL, " \t,", &save))
        {
          struct ib_compute_capability cc;
          if (ib_compute_capability_parse (w, &cc) < 0)
            return ib_error (err, IB_EDEFINITION, "%s: gpu `%s` is not a compute capability like 12.1", origin, w);
          t->gpus = ib_xrealloc (t->gpus, (t->n_gpus + 1) * sizeof (*t->gpus));
          t->gpus[t->n_gpus++] = cc;
        }
      return 0;
    }
  if (strcmp (key, "driver") == 0)
    {
      if (ib_driver_version_parse (value, &t->driver) < 0)
        return ib_error (err, IB_EDEFINITION, "%s: driver `%s` is not an NVIDIA driver version like 580.95.05",
                         origin, value);
      return 0;
    }
  if (strcmp (key, "platform") == 0)
    {
      free (t->platform);
      t->platform = ib_xstrdup (value);
      return 0;
    }
  if (strcmp (key, "libcuda") == 0 && value[0] == '/')
    {
      add_str (&t->libcuda, &t->n_libcuda, value);
      return 0;
    }
  return ib_error (err, IB_EDEFINITION, "%s: expected `gpu = 12.1`, `driver = 580.95.05`, `platform = linux/arm64` "
                   "or `libcuda = /PATH` in [target]", origin);
}

void
ib_target_clear (struct ib_target *t)
{
  free (t->gpus);
  free (t->platform);
  for (size_t i = 0; i < t->n_libcuda; i++)
    free (t->libcuda[i]);
  free (t->libcuda);
  memset (t, 0, sizeof (*t));
}

const struct ib_compute_capability *
ib_target_gpus (const struct ib_target *t, size_t *n)
{
  static const struct ib_compute_capability gb10 = { 12, 1 };
  if (t == NULL || t->n_gpus == 0)
    {
      *n = 1;
      return &gb10;
    }
  *n = t->n_gpus;
  return t->gpus;
}

struct ib_driver_version
ib_target_driver (const struct ib_target *t)
{
  struct ib_driver_version d = { 0, 0, 0 };
  if (t && t->driver.major)
    return t->driver;
  ib_driver_version_parse (IB_DEFAULT_DRIVER, &d);
  return d;
}
