/* Hostile layer entries: what a tar may say that escapes or abuses the root
 * it is unpacked into.  Every layer read through the layer reader goes
 * through this check (a base's included), so that the entries are named
 * rather than silently carried.  Two classes (ib_tar_finding_kind): what
 * escapes the root or lies about itself, which imgbuild and imgverify
 * refuse (exit 4); and what is only privileged (setuid/setgid files,
 * devices, FIFOs, sockets), which every distribution base holds (`su`,
 * `passwd`, `mount`, `/dev/null`): counted and reported, never refused
 * unless asked (--strict-base).
 *
 * What is reported, each as "entry `NAME`: WHY":
 *   a name with a `..` component, or an absolute name;
 *   a hard link whose target is absolute, has `..`, or is not an earlier
 *   entry of the layer; a symbolic link whose relative target climbs above
 *   the root (an absolute target resolves inside the root, as runtimes do);
 *   character and block devices, FIFOs and sockets;
 *   setuid and setgid files;
 *   the same path twice;
 *   a whiteout of `.`, `..` or the root;
 *   a name longer than PATH_MAX, or a component longer than NAME_MAX;
 *   a header that libarchive warns about (malformed PAX records, PAX
 *   values that contradict the header). */
#ifndef IB_TARCHECK_H
#define IB_TARCHECK_H

#include <archive_entry.h>
#include <stddef.h>

/* The version of these rules, and of the layer reader's verdicts on a tar
 * stream (layer_reader.h): records of earlier reads (readthrough.h) made
 * under other rules are not used.  Bump it when a rule changes. */
#define IB_TAR_CHECK_RULES 2

struct ib_tar_check;

struct ib_tar_check *ib_tar_check_new (void);
void ib_tar_check_free (struct ib_tar_check *c);
/* One entry, as read; WARNING is libarchive's message when reading its
 * header returned ARCHIVE_WARN, else NULL. */
void ib_tar_check_entry (struct ib_tar_check *c, struct archive_entry *ae, const char *warning);
/* The problems so far, in the order of the entries; valid until the next
 * entry or the check is freed. */
const char *const *ib_tar_check_problems (const struct ib_tar_check *c, size_t *n);

/* The class of a finding TEXT as this check writes it ("entry `NAME`: WHY",
 * with any prefix: "layer DIGEST: entry ..."), told by its WHY, the text
 * after the last "`: " (a WHY never holds one: libarchive's warnings are
 * written with their backquotes replaced).  Everything but the privileged
 * kinds is IB_TAR_ESCAPE. */
enum ib_tar_finding
{
  IB_TAR_ESCAPE, /* escapes the root or lies: `..`, absolute, links out, duplicates, ... */
  IB_TAR_SETID,  /* a setuid or setgid file */
  IB_TAR_DEVICE, /* a character or block device */
  IB_TAR_FIFO,
  IB_TAR_SOCKET,
};
#define IB_TAR_FINDING_KINDS 5
enum ib_tar_finding ib_tar_finding_kind (const char *text);
/* The entry's name in TEXT (as shown: cut at 200 bytes), malloc'd; a copy
 * of TEXT when it is not a finding. */
char *ib_tar_finding_name (const char *text);

#endif
