/* The local store: an OCI image layout (oci-layout, index.json, blobs/sha256)
 * that skopeo and umoci read as `oci:DIR:NAME:TAG`.  Blobs are immutable and
 * named by their digest; they are written to a temporary file beside their
 * final place, hashed while written, fsynced and renamed, so a blob that has
 * its name always has its content.  Tags live in index.json as
 * org.opencontainers.image.ref.name annotations; index.json is only ever
 * replaced whole (under a lock), which makes tagging atomic.  Derived data
 * (per-layer file lists, compile caches) lives under imgbuild/, beside the
 * layout, and can always be recomputed. */
#ifndef IB_STORE_H
#define IB_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/store/descriptor.h"

struct ib_store;
struct ib_blob_writer;

/* The store named by --store, else $IMGBUILD_STORE, else
 * $XDG_DATA_HOME/imgbuild/store, else ~/.local/share/imgbuild/store. */
char *ib_store_default_path (const char *opt);
/* Open ROOT, creating an empty layout there if there is none. */
int ib_store_open (const char *root, struct ib_store **out, ib_error_t *err);
/* Open an existing layout (a source): IB_ENOTFOUND when ROOT has none. */
int ib_store_open_existing (const char *root, struct ib_store **out, ib_error_t *err);
void ib_store_free (struct ib_store *s);
const char *ib_store_root (const struct ib_store *s);

/* Where a blob lives in a store on disk (writers and pushes only; readers
 * use ib_store_locate_blob, which also knows views). */
char *ib_store_blob_path (const struct ib_store *s, const ib_digest *d);
bool ib_store_has_blob (const struct ib_store *s, const ib_digest *d);

/* Where a blob's bytes are: LENGTH bytes from OFFSET of PATH (a store's or
 * a layout's blob file, or a member of an uncompressed archive); LENGTH is
 * UINT64_MAX for "to the end of the file". */
struct ib_blob_loc
{
  char *path;
  uint64_t offset, length;
};
int ib_store_locate_blob (const struct ib_store *s, const ib_digest *d, struct ib_blob_loc *out, ib_error_t *err);
void ib_blob_loc_clear (struct ib_blob_loc *l);
/* Open L for reading, positioned at its first byte (IB_EINTEGRITY when the
 * file is missing: a blob that a manifest names is not there). */
int ib_blob_loc_open (const struct ib_blob_loc *l, const ib_digest *d, ib_error_t *err);
/* How many bytes the blob at L has, FD being L opened: its range, or the
 * rest of its file (0 when that cannot be told). */
uint64_t ib_blob_loc_length (const struct ib_blob_loc *l, int fd);
/* The digest and size of D's bytes where they are (a view's too: the
 * artifact's); PROGRESS (may be NULL) is told of the bytes as read. */
int ib_store_hash_blob (const struct ib_store *s, const ib_digest *d, ib_digest *out, uint64_t *size,
                        void (*progress) (void *, unsigned long long), void *data, ib_error_t *err);

/* ---- reading an artifact in place (imgverify) ------------------------------
 * A view is a read-only store over an artifact: an OCI layout's blobs where
 * they are, or the members of a docker-archive where they are in the file.
 * Nothing is copied and nothing is written to the artifact: its index lives
 * in memory, made-up blobs (a classic archive's manifest) too, and derived
 * data (file lists, symbol and kernel caches) goes to the local store at
 * LOCAL_ROOT, keyed by digests as always.
 *
 * Trust: a store's blobs were hashed when written, so what is cached about
 * them may be reused.  A view's bytes are whatever the artifact holds now,
 * so a cache keyed by one of its blobs' digests is consulted only once this
 * run has hashed that blob (ib_store_mark_hashed): a damaged artifact is
 * never "verified" by what a good copy left in the caches. */
int ib_store_open_layout_view (const char *local_root, const char *dir, struct ib_store **out, ib_error_t *err);
/* An empty view named SOURCE, filled with ib_store_view_add_range and
 * ib_store_put_blob (in memory). */
int ib_store_open_view (const char *local_root, const char *source, struct ib_store **out, ib_error_t *err);
void ib_store_view_add_range (struct ib_store *s, const ib_digest *d, const char *path, uint64_t offset,
                              uint64_t length);
/* Remove PATH (a temporary file the ranges point into) when S is freed. */
void ib_store_view_own_file (struct ib_store *s, const char *path);
bool ib_store_is_view (const struct ib_store *s);
/* The artifact a view reads, else the store's root: for messages. */
const char *ib_store_source (const struct ib_store *s);
bool ib_store_blob_trusted (const struct ib_store *s, const ib_digest *d);
void ib_store_mark_hashed (struct ib_store *s, const ib_digest *d);
/* A folder for derived data of one kind (created on demand). */
int ib_store_cache_dir (const struct ib_store *s, const char *kind, char **out, ib_error_t *err);
/* The file of that KIND named by blob D's hex (so that gc sweeps it with
 * the blob); its folder made when CREATE, and NULL when that fails. */
char *ib_store_cache_file (const struct ib_store *s, const char *kind, const ib_digest *d, bool create,
                           ib_error_t *err);

/* Blob writers of one store may run on several threads at once (the
 * registry's parallel transfers do): each writes its own temporary file
 * (mkostemp) and rename() names it atomically, so two of one digest leave
 * one whole blob.  ib_store_has_blob and ib_store_cache_dir are safe beside
 * them; a view (read in place) takes no writer.  A blob's first MiB waits
 * in memory: one no larger that the store already holds is never written. */
