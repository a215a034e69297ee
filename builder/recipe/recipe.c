#include "builder/recipe/recipe.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/recipe/toml.h"

#define MAX_RECIPE (4u << 20)

static int
bad_type (const struct ib_recipe *r, const struct ib_toml *v, const char *key, const char *want, ib_error_t *err)
{
  return ib_error (err, IB_EDEFINITION, "%s:%d: %s: expected %s, found %s", r->path, v->line, key, want,
                   ib_toml_type_name (v->type));
}

static int
get_string (struct ib_recipe *r, const struct ib_toml *t, const char *key, char **out, int *line, ib_error_t *err)
{
  const struct ib_toml *v = ib_toml_get (t, key);
  if (v == NULL)
    return 0;
  if (v->type != IB_TOML_STRING)
    return bad_type (r, v, key, "a string", err);
  *out = ib_xstrdup (v->str);
  if (line)
    *line = v->line;
  return 0;
}

static int
get_count (struct ib_recipe *r, const struct ib_toml *t, const char *key, long *out, int *line, ib_error_t *err)
{
  const struct ib_toml *v = ib_toml_get (t, key);
  if (v == NULL)
    return 0;
  if (v->type != IB_TOML_INTEGER || v->i < 1 || v->i > 1 << 20)
    return v->type == IB_TOML_INTEGER
               ? ib_error (err, IB_EDEFINITION, "%s:%d: %s: %lld is not a positive count", r->path, v->line, key,
                           v->i)
               : bad_type (r, v, key, "an integer", err);
  *out = (long) v->i;
  *line = v->line;
  return 0;
}

static int
load_args (struct ib_recipe *r, const struct ib_toml *doc, ib_error_t *err)
{
  const struct ib_toml *a = ib_toml_get (doc, "args");
  if (a == NULL)
    return 0;
  if (a->type != IB_TOML_ARRAY)
    return bad_type (r, a, "args", "an array of strings", err);
  r->args = ib_xcalloc (a->n ? a->n : 1, sizeof (*r->args));
  for (size_t i = 0; i < a->n; i++)
    {
      if (a->items[i].type != IB_TOML_STRING)
        return bad_type (r, &a->items[i], "args", "strings", err);
      r->args[r->n_args++] = (struct ib_recipe_arg){ ib_xstrdup (a->items[i].str), a->items[i].line };
    }
  /* The flags: "--x value", "--x=value", or "--x" alone. */
  r->flags = ib_xcalloc (r->n_args ? r->n_args : 1, sizeof (*r->flags));
  for (size_t i = 0; i < r->n_args; i++)
    {
      const char *s = r->args[i].text;
      if (strncmp (s, "--", 2) != 0 || s[2] == '\0')
        continue;
      struct ib_recipe_flag *f = &r->flags[r->n_flags++];
      f->line = r->args[i].line;
      const char *eq = strchr (s, '=');
      if (eq)
        {
          f->name_buf = strndup (s, (size_t) (eq - s));
          f->name = f->name_buf;
          f->value = eq + 1;
          f->value_line = f->line;
        }
      else
        {
          f->name = s;
          if (i + 1 < r->n_args && strncmp (r->args[i + 1].text, "--", 2) != 0)
            {
              f->value = r->args[i + 1].text;
              f->value_line = r->args[i + 1].line;
              i++;
            }
        }
    }
  return 0;
}

static int
load_env (struct ib_recipe *r, const struct ib_toml *doc, ib_error_t *err)
{
  const struct ib_toml *e = ib_toml_get (doc, "env");
  if (e == NULL)
    return 0;
  if (e->type != IB_TOML_TABLE)
    return bad_type (r, e, "env", "a table", err);
  r->env = ib_xcalloc (e->n ? e->n : 1, sizeof (*r->env));
  for (size_t i = 0; i < e->n; i++)
    {
      const struct ib_toml *v = &e->items[i];
      /* The launcher passes values as text; numbers and booleans are
       * written the way the shell would see them. */
      char *value;
      if (v->type == IB_TOML_STRING)
        value = ib_xstrdup (v->str);
      else if (v->type == IB_TOML_INTEGER)
        value = ib_xasprintf ("%lld", v->i);
      else if (v->type == IB_TOML_BOOL)
        value = ib_xstrdup (v->b ? "true" : "false");
      else
        {
          cleanup_free char *k = ib_xasprintf ("env.%s", v->key);
          return bad_type (r, v, k, "a string", err);
        }
      r->env[r->n_env++] = (struct ib_recipe_env){ ib_xstrdup (v->key), value, v->line };
    }
  return 0;
}

static int
load_mounts (struct ib_recipe *r, const struct ib_toml *doc, ib_error_t *err)
{
  const struct ib_toml *m = ib_toml_get (doc, "extra_mounts");
  if (m == NULL)
    return 0;
  if (m->type != IB_TOML_ARRAY)
    return bad_type (r, m, "extra_mounts", "an array of tables ([[extra_mounts]])", err);
  r->mounts = ib_xcalloc (m->n ? m->n : 1, sizeof (*r->mounts));
  for (size_t i = 0; i < m->n; i++)
    {
      const struct ib_toml *t = &m->items[i];
      if (t->type != IB_TOML_TABLE)
        return bad_type (r, t, "extra_mounts", "tables", err);
      struct ib_recipe_mount *mo = &r->mounts[r->n_mounts++];
      int line = t->line;
      if (get_string (r, t, "host", &mo->host, NULL, err) < 0
          || get_string (r, t, "container", &mo->container, &line, err) < 0)
        return -1;
      mo->line = line;
      const struct ib_toml *ro = ib_toml_get (t, "read_only");
      if (ro && ro->type != IB_TOML_BOOL)
        return bad_type (r, ro, "read_only", "a boolean", err);
      mo->read_only = ro && ro->b;
      if (mo->container == NULL)
        return ib_error (err, IB_EDEFINITION, "%s:%d: [[extra_mounts]] without `container`", r->path, t->line);
    }
  return 0;
}

