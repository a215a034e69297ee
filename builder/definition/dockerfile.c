/* Dockerfiles as definitions: the subset of the Dockerfile syntax that a
 * thin overlay needs (FROM, COPY, ENV, LABEL, ARG, CMD, the parser
 * directives), each instruction an entry of the same definition an
 * image.conf gives. */
#include "builder/definition/definition.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/definition/definition_private.h"

struct vars
{
  char **kv; /* NAME=VALUE */
  size_t n;
};

static const char *
var_get (const struct vars *v, const char *name, size_t len)
{
  for (size_t i = v->n; i-- > 0;)
    if (strncmp (v->kv[i], name, len) == 0 && v->kv[i][len] == '=')
      return v->kv[i] + len + 1;
  return NULL;
}

/* $NAME and ${NAME}; an ARG without a value expands to "". */
static char *
expand (const struct vars *v, const char *s)
{
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&out, &len);
  for (const char *c = s; *c; c++)
    {
      if (*c == '\\' && c[1] == '$')
        {
          fputc ('$', f);
          c++;
          continue;
        }
      if (*c != '$')
        {
          fputc (*c, f);
          continue;
        }
      bool brace = c[1] == '{';
      const char *name = c + 1 + brace;
      size_t n = 0;
      while (isalnum ((unsigned char) name[n]) || name[n] == '_')
        n++;
      if (n == 0 || (brace && name[n] != '}'))
        {
          fputc (*c, f);
          continue;
        }
      const char *val = var_get (v, name, n);
      fputs (val ? val : "", f);
      c = name + n - 1 + brace;
    }
  fclose (f);
  return out;
}

/* Split like a shell does for Dockerfile arguments: blanks separate words,
 * quotes group them and are removed, a backslash escapes the next character.
 * In place; returns the count. */
static int
split_quoted (char *s, char **w, int max)
{
  int n = 0;
  char *o = s;
  while (*s && n < max)
    {
      while (*s == ' ' || *s == '\t')
        s++;
      if (*s == '\0')
        break;
      w[n++] = o;
      char quote = 0;
      for (; *s && (quote || (*s != ' ' && *s != '\t')); s++)
        {
          if (quote && *s == quote)
            quote = 0;
          else if (!quote && (*s == '"' || *s == '\''))
            quote = *s;
          else if (*s == '\\' && s[1] && quote != '\'')
            *o++ = *++s;
          else
            *o++ = *s;
        }
      /* The output never runs ahead of the input, so this '\0' lands on
       * a character already read. */
      if (*s)
        s++;
      *o++ = '\0';
    }
  return n;
}

static char *
unquote (char *s)
{
  size_t n = strlen (s);
  if (n >= 2 && ((s[0] == '"' && s[n - 1] == '"') || (s[0] == '\'' && s[n - 1] == '\'')))
    {
      s[n - 1] = '\0';
      return s + 1;
    }
  return s;
}

/* KEY=VALUE pairs (ENV, LABEL, ARG); the legacy `ENV KEY VALUE` form too. */
static int
each_pair (char *args, const char *origin, bool legacy_ok, void (*fn) (void *, const char *, const char *),
           void *data, ib_error_t *err)
{
  char *first_space = strpbrk (args, " \t");
  char *first_eq = strchr (args, '=');
  if (legacy_ok && first_space && (first_eq == NULL || first_eq > first_space))
    {
      *first_space = '\0';
      fn (data, args, unquote (ib_def_trim (first_space + 1)));
      return 0;
    }
  char *w[64];
  int n = split_quoted (args, w, 64);
  for (int i = 0; i < n; i++)
    {
      char *eq = strchr (w[i], '=');
      if (eq == NULL)
        return ib_error (err, IB_EDEFINITION, "%s: `%s` is not KEY=VALUE", origin, w[i]);
      *eq = '\0';
      fn (data, w[i], eq + 1);
    }
  return 0;
}

static void
env_fn (void *d, const char *k, const char *v)
{
  ib_def_add_env (d, k, v);
}

static void
label_fn (void *d, const char *k, const char *v)
{
  ib_def_add_label (d, k, v);
}

static void
arg_fn (void *data, const char *k, const char *v)
{
  struct vars *vars = data;
  if (var_get (vars, k, strlen (k)))
    return; /* a --build-arg given on the command line wins */
  cleanup_free char *kv = ib_xasprintf ("%s=%s", k, v);
  ib_def_add_string (&vars->kv, &vars->n, kv);
}

static int
docker_copy (struct ib_definition *d, char *args, const char *origin, ib_error_t *err)
{
  int mode = -1;
  char *w[256];
  int n = split_quoted (args, w, 256);
  int first = 0;
  while (first < n && strncmp (w[first], "--", 2) == 0)
    {
      if (strncmp (w[first], "--chmod=", 8) == 0)
        {
          if (ib_def_parse_mode (w[first] + 8, &mode, origin, err) < 0)
            return -1;
        }
      else
        return ib_error (err, IB_EDEFINITION, "%s: COPY option `%s` is not supported", origin, w[first]);
      first++;
    }
  if (n - first < 2)
    return ib_error (err, IB_EDEFINITION, "%s: COPY needs a source and a destination", origin);
  const char *dst = w[n - 1];
  if (*dst == '\0')
    return ib_error (err, IB_EDEFINITION, "%s: COPY destination is empty", origin);
  bool into_dir = dst[strlen (dst) - 1] == '/' || n - first > 2;
  for (int i = first; i < n - 1; i++)
    {
      cleanup_free char *src = ib_def_source_path (d, w[i]);
      struct stat st;
      if (stat (src, &st) == 0 && S_ISDIR (st.st_mode))
        {
          if (ib_def_add_tree (d, src, dst, origin, err) < 0)
            return -1;
          continue;
        }
      struct ib_copy_item *it = ib_def_add_item (d, IB_ENTRY_FILE, origin);
      const char *base = strrchr (w[i], '/') ? strrchr (w[i], '/') + 1 : w[i];
      it->source = steal_pointer (&src);
      it->raw_target = into_dir ? ib_path_join (dst, base) : ib_xstrdup (dst);
      it->mode = mode;
    }
  return 0;
}

