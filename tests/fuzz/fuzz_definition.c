/* image.conf and manifest.txt (builder/definition/definition.c).  The input is an
 * image.conf, then FUZZ_SEP and a manifest.txt, written to the scratch
 * folder beside a small source tree (src/, for `tree` and `manifest`
 * lines).  A definition that loads must give every item a target or a
 * clean refusal, and its recorded gate text must load again, as imgverify
 * does with a provenance's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/definition/definition.h"
#include "tests/fuzz/fuzz.h"

static void
make_sources (void)
{
  static int done;
  if (done++)
    return;
  fuzz_write ("src/a.py", "x = 1\n", 6);
  fuzz_write ("src/pkg/b.py", "def f(): pass\n", 14);
  char link[4096];
  snprintf (link, sizeof (link), "%s/src/pkg/l", fuzz_scratch ());
  if (symlink ("b.py", link) < 0)
    fuzz_fail ("symlink %s", link);
}

static void
check_gate_text (const struct ib_definition *d)
{
  if (d->gate_text == NULL)
    return;
  struct ib_definition *again = NULL;
  ib_error_t err = NULL;
  if (ib_definition_from_gate_text (d->gate_text, &again, &err) < 0)
    fuzz_fail ("the recorded gate text does not load again: %s\n--- gate text:\n%s", err->msg, d->gate_text);
  if (again->n_py_required != d->n_py_required || again->n_native_required != d->n_native_required
      || again->n_kernel_required != d->n_kernel_required || again->n_targets != d->n_targets
      || again->n_smoke_args != d->n_smoke_args)
    fuzz_fail ("the recorded gate text loads to other gates\n--- gate text:\n%s", d->gate_text);
  ib_definition_free (again);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  make_sources ();
  char *text = fuzz_text (data, size);
  char *parts[2];
  fuzz_split (text, parts, 2);
  fuzz_write ("image.conf", parts[0], strlen (parts[0]));
  fuzz_write ("manifest.txt", parts[1], strlen (parts[1]));
  struct ib_definition *d = NULL;
  ib_error_t err = NULL;
  fuzz_confine (1);
  if (ib_definition_load (fuzz_scratch (), &d, &err) == 0)
    {
      for (size_t i = 0; i < d->n_items; i++)
        free (ib_copy_item_target (&d->items[i]));
      check_gate_text (d);
      ib_definition_free (d);
    }
  else if (err == NULL || err->msg == NULL)
    fuzz_fail ("ib_definition_load failed without a message");
  fuzz_confine (0);
  ib_error_release (&err);
  free (text);
  return 0;
}