static int
load_shape (struct ib_recipe *r, const struct ib_toml *doc, ib_error_t *err)
{
  if (get_count (r, doc, "required_nodes", &r->required_nodes, &r->required_nodes_line, err) < 0
      || get_count (r, doc, "tensor_parallel_size", &r->tensor_parallel_size, &r->tensor_parallel_size_line, err) < 0
      || get_count (r, doc, "pipeline_parallel_size", &r->pipeline_parallel_size, &r->pipeline_parallel_size_line,
                    err)
             < 0
      || get_string (r, doc, "shm_size", &r->shm_size, &r->shm_size_line, err) < 0)
    return -1;
  if (r->shm_size && ib_size_parse (r->shm_size, &r->shm_bytes) < 0)
    return ib_error (err, IB_EDEFINITION, "%s:%d: shm_size: `%s` is not a size (NUMBER[b|k|m|g])", r->path,
                     r->shm_size_line, r->shm_size);
  r->dcp = 1;
  const struct ib_recipe_flag *f = ib_recipe_flag (r, "--decode-context-parallel-size");
  if (f == NULL)
    f = ib_recipe_flag (r, "-dcp");
  if (f)
    {
      char *end;
      errno = 0;
      long v = f->value ? strtol (f->value, &end, 10) : 0;
      if (f->value == NULL || errno || *end || v < 1 || v > 1 << 20)
        return ib_error (err, IB_EDEFINITION, "%s:%d: %s: `%s` is not a positive count", r->path,
                         f->value ? f->value_line : f->line, f->name, f->value ? f->value : "");
      r->dcp = v;
      r->dcp_line = f->value_line;
    }
  return 0;
}

int
ib_recipe_parse (const char *text, size_t len, const char *path, struct ib_recipe **out, ib_error_t *err)
{
  struct ib_toml *doc = NULL;
  *out = NULL;
  if (ib_toml_parse (text, len, path, &doc, err) < 0)
    return -1;
  struct ib_recipe *r = ib_xcalloc (1, sizeof (*r));
  r->path = ib_xstrdup (path);
  int rc = 0;
  if (get_string (r, doc, "engine", &r->engine, NULL, err) < 0
      || get_string (r, doc, "docker_image", &r->docker_image, &r->docker_image_line, err) < 0
      || get_string (r, doc, "docker_image_dir", &r->docker_image_dir, NULL, err) < 0 || load_args (r, doc, err) < 0
      || load_env (r, doc, err) < 0 || load_mounts (r, doc, err) < 0 || load_shape (r, doc, err) < 0)
    rc = -1;
  ib_toml_free (doc);
  if (rc < 0)
    {
      ib_recipe_free (r);
      return -1;
    }
  *out = r;
  return 0;
}

int
ib_recipe_load (const char *path, struct ib_recipe **out, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_read_file (path, MAX_RECIPE, &text, &len, err) < 0)
    return ib_error_wrap (err, "recipe %s", path);
  return ib_recipe_parse (text, len, path, out, err);
}

void
ib_recipe_free (struct ib_recipe *r)
{
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n_args; i++)
    free (r->args[i].text);
  for (size_t i = 0; i < r->n_flags; i++)
    free (r->flags[i].name_buf);
  for (size_t i = 0; i < r->n_env; i++)
    free (r->env[i].name), free (r->env[i].value);
  for (size_t i = 0; i < r->n_mounts; i++)
    free (r->mounts[i].host), free (r->mounts[i].container);
  free (r->args);
  free (r->flags);
  free (r->env);
  free (r->mounts);
  free (r->path);
  free (r->engine);
  free (r->docker_image);
  free (r->docker_image_dir);
  free (r->shm_size);
  free (r);
}

int
ib_size_parse (const char *s, unsigned long long *out)
{
  if (!isdigit ((unsigned char) *s))
    return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull (s, &end, 10);
  if (errno)
    return -1;
  unsigned shift = 0;
  char u = (char) tolower ((unsigned char) *end);
  if (u == 'k' || u == 'm' || u == 'g')
    {
      shift = u == 'k' ? 10 : u == 'm' ? 20 : 30;
      end++;
      if (tolower ((unsigned char) *end) == 'b')
        end++;
    }
  else if (u == 'b')
    end++;
  if (*end || v > (~0ULL >> shift))
    return -1;
  *out = v << shift;
  return 0;
}

const struct ib_recipe_flag *
ib_recipe_flag (const struct ib_recipe *r, const char *name)
{
  for (size_t i = 0; i < r->n_flags; i++)
    if (strcmp (r->flags[i].name, name) == 0)
      return &r->flags[i];
  return NULL;
}
