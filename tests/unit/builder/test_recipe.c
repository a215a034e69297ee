/* recipe/: the TOML shim, the recipe model, the Python flag and
 * environment inventory. */
#include <stdlib.h>
#include <string.h>

#include "builder/recipe/pyinventory.h"
#include "builder/recipe/rcheck.h"
#include "builder/recipe/recipe.h"
#include "builder/recipe/toml.h"
#include "tests/unit/test.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

void
recipe_seed_shape_and_lines (struct test_ctx *ctx)
{
  struct ib_recipe *r = NULL;
  ib_error_t err = NULL;
  CHECK (ctx, ib_recipe_load (IB_IMAGES_DIR "/../tests/recipes/dsv41-flash-4x-dcp2.toml", &r, &err) == 0);
  if (r == NULL)
    {
      ib_error_release (&err);
      return;
    }
  CHECK_STR (ctx, r->docker_image, "dsv41-flash-dcp2:local");
  CHECK_STR (ctx, r->docker_image_dir, "dsv41-flash-dcp2");
  CHECK (ctx, r->required_nodes == 4 && r->tensor_parallel_size == 4 && r->pipeline_parallel_size == 1);
  CHECK (ctx, r->dcp == 2 && r->dcp_line == 82);
  CHECK (ctx, r->shm_bytes == 32ULL << 30 && r->shm_size_line == 57);
  CHECK (ctx, r->n_env == 15 && r->n_mounts == 5 && r->n_flags == 17);
  /* A multi-line basic string keeps its text, quotes and all, and its line. */
  const struct ib_recipe_flag *f = ib_recipe_flag (r, "--compilation-config");
  CHECK (ctx, f && f->line == 75 && f->value && strncmp (f->value, "'{\"cudagraph_mode\"", 18) == 0);
  f = ib_recipe_flag (r, "--trust-remote-code");
  CHECK (ctx, f && f->value == NULL);
  CHECK (ctx, r->mounts[0].read_only && !r->mounts[1].read_only);
  CHECK_STR (ctx, r->mounts[1].container, "/root/.cache/flashinfer");
  CHECK (ctx, r->mounts[1].line == 128);
  for (size_t i = 0; i < r->n_env; i++)
    if (strcmp (r->env[i].name, "TORCH_CUDA_ARCH_LIST") == 0)
      CHECK (ctx, r->env[i].line == 113 && strcmp (r->env[i].value, "12.1a") == 0);
  ib_recipe_free (r);
}

void
recipe_toml_errors_name_the_line (struct test_ctx *ctx)
{
  static const struct
  {
    const char *text, *want;
  } cases[] = {
    { "a = 1\nb = [1,\n", "r.toml:2:" },
    { "a = 1\na = 2\n", "r.toml:2:" },
    { "x = \"unterminated\n", "r.toml:1:" },
    { "[env]\nA = 1.5\n", "r.toml:2: env.A: expected a string, found float" },
    { "required_nodes = 0\n", "r.toml:1: required_nodes: 0 is not a positive count" },
    { "args = [\"--decode-context-parallel-size\", \"two\"]\n", "r.toml:1: --decode-context-parallel-size: `two`" },
    { "[[extra_mounts]]\nhost = \"/x\"\n", "r.toml:1: [[extra_mounts]] without `container`" },
    /* What toml++ 3.3.0 would meet with undefined behaviour (fuzz_recipe). */
    { "# \xc3\x97 in a comment line is fine\na = 1 \xc3\x97\n", "r.toml:2: U+00D7 outside a comment line" },
    { "a = \"\xe3\x80\x94\"\n", "r.toml:1: U+3014 outside a comment line" },
  };
  for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
    {
      struct ib_recipe *r = NULL;
      ib_error_t err = NULL;
      CHECK (ctx, ib_recipe_parse (cases[i].text, strlen (cases[i].text), "r.toml", &r, &err) < 0);
      CHECK (ctx, r == NULL && err && err->class == IB_EDEFINITION);
      if (err && strncmp (err->msg, cases[i].want, strlen (cases[i].want)) != 0)
        CHECK_STR (ctx, err->msg, cases[i].want);
      ib_error_release (&err);
    }
  /* TOML 1.0 features a hand-rolled reader would miss. */
  const char *ok = "a.b = 'lit\\eral'\n\"quoted key\" = 0x1F\nt = 1979-05-27T07:32:00Z\n[env]\nX = \"\"\"\nmulti\"\"\"\n";
  struct ib_toml *t = NULL;
  ib_error_t err = NULL;
  CHECK (ctx, ib_toml_parse (ok, strlen (ok), "ok.toml", &t, &err) == 0);
  const struct ib_toml *a = ib_toml_get (t, "a");
  CHECK (ctx, a && ib_toml_get (a, "b") && strcmp (ib_toml_get (a, "b")->str, "lit\\eral") == 0);
  CHECK (ctx, ib_toml_get (t, "quoted key") && ib_toml_get (t, "quoted key")->i == 31);
  CHECK (ctx, ib_toml_get (t, "t") && ib_toml_get (t, "t")->type == IB_TOML_DATETIME);
  const struct ib_toml *x = ib_toml_get (ib_toml_get (t, "env"), "X");
  CHECK (ctx, x && strcmp (x->str, "multi") == 0 && x->line == 5);
  ib_toml_free (t);
  unsigned long long v;
  CHECK (ctx, ib_size_parse ("32gb", &v) == 0 && v == 32ULL << 30);
  CHECK (ctx, ib_size_parse ("512M", &v) == 0 && v == 512ULL << 20);
  CHECK (ctx, ib_size_parse ("100", &v) == 0 && v == 100);
  CHECK (ctx, ib_size_parse ("1t", &v) < 0 && ib_size_parse ("g", &v) < 0 && ib_size_parse ("99999999999999g", &v) < 0);
}

