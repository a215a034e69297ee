/* One HTTP exchange with a registry: the curl handle kept per client (so
 * its connections are reused), the retry policy, where response bodies
 * go, and the answer to a 401 (auth.c says what its challenge calls for;
 * a token is fetched here, as any other request).  Why retry here: a
 * registry behind a load balancer answers 502/503 while it restarts, 429
 * when it throttles, and drops connections; a push of a large image must
 * survive all three. */
#include "layers/registry/http.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/registry/auth.h"

void
ib_http_call_clear (struct ib_http_call *c)
{
  free (c->url);
  free (c->content_range);
  free (c->buf);
  free (c->location);
  free (c->content_digest);
  free (c->range);
  free (c->www_auth);
  free (c->content_type_got);
  if (c->writer)
    ib_blob_writer_abort (c->writer);
  ib_error_release (&c->writer_err);
  memset (c, 0, sizeof (*c));
}

char *
ib_registry_url (const struct ib_registry *r, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  cleanup_free char *rest = ib_xvasprintf (fmt, ap);
  va_end (ap);
  return ib_xasprintf ("%s://%s/v2/%s/%s", r->scheme, r->api_host, r->repo, rest);
}

static void
reset_response (struct ib_http_call *c)
{
  c->status = 0;
  c->retry_after = 0;
  c->range_start = -1;
  c->in_body = false;
  free (c->location), c->location = NULL;
  free (c->content_digest), c->content_digest = NULL;
  free (c->range), c->range = NULL;
  free (c->www_auth), c->www_auth = NULL;
  free (c->content_type_got), c->content_type_got = NULL;
  free (c->buf), c->buf = NULL;
  c->len = 0;
}

/* A header's value, trimmed, when LINE is that header. */
static char *
header_value (const char *line, size_t len, const char *name)
{
  size_t n = strlen (name);
  if (len <= n || strncasecmp (line, name, n) != 0 || line[n] != ':')
    return NULL;
  const char *v = line + n + 1, *end = line + len;
  while (v < end && isspace ((unsigned char) *v))
    v++;
  while (end > v && isspace ((unsigned char) end[-1]))
    end--;
  return strndup (v, (size_t) (end - v));
}

static void
keep (char **slot, char *value)
{
  if (value)
    {
      free (*slot);
      *slot = value;
    }
}

static size_t
on_header (char *p, size_t size, size_t n, void *data)
{
  struct ib_http_call *c = data;
  size_t len = size * n;
  /* Each response of a redirect chain starts with its status line. */
  if (len > 5 && strncmp (p, "HTTP/", 5) == 0)
    {
      reset_response (c);
      const char *sp = memchr (p, ' ', len);
      c->status = sp ? strtol (sp + 1, NULL, 10) : 0;
      return len;
    }
  keep (&c->location, header_value (p, len, "Location"));
  keep (&c->content_digest, header_value (p, len, "Docker-Content-Digest"));
  keep (&c->range, header_value (p, len, "Range"));
  keep (&c->content_type_got, header_value (p, len, "Content-Type"));
  char *auth = header_value (p, len, "WWW-Authenticate");
  /* Bearer first: a registry may offer Basic beside it. */
  if (auth && (c->www_auth == NULL || strncasecmp (auth, "Bearer", 6) == 0))
    keep (&c->www_auth, auth);
  else
    free (auth);
  cleanup_free char *cr = header_value (p, len, "Content-Range");
  unsigned long long start;
  if (cr && sscanf (cr, "bytes %llu-", &start) == 1)
    c->range_start = (long long) start;
  cleanup_free char *ra = header_value (p, len, "Retry-After");
  if (ra)
    c->retry_after = atof (ra);
  return len;
}

/* Blob bytes go to the store's writer.  After a broken transfer the retry
 * asks for the rest (Range); a registry that answers with the whole blob
 * instead starts it over. */
