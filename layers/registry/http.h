/* Inside the registry client: one HTTP exchange with a registry, with
 * retries, and authentication as its 401s ask (http.c: what a challenge
 * calls for is auth.c's to say, the token fetch is done here).  Not a
 * public contract. */
#ifndef IB_REGISTRY_HTTP_H
#define IB_REGISTRY_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/store/store.h"
#include "layers/registry/client.h"
#include "layers/registry/curl.h"

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
  bool no_challenge; /* a 401 comes back as it is: a token request's own
                        (answering it would ask for another token, and so
                        on, as deep as a hostile token service likes) */
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
/* "scheme://api_host/v2/REPO/" + the printf rest. */
char *ib_registry_url (const struct ib_registry *r, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* A readable error for an unexpected status, with the registry's own
 * error codes when it sent a JSON body. */
int ib_registry_status_error (struct ib_registry *r, const struct ib_http_call *c, const char *what,
                              ib_error_t *err);
void ib_registry_backoff (struct ib_registry *r, unsigned attempt, double retry_after);

#endif
