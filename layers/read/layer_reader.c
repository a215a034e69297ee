#include "layers/read/layer_reader.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/gunzip.h"
#include "layers/read/inflate_index.h"
#include "layers/read/pinflate.h"
#include "layers/read/readthrough.h"
#include "layers/tar/tarcheck.h"

#define IN_CHUNK (256u << 10)
#define OUT_CHUNK (1u << 20)
/* Both digests are computed by a hash worker (digest.h) on a second thread
 * while this one reads and inflates: each buffer read or made is a job, and
 * a ring slot is written again only once its job is hashed.  The output
 * ring has at least 2 slots because libarchive keeps the pointer the read
 * callback returned until its next call; more slots in either ring let the
 * two threads run ahead of each other by that much. */
#define IN_SLOTS 4
#define OUT_SLOTS 3
/* Below this blob size the reader hashes on its own thread: starting and
 * joining one costs more than it saves (measured: see the commit). */
#define THREAD_MIN_BLOB (1u << 20)
/* Below this blob size a layer is read in one piece: an inflate index
 * (inflate_index.h) is neither recorded nor used. */
#define INDEX_MIN_BLOB IB_INFLATE_INDEX_SPAN

struct slot
{
  unsigned char *buf;
  uint64_t ticket; /* its last hash job; 0 none */
};

struct ib_layer_reader
{
  struct ib_store *store;
  int fd;
  char *path;
  uint64_t left; /* bytes of the blob not read yet (its range of the file) */
  struct ib_descriptor blob;
  ib_digest expected_diff_id;
  bool have_diff_id;
  enum ib_blob_codec codec;
  ib_sha256 *blob_hash, *tar_hash;
  uint64_t blob_size;
  struct ib_hash_worker *hw;
  struct slot in_ring[IN_SLOTS], out_ring[OUT_SLOTS];
  unsigned in_i, out_i;       /* the slots IN and OUT are */
  unsigned char *in, *out;
  bool out_full;              /* OUT went to libarchive: produce takes the next */
  size_t in_len, in_pos;
  bool in_eof, stream_end;
  bool drained;       /* produce found the end of the uncompressed stream */
  uint64_t produced;  /* uncompressed bytes handed to libarchive */
  int64_t entry_size; /* the current entry's data size; -1 none yet */
  uint64_t data_at;   /* where its data starts in the uncompressed stream */
  uint64_t data_read; /* how much of it ib_layer_reader_data handed out */
  bool footerless;    /* the stream ended right after the last entry's data */
  bool listed_all;    /* next found the end: every entry was listed */
  struct ib_gunzip *gz;
  ZSTD_DStream *zs;
  struct archive *a;
  struct ib_tar_check *check;
  ib_error_t pending; /* an error raised inside a libarchive callback */
  struct ib_inflate_index *index;          /* the blob's, when it has one */
  struct ib_pinflate *pin;                 /* inflating on several threads with it */
  struct ib_inflate_index_writer *record;  /* recording one: it has none */
  unsigned char *snap;                     /* a checkpoint being recorded */
  void (*progress) (void *, unsigned long long);
  void *progress_data;
  struct ib_blob_writer *copy; /* the blob's bytes into the store, else NULL */
  bool copy_checked;           /* ib_layer_reader_end found them BLOB */
  int file_fd;        /* ib_layer_reader_of_file's: the file, else -1 */
  uint64_t file_len;  /* its length; data_read is where the next read starts */
};

void
ib_layer_reader_on_progress (struct ib_layer_reader *r, void (*fn) (void *, unsigned long long), void *data)
{
  r->progress = fn;
  r->progress_data = data;
}

/* The next slot of RING (N slots of SIZE bytes, *I the current one), once
 * the hash worker is done with it.  Slots are allocated when first used: a
 * small layer takes one of each ring, as the reader did before it had
 * rings (measured: allocating them all cost a 12 KB layer a third more). */
static unsigned char *
next_slot (struct ib_layer_reader *r, struct slot *ring, unsigned n, size_t size, unsigned *i)
{
  *i = (*i + 1) % n;
  ib_hash_worker_wait (r->hw, ring[*i].ticket);
  if (ring[*i].buf == NULL)
    ring[*i].buf = ib_xmalloc (size);
  return ring[*i].buf;
}

