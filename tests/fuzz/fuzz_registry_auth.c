/* A registry's authentication (layers/registry_auth.c): the input is a
 * WWW-Authenticate header, then FUZZ_SEP and a token service's answer,
 * then FUZZ_SEP and an auth file (Docker's config.json) for host h:1.
 * The challenge is answered by the real code unless it names an http(s)
 * realm (that would need a token service); no secret may reach a
 * message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../registry/http.h"
#include "fuzz.h"

#define BEARER_MARK "bearer-4f0c1e9a7d"
#define BASIC_MARK "dXNlcjpzZWNyZXQtNGYwYw=="

static void
answer (struct ib_registry *r, const char *header)
{
  struct ib_www_authenticate ch;
  ib_www_authenticate_parse (header, &ch);
  bool network = ch.realm && (strncmp (ch.realm, "https://", 8) == 0 || strncmp (ch.realm, "http://", 7) == 0);
  ib_www_authenticate_clear (&ch);
  if (network)
    return;
  for (int again = 0; again < 2; again++)
    {
      bool retry;
      ib_error_t err = NULL;
      if (ib_registry_auth_challenge (r, header, again, &retry, &err) < 0)
        {
          /* The header itself is the registry's to quote. */
          if (r->auth.basic && strstr (err->msg, r->auth.basic) && !strstr (header, r->auth.basic))
            fuzz_fail ("a message names the credentials: %s", err->msg);
          if (r->auth.bearer && strstr (err->msg, r->auth.bearer) && !strstr (header, r->auth.bearer))
            fuzz_fail ("a message names the token: %s", err->msg);
        }
      ib_error_release (&err);
      free (ib_registry_auth_header (r));
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_text (data, size);
  char *parts[3];
  fuzz_split (text, parts, 3);
  char *token = ib_token_response_parse (parts[1], strlen (parts[1]));
  if (token && (token[0] == '\0' || strpbrk (token, "\r\n ")))
    fuzz_fail ("a token that would break the header: `%s`", token);
  fuzz_write ("config.json", parts[2], strlen (parts[2]));
  char file[4096];
  snprintf (file, sizeof (file), "%s/config.json", fuzz_scratch ());
  struct ib_remote_options opt = { .auth_file = file };
  struct ib_registry r = { .host = "h:1" };
  ib_error_t err = NULL;
  ib_registry_auth_init (&r, &opt, &err);
  ib_error_release (&err);
  /* Markers stand for the secrets in the messages' check: a fuzzed token
   * of a few bytes is found by chance in any text. */
  r.auth.bearer = token ? strdup (BEARER_MARK) : NULL;
  free (token);
  if (r.auth.basic)
    {
      free (r.auth.basic);
      r.auth.basic = strdup (BASIC_MARK);
    }
  answer (&r, parts[0]);
  ib_registry_auth_clear (&r.auth);
  free (text);
  return 0;
}
