/* A registry's authentication (layers/registry/auth.c): the input is a
 * WWW-Authenticate header, then FUZZ_SEP and a token service's answer,
 * then FUZZ_SEP and an auth file (Docker's config.json) for host h:1.
 * The challenge is answered by the real code, which sends nothing (a
 * token it asks for is http.c's to fetch): the token service's answer is
 * taken as its reply.  No secret may reach a message or the token URL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/registry/auth.h"
#include "tests/fuzz/fuzz.h"

#define BEARER_MARK "bearer-4f0c1e9a7d"
#define BASIC_MARK "dXNlcjpzZWNyZXQtNGYwYw=="

/* TEXT (a message or a URL) names no secret the header does not. */
static void
check_secrets (const struct ib_registry *r, const char *header, const char *text, const char *what)
{
  /* The header itself is the registry's to quote. */
  if (r->auth.basic && strstr (text, r->auth.basic) && !strstr (header, r->auth.basic))
    fuzz_fail ("%s names the credentials: %s", what, text);
  if (r->auth.bearer && strstr (text, r->auth.bearer) && !strstr (header, r->auth.bearer))
    fuzz_fail ("%s names the token: %s", what, text);
}

static void
answer (struct ib_registry *r, const char *header, const char *token_answer)
{
  for (int again = 0; again < 2; again++)
    {
      char *url = NULL;
      ib_error_t err = NULL;
      if (ib_registry_auth_challenge (r, header, again, &url, &err) < 0)
        check_secrets (r, header, err->msg, "a message");
      else if (url)
        {
          check_secrets (r, header, url, "the token URL");
          ib_registry_auth_token_end (r, ib_registry_auth_token_begin (r));
          if (ib_registry_auth_token_answer (r, 200, token_answer, strlen (token_answer), &err) < 0)
            check_secrets (r, header, err->msg, "a message");
          else
            {
              /* The marker again, as below: a fuzzed token is short. */
              free (r->auth.bearer);
              r->auth.bearer = strdup (BEARER_MARK);
            }
        }
      free (url);
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
  answer (&r, parts[0], parts[1]);
  ib_registry_auth_clear (&r.auth);
  free (text);
  return 0;
}