/* The blob is read(2) into the ring, not mapped.  Mapping it (the pages
 * given back 1 MiB behind, a SIGBUS guard for a file cut short) took
 * imgverify of a 1.14 GB gen:30 layer from 0.28-0.37 s of system time to
 * 0.14-0.16 s, but its user time rose about as much (the inflater then
 * reads pages that the copy no longer brought into the cache), its wall
 * time was longer in 3 runs of 3, and its peak RSS 3 MiB higher. */
static int
fill_input (struct ib_layer_reader *r)
{
  if (r->in_pos < r->in_len || r->in_eof)
    return 0;
  ssize_t n;
  if (r->left > 0)
    r->in = next_slot (r, r->in_ring, IN_SLOTS, IN_CHUNK, &r->in_i);
  do
    n = r->left == 0 ? 0 : read (r->fd, r->in, r->left < IN_CHUNK ? (size_t) r->left : IN_CHUNK);
  while (n < 0 && errno == EINTR);
  if (n > 0)
    r->left -= (uint64_t) n;
  if (n < 0)
    return ib_error_errno (&r->pending, errno, IB_EENV, "read `%s`", r->path);
  if (n > 0 && r->copy && ib_blob_writer_write (r->copy, r->in, (size_t) n, &r->pending) < 0)
    return -1;
  if (n > 0)
    r->in_ring[r->in_i].ticket = ib_hash_worker_submit (r->hw, r->blob_hash, r->in, (size_t) n);
  r->blob_size += (uint64_t) n;
  if (r->progress && n > 0)
    r->progress (r->progress_data, (unsigned long long) n);
  r->in_len = (size_t) n;
  r->in_pos = 0;
  r->in_eof = n == 0;
  return 0;
}

/* After an inflate step that made MADE bytes: a checkpoint of the index
 * being recorded when one is due and the inflater stands at one (all the
 * blob read so far consumed).  The index is derived data: when it cannot
 * be written, it is not recorded. */
static void
record_checkpoint (struct ib_layer_reader *r, size_t made)
{
  uint64_t out = r->produced + made;
  if (r->record == NULL || r->in_pos != r->in_len || !ib_inflate_index_writer_due (r->record, out)
      || !ib_gunzip_snapshot (r->gz, r->snap))
    return;
  ib_error_t e = NULL;
  if (ib_inflate_index_writer_add (r->record, r->blob_size, out, r->snap, &e) < 0)
    {
      ib_inflate_index_writer_free (steal_pointer (&r->record));
      ib_error_release (&e);
    }
}

/* produce with the index: the pieces in order from the inflating threads,
 * the blob's bytes hashed and counted as the sequential reads do. */
static ssize_t
produce_parallel (struct ib_layer_reader *r)
{
  for (;;)
    {
      struct ib_piece pc;
      bool truncated = false;
      int x = ib_pinflate_next (r->pin, &pc, &truncated, &r->pending);
      if (x < 0 && truncated)
        return ib_error (&r->pending, IB_EINTEGRITY, "layer %s is truncated", r->blob.digest.s);
      if (x < 0)
        return r->pending->class == IB_EINTEGRITY ? ib_error_wrap (&r->pending, "layer %s", r->blob.digest.s) : -1;
      if (x == 0)
        {
          r->stream_end = r->drained = true;
          return 0;
        }
      if (pc.kind == IB_PIECE_BLOB)
        {
          ib_hash_worker_submit (r->hw, r->blob_hash, pc.buf, pc.len);
          r->blob_size += pc.len;
          if (r->progress)
            r->progress (r->progress_data, (unsigned long long) pc.len);
          continue;
        }
      r->out = (unsigned char *) pc.buf;
      r->produced += pc.len;
      ib_hash_worker_submit (r->hw, r->tar_hash, pc.buf, pc.len);
      return (ssize_t) pc.len;
    }
}

/* produce for an uncompressed layer.  Its tar stream is its blob, byte for
 * byte: libarchive reads each buffer where it was read (an input slot, not
 * written again until the next three are read: libarchive keeps a buffer
 * only until the next callback), and the blob's digest is the diff_id
 * (ib_layer_reader_end).  The bytes are neither copied nor hashed a second
 * time.  Every layer of a `docker save` archive is like this: imgverify of
 * a 2.4 GB one took 4.70 s user + 0.61 s system (medians of 5, 8.65 s
 * wall) with the copy and the second hash, 2.28 + 0.49 (4.27 s) without. */
static ssize_t
produce_plain (struct ib_layer_reader *r)
{
  if (fill_input (r) < 0)
    return -1;
  size_t made = r->in_len - r->in_pos;
  if (made == 0)
    {
      r->drained = true;
      return 0;
    }
  r->out = r->in + r->in_pos;
  r->in_pos = r->in_len;
  r->produced += made;
  return (ssize_t) made;
}

