/* The Docker Engine API over a unix socket or an SSH session (see
 * docker_client.h).  For ssh:// hosts curl connects to a private unix
 * socket of ours, and each connection it opens there becomes the
 * stdin and stdout of `ssh HOST docker system dial-stdio`: the docker CLI
 * reaches an ssh:// host the same way, so a node needs nothing that the
 * docker CLI does not need. */
#include "layers/transports/docker_client.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layers/registry/curl.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

extern char **environ;

#define API "http://docker/v1.41"
#define MAX_BODY (64u << 20)

struct ib_docker
{
  char *text;   /* as the user wrote it */
  char *socket; /* unix: the path; ssh: NULL */
  char *user, *host, *port; /* ssh: user and port may be NULL */
  struct ib_curl *curl;
  pid_t *pids;  /* ssh processes started, reaped at the end */
  size_t n_pids;
  int ssh_err;  /* the last ssh's stderr (a memfd) */
  int listen_fd; /* ssh: curl connects here, ssh gets the other end */
  char *sock_dir, *sock_path; /* ... its folder and path */
  uint64_t up;
  char curl_err[CURL_ERROR_SIZE];
};

static int
bad_host (const char *host, const char *why, ib_error_t *err)
{
  return ib_error (err, IB_EUSAGE, "Docker host `%s`: %s (unix:///PATH or ssh://[USER@]HOST[:PORT])", host, why);
}

/* ssh://[USER@]HOST[:PORT] into D's user, host and port. */
static int
parse_ssh (const char *text, struct ib_docker *d, ib_error_t *err)
{
  const char *s = text + 6;
  const char *at = strchr (s, '@');
  if (strchr (s, '/') || strchr (s, '?'))
    return bad_host (text, "an ssh:// host has no path", err);
  if (at)
    {
      if (at == s)
        return bad_host (text, "empty user", err);
      d->user = strndup (s, (size_t) (at - s));
      s = at + 1;
    }
  const char *end = s[0] == '[' ? strchr (s, ']') : NULL;
  const char *colon = strrchr (end ? end : s, ':');
  size_t hlen = colon ? (size_t) (colon - s) : strlen (s);
  if (end)
    {
      s++;
      hlen = (size_t) (end - s);
    }
  if (hlen == 0)
    return bad_host (text, "no host", err);
  d->host = strndup (s, hlen);
  if (colon)
    {
      char *e = NULL;
      long port = strtol (colon + 1, &e, 10);
      if (colon[1] == '\0' || *e || port < 1 || port > 65535)
        return bad_host (text, "bad port", err);
      d->port = ib_xstrdup (colon + 1);
    }
  if (d->host[0] == '-' || (d->user && d->user[0] == '-'))
    return bad_host (text, "a host or user may not start with `-`", err);
  return 0;
}

static int
parse_host (const char *text, struct ib_docker *d, ib_error_t *err)
{
  if (strncmp (text, "unix://", 7) == 0)
    {
      if (text[7] != '/')
        return bad_host (text, "the socket path must be absolute", err);
      d->socket = ib_xstrdup (text + 7);
      return 0;
    }
  if (strncmp (text, "ssh://", 6) == 0)
    return parse_ssh (text, d, err);
  if (strncmp (text, "tcp://", 6) == 0)
    return bad_host (text, "tcp:// is not supported (the API unencrypted on the network); use ssh://", err);
  return bad_host (text, "unknown scheme", err);
}

