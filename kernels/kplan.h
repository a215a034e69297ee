/* The kernel probe's plan: for every kernel a definition requires
 * ([kernels] require), on each kind of GPU the machine has, the one cubin
 * that CUDA's loader picks from the file's fatbin for that GPU, extracted
 * into a folder with a manifest that the probe in the container
 * (kernels/dcp2/kprobe.c) loads, looks up, measures and launches.  A kernel
 * with no SASS that runs on a GPU present is planned as "not on this
 * machine": it is never loaded, and never counts as proven.
 *
 * Manifest (one line per probe, tab-separated):
 *   GPU-INDEX  CUBIN  ARCH  IMAGE-FILE  SYMBOL  RECIPE ("-": none)
 * A recipe is the rest of a [smoke] `launch` line: grid=N block=N
 * [shmem=BYTES] [args=SPEC,...] with SPEC buf:BYTES | i32:N | i64:N | f32:X. */
#ifndef IB_KPLAN_H
#define IB_KPLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "util/requirement.h"
#include "kernels/cudabin.h"
#include "kernels/kgate.h"

struct ib_gpu
{
  int index;
  char name[96];
  struct ib_compute_capability cc;
};

struct ib_kplan_item
{
  char *file;   /* "/usr/lib/…/libx.so" */
  char *kernel; /* as required */
  char *symbol; /* as the cubin names it; NULL when not on this machine */
  char arch[16]; /* "sm_90a"; "" when not on this machine */
  int gpu;       /* the GPU it is probed on (the first of its kind) */
  char gpu_name[96];
  struct ib_compute_capability cc;
  char *cubin;  /* "3.cubin" in the plan's folder; NULL when not on this machine */
  char *recipe; /* the launch recipe, or NULL */
};

struct ib_kplan
{
  size_t n;
  struct ib_kplan_item *items;
  size_t cubins, extracted; /* distinct cubins; of them, read out of the layers (not cached) */
};

/* A [smoke] `launch KERNEL RECIPE...` line, kept as written. */
struct ib_launch_recipe
{
  char *kernel;
  char *recipe;
};

/* The SASS entry of F that CUDA loads for KERNEL on a GPU of compute
 * capability CC: among the loadable (not relocatable) SASS entries that
 * hold the kernel and run there without a JIT, the highest SM, and at equal
 * SM an arch-specific (a) before a family (f) before a plain one.  -1 when
 * none runs there.  *SYMBOL (when not NULL) receives the kernel's name in
 * that cubin. */
long ib_kplan_select (const struct ib_cuda_file *f, const char *kernel, struct ib_compute_capability cc,
                      const char **symbol);

/* Plan every required kernel on GPUS (one probe per kind of GPU), extract
 * the chosen cubins into DIR (which exists) and write DIR/manifest.  The
 * cubins are kept in the store's cache by the file's digest and the
 * entry's index, and DIR gets hard links to them. */
/* How the plan reads a file of the image: OPEN, when given, opens it (from
 * a folder the layer was extracted into, say) and *FD is -1 when it cannot;
 * otherwise, and then, the layers are streamed (ib_extract_entries). */
typedef int (*ib_kplan_open_fn) (void *data, const struct ib_fs_entry *e, int *fd, ib_error_t *err);

int ib_kplan_make (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                   const struct ib_requirement *req, size_t n_req, const struct ib_gpu *gpus, size_t n_gpus,
                   const struct ib_launch_recipe *recipes, size_t n_recipes, ib_kplan_open_fn open_fn,
                   void *open_data, const char *dir, struct ib_kplan *out, ib_error_t *err);
void ib_kplan_clear (struct ib_kplan *p);

#endif
