/* Credentials and tokens.  The registry says what it wants in a 401's
 * WWW-Authenticate: Basic (send the auth file's user:password), or Bearer
 * (ask the token service at its realm for a token carrying the scopes, with
 * the same credentials if there are any).  This file decides and keeps
 * the state; it sends nothing: the HTTP exchange (http.c) asks it what a
 * challenge calls for and fetches the token itself, so the exchange
 * depends on authentication and not the other way round.  Why the care
 * with secrets: these logs end up in CI output, so no message names a
 * password, a token, or the Authorization header; a refusal names the
 * registry and the file the credentials came from. */
#include "layers/registry/auth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/registry/curl.h"

#define MAX_AUTH_FILE (1u << 20)

/* "https://HOST/v1/" or "HOST" → does it name HOST? */
static bool
key_names_host (const char *key, const char *host)
{
  const char *k = strstr (key, "://");
  k = k ? k + 3 : key;
  size_t n = strcspn (k, "/");
  if (n == strlen (host) && strncmp (k, host, n) == 0)
    return true;
  /* Docker Hub's credentials are filed under its old index name. */
  return strcmp (host, "docker.io") == 0 && n == 15 && strncmp (k, "index.docker.io", 15) == 0;
}

/* A well-formed "auth" value: base64 of "user:password". */
static bool
auth_value_ok (const char *b64)
{
  size_t len = strlen (b64);
  if (len == 0 || len % 4 != 0 || len > 4096)
    return false;
  cleanup_free unsigned char *raw = ib_xmalloc (len);
  int n = EVP_DecodeBlock (raw, (const unsigned char *) b64, (int) len);
  bool ok = n > 0 && memchr (raw, ':', (size_t) n) != NULL;
  OPENSSL_cleanse (raw, len);
  return ok;
}

/* The entry for HOST in the auth file PATH: 1 found, 0 none, -1 error. */
static int
read_auth_file (const char *path, const char *host, char **out, ib_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;
  if (access (path, F_OK) < 0 && errno == ENOENT)
    return 0;
  if (ib_read_file (path, MAX_AUTH_FILE, &text, &len, err) < 0)
    return ib_error_wrap (err, "auth file");
  cJSON *j = cJSON_ParseWithLength (text, len);
  OPENSSL_cleanse (text, len);
  if (j == NULL)
    return ib_error (err, IB_EENV, "auth file `%s` is not JSON", path);
  const cJSON *auths = cJSON_GetObjectItemCaseSensitive (j, "auths"), *e2;
  int found = 0;
  cJSON_ArrayForEach (e2, auths)
  {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive (e2, "auth");
    if (!key_names_host (e2->string, host) || !cJSON_IsString (a))
      continue;
    if (!auth_value_ok (a->valuestring))
      found = ib_error (err, IB_EENV, "auth file `%s`: the entry for %s is not base64 of user:password", path, host);
    else
      {
        *out = ib_xstrdup (a->valuestring);
        found = 1;
      }
    break;
  }
  cJSON_Delete (j);
  return found;
}

int
ib_registry_auth_init (struct ib_registry *r, const struct ib_remote_options *opt, ib_error_t *err)
{
  const char *home = getenv ("HOME"), *dc = getenv ("DOCKER_CONFIG"), *raf = getenv ("REGISTRY_AUTH_FILE");
  cleanup_free char *docker = dc ? ib_path_join (dc, "config.json")
                                 : home ? ib_xasprintf ("%s/.docker/config.json", home) : NULL;
  const char *paths[] = { opt && opt->auth_file ? opt->auth_file : NULL, raf, docker };
  if (opt && opt->auth_file && access (opt->auth_file, R_OK) < 0)
    return ib_error_errno (err, errno, IB_EUSAGE, "auth file `%s`", opt->auth_file);
  for (size_t i = 0; i < sizeof (paths) / sizeof (paths[0]); i++)
    {
      if (paths[i] == NULL)
        continue;
      int found = read_auth_file (paths[i], r->host, &r->auth.basic, err);
      if (found < 0)
        return -1;
      if (found)
        {
          r->auth.auth_file = ib_xstrdup (paths[i]);
          return 0;
        }
      /* The first file named wins, as in skopeo: one asked for explicitly
       * is the only one read. */
      if (i == 0)
        break;
    }
  return 0;
}

static void
drop_secret (char **s)
{
  if (*s)
    OPENSSL_cleanse (*s, strlen (*s));
  free (*s);
  *s = NULL;
}