void
recipe_python_inventory (struct test_ctx *ctx)
{
  const char *args = "import argparse, os\n"
                     "from dataclasses import dataclass\n"
                     "from typing import Literal, Optional\n"
                     "Mode = Literal['x', 'y']\n"
                     "class Color(str, Enum):\n    RED = 'red'\n    BLUE = 'blue'\n"
                     "@dataclass\nclass EngineArgs:\n"
                     "    max_len: Optional[int] = None\n"
                     "    mode: Optional[Mode] = None\n"
                     "    color: Color = Color.RED\n"
                     "    size: Literal[8, 16, -1] = 8\n"
                     "    eager: bool = False\n"
                     "    other: Unknown = None\n"
                     "    def method(self, a: int = 1):\n        x: int = 2\n"
                     "    @staticmethod\n    def add(p):\n"
                     "        for f in fields(EngineArgs):\n            p.add_argument('--' + f.name)\n"
                     "def cli(p):\n"
                     "    p.add_argument('--lit', '-l', choices=['a', \"b\"], default='a')\n"
                     "    p.add_argument('--computed', choices=sorted(X))\n"
                     "    p.add_argument('--kw', **kwargs)\n";
  const char *envs = "import os\n"
                     "def _b(name, d='0'):\n    return lambda: os.getenv(name, d) == '1'\n"
                     "environment_variables = {\n  'REG_A': _b('REG_B'),\n  'REG_C': lambda: 1,\n}\n"
                     "X = os.environ.get('DIRECT')\nY = os.environ['SUB']\nZ = 'IN' in os.environ\n"
                     "W = os.getenv(f'NOT_{X}')\n";
  const char *dyn = "def f(p, n):\n    p.add_argument(n)\n";
  struct ib_py_inventory *inv = ib_py_inventory_new ();
  ib_error_t err = NULL;
  CHECK (ctx, ib_py_inventory_add (inv, "/v/engine/arg_utils.py", args, strlen (args), &err) == 0);
  CHECK (ctx, ib_py_inventory_add (inv, "/v/envs.py", envs, strlen (envs), &err) == 0);
  ib_py_inventory_finish (inv);
  const struct ib_cli_flag *f = ib_py_inventory_flag (inv, "--max-len");
  CHECK (ctx, f && f->choices == IB_CHOICES_ANY && f->line == 10);
  f = ib_py_inventory_flag (inv, "--mode");
  CHECK (ctx, f && f->choices == IB_CHOICES_LIST && f->n_choices == 2 && !strcmp (f->choice[1], "y"));
  f = ib_py_inventory_flag (inv, "--color");
  CHECK (ctx, f && f->choices == IB_CHOICES_LIST && f->n_choices == 2 && !strcmp (f->choice[0], "red"));
  f = ib_py_inventory_flag (inv, "--size");
  CHECK (ctx, f && f->choices == IB_CHOICES_LIST && f->n_choices == 3 && !strcmp (f->choice[2], "-1"));
  CHECK (ctx, ib_py_inventory_flag (inv, "--eager") && ib_py_inventory_flag (inv, "--no-eager"));
  f = ib_py_inventory_flag (inv, "--other");
  CHECK (ctx, f && f->choices == IB_CHOICES_UNSETTLED && strstr (f->unsettled, "Unknown"));
  CHECK (ctx, ib_py_inventory_flag (inv, "--method") == NULL && ib_py_inventory_flag (inv, "--x") == NULL);
  f = ib_py_inventory_flag (inv, "-l");
  CHECK (ctx, f && f->choices == IB_CHOICES_LIST && f->n_choices == 2 && !strcmp (f->choice[1], "b"));
  CHECK (ctx, ib_py_inventory_flag (inv, "--lit") != NULL);
  f = ib_py_inventory_flag (inv, "--computed");
  CHECK (ctx, f && f->choices == IB_CHOICES_UNSETTLED && !strcmp (f->unsettled, "choices=sorted(X)"));
  f = ib_py_inventory_flag (inv, "--kw");
  CHECK (ctx, f && f->choices == IB_CHOICES_UNSETTLED);
  size_t n;
  /* The dataclass generator's computed names are its fields, read above. */
  CHECK (ctx, ib_py_inventory_dynamic (inv, &n) == NULL && n == 0);
  static const char *const read[] = { "REG_A", "REG_B", "REG_C", "DIRECT", "SUB", "IN" };
  for (size_t i = 0; i < sizeof (read) / sizeof (read[0]); i++)
    if (ib_py_inventory_env (inv, read[i]) == NULL)
      CHECK_STR (ctx, read[i], "(read)");
  CHECK (ctx, ib_py_inventory_env (inv, "NOT_") == NULL && ib_py_inventory_env (inv, "name") == NULL);
  CHECK (ctx, ib_py_inventory_add (inv, "/v/other.py", dyn, strlen (dyn), &err) == 0);
  ib_py_inventory_finish (inv);
  const struct ib_env_read *d = ib_py_inventory_dynamic (inv, &n);
  CHECK (ctx, d && n == 1 && d->line == 2 && !strcmp (d->file, "/v/other.py"));
  ib_py_inventory_free (inv);
  /* A repeated choices= keeps the last list; the first one is released
   * (LeakSanitizer fails this test under SANITIZE=1 otherwise: fuzz_pyinventory
   * reported those 52 bytes in 6 allocations). */
  const char *twice = "p.add_argument('--a', choices=['abcd', 'efgh'], choices=['x'])\n"
                      "p.add_argument('--b', choices=['abcd'], choices=[f()])\n";
  inv = ib_py_inventory_new ();
  CHECK (ctx, ib_py_inventory_add (inv, "/v/cli.py", twice, strlen (twice), &err) == 0);
  f = ib_py_inventory_flag (inv, "--a");
  CHECK (ctx, f && f->choices == IB_CHOICES_LIST && f->n_choices == 1 && !strcmp (f->choice[0], "x"));
  f = ib_py_inventory_flag (inv, "--b");
  CHECK (ctx, f && f->choices == IB_CHOICES_UNSETTLED && f->n_choices == 0);
  ib_py_inventory_free (inv);
  char *s = ib_py_string_literal ("r'''a\\b'''", 10);
  CHECK_STR (ctx, s, "a\\b");
  free (s);
  CHECK (ctx, ib_py_string_literal ("f'x'", 4) == NULL && ib_py_string_literal ("'a\\n'", 5) == NULL);
}