/* ssh HOST docker system dial-stdio, its stdin and stdout FD. */
static int
spawn_ssh (struct ib_docker *d, int fd)
{
  if (lseek (d->ssh_err, 0, SEEK_SET) < 0 || ftruncate (d->ssh_err, 0) < 0)
    return -1;
  const char *argv[16];
  int n = 0;
  argv[n++] = "ssh";
  argv[n++] = "-o";
  argv[n++] = "BatchMode=yes";
  argv[n++] = "-o";
  argv[n++] = "ConnectTimeout=30";
  argv[n++] = "-T";
  if (d->user)
    {
      argv[n++] = "-l";
      argv[n++] = d->user;
    }
  if (d->port)
    {
      argv[n++] = "-p";
      argv[n++] = d->port;
    }
  argv[n++] = "--";
  argv[n++] = d->host;
  argv[n++] = "docker";
  argv[n++] = "system";
  argv[n++] = "dial-stdio";
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, fd, 0);
  posix_spawn_file_actions_adddup2 (&fa, fd, 1);
  posix_spawn_file_actions_adddup2 (&fa, d->ssh_err, 2);
  pid_t pid;
  int r = posix_spawnp (&pid, "ssh", &fa, NULL, (char *const *) argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  if (r != 0)
    {
      dprintf (d->ssh_err, "cannot run ssh: %s\n", strerror (r));
      return -1;
    }
  d->pids = ib_xrealloc (d->pids, (d->n_pids + 1) * sizeof (*d->pids));
  d->pids[d->n_pids++] = pid;
  return 0;
}

/* curl connected to our listening socket: a new connection waits there
 * (none when curl reuses one), and ssh gets its other end.  A connection
 * from another process is dropped. */
static int
on_connected (void *data, char *ip, char *local_ip, int port, int local_port)
{
  (void) ip;
  (void) local_ip;
  (void) port;
  (void) local_port;
  struct ib_docker *d = data;
  for (;;)
    {
      int fd = accept4 (d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0)
        return CURL_PREREQFUNC_OK;
      struct ucred cred;
      socklen_t len = sizeof (cred);
      if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != getpid ())
        {
          close (fd);
          continue;
        }
      int r = spawn_ssh (d, fd);
      close (fd);
      return r < 0 ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
    }
}

/* The unix socket curl connects to for an ssh:// host, in a folder of
 * our own (0700) under $TMPDIR.  (curl 7.88 ignores
 * CURL_SOCKOPT_ALREADY_CONNECTED, so a socketpair handed to it cannot be
 * used; and it never reuses a connection to an abstract socket.)  Each
 * connection curl opens there becomes one ssh session. */
