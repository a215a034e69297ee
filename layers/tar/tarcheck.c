#include "layers/tar/tarcheck.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/tar/tarpath.h"

/* An open-addressing hash set of strings: a layer can have 100,000
 * entries. */
struct strset
{
  char **slots;
  size_t n_slots, n;
};

struct ib_tar_check
{
  char **problems;
  size_t n_problems;
  struct strset paths; /* the cleaned names so far: duplicates, hard links */
  struct strset links; /* those that are symbolic links */
};

struct ib_tar_check *
ib_tar_check_new (void)
{
  return ib_xcalloc (1, sizeof (struct ib_tar_check));
}

void
ib_tar_check_free (struct ib_tar_check *c)
{
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->n_problems; i++)
    free (c->problems[i]);
  for (size_t i = 0; i < c->paths.n_slots; i++)
    free (c->paths.slots[i]);
  for (size_t i = 0; i < c->links.n_slots; i++)
    free (c->links.slots[i]);
  free (c->problems);
  free (c->paths.slots);
  free (c->links.slots);
  free (c);
}

/* The privileged kinds' WHYs (ib_tar_finding_kind tells them by these). */
#define WHY_SETID "setuid or setgid file"
#define WHY_DEVICE "device node"
#define WHY_FIFO "FIFO"
#define WHY_SOCKET "socket"

static void
problem (struct ib_tar_check *c, const char *name, const char *why)
{
  c->problems = ib_xrealloc (c->problems, (c->n_problems + 1) * sizeof (*c->problems));
  /* Names are shown as they are, but cut: a 5,000-byte name is a finding,
   * not a message. */
  c->problems[c->n_problems++] = ib_xasprintf ("entry `%.200s%s`: %s", name, strlen (name) > 200 ? "..." : "", why);
}

static bool
has_dotdot (const char *p)
{
  for (const char *s = p; *s;)
    {
      size_t len = strcspn (s, "/");
      if (len == 2 && s[0] == '.' && s[1] == '.')
        return true;
      s += len;
      s += *s == '/';
    }
  return false;
}

static bool
long_component (const char *p)
{
  for (const char *s = p; *s;)
    {
      size_t len = strcspn (s, "/");
      if (len > NAME_MAX)
        return true;
      s += len;
      s += *s == '/';
    }
  return false;
}

/* Does TARGET, relative to the folder of NAME (both clean), climb above
 * the root? */
static bool
climbs_out (const char *name, const char *target)
{
  int depth = 0;
  for (const char *s = name; (s = strchr (s, '/')); s++)
    depth++;
  for (const char *s = target; *s;)
    {
      size_t len = strcspn (s, "/");
      if (len == 2 && s[0] == '.' && s[1] == '.')
        {
          if (--depth < 0)
            return true;
        }
      else if (len > 0 && !(len == 1 && s[0] == '.'))
        depth++;
      s += len;
      s += *s == '/';
    }
  return false;
}

static size_t
slot_of (char *const *slots, size_t n_slots, const char *path)
{
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *) path; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  size_t i = (size_t) (h & (n_slots - 1));
  while (slots[i] && strcmp (slots[i], path) != 0)
    i = (i + 1) & (n_slots - 1);
  return i;
}

static bool
set_has (const struct strset *set, const char *path)
{
  return set->n_slots && set->slots[slot_of (set->slots, set->n_slots, path)] != NULL;
}

/* Add PATH (owned) unless it is there. */
static void
set_add (struct strset *set, char *path)
{
  if (2 * (set->n + 1) > set->n_slots)
    {
      size_t n = set->n_slots ? 2 * set->n_slots : 1024;
      char **slots = ib_xcalloc (n, sizeof (*slots));
      for (size_t i = 0; i < set->n_slots; i++)
        if (set->slots[i])
          slots[slot_of (slots, n, set->slots[i])] = set->slots[i];
      free (set->slots);
      set->slots = slots;
      set->n_slots = n;
    }
  size_t i = slot_of (set->slots, set->n_slots, path);
  if (set->slots[i])
    {
      free (path);
      return;
    }
  set->slots[i] = path;
  set->n++;
}

/* Is a folder of CLEAN a symbolic link of the layer?  Unpacked in order,
 * the entry would be written wherever that link points. */
static bool
under_link (const struct ib_tar_check *c, const char *clean)
{
  if (c->links.n == 0)
    return false;
  cleanup_free char *p = ib_xstrdup (clean);
  for (char *slash = strchr (p, '/'); slash; slash = strchr (slash + 1, '/'))
    {
      *slash = '\0';
      bool hit = set_has (&c->links, p);
      *slash = '/';
      if (hit)
        return true;
    }
  return false;
}

