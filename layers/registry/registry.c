/* The distribution API over one repository: manifests, blob downloads
 * into the store, and blob uploads (HEAD, mount, monolithic or chunked
 * with resumption). */
#include "layers/registry/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/image/image.h"
#include "layers/registry/auth.h"
#include "layers/registry/http.h"

#define MANIFEST_ACCEPT                                                                                          \
  IB_MT_OCI_MANIFEST ", " IB_MT_OCI_INDEX ", " IB_MT_DOCKER_MANIFEST ", " IB_MT_DOCKER_LIST

static bool
is_loopback (const char *host)
{
  size_t n = host[0] == '[' ? strcspn (host, "]") + 1 : strcspn (host, ":");
  return (n == 9 && strncmp (host, "localhost", 9) == 0) || strncmp (host, "127.", 4) == 0
         || (n == 5 && strncmp (host, "[::1]", 5) == 0);
}

/* More than this many connections to one registry helps no one. */
#define MAX_JOBS 64

unsigned
ib_registry_jobs (const struct ib_remote_options *opt)
{
  if (opt && opt->transfer_jobs)
    return opt->transfer_jobs;
  long n = ib_env_number ("IMGBUILD_REGISTRY_JOBS", 4, 1);
  return n > MAX_JOBS ? MAX_JOBS : (unsigned) n;
}

/* GET /v2/: where the scheme is settled (plain HTTP only where allowed and
 * the server does not speak TLS) and the first challenge answered. */
static int
ping (struct ib_registry *r, ib_error_t *err)
{
  for (;;)
    {
      struct ib_http_call c = { .method = "GET", .replayable = true };
      c.url = ib_xasprintf ("%s://%s/v2/", r->scheme, r->api_host);
      ib_error_t e = NULL;
      int rc = ib_registry_do (r, &c, &e);
      if (rc < 0 && r->allow_http && strcmp (r->scheme, "https") == 0 && c.curl_code == CURLE_SSL_CONNECT_ERROR)
        {
          ib_error_release (&e);
          ib_http_call_clear (&c);
          free (r->scheme);
          r->scheme = ib_xstrdup ("http");
          continue;
        }
      if (rc < 0)
        *err = e;
      else if (c.status == 404)
        rc = ib_error (err, IB_EENV, "%s is not a registry (GET /v2/ answers HTTP 404)", r->host);
      ib_http_call_clear (&c);
      return rc;
    }
}

/* Whether R's host speaks TLS at all, asked of a host that may speak plain
 * HTTP without loading the CA bundle (tens of milliseconds, every time): a
 * handshake with nothing verified, on a handle of its own, and no request
 * sent.  The requests that follow verify as the options say; a host that
 * cannot be reached is "yes", for the ping to say why. */
static bool
speaks_tls (const struct ib_registry *r)
{
  struct ib_curl *h = NULL;
  ib_error_t ignored = NULL;
  if (ib_curl_open (NULL, &h, &ignored) < 0)
    {
      /* The client's own handle fails the same way, and says why. */
      ib_error_release (&ignored);
      return true;
    }
  cleanup_free char *url = ib_xasprintf ("https://%s/", r->api_host);
  ib_curl_set_ptr (h, CURLOPT_URL, url);
  ib_curl_set_long (h, CURLOPT_CONNECT_ONLY, 1L);
  ib_curl_set_long (h, CURLOPT_NOSIGNAL, 1L);
  ib_curl_set_long (h, CURLOPT_CONNECTTIMEOUT, 30L);
  ib_curl_set_long (h, CURLOPT_SSL_VERIFYPEER, 0L);
  ib_curl_set_long (h, CURLOPT_SSL_VERIFYHOST, 0L);
  CURLcode rc = ib_curl_perform (h);
  ib_curl_free (h);
  return rc != CURLE_SSL_CONNECT_ERROR;
}