/* Produce up to OUT_CHUNK uncompressed bytes; 0 at the end of the stream. */
static ssize_t
produce (struct ib_layer_reader *r)
{
  if (r->pin)
    return produce_parallel (r);
  if (r->codec == IB_BLOB_PLAIN)
    return produce_plain (r);
  if (r->out == NULL || r->out_full)
    r->out = next_slot (r, r->out_ring, OUT_SLOTS, OUT_CHUNK, &r->out_i);
  r->out_full = false;
  for (;;)
    {
      if (fill_input (r) < 0)
        return -1;
      size_t avail = r->in_len - r->in_pos;
      if (avail == 0 && r->in_eof)
        {
          if (!r->stream_end)
            return ib_error (&r->pending, IB_EINTEGRITY, "layer %s is truncated", r->blob.digest.s);
          r->drained = true;
          return 0;
        }
      size_t made = 0;
      if (r->codec == IB_BLOB_GZIP)
        {
          /* Concatenated gzip members are one stream (RFC 1952): after a
           * member's end, what input is left starts the next. */
          size_t used = 0;
          if (ib_gunzip_run (r->gz, r->in + r->in_pos, avail, &used, r->out, OUT_CHUNK, &made, &r->stream_end,
                             &r->pending)
              < 0)
            return ib_error_wrap (&r->pending, "layer %s", r->blob.digest.s);
          r->in_pos += used;
          record_checkpoint (r, made);
        }
      else
        {
          ZSTD_inBuffer ib = { r->in + r->in_pos, avail, 0 };
          ZSTD_outBuffer ob = { r->out, OUT_CHUNK, 0 };
          size_t z = ZSTD_decompressStream (r->zs, &ob, &ib);
          if (ZSTD_isError (z))
            return ib_error (&r->pending, IB_EINTEGRITY, "layer %s: zstd data is corrupt (%s)", r->blob.digest.s,
                             ZSTD_getErrorName (z));
          r->in_pos += ib.pos;
          made = ob.pos;
          r->stream_end = z == 0;
        }
      if (made)
        {
          r->produced += made;
          r->out_ring[r->out_i].ticket = ib_hash_worker_submit (r->hw, r->tar_hash, r->out, made);
          r->out_full = true;
          return (ssize_t) made;
        }
    }
}

static la_ssize_t
archive_read_cb (struct archive *a, void *data, const void **buf)
{
  (void) a;
  struct ib_layer_reader *r = data;
  ssize_t n = produce (r);
  *buf = r->out;
  return n;
}

enum ib_blob_codec
ib_blob_codec_of (const unsigned char *p, size_t n)
{
  if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
    return IB_BLOB_GZIP;
  if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd)
    return IB_BLOB_ZSTD;
  return IB_BLOB_PLAIN;
}

enum ib_blob_codec
ib_blob_codec_at (int fd, uint64_t offset, uint64_t length)
{
  unsigned char magic[4];
  size_t want = length < sizeof (magic) ? (size_t) length : sizeof (magic);
  ssize_t n = fd >= 0 && want > 0 ? pread (fd, magic, want, (off_t) offset) : 0;
  return ib_blob_codec_of (magic, n > 0 ? (size_t) n : 0);
}

/* The CPUs this process may run on (taskset, a cpuset), not the machine's:
 * on one, a second thread only adds switches. */
static int
cpus_usable (void)
{
  cpu_set_t set;
  if (sched_getaffinity (0, sizeof (set), &set) == 0)
    return CPU_COUNT (&set);
  return (int) sysconf (_SC_NPROCESSORS_ONLN);
}

static int
reader_start (struct ib_layer_reader *r, const struct ib_descriptor *blob, ib_error_t *err)
{
  if (r->fd < 0)
    return ib_error_wrap (err, "layer %s", blob->digest.s);
  if (r->pin == NULL && fill_input (r) < 0)
    {
      ib_error_release (err);
      *err = steal_pointer (&r->pending);
      return -1;
    }
  r->codec = r->pin ? IB_BLOB_GZIP : ib_blob_codec_of (r->in, r->in_len);
  if (r->codec == IB_BLOB_GZIP && ib_gunzip_new (&r->gz, err) < 0)
    return -1;
  if (r->codec == IB_BLOB_ZSTD && (r->zs = ZSTD_createDStream ()) == NULL)
    return ib_error (err, IB_EENV, "ZSTD_createDStream failed");
  r->a = archive_read_new ();
  archive_read_support_format_tar (r->a);
  archive_read_support_format_gnutar (r->a);
  if (archive_read_open (r->a, r, NULL, archive_read_cb, NULL) != ARCHIVE_OK)
    {
      if (r->pending)
        *err = steal_pointer (&r->pending);
      else
        ib_error (err, IB_EINTEGRITY, "layer %s is not a tar archive: %s", blob->digest.s,
                  archive_error_string (r->a));
      return -1;
    }
  return 0;
}

