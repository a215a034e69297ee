#include "builder/attest/sbom.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cudabin.h"
#include "kernels/kgate.h"
#include "layers/view/extract.h"
#include "symbol-check/link-check/memo.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/attest/attest.h"

#ifndef IB_VERSION
#define IB_VERSION "0.1.0"
#endif

#define MAX_DPKG_STATUS (64u << 20)
#define MAX_METADATA (4u << 20)

/* The value of the header FIELD in the RFC 822 paragraph that starts at P
 * and ends at END (exclusive), first line only; NULL when absent. */
static char *
field (const char *p, const char *end, const char *name)
{
  size_t n = strlen (name);
  while (p < end)
    {
      const char *eol = memchr (p, '\n', (size_t) (end - p));
      if (eol == NULL)
        eol = end;
      if ((size_t) (eol - p) > n && strncasecmp (p, name, n) == 0 && p[n] == ':')
        {
          const char *v = p + n + 1;
          while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
          const char *e = eol;
          while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            e--;
          return ib_xasprintf ("%.*s", (int) (e - v), v);
        }
      p = eol + 1;
    }
  return NULL;
}

static cJSON *
package (size_t *ids, const char *kind, const char *name, const char *version)
{
  cJSON *p = cJSON_CreateObject ();
  cleanup_free char *id = ib_xasprintf ("SPDXRef-%s-%zu", kind, ++*ids);
  cJSON_AddStringToObject (p, "SPDXID", id);
  cJSON_AddStringToObject (p, "name", name);
  if (version)
    cJSON_AddStringToObject (p, "versionInfo", version);
  cJSON_AddStringToObject (p, "downloadLocation", "NOASSERTION");
  cJSON_AddBoolToObject (p, "filesAnalyzed", false);
  return p;
}

static void
add_purl (cJSON *p, const char *purl)
{
  cJSON *ref = cJSON_CreateObject ();
  cJSON_AddStringToObject (ref, "referenceCategory", "PACKAGE-MANAGER");
  cJSON_AddStringToObject (ref, "referenceType", "purl");
  cJSON_AddStringToObject (ref, "referenceLocator", purl);
  cJSON_AddItemToArray (cJSON_AddArrayToObject (p, "externalRefs"), ref);
}

/* A dpkg state whose package has its files on disk: every state but
 * not-installed and config-files (dpkg-query(1), "package states"). */
static bool
has_files (const char *state)
{
  static const char *const states[]
      = { "installed", "unpacked", "half-installed", "half-configured", "triggers-awaited", "triggers-pending" };
  for (size_t i = 0; i < sizeof (states) / sizeof (*states); i++)
    if (strcmp (state, states[i]) == 0)
      return true;
  return false;
}

/* The fields of one paragraph of dpkg's status file the SBOM uses. */
struct dpkg_para
{
  char *name, *version, *arch, *status;
};

/* The next paragraph of the status text at *P (before END) into D; false
 * at the end (D untouched). */
static bool
dpkg_next (const char **p, const char *end, struct dpkg_para *d)
{
  if (*p >= end)
    return false;
  const char *q = strstr (*p, "\n\n");
  const char *para_end = q ? q + 1 : end;
  d->name = field (*p, para_end, "Package");
  d->version = field (*p, para_end, "Version");
  d->arch = field (*p, para_end, "Architecture");
  d->status = field (*p, para_end, "Status");
  *p = q ? q + 2 : end;
  return true;
}

static void
dpkg_para_clear (struct dpkg_para *d)
{
  free (d->name);
  free (d->version);
  free (d->arch);
  free (d->status);
}

/* A package the SBOM lists: named, versioned, its files on disk. */
static bool
dpkg_listed (const struct dpkg_para *d)
{
  const char *state = d->status ? strrchr (d->status, ' ') : NULL;
  state = state ? state + 1 : d->status;
  return d->name && *d->name && d->version && *d->version && state && has_files (state);
}

/* One package of a package manager's: KIND "deb" or "py", its purl, and
 * SOURCE, the file that lists it. */
