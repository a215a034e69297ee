/* A recipe judged against an image, one line per check, each naming the
 * recipe line it judges:
 *   flag   every --flag of args is one the image's `vllm serve` declares
 *          (pyinventory.h), its value one of the declared choices;
 *          unknown flags fail, what the static reading cannot settle is
 *          "unchecked";
 *   env    every [env] variable is read by the image (its Python, or a C
 *          getenv in a shared object that holds the name), or is a known
 *          outside variable (ib_recipe_outside_variable); TORCH_CUDA_ARCH_LIST
 *          and FLASHINFER_CUDA_ARCH_LIST name architectures the image's GPU
 *          code has SASS for (else the first requests JIT-compile);
 *   mount  each container path is absolute, its parents are folders of the
 *          image or missing (the runtime creates them), and a mount over a
 *          folder the image fills hides what is there (prebaked kernels:
 *          an error; other files: a warning);
 *   shape  TP x PP spread over the nodes, the DCP size divides TP.
 * Depends on layers/, kernels/ and symbol-check/ (the Python lexer), never
 * on builder/. */
#ifndef IB_RCHECK_H
#define IB_RCHECK_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "builder/recipe/pyinventory.h"
#include "builder/recipe/recipe.h"

enum ib_rstatus
{
  IB_R_PASS,
  IB_R_FAIL,
  IB_R_UNCHECKED,
  IB_R_WARN,
};

struct ib_rline
{
  int line;
  enum ib_rstatus status;
  char *check;   /* flag, env, arch, mount, shape */
  char *subject; /* "--dcp-comm-backend", "DSV41_ENGRAM_DIR", "/root/.cache/flashinfer" */
  char *message;
};

struct ib_rcheck
{
  char *recipe;
  size_t n;
  struct ib_rline *l;
  size_t counts[4]; /* by status */
  size_t py_files, flags_declared, env_reads, so_scanned;
};

int ib_recipe_check_image (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                           const struct ib_recipe *r, struct ib_rcheck **out, ib_error_t *err);
void ib_rcheck_free (struct ib_rcheck *c);
/* Append to line I's message (the builder adds where a fix would come from). */
void ib_rcheck_append (struct ib_rcheck *c, size_t i, const char *text);
const char *ib_rstatus_name (enum ib_rstatus s);
/* "RECIPE:LINE: CHECK SUBJECT: STATUS: MESSAGE", one line per check. */
void ib_rcheck_print (FILE *out, const struct ib_rcheck *c, bool failures_only);
cJSON *ib_rcheck_json (const struct ib_rcheck *c);

/* Variables the image need not read itself: the documented list of
 * libraries and runtimes outside it (HF_*, NCCL_*, CUDA_*, OMP_NUM_THREADS,
 * ...).  Returns who reads it, or NULL. */
const char *ib_recipe_outside_variable (const char *name);

/* The Python files of VIEW under a dist-packages or site-packages folder
 * whose path holds "/PACKAGE/" (the image's vLLM), read into INV. */
int ib_py_inventory_of_image (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                              const char *package, struct ib_py_inventory *inv, ib_error_t *err);

#endif
