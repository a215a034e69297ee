#include "sbom.h"

#include <stdlib.h>
#include <string.h>

#include "../kernels/cudabin.h"
#include "../kernels/kgate.h"
#include "../layers/extract.h"
#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "attest.h"

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

void
ib_sbom_add_dpkg (cJSON *list, const char *text, size_t *ids)
{
  const char *p = text, *end = text + strlen (text);
  while (p < end)
    {
      const char *q = strstr (p, "\n\n");
      const char *para_end = q ? q + 1 : end;
      cleanup_free char *name = field (p, para_end, "Package");
      cleanup_free char *version = field (p, para_end, "Version");
      cleanup_free char *arch = field (p, para_end, "Architecture");
      cleanup_free char *status = field (p, para_end, "Status");
      const char *state = status ? strrchr (status, ' ') : NULL;
      state = state ? state + 1 : status;
      if (name && *name && version && *version && state && has_files (state))
        {
          cJSON *pkg = package (ids, "deb", name, version);
          cleanup_free char *purl = ib_xasprintf ("pkg:deb/debian/%s@%s%s%s", name, version, arch ? "?arch=" : "",
                                                   arch ? arch : "");
          add_purl (pkg, purl);
          cJSON_AddStringToObject (pkg, "sourceInfo", "/var/lib/dpkg/status");
          cJSON_AddItemToArray (list, pkg);
        }
      p = q ? q + 2 : end;
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

struct reader
{
  cJSON *list;
  size_t *ids;
};

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
  if (dpkg)
    {
      ib_sbom_add_dpkg (rd->list, text, rd->ids);
      return 0;
    }
  cleanup_free char *name = NULL, *version = NULL;
  if (ib_sbom_python_metadata (text, &name, &version) == 0)
    {
      cJSON *pkg = package (rd->ids, "py", name, version);
      cleanup_free char *purl = ib_xasprintf ("pkg:pypi/%s@%s", name, version);
      add_purl (pkg, purl);
      cleanup_free char *where = ib_xasprintf ("/%s", e->path);
      cJSON_AddStringToObject (pkg, "sourceInfo", where);
      cJSON_AddItemToArray (rd->list, pkg);
    }
  return 0;
}

static bool
ends_with (const char *s, const char *suffix)
{
  size_t n = strlen (s), k = strlen (suffix);
  return n >= k && strcmp (s + n - k, suffix) == 0;
}

/* The dpkg status file and the Python metadata files, read and listed. */
static int
add_package_files (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view, cJSON *list,
                   size_t *ids, ib_error_t *err)
{
  size_t n = ib_fsview_count (view), k = 0;
  const struct ib_fs_entry **wanted = ib_xcalloc (n ? n : 1, sizeof (*wanted));
  for (size_t i = 0; i < n; i++)
    {
      const struct ib_fs_entry *e = ib_fsview_at (view, i);
      if (e->type == IB_FS_FILE
          && (strcmp (e->path, "var/lib/dpkg/status") == 0 || ends_with (e->path, ".dist-info/METADATA")
              || ends_with (e->path, ".egg-info/PKG-INFO") || ends_with (e->path, ".egg-info")))
        wanted[k++] = e;
    }
  struct reader rd = { list, ids };
  int r = ib_extract_entries (s, img, wanted, k, read_one, &rd, err);
  free (wanted);
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

static cJSON *
gpu_package (size_t *ids, const struct ib_fs_entry *e, const struct ib_cuda_file *f)
{
  cleanup_free char *path = ib_xasprintf ("/%s", e->path);
  cJSON *pkg = package (ids, "gpu", path, NULL);
  cJSON *sum = cJSON_CreateObject ();
  cJSON_AddStringToObject (sum, "algorithm", "SHA256");
  cJSON_AddStringToObject (sum, "checksumValue", e->digest);
  cJSON_AddItemToArray (cJSON_AddArrayToObject (pkg, "checksums"), sum);
  cJSON_AddStringToObject (pkg, "primaryPackagePurpose", "LIBRARY");
  /* The architectures, each once, in the order the file has them. */
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
  cJSON_AddStringToObject (pkg, "comment", text);
  free (text);
  return pkg;
}

/* Shared objects, cubins and fatbins that carry GPU code.  A file whose
 * GPU code cannot be read is no build error here (the kernel gate judges
 * the files it is asked about): the SBOM says so in its comment. */
static void
add_gpu_objects (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view, cJSON *doc,
                 cJSON *list, size_t *ids)
{
  const struct ib_fs_entry **files = NULL;
  size_t n = ib_kernels_glob_files (view, NULL, 0, &files);
  struct ib_cuda_file **code = ib_xcalloc (n ? n : 1, sizeof (*code));
  ib_error_t e = NULL;
  if (ib_kernels_inspect_entries (s, img, files, n, code, NULL, &e) < 0)
    {
      cleanup_free char *c = ib_xasprintf ("GPU code not listed: %s", e->msg);
      cJSON_AddStringToObject (doc, "comment", c);
      ib_error_release (&e);
    }
  else
    for (size_t i = 0; i < n; i++)
      if (code[i] && runs_code (code[i]))
        cJSON_AddItemToArray (list, gpu_package (ids, files[i], code[i]));
  for (size_t i = 0; i < n; i++)
    ib_cuda_file_free (code[i]);
  free (code);
  free (files);
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
ib_sbom_of_image (struct ib_store *s, const struct ib_image *img, const struct ib_fsview *view, const char *name,
                  long long created, cJSON **out, ib_error_t *err)
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
  if (add_package_files (s, img, view, list, &ids, err) < 0)
    {
      cJSON_Delete (doc);
      return -1;
    }
  add_gpu_objects (s, img, view, doc, list, &ids);
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
  return ib_sbom_of_image (b->store, b->image, view, b->name, b->started, out, err);
}
