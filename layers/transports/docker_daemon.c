/* docker-daemon:NAME:TAG — a Docker Engine, through its API (on this
 * machine's socket, or on a node over SSH: docker_client.h).  Reading asks
 * for `GET /images/NAME/get` (a docker save archive) and reads it with the
 * docker-archive reader.  Writing (`imgbuild --load`) streams
 * `POST /images/load` an archive without the leading layers the daemon
 * already has: docker load finds those by chain ID, so a thin image over a
 * 20 GB base costs the daemon its new layers only. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "layers/registry/curl.h"
#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/transports/docker_client.h"
#include "layers/transports/transports.h"

char *
ib_docker_socket_path (void)
{
  const char *host = getenv ("DOCKER_HOST");
  if (host && strncmp (host, "unix://", 7) == 0)
    return ib_xstrdup (host + 7);
  return ib_xstrdup ("/var/run/docker.sock");
}

static const char *
docker_host_of (const struct ib_ref *ref)
{
  return ref->remote ? ref->remote->docker_host : NULL;
}

static int
daemon_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
             struct ib_descriptor *manifest, ib_error_t *err)
{
  (void) platform;
  cleanup_free char *dir = NULL;
  if (ib_store_cache_dir (s, "tmp", &dir, err) < 0)
    return -1;
  struct ib_docker *d = NULL;
  if (ib_docker_open (docker_host_of (ref), &d, err) < 0)
    return -1;
  cleanup_free char *tmp = ib_path_join (dir, "daemon-XXXXXX");
  int fd = mkostemp (tmp, O_CLOEXEC);
  if (fd < 0)
    {
      ib_docker_free (d);
      return ib_error_errno (err, errno, IB_EENV, "create `%s`", tmp);
    }
  cleanup_free char *name = ib_url_escape (ref->location);
  cleanup_free char *path = ib_xasprintf ("/images/%s/get", name);
  long status = 0;
  int r = ib_docker_get (d, path, fd, NULL, &status, err);
  close (fd);
  if (r == 0 && status != 200)
    r = ib_error (err, status == 404 ? IB_ENOTFOUND : IB_EENV, "Docker Engine%s%s has no image `%s` (HTTP %ld)",
                  docker_host_of (ref) ? " at " : "", docker_host_of (ref) ? ib_docker_host (d) : "",
                  ref->location, status);
  ib_docker_free (d);
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
static int
layers_in_daemon (struct ib_docker *d, const struct ib_image *img, size_t *out, ib_error_t *err)
{
  cJSON *list = NULL;
  size_t best = 0;
  if (ib_docker_get_json (d, "/images/json", &list, err) < 0)
    return -1;
  const cJSON *e;
  cJSON_ArrayForEach (e, list)
  {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive (e, "Id");
    cJSON *info = NULL;
    cleanup_free char *path = cJSON_IsString (id) ? ib_xasprintf ("/images/%s/json", id->valuestring) : NULL;
    if (path == NULL || ib_docker_get_json (d, path, &info, NULL) < 0)
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
  *out = best;
  return 0;
}

/* The image ID the daemon has under REF (a name or an ID): IB_ENOTFOUND
 * when none. */
static int
image_id (struct ib_docker *d, const char *ref, ib_digest *out, ib_error_t *err)
{
  cleanup_free char *e = ib_url_escape (ref);
  cleanup_free char *path = ib_xasprintf ("/images/%s/json", e);
  cJSON *info = NULL;
  if (ib_docker_get_json (d, path, &info, err) < 0)
    return -1;
  const cJSON *id = cJSON_GetObjectItemCaseSensitive (info, "Id");
  int r = cJSON_IsString (id) && strlen (id->valuestring) < sizeof (out->s)
              ? 0
              : ib_error (err, IB_EENV, "Docker Engine at %s: image `%s` has no Id", ib_docker_host (d), ref);
  if (r == 0)
    strcpy (out->s, id->valuestring);
  cJSON_Delete (info);
  return r;
}

/* The daemon has our image under another name (or none): name it. */
static int
tag_image (struct ib_docker *d, const struct ib_image *img, const char *name, ib_error_t *err)
{
  const char *colon = strrchr (name, ':');
  cleanup_free char *bare = colon ? strndup (name, (size_t) (colon - name)) : ib_xstrdup (name);
  cleanup_free char *repo = ib_url_escape (bare);
  cleanup_free char *path = ib_xasprintf ("/images/%s/tag?repo=%s&tag=%s", img->config.digest.s, repo,
                                          colon ? colon + 1 : "latest");
  long status = 0;
  if (ib_docker_post_empty (d, path, &status, err) < 0)
    return -1;
  if (status != 201 && status != 200)
    return ib_error (err, IB_EENV, "Docker Engine at %s: tag %s: HTTP %ld", ib_docker_host (d), name, status);
  return 0;
}

/* The archive goes through a socketpair: a thread writes it (libarchive
 * pushes), curl reads the other end (it pulls). */
struct stream
{
  struct ib_store *s;
  const struct ib_image *img;
  const char *name;
  size_t skip;
  int fds[2]; /* [0] curl reads, [1] the writer writes */
  ib_error_t err;
  int r;
  uint64_t sent;
  const struct ib_transfer_report *progress;
  void *bar;
};

