/* registry/: references, credentials, challenges (no network: the
 * integration suite talks to real registries). */
#include <stdlib.h>
#include <string.h>

#include "layers/registry/curl.h"
#include "layers/registry/auth.h"
#include "layers/transports/docker_client.h"
#include "layers/transports/refs.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

static void
check_ref (struct test_ctx *t, const char *text, const char *location, const char *name)
{
  struct ib_ref r;
  ib_error_t err = NULL;
  int rc = ib_ref_parse (text, &r, &err);
  CHECK (t, rc == 0);
  if (rc < 0)
    {
      fprintf (stderr, "  %s: %s\n", text, err->msg);
      ib_error_release (&err);
      return;
    }
  CHECK (t, r.kind == IB_REF_REGISTRY);
  CHECK_STR (t, r.location, location);
  CHECK_STR (t, r.name, name);
  ib_ref_clear (&r);
}

static void
check_bad_ref (struct test_ctx *t, const char *text, int class)
{
  struct ib_ref r;
  ib_error_t err = NULL;
  CHECK (t, ib_ref_parse (text, &r, &err) < 0);
  CHECK (t, err && err->class == class);
  ib_error_release (&err);
}

void
registry_references (struct test_ctx *t)
{
  check_ref (t, "docker://127.0.0.1:5000/dsv41-flash-b12x:local", "127.0.0.1:5000/dsv41-flash-b12x", "local");
  check_ref (t, "docker://localhost/a/b", "localhost/a/b", "latest");
  check_ref (t, "docker://registry.example.com/team/app@sha256:"
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
             "registry.example.com/team/app", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  /* Docker Hub's short names, completed as Docker does. */
  check_ref (t, "docker://busybox", "docker.io/library/busybox", "latest");
  check_ref (t, "docker://nvidia/cuda:13.0", "docker.io/nvidia/cuda", "13.0");
  check_bad_ref (t, "docker://127.0.0.1:5000/Upper:1", IB_EUSAGE);
  check_bad_ref (t, "docker://127.0.0.1:5000/a:bad/tag", IB_EUSAGE);
  check_bad_ref (t, "docker://127.0.0.1:5000/a:", IB_EUSAGE);
  check_bad_ref (t, "docker://127.0.0.1:5000/a@sha256:12", IB_EINTEGRITY);
  check_bad_ref (t, "docker://127.0.0.1:5000/", IB_EUSAGE);
}

static struct ib_registry *
fake_registry (const char *host)
{
  struct ib_registry *r = ib_xcalloc (1, sizeof (*r));
  r->host = ib_xstrdup (host);
  return r;
}

static void
free_fake (struct ib_registry *r)
{
  ib_registry_auth_clear (&r->auth);
  free (r->host);
  free (r);
}

void
registry_credentials_from_auth_files (struct test_ctx *t)
{
  const char *dir = test_tmpdir ();
  /* dXNlcjpwYXNz = user:pass */
  const char *file = test_write (dir, "config.json",
                                 "{\"auths\":{\"https://other:1/v1/\":{\"auth\":\"b3RoZXI6eA==\"},"
                                 "\"https://127.0.0.1:5000/v1/\":{\"auth\":\"dXNlcjpwYXNz\"}}}");
  struct ib_remote_options opt = { .auth_file = file };
  struct ib_registry *r = fake_registry ("127.0.0.1:5000");
  ib_error_t err = NULL;
  CHECK (t, ib_registry_auth_init (r, &opt, &err) == 0);
  CHECK_STR (t, r->auth.basic, "dXNlcjpwYXNz");
  CHECK_STR (t, r->auth.auth_file, file);
  /* Nothing is sent before the registry asks for Basic. */
  CHECK (t, ib_registry_auth_header (r) == NULL);
  /* Basic asked for: the header changes, and no token is needed. */
  char *url = NULL;
  CHECK (t, ib_registry_auth_challenge (r, "Basic realm=\"x\"", false, &url, &err) == 0 && url == NULL);
  cleanup_free char *h = ib_registry_auth_header (r);
  CHECK_STR (t, h, "Authorization: Basic dXNlcjpwYXNz");
  /* Refused once sent: the message names the registry and the file only. */
  CHECK (t, ib_registry_auth_challenge (r, "Basic realm=\"x\"", true, &url, &err) < 0);
  CHECK (t, err && strstr (err->msg, "refused the credentials for 127.0.0.1:5000") && !strstr (err->msg, "dXNl"));
  ib_error_release (&err);
  free_fake (r);

  /* A host with no entry: anonymous, and a clear message when asked. */
  r = fake_registry ("elsewhere:5000");
  CHECK (t, ib_registry_auth_init (r, &opt, &err) == 0 && r->auth.basic == NULL);
  CHECK (t, ib_registry_auth_challenge (r, "Basic realm=\"x\"", false, &url, &err) < 0);
  CHECK (t, err && strstr (err->msg, "asks for credentials and none are known"));
  ib_error_release (&err);
  free_fake (r);

  /* A damaged entry is an error, not a silent anonymous pull. */
  const char *bad = test_write (dir, "bad.json", "{\"auths\":{\"h:1\":{\"auth\":\"not base64!\"}}}");
  struct ib_remote_options bad_opt = { .auth_file = bad };
  r = fake_registry ("h:1");
  CHECK (t, ib_registry_auth_init (r, &bad_opt, &err) < 0);
  CHECK (t, err && strstr (err->msg, "not base64 of user:password") && !strstr (err->msg, "not base64!"));
  ib_error_release (&err);
  free_fake (r);
}

void
registry_bearer_scopes (struct test_ctx *t)
{
  struct ib_registry *r = fake_registry ("h:1");
  ib_registry_auth_want (r, "repository:app:pull,push");
  ib_registry_auth_want (r, "repository:app:pull,push");
  CHECK (t, r->auth.n_scopes == 1);
  /* A token in hand is dropped when a new scope is wanted (a mount needs
   * pull on the source repository): the next 401 fetches a wider one. */
  r->auth.bearer = ib_xstrdup ("tok");
  ib_registry_auth_want (r, "repository:base:pull");
  CHECK (t, r->auth.n_scopes == 2 && r->auth.bearer == NULL);
  /* A challenge without an http(s) realm is refused plainly. */
  char *url = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_registry_auth_challenge (r, "Bearer service=\"s\",scope=\"repository:x:pull\"", false, &url, &err) < 0);
  CHECK (t, url == NULL && err && strstr (err->msg, "names no http(s) realm"));
  CHECK (t, r->auth.n_scopes == 3);
  ib_error_release (&err);
  /* A token refused once may have expired: it is fetched again (here the
   * realm is missing, so the attempt shows as that error); refused twice
   * for the same scopes, it is a denial. */
  r->auth.bearer = ib_xstrdup ("tok");
  CHECK (t, ib_registry_auth_challenge (r, "Bearer service=\"s\",scope=\"repository:x:pull\"", false, &url, &err) < 0);
  CHECK (t, err && strstr (err->msg, "names no http(s) realm"));
  ib_error_release (&err);
  free (r->auth.bearer);
  r->auth.bearer = ib_xstrdup ("tok");
  CHECK (t, ib_registry_auth_challenge (r, "Bearer service=\"s\",scope=\"repository:x:pull\"", true, &url, &err) < 0);
  CHECK (t, err && strstr (err->msg, "asks for credentials") && !strstr (err->msg, "tok"));
  ib_error_release (&err);
  CHECK (t, ib_registry_auth_challenge (r, "Negotiate", false, &url, &err) < 0);
  CHECK (t, err && strstr (err->msg, "`Negotiate`"));
  ib_error_release (&err);
  free_fake (r);
}