static void
add_listed (cJSON *list, size_t *ids, const char *kind, const char *name, const char *version, const char *purl,
            const char *source)
{
  cJSON *pkg = package (ids, kind, name, version);
  add_purl (pkg, purl);
  cJSON_AddStringToObject (pkg, "sourceInfo", source);
  cJSON_AddItemToArray (list, pkg);
}

void
ib_sbom_add_dpkg (cJSON *list, const char *text, size_t *ids)
{
  struct dpkg_para d;
  for (const char *p = text, *end = text + strlen (text); dpkg_next (&p, end, &d); dpkg_para_clear (&d))
    if (dpkg_listed (&d))
      {
        cleanup_free char *purl = ib_xasprintf ("pkg:deb/debian/%s@%s%s%s", d.name, d.version,
                                                 d.arch ? "?arch=" : "", d.arch ? d.arch : "");
        add_listed (list, ids, "deb", d.name, d.version, purl, "/var/lib/dpkg/status");
      }
}

int
ib_sbom_python_metadata (const char *text, char **name, char **version)
{
  /* The headers end at the first empty line (the description follows). */
  const char *q = strstr (text, "\n\n");
  const char *end = q ? q + 1 : text + strlen (text);
  *name = field (text, end, "Name");
  *version = field (text, end, "Version");
  return *name && *version ? 0 : -1;
}

/* What the SBOM takes from a package file, as the text of the same kind
 * that gives exactly that (the dpkg paragraphs of the packages it lists, the
 * Name and Version of a Python metadata file): small, so it is cached by
 * the file's content digest (STORE/imgbuild/sbom/), and a warm build reads
 * no layer for its SBOM. */
static char *
reduce (const char *path, const char *text)
{
  char *out = NULL;
  size_t used = 0;
  ib_xappend (&out, &used, "", 0);
  if (strcmp (path, "var/lib/dpkg/status") == 0)
    {
      struct dpkg_para d;
      for (const char *p = text, *end = text + strlen (text); dpkg_next (&p, end, &d); dpkg_para_clear (&d))
        if (dpkg_listed (&d))
          {
            cleanup_free char *para = ib_xasprintf ("Package: %s\nVersion: %s\n%s%s%sStatus: %s\n\n", d.name,
                                                    d.version, d.arch ? "Architecture: " : "", d.arch ? d.arch : "",
                                                    d.arch ? "\n" : "", d.status);
            ib_xappend (&out, &used, para, strlen (para));
          }
    }
  else
    {
      cleanup_free char *name = NULL, *version = NULL;
      if (ib_sbom_python_metadata (text, &name, &version) == 0)
        {
          cleanup_free char *head = ib_xasprintf ("Name: %s\nVersion: %s\n\n", name, version);
          ib_xappend (&out, &used, head, strlen (head));
        }
    }
  return out;
}

/* The cache entry: the reduced text, then this line, so that a file cut
 * short is no entry. */
#define SBOM_CACHE_END "\n# imgbuild sbom cache 1\n"

static char *
cache_path (const char *dir, const struct ib_fs_entry *e)
{
  return dir && ib_digest_hex_valid (e->digest) ? ib_path_join (dir, e->digest) : NULL;
}

static char *
cache_load (const char *dir, const struct ib_fs_entry *e)
{
  cleanup_free char *path = cache_path (dir, e);
  cleanup_free char *text = NULL;
  size_t len = 0, k = strlen (SBOM_CACHE_END);
  ib_error_t err = NULL;
  if (path == NULL || ib_read_file (path, MAX_METADATA, &text, &len, &err) < 0)
    {
      ib_error_release (&err);
      return NULL;
    }
  if (len < k || memcmp (text + len - k, SBOM_CACHE_END, k) != 0)
    return NULL;
  text[len - k] = '\0';
  return steal_pointer (&text);
}

struct reader
{
  const char *cache; /* STORE/imgbuild/sbom, or NULL */
  const struct ib_fs_entry **missing;
  char **texts; /* the reduced text of each missing[i] */
  size_t n_missing;
};

/* Write the cache entry of the file with content DIGEST whose reduced
 * text is REDUCED; a cache that cannot be written only costs a read next
 * time. */
