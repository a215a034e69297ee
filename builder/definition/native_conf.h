/* The [native] section of a definition: the link gate's rules
 * (symbol-check/link-check/linkgate.h).
 *
 *   [native]
 *   check /opt/app/lib/lib?*.so        # more objects (an image glob, '*' crosses '/')
 *   package torch                      # packages whose extension modules are checked
 *                                      # (default: [symbols] check-package, else the
 *                                      # overlay's top-level packages)
 *   preload torch /usr/lib/python3/dist-packages/torch/lib/libtorch_global_deps.so
 *   allow-undefined cuda_stub_* ...    # symbol patterns that may stay undefined
 *   interpreter /usr/bin/python3.11    # default /usr/local/bin/python3, /usr/bin/python3
 *   driver host/libcuda.so.1           # a driver to check libcuda's symbols against
 *   injected libfoo.so.1               # another library the runtime injects
 *   defaults off                       # only the check lines, not the overlay's objects
 */
#ifndef IB_NATIVE_CONF_H
#define IB_NATIVE_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "symbol-check/link-check/linkgate.h"
#include "util/error.h"

struct ib_native_conf
{
  bool enabled;
  bool no_defaults;
  size_t n_check, n_packages, n_preloads, n_allow, n_injected;
  char **check, **packages, **allow, **injected;
  struct ib_native_preload *preloads;
  char *interpreter;
  char *driver; /* on the build machine, absolute */
};

/* One line of [native]; DIR is the definition's folder. */
int ib_native_conf_line (struct ib_native_conf *c, const char *dir, char *line, const char *origin, ib_error_t *err);
void ib_native_conf_clear (struct ib_native_conf *c);

#endif