int ib_blob_writer_new (struct ib_store *s, struct ib_blob_writer **out, ib_error_t *err);
int ib_blob_writer_write (struct ib_blob_writer *w, const void *buf, size_t len, ib_error_t *err);
/* Name the blob by its digest.  With EXPECTED, a different digest (or size,
 * when EXPECTED_SIZE is not UINT64_MAX) is an integrity error and nothing is
 * stored.  A blob the store already holds is kept as it is (no rename, no
 * fsync).  The blob's name is made durable by the next ib_store_tag, which
 * syncs the folder once for every blob written before it.  The writer is
 * freed either way. */
int ib_blob_writer_commit (struct ib_blob_writer *w, const ib_digest *expected, uint64_t expected_size,
                           ib_digest *out, uint64_t *size, ib_error_t *err);
void ib_blob_writer_abort (struct ib_blob_writer *w);
/* A writer for bytes that its caller hashes as it reads them anyway (a
 * layer reader copying the blob it lists: one read and one hash, not two):
 * ib_blob_writer_commit_hashed names them D once the caller has found that
 * D is their digest and SIZE their size (an integrity error otherwise:
 * nothing stored); the writer is freed either way.  ib_blob_writer_commit
 * refuses such a writer. */
int ib_blob_writer_new_unhashed (struct ib_store *s, struct ib_blob_writer **out, ib_error_t *err);
int ib_blob_writer_commit_hashed (struct ib_blob_writer *w, const ib_digest *d, uint64_t size, ib_error_t *err);

int ib_store_put_blob (struct ib_store *s, const void *buf, size_t len, ib_digest *out, ib_error_t *err);
/* Copy a blob from FD, checked against its descriptor while it streams.
 * A blob already in the store is not read again. */
int ib_store_import_fd (struct ib_store *s, int fd, const struct ib_descriptor *d, ib_error_t *err);
/* Copy one blob from another layout, checked while it streams. */
int ib_store_copy_blob (const struct ib_store *src, struct ib_store *dst, const struct ib_descriptor *d,
                        ib_error_t *err);
/* The single image of a layout with exactly one untagged or tagged
 * manifest: what `oci:DIR` without a tag means. */
int ib_store_only_image (struct ib_store *s, struct ib_descriptor *out, ib_error_t *err);
/* Read a small blob (manifest, config) whole, checked against its digest. */
int ib_store_read_blob (const struct ib_store *s, const ib_digest *d, size_t max, char **out, size_t *len,
                        ib_error_t *err);

/* Resolve NAME:TAG to its manifest descriptor; IB_ENOTFOUND if untagged. */
int ib_store_resolve (struct ib_store *s, const char *name, struct ib_descriptor *out, ib_error_t *err);
/* Point NAME:TAG at MANIFEST: the last step of a build.  The manifest blob
 * must already be in the store.  REFERRER, when not NULL, is an artifact
 * about MANIFEST (provenance) listed in the same atomic index.json update,
 * untagged, with the annotation IB_ANNOTATION_SUBJECT naming MANIFEST.
 * MANIFEST may have several: REFERRER replaces only the one with its own
 * IB_ANNOTATION_DEFINITION (read from its manifest, when in the store). */
int ib_store_tag (struct ib_store *s, const char *name, const struct ib_descriptor *manifest,
                  const struct ib_descriptor *referrer, ib_error_t *err);
/* Copy the referrers of SUBJECT (their manifests and blobs) from SRC to DST
 * and list them there; nothing when SRC has none.  NAME of ib_store_tag
 * may be NULL to list a referrer only. */
int ib_store_copy_referrer (struct ib_store *src, struct ib_store *dst, const struct ib_descriptor *subject,
                            ib_error_t *err);
/* Every referrer listed for SUBJECT (a manifest digest), in index order:
 * those annotated about it, then the manifests of the index tagged with its
 * referrers tag `sha256-HEX` (a layout that a copy by tag made, as the
 * distribution spec's fallback names it); *N is 0 when there is none.  A
 * listed artifact need not be in the store.  Free with ib_descriptors_free. */
int ib_store_find_referrers (struct ib_store *s, const ib_digest *subject, struct ib_descriptor **out, size_t *n,
                             ib_error_t *err);
/* An artifact's blobs: OUT[0] is a copy of ART (its manifest), then its
 * config and layers. */
int ib_store_artifact_blobs (struct ib_store *s, const struct ib_descriptor *art, struct ib_descriptor **out,
                             size_t *n, ib_error_t *err);
void ib_descriptors_free (struct ib_descriptor *list, size_t n);
/* IB_ANNOTATION_DEFINITION of the artifact manifest ART in the store, or
 * NULL (none, or not in the store). */
char *ib_store_artifact_definition (const struct ib_store *s, const ib_digest *art);
/* The artifactType of the artifact manifest ART in the store; the old
 * IB_MT_PROVENANCE when it says none or cannot be read.  Malloc'd. */
char *ib_store_artifact_type (const struct ib_store *s, const ib_digest *art);

/* What a garbage collection removed. */
struct ib_gc_result
{
  size_t blobs_removed, blobs_kept, temporaries, cache_entries, referrers_dropped;
  uint64_t bytes_removed;
};
/* Remove the blobs that no tag and no referrer of index.json reaches (through
 * manifests, indexes and artifact manifests; a referrer counts when its
 * subject does, else it leaves index.json too), the temporaries and run
 * folders of killed processes, and the cache entries derived from a removed
 * blob.  Waits until no other process has the store open (every open holds
 * the users lock shared; this takes it exclusively); processes that open it
 * meanwhile wait for the collection. */
int ib_store_gc (struct ib_store *s, struct ib_gc_result *out, ib_error_t *err);

#endif