static void
cache_save (const char *dir, const char *digest, const char *reduced)
{
  if (dir == NULL || !ib_digest_hex_valid (digest))
    return;
  cleanup_free char *path = ib_path_join (dir, digest);
  cleanup_free char *entry = ib_xasprintf ("%s%s", reduced, SBOM_CACHE_END);
  ib_error_t ce = NULL;
  if (ib_write_cache_file (path, entry, strlen (entry), &ce) < 0)
    ib_error_release (&ce);
}

static int
read_one (void *data, const struct ib_fs_entry *e, struct ib_layer_reader *r, ib_error_t *err)
{
  struct reader *rd = data;
  bool dpkg = strcmp (e->path, "var/lib/dpkg/status") == 0;
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_reader_slurp (r, dpkg ? MAX_DPKG_STATUS : MAX_METADATA, &text, &len, err) < 0)
    return ib_error_wrap (err, "SBOM: /%s", e->path);
  text[len] = '\0';
  for (size_t i = 0; i < rd->n_missing; i++)
    if (rd->missing[i] == e && rd->texts[i] == NULL)
      {
        rd->texts[i] = reduce (e->path, text);
        cache_save (rd->cache, e->digest, rd->texts[i]);
        break;
      }
  return 0;
}

/* The package of a Python metadata file at PATH, from its reduced text. */
static void
add_python (cJSON *list, size_t *ids, const char *path, const char *text)
{
  cleanup_free char *name = NULL, *version = NULL;
  if (ib_sbom_python_metadata (text, &name, &version) < 0)
    return;
  cleanup_free char *purl = ib_xasprintf ("pkg:pypi/%s@%s", name, version);
  cleanup_free char *where = ib_xasprintf ("/%s", path);
  add_listed (list, ids, "py", name, version, purl, where);
}

static bool
ends_with (const char *s, const char *suffix)
{
  size_t n = strlen (s), k = strlen (suffix);
  return n >= k && strcmp (s + n - k, suffix) == 0;
}

/* A file the SBOM takes packages from (a regular file at view PATH). */
static bool
is_package_file (const char *path)
{
  return strcmp (path, "var/lib/dpkg/status") == 0 || ends_with (path, ".dist-info/METADATA")
         || ends_with (path, ".egg-info/PKG-INFO") || ends_with (path, ".egg-info");
}

/* ---- the indexer: the cache filled in the file-list pass ----------------- */

static enum ib_index_need
sbom_wants (void *data, const char *path, uint64_t size, const unsigned char *head, size_t n_head)
{
  (void) data;
  (void) head;
  (void) n_head;
  /* Larger files are left to add_package_files, which reads them (or
   * refuses them) as before. */
  uint64_t max = strcmp (path, "var/lib/dpkg/status") == 0 ? MAX_DPKG_STATUS : MAX_METADATA;
  return is_package_file (path) && size <= max && size <= IB_INDEX_TEXT_MAX ? IB_INDEX_TEXT : IB_INDEX_SKIP;
}

static void
sbom_index (void *data, const char *path, const char *digest, const char *text, size_t len, int fd)
{
  (void) len;
  (void) fd;
  struct ib_sbom_indexer *x = data;
  cleanup_free char *reduced = reduce (path, text);
  cache_save (x->cache, digest, reduced);
}

int
ib_sbom_indexer_init (struct ib_store *s, struct ib_sbom_indexer *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  if (ib_store_cache_dir (s, "sbom", &out->cache, err) < 0)
    return -1;
  out->ix = (struct ib_indexer){ "sbom", sbom_wants, sbom_index, out, false };
  return 0;
}

void
ib_sbom_indexer_clear (struct ib_sbom_indexer *x)
{
  free (x->cache);
  memset (x, 0, sizeof (*x));
}

/* The dpkg status file and the Python metadata files, listed in the
 * view's order: each from the cache by its content digest, the others read
 * (the layers that provide them, once each) and cached. */
