#include "builder/diff/imgdiff.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layers/store/digest.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* ---- sides --------------------------------------------------------------- */

static bool
is_definition_folder (const char *ref)
{
  struct stat st;
  cleanup_free char *conf = ib_path_join (ref, "image.conf");
  return stat (ref, &st) == 0 && S_ISDIR (st.st_mode) && access (conf, F_OK) == 0;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static int
cmp_entry_path (const void *a, const void *b)
{
  return strcmp (((const struct ib_fs_entry *) a)->path, ((const struct ib_fs_entry *) b)->path);
}

/* The definition's items as one more layer over its base's view (a target
 * written twice keeps one of its items: a build refuses it anyway). */
static int
stack_overlay (struct ib_side *side, ib_error_t *err)
{
  const struct ib_definition *d = side->def;
  struct ib_fs_list l = { .n = 0, .e = ib_xcalloc (d->n_items + 1, sizeof (struct ib_fs_entry)) };
  side->source_paths = ib_xcalloc (d->n_items + 1, sizeof (char *));
  side->sources = ib_xcalloc (d->n_items + 1, sizeof (char *));
  int r = 0;
  for (size_t i = 0; r == 0 && i < d->n_items; i++)
    {
      const struct ib_copy_item *it = &d->items[i];
      cleanup_free char *target = ib_copy_item_target (it);
      if (target == NULL)
        {
          r = ib_error (err, IB_EDEFINITION, "%s: target `%s` is not a clean path", it->origin, it->raw_target);
          break;
        }
      struct ib_fs_entry *e = &l.e[l.n++];
      *e = (struct ib_fs_entry){ .path = ib_xstrdup (target + 1), .mode = it->mode < 0 ? 0644 : (unsigned) it->mode };
      if (it->type == IB_ENTRY_FILE)
        {
          ib_digest dg;
          e->type = IB_FS_FILE;
          r = ib_sha256_file (it->source, &dg, &e->size, err);
          if (r == 0)
            e->digest = ib_xstrdup (ib_digest_hex (dg.s));
          side->source_paths[side->n_sources] = ib_xstrdup (e->path);
          side->sources[side->n_sources++] = ib_xstrdup (it->source);
        }
      else if (it->type == IB_ENTRY_SYMLINK)
        {
          e->type = IB_FS_SYMLINK;
          e->link = ib_xstrdup (it->link);
        }
      else
        e->type = IB_FS_DIR;
    }
  if (r == 0)
    {
      ib_qsort (l.e, l.n, sizeof (*l.e), cmp_entry_path);
      size_t o = 0;
      for (size_t i = 0; i < l.n; i++)
        {
          if (o > 0 && strcmp (l.e[o - 1].path, l.e[i].path) == 0)
            {
              free (l.e[o - 1].path);
              free (l.e[o - 1].link);
              free ((char *) l.e[o - 1].digest);
              o--;
            }
          l.e[o++] = l.e[i];
        }
      l.n = o;
      side->overlay_layer = (int) side->img->n_layers;
      ib_fsview_push (side->view, &l, side->overlay_layer);
    }
  for (size_t i = 0; i < l.n; i++)
    {
      free (l.e[i].path);
      free (l.e[i].link);
      free ((char *) l.e[i].digest);
    }
  free (l.e);
  return r < 0 ? ib_error_wrap (err, "%s", d->file) : 0;
}

int
ib_side_open (struct ib_store *s, const char *ref, const struct ib_remote_options *remote, struct ib_side *out,
              ib_error_t *err)
{
  *out = (struct ib_side){ .ref = ref, .overlay_layer = -1 };
  const char *image_ref = ref;
  if (is_definition_folder (ref))
    {
      if (ib_definition_load (ref, &out->def, err) < 0)
        return -1;
      image_ref = out->def->from;
    }
  if (ib_image_pull (s, image_ref, NULL, remote, &out->img, err) < 0
      || ib_fsview_of_image (s, out->img, &out->view, err) < 0
      || (out->def && ib_definition_select_platform (out->def, out->img->config_json, NULL, err) < 0))
    return out->def ? ib_error_wrap (err, "the base of %s", ref) : -1;
  if (out->def && stack_overlay (out, err) < 0)
    return -1;
  /* The source map is looked up by path. */
  for (size_t i = 1; i < out->n_sources; i++)
    for (size_t j = i; j > 0 && strcmp (out->source_paths[j - 1], out->source_paths[j]) > 0; j--)
      {
        char *t = out->source_paths[j];
        out->source_paths[j] = out->source_paths[j - 1];
        out->source_paths[j - 1] = t;
        t = out->sources[j];
        out->sources[j] = out->sources[j - 1];
        out->sources[j - 1] = t;
      }
  return 0;
}

void
ib_side_clear (struct ib_side *side)
{
  for (size_t i = 0; i < side->n_sources; i++)
    {
      free (side->source_paths[i]);
      free (side->sources[i]);
    }
  free (side->source_paths);
  free (side->sources);
  ib_fsview_free (side->view);
  ib_image_free (side->img);
  ib_definition_free (side->def);
  *side = (struct ib_side){ 0 };
}

static const char *
source_of (const struct ib_side *side, const char *path)
{
  char **hit = bsearch (&path, side->source_paths, side->n_sources, sizeof (char *), cmp_str);
  return hit ? side->sources[hit - side->source_paths] : NULL;
}

int
ib_side_summaries (struct ib_store *s, const struct ib_side *side, const struct ib_fs_entry *const *files, size_t n,
                   struct ib_file_summary **out, ib_error_t *err)
{
  const struct ib_fs_entry **in_image = ib_xcalloc (n + 1, sizeof (*in_image));
  struct ib_file_summary **got = ib_xcalloc (n + 1, sizeof (*got));
  size_t k = 0;
  int r = 0;
  for (size_t i = 0; i < n; i++)
    {
      out[i] = NULL;
      if (files[i]->layer != side->overlay_layer)
        {
          in_image[k++] = files[i];
          continue;
        }
      const char *src = source_of (side, files[i]->path);
      cleanup_close int fd = src ? open (src, O_RDONLY | O_CLOEXEC) : -1;
      cleanup_free char *path = ib_xasprintf ("/%s", files[i]->path);
      if (r == 0 && fd < 0)
        r = ib_error_errno (err, errno, IB_EDEFINITION, "open `%s`", src ? src : path);
      if (r == 0)
        r = ib_file_summary_fd (path, fd, &out[i], err);
    }
  if (r == 0)
    r = ib_file_summary_entries (s, side->img, in_image, k, got, err);
  for (size_t i = 0, j = 0; r == 0 && i < n; i++)
    if (files[i]->layer != side->overlay_layer)
      out[i] = got[j++];
  free (got);
  free (in_image);
  if (r < 0)
    for (size_t i = 0; i < n; i++)
      {
        ib_file_summary_free (out[i]);
        out[i] = NULL;
      }
  return r;
}

char *
ib_side_layer_name (const struct ib_side *side, const struct ib_fs_entry *e)
{
  if (e->layer == side->overlay_layer)
    return ib_xasprintf ("layer %d (%s)", e->layer, side->def->file);
  if (e->layer >= 0 && (size_t) e->layer < side->img->n_layers)
    return ib_xasprintf ("layer %d %s", e->layer, side->img->layers[e->layer].digest.s);
  return ib_xasprintf ("layer %d", e->layer);
}

/* ---- the diff ------------------------------------------------------------ */

struct file_change
{
  char change; /* '+', '-', '~' */
  const struct ib_fs_entry *a, *b;
  struct ib_file_summary *sa, *sb;
};

static bool
entry_differs (const struct ib_fs_entry *a, const struct ib_fs_entry *b)
{
  if (a->type != b->type)
    return true;
  if (a->type == IB_FS_FILE)
    return strcmp (a->digest, b->digest) != 0 || (a->mode & 07777) != (b->mode & 07777);
  if (a->type == IB_FS_SYMLINK || a->type == IB_FS_HARDLINK)
    return strcmp (a->link ? a->link : "", b->link ? b->link : "") != 0;
  return false;
}

/* Folders are left out: "files" means what a folder holds. */
static size_t
walk (const struct ib_side *A, const struct ib_side *B, struct file_change **out)
{
  size_t na = ib_fsview_count (A->view), nb = ib_fsview_count (B->view), i = 0, j = 0, n = 0;
  struct file_change *ch = ib_xcalloc (na + nb + 1, sizeof (*ch));
  while (i < na || j < nb)
    {
      const struct ib_fs_entry *a = i < na ? ib_fsview_at (A->view, i) : NULL;
      const struct ib_fs_entry *b = j < nb ? ib_fsview_at (B->view, j) : NULL;
      int c = a == NULL ? 1 : b == NULL ? -1 : strcmp (a->path, b->path);
      if (c < 0)
        {
          if (a->type != IB_FS_DIR)
            ch[n++] = (struct file_change){ '-', a, NULL, NULL, NULL };
          i++;
        }
      else if (c > 0)
        {
          if (b->type != IB_FS_DIR)
            ch[n++] = (struct file_change){ '+', NULL, b, NULL, NULL };
          j++;
        }
      else
        {
          if (entry_differs (a, b) && !(a->type == IB_FS_DIR && b->type == IB_FS_DIR))
            ch[n++] = (struct file_change){ '~', a, b, NULL, NULL };
          i++, j++;
        }
    }
  *out = ch;
  return n;
}

/* Each side's regular files among the changes, summarized in one pass. */
static int
summarize_side (struct ib_store *s, const struct ib_side *side, struct file_change *ch, size_t n, bool is_b,
                ib_error_t *err)
{
  const struct ib_fs_entry **files = ib_xcalloc (n + 1, sizeof (*files));
  struct ib_file_summary **sums = ib_xcalloc (n + 1, sizeof (*sums));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    {
      const struct ib_fs_entry *e = is_b ? ch[i].b : ch[i].a;
      if (e && e->type == IB_FS_FILE)
        files[k++] = e;
    }
  int r = ib_side_summaries (s, side, files, k, sums, err);
  for (size_t i = 0, j = 0; r == 0 && i < n; i++)
    {
      const struct ib_fs_entry *e = is_b ? ch[i].b : ch[i].a;
      if (e && e->type == IB_FS_FILE)
        *(is_b ? &ch[i].sb : &ch[i].sa) = sums[j++];
    }
  free (sums);
  free (files);
  return r;
}

static cJSON *
names_json (const struct ib_sym_change *sc, size_t n, char c, char kind)
{
  cJSON *a = cJSON_CreateArray ();
  for (size_t i = 0; i < n; i++)
    if (sc[i].change == c && sc[i].sym->kind == kind)
      cJSON_AddItemToArray (a, cJSON_CreateString (sc[i].sym->name));
  return a;
}

static cJSON *
entry_json (const struct ib_side *side, const struct ib_fs_entry *e)
{
  cJSON *j = cJSON_CreateObject ();
  char type[2] = { e->type, 0 };
  cJSON_AddStringToObject (j, "type", type);
  cJSON_AddNumberToObject (j, "layer", e->layer);
  if (e->layer == side->overlay_layer)
    cJSON_AddStringToObject (j, "layer_digest", "definition");
  else if (e->layer >= 0 && (size_t) e->layer < side->img->n_layers)
    cJSON_AddStringToObject (j, "layer_digest", side->img->layers[e->layer].digest.s);
  if (e->type == IB_FS_FILE)
    {
      cleanup_free char *d = ib_xasprintf ("sha256:%s", e->digest);
      cJSON_AddStringToObject (j, "sha256", d);
      cJSON_AddNumberToObject (j, "size", (double) e->size);
    }
  if (e->link)
    cJSON_AddStringToObject (j, "link", e->link);
  return j;
}

static cJSON *
change_json (const struct ib_side *A, const struct ib_side *B, const struct file_change *c)
{
  static const struct
  {
    char kind;
    const char *key;
  } kinds[] = { { IB_SYM_PYTHON, "definitions" }, { IB_SYM_DYNAMIC, "symbols" }, { IB_SYM_KERNEL, "kernels" } };
  cJSON *j = cJSON_CreateObject ();
  const struct ib_fs_entry *e = c->b ? c->b : c->a;
  cleanup_free char *path = ib_xasprintf ("/%s", e->path);
  cJSON_AddStringToObject (j, "path", path);
  cJSON_AddStringToObject (j, "change", c->change == '+' ? "added" : c->change == '-' ? "removed" : "changed");
  if (c->a)
    cJSON_AddItemToObject (j, "a", entry_json (A, c->a));
  if (c->b)
    cJSON_AddItemToObject (j, "b", entry_json (B, c->b));
  struct ib_sym_change *sc = NULL;
  size_t n = ib_file_summary_diff (c->sa, c->sb, &sc);
  for (size_t k = 0; k < 3; k++)
    {
      cJSON *o = cJSON_AddObjectToObject (j, kinds[k].key);
      cJSON_AddItemToObject (o, "added", names_json (sc, n, '+', kinds[k].kind));
      cJSON_AddItemToObject (o, "removed", names_json (sc, n, '-', kinds[k].kind));
      if (kinds[k].kind == IB_SYM_PYTHON)
        cJSON_AddItemToObject (o, "changed", names_json (sc, n, '~', kinds[k].kind));
    }
  free (sc);
  return j;
}

static void
print_change (const struct ib_side *A, const struct ib_side *B, const struct file_change *c)
{
  const struct ib_fs_entry *e = c->b ? c->b : c->a;
  const char *what = c->change == '+' ? "added" : c->change == '-' ? "removed" : "changed";
  cleanup_free char *la = c->a ? ib_side_layer_name (A, c->a) : NULL;
  cleanup_free char *lb = c->b ? ib_side_layer_name (B, c->b) : NULL;
  printf ("%-8s /%s\n", what, e->path);
  if (c->a)
    printf ("           a: %s%s%.12s\n", la, c->a->type == IB_FS_FILE ? "  sha256:" : "", c->a->digest);
  if (c->b)
    printf ("           b: %s%s%.12s\n", lb, c->b->type == IB_FS_FILE ? "  sha256:" : "", c->b->digest);
  struct ib_sym_change *sc = NULL;
  size_t n = ib_file_summary_diff (c->sa, c->sb, &sc);
  if (n)
    {
      cleanup_free char *text = ib_sym_changes_text (sc, n, 8);
      printf ("           %s\n", text);
    }
  free (sc);
}

static cJSON *
side_json (const struct ib_side *side)
{
  cJSON *j = cJSON_CreateObject ();
  cJSON_AddStringToObject (j, "ref", side->ref);
  if (side->def)
    cJSON_AddStringToObject (j, "definition", side->def->file);
  if (side->img->n_layers)
    cJSON_AddStringToObject (j, side->def ? "base_manifest" : "manifest", side->img->manifest.digest.s);
  cJSON_AddNumberToObject (j, "layers", (double) side->img->n_layers + (side->def ? 1 : 0));
  return j;
}

static void
report (const struct ib_side *A, const struct ib_side *B, struct file_change *ch, size_t n, bool json)
{
  size_t count[3] = { 0 };
  for (size_t i = 0; i < n; i++)
    count[ch[i].change == '+' ? 0 : ch[i].change == '-' ? 1 : 2]++;
  if (json)
    {
      cJSON *doc = cJSON_CreateObject ();
      cJSON_AddStringToObject (doc, "schema", "imgverify.diff/v1");
      cJSON_AddItemToObject (doc, "a", side_json (A));
      cJSON_AddItemToObject (doc, "b", side_json (B));
      cJSON *files = cJSON_AddArrayToObject (doc, "files");
      for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray (files, change_json (A, B, &ch[i]));
      cJSON *sum = cJSON_AddObjectToObject (doc, "summary");
      cJSON_AddNumberToObject (sum, "added", (double) count[0]);
      cJSON_AddNumberToObject (sum, "removed", (double) count[1]);
      cJSON_AddNumberToObject (sum, "changed", (double) count[2]);
      char *text = cJSON_Print (doc);
      puts (text);
      free (text);
      cJSON_Delete (doc);
      return;
    }
  printf ("a: %s (%zu layers)\nb: %s (%zu layers)\n", A->ref, A->img->n_layers + (A->def ? 1 : 0), B->ref,
          B->img->n_layers + (B->def ? 1 : 0));
  for (size_t i = 0; i < n; i++)
    print_change (A, B, &ch[i]);
  printf ("%zu added, %zu removed, %zu changed\n", count[0], count[1], count[2]);
}

int
ib_image_diff_run (const char *a, const char *b, const struct ib_diff_options *o)
{
  ib_error_t err = NULL;
  cleanup_free char *root = ib_store_default_path (o->store);
  struct ib_store *s = NULL;
  struct ib_side A = { 0 }, B = { 0 };
  struct file_change *ch = NULL;
  size_t n = 0;
  int r = ib_store_open (root, &s, &err);
  if (r == 0)
    r = ib_side_open (s, a, &o->remote, &A, &err);
  if (r == 0)
    r = ib_side_open (s, b, &o->remote, &B, &err);
  if (r == 0)
    {
      n = walk (&A, &B, &ch);
      r = summarize_side (s, &A, ch, n, false, &err);
    }
  if (r == 0)
    r = summarize_side (s, &B, ch, n, true, &err);
  if (r == 0)
    report (&A, &B, ch, n, o->json);
  for (size_t i = 0; i < n; i++)
    {
      ib_file_summary_free (ch[i].sa);
      ib_file_summary_free (ch[i].sb);
    }
  free (ch);
  ib_side_clear (&A);
  ib_side_clear (&B);
  ib_store_free (s);
  if (r < 0)
    {
      ib_error_wrap (&err, "diff %s %s", a, b);
      return ib_error_report ("imgverify", &err);
    }
  return 0;
}