/* A client of REPO on HOST whose first request goes over SCHEME.  LIKE
 * (NULL: none) is a client of the same registry whose ping settled the
 * scheme and answered the first challenge: its credentials and token are
 * copied, and no ping is sent (a token that no longer serves is a 401,
 * answered as any other). */
static int
open_client (const char *host, const char *repo, bool push, const struct ib_remote_options *opt,
             const char *scheme, const struct ib_registry *like, struct ib_registry **out, ib_error_t *err)
{
  struct ib_registry *r = ib_xcalloc (1, sizeof (*r));
  r->host = ib_xstrdup (host);
  r->api_host = ib_xstrdup (strcmp (host, "docker.io") == 0 ? "registry-1.docker.io" : host);
  r->repo = ib_xstrdup (repo);
  r->scheme = ib_xstrdup (scheme);
  r->tls_verify = !(opt && opt->tls_verify_off);
  /* As Docker does: a registry on loopback may speak plain HTTP. */
  r->allow_http = !r->tls_verify || is_loopback (host);
  if (like == NULL && r->allow_http && strcmp (r->scheme, "https") == 0 && !speaks_tls (r))
    {
      free (r->scheme);
      r->scheme = ib_xstrdup ("http");
    }
  r->chunk_size = (uint64_t) ib_env_number ("IMGBUILD_REGISTRY_CHUNK_SIZE", 64l << 20, 1024);
  r->stall_s = ib_env_number ("IMGBUILD_REGISTRY_STALL_S", 60, 1);
  r->max_attempts = (unsigned) ib_env_number ("IMGBUILD_REGISTRY_ATTEMPTS", 5, 1);
  r->bar.report = opt ? opt->progress : NULL;
  r->refetch = opt && opt->refetch;
  r->push = push;
  r->opt = opt;
  r->jobs = ib_registry_jobs (opt);
  cleanup_free char *scope = ib_xasprintf ("repository:%s:%s", repo, push ? "pull,push" : "pull");
  int rc = ib_curl_open (NULL, &r->curl, err);
  if (rc == 0 && like)
    ib_registry_auth_copy (&r->auth, &like->auth);
  else if (rc == 0)
    rc = ib_registry_auth_init (r, opt, err);
  if (rc == 0 && like == NULL)
    {
      ib_registry_auth_want (r, scope);
      rc = ping (r, err);
    }
  if (rc < 0)
    {
      ib_registry_free (r);
      return -1;
    }
  *out = r;
  return 0;
}

int
ib_registry_open (const char *host, const char *repo, bool push, const struct ib_remote_options *opt,
                  struct ib_registry **out, ib_error_t *err)
{
  return open_client (host, repo, push, opt, "https", NULL, out, err);
}

/* A worker's client starts where its caller's ping left it: the scheme
 * settled (a plain-HTTP registry is not asked for TLS again on every
 * thread, each attempt loading the system's whole CA bundle) and the
 * token fetched, so it sends its first blob request at once. */
int
ib_registry_open_like (const struct ib_registry *m, struct ib_registry **out, ib_error_t *err)
{
  return open_client (m->host, m->repo, m->push, m->opt, m->scheme, m, out, err);
}

/* The bar and the counters are progress.c's; the caller knows them
 * through its client. */
void
ib_registry_progress_begin (struct ib_registry *r, const char *what, uint64_t total)
{
  ib_registry_bar_begin (&r->bar, what, total);
}

void
ib_registry_progress_add (struct ib_registry *r, uint64_t n)
{
  ib_registry_bar_add (&r->bar, n);
}

void
ib_registry_progress_end (struct ib_registry *r)
{
  ib_registry_bar_end (&r->bar);
}

void
ib_registry_free (struct ib_registry *r)
{
  if (r == NULL)
    return;
  ib_registry_bar_end (&r->bar);
  ib_curl_free (r->curl);
  ib_registry_auth_clear (&r->auth);
  free (r->host);
  free (r->api_host);
  free (r->repo);
  free (r->scheme);
  free (r);
}

