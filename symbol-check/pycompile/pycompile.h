/* The syntax oracle of the symbol gate: CPython compiles each overlay file
 * exactly as import would (compile(source_bytes, path, "exec",
 * dont_inherit=True)).  The interpreter is the image's own python3.X, run
 * in a chroot, in a private mount namespace, of only the files it needs
 * (pyroot.h), else of the image's layers (extracted once into the store and
 * stacked read-only with overlayfs): the layers when they are extracted
 * already, or when the files it needs cannot be told from the cached link
 * records or it does not start among them; the sources go in on stdin, so
 * the overlay's files need not be on disk.
 * An image of another architecture's interpreter runs there under the
 * build machine's static qemu-user (qemu.h).
 * Where it cannot run (not root, another architecture and no qemu-user,
 * no interpreter in the image) the build machine's python3.X of the same
 * version answers, and failing that its python3, whose refusals are then
 * only warnings (the grammar differs between versions); ANS->not_image
 * says why the image's did not answer. */
#ifndef IB_PYCOMPILE_H
#define IB_PYCOMPILE_H

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "symbol-check/symgate.h"

struct ib_pycompile
{
  struct ib_store *s;
  const struct ib_image *img;
  const struct ib_fsview *view; /* IMG's */
};

/* An ib_py_compile_fn; DATA is a struct ib_pycompile. */
int ib_py_compile (void *data, const char *interpreter, const char *version, struct ib_py_source *files, size_t n,
                   struct ib_py_answerer *ans, ib_error_t *err);

#endif