static int
listen_ssh (struct ib_docker *d, ib_error_t *err)
{
  const char *tmp = getenv ("TMPDIR");
  d->sock_dir = ib_xasprintf ("%s/imgbuild-ssh-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp (d->sock_dir) == NULL)
    {
      free (d->sock_dir);
      d->sock_dir = NULL;
      return ib_error_errno (err, errno, IB_EENV, "create a folder under %s", tmp && *tmp ? tmp : "/tmp");
    }
  d->sock_path = ib_path_join (d->sock_dir, "s");
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  if (strlen (d->sock_path) >= sizeof (sa.sun_path))
    return ib_error (err, IB_EENV, "socket path `%s` is too long ($TMPDIR)", d->sock_path);
  strcpy (sa.sun_path, d->sock_path);
  d->listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (d->listen_fd < 0 || bind (d->listen_fd, (struct sockaddr *) &sa, sizeof (sa)) < 0 || listen (d->listen_fd, 8) < 0)
    return ib_error_errno (err, errno, IB_EENV, "listen on `%s`", d->sock_path);
  return 0;
}

void
ib_docker_free (struct ib_docker *d)
{
  if (d == NULL)
    return;
  if (d->curl)
    ib_curl_free (d->curl); /* closes the socket: ssh sees its end */
  /* Done with the node: as the docker CLI does, end the ssh sessions
   * (the remote dial-stdio may wait for the daemon to close its side). */
  for (size_t i = 0; i < d->n_pids; i++)
    {
      kill (d->pids[i], SIGTERM);
      waitpid (d->pids[i], NULL, 0);
    }
  if (d->ssh_err >= 0)
    close (d->ssh_err);
  if (d->listen_fd >= 0)
    close (d->listen_fd);
  if (d->sock_path)
    unlink (d->sock_path);
  if (d->sock_dir)
    rmdir (d->sock_dir);
  free (d->sock_path);
  free (d->sock_dir);
  free (d->pids);
  free (d->text);
  free (d->socket);
  free (d->user);
  free (d->host);
  free (d->port);
  free (d);
}

int
ib_docker_host_check (const char *host, ib_error_t *err)
{
  struct ib_docker *d = ib_xcalloc (1, sizeof (*d));
  d->ssh_err = d->listen_fd = -1;
  int r = parse_host (host, d, err);
  ib_docker_free (d);
  return r;
}

int
ib_docker_open (const char *host, struct ib_docker **out, ib_error_t *err)
{
  const char *env = getenv ("DOCKER_HOST");
  if (host == NULL || *host == '\0')
    host = env && *env ? env : "unix:///var/run/docker.sock";
  struct ib_docker *d = ib_xcalloc (1, sizeof (*d));
  d->ssh_err = d->listen_fd = -1;
  d->text = ib_xstrdup (host);
  if (parse_host (host, d, err) < 0)
    {
      ib_docker_free (d);
      return -1;
    }
  if (d->host && (d->ssh_err = memfd_create ("ssh-stderr", MFD_CLOEXEC)) < 0)
    {
      ib_docker_free (d);
      return ib_error_errno (err, errno, IB_EENV, "memfd_create");
    }
  if (d->host && listen_ssh (d, err) < 0)
    {
      ib_docker_free (d);
      return -1;
    }
  if (ib_curl_open (NULL, &d->curl, err) < 0)
    {
      ib_docker_free (d);
      return -1;
    }
  *out = d;
  return 0;
}

const char *
ib_docker_host (const struct ib_docker *d)
{
  return d->text;
}

uint64_t
ib_docker_bytes_up (const struct ib_docker *d)
{
  return d->up;
}

/* The last line ssh wrote on stderr ("ssh: connect to host … refused"). */
static char *
ssh_said (struct ib_docker *d)
{
  char buf[4096];
  ssize_t n = d->ssh_err >= 0 ? pread (d->ssh_err, buf, sizeof (buf) - 1, 0) : -1;
  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    buf[--n] = '\0';
  char *last = strrchr (buf, '\n');
  return ib_xstrdup (last ? last + 1 : buf);
}

struct sink
{
  int fd;     /* >= 0: the body goes here, or */
  char *buf;  /* here */
  size_t len;
};

static size_t
on_data (char *p, size_t size, size_t n, void *data)
{
  struct sink *k = data;
  size_t len = size * n;
  if (k->fd >= 0)
    return ib_write_all (k->fd, p, len, "response", NULL) < 0 ? 0 : len;
  if (k->len + len > MAX_BODY)
    return 0;
  ib_xappend (&k->buf, &k->len, p, len);
  return len;
}

static void
setup (struct ib_docker *d, const char *path, struct sink *k)
{
  struct ib_curl *c = d->curl;
  ib_curl_reset (c); /* options only: the connection stays */
  cleanup_free char *url = ib_xasprintf ("%s%s", API, path);
  if (d->socket)
    ib_curl_set_ptr (c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
  else
    {
      ib_curl_set_ptr (c, CURLOPT_UNIX_SOCKET_PATH, d->sock_path);
      ib_curl_set_prereq_fn (c, on_connected);
      ib_curl_set_ptr (c, CURLOPT_PREREQDATA, d);
    }
  ib_curl_set_ptr (c, CURLOPT_URL, url);
  ib_curl_set_long (c, CURLOPT_NOSIGNAL, 1L);
  ib_curl_set_ptr (c, CURLOPT_ERRORBUFFER, d->curl_err);
  ib_curl_set_data_fn (c, CURLOPT_WRITEFUNCTION, on_data);
  ib_curl_set_ptr (c, CURLOPT_WRITEDATA, k);
  d->curl_err[0] = '\0';
}

static int
perform (struct ib_docker *d, long *status, ib_error_t *err)
{
  CURLcode r = ib_curl_perform (d->curl);
  curl_off_t up = 0;
  long req = 0;
  ib_curl_info_off (d->curl, CURLINFO_SIZE_UPLOAD_T, &up);
  ib_curl_info_long (d->curl, CURLINFO_REQUEST_SIZE, &req);
  d->up += (uint64_t) up + (uint64_t) req;
  ib_curl_info_long (d->curl, CURLINFO_RESPONSE_CODE, status);
  if (r == CURLE_OK)
    return 0;
  const char *what = d->curl_err[0] ? d->curl_err : ib_curl_strerror (d->curl, r);
  cleanup_free char *said = d->host ? ssh_said (d) : NULL;
  if (said && *said)
    return ib_error (err, IB_EENV, "Docker Engine at %s: %s (ssh: %s)", d->text, what, said);
  return ib_error (err, IB_EENV, "Docker Engine at %s: %s", d->text, what);
}

int
ib_docker_get (struct ib_docker *d, const char *path, int to_fd, char **body, long *status, ib_error_t *err)
{
  struct sink k = { .fd = to_fd };
  setup (d, path, &k);
  int r = perform (d, status, err);
  if (r == 0 && body)
    {
      ib_xappend (&k.buf, &k.len, "", 1);
      *body = k.buf;
    }
  else
    free (k.buf);
  return r;
}

int
ib_docker_get_json (struct ib_docker *d, const char *path, cJSON **out, ib_error_t *err)
{
  cleanup_free char *buf = NULL;
  long status = 0;
  if (ib_docker_get (d, path, -1, &buf, &status, err) < 0)
    return -1;
  if (status != 200)
    return ib_error (err, status == 404 ? IB_ENOTFOUND : IB_EENV, "Docker Engine at %s: GET %s: HTTP %ld: %s",
                     d->text, path, status, buf);
  *out = cJSON_Parse (buf);
  return *out ? 0 : ib_error (err, IB_EENV, "Docker Engine at %s: GET %s: not JSON", d->text, path);
}

struct body
{
  ib_docker_body_fn read;
  void *data;
};

static size_t
on_read (char *buf, size_t size, size_t n, void *data)
{
  struct body *b = data;
  long got = b->read (b->data, buf, size * n);
  return got < 0 ? CURL_READFUNC_ABORT : (size_t) got;
}

int
ib_docker_post (struct ib_docker *d, const char *path, const char *content_type, ib_docker_body_fn read,
                void *data, char **resp, long *status, ib_error_t *err)
{
  struct sink k = { .fd = -1 };
  struct body b = { read, data };
  setup (d, path, &k);
  cleanup_free char *ct = ib_xasprintf ("Content-Type: %s", content_type);
  struct curl_slist *h = ib_curl_slist_append (d->curl, NULL, ct);
  h = ib_curl_slist_append (d->curl, h, "Transfer-Encoding: chunked");
  h = ib_curl_slist_append (d->curl, h, "Expect:");
  ib_curl_set_ptr (d->curl, CURLOPT_HTTPHEADER, h);
  ib_curl_set_long (d->curl, CURLOPT_POST, 1L);
  ib_curl_set_data_fn (d->curl, CURLOPT_READFUNCTION, on_read);
  ib_curl_set_ptr (d->curl, CURLOPT_READDATA, &b);
  int r = perform (d, status, err);
  ib_curl_slist_free_all (d->curl, h);
  if (r == 0 && resp)
    {
      ib_xappend (&k.buf, &k.len, "", 1);
      *resp = k.buf;
    }
  else
    free (k.buf);
  return r;
}

int
ib_docker_post_empty (struct ib_docker *d, const char *path, long *status, ib_error_t *err)
{
  struct sink k = { .fd = -1 };
  setup (d, path, &k);
  ib_curl_set_long (d->curl, CURLOPT_POST, 1L);
  ib_curl_set_long (d->curl, CURLOPT_POSTFIELDSIZE, 0L);
  ib_curl_set_ptr (d->curl, CURLOPT_POSTFIELDS, "");
  int r = perform (d, status, err);
  free (k.buf);
  return r;
}
