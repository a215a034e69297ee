#include "builder/smoke/nccl_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

/* A communicator as one process sees it (its pointer), before the
 * processes' views are merged by commId. */
struct comm_view
{
  char pid[64], ptr[24], id[40];
  int nranks, nnodes, coll, nvls, p2p;
};

struct parser
{
  struct ib_nccl_log *out;
  struct comm_view *views;
  size_t n_views;
};

/* The communicator PTR of process PID (made when new); with PTR NULL, the
 * one the process named last (NULL when none). */
static struct comm_view *
view_of (struct parser *p, const char *pid, const char *ptr)
{
  for (size_t i = p->n_views; i-- > 0;)
    if (strcmp (p->views[i].pid, pid) == 0 && (ptr == NULL || strcmp (p->views[i].ptr, ptr) == 0))
      return &p->views[i];
  if (ptr == NULL)
    return NULL;
  p->views = ib_xrealloc (p->views, (p->n_views + 1) * sizeof (*p->views));
  struct comm_view *v = &p->views[p->n_views++];
  memset (v, 0, sizeof (*v));
  snprintf (v->pid, sizeof (v->pid), "%s", pid);
  snprintf (v->ptr, sizeof (v->ptr), "%s", ptr);
  v->coll = v->nvls = v->p2p = -1;
  return v;
}

/* "0x55d0c4f1a2b0" after KEY in MSG, into BUF. */
static bool
hex_after (const char *msg, const char *key, char *buf, size_t n)
{
  const char *at = strstr (msg, key);
  if (at == NULL)
    return false;
  at += strlen (key);
  size_t len = strspn (at, "0x123456789abcdefABCDEF");
  if (len == 0 || len >= n)
    return false;
  memcpy (buf, at, len);
  buf[len] = '\0';
  return true;
}

static void
add_string_to (char ***v, size_t *n, const char *s, size_t len)
{
  for (size_t i = 0; i < *n; i++)
    if (strlen ((*v)[i]) == len && strncmp ((*v)[i], s, len) == 0)
      return;
  *v = ib_xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = strndup (s, len);
}

static void
channel_line (struct parser *p, const char *msg)
{
  int ch = 0, conn = 0, r1, d1, r2, d2;
  const char *at = strstr (msg, "Channel ");
  if (at == NULL || (sscanf (at, "Channel %d/%d : %d[%d] -> %d[%d]", &ch, &conn, &r1, &d1, &r2, &d2) != 6
                     && sscanf (at, "Channel %d : %d[%d] -> %d[%d]", &ch, &r1, &d1, &r2, &d2) != 5))
    return;
  const char *via = strstr (at, " via ");
  if (via == NULL)
    return;
  via += 5;
  size_t tlen = strcspn (via, " \t\r\n");
  char from[32], to[32];
  snprintf (from, sizeof (from), "%d[%d]", r1, d1);
  snprintf (to, sizeof (to), "%d[%d]", r2, d2);
  struct ib_nccl_log *l = p->out;
  struct ib_nccl_pair *pair = NULL;
  for (size_t i = 0; i < l->n_pairs && !pair; i++)
    if (strcmp (l->pairs[i].from, from) == 0 && strcmp (l->pairs[i].to, to) == 0)
      pair = &l->pairs[i];
  if (pair == NULL)
    {
      l->pairs = ib_xrealloc (l->pairs, (l->n_pairs + 1) * sizeof (*l->pairs));
      pair = &l->pairs[l->n_pairs++];
      memset (pair, 0, sizeof (*pair));
      memcpy (pair->from, from, sizeof (from));
      memcpy (pair->to, to, sizeof (to));
      pair->transport = strndup (via, tlen);
    }
  else if (strlen (pair->transport) != tlen || strncmp (pair->transport, via, tlen) != 0)
    {
      cleanup_free char *t = strndup (via, tlen);
      if (pair->others == NULL)
        pair->others = ib_xstrdup (t);
      else if (strstr (pair->others, t) == NULL)
        {
          char *o = ib_xasprintf ("%s, %s", pair->others, t);
          free (pair->others);
          pair->others = o;
        }
    }
  if (ch >= 0 && ch < 64 && !(pair->channel_mask & (1ull << ch)))
    {
      pair->channel_mask |= 1ull << ch;
      pair->channels++;
    }
}