static size_t
blob_data (struct ib_registry *r, struct ib_http_call *c, const char *p, size_t len)
{
  bool first = !c->in_body;
  c->in_body = true;
  if (first && c->status == 200 && c->blob_done > 0)
    {
      ib_blob_writer_abort (c->writer);
      c->writer = NULL;
      c->blob_done = 0;
      if (ib_blob_writer_new (c->store, &c->writer, &c->writer_err) < 0)
        return 0;
    }
  if (first && c->status == 206 && c->range_start != (long long) c->blob_done)
    {
      ib_error (&c->writer_err, IB_EINTEGRITY, "blob %s: the registry resumed at byte %lld, not %llu",
                c->blob->digest.s, c->range_start, (unsigned long long) c->blob_done);
      return 0;
    }
  if (ib_blob_writer_write (c->writer, p, len, &c->writer_err) < 0)
    return 0;
  c->blob_done += len;
  ib_registry_bar_add (&r->bar, len);
  /* A registry that sends more than the descriptor says is not let fill
   * the disk. */
  if (c->blob_done > c->blob->size)
    {
      ib_error (&c->writer_err, IB_EINTEGRITY, "blob %s: the registry sent more than its %llu bytes",
                c->blob->digest.s, (unsigned long long) c->blob->size);
      return 0;
    }
  return len;
}

struct data_sink
{
  struct ib_registry *r;
  struct ib_http_call *c;
};

static size_t
on_data (char *p, size_t size, size_t n, void *data)
{
  struct data_sink *k = data;
  struct ib_http_call *c = k->c;
  size_t len = size * n;
  k->r->stats.bytes_down += len;
  if (c->writer && (c->status == 200 || c->status == 206))
    return blob_data (k->r, c, p, len);
  size_t max = c->max ? c->max : 65536;
  if (c->len + len > max)
    {
      ib_error (&c->writer_err, IB_EINTEGRITY, "%s %s: response larger than %zu bytes", c->method, c->url, max);
      return 0;
    }
  ib_xappend (&c->buf, &c->len, p, len);
  return len;
}

static size_t
on_read (char *p, size_t size, size_t n, void *data)
{
  struct data_sink *k = data;
  struct ib_http_call *c = k->c;
  struct ib_http_body *b = &c->body;
  size_t want = size * n;
  if (want > b->len - b->done)
    want = (size_t) (b->len - b->done);
  if (want == 0)
    return 0;
  if (b->buf)
    memcpy (p, b->buf + b->done, want);
  else
    {
      ssize_t got = pread (b->fd, p, want, (off_t) (b->off + b->done));
      if (got <= 0)
        return CURL_READFUNC_ABORT;
      want = (size_t) got;
      ib_registry_bar_add (&k->r->bar, want);
    }
  b->done += want;
  return want;
}