const struct ib_registry_stats *
ib_registry_stats (const struct ib_registry *r)
{
  return &r->stats;
}

int
ib_registry_get_manifest (struct ib_registry *r, const char *reference, char **body, size_t *len,
                          char **media_type, ib_digest *digest, ib_error_t *err)
{
  struct ib_http_call c = { .method = "GET", .accept = MANIFEST_ACCEPT, .replayable = true,
                            .max = IB_MAX_MANIFEST_SIZE };
  c.url = ib_registry_url (r, "manifests/%s", reference);
  int rc = ib_registry_do (r, &c, err);
  if (rc == 0 && c.status == 404)
    rc = ib_error (err, IB_ENOTFOUND, "registry %s has no %s%s%s", r->host, r->repo,
                   strncmp (reference, "sha256:", 7) ? ":" : "@", reference);
  else if (rc == 0 && c.status != 200)
    rc = ib_registry_status_error (r, &c, "manifest", err);
  if (rc == 0)
    {
      ib_sha256_buf (c.buf ? c.buf : "", c.len, digest);
      bool by_digest = strncmp (reference, "sha256:", 7) == 0;
      if (by_digest && strcmp (reference, digest->s) != 0)
        rc = ib_error (err, IB_EINTEGRITY, "registry %s sent manifest %s for %s", r->host, digest->s, reference);
      else if (c.content_digest && strncmp (c.content_digest, "sha256:", 7) == 0
               && strcmp (c.content_digest, digest->s) != 0)
        rc = ib_error (err, IB_EINTEGRITY, "registry %s: manifest %s:%s is %s, not the %s it says", r->host,
                       r->repo, reference, digest->s, c.content_digest);
    }
  if (rc == 0)
    {
      const char *ct = c.content_type_got ? c.content_type_got : "";
      *media_type = strndup (ct, strcspn (ct, "; "));
      *body = c.buf ? c.buf : ib_xstrdup ("");
      *len = c.len;
      c.buf = NULL;
    }
  ib_http_call_clear (&c);
  return rc;
}

int
ib_registry_fetch_blob (struct ib_registry *r, struct ib_store *s, const struct ib_descriptor *d, ib_error_t *err)
{
  if (!r->refetch && ib_store_has_blob (s, &d->digest))
    return 0;
  struct ib_http_call c = { .method = "GET", .replayable = true, .store = s, .blob = d };
  c.url = ib_registry_url (r, "blobs/%s", d->digest.s);
  int rc = ib_registry_do (r, &c, err);
  if (rc == 0 && c.status != 200 && c.status != 206)
    rc = ib_registry_status_error (r, &c, "blob", err);
  if (rc == 0)
    {
      struct ib_blob_writer *w = c.writer;
      c.writer = NULL;
      rc = ib_blob_writer_commit (w, &d->digest, d->size, NULL, NULL, err);
      if (rc < 0)
        ib_error_wrap (err, "registry %s", r->host);
      else
        r->stats.blobs_fetched++;
    }
  ib_http_call_clear (&c);
  return rc;
}

/* An upload URL from a Location header (absolute, or a path). */
static char *
upload_url (const struct ib_registry *r, const char *location)
{
  if (strncmp (location, "http://", 7) == 0 || strncmp (location, "https://", 8) == 0)
    return ib_xstrdup (location);
  return ib_xasprintf ("%s://%s%s%s", r->scheme, r->api_host, location[0] == '/' ? "" : "/", location);
}

/* Why an upload step failed decides what comes next: a transient failure
 * (connection, 5xx, a lost upload session) starts over or resumes; anything
 * else stops. */
enum step
{
  STEP_OK,
  STEP_TRANSIENT,
  STEP_FATAL,
};