static int
send_all (void *data, const void *buf, size_t len, ib_error_t *err)
{
  struct stream *st = data;
  const char *p = buf;
  while (len > 0)
    {
      /* MSG_NOSIGNAL: a load that failed closed the other end. */
      ssize_t n = send (st->fds[1], p, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ib_error_errno (err, errno, IB_EENV, "send the archive");
      p += n;
      len -= (size_t) n;
    }
  return 0;
}

static void *
writer (void *data)
{
  struct stream *st = data;
  st->r = ib_docker_archive_stream (st->s, st->img, st->name, st->skip, send_all, st, &st->err);
  close (st->fds[1]);
  st->fds[1] = -1;
  return NULL;
}

static long
read_archive (void *data, char *buf, size_t n)
{
  struct stream *st = data;
  ssize_t got;
  do
    got = read (st->fds[0], buf, n);
  while (got < 0 && errno == EINTR);
  if (got > 0)
    {
      st->sent += (uint64_t) got;
      if (st->progress && st->progress->add)
        st->progress->add (st->bar, (uint64_t) got);
    }
  return got;
}

static int
send_layers (struct ib_docker *d, struct stream *st, ib_error_t *err)
{
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, st->fds) < 0)
    return ib_error_errno (err, errno, IB_EENV, "socketpair");
  pthread_t t;
  if (pthread_create (&t, NULL, writer, st) != 0)
    {
      close (st->fds[0]);
      close (st->fds[1]);
      return ib_error (err, IB_EENV, "cannot start a thread");
    }
  cleanup_free char *resp = NULL;
  long status = 0;
  int r = ib_docker_post (d, "/images/load?quiet=1", "application/x-tar", read_archive, st, &resp, &status, err);
  close (st->fds[0]); /* a writer still sending gets EPIPE */
  pthread_join (t, NULL);
  if (st->r < 0)
    {
      /* What stopped the archive, not the daemon's view of a short one. */
      ib_error_release (err);
      *err = st->err;
      return -1;
    }
  if (r == 0 && (status != 200 || (resp && strstr (resp, "\"errorDetail\""))))
    r = ib_error (err, IB_EENV, "Docker Engine at %s refused the image (HTTP %ld): %s", ib_docker_host (d), status,
                  resp ? resp : "");
  return r;
}

static uint64_t
bytes_to_send (const struct ib_image *img, size_t skip)
{
  uint64_t total = img->config.size + img->manifest.size;
  for (size_t i = skip; i < img->n_layers; i++)
    total += img->layers[i].size;
  return total;
}

static int
load (struct ib_docker *d, struct ib_store *s, const struct ib_image *img, const char *name,
      const struct ib_transfer_report *progress, struct ib_docker_load_result *out, ib_error_t *err)
{
  out->n_layers = img->n_layers;
  ib_digest have = { { 0 } };
  ib_error_t e = NULL;
  if (image_id (d, img->config.digest.s, &have, &e) == 0)
    {
      out->had_image = true;
      out->present = img->n_layers;
    }
  else if (e->class != IB_ENOTFOUND)
    {
      *err = e;
      return -1;
    }
  ib_error_release (&e);
  if (!out->had_image)
    {
      if (layers_in_daemon (d, img, &out->present, err) < 0)
        return -1;
      struct stream st = { .s = s, .img = img, .name = name, .skip = out->present, .progress = progress };
      if (progress && progress->start)
        st.bar = progress->start (progress->data, ib_docker_host (d), bytes_to_send (img, out->present));
      int r = send_layers (d, &st, err);
      if (progress && progress->end)
        progress->end (st.bar);
      out->archive = st.sent;
      if (r < 0)
        return -1;
    }
  if (out->had_image && tag_image (d, img, name, err) < 0)
    return -1;
  if (image_id (d, name, &out->image_id, err) < 0)
    return -1;
  if (strcmp (out->image_id.s, img->config.digest.s) != 0)
    return ib_error (err, IB_EINTEGRITY, "Docker Engine at %s: `%s` is %s after the load, not our image %s",
                     ib_docker_host (d), name, out->image_id.s, img->config.digest.s);
  return 0;
}

int
ib_docker_load (struct ib_store *s, const struct ib_image *img, const char *name, const char *host,
                const struct ib_transfer_report *progress, struct ib_docker_load_result *out, ib_error_t *err)
{
  *out = (struct ib_docker_load_result) { 0 };
  struct ib_docker *d = NULL;
  if (ib_docker_open (host, &d, err) < 0)
    return -1;
  int r = load (d, s, img, name, progress, out, err);
  out->bytes_up = ib_docker_bytes_up (d);
  ib_docker_free (d);
  return r;
}

static int
daemon_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
             ib_error_t *err)
{
  (void) name;
  struct ib_docker_load_result res;
  if (ib_docker_load (s, img, ref->location, docker_host_of (ref), NULL, &res, err) < 0)
    return -1;
  ib_transport_note (ref, "docker load: sent %llu bytes; %zu of %zu layers were already in the daemon%s",
                     (unsigned long long) res.archive, res.present, res.n_layers,
                     res.had_image ? " (it had the image: tagged only)" : "");
  return 0;
}

const struct ib_transport ib_transport_docker_daemon = { "docker-daemon:", daemon_pull, daemon_push };
