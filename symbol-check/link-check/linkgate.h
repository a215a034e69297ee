/* The native link gate: every shared object the image will load links, the
 * way ld.so would link it, on the image's own file system (resolve.h), for
 * any architecture, nothing run.
 *
 * Which objects: the CHECK globs, plus by default every ELF object that the
 * layers from FIRST_CHECKED_LAYER on add (the overlay, prebake), plus every
 * extension module (*.so) of PACKAGES under a dist-packages or
 * site-packages folder; and what each of them loads.  An object under a
 * dist-packages, site-packages or lib-dynload folder is loaded as the
 * image's Python loads it (resolve.h), with the preloads of its package;
 * any other as `ldd -r` loads it.
 *
 * The ELF records of the files, and the image's ld.so.conf files, are
 * cached in the store by content digest (imgbuild/elflink/,
 * imgbuild/ldconf/): a build over a known base reads no base layer. */
#ifndef IB_LINKGATE_H
#define IB_LINKGATE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/indexer.h"
#include "layers/store/store.h"
#include "util/requirement.h"

struct ib_native_preload
{
  char *package; /* a top-level Python package: "torch" */
  char *path;    /* an image path it loads RTLD_GLOBAL before its extensions */
  char *origin;
};

struct ib_native_rules
{
  char *const *check; /* image paths or globs ('*' crosses '/') */
  size_t n_check;
  bool defaults;      /* add the overlay's objects and the packages' extension modules */
  int first_checked_layer;
  char *const *packages;
  size_t n_packages;
  const struct ib_native_preload *preloads;
  size_t n_preloads;
  char *const *allow; /* symbol patterns allowed undefined */
  size_t n_allow;
  char *const *injected; /* more sonames the runtime injects, beyond libcuda.so.1 & co */
  size_t n_injected;
  const char *interpreter; /* image path; NULL: /usr/local/bin/python3 or /usr/bin/python3 */
  const char *driver;      /* a libcuda.so.1 of the build machine to check against; NULL */
  bool as_ldd;             /* load every object as `ldd -r` does, no interpreter */
  /* Every object of an image that no definition describes (imgverify with
   * no provenance): a shared library (not executable by its mode) is
   * judged as the program that loads it would find it (dlopen: perl's XS
   * modules, gcc's plugins, libtorch_python.so under python3, glibc's
   * libthread_db.so under a debugger): a symbol its load does not define
   * is left to that program (unchecked, once per object), not an error;
   * only that program can say, and which one it is no record tells.  A
   * library not found and an executable's symbols stay errors. */
  bool hosted;
};

struct ib_native_stats
{
  size_t objects, loaded, refs, errors, warnings, unchecked, allowed;
  size_t read, cached;  /* ELF files parsed from a layer vs found in the cache */
  size_t layers_read;   /* layer passes made to read them */
  size_t rounds;
  bool reused; /* the verdict kept for the base, the overlay changing nothing it read (memo.h) */
};

/* Problems go to FN; with JSON, the per-object detail is added to it
 * ("objects", "provides").  -1 only when the check could not run.  The
 * verdict is kept in the store and given again to the next image over the
 * same base layers whose overlay leaves what the check read as it was
 * (memo.h; VIEW is observed meanwhile, its entries unchanged); with JSON
 * or a DRIVER the check runs in full.  (native_memo.c; the check is
 * linkgate.c.) */
int ib_native_check (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view,
                     const struct ib_native_rules *rules, ib_problem_fn fn, void *data, struct ib_native_stats *st,
                     cJSON *json, ib_error_t *err);

/* The files the loader maps to start PROGRAM (a view path of a regular
 * file) in the image, as view paths, PROGRAM first: its DT_NEEDED closure
 * as glibc's ld.so finds it with no LD_LIBRARY_PATH.  From the records
 * already cached only (the native indexer's): 1 when one is not cached, or
 * a library would not be found, and then *OUT is NULL; 0 and *OUT (each
 * path and the array malloc'd); -1 on error. */
int ib_link_program_closure (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view,
                             const char *program, char ***out, size_t *n_out, ib_error_t *err);

struct ib_elf_link;

/* The record of the file at FD (its content digest DIGEST; WHAT names it
 * in errors) into the cache folder CACHE, as the gate makes it: the ELF
 * link record, or "not ELF" for a file the loader would not take.  *OUT
 * (may be NULL) gets the record (NULL for not ELF).  -1 only for I/O. */
int ib_link_record_save (const char *cache, const char *digest, int fd, const char *what, struct ib_elf_link **out,
                         ib_error_t *err);

/* The gate's indexer (layers/store/indexer.h): in the pass that makes a layer's
 * file list, the record of every ELF object and "*.so*" file and the text
 * of /etc/ld.so.conf and /etc/ld.so.conf.d/, into the caches the gate
 * reads, so that its rounds read no layer again. */
struct ib_native_indexer
{
  struct ib_indexer ix;
  char *elf_cache, *conf_cache;
};
int ib_native_indexer_init (struct ib_store *s, struct ib_native_indexer *out, ib_error_t *err);
void ib_native_indexer_clear (struct ib_native_indexer *x);

#endif
