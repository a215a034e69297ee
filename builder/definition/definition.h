/* Image definitions: what to put over which base, and under which name.
 *
 * A definition is a folder with an `image.conf` (format: docs/definitions.md, image.conf(5)); the
 * same content can come from a Dockerfile of the FROM/COPY/ENV/LABEL/ARG/CMD
 * subset, and both give the same image digest.  Parsing only reads the
 * text: whether targets are sane, sources exist and targets exist in the base
 * is the definition gate's job (gate_definition.c), so that every problem is
 * reported in one run with the line it comes from. */
#ifndef IB_DEFINITION_H
#define IB_DEFINITION_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "layers/tar/tarlayer.h"
#include "kernels/kgate.h"
#include "kernels/kplan.h"
#include "kernels/prebake.h"
#include "kernels/target.h"
#include "symbol-check/symgate.h"
#include "layers/runner/contract.h"
#include "builder/definition/native_conf.h"
#include "util/error.h"

struct ib_copy_item
{
  enum ib_entry_type type;
  char *raw_target;  /* as written: manifest targets are relative to DEST */
  char *dest;        /* the manifest's DEST folder, or NULL when raw_target is a whole path */
  char *source;      /* files: on the build machine */
  char *link;        /* symlinks */
  int mode;          /* -1: default */
  char *origin;      /* "image.conf:12" or "manifest.txt:3", for messages */
};

/* A line of a `[copy OS/ARCH[/VARIANT]]` section: parsed only for an image
 * of that platform (ib_definition_select_platform), so that a definition can
 * name each platform's files (busybox, the loader, native libraries) and the
 * sources of other platforms need not exist. */
struct ib_platform_line
{
  char *platform; /* as written: "linux/arm64" */
  char *line;
  char *origin;   /* "image.conf:12" */
};

struct ib_definition
{
  char *dir;       /* the folder sources are relative to */
  char *file;      /* image.conf or the Dockerfile */
  char *name;      /* NAME:TAG */
  char *from;      /* base reference */
  char *platform;  /* for FROM scratch, or to pick from an index; may be NULL */
  char *cmd_json;  /* may be NULL */
  int gzip_level;
  size_t n_items;
  struct ib_copy_item *items;
  size_t n_platform_lines;
  struct ib_platform_line *platform_lines;
  bool platform_selected; /* ib_definition_select_platform ran */
  size_t n_new;
  char **new_paths; /* absolute; a trailing '/' covers a folder */
  size_t n_env;
  char **env;       /* KEY=VALUE */
  size_t n_labels;
  char **labels;    /* k0, v0, k1, v1 ... */
  /* [symbols] */
  char *python_path;
  size_t n_check_packages;
  char **check_packages;
  size_t n_py_required;
  struct ib_requirement *py_required;
  size_t n_native_required;
  struct ib_requirement *native_required;
  bool unresolved_is_error;
  size_t n_allow_missing;
  char **allow_missing; /* modules stated absent: their imports are warnings */
  /* [native] */
  struct ib_native_conf native;
  /* [kernels] */
  size_t n_targets;
  struct ib_compute_capability *targets;
  size_t n_kernel_required;
  struct ib_requirement *kernel_required;
  /* [target] */
  struct ib_target target;
  /* [prebake] */
  size_t n_prebake;
  struct ib_prebake_source *prebake;
  size_t n_prebake_arches;
  char **prebake_arches;
  size_t n_prebake_flags;
  char **prebake_flags;
  int prebake_jobs;
  /* [smoke] */
  bool has_smoke;
  char *smoke_program; /* on the build machine; NULL: dcp2_smoke beside imgbuild */
  char *smoke_kernels; /* image path of the prebaked fatbin */
  char *smoke_nccl;    /* image path; NULL: the first libnccl.so* of the image */
  int smoke_dcp, smoke_ranks, smoke_timeout;
  int smoke_gpus_per_rank; /* [smoke] gpus-per-rank 0|1 (default 1): 0 for a program that needs none */
  size_t n_smoke_args;
  char **smoke_args;
  /* [recipe]: launcher recipes (`file = PATH`, relative to DIR) the recipe
   * gate checks against the image; the first also gives the smoke test
   * its shape (ranks, DCP, shm size). */
  size_t n_recipes;
  char **recipes;
  char **recipe_origins; /* "image.conf:70" */
  char *smoke_expect_transport; /* NULL: P2P on one machine */
  char *smoke_expect_transport_nodes; /* between nodes (--hosts); NULL: NET/IB */
  size_t n_launch;
  struct ib_launch_recipe *launch; /* [smoke] launch KERNEL RECIPE... */
  /* [run] and [smoke]: the launch contract (contract.h) */
  struct ib_contract contract;
  /* The [symbols], [native], [kernels], [target], [smoke] and [run] lines as written: recorded in the
   * image's provenance so that imgverify can run the same gates. */
  char *gate_text;
};

/* A definition of only gate sections (a provenance's gate_text). */
int ib_definition_from_gate_text (const char *text, struct ib_definition **out, ib_error_t *err);

/* PATH is a folder holding image.conf, or an image.conf itself. */
int ib_definition_load (const char *path, struct ib_definition **out, ib_error_t *err);
/* A Dockerfile; BUILD_ARGS are NAME=VALUE overrides of its ARGs. */
int ib_definition_from_dockerfile (const char *path, const char *context, char *const *build_args,
                                   size_t n_build_args, struct ib_definition **out, ib_error_t *err);
void ib_definition_free (struct ib_definition *d);
/* NAME's folder: $IMGBUILD_IMAGES/NAME, ./images/NAME, the source tree's
 * images/NAME, then the installed share/imgbuild/images/NAME; a NAME with a
 * '/' (or ".") is a folder already.  Malloc'd; NAME itself when none is. */
char *ib_definition_find (const char *name);

/* The `[copy OS/ARCH]` lines for the image's platform (CONFIG: an image
 * config's "os", "architecture" and "variant"; a section without a variant
 * matches any) become items, after those of plain [copy]; the lines of other
 * platforms are dropped.  Once per definition: a second call does nothing.
 * *MATCHED (may be NULL) says how many platform lines were taken. */
int ib_definition_select_platform (struct ib_definition *d, const cJSON *config, size_t *matched, ib_error_t *err);

/* The image path an item writes ("/usr/…/x.py"), NULL if it cannot be
 * cleaned (absolute manifest target, ".."). */
char *ib_copy_item_target (const struct ib_copy_item *it);

/* TARGET ("/usr/…") is covered by D's [new] section. */
bool ib_definition_declares_new (const struct ib_definition *d, const char *target);

#endif
