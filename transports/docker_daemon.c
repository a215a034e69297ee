/* docker-daemon:NAME:TAG — the local Docker Engine, through its API on the
 * unix socket ($DOCKER_HOST as unix://PATH, else /var/run/docker.sock).
 * Reading asks for `GET /images/NAME/get` (a docker save archive) and reads
 * it with the docker-archive reader.  Writing (`imgbuild --load`) sends
 * `POST /images/load` an archive without the leading layers the daemon
 * already has: docker load finds those by chain ID, so a thin image over a
 * 20 GB base costs the daemon its new layers only. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/fsutil.h"
#include "transports.h"

#define API "http://docker/v1.41"

char *
ib_docker_socket_path (void)
{
  const char *host = getenv ("DOCKER_HOST");
  if (host && strncmp (host, "unix://", 7) == 0)
    return ib_xstrdup (host + 7);
  return ib_xstrdup ("/var/run/docker.sock");
}

struct sink
{
  FILE *file;       /* the response goes here, or */
  char *buf;        /* here, for small ones */
  size_t len;
};

static size_t
on_data (char *p, size_t size, size_t n, void *data)
{
  struct sink *k = data;
  size_t len = size * n;
  if (k->file)
    return fwrite (p, 1, len, k->file);
  if (k->len + len > (64u << 20))
    return 0;
  ib_xappend (&k->buf, &k->len, p, len);
  return len;
}

/* One request.  UPLOAD, when not NULL, is the file sent as the body. */
static int
request (const char *path, const char *upload, struct sink *k, long *status, ib_error_t *err)
{
  cleanup_free char *sock = ib_docker_socket_path ();
  cleanup_free char *url = ib_xasprintf ("%s%s", API, path);
  CURL *c = curl_easy_init ();
  if (c == NULL)
    return ib_error (err, IB_EENV, "curl_easy_init failed");
  curl_easy_setopt (c, CURLOPT_UNIX_SOCKET_PATH, sock);
  curl_easy_setopt (c, CURLOPT_URL, url);
  curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt (c, CURLOPT_WRITEDATA, k);
  struct curl_slist *headers = NULL;
  FILE *body = NULL;
  if (upload)
    {
      struct stat st;
      body = fopen (upload, "rb");
      if (body == NULL || fstat (fileno (body), &st) < 0)
        {
          curl_easy_cleanup (c);
          return ib_error_errno (err, errno, IB_EENV, "open `%s`", upload);
        }
      headers = curl_slist_append (headers, "Content-Type: application/x-tar");
      curl_easy_setopt (c, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt (c, CURLOPT_POST, 1L);
      curl_easy_setopt (c, CURLOPT_READDATA, body);
      curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) st.st_size);
    }
  CURLcode r = curl_easy_perform (c);
  curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all (headers);
  if (body)
    fclose (body);
  curl_easy_cleanup (c);
  if (r != CURLE_OK)
    return ib_error (err, IB_EENV, "Docker Engine at %s: %s", sock, curl_easy_strerror (r));
  return 0;
}

static int
get_json (const char *path, cJSON **out, ib_error_t *err)
{
  struct sink k = { 0 };
  long status = 0;
  if (request (path, NULL, &k, &status, err) < 0)
    return -1;
  cleanup_free char *buf = k.buf;
  if (status != 200)
    return ib_error (err, status == 404 ? IB_ENOTFOUND : IB_EENV, "Docker Engine: GET %s: HTTP %ld: %s", path,
                     status, buf ? buf : "");
  *out = cJSON_Parse (buf ? buf : "");
  return *out ? 0 : ib_error (err, IB_EENV, "Docker Engine: GET %s: not JSON", path);
}

static char *
escape (const char *s)
{
  CURL *c = curl_easy_init ();
  char *e = curl_easy_escape (c, s, 0);
  char *out = ib_xstrdup (e ? e : s);
  curl_free (e);
  curl_easy_cleanup (c);
  return out;
}

static int
daemon_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
             struct ib_descriptor *manifest, ib_error_t *err)
{
  (void) platform;
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "tmp", &dir, err) < 0)
    return -1;
  cleanup_free char *tmp = ib_path_join (dir, "daemon-XXXXXX");
  int fd = mkostemp (tmp, O_CLOEXEC);
  if (fd < 0)
    return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
  struct sink k = { .file = fdopen (fd, "wb") };
  cleanup_free char *name = escape (ref->location);
  cleanup_free char *path = ib_xasprintf ("/images/%s/get", name);
  long status = 0;
  int r = request (path, NULL, &k, &status, err);
  fclose (k.file);
  if (r == 0 && status != 200)
    r = ib_error (err, status == 404 ? IB_ENOTFOUND : IB_EENV, "Docker Engine has no image `%s` (HTTP %ld)",
                  ref->location, status);
  if (r == 0)
    {
      struct ib_ref archive = { .kind = IB_REF_DOCKER_ARCHIVE, .location = tmp };
      r = ib_docker_archive_read (s, &archive, manifest, err);
    }
  unlink (tmp);
  return r;
}

/* How many leading layers of IMG some image of the daemon has (same
 * diff_ids from the bottom: the same chain IDs). */
static size_t
layers_in_daemon (const struct ib_image *img)
{
  cJSON *list = NULL;
  size_t best = 0;
  if (get_json ("/images/json", &list, NULL) < 0)
    return 0;
  const cJSON *e;
  cJSON_ArrayForEach (e, list)
  {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive (e, "Id");
    cJSON *info = NULL;
    cleanup_free char *path = cJSON_IsString (id) ? ib_xasprintf ("/images/%s/json", id->valuestring) : NULL;
    if (path == NULL || get_json (path, &info, NULL) < 0)
      continue;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (info, "RootFS"), "Layers");
    size_t n = 0;
    const cJSON *l;
    cJSON_ArrayForEach (l, layers)
    {
      if (n < img->n_layers && cJSON_IsString (l) && strcmp (l->valuestring, img->diff_ids[n].s) == 0)
        n++;
      else
        break;
    }
    best = n > best ? n : best;
    cJSON_Delete (info);
  }
  cJSON_Delete (list);
  return best;
}

static int
daemon_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
             ib_error_t *err)
{
  (void) name;
  size_t have = layers_in_daemon (img);
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "tmp", &dir, err) < 0)
    return -1;
  cleanup_free char *tmp = ib_path_join (dir, "load.tar");
  if (ib_docker_archive_write (s, img, tmp, ref->location, have, err) < 0)
    return -1;
  struct stat st;
  stat (tmp, &st);
  struct sink k = { 0 };
  long status = 0;
  int r = request ("/images/load?quiet=1", tmp, &k, &status, err);
  cleanup_free char *resp = k.buf;
  if (r == 0 && (status != 200 || (resp && strstr (resp, "\"errorDetail\""))))
    r = ib_error (err, IB_EENV, "Docker Engine refused the image (HTTP %ld): %s", status, resp ? resp : "");
  if (r == 0)
    ib_transport_note (ref, "docker load: sent %lld bytes; %zu of %zu layers were already in the daemon",
             (long long) st.st_size, have, img->n_layers);
  unlink (tmp);
  return r;
}

const struct ib_transport ib_transport_docker_daemon = { "docker-daemon:", daemon_pull, daemon_push };