/* A gzip blob of LENGTH bytes from OFFSET, large enough to be cut: with
 * its index and THREADS > 1, inflated on THREADS threads; without a usable
 * index, one is recorded as it is read.  Nothing here can fail the read:
 * without an index it is read sequentially, as always. */
static void
setup_index (struct ib_layer_reader *r, uint64_t offset, uint64_t length, int threads)
{
  if (r->fd < 0 || length < INDEX_MIN_BLOB || ib_gunzip_snapshot_size () == 0
      || ib_blob_codec_at (r->fd, offset, length) != IB_BLOB_GZIP)
    return;
  ib_error_t e = NULL;
  if (ib_inflate_index_load (r->store, &r->blob.digest, length, &r->index, &e) < 0)
    ib_error_release (&e);
  /* Never more threads than the CPUs this process may run on. */
  int usable = cpus_usable ();
  threads = threads < usable ? threads : usable;
  if (r->index && threads > 1
      && ib_pinflate_new (r->fd, r->path, offset, length, r->index, threads, &r->pin, &e) < 0)
    ib_error_release (&e);
  if (r->index == NULL && ib_inflate_index_writer_new (r->store, &r->blob.digest, &r->record, &e) < 0)
    ib_error_release (&e);
  if (r->record)
    r->snap = ib_xmalloc (ib_gunzip_snapshot_size ());
}

struct ib_layer_reader *
ib_layer_reader_of_file (int fd, uint64_t len)
{
  struct ib_layer_reader *r = ib_xcalloc (1, sizeof (*r));
  r->fd = -1;
  r->file_fd = fd;
  r->file_len = len;
  return r;
}

static ssize_t
file_data (struct ib_layer_reader *r, void *buf, size_t len, ib_error_t *err)
{
  uint64_t left = r->file_len - r->data_read;
  ssize_t n;
  do
    n = left ? pread (r->file_fd, buf, len < left ? len : (size_t) left, (off_t) r->data_read) : 0;
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return ib_error_errno (err, errno, IB_EENV, "read a spooled file");
  if (n == 0 && left)
    return ib_error (err, IB_EENV, "a spooled file is shorter than it was written");
  r->data_read += (uint64_t) n;
  return n;
}

uint64_t
ib_layer_reader_data_at (const struct ib_layer_reader *r)
{
  return r->data_at;
}

int
ib_layer_reader_open (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *expected_diff_id,
                      struct ib_layer_reader **out, ib_error_t *err)
{
  return ib_layer_reader_open_threads (s, blob, expected_diff_id, 1, out, err);
}

/* Open BLOB's bytes at LOC (its path is taken) for S; COPY (taken, may be
 * NULL) gets them as they are read. */
static int
open_loc (struct ib_store *s, const struct ib_descriptor *blob, struct ib_blob_loc loc, const ib_digest *expected_diff_id,
          int threads, struct ib_blob_writer *copy, struct ib_layer_reader **out, ib_error_t *err)
{
  struct ib_layer_reader *r = ib_xcalloc (1, sizeof (*r));
  r->store = s;
  r->copy = copy;
  r->file_fd = -1;
  r->fd = ib_blob_loc_open (&loc, &blob->digest, err);
  r->path = steal_pointer (&loc.path);
  r->left = loc.length;
  ib_descriptor_copy (&r->blob, blob);
  if (expected_diff_id)
    {
      r->expected_diff_id = *expected_diff_id;
      r->have_diff_id = true;
    }
  r->blob_hash = ib_sha256_new ();
  r->tar_hash = ib_sha256_new ();
  r->check = ib_tar_check_new ();
  r->entry_size = -1;
  setup_index (r, loc.offset, ib_blob_loc_length (&loc, r->fd), threads);
  /* With several inflating threads, this one hashes: it only waits for
   * them otherwise. */
  r->hw = ib_hash_worker_new (r->pin == NULL && loc.length >= THREAD_MIN_BLOB && cpus_usable () > 1);
  if (reader_start (r, blob, err) < 0)
    {
      ib_layer_reader_free (r);
      return -1;
    }
  *out = r;
  return 0;
}