static int
add_package_files (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view, cJSON *list,
                   size_t *ids, ib_error_t *err)
{
  size_t n = ib_fsview_count (view), k = 0;
  const struct ib_fs_entry **wanted = ib_xcalloc (1, sizeof (*wanted));
  for (size_t i = 0; i < n; i++)
    {
      /* The name first: a base's view is read in place, and an entry made
       * of each of its records (336,000 at 30 GB) was 16 MB of a cold
       * build's peak, for the few hundred package files. */
      if (!is_package_file (ib_fsview_path (view, i)))
        continue;
      const struct ib_fs_entry *e = ib_fsview_at (view, i);
      if (e->type == IB_FS_FILE)
        {
          /* Looked up, not only walked: a memo recording (add_packages)
           * learns of the file and of the folders above it. */
          ib_fsview_lookup (view, e->path);
          wanted = ib_xrealloc (wanted, (k + 1) * sizeof (*wanted));
          wanted[k++] = e;
        }
    }
  cleanup_free char *cache = NULL;
  ib_error_t ce = NULL;
  if (ib_store_cache_dir (s, "sbom", &cache, &ce) < 0)
    ib_error_release (&ce); /* no cache: every file read */
  char **texts = ib_xcalloc (k ? k : 1, sizeof (*texts));
  struct reader rd = { .cache = cache, .missing = ib_xcalloc (k ? k : 1, sizeof (*rd.missing)),
                       .texts = ib_xcalloc (k ? k : 1, sizeof (*rd.texts)) };
  for (size_t i = 0; i < k; i++)
    if ((texts[i] = cache_load (cache, wanted[i])) == NULL)
      rd.missing[rd.n_missing++] = wanted[i];
  int r = rd.n_missing ? ib_extract_entries (s, img, rd.missing, rd.n_missing, read_one, &rd, err) : 0;
  for (size_t i = 0, m = 0; i < k; i++)
    {
      if (texts[i] == NULL && m < rd.n_missing && rd.missing[m] == wanted[i])
        {
          texts[i] = steal_pointer (&rd.texts[m]); /* a macro: its argument twice */
          m++;
        }
      if (r < 0 || texts[i] == NULL)
        continue;
      if (strcmp (wanted[i]->path, "var/lib/dpkg/status") == 0)
        ib_sbom_add_dpkg (list, texts[i], ids);
      else
        add_python (list, ids, wanted[i]->path, texts[i]);
    }
  for (size_t i = 0; i < k; i++)
    free (texts[i]);
  for (size_t i = 0; i < rd.n_missing; i++)
    free (rd.texts[i]);
  free (texts);
  free (rd.texts);
  free (rd.missing);
  free (wanted);
  return r;
}

/* ---- the package list kept per base (symbol-check/link-check/memo.h) ----------------- */

/* The list is a function of the package files the walk picks (each looked
 * up: the memo knows them and the folders above them, so an overlay that
 * replaces, hides or deletes one is seen) and of their content (the cache
 * above, by digest; the program's build-id is in the memo's key): kept
 * per base, so that a warm build whose overlay adds no package file and
 * changes none of those paths neither walks the base's every path nor
 * parses dpkg's status again.  One memo line per package, in the list's
 * order: "KIND\tNAME\tVERSION\tPURL\tSOURCE"; a list with a tab in a
 * field is not kept. */
#define PKG_MEMO "sbom-packages"
#define PKG_MEMO_SETTINGS "files var/lib/dpkg/status *.dist-info/METADATA *.egg-info/PKG-INFO *.egg-info\n"
#define PKG_FIELDS 5

static bool
pkg_selects (void *data, const struct ib_fs_entry *e)
{
  (void) data;
  return is_package_file (e->path);
}

/* MSG's fields into F, in a copy (*COPY, malloc'd); false when it is not
 * one of ours. */
static bool
pkg_split (const char *msg, char **copy, char *f[PKG_FIELDS])
{
  char *c = *copy = ib_xstrdup (msg);
  for (int i = 0; i < PKG_FIELDS; i++)
    {
      f[i] = c;
      char *tab = strchr (c, '\t');
      if ((tab == NULL) != (i == PKG_FIELDS - 1))
        return false;
      if (tab)
        {
          *tab = '\0';
          c = tab + 1;
        }
    }
  return strcmp (f[0], "deb") == 0 || strcmp (f[0], "py") == 0;
}