/* One INFO message MSG of process PID. */
static void
info_line (struct parser *p, const char *pid, const char *msg)
{
  char ptr[24], id[40];
  const char *set = strstr (msg, " set by environment to ");
  if (strncmp (msg, "NCCL_", 5) == 0 && set)
    {
      const char *v = set + 23;
      size_t vlen = strcspn (v, "\r\n");
      while (vlen && (v[vlen - 1] == '.' || v[vlen - 1] == ' '))
        vlen--;
      cleanup_free char *kv = ib_xasprintf ("%.*s=%.*s", (int) (set - msg), msg, (int) vlen, v);
      add_string_to (&p->out->settings, &p->out->n_settings, kv, strlen (kv));
      return;
    }
  if (strstr (msg, "Channel ") && strstr (msg, " via "))
    {
      channel_line (p, msg);
      return;
    }
  if (hex_after (msg, "comm ", ptr, sizeof (ptr)))
    {
      struct comm_view *v = view_of (p, pid, ptr);
      int rank, nranks, nnodes;
      char parent[24];
      int count, color;
      const char *split = strstr (msg, " splitCount ");
      if (hex_after (msg, "commId ", id, sizeof (id)))
        snprintf (v->id, sizeof (v->id), "%s", id);
      else if (hex_after (msg, "parent ", parent, sizeof (parent)) && split
               && sscanf (split, " splitCount %d color %d", &count, &color) == 2)
        {
          /* A split has no commId of its own: its parent's, the split's
           * number and the color name it in every process alike. */
          const struct comm_view *pv = view_of (p, pid, parent);
          v = view_of (p, pid, ptr); /* view_of may have moved the array */
          snprintf (v->id, sizeof (v->id), "%.18s/%d/%d", *pv->id ? pv->id : pv->ptr, count, color);
        }
      const char *r = strstr (msg, " rank ");
      if (r && sscanf (r, " rank %d nRanks %d nNodes %d", &rank, &nranks, &nnodes) == 3)
        v->nranks = nranks, v->nnodes = nnodes;
      else if (r && sscanf (r, " rank %d nranks %d", &rank, &nranks) == 2 && v->nranks == 0)
        v->nranks = nranks;
      /* The view stays the process's latest: move it last. */
      struct comm_view keep = *v;
      size_t i = (size_t) (v - p->views);
      memmove (&p->views[i], &p->views[i + 1], (p->n_views - i - 1) * sizeof (*v));
      p->views[p->n_views - 1] = keep;
      return;
    }
  int coll, collnet, nvls, p2p;
  if (sscanf (msg, "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels", &coll, &collnet, &nvls,
              &p2p) == 4
      || (sscanf (msg, "%d coll channels, %d nvls channels, %d p2p channels", &coll, &nvls, &p2p) == 3
          && (collnet = 0) == 0))
    {
      struct comm_view *v = view_of (p, pid, NULL);
      if (v)
        v->coll = coll, v->nvls = nvls, v->p2p = p2p;
    }
}