void
ib_registry_auth_clear (struct ib_registry_auth *a)
{
  drop_secret (&a->basic);
  drop_secret (&a->bearer);
  free (a->auth_file);
  for (size_t i = 0; i < a->n_scopes; i++)
    free (a->scopes[i]);
  memset (a, 0, sizeof (*a));
}

void
ib_registry_auth_copy (struct ib_registry_auth *to, const struct ib_registry_auth *from)
{
  to->basic = from->basic ? ib_xstrdup (from->basic) : NULL;
  to->auth_file = from->auth_file ? ib_xstrdup (from->auth_file) : NULL;
  to->bearer = from->bearer ? ib_xstrdup (from->bearer) : NULL;
  for (size_t i = 0; i < from->n_scopes; i++)
    to->scopes[i] = ib_xstrdup (from->scopes[i]);
  to->n_scopes = from->n_scopes;
  to->use_basic = from->use_basic;
}

/* true when SCOPE was new.  A token does not grow: a new scope drops the
 * current one, and the registry's next 401 fetches one for them all. */
static bool
want_scope (struct ib_registry *r, const char *scope, size_t len)
{
  for (size_t i = 0; i < r->auth.n_scopes; i++)
    if (strlen (r->auth.scopes[i]) == len && strncmp (r->auth.scopes[i], scope, len) == 0)
      return false;
  if (r->auth.n_scopes == IB_REGISTRY_MAX_SCOPES)
    return false;
  r->auth.scopes[r->auth.n_scopes++] = strndup (scope, len);
  drop_secret (&r->auth.bearer);
  return true;
}

void
ib_registry_auth_want (struct ib_registry *r, const char *scope)
{
  want_scope (r, scope, strlen (scope));
}

char *
ib_registry_auth_header (const struct ib_registry *r)
{
  if (r->auth.bearer)
    return ib_xasprintf ("Authorization: Bearer %s", r->auth.bearer);
  if (r->auth.use_basic && r->auth.basic)
    return ib_xasprintf ("Authorization: Basic %s", r->auth.basic);
  return NULL;
}

void
ib_www_authenticate_clear (struct ib_www_authenticate *c)
{
  free (c->realm);
  free (c->service);
  free (c->scope);
  memset (c, 0, sizeof (*c));
}

/* `Bearer realm="https://auth",service="registry",scope="repository:a:pull"` */
void
ib_www_authenticate_parse (const char *h, struct ib_www_authenticate *c)
{
  memset (c, 0, sizeof (*c));
  size_t n = strcspn (h, " ");
  snprintf (c->scheme, sizeof (c->scheme), "%.*s", (int) (n < 15 ? n : 15), h);
  const char *p = h + n;
  while (*p)
    {
      while (*p == ' ' || *p == ',')
        p++;
      const char *eq = strchr (p, '=');
      if (eq == NULL)
        break;
      const char *key = p;
      size_t klen = (size_t) (eq - p);
      const char *v = eq + 1;
      char *value;
      if (*v == '"')
        {
          const char *end = strchr (v + 1, '"');
          if (end == NULL)
            break;
          value = strndup (v + 1, (size_t) (end - v - 1));
          p = end + 1;
        }
      else
        {
          size_t vlen = strcspn (v, ",");
          value = strndup (v, vlen);
          p = v + vlen;
        }
      char **slot = klen == 5 && strncasecmp (key, "realm", 5) == 0     ? &c->realm
                    : klen == 7 && strncasecmp (key, "service", 7) == 0 ? &c->service
                    : klen == 5 && strncasecmp (key, "scope", 5) == 0   ? &c->scope
                                                                        : NULL;
      if (slot)
        {
          free (*slot);
          *slot = value;
        }
      else
        free (value);
    }
}

char *
ib_token_response_parse (const char *body, size_t len)
{
  cJSON *j = body ? cJSON_ParseWithLength (body, len) : NULL;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive (j, "token");
  if (!cJSON_IsString (t))
    t = cJSON_GetObjectItemCaseSensitive (j, "access_token");
  char *token = NULL;
  if (cJSON_IsString (t) && t->valuestring[0] != '\0' && !strpbrk (t->valuestring, "\r\n "))
    token = ib_xstrdup (t->valuestring);
  cJSON_Delete (j);
  return token;
}

