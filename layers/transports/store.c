/* The local store as a transport (a bare NAME:TAG). */
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "layers/transports/transports.h"

/* A bare NAME:TAG that the store has not is looked up in Docker. */
static int
store_pull (struct ib_store *s, const struct ib_ref *ref, const struct ib_platform *platform,
            struct ib_descriptor *manifest, ib_error_t *err)
{
  if (ib_store_resolve (s, ref->name, manifest, err) == 0 || (*err)->class != IB_ENOTFOUND)
    return *err ? -1 : 0;
  cleanup_free char *sock = ib_docker_socket_path ();
  if (access (sock, W_OK) < 0)
    return -1;
  struct ib_ref daemon = { .kind = IB_REF_DOCKER_DAEMON, .location = ref->name, .transport = &ib_transport_docker_daemon };
  ib_error_t e2 = NULL;
  if (ib_transport_docker_daemon.pull (s, &daemon, platform, manifest, &e2) < 0)
    {
      ib_error_wrap (&e2, "%s; and Docker", (*err)->msg);
      ib_error_release (err);
      *err = e2;
      return -1;
    }
  ib_error_release (err);
  return 0;
}

static int
store_push (struct ib_store *s, const struct ib_image *img, const struct ib_ref *ref, const char *name,
            ib_error_t *err)
{
  (void) name;
  return ib_store_tag (s, ref->name, &img->manifest, NULL, err);
}

const struct ib_transport ib_transport_store = { "", store_pull, store_push };
