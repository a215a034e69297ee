/* A launcher recipe (the seed's recipe.toml): the image it runs, the
 * shape it runs in (nodes, tensor/pipeline parallel sizes, the DCP size
 * given in its args, shm size), the `vllm serve` args, the environment and
 * the extra mounts, each with the line it is written at.  Read with a real
 * TOML 1.0 parser (toml.h); what this module judges is the recipe's
 * meaning, never its syntax. */
#ifndef IB_RECIPE_H
#define IB_RECIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

struct ib_recipe_arg
{
  char *text;
  int line;
};

struct ib_recipe_env
{
  char *name, *value;
  int line;
};

struct ib_recipe_mount
{
  char *host, *container;
  bool read_only;
  int line;
};

/* One `--flag` of the args, with its value (the next arg when it does not
 * start with "--", or what follows '=' in "--flag=value"), or NULL. */
struct ib_recipe_flag
{
  const char *name; /* "--block-size" (malloc'd in NAME_BUF when split at '=') */
  const char *value;
  int line, value_line;
  char *name_buf;
};

struct ib_recipe
{
  char *path;
  char *engine, *docker_image, *docker_image_dir;
  int docker_image_line;
  long required_nodes, tensor_parallel_size, pipeline_parallel_size; /* 0: not given */
  int required_nodes_line, tensor_parallel_size_line, pipeline_parallel_size_line;
  long dcp;    /* --decode-context-parallel-size in args, 1 when absent */
  int dcp_line;
  char *shm_size; /* as written, or NULL */
  unsigned long long shm_bytes;
  int shm_size_line;
  size_t n_args, n_env, n_mounts, n_flags;
  struct ib_recipe_arg *args;
  struct ib_recipe_env *env;
  struct ib_recipe_mount *mounts;
  struct ib_recipe_flag *flags;
};

/* Parse TEXT of the recipe PATH.  A syntax error, or a known key of the
 * wrong type, is an IB_EDEFINITION error naming PATH and the line. */
int ib_recipe_parse (const char *text, size_t len, const char *path, struct ib_recipe **out, ib_error_t *err);
int ib_recipe_load (const char *path, struct ib_recipe **out, ib_error_t *err);
void ib_recipe_free (struct ib_recipe *r);

/* Docker's --shm-size: a number with an optional unit b, k, m, g (also kb,
 * mb, gb; powers of 1024, any case).  -1 when malformed. */
int ib_size_parse (const char *s, unsigned long long *out);

/* The flag NAME ("--decode-context-parallel-size") of R, or NULL. */
const struct ib_recipe_flag *ib_recipe_flag (const struct ib_recipe *r, const char *name);

#endif