int
ib_layer_reader_open_threads (struct ib_store *s, const struct ib_descriptor *blob, const ib_digest *expected_diff_id,
                              int threads, struct ib_layer_reader **out, ib_error_t *err)
{
  struct ib_blob_loc loc;
  if (ib_store_locate_blob (s, &blob->digest, &loc, err) < 0)
    return ib_error_wrap (err, "layer %s", blob->digest.s);
  return open_loc (s, blob, loc, expected_diff_id, threads, NULL, out, err);
}

int
ib_layer_reader_open_at (struct ib_store *s, const struct ib_descriptor *blob, const struct ib_blob_loc *at,
                         const ib_digest *expected_diff_id, struct ib_layer_reader **out, ib_error_t *err)
{
  struct ib_blob_writer *w = NULL;
  if (ib_blob_writer_new_unhashed (s, &w, err) < 0)
    return -1;
  struct ib_blob_loc loc = { ib_xstrdup (at->path), at->offset, at->length };
  /* One thread: the bytes are copied in their order (fill_input). */
  return open_loc (s, blob, loc, expected_diff_id, 1, w, out, err);
}

static int
archive_fail (struct ib_layer_reader *r, ib_error_t *err)
{
  if (r->pending)
    {
      ib_error_release (err);
      *err = steal_pointer (&r->pending);
      return -1;
    }
  return ib_error (err, IB_EINTEGRITY, "layer %s: %s", r->blob.digest.s, archive_error_string (r->a));
}

/* A tar stream that ends right after its last entry's data, without that
 * entry's padding or the two end-of-archive blocks: what `umoci insert`
 * wrote before umoci 0.4.8 (it never closed its tar writer; umoci issue
 * 436), in images built with it and with stacker.  libarchive already
 * takes a stream without the end blocks for a whole one; without the
 * padding it calls it truncated.  Docker and containerd read every byte of
 * such a layer, and its diff_id, checked at ib_layer_reader_end, covers
 * exactly the bytes there are: nothing is missing, so it is read as whole.
 * That is when the stream is at its end exactly where the last entry's
 * data ends (read or skipped); a cut anywhere else (inside data, padding
 * or a header) is still truncated. */
static bool
ends_after_last_data (const struct ib_layer_reader *r)
{
  return r->pending == NULL && r->drained && r->entry_size >= 0
         && r->produced == r->data_at + (uint64_t) r->entry_size;
}

int
ib_layer_reader_next (struct ib_layer_reader *r, struct archive_entry **entry, ib_error_t *err)
{
  if (r->footerless)
    return 0;
  int x = archive_read_next_header (r->a, entry);
  if (x == ARCHIVE_EOF)
    {
      r->listed_all = true;
      return 0;
    }
  if (x == ARCHIVE_OK || x == ARCHIVE_WARN)
    {
      ib_tar_check_entry (r->check, *entry, x == ARCHIVE_WARN ? archive_error_string (r->a) : NULL);
      r->entry_size = archive_entry_size_is_set (*entry) ? archive_entry_size (*entry) : -1;
      r->data_at = (uint64_t) archive_filter_bytes (r->a, 0);
      r->data_read = 0;
      return 1;
    }
  if (ends_after_last_data (r))
    {
      r->footerless = true;
      r->listed_all = true;
      return 0;
    }
  return archive_fail (r, err);
}

const char *const *
ib_layer_reader_hazards (const struct ib_layer_reader *r, size_t *n)
{
  return ib_tar_check_problems (r->check, n);
}

ssize_t
ib_layer_reader_data (struct ib_layer_reader *r, void *buf, size_t len, ib_error_t *err)
{
  if (r->file_fd >= 0)
    return file_data (r, buf, len, err);
  if (r->footerless)
    return 0;
  la_ssize_t n = archive_read_data (r->a, buf, len);
  if (n < 0 && ends_after_last_data (r))
    {
      /* archive_read_data copies each data block into BUF before it reads
       * the next, and only the read after the last block fails (at the
       * padding): BUF holds the rest of the entry.  (The tests compare the
       * digest of such a last entry with its file's.) */
      r->footerless = true;
      uint64_t rest = (uint64_t) r->entry_size - r->data_read;
      if (rest > len)
        return archive_fail (r, err);
      r->data_read += rest;
      return (ssize_t) rest;
    }
  if (n < 0)
    return archive_fail (r, err);
  r->data_read += (uint64_t) n;
  return n;
}