static int
credentials_refused (struct ib_registry *r, const char *how, ib_error_t *err)
{
  if (r->auth.basic)
    return ib_error (err, IB_EENV, "registry %s refused the credentials for %s from `%s`%s", r->host, r->host,
                     r->auth.auth_file, how);
  return ib_error (err, IB_EENV,
                   "registry %s asks for credentials and none are known for it (log in with `docker login %s`, "
                   "or name an auth file with --authfile or $REGISTRY_AUTH_FILE)%s",
                   r->host, r->host, how);
}

/* REALM?service=..&scope=.. for the scopes wanted, or an error when the
 * challenge CH names no http(s) realm. */
static int
token_url (struct ib_registry *r, const struct ib_www_authenticate *ch, char **out, ib_error_t *err)
{
  if (ch->realm == NULL || (strncmp (ch->realm, "https://", 8) && strncmp (ch->realm, "http://", 7)))
    return ib_error (err, IB_EENV, "registry %s: its Bearer challenge names no http(s) realm", r->host);
  char *url = ib_xasprintf ("%s%sservice=", ch->realm, strchr (ch->realm, '?') ? "&" : "?");
  if (ch->service)
    {
      cleanup_free char *s = ib_url_escape (ch->service);
      char *next = ib_xasprintf ("%s%s", url, s);
      free (url);
      url = next;
    }
  for (size_t i = 0; i < r->auth.n_scopes; i++)
    {
      cleanup_free char *s = ib_url_escape (r->auth.scopes[i]);
      char *next = ib_xasprintf ("%s&scope=%s", url, s);
      free (url);
      url = next;
    }
  *out = url;
  return 0;
}

bool
ib_registry_auth_token_begin (struct ib_registry *r)
{
  /* The token no longer serves: refused, or a scope was added since. */
  drop_secret (&r->auth.bearer);
  bool was_basic = r->auth.use_basic;
  r->auth.use_basic = r->auth.basic != NULL;
  return was_basic;
}

void
ib_registry_auth_token_end (struct ib_registry *r, bool was_basic)
{
  r->auth.use_basic = was_basic;
}

int
ib_registry_auth_token_answer (struct ib_registry *r, long status, const char *body, size_t len, ib_error_t *err)
{
  if (status == 401 || status == 403)
    return credentials_refused (r, " at its token service", err);
  if (status != 200)
    return ib_error (err, IB_EENV, "registry %s: its token service answered HTTP %ld", r->host, status);
  /* A token the request's own challenge fetched is replaced, not leaked. */
  drop_secret (&r->auth.bearer);
  if ((r->auth.bearer = ib_token_response_parse (body, len)) == NULL)
    return ib_error (err, IB_EENV, "registry %s: its token service sent no token", r->host);
  return 0;
}

/* A Bearer challenge: its scopes join those wanted; a token refused again
 * for no new scope is a denial, else one is needed from the realm. */
static int
bearer_challenge (struct ib_registry *r, const struct ib_www_authenticate *ch, bool again, char **token,
                  ib_error_t *err)
{
  bool had_token = r->auth.bearer != NULL, grew = false;
  for (const char *p = ch->scope ? ch->scope : ""; *p;)
    {
      size_t n = strcspn (p, " ");
      if (n)
        grew |= want_scope (r, p, n);
      p += n + (p[n] == ' ');
    }
  if (!had_token || grew || !again)
    return token_url (r, ch, token, err);
  if (r->auth.basic)
    return ib_error (err, IB_EENV, "registry %s denied %s to the credentials for %s from `%s`", r->host,
                     ch->scope ? ch->scope : "access", r->host, r->auth.auth_file);
  return credentials_refused (r, "", err);
}

int
ib_registry_auth_challenge (struct ib_registry *r, const char *header, bool again, char **token, ib_error_t *err)
{
  struct ib_www_authenticate ch;
  ib_www_authenticate_parse (header, &ch);
  int rc = 0;
  *token = NULL;
  if (strcasecmp (ch.scheme, "Basic") == 0)
    {
      if (r->auth.basic == NULL || r->auth.use_basic)
        rc = credentials_refused (r, "", err);
      else
        r->auth.use_basic = true;
    }
  else if (strcasecmp (ch.scheme, "Bearer") == 0)
    rc = bearer_challenge (r, &ch, again, token, err);
  else
    rc = ib_error (err, IB_EENV, "registry %s asks for `%s` authentication, which imgbuild does not speak", r->host,
                   ch.scheme);
  ib_www_authenticate_clear (&ch);
  return rc;
}