/* A Bearer challenge with a realm: the URL of the token request (every
 * scope wanted, escaped), then the token service's answers as auth.c
 * takes them; the request itself is http.c's. */
void
registry_token_request (struct test_ctx *t)
{
  struct ib_registry *r = fake_registry ("h:1");
  r->auth.basic = ib_xstrdup ("dXNlcjpwYXNz");
  r->auth.auth_file = ib_xstrdup ("/a/config.json");
  ib_registry_auth_want (r, "repository:app:pull,push");
  r->auth.bearer = ib_xstrdup ("tok");
  char *url = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_registry_auth_challenge (r, "Bearer realm=\"https://auth.example/token?a=1\",service=\"reg svc\","
                                           "scope=\"repository:base:pull\"",
                                        false, &url, &err) == 0);
  CHECK_STR (t, url, "https://auth.example/token?a=1&service=reg%20svc&scope=repository%3Aapp%3Apull%2Cpush"
                     "&scope=repository%3Abase%3Apull");
  free (url);
  /* The token service gets the credentials and no token; Basic goes back
   * to what it was once the request is done. */
  bool was_basic = ib_registry_auth_token_begin (r);
  CHECK (t, !was_basic && r->auth.bearer == NULL);
  cleanup_free char *h = ib_registry_auth_header (r);
  CHECK_STR (t, h, "Authorization: Basic dXNlcjpwYXNz");
  ib_registry_auth_token_end (r, was_basic);
  CHECK (t, !r->auth.use_basic);
  static const struct
  {
    long status;
    const char *body, *why;
  } bad[] = {
    { 401, "", "refused the credentials for h:1 from `/a/config.json` at its token service" },
    { 500, "", "its token service answered HTTP 500" },
    { 200, "{\"token\":\"\"}", "its token service sent no token" },
  };
  for (size_t i = 0; i < sizeof (bad) / sizeof (*bad); i++)
    {
      CHECK (t, ib_registry_auth_token_answer (r, bad[i].status, bad[i].body, strlen (bad[i].body), &err) < 0);
      CHECK (t, err && strstr (err->msg, bad[i].why) && !strstr (err->msg, "dXNl"));
      ib_error_release (&err);
    }
  const char *ok = "{\"access_token\":\"t0k\"}";
  CHECK (t, ib_registry_auth_token_answer (r, 200, ok, strlen (ok), &err) == 0);
  CHECK_STR (t, r->auth.bearer, "t0k");
  free_fake (r);
}