static CURLcode
perform_once (struct ib_registry *r, struct ib_http_call *c)
{
  struct ib_curl *h = r->curl;
  ib_curl_reset (h);
  reset_response (c);
  c->body.done = 0;
  ib_curl_set_ptr (h, CURLOPT_URL, c->url);
  ib_curl_set_long (h, CURLOPT_NOSIGNAL, 1L);
  ib_curl_set_long (h, CURLOPT_CONNECTTIMEOUT, 30L);
  ib_curl_set_long (h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  ib_curl_set_long (h, CURLOPT_LOW_SPEED_TIME, r->stall_s);
  ib_curl_set_long (h, CURLOPT_SSL_VERIFYPEER, r->tls_verify ? 1L : 0L);
  ib_curl_set_long (h, CURLOPT_SSL_VERIFYHOST, r->tls_verify ? 2L : 0L);
  ib_curl_set_data_fn (h, CURLOPT_HEADERFUNCTION, on_header);
  ib_curl_set_ptr (h, CURLOPT_HEADERDATA, c);
  struct data_sink sink = { r, c };
  ib_curl_set_data_fn (h, CURLOPT_WRITEFUNCTION, on_data);
  ib_curl_set_ptr (h, CURLOPT_WRITEDATA, &sink);
  if (strcmp (c->method, "GET") == 0)
    {
      /* Blob storage behind a registry answers with redirects; curl does
       * not send our Authorization header to another host. */
      ib_curl_set_long (h, CURLOPT_FOLLOWLOCATION, 1L);
      ib_curl_set_long (h, CURLOPT_MAXREDIRS, 5L);
    }
  else if (strcmp (c->method, "HEAD") == 0)
    ib_curl_set_long (h, CURLOPT_NOBODY, 1L);
  else if (strcmp (c->method, "POST") == 0 && !c->has_body)
    {
      ib_curl_set_long (h, CURLOPT_POST, 1L);
      ib_curl_set_ptr (h, CURLOPT_POSTFIELDS, "");
      ib_curl_set_long (h, CURLOPT_POSTFIELDSIZE, 0L);
    }
  else
    {
      ib_curl_set_long (h, CURLOPT_UPLOAD, 1L);
      ib_curl_set_ptr (h, CURLOPT_CUSTOMREQUEST, c->method);
      ib_curl_set_data_fn (h, CURLOPT_READFUNCTION, on_read);
      ib_curl_set_ptr (h, CURLOPT_READDATA, &sink);
      ib_curl_set_off (h, CURLOPT_INFILESIZE_LARGE, (c->has_body ? c->body.len : 0));
    }
  struct curl_slist *hs = NULL;
  cleanup_free char *accept = c->accept ? ib_xasprintf ("Accept: %s", c->accept) : NULL;
  cleanup_free char *ctype = c->content_type ? ib_xasprintf ("Content-Type: %s", c->content_type) : NULL;
  cleanup_free char *crange = c->content_range ? ib_xasprintf ("Content-Range: %s", c->content_range) : NULL;
  cleanup_free char *auth = ib_registry_auth_header (r);
  cleanup_free char *resume = c->writer && c->blob_done ? ib_xasprintf ("Range: bytes=%llu-",
                                                                        (unsigned long long) c->blob_done)
                                                        : NULL;
  const char *lines[] = { accept, ctype, crange, auth, resume, "Expect:", "User-Agent: imgbuild" };
  for (size_t i = 0; i < sizeof (lines) / sizeof (lines[0]); i++)
    if (lines[i])
      hs = ib_curl_slist_append (h, hs, lines[i]);
  ib_curl_set_ptr (h, CURLOPT_HTTPHEADER, hs);
  CURLcode rc = ib_curl_perform (h);
  ib_curl_slist_free_all (h, hs);
  r->stats.bytes_up += c->body.done;
  /* The header's secret does not outlive the request. */
  if (auth)
    memset (auth, 0, strlen (auth));
  return rc;
}

static bool
retryable_curl (CURLcode rc)
{
  switch (rc)
    {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
    }
}

static bool
retryable_status (long status)
{
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

void
ib_registry_backoff (struct ib_registry *r, unsigned attempt, double retry_after)
{
  /* 0.25 s after the first attempt, doubling, at most 16 s. */
  unsigned k = attempt > 0 ? attempt - 1 : 0;
  double s = 0.25 * (double) (1u << (k < 6 ? k : 6));
  if (retry_after > s)
    s = retry_after < 30 ? retry_after : 30;
  r->stats.retries++;
  struct timespec ts = { (time_t) s, (long) ((s - floor (s)) * 1e9) };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* The path of a URL, for messages (never its query: upload URLs carry
 * state). */
static char *
url_path (const char *url)
{
  const char *p = strstr (url, "://");
  p = p ? strchr (p + 3, '/') : NULL;
  if (p == NULL)
    return ib_xstrdup (url);
  return strndup (p, strcspn (p, "?"));
}

/* The blob writer of a download, made once: retries go on writing to it. */
static int
open_sink (struct ib_http_call *c, ib_error_t *err)
{
  if (c->store == NULL || c->writer)
    return 0;
  c->blob_done = 0;
  return ib_blob_writer_new (c->store, &c->writer, err);
}

/* GET URL, the token request auth.c asked for, with the credentials the
 * token service takes, and hand auth.c its answer.  It is an exchange like
 * any other (retried, and its own 401 answered). */
static int
fetch_token (struct ib_registry *r, char *url, ib_error_t *err)
{
  struct ib_http_call call = { .method = "GET", .url = url, .replayable = true, .no_challenge = true,
                                .max = 1u << 20 };
  bool was_basic = ib_registry_auth_token_begin (r);
  int rc = ib_registry_do (r, &call, err);
  ib_registry_auth_token_end (r, was_basic);
  if (rc == 0)
    rc = ib_registry_auth_token_answer (r, call.status, call.buf, call.len, err);
  /* The answer's copy of the token is wiped, not only freed. */
  if (call.buf)
    OPENSSL_cleanse (call.buf, call.len);
  ib_http_call_clear (&call);
  return rc;
}

/* A 401's challenge WWW_AUTH answered as auth.c says (AGAIN: the request
 * was just refused with the header the last answer gave): 0 when the
 * request is worth sending again. */
static int
answer_challenge (struct ib_registry *r, const char *www_auth, bool again, ib_error_t *err)
{
  char *token_url = NULL;
  if (ib_registry_auth_challenge (r, www_auth, again, &token_url, err) < 0)
    return -1;
  return token_url ? fetch_token (r, token_url, err) : 0;
}

int
ib_registry_do (struct ib_registry *r, struct ib_http_call *c, ib_error_t *err)
{
  unsigned auth_rounds = 0;
  for (unsigned attempt = 1;; attempt++)
    {
      if (open_sink (c, err) < 0)
        return -1;
      ib_error_release (&c->writer_err);
      c->attempts = attempt;
      CURLcode rc = c->curl_code = perform_once (r, c);
      if (c->writer_err)
        {
          *err = c->writer_err;
          c->writer_err = NULL;
          return -1;
        }
      bool again = attempt < r->max_attempts && c->replayable;
      if (rc != CURLE_OK)
        {
          if (retryable_curl (rc) && again)
            {
              ib_registry_backoff (r, attempt, 0);
              continue;
            }
          cleanup_free char *path = url_path (c->url);
          if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
            return ib_error (err, IB_EENV, "registry %s: its TLS certificate is not trusted (%s); "
                             "--tls-verify=false accepts it", r->host, ib_curl_strerror (r->curl, rc));
          cleanup_free char *tries = attempt > 1 ? ib_xasprintf (" (gave up after %u attempts)", attempt) : NULL;
          return ib_error (err, IB_EENV, "registry %s: %s %s: %s%s", r->host, c->method, path,
                           ib_curl_strerror (r->curl, rc), tries ? tries : "");
        }
      if (c->status == 401 && c->www_auth && !c->no_challenge && auth_rounds++ < 3)
        {
          if (answer_challenge (r, c->www_auth, auth_rounds > 1, err) < 0)
            return -1;
          attempt--;
          continue;
        }
      if (retryable_status (c->status) && again)
        {
          ib_registry_backoff (r, attempt, c->retry_after);
          continue;
        }
      return 0;
    }
}

/* The codes of a registry's JSON error body: {"errors":[{"code":..}]}. */
static char *
error_codes (const char *body)
{
  cJSON *j = body ? cJSON_Parse (body) : NULL;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive (j, "errors"), *e;
  char *out = NULL;
  cJSON_ArrayForEach (e, list)
  {
    const cJSON *code = cJSON_GetObjectItemCaseSensitive (e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive (e, "message");
    if (!cJSON_IsString (code))
      continue;
    char *next = ib_xasprintf ("%s%s%s%s%s", out ? out : "", out ? "; " : "", code->valuestring,
                               cJSON_IsString (msg) ? ": " : "", cJSON_IsString (msg) ? msg->valuestring : "");
    free (out);
    out = next;
  }
  cJSON_Delete (j);
  return out;
}

int
ib_registry_status_error (struct ib_registry *r, const struct ib_http_call *c, const char *what, ib_error_t *err)
{
  cleanup_free char *path = url_path (c->url);
  cleanup_free char *codes = error_codes (c->buf);
  cleanup_free char *tries = c->attempts > 1 ? ib_xasprintf (", gave up after %u attempts", c->attempts) : NULL;
  return ib_error (err, IB_EENV, "registry %s: %s: %s %s: HTTP %ld%s%s%s%s", r->host, what, c->method, path, c->status,
                   codes ? " (" : "", codes ? codes : "", codes ? ")" : "", tries ? tries : "");
}