static void
merge_comms (struct parser *p)
{
  struct ib_nccl_log *l = p->out;
  for (size_t i = 0; i < p->n_views; i++)
    {
      const struct comm_view *v = &p->views[i];
      if (v->nranks == 0 && v->coll < 0)
        continue; /* only named (a split's parent never seen) */
      const char *key = *v->id ? v->id : v->ptr;
      struct ib_nccl_comm *c = NULL;
      for (size_t k = 0; k < l->n_comms && !c; k++)
        if (strcmp (l->comms[k].id, key) == 0)
          c = &l->comms[k];
      if (c == NULL)
        {
          l->comms = ib_xrealloc (l->comms, (l->n_comms + 1) * sizeof (*l->comms));
          c = &l->comms[l->n_comms++];
          memset (c, 0, sizeof (*c));
          snprintf (c->id, sizeof (c->id), "%s", key);
          c->coll_channels = c->nvls_channels = c->p2p_channels = -1;
        }
      if (v->nranks)
        c->nranks = v->nranks;
      if (v->nnodes)
        c->nnodes = v->nnodes;
      if (v->coll >= 0)
        c->coll_channels = v->coll, c->nvls_channels = v->nvls, c->p2p_channels = v->p2p;
    }
}

void
ib_nccl_log_parse (const char *text, struct ib_nccl_log *out)
{
  memset (out, 0, sizeof (*out));
  struct parser p = { out, NULL, 0 };
  for (const char *l = text; l && *l;)
    {
      const char *e = strchr (l, '\n');
      cleanup_free char *line = strndup (l, e ? (size_t) (e - l) : strlen (l));
      l = e ? e + 1 : NULL;
      const char *ver = strstr (line, "NCCL version ");
      if (ver && !*out->version)
        snprintf (out->version, sizeof (out->version), "%.*s", (int) strcspn (ver + 13, " \t\r"), ver + 13);
      const char *warn = strstr (line, " NCCL WARN ");
      if (warn)
        {
          add_string_to (&out->warnings, &out->n_warnings, warn + 11, strlen (warn + 11));
          continue;
        }
      const char *info = strstr (line, " NCCL INFO ");
      if (info == NULL)
        continue;
      /* "host:pid:tid [dev] ...": the process is host:pid. */
      const char *start = line;
      if (*start == '[' && strchr (start, ']'))
        start = strchr (start, ']') + 1;
      start += strspn (start, " ");
      char pid[64] = "";
      size_t n = strcspn (start, " ");
      const char *c2 = memchr (start, ':', n);
      const char *c3 = c2 ? memchr (c2 + 1, ':', n - (size_t) (c2 + 1 - start)) : NULL;
      snprintf (pid, sizeof (pid), "%.*s", (int) ((c3 ? c3 : start + n) - start), start);
      info_line (&p, pid, info + 11);
    }
  merge_comms (&p);
  free (p.views);
}

void
ib_nccl_log_clear (struct ib_nccl_log *l)
{
  for (size_t i = 0; i < l->n_pairs; i++)
    free (l->pairs[i].transport), free (l->pairs[i].others);
  for (size_t i = 0; i < l->n_settings; i++)
    free (l->settings[i]);
  for (size_t i = 0; i < l->n_warnings; i++)
    free (l->warnings[i]);
  free (l->pairs);
  free (l->comms);
  free (l->settings);
  free (l->warnings);
  memset (l, 0, sizeof (*l));
}

bool
ib_nccl_transport_is (const char *transport, const char *expected)
{
  size_t n = strlen (expected);
  return strncasecmp (transport, expected, n) == 0 && (transport[n] == '\0' || transport[n] == '/');
}

const struct ib_nccl_pair *
ib_nccl_log_unexpected (const struct ib_nccl_log *l, const char *expected)
{
  for (size_t i = 0; i < l->n_pairs; i++)
    if (!ib_nccl_transport_is (l->pairs[i].transport, expected))
      return &l->pairs[i];
  return NULL;
}

const char *
ib_nccl_log_cause (const struct ib_nccl_log *l)
{
  for (size_t i = 0; i < l->n_warnings; i++)
    if (!strstr (l->warnings[i], "getting address info") && !strstr (l->warnings[i], "name resolution"))
      return l->warnings[i];
  return NULL;
}

static cJSON *
strings (char *const *v, size_t n)
{
  cJSON *a = cJSON_CreateArray ();
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray (a, cJSON_CreateString (v[i]));
  return a;
}