static enum step
classify (struct ib_registry *r, int rc, struct ib_http_call *c, long want, const char *what, ib_error_t *err)
{
  if (rc < 0)
    return STEP_TRANSIENT;
  if (c->status == want)
    return STEP_OK;
  ib_registry_status_error (r, c, what, err);
  return c->status == 404 || c->status == 416 || c->status == 429 || c->status >= 500 ? STEP_TRANSIENT : STEP_FATAL;
}

static enum step
start_upload (struct ib_registry *r, char **location, ib_error_t *err)
{
  struct ib_http_call c = { .method = "POST", .replayable = true };
  c.url = ib_registry_url (r, "blobs/uploads/");
  enum step st = classify (r, ib_registry_do (r, &c, err), &c, 202, "start upload", err);
  if (st == STEP_OK && c.location == NULL)
    st = STEP_FATAL, ib_error (err, IB_EENV, "registry %s: an upload began without a Location", r->host);
  if (st == STEP_OK)
    *location = upload_url (r, c.location);
  ib_http_call_clear (&c);
  return st;
}

/* The last PUT, with the whole blob (monolithic) or nothing (after chunks). */
static enum step
finish_upload (struct ib_registry *r, const char *location, const struct ib_descriptor *d, int fd, bool whole,
               ib_error_t *err)
{
  struct ib_http_call c = { .method = "PUT", .content_type = "application/octet-stream" };
  c.url = ib_xasprintf ("%s%sdigest=%s", location, strchr (location, '?') ? "&" : "?", d->digest.s);
  if (whole)
    {
      c.has_body = true;
      c.body = (struct ib_http_body){ .fd = fd, .len = d->size };
    }
  enum step st = classify (r, ib_registry_do (r, &c, err), &c, 201, "finish upload", err);
  ib_http_call_clear (&c);
  return st;
}

/* Where an interrupted upload stands: the registry's Range says how much
 * it kept.  STEP_TRANSIENT when the session is gone (start over). */
static enum step
upload_status (struct ib_registry *r, char **location, uint64_t *offset, ib_error_t *err)
{
  struct ib_http_call c = { .method = "GET", .replayable = true };
  c.url = ib_xstrdup (*location);
  enum step st = classify (r, ib_registry_do (r, &c, err), &c, 204, "upload status", err);
  if (st == STEP_OK)
    {
      unsigned long long end = 0;
      *offset = c.range && sscanf (c.range, "%*[^-]-%llu", &end) == 1 && end > 0 ? end + 1 : 0;
      if (c.location)
        {
          free (*location);
          *location = upload_url (r, c.location);
        }
    }
  ib_http_call_clear (&c);
  return st;
}

static enum step
put_chunks (struct ib_registry *r, char **location, const struct ib_descriptor *d, int fd, ib_error_t *err)
{
  uint64_t off = 0;
  unsigned failures = 0;
  while (off < d->size)
    {
      uint64_t n = d->size - off < r->chunk_size ? d->size - off : r->chunk_size;
      struct ib_http_call c = { .method = "PATCH", .content_type = "application/octet-stream", .has_body = true };
      c.url = ib_xstrdup (*location);
      c.content_range = ib_xasprintf ("%llu-%llu", (unsigned long long) off, (unsigned long long) (off + n - 1));
      c.body = (struct ib_http_body){ .fd = fd, .off = off, .len = n };
      ib_error_t e = NULL;
      enum step st = classify (r, ib_registry_do (r, &c, &e), &c, 202, "upload chunk", &e);
      if (st == STEP_OK)
        {
          if (c.location)
            {
              free (*location);
              *location = upload_url (r, c.location);
            }
          off += n;
        }
      ib_http_call_clear (&c);
      if (st == STEP_FATAL)
        {
          *err = e;
          return st;
        }
      if (st == STEP_OK)
        continue;
      /* A chunk failed: ask what the registry kept and go on from there. */
      if (++failures >= r->max_attempts)
        {
          *err = e;
          return STEP_FATAL;
        }
      ib_error_release (&e);
      ib_registry_backoff (r, failures, 0);
      st = upload_status (r, location, &off, err);
      if (st != STEP_OK)
        return st;
    }
  return STEP_OK;
}