/* The kept list of hit M into LIST; false (LIST untouched) when a line
 * is not one of ours, and then the list is made again. */
static bool
pkg_replay (const struct ib_memo *m, cJSON *list, size_t *ids)
{
  size_t n;
  const struct ib_memo_said *p = ib_memo_problems (m, &n);
  char **copies = ib_xcalloc (n + 1, sizeof (*copies));
  char *(*f)[PKG_FIELDS] = ib_xcalloc (n + 1, sizeof (*f));
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++)
    ok = !p[i].is_error && pkg_split (p[i].msg, &copies[i], f[i]);
  for (size_t i = 0; ok && i < n; i++)
    add_listed (list, ids, f[i][0], f[i][1], f[i][2], f[i][3], f[i][4]);
  for (size_t i = 0; i < n; i++)
    free (copies[i]);
  free (copies);
  free (f);
  return ok;
}

/* A string field of package P, "" when absent. */
static const char *
pkg_field (const cJSON *p, const char *name)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (p, name);
  return cJSON_IsString (v) ? v->valuestring : "";
}

/* The packages of LIST from its FROM-th on, as memo lines into M; false
 * when one cannot be kept (a field with a tab). */
static bool
pkg_keep (struct ib_memo *m, const cJSON *list, int from)
{
  for (int i = from; i < cJSON_GetArraySize (list); i++)
    {
      const cJSON *p = cJSON_GetArrayItem (list, i);
      const char *id = pkg_field (p, "SPDXID");
      const char *kind = strncmp (id, "SPDXRef-py-", 11) == 0 ? "py" : "deb";
      const cJSON *ref = cJSON_GetArrayItem (cJSON_GetObjectItemCaseSensitive (p, "externalRefs"), 0);
      const char *f[PKG_FIELDS] = { kind, pkg_field (p, "name"), pkg_field (p, "versionInfo"),
                                    pkg_field (ref, "referenceLocator"), pkg_field (p, "sourceInfo") };
      for (int k = 0; k < PKG_FIELDS; k++)
        if (strchr (f[k], '\t'))
          return false;
      cleanup_free char *line = ib_xasprintf ("%s\t%s\t%s\t%s\t%s", f[0], f[1], f[2], f[3], f[4]);
      ib_memo_said (m, false, line);
    }
  return true;
}

/* Whether IMG's overlay (its layers from FIRST on) hides no package file
 * of the base: no whiteout or opaque marker, and nothing but a regular
 * file (which the memo picks: then nothing is kept) at a package file's
 * path.  A build's overlay puts nothing but a folder where the base has a
 * folder (the definition gate refuses it), so a package file below one is
 * not hidden either.  Only a list made over such an overlay is the base's
 * own and may be kept: the memo compares the next overlay with this one
 * at the paths the list read, and a package file this one hid was never
 * read.  False when an overlay's file list cannot be had. */
static bool
hides_no_package (struct ib_store *s, const struct ib_image *img, int first)
{
  bool ok = true;
  for (size_t i = first >= 1 ? (size_t) first : img->n_layers; ok && i < img->n_layers; i++)
    {
      struct ib_fs_list *l = NULL;
      ib_error_t e = NULL;
      if (ib_fs_list_layer (s, &img->layers[i], &img->diff_ids[i], &l, &e) < 0)
        {
          ib_error_release (&e);
          return false;
        }
      for (size_t j = 0; ok && j < l->n; j++)
        ok = l->e[j].type == IB_FS_FILE
             || (!is_package_file (l->e[j].path) && l->e[j].type != IB_FS_WHITEOUT && l->e[j].type != IB_FS_OPAQUE);
      ib_fs_list_free (l);
    }
  return ok;
}

/* The Debian and Python packages of IMG (its layers from FIRST on its
 * overlay), from the memo over its base when that holds; *REUSED says
 * whether it did. */