cJSON *
ib_nccl_log_json (const struct ib_nccl_log *l)
{
  cJSON *j = cJSON_CreateObject ();
  cJSON_AddStringToObject (j, "version", l->version);
  cJSON *comms = cJSON_AddArrayToObject (j, "communicators");
  for (size_t i = 0; i < l->n_comms; i++)
    {
      const struct ib_nccl_comm *c = &l->comms[i];
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "id", c->id);
      cJSON_AddNumberToObject (o, "ranks", c->nranks);
      cJSON_AddNumberToObject (o, "nodes", c->nnodes);
      if (c->coll_channels >= 0)
        {
          cJSON_AddNumberToObject (o, "coll_channels", c->coll_channels);
          cJSON_AddNumberToObject (o, "nvls_channels", c->nvls_channels);
          cJSON_AddNumberToObject (o, "p2p_channels", c->p2p_channels);
        }
      cJSON_AddItemToArray (comms, o);
    }
  cJSON *pairs = cJSON_AddArrayToObject (j, "pairs");
  for (size_t i = 0; i < l->n_pairs; i++)
    {
      const struct ib_nccl_pair *p = &l->pairs[i];
      cJSON *o = cJSON_CreateObject ();
      cJSON_AddStringToObject (o, "from", p->from);
      cJSON_AddStringToObject (o, "to", p->to);
      cJSON_AddStringToObject (o, "transport", p->transport);
      if (p->others)
        cJSON_AddStringToObject (o, "also", p->others);
      cJSON_AddNumberToObject (o, "channels", p->channels);
      cJSON_AddItemToArray (pairs, o);
    }
  cJSON_AddItemToObject (j, "settings", strings (l->settings, l->n_settings));
  cJSON_AddItemToObject (j, "warnings", strings (l->warnings, l->n_warnings));
  return j;
}

char *
ib_nccl_log_strip_info (const char *text)
{
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&out, &len);
  for (const char *l = text; l && *l;)
    {
      const char *e = strchr (l, '\n');
      size_t n = e ? (size_t) (e - l + 1) : strlen (l);
      cleanup_free char *line = strndup (l, n);
      if (strstr (line, " NCCL INFO ") == NULL && strcspn (line, "\r\n") > 0)
        fwrite (l, 1, n, f);
      l += n;
    }
  fclose (f);
  return out;
}

cJSON *
ib_nccl_bandwidth_json (const char *text)
{
  cJSON *list = cJSON_CreateArray ();
  for (const char *l = text ? text : ""; *l;)
    {
      const char *e = strchr (l, '\n');
      size_t len = e ? (size_t) (e - l) : strlen (l);
      cleanup_free char *line = strndup (l, len);
      l = e ? e + 1 : l + len;
      const char *r = strstr (line, " ranks ");
      if (strncmp (line, "nccl ", 5) != 0 || r == NULL)
        continue;
      int ranks;
      unsigned long long bytes;
      double us, alg, bus;
      if (sscanf (r, " ranks %d %llu B %lf us algbw %lf GB/s busbw %lf GB/s", &ranks, &bytes, &us, &alg, &bus) != 5)
        continue;
      const char *name = line + 5;
      size_t n = (size_t) (r - name);
      while (n && name[n - 1] == ' ')
        n--;
      cJSON *o = cJSON_CreateObject ();
      cleanup_free char *coll = strndup (name, n);
      cJSON_AddStringToObject (o, "collective", coll);
      cJSON_AddNumberToObject (o, "ranks", ranks);
      cJSON_AddNumberToObject (o, "bytes", (double) bytes);
      cJSON_AddNumberToObject (o, "us", us);
      cJSON_AddNumberToObject (o, "algbw_gbs", alg);
      cJSON_AddNumberToObject (o, "busbw_gbs", bus);
      cJSON_AddItemToArray (list, o);
    }
  return list;
}