/* Each variable read outside the image's code, as docs/imgverify.md lists
 * them ("Recipes", the env check): a whole name passes as itself only (not
 * a longer name it begins, not a shorter one), a `P*` pattern any name that
 * begins with P and none that begins with P cut by one. */
void
recipe_outside_variables_match_whole (struct test_ctx *ctx)
{
  cleanup_free char *doc = NULL;
  size_t len = 0;
  ib_error_t err = NULL;
  CHECK (ctx, ib_read_file (IB_IMAGES_DIR "/../docs/imgverify.md", 1 << 20, &doc, &len, &err) == 0);
  ib_error_release (&err);
  if (doc == NULL)
    return;
  static const char marker[] = "name (`builder/recipe/rcheck.c`): ";
  const char *at = strstr (doc, marker);
  const char *end = at ? strstr (at, "`.\n") : NULL;
  CHECK (ctx, at && end);
  if (!at || !end)
    return;
  int whole = 0, prefixes = 0;
  for (const char *p = strchr (at + strlen (marker), '`'); p && p < end; p = strchr (p + 1, '`'))
    {
      const char *q = strchr (p + 1, '`');
      char name[64], other[80];
      snprintf (name, sizeof (name), "%.*s", (int) (q - p - 1), p + 1);
      p = q;
      size_t n = strlen (name);
      if (name[n - 1] == '*')
        {
          name[--n] = '\0';
          snprintf (other, sizeof (other), "%sANY_THING", name);
          CHECK (ctx, ib_recipe_outside_variable (other) != NULL);
          snprintf (other, sizeof (other), "%.*sX", (int) n - 1, name);
          if (ib_recipe_outside_variable (other) != NULL)
            fprintf (stderr, "  %s* takes %s\n", name, other);
          CHECK (ctx, ib_recipe_outside_variable (other) == NULL);
          prefixes++;
          continue;
        }
      CHECK (ctx, ib_recipe_outside_variable (name) != NULL);
      const char *longer[] = { "_X", "X", "_DIR", "1" };
      for (size_t i = 0; i < sizeof (longer) / sizeof (longer[0]); i++)
        {
          snprintf (other, sizeof (other), "%s%s", name, longer[i]);
          if (ib_recipe_outside_variable (other) != NULL)
            fprintf (stderr, "  %s takes %s\n", name, other);
          CHECK (ctx, ib_recipe_outside_variable (other) == NULL);
        }
      snprintf (other, sizeof (other), "%.*s", (int) n - 1, name);
      CHECK (ctx, ib_recipe_outside_variable (other) == NULL);
      snprintf (other, sizeof (other), "MY_%s", name);
      CHECK (ctx, ib_recipe_outside_variable (other) == NULL);
      whole++;
    }
  CHECK (ctx, whole >= 12 && prefixes >= 12);
}
