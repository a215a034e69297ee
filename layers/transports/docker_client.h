/* A client of one Docker Engine's API, reached the way the docker CLI
 * reaches a DOCKER_HOST:
 *   unix:///PATH                 the daemon's socket on this machine
 *   ssh://[USER@]HOST[:PORT]     `ssh … HOST docker system dial-stdio`: the
 *                                node's own docker CLI relays the API to its
 *                                daemon over the SSH channel, so the user's
 *                                SSH configuration, keys, agent and known
 *                                hosts decide everything (BatchMode: no
 *                                prompt; a host it cannot reach is an error)
 * NULL or "" is $DOCKER_HOST, else unix:///var/run/docker.sock.
 * One connection is kept across requests (HTTP keep-alive over the socket
 * or the one SSH session); it is opened again when the daemon closes it. */
#ifndef IB_DOCKER_CLIENT_H
#define IB_DOCKER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "util/error.h"

struct ib_docker;

/* Check HOST's syntax (IB_EUSAGE when it is none of the forms above). */
int ib_docker_host_check (const char *host, ib_error_t *err);
int ib_docker_open (const char *host, struct ib_docker **out, ib_error_t *err);
void ib_docker_free (struct ib_docker *d);
/* The host as the user wrote it ("ssh://spark-2"), for messages. */
const char *ib_docker_host (const struct ib_docker *d);

/* GET PATH (under the API version, "/images/json"): the body into TO when
 * not NULL (any size), else into *BODY (at most 64 MiB, NUL-terminated). */
int ib_docker_get (struct ib_docker *d, const char *path, int to_fd, char **body, long *status, ib_error_t *err);
/* GET PATH as JSON; HTTP 404 is IB_ENOTFOUND. */
int ib_docker_get_json (struct ib_docker *d, const char *path, cJSON **out, ib_error_t *err);

/* POST PATH with a streamed body: READ fills BUF with up to N bytes and
 * returns how many (0 at the end, -1 to abort).  Sent chunked. */
typedef long (*ib_docker_body_fn) (void *data, char *buf, size_t n);
int ib_docker_post (struct ib_docker *d, const char *path, const char *content_type, ib_docker_body_fn read,
                    void *data, char **resp, long *status, ib_error_t *err);
/* POST PATH without a body (tag, ...). */
int ib_docker_post_empty (struct ib_docker *d, const char *path, long *status, ib_error_t *err);

/* Bytes this client has sent and received on its connections so far. */
uint64_t ib_docker_bytes_up (const struct ib_docker *d);

#endif