static int
add_packages (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, int first, cJSON *list,
              size_t *ids, bool *reused, ib_error_t *err)
{
  struct ib_memo *m = NULL;
  ib_memo_open (s, PKG_MEMO, PKG_MEMO_SETTINGS, img, first, view, pkg_selects, NULL, &m);
  *reused = m && ib_memo_hit (m) && pkg_replay (m, list, ids);
  if (*reused || (m && ib_memo_hit (m)))
    {
      /* Reused; or not ours, so not to be kept either: made again, without a memo. */
      ib_memo_free (m);
      m = NULL;
    }
  if (*reused)
    return 0;
  int from = cJSON_GetArraySize (list);
  if (m)
    ib_memo_record (m, view);
  int r = add_package_files (s, img, view, list, ids, err);
  if (m)
    ib_fsview_observe (view, NULL);
  if (m && r == 0 && hides_no_package (s, img, first) && pkg_keep (m, list, from))
    ib_memo_save (m);
  ib_memo_free (m);
  return r;
}

/* Code that the runtime loads and that has a kernel to launch: not
 * nvlink's relocatable input, not the empty cubins nvcc -shared leaves. */
static bool
runs (const struct ib_cuda_entry *e)
{
  return !e->relocatable && e->n_kernels > 0;
}

static bool
runs_code (const struct ib_cuda_file *f)
{
  for (size_t i = 0; i < f->n; i++)
    if (runs (&f->e[i]))
      return true;
  return false;
}

/* "GPU code: ARCH ...": the architectures with kernels, each once, in the
 * order the file has them. */
static char *
gpu_comment (const struct ib_cuda_file *f)
{
  char *text = ib_xstrdup ("GPU code:");
  for (size_t i = 0; i < f->n; i++)
    {
      if (!runs (&f->e[i]))
        continue;
      char arch[32], word[40];
      ib_cuda_entry_arch (&f->e[i], arch, sizeof (arch));
      snprintf (word, sizeof (word), " %s", arch);
      size_t wl = strlen (word);
      bool seen = false;
      for (const char *p = strstr (text, word); p && !seen; p = strstr (p + 1, word))
        seen = p[wl] == '\0' || p[wl] == ' ';
      if (seen)
        continue;
      size_t len = strlen (text);
      text = ib_xrealloc (text, len + wl + 1);
      memcpy (text + len, word, wl + 1);
    }
  return text;
}

/* One object with GPU code: PATH (in the image, no leading slash), its
 * content's DIGEST (hex) and gpu_comment's COMMENT. */
static cJSON *
gpu_package (size_t *ids, const char *path, const char *digest, const char *comment)
{
  cleanup_free char *abs = ib_xasprintf ("/%s", path);
  cJSON *pkg = package (ids, "gpu", abs, NULL);
  cJSON *sum = cJSON_CreateObject ();
  cJSON_AddStringToObject (sum, "algorithm", "SHA256");
  cJSON_AddStringToObject (sum, "checksumValue", digest);
  cJSON_AddItemToArray (cJSON_AddArrayToObject (pkg, "checksums"), sum);
  cJSON_AddStringToObject (pkg, "primaryPackagePurpose", "LIBRARY");
  cJSON_AddStringToObject (pkg, "comment", comment);
  return pkg;
}

/* ---- the GPU-code list kept per base (symbol-check/link-check/memo.h) ---------------- */

/* The list is a function of what the glob read of the view (the entries
 * it matched, the links it followed, its patterns) and of the files'
 * content (the kernel gate's per-content cache; the program's build-id is
 * in the memo's key): kept per base, so that a warm build whose overlay
 * changes none of it does not glob the base's every path again.  One
 * memo line per object, "DIGEST\tCOMMENT\tPATH" (neither of the first two
 * holds a tab); nothing kept when the list could not be made. */
#define GPU_MEMO "sbom-gpu"
#define GPU_MEMO_SETTINGS "globs *.so *.so.* *.cubin *.fatbin\n"

/* The glob picks nothing by walking the view: its patterns say all. */
static bool
gpu_selects (void *data, const struct ib_fs_entry *e)
{
  (void) data;
  (void) e;
  return false;
}

/* The kept list of hit M into LIST; false (LIST untouched) when a line
 * is not one of ours, and then the list is made again. */
