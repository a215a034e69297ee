/* What a file holds, as names that two versions of it can be compared by:
 * a Python module's module-level definitions (each with a hash of the
 * statements that bind it, so that a changed body shows as a change), a
 * shared object's exported dynamic symbols, and its GPU code's kernels per
 * SM ("sm_121a kernel", "compute_120 kernel").  The names come from the
 * gates' own extractors (pysyms, elfsyms, cudabin), so the port triage,
 * the drift pins and imgverify --diff see a file as the gates do. */
#ifndef IB_FILESUM_H
#define IB_FILESUM_H

#include <stddef.h>
#include <stdint.h>

#include "layers/view/fsview.h"
#include "layers/image/image.h"
#include "layers/store/store.h"
#include "util/error.h"

enum ib_sym_kind
{
  IB_SYM_PYTHON = 'p', /* a module-level definition */
  IB_SYM_DYNAMIC = 'e', /* an exported dynamic symbol */
  IB_SYM_KERNEL = 'k',  /* "ARCH NAME": a kernel in the GPU code for ARCH */
};

struct ib_sym
{
  char kind;     /* enum ib_sym_kind */
  char *name;
  uint64_t hash; /* Python only: of the statements that bind it; else 0 */
};

struct ib_file_summary
{
  size_t n;
  struct ib_sym *s; /* sorted by kind, then name */
};

/* The summary of the file open on FD; PATH decides how it is read (a .py
 * is Python; anything else is looked at as ELF and GPU code).  A file of
 * none of these kinds has an empty summary. */
int ib_file_summary_fd (const char *path, int fd, struct ib_file_summary **out, ib_error_t *err);
/* The summaries of FILES (regular files of a view over IMG), read out of
 * the image's layers in one pass: OUT[i] for FILES[i]. */
int ib_file_summary_entries (struct ib_store *s, const struct ib_image *img, const struct ib_fs_entry *const *files,
                             size_t n, struct ib_file_summary **out, ib_error_t *err);
void ib_file_summary_free (struct ib_file_summary *f);
/* Add NAME (copied); the summary is sorted again by ib_file_summary_sort. */
void ib_file_summary_add (struct ib_file_summary *f, char kind, const char *name, uint64_t hash);
void ib_file_summary_sort (struct ib_file_summary *f);

/* What changed from A to B: '+' added, '-' removed, '~' a Python
 * definition whose statements changed.  Either may be NULL (a file that
 * does not exist): everything of the other is added or removed. */
struct ib_sym_change
{
  char change;
  const struct ib_sym *sym; /* in B for '+' and '~', in A for '-' */
};
size_t ib_file_summary_diff (const struct ib_file_summary *a, const struct ib_file_summary *b,
                             struct ib_sym_change **out);
/* "python", "dynamic", "kernel" */
const char *ib_sym_kind_name (char kind);
/* The names of CH[0..N) with change C and kind K, ", "-separated, at most
 * MAX of them and "… (N more)": NULL when there are none. */
char *ib_sym_changes_list (const struct ib_sym_change *ch, size_t n, char c, char k, size_t max);
/* The changes for people: "definitions changed: a, b; definitions added:
 * c; kernels removed: sm_121a k" (MAX names per list), or a sentence that
 * says nothing changed. */
char *ib_sym_changes_text (const struct ib_sym_change *ch, size_t n, size_t max);

#endif
