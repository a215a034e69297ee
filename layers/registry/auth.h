/* Inside the registry client: credentials, tokens and what a registry's
 * challenge calls for (auth.c).  Nothing here sends a request: the HTTP
 * exchange (http.c) answers a 401 by asking ib_registry_auth_challenge
 * what to do, and fetches a token itself when told to.  Not a public
 * contract. */
#ifndef IB_REGISTRY_AUTH_H
#define IB_REGISTRY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"
#include "layers/registry/client.h"

/* The credentials for R's host from the auth file the options name, else
 * $REGISTRY_AUTH_FILE, else Docker's config.json; none is no error. */
int ib_registry_auth_init (struct ib_registry *r, const struct ib_remote_options *opt, ib_error_t *err);
void ib_registry_auth_clear (struct ib_registry_auth *a);
/* TO (empty) made a copy of FROM: credentials, token and its scopes. */
void ib_registry_auth_copy (struct ib_registry_auth *to, const struct ib_registry_auth *from);
/* Add SCOPE ("repository:NAME:ACTIONS") to what the next token asks for. */
void ib_registry_auth_want (struct ib_registry *r, const char *scope);
/* The Authorization header line for the next request, or NULL. */
char *ib_registry_auth_header (const struct ib_registry *r);

/* What a 401's challenge WWW_AUTHENTICATE calls for: 0 with *TOKEN_URL
 * NULL when the Authorization header changed (Basic) and the request is
 * worth a second try; 0 with *TOKEN_URL (malloc'd) when a token is needed
 * from there first (ib_registry_auth_token_begin, the GET, then
 * ib_registry_auth_token_end and ib_registry_auth_token_answer); -1 when
 * the registry refused, or asks for what cannot be given.  AGAIN says
 * the request was just refused with the header the last answer gave (a
 * token refused twice is a denial, once it may only have expired). */
int ib_registry_auth_challenge (struct ib_registry *r, const char *www_authenticate, bool again, char **token_url,
                                ib_error_t *err);
/* The token service takes the credentials Basic sends, and no token: the
 * current token is dropped and Basic turned on while the token request
 * runs.  Returns whether Basic was on, for ib_registry_auth_token_end. */
bool ib_registry_auth_token_begin (struct ib_registry *r);
/* Basic as it was before the token request (WAS_BASIC). */
void ib_registry_auth_token_end (struct ib_registry *r, bool was_basic);
/* The token service's answer (its STATUS and BODY) taken: the token for
 * the next requests, or why there is none. */
int ib_registry_auth_token_answer (struct ib_registry *r, long status, const char *body, size_t len,
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

#endif
