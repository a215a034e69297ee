/* imgverify --diff A B: what changed between two images, or between an
 * image and a definition folder (its overlay as it would be built over its
 * base, sources read from disk): the files added, removed and changed
 * (type, layer, sha256), and per file the Python definitions, dynamic
 * symbols and kernels per SM added, removed or changed (filesum.h).
 *
 * A "side" is what both --diff and --triage compare: an image's merged
 * file system, plus, for a definition folder, the overlay's files on disk
 * stacked over it as one more layer. */
#ifndef IB_IMGDIFF_H
#define IB_IMGDIFF_H

#include <stdbool.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/image/transport.h"
#include "layers/store/store.h"
#include "builder/definition/definition.h"
#include "builder/diff/filesum.h"

struct ib_side
{
  const char *ref;           /* as given */
  struct ib_image *img;      /* the image, or the definition's base */
  struct ib_fsview *view;    /* with the overlay for a definition */
  struct ib_definition *def; /* a definition folder, else NULL */
  size_t n_sources;
  char **source_paths;       /* view paths of the overlay's files, sorted */
  char **sources;            /* their sources on disk */
  int overlay_layer;         /* its layer index in VIEW; -1 without one */
};

/* REF is a reference, or a folder with an image.conf. */
int ib_side_open (struct ib_store *s, const char *ref, const struct ib_remote_options *remote, struct ib_side *out,
                  ib_error_t *err);
void ib_side_clear (struct ib_side *side);
/* Summaries of FILES (regular files of SIDE's view): the overlay's from
 * disk, the others out of the image's layers. */
int ib_side_summaries (struct ib_store *s, const struct ib_side *side, const struct ib_fs_entry *const *files,
                       size_t n, struct ib_file_summary **out, ib_error_t *err);
/* "layer 3 sha256:…", or "definition" for the overlay of a folder. */
char *ib_side_layer_name (const struct ib_side *side, const struct ib_fs_entry *e);

struct ib_diff_options
{
  const char *store;
  struct ib_remote_options remote;
  bool json;
};

/* Prints the table on stdout (or the JSON document, schema
 * "imgverify.diff/v1"); returns the exit code. */
int ib_image_diff_run (const char *a, const char *b, const struct ib_diff_options *o);

#endif
