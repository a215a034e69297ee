/* Running an image as an OCI bundle with a real runtime (runc; crun where
 * the cgroup set-up lets it).  The root file system is the image's layers,
 * each extracted once into the store (whiteouts become overlayfs whiteouts)
 * and stacked read-only with overlayfs; a program from the build machine is
 * bound in read-only; GPUs are injected the way the NVIDIA container
 * toolkit does: a CDI spec when one exists (/etc/cdi, /var/run/cdi), else
 * the device nodes /dev/nvidia* and the host driver's libraries (libcuda.so.*
 * and its companions), read-only. */
#ifndef IB_BUNDLE_H
#define IB_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/image/image.h"
#include "layers/store/store.h"
#include "layers/runner/contract.h"

struct ib_run_options
{
  const char *program;        /* on the build machine */
  const char *program_target; /* where it appears in the container */
  char *const *args;          /* after the program */
  size_t n_args;
  char *const *env;           /* added to the image's Env */
  size_t n_env;
  bool gpus;                  /* inject the GPUs */
  unsigned long long shm_bytes; /* the size of /dev/shm; 0: 8 GiB */
  int timeout_s;
  const struct ib_contract *contract; /* NULL: the defaults (contract.h) */
  const char *bind_dir;       /* a folder of the build machine, read-only, */
  const char *bind_target;    /* at this path in the container (or NULL) */
  /* The runtime's state folder and the container's name (NULL: a folder
   * of the bundle and a name of its own), so that a node's containers can
   * be listed and killed by name (`runc --root STATE_ROOT list`). */
  const char *state_root;
  const char *container_id;
  /* A process of its own session that outlives this one: when this
   * process ends, however it ends (a launcher's SIGTERM, SIGKILL, a CI
   * job cancelled), it kills and deletes the container and removes the
   * bundle, so that no container is left running on the node.  Every
   * caller sets it: without it a killed imgbuild left its smoke test's
   * container running, GPUs held. */
  bool reaper;
  const char *reap_also; /* a folder the reaper removes too (NULL: none) */
};

struct ib_run_result
{
  int exit_code;   /* of the program; 124 on timeout */
  char *output;    /* stdout and stderr, interleaved */
  char *runtime;   /* "runc 1.1.5" */
  char *gpu_source; /* "CDI /etc/cdi/nvidia.json" or "devices + /usr/local/nvidia/lib64" */
  int n_gpus;
};

/* Does REL (clean, relative) pass through a symbolic link below ROOT, its
 * last component included when WITH_LAST?  Nothing extracted is written
 * through one: an image's link may name any place on this machine. */
bool ib_through_symlink (const char *root, const char *rel, bool with_last);

/* Layer I of IMG as a folder of the store, extracted once (whiteouts as
 * overlayfs whiteouts): the folder appears (rename) only complete, with its
 * digests checked. */
int ib_image_layer_dir (struct ib_store *s, const struct ib_image *img, size_t i, char **out, ib_error_t *err);

/* The folder of the host driver's libcuda.so.1 (IMGBUILD_DRIVER_DIR, else
 * the usual places), or NULL. */
const char *ib_driver_dir (void);

/* How many NVIDIA GPUs this machine shows (/dev/nvidia0..). */
int ib_gpu_count (void);

int ib_run_image (struct ib_store *s, const struct ib_image *img, const struct ib_run_options *o,
                  struct ib_run_result *res, ib_error_t *err);
void ib_run_result_clear (struct ib_run_result *r);

/* Kill and delete every container of the runtime's STATE_ROOT whose name
 * starts with PREFIX, and unmount and remove its bundle: what a run left
 * behind when its process and its reaper were both stopped.  *N: how many. */
int ib_containers_sweep (const char *state_root, const char *prefix, size_t *n, ib_error_t *err);

#endif