/* What this whole read found, for the next read of the same bytes
 * (readthrough.h): only when every entry was listed, so that the hostile
 * entries are all of them.  A record that cannot be written is only a
 * read that will be made again. */
static void
keep_read_through (struct ib_layer_reader *r, const ib_digest *tar)
{
  size_t n;
  const char *const *h = ib_tar_check_problems (r->check, &n);
  struct ib_readthrough rec = { .size = r->blob_size, .diff_id = *tar, .hazards = (char **) h, .n_hazards = n };
  ib_error_t e = NULL;
  if (ib_readthrough_save (r->store, &r->blob.digest, &rec, &e) < 0)
    ib_error_release (&e);
}

int
ib_layer_reader_end (struct ib_layer_reader *r, ib_digest *diff_id, ib_error_t *err)
{
  /* libarchive stops at the end-of-archive blocks; the digests cover every
   * byte, padding included. */
  for (;;)
    {
      ssize_t n = produce (r);
      if (n < 0)
        return archive_fail (r, err);
      if (n == 0)
        break;
    }
  ib_hash_worker_drain (r->hw);
  /* A checkpoint that was not where the stream was: the next whole read
   * records the index again. */
  if (r->pin && ib_pinflate_fell_back (r->pin))
    ib_inflate_index_drop (r->store, &r->blob.digest);
  ib_digest blob, tar;
  ib_sha256_final (r->blob_hash, &blob);
  if (r->codec == IB_BLOB_PLAIN)
    tar = blob; /* the same bytes (produce_plain) */
  else
    ib_sha256_final (r->tar_hash, &tar);
  if (strcmp (blob.s, r->blob.digest.s) != 0)
    return ib_error (err, IB_EINTEGRITY, "layer blob %s: content has digest %s", r->blob.digest.s, blob.s);
  if (r->blob_size != r->blob.size)
    return ib_error (err, IB_EINTEGRITY, "layer blob %s: size is %llu, manifest says %llu", r->blob.digest.s,
                     (unsigned long long) r->blob_size, (unsigned long long) r->blob.size);
  if (r->have_diff_id && strcmp (tar.s, r->expected_diff_id.s) != 0)
    return ib_error (err, IB_EINTEGRITY, "layer blob %s: uncompressed digest %s, config says diff_id %s",
                     r->blob.digest.s, tar.s, r->expected_diff_id.s);
  if (diff_id)
    *diff_id = tar;
  r->copy_checked = r->copy != NULL;
  if (r->have_diff_id)
    ib_store_mark_hashed (r->store, &r->blob.digest);
  if (r->listed_all)
    keep_read_through (r, &tar);
  /* The blob is what its digest says: its checkpoints are its own. */
  ib_error_t e = NULL;
  if (r->record && ib_inflate_index_writer_commit (r->record, r->blob_size, &e) < 0)
    ib_error_release (&e);
  return 0;
}

struct ib_blob_writer *
ib_layer_reader_take_copy (struct ib_layer_reader *r)
{
  return r->copy_checked ? steal_pointer (&r->copy) : NULL;
}

struct ib_hash_worker *
ib_layer_reader_hash_worker (struct ib_layer_reader *r)
{
  return r->hw;
}

void
ib_layer_reader_free (struct ib_layer_reader *r)
{
  if (r == NULL)
    return;
  /* First: the workers may still be reading the rings' buffers and the
   * blob. */
  ib_hash_worker_free (r->hw);
  ib_pinflate_free (r->pin);
  ib_inflate_index_free (r->index);
  ib_inflate_index_writer_free (r->record);
  free (r->snap);
  if (r->a)
    archive_read_free (r->a);
  ib_gunzip_free (r->gz);
  if (r->zs)
    ZSTD_freeDStream (r->zs);
  if (r->fd >= 0)
    close (r->fd);
  ib_blob_writer_abort (r->copy);
  ib_sha256_free (r->blob_hash);
  ib_sha256_free (r->tar_hash);
  ib_tar_check_free (r->check);
  ib_descriptor_clear (&r->blob);
  ib_error_release (&r->pending);
  for (unsigned i = 0; i < IN_SLOTS; i++)
    free (r->in_ring[i].buf);
  for (unsigned i = 0; i < OUT_SLOTS; i++)
    free (r->out_ring[i].buf);
  free (r->path);
  free (r);
}
