/* The Dockerfile subset (builder/definition/definition.c): FROM, COPY, ENV, LABEL,
 * ARG, CMD, continuations, $VAR expansion and the `# imgbuild:new`
 * directive.  The input is a Dockerfile, then FUZZ_SEP and build
 * arguments (one NAME=VALUE a line); the context is the scratch folder
 * with a small tree (ctx/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/definition/definition.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static int made;
  if (!made++)
    {
      fuzz_write ("ctx/a.py", "x = 1\n", 6);
      fuzz_write ("ctx/dir/b.py", "y = 2\n", 6);
    }
  char *text = fuzz_text (data, size);
  char *parts[2];
  fuzz_split (text, parts, 2);
  fuzz_write ("ctx/Dockerfile", parts[0], strlen (parts[0]));
  char *args[16];
  size_t n_args = 0;
  for (char *save = NULL, *a = strtok_r (parts[1], "\n", &save); a && n_args < 16; a = strtok_r (NULL, "\n", &save))
    args[n_args++] = a;
  char path[4096], ctx[4096];
  snprintf (path, sizeof (path), "%s/ctx/Dockerfile", fuzz_scratch ());
  snprintf (ctx, sizeof (ctx), "%s/ctx", fuzz_scratch ());
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  fuzz_confine (1);
  if (ib_definition_from_dockerfile (path, ctx, args, n_args, &d, &err) == 0)
    {
      if (d->from == NULL)
        fuzz_fail ("a Dockerfile without FROM loaded");
      for (size_t i = 0; i < d->n_items; i++)
        free (ib_copy_item_target (&d->items[i]));
      ib_definition_free (d);
    }
  else if (err == NULL || err->msg == NULL)
    fuzz_fail ("ib_definition_from_dockerfile failed without a message");
  fuzz_confine (0);
  ib_error_release (&err);
  free (text);
  return 0;
}