static bool
gpu_replay (const struct ib_memo *m, cJSON *list, size_t *ids)
{
  size_t n;
  const struct ib_memo_said *p = ib_memo_problems (m, &n);
  for (size_t i = 0; i < n; i++)
    {
      const char *tab = strchr (p[i].msg, '\t');
      if (p[i].is_error || tab == NULL || tab - p[i].msg != 64 || strchr (tab + 1, '\t') == NULL)
        return false;
    }
  for (size_t i = 0; i < n; i++)
    {
      const char *digest = p[i].msg, *comment = digest + 65, *path = strchr (comment, '\t') + 1;
      cleanup_free char *d = strndup (digest, 64), *c = strndup (comment, (size_t) (path - 1 - comment));
      cJSON_AddItemToArray (list, gpu_package (ids, path, d, c));
    }
  return true;
}

/* gpu_list's walk: FILES[i]'s package and memo line when its code runs. */
struct gpu_walk
{
  const struct ib_fs_entry **files;
  struct ib_memo *m;
  cJSON *found; /* moved to the SBOM's list once the walk has gone through */
  size_t *ids;
};

static int
gpu_one (void *data, size_t i, const struct ib_cuda_file *code, ib_error_t *err)
{
  (void) err;
  struct gpu_walk *w = data;
  if (code == NULL || !runs_code (code))
    return 0;
  const struct ib_fs_entry *f = w->files[i];
  cleanup_free char *comment = gpu_comment (code);
  cJSON_AddItemToArray (w->found, gpu_package (w->ids, f->path, f->digest, comment));
  cleanup_free char *line = ib_xasprintf ("%s\t%s\t%s", f->digest, comment, f->path);
  if (w->m)
    ib_memo_said (w->m, false, line);
  return 0;
}

/* Shared objects, cubins and fatbins that carry GPU code.  A file whose
 * GPU code cannot be read is no build error here (the kernel gate judges
 * the files it is asked about): the SBOM says so in its comment.  One
 * record in memory at a time: all of them at once (cuBLASLt's names of
 * 100,000 kernels among them) were the peak of a cold build over CUDA's
 * libraries, ~15 MiB more than the pass that made them. */
static void
gpu_list (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, struct ib_memo *m, cJSON *doc,
          cJSON *list, size_t *ids)
{
  const struct ib_fs_entry **files = NULL;
  if (m)
    ib_memo_record (m, view); /* every path the glob reads */
  size_t n = ib_kernels_glob_files (view, NULL, 0, &files);
  if (m)
    ib_fsview_observe (view, NULL);
  struct gpu_walk w = { files, m, cJSON_CreateArray (), ids };
  ib_error_t e = NULL;
  if (ib_kernels_each_file (s, img, files, n, gpu_one, &w, &e) < 0)
    {
      cleanup_free char *c = ib_xasprintf ("GPU code not listed: %s", e->msg);
      cJSON_AddStringToObject (doc, "comment", c);
      ib_error_release (&e);
    }
  else
    {
      cJSON *item;
      while ((item = cJSON_DetachItemFromArray (w.found, 0)) != NULL)
        cJSON_AddItemToArray (list, item);
      if (m)
        ib_memo_save (m);
    }
  cJSON_Delete (w.found);
  free (files);
}

/* The GPU-code list of IMG (its layers from FIRST on its overlay), from
 * the memo over its base when that holds; whether it did. */
static bool
add_gpu_objects (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, int first, cJSON *doc,
                 cJSON *list, size_t *ids)
{
  struct ib_memo *m = NULL;
  ib_memo_open (s, GPU_MEMO, GPU_MEMO_SETTINGS, img, first, view, gpu_selects, NULL, &m);
  bool reused = m && ib_memo_hit (m) && gpu_replay (m, list, ids);
  if (!reused && m && ib_memo_hit (m))
    {
      /* Not ours, so not to be kept either: made again, without a memo. */
      ib_memo_free (m);
      m = NULL;
    }
  if (!reused)
    gpu_list (s, img, view, m, doc, list, ids);
  ib_memo_free (m);
  return reused;
}