/* The whiteout target of a base name ".wh.X": X must be a plain name. */
static void
check_whiteout (struct ib_tar_check *c, const char *name, const char *clean)
{
  const char *slash = strrchr (clean, '/');
  const char *base = slash ? slash + 1 : clean;
  if (strncmp (base, ".wh.", 4) != 0 || strcmp (base, ".wh..wh..opq") == 0)
    return;
  if (ib_whiteout_names_nothing (base + 4))
    problem (c, name, "whiteout of `.`, `..` or the root");
}

static void
check_link (struct ib_tar_check *c, const char *name, const char *clean, struct archive_entry *ae)
{
  const char *hard = archive_entry_hardlink (ae);
  if (hard)
    {
      cleanup_free char *t = ib_clean_tar_path (hard);
      if (hard[0] == '/' || has_dotdot (hard))
        problem (c, name, "hard link to a name outside the root");
      else if (t == NULL || !set_has (&c->paths, t))
        problem (c, name, "hard link to a file that the layer does not have before it");
      return;
    }
  const char *sym = archive_entry_filetype (ae) == AE_IFLNK ? archive_entry_symlink (ae) : NULL;
  if (sym && sym[0] != '/' && climbs_out (clean, sym))
    problem (c, name, "symbolic link that leaves the root");
}

void
ib_tar_check_entry (struct ib_tar_check *c, struct archive_entry *ae, const char *warning)
{
  const char *name = archive_entry_pathname (ae) ? archive_entry_pathname (ae) : "";
  /* A name that the C locale cannot show is not hostile: the bytes are kept. */
  if (warning && !strstr (warning, "can't be converted"))
    {
      cleanup_free char *why = ib_xasprintf ("malformed header: %s", warning);
      for (char *q = why; (q = strchr (q, '`')); q++)
        *q = '\''; /* a WHY never holds "`: " (ib_tar_finding_kind) */
      problem (c, name, why);
    }
  if (strlen (name) >= PATH_MAX || long_component (name))
    problem (c, name, "name longer than PATH_MAX, or a component longer than NAME_MAX");
  mode_t type = archive_entry_filetype (ae);
  bool dotdot = has_dotdot (name);
  cleanup_free char *clean = dotdot ? NULL : ib_clean_tar_path (name);
  /* The root folder itself, however it is spelled: umoci writes `/`, GNU
   * tar `./`.  It names nothing outside the root, and every real base made
   * by those tools has it: reporting it would fail every such image. */
  if (clean == NULL && !dotdot && type == AE_IFDIR)
    return;
  if (name[0] == '/')
    problem (c, name, "absolute name");
  if (dotdot)
    {
      problem (c, name, "name with a `..` component");
      return;
    }
  if (clean == NULL)
    return; /* the root, as something other than a folder: named above when absolute */
  if (archive_entry_hardlink (ae) == NULL
      && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK))
    problem (c, name, type == AE_IFIFO ? WHY_FIFO : type == AE_IFSOCK ? WHY_SOCKET : WHY_DEVICE);
  if (type != AE_IFDIR && (archive_entry_perm (ae) & (S_ISUID | S_ISGID)))
    problem (c, name, WHY_SETID);
  check_link (c, name, clean, ae);
  check_whiteout (c, name, clean);
  if (under_link (c, clean))
    problem (c, name, "entry under a symbolic link of the layer");
  if (set_has (&c->paths, clean))
    problem (c, name, "the same path twice in the layer");
  if (type == AE_IFLNK && archive_entry_hardlink (ae) == NULL)
    set_add (&c->links, ib_xstrdup (clean));
  set_add (&c->paths, steal_pointer (&clean));
}

const char *const *
ib_tar_check_problems (const struct ib_tar_check *c, size_t *n)
{
  *n = c->n_problems;
  return (const char *const *) c->problems;
}

/* The WHY of TEXT: after its last "`: ". */
static const char *
finding_why (const char *text)
{
  const char *why = NULL;
  for (const char *p = text; (p = strstr (p, "`: ")); p++)
    why = p + 3;
  return why;
}

enum ib_tar_finding
ib_tar_finding_kind (const char *text)
{
  static const struct
  {
    const char *why;
    enum ib_tar_finding kind;
  } privileged[] = { { WHY_SETID, IB_TAR_SETID },
                     { WHY_DEVICE, IB_TAR_DEVICE },
                     { WHY_FIFO, IB_TAR_FIFO },
                     { WHY_SOCKET, IB_TAR_SOCKET } };
  const char *why = finding_why (text);
  for (size_t i = 0; why && i < sizeof (privileged) / sizeof (privileged[0]); i++)
    if (strcmp (why, privileged[i].why) == 0)
      return privileged[i].kind;
  return IB_TAR_ESCAPE;
}

char *
ib_tar_finding_name (const char *text)
{
  const char *start = strstr (text, "entry `");
  const char *why = finding_why (text);
  if (start == NULL || why == NULL || why - 3 < start + 7)
    return ib_xstrdup (text);
  start += 7;
  return ib_xasprintf ("%.*s", (int) (why - 3 - start), start);
}
