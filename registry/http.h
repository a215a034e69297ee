/* Inside the registry client: one HTTP exchange with retries and
 * authentication (registry_http.c), and the credentials and tokens behind
 * the Authorization header (registry_auth.c).  Not a public contract. */
#ifndef IB_REGISTRY_HTTP_H
#define IB_REGISTRY_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "curl.h"
#include "registry.h"

#define IB_REGISTRY_MAX_SCOPES 8

struct ib_registry_auth
{
  char *basic;        /* base64 "user:pass" from the auth file, or NULL */
  char *auth_file;    /* where it came from, for messages */
  char *bearer;       /* the current token, for the scopes below */
  char *scopes[IB_REGISTRY_MAX_SCOPES];
  size_t n_scopes;
  bool use_basic;     /* the registry asked for Basic */
};

struct ib_registry
{
  char *host;     /* "name[:port]" as the user wrote it */
  char *api_host; /* where the API is: Docker Hub's is not docker.io */
  char *repo;
  char *scheme;   /* "https", or "http" where allowed and TLS is not spoken */
  bool tls_verify;
  bool allow_http;
  bool refetch; /* ib_remote_options.refetch */
  bool push;    /* opened for push: a worker's client is opened alike */
  const struct ib_remote_options *opt; /* the caller's, for the workers' clients */
  unsigned jobs; /* blob transfers at once (ib_registry_each_blob) */
  uint64_t chunk_size;
  long stall_s;       /* a transfer slower than 1 byte/s for this long is broken */
  unsigned max_attempts;
  struct ib_curl *curl; /* one handle: its connections are kept alive */
  struct ib_registry_auth auth;
  struct ib_registry_stats stats;
  const struct ib_transfer_report *progress;
  void *progress_handle; /* a bar is being drawn */
  /* A worker's client feeds the bar of the client it works for
   * (PROGRESS_TO), under that run's lock: the caller's callbacks need not
   * be thread-safe.  Both NULL outside ib_registry_each_blob. */
  struct ib_registry *progress_to;
  pthread_mutex_t *progress_lock;
};

/* A request body: a buffer, or LEN bytes of FD from OFF. */
struct ib_http_body
{
  const char *buf;
  int fd;
  uint64_t off, len, done;
};

struct ib_http_call
{
  /* the request */
  const char *method;
  char *url;
  const char *accept, *content_type;
  char *content_range;
  struct ib_http_body body;
  bool has_body;
  bool replayable;   /* may be sent again as it is after a failure */
  /* where a response body goes: the store (a blob), or a small buffer */
  struct ib_store *store;
  const struct ib_descriptor *blob;
  struct ib_blob_writer *writer;
  uint64_t blob_done;      /* bytes of the blob written: a retry asks for the rest */
  bool in_body;            /* this response's body has begun */
  ib_error_t writer_err;
  char *buf;
  size_t len, max;
  /* the response */
  long status;
  char *location, *content_digest, *range, *www_auth, *content_type_got;
  long long range_start; /* of a 206's Content-Range; -1 when none */
  double retry_after;
  unsigned attempts; /* how many times it was sent */
  CURLcode curl_code; /* of the last attempt */
};

void ib_http_call_clear (struct ib_http_call *c);
/* Send C (authenticating and retrying as needed); 0 with C->status set
 * whatever the status, -1 when no answer came. */
int ib_registry_do (struct ib_registry *r, struct ib_http_call *c, ib_error_t *err);
/* Another client of M's repository, opened as M was, over the scheme M
 * settled on (registry.c; the parallel transfers' workers). */
int ib_registry_open_like (const struct ib_registry *m, struct ib_registry **out, ib_error_t *err);
/* "scheme://api_host/v2/REPO/" + the printf rest. */
char *ib_registry_url (const struct ib_registry *r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* A readable error for an unexpected status, with the registry's own
 * error codes when it sent a JSON body. */
int ib_registry_status_error (struct ib_registry *r, const struct ib_http_call *c, const char *what,
                              ib_error_t *err);
void ib_registry_backoff (struct ib_registry *r, unsigned attempt, double retry_after);

int ib_registry_auth_init (struct ib_registry *r, const struct ib_remote_options *opt, ib_error_t *err);
void ib_registry_auth_clear (struct ib_registry_auth *a);
/* TO (empty) made a copy of FROM: credentials, token and its scopes. */
void ib_registry_auth_copy (struct ib_registry_auth *to, const struct ib_registry_auth *from);
/* Add SCOPE ("repository:NAME:ACTIONS") to what the next token asks for. */
void ib_registry_auth_want (struct ib_registry *r, const char *scope);
/* Answer a 401's challenge: *RETRY is true when a new Authorization header
 * is worth a second try.  AGAIN says the request was just refused with the
 * header this answer gave (a token refused twice is a denial, once it may
 * only have expired). */
int ib_registry_auth_challenge (struct ib_registry *r, const char *www_authenticate, bool again, bool *retry,
                                ib_error_t *err);
/* A WWW-Authenticate challenge: its scheme and the parameters that matter. */
struct ib_www_authenticate
{
  char scheme[16];
  char *realm, *service, *scope; /* NULL when absent */
};
void ib_www_authenticate_parse (const char *header, struct ib_www_authenticate *c);
void ib_www_authenticate_clear (struct ib_www_authenticate *c);
/* The token of a token service's answer ({"token"} or {"access_token"}),
 * or NULL when it holds none usable (empty, or with blanks or newlines that
 * would break the header). */
char *ib_token_response_parse (const char *body, size_t len);
/* The Authorization header line for the next request, or NULL. */
char *ib_registry_auth_header (const struct ib_registry *r);

#endif