static int
upload (struct ib_registry *r, struct ib_store *s, const struct ib_descriptor *d, char *location, ib_error_t *err)
{
  cleanup_free char *path = ib_store_blob_path (s, &d->digest);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      free (location);
      return ib_error_errno (err, errno, IB_EENV, "blob %s", d->digest.s);
    }
  for (unsigned attempt = 1;; attempt++)
    {
      enum step st = location ? STEP_OK : start_upload (r, &location, err);
      bool whole = d->size <= r->chunk_size;
      if (st == STEP_OK && !whole)
        st = put_chunks (r, &location, d, fd, err);
      if (st == STEP_OK)
        st = finish_upload (r, location, d, fd, whole, err);
      free (location);
      location = NULL;
      if (st == STEP_OK)
        {
          r->stats.blobs_uploaded++;
          return 0;
        }
      if (st == STEP_FATAL || attempt >= r->max_attempts)
        return ib_error_wrap (err, "upload blob %s (%u attempt%s)", d->digest.s, attempt, attempt == 1 ? "" : "s");
      /* Start over with a fresh upload session. */
      ib_error_release (err);
      ib_registry_backoff (r, attempt, 0);
    }
}

int
ib_registry_push_blob (struct ib_registry *r, struct ib_store *s, const struct ib_descriptor *d,
                       const char *mount_from, ib_error_t *err)
{
  struct ib_http_call c = { .method = "HEAD", .replayable = true };
  c.url = ib_registry_url (r, "blobs/%s", d->digest.s);
  int rc = ib_registry_do (r, &c, err);
  long status = c.status;
  if (rc == 0 && status != 200 && status != 404)
    rc = ib_registry_status_error (r, &c, "blob", err);
  ib_http_call_clear (&c);
  if (rc < 0)
    return -1;
  if (status == 200)
    {
      r->stats.blobs_present++;
      return 0;
    }
  char *location = NULL;
  if (mount_from && strcmp (mount_from, r->repo) != 0)
    {
      /* The token must also carry pull on the source repository. */
      cleanup_free char *scope = ib_xasprintf ("repository:%s:pull", mount_from);
      ib_registry_auth_want (r, scope);
      /* A repository name ([a-z0-9._/-]) needs no escaping in a query. */
      struct ib_http_call m = { .method = "POST", .replayable = true };
      m.url = ib_registry_url (r, "blobs/uploads/?mount=%s&from=%s", d->digest.s, mount_from);
      rc = ib_registry_do (r, &m, err);
      if (rc == 0 && m.status == 201)
        r->stats.blobs_mounted++;
      else if (rc == 0 && m.status == 202 && m.location)
        location = upload_url (r, m.location); /* no mount: upload into the session it opened */
      else if (rc == 0)
        rc = ib_registry_status_error (r, &m, "mount", err);
      status = m.status;
      ib_http_call_clear (&m);
      if (rc < 0 || status == 201)
        return rc;
    }
  return upload (r, s, d, location, err);
}

int
ib_registry_put_manifest (struct ib_registry *r, const char *reference, const char *media_type, const char *body,
                          size_t len, ib_error_t *err)
{
  struct ib_http_call c = { .method = "PUT", .content_type = media_type, .replayable = true, .has_body = true };
  c.url = ib_registry_url (r, "manifests/%s", reference);
  c.body = (struct ib_http_body){ .buf = body, .len = len };
  int rc = ib_registry_do (r, &c, err);
  if (rc == 0 && c.status != 201)
    rc = ib_registry_status_error (r, &c, "put manifest", err);
  ib_http_call_clear (&c);
  return rc;
}