static int
docker_instruction (struct ib_definition *d, struct vars *vars, const char *cmd, char *args, const char *origin,
                    ib_error_t *err)
{
  if (strcasecmp (cmd, "ARG") == 0)
    {
      if (strchr (args, '=') == NULL)
        {
          cleanup_free char *kv = ib_xasprintf ("%s=", ib_def_trim (args));
          char *eq = strchr (kv, '=');
          *eq = '\0';
          arg_fn (vars, kv, "");
          return 0;
        }
      return each_pair (args, origin, false, arg_fn, vars, err);
    }
  cleanup_free char *x = expand (vars, args);
  if (strcasecmp (cmd, "FROM") == 0)
    {
      if (d->from)
        return ib_error (err, IB_EDEFINITION, "%s: only one FROM is supported (no multi-stage builds)", origin);
      char *w[4];
      int n = ib_def_split_words (x, w, 4);
      if (n != 1 && !(n == 3 && strcasecmp (w[1], "AS") == 0))
        return ib_error (err, IB_EDEFINITION, "%s: expected FROM IMAGE [AS NAME]", origin);
      d->from = ib_xstrdup (w[0]);
      return 0;
    }
  if (strcasecmp (cmd, "COPY") == 0 || strcasecmp (cmd, "ADD") == 0)
    {
      if (strcasecmp (cmd, "ADD") == 0)
        return ib_error (err, IB_EDEFINITION, "%s: ADD is not supported; use COPY", origin);
      return docker_copy (d, x, origin, err);
    }
  if (strcasecmp (cmd, "ENV") == 0)
    return each_pair (x, origin, true, env_fn, d, err);
  if (strcasecmp (cmd, "LABEL") == 0)
    return each_pair (x, origin, false, label_fn, d, err);
  if (strcasecmp (cmd, "CMD") == 0)
    {
      free (d->cmd_json);
      d->cmd_json = ib_xstrdup (ib_def_trim (x));
      return 0;
    }
  return ib_error (err, IB_EDEFINITION,
                   "%s: %s is not supported (imgbuild takes FROM, COPY, ENV, LABEL, ARG and CMD, and runs nothing)",
                   origin, cmd);
}

/* `# imgbuild:new PATH` declares a target that the base does not have. */
static void
docker_directive (struct ib_definition *d, const char *comment)
{
  const char *c = comment + 1;
  while (*c == ' ')
    c++;
  if (strncmp (c, "imgbuild:new ", 13) == 0)
    ib_def_add_string (&d->new_paths, &d->n_new, c + 13);
}

static int
parse_dockerfile (struct ib_definition *d, char *text, struct vars *vars, ib_error_t *err)
{
  const char *base = strrchr (d->file, '/') ? strrchr (d->file, '/') + 1 : d->file;
  int lineno = 0;
  char *line = text;
  while (line && *line)
    {
      int start = ++lineno;
      /* Join continuation lines ending in a backslash. */
      char *end = strchr (line, '\n');
      cleanup_free char *joined = ib_xstrdup ("");
      for (;;)
        {
          size_t len = end ? (size_t) (end - line) : strlen (line);
          bool cont = len > 0 && line[len - 1] == '\\';
          char *next = ib_xasprintf ("%s%.*s", joined, (int) (cont ? len - 1 : len), line);
          free (joined);
          joined = next;
          line = end ? end + 1 : NULL;
          if (!cont || line == NULL)
            break;
          lineno++;
          end = strchr (line, '\n');
        }
      char *l = ib_def_trim (joined);
      if (*l == '#')
        docker_directive (d, l);
      if (*l == '\0' || *l == '#')
        continue;
      char *args = l + strcspn (l, " \t");
      if (*args)
        *args++ = '\0';
      cleanup_free char *origin = ib_xasprintf ("%s:%d", base, start);
      if (docker_instruction (d, vars, l, ib_def_trim (args), origin, err) < 0)
        return -1;
    }
  if (d->from == NULL)
    return ib_error (err, IB_EDEFINITION, "%s: no FROM", d->file);
  return 0;
}

int
ib_definition_from_dockerfile (const char *path, const char *context, char *const *build_args, size_t n_build_args,
                               struct ib_definition **out, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  if (ib_read_file (path, MAX_DEFINITION_SIZE, &text, NULL, err) < 0)
    {
      (*err)->class = IB_EDEFINITION;
      return ib_error_wrap (err, "Dockerfile");
    }
  cleanup_free char *dir = NULL;
  if (context)
    dir = ib_xstrdup (context);
  else
    {
      dir = ib_xstrdup (path);
      char *slash = strrchr (dir, '/');
      if (slash)
        *slash = '\0';
      else
        strcpy (dir, ".");
    }
  struct ib_definition *d = ib_def_new (dir, path);
  struct vars vars = { 0 };
  for (size_t i = 0; i < n_build_args; i++)
    ib_def_add_string (&vars.kv, &vars.n, build_args[i]);
  int r = parse_dockerfile (d, text, &vars, err);
  for (size_t i = 0; i < vars.n; i++)
    free (vars.kv[i]);
  free (vars.kv);
  if (r < 0)
    {
      ib_definition_free (d);
      return -1;
    }
  *out = d;
  return 0;
}

