/* imgbuild --load: the tagged image into the Docker Engine of every node
 * (this machine's, unix:///PATH, ssh://[USER@]HOST[:PORT]), each sent only
 * the layers it lacks (layers/transports/transports.h: ib_docker_load).  Nodes load in
 * parallel, at most IMGBUILD_LOAD_JOBS (default 4) at once; a node that
 * fails is named with its error and does not stop the others.  On a
 * terminal each node has a progress line; the report gets one line per
 * node and the JSON a "nodes" entry per node. */
#ifndef IB_LOAD_NODES_H
#define IB_LOAD_NODES_H

#include <stddef.h>

#include "layers/image/image.h"
#include "layers/store/store.h"
#include "builder/core/report.h"

/* HOSTS[i] "" is this machine's daemon ($DOCKER_HOST, else the socket).
 * Fails (with the class of the first node's error) unless every node has
 * the image as NAME afterwards. */
int ib_load_nodes (struct ib_store *s, const struct ib_image *img, const char *name, const char *const *hosts,
                   size_t n, struct ib_report *report, ib_error_t *err);

/* The hosts of a --nodes FILE into *HOSTS (appended): one a line, `#`
 * comments and blank lines skipped; a line without "://" is ssh://LINE. */
int ib_load_nodes_file (const char *file, char ***hosts, size_t *n, ib_error_t *err);

#endif
