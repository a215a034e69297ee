/* The part of an image that its Python interpreter needs to start and
 * compile a file, written to a folder: what the syntax check chroots into
 * when no extracted copy of the image's layers is at hand.
 *
 * Extracting a base whole costs a full write of its files (1.8 GB for a
 * Debian + torch base: more than half of a cold build); the interpreter
 * reads a few MB of it: itself, the libraries the loader maps for it
 * (link-check's simulation of ld.so, from the link records the file-list
 * pass cached), the loader, ld.so.cache, the C.UTF-8 locale and its
 * standard library without site-packages or dist-packages.  One pass over
 * the layers that hold them writes only those. */
#ifndef IB_PYROOT_H
#define IB_PYROOT_H

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"

/* Write into DIR (a new folder) the files INTERPRETER (an absolute image
 * path) of Python VERSION ("3.11") needs, as the view V of IMG has them.
 * 1: not possible from what is cached (a link record missing, a library
 * not found): nothing read, the caller extracts the layers as before;
 * 0: written; -1: error. */
int ib_pyroot_write (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *v, const char *interpreter,
                     const char *version, const char *dir, ib_error_t *err);

#endif