/* Docker's host syntax for --load and imgverify --host. */
void
docker_host_syntax (struct test_ctx *t)
{
  static const char *good[] = { "ssh://spark-2", "ssh://ci@spark-2", "ssh://ci@10.0.0.2:2222", "ssh://[::1]:22",
                                "ssh://[fe80::1]", "unix:///var/run/docker.sock" };
  static const struct
  {
    const char *host, *why;
  } bad[] = {
    { "tcp://10.0.0.2:2375", "tcp:// is not supported" },
    { "ssh://", "no host" },
    { "ssh://@h", "empty user" },
    { "ssh://h:", "bad port" },
    { "ssh://h:0", "bad port" },
    { "ssh://h:70000", "bad port" },
    { "ssh://h:22x", "bad port" },
    { "ssh://h/path", "no path" },
    { "ssh://-oProxyCommand=x", "may not start with `-`" },
    { "ssh://-l@h", "may not start with `-`" },
    { "unix://relative", "must be absolute" },
    { "spark-2", "unknown scheme" },
  };
  for (size_t i = 0; i < sizeof (good) / sizeof (*good); i++)
    {
      ib_error_t err = NULL;
      int r = ib_docker_host_check (good[i], &err);
      CHECK (t, r == 0);
      if (r < 0)
        fprintf (stderr, "  %s: %s\n", good[i], err->msg);
      ib_error_release (&err);
    }
  for (size_t i = 0; i < sizeof (bad) / sizeof (*bad); i++)
    {
      ib_error_t err = NULL;
      CHECK (t, ib_docker_host_check (bad[i].host, &err) < 0);
      CHECK (t, err && err->class == IB_EUSAGE && strstr (err->msg, bad[i].why));
      if (err && !strstr (err->msg, bad[i].why))
        fprintf (stderr, "  %s: %s\n", bad[i].host, err->msg);
      ib_error_release (&err);
    }
}

