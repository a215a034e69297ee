#include "indexer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "store_private.h"

void
ib_store_add_indexer (struct ib_store *s, const struct ib_indexer *ix)
{
  if (s->n_indexers < IB_MAX_INDEXERS)
    s->indexers[s->n_indexers++] = ix;
}

const struct ib_indexer *const *
ib_store_indexers (const struct ib_store *s, size_t *n)
{
  *n = s->n_indexers;
  return s->indexers;
}

const struct ib_indexer *
ib_store_indexer (const struct ib_store *s, const char *name)
{
  for (size_t i = 0; i < s->n_indexers; i++)
    if (strcmp (s->indexers[i]->name, name) == 0)
      return s->indexers[i];
  return NULL;
}

static bool
wants (const struct ib_index_file *f, enum ib_index_need kind)
{
  for (size_t i = 0; i < f->n_ix; i++)
    if (f->need[i] == kind)
      return true;
  return false;
}

bool
ib_index_file_begin (struct ib_index_file *f, const struct ib_store *s, const char *spool_dir, const char *path,
                     uint64_t size, const unsigned char *head, size_t n_head)
{
  memset (f, 0, sizeof (*f));
  f->fd = -1;
  f->ix = s->indexers;
  f->n_ix = s->n_indexers;
  bool any = false;
  for (size_t i = 0; i < f->n_ix; i++)
    {
      f->need[i] = f->ix[i]->wants (f->ix[i]->data, path, size, head, n_head);
      if (f->need[i] == IB_INDEX_TEXT && size > IB_INDEX_TEXT_MAX)
        f->need[i] = IB_INDEX_SKIP;
      any |= f->need[i] != IB_INDEX_SKIP;
    }
  if (!any)
    return false;
  f->path = ib_xstrdup (path);
  f->spool_dir = spool_dir;
  if (wants (f, IB_INDEX_FD))
    {
      /* One spool for every indexer that wants the file: ELF readers seek. */
      cleanup_free char *tmp = ib_path_join (spool_dir, ".index-spool-XXXXXX");
      f->fd = mkostemp (tmp, O_CLOEXEC);
      if (f->fd < 0)
        f->failed = 1;
      else
        unlink (tmp);
    }
  else if (wants (f, IB_INDEX_TEXT))
    {
      f->cap = size + 1;
      f->text = ib_xmalloc (f->cap);
    }
  else
    f->digest_only = 1; /* nothing to keep of the bytes */
  return true;
}

void
ib_index_file_feed (struct ib_index_file *f, const void *buf, size_t n)
{
  if (f->failed || f->digest_only || n == 0)
    return;
  if (f->fd >= 0)
    {
      ib_error_t e = NULL;
      if (ib_write_all (f->fd, buf, n, f->path, &e) < 0)
        {
          ib_error_release (&e);
          f->failed = 1;
        }
      return;
    }
  if (f->len + n + 1 > f->cap)
    {
      /* A tar entry holds what its header says; more is damage: no index. */
      f->failed = 1;
      return;
    }
  memcpy (f->text + f->len, buf, n);
  f->len += n;
}

void
ib_index_file_end (struct ib_index_file *f, const char *digest)
{
  if (!f->failed && f->fd >= 0 && wants (f, IB_INDEX_TEXT) && f->len == 0)
    {
      /* Both kinds wanted: the text is read back from the spool. */
      off_t size = lseek (f->fd, 0, SEEK_END);
      if (size >= 0 && (size_t) size <= IB_INDEX_TEXT_MAX)
        {
          f->text = ib_xmalloc ((size_t) size + 1);
          f->len = pread (f->fd, f->text, (size_t) size, 0) == size ? (size_t) size : 0;
          if (f->len != (size_t) size)
            f->failed = 1;
        }
    }
  if (f->text)
    f->text[f->len] = '\0';
  for (size_t i = 0; !f->failed && i < f->n_ix; i++)
    if (f->need[i] == IB_INDEX_FD || f->need[i] == IB_INDEX_DIGEST || (f->need[i] == IB_INDEX_TEXT && f->text))
      f->ix[i]->index (f->ix[i]->data, f->path, digest, f->need[i] == IB_INDEX_TEXT ? f->text : NULL,
                       f->need[i] == IB_INDEX_TEXT ? f->len : 0, f->need[i] == IB_INDEX_FD ? f->fd : -1);
  ib_index_file_abort (f);
}

void
ib_index_file_abort (struct ib_index_file *f)
{
  if (f->fd >= 0)
    close (f->fd);
  f->fd = -1;
  free (f->text);
  free (f->path);
  f->text = NULL;
  f->path = NULL;
}