static void
relate (cJSON *rels, const char *a, const char *type, const char *b)
{
  cJSON *r = cJSON_CreateObject ();
  cJSON_AddStringToObject (r, "spdxElementId", a);
  cJSON_AddStringToObject (r, "relationshipType", type);
  cJSON_AddStringToObject (r, "relatedSpdxElement", b);
  cJSON_AddItemToArray (rels, r);
}

int
ib_sbom_of_image (struct ib_store *s, const struct ib_image *img, struct ib_fsview *view, int first, const char *name,
                  long long created, struct ib_sbom_reused *reused, cJSON **out, ib_error_t *err)
{
  cJSON *doc = cJSON_CreateObject ();
  cJSON_AddStringToObject (doc, "spdxVersion", "SPDX-2.3");
  cJSON_AddStringToObject (doc, "dataLicense", "CC0-1.0");
  cJSON_AddStringToObject (doc, "SPDXID", "SPDXRef-DOCUMENT");
  cJSON_AddStringToObject (doc, "name", name);
  cleanup_free char *ns = ib_xasprintf ("https://imgbuild.invalid/spdx/%s", ib_digest_hex (img->manifest.digest.s));
  cJSON_AddStringToObject (doc, "documentNamespace", ns);
  cJSON *ci = cJSON_AddObjectToObject (doc, "creationInfo");
  char when[32];
  ib_rfc3339 (created, when);
  cJSON_AddStringToObject (ci, "created", when);
  cJSON_AddItemToArray (cJSON_AddArrayToObject (ci, "creators"), cJSON_CreateString ("Tool: imgbuild-" IB_VERSION));
  cJSON *list = cJSON_AddArrayToObject (doc, "packages");
  cJSON *image = cJSON_CreateObject ();
  cJSON_AddStringToObject (image, "SPDXID", "SPDXRef-Image");
  cJSON_AddStringToObject (image, "name", name);
  cJSON_AddStringToObject (image, "downloadLocation", "NOASSERTION");
  cJSON_AddBoolToObject (image, "filesAnalyzed", false);
  cJSON_AddStringToObject (image, "primaryPackagePurpose", "CONTAINER");
  cJSON *sum = cJSON_CreateObject ();
  cJSON_AddStringToObject (sum, "algorithm", "SHA256");
  cJSON_AddStringToObject (sum, "checksumValue", ib_digest_hex (img->manifest.digest.s));
  cJSON_AddItemToArray (cJSON_AddArrayToObject (image, "checksums"), sum);
  cJSON_AddItemToArray (list, image);
  size_t ids = 0;
  if (add_packages (s, img, view, first, list, &ids, &reused->packages, err) < 0)
    {
      cJSON_Delete (doc);
      return -1;
    }
  reused->gpu = add_gpu_objects (s, img, view, first, doc, list, &ids);
  cJSON *rels = cJSON_AddArrayToObject (doc, "relationships");
  relate (rels, "SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image");
  const cJSON *p;
  cJSON_ArrayForEach (p, list)
  {
    const char *id = cJSON_GetObjectItemCaseSensitive (p, "SPDXID")->valuestring;
    if (strcmp (id, "SPDXRef-Image") != 0)
      relate (rels, "SPDXRef-Image", "CONTAINS", id);
  }
  *out = doc;
  return 0;
}

int
ib_sbom_of_build (struct ib_build *b, cJSON **out, ib_error_t *err)
{
  const struct ib_fsview *view;
  if (ib_build_image_view (b, &view, err) < 0)
    return -1;
  /* The build's own view, not the read-only handle: the GPU-code list
   * observes it while it globs (add_gpu_objects). */
  struct ib_sbom_reused reused = { false, false };
  if (ib_sbom_of_image (b->store, b->image, b->image_view, (int) b->first_overlay_layer, b->name, b->started,
                        &reused, out, err)
      < 0)
    return -1;
  if (reused.packages)
    ib_report_note (b->report, "sbom: the package list over the base, reused: the overlay changes none of its files");
  if (reused.gpu)
    ib_report_note (b->report, "sbom: the GPU-code list over the base, reused: the overlay changes nothing it read");
  return 0;
}