/* layers/registry/curl.c: libcurl loaded per handle; what is not libcurl is
 * refused with why, and each setter refuses an option of another type. */
void
curl_loaded_per_handle_and_typed (struct test_ctx *t)
{
  struct ib_curl *c = NULL;
  ib_error_t err = NULL;
  CHECK (t, ib_curl_open ("/nonexistent/libcurl.so.4", &c, &err) < 0);
  CHECK (t, c == NULL);
  CHECK (t, err && err->class == IB_EENV && strstr (err->msg, "cannot open") && strstr (err->msg, "libcurl4"));
  ib_error_release (&err);
  CHECK (t, ib_curl_open ("libz.so.1", &c, &err) < 0);
  CHECK (t, err && err->class == IB_EENV && strstr (err->msg, "libz.so.1 has no curl_version_info"));
  ib_error_release (&err);

  struct ib_curl *a = NULL, *b = NULL;
  CHECK (t, ib_curl_open (NULL, &a, &err) == 0);
  CHECK (t, ib_curl_open (NULL, &b, &err) == 0);
  if (a == NULL || b == NULL)
    {
      fprintf (stderr, "  %s\n", err ? err->msg : "?");
      ib_error_release (&err);
      ib_curl_free (a);
      ib_curl_free (b);
      return;
    }
  CHECK (t, ib_curl_set_long (a, CURLOPT_NOSIGNAL, 1L) == CURLE_OK);
  CHECK (t, ib_curl_set_long (a, CURLOPT_URL, 1L) == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_set_ptr (a, CURLOPT_URL, "http://127.0.0.1:1/") == CURLE_OK);
  CHECK (t, ib_curl_set_ptr (a, CURLOPT_NOSIGNAL, "1") == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_set_ptr (a, CURLOPT_WRITEFUNCTION, "f") == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_set_off (a, CURLOPT_INFILESIZE_LARGE, 7) == CURLE_OK);
  CHECK (t, ib_curl_set_off (a, CURLOPT_INFILESIZE, 7) == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_set_data_fn (a, CURLOPT_XFERINFOFUNCTION, NULL) == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_set_data_fn (a, CURLOPT_WRITEFUNCTION, NULL) == CURLE_OK);
  long code = -1;
  curl_off_t up = -1;
  CHECK (t, ib_curl_info_long (b, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 0);
  CHECK (t, ib_curl_info_long (b, CURLINFO_SIZE_UPLOAD_T, &code) == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK (t, ib_curl_info_off (b, CURLINFO_SIZE_UPLOAD_T, &up) == CURLE_OK && up == 0);
  CHECK (t, ib_curl_info_off (b, CURLINFO_RESPONSE_CODE, &up) == CURLE_BAD_FUNCTION_ARGUMENT);
  CHECK_STR (t, ib_curl_strerror (a, CURLE_BAD_FUNCTION_ARGUMENT), "A libcurl function was given a bad argument");
  struct curl_slist *l = ib_curl_slist_append (a, NULL, "Expect:");
  CHECK (t, l && strcmp (l->data, "Expect:") == 0);
  ib_curl_slist_free_all (a, l);
  ib_curl_free (a);
  ib_curl_free (b);

  cleanup_free char *e = ib_url_escape ("repository:a/b:pull,push ~_.-\xc3\xa9");
  CHECK_STR (t, e, "repository%3Aa%2Fb%3Apull%2Cpush%20~_.-%C3%A9");
}
