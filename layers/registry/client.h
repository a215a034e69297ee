/* The state of one registry client, shared by the files of registry/: the
 * API (registry.c) opens and frees it, the HTTP exchange (http.c) sends
 * through its handle, authentication (auth.c) keeps its credentials and
 * token, the parallel transfers (parallel.c) open one per worker.  It
 * defines no function, so every file may read it and none is tied to
 * another through it.  Not a public contract: registry.h keeps the client
 * opaque. */
#ifndef IB_REGISTRY_CLIENT_H
#define IB_REGISTRY_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/image/transport.h"
#include "layers/registry/progress.h"

/* The scopes one token may ask for (the repository's, a mount's source,
 * those a challenge names); any beyond are not asked for. */
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

struct ib_curl;

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
  struct ib_registry_bar bar;
};

#endif
