/* An image as the store sees it: a manifest, its config, and its layers with
 * their diff_ids.  Loading validates the whole chain (media types, digests,
 * one diff_id per layer); extending writes a new config and manifest over a
 * base without touching the base's layer blobs, which are carried by digest. */
#ifndef IB_IMAGE_H
#define IB_IMAGE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "layers/store/descriptor.h"
#include "layers/store/store.h"

struct ib_image
{
  struct ib_descriptor manifest;
  struct ib_descriptor config;
  size_t n_layers;
  struct ib_descriptor *layers;
  ib_digest *diff_ids;
  cJSON *config_json; /* the whole config document */
};

/* "linux/amd64" or "linux/arm64/v8"; the host's in Go's names. */
struct ib_platform
{
  char os[32], architecture[32], variant[32];
};
int ib_platform_parse (const char *s, struct ib_platform *out, ib_error_t *err);
void ib_platform_host (struct ib_platform *out);

/* Load the image whose manifest (or index, resolved by PLATFORM: NULL means
 * the only one, else the host's) is DESC, from the store. */
int ib_image_load (struct ib_store *s, const struct ib_descriptor *desc, const struct ib_platform *platform,
                   struct ib_image **out, ib_error_t *err);
/* One step of resolving DESC, whose bytes are TEXT: an index gives in
 * *NEXT the manifest of PLATFORM (as ib_image_load chooses it) and *IMG
 * NULL; a manifest gives *IMG with its config and layers, not yet its
 * config document.  A transport that fetches manifests one by one (a
 * registry) walks the same steps as the store. */
int ib_manifest_parse (const struct ib_descriptor *desc, const char *text, size_t len, const struct ib_platform *platform,
                       struct ib_descriptor *next, struct ib_image **img, ib_error_t *err);
#define IB_MAX_MANIFEST_SIZE (4u << 20)

/* The empty image of `FROM scratch`. */
struct ib_image *ib_image_scratch (const struct ib_platform *platform);
void ib_image_free (struct ib_image *img);

/* What a build adds on top of a base. */
struct ib_image_delta
{
  size_t n_layers;
  const struct ib_descriptor *layers;
  const ib_digest *diff_ids;
  size_t n_env; /* "KEY=VALUE"; replaces a base entry of the same KEY */
  char *const *env;
  size_t n_labels; /* key/value pairs, flat: k0, v0, k1, v1 ... */
  char *const *labels;
  const char *cmd_json;      /* a JSON array, or NULL to keep the base's */
  const char *const *history; /* created_by of each layer's history entry */
  size_t n_annotations;       /* manifest annotations, flat k0, v0, ... */
  const char *const *annotations;
  long long created;         /* seconds since the epoch */
};

/* Write the config and manifest of BASE + DELTA into the store; OUT is the
 * new manifest's descriptor.  Nothing is tagged. */
int ib_image_extend (struct ib_store *s, const struct ib_image *base, const struct ib_image_delta *delta,
                     struct ib_image **out, ib_error_t *err);

char *ib_format_rfc3339 (long long t);

#endif
