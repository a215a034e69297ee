/* What GPU code a file holds: the fatbin containers of host ELF files
 * (.nv_fatbin, __nv_relfatbin of -rdc objects, and fatbins or cubins
 * embedded in other data sections), bare .cubin and .fatbin files.
 *
 * Formats (checked against nvcc 13.0 output in the tests):
 *   container: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 size
 *     of the entries that follow; containers follow one another, padded.
 *   entry: u16 kind (1 PTX, 2 ELF/cubin, 8 LTO-IR), u16 version, u32 header
 *     size, u64 payload size, u32 compressed size at +0x10, u32 SM at +0x1C,
 *     u64 flags at +0x28 (0x2000 LZ4, 0x8000 zstd; 0x100000 "a", 0x200000
 *     "f"), u64 uncompressed size at +0x38; the next entry starts after the
 *     entry's own header size plus its payload size.
 *   cubin: ELF with e_machine 190; SM in e_flags (bits 0-7 for ABI version
 *     7, 8-15 for 8); a kernel is an STT_FUNC symbol with STO_CUDA_ENTRY
 *     (0x10) in st_other; a bare cubin's a/f variant is in the ptxas
 *     command line of its .note.nv.tkinfo.
 * Memory stays bounded: a file is read a section at a time, and an entry's
 * payload is streamed (payload.h): a cubin's ELF header, section headers
 * and symbol tables are all that is kept of it, a PTX text a line at a time.
 * Entries of __nv_relfatbin (shared objects and objects built with -rdc)
 * are relocatable device code that nvlink consumes at build time; they are
 * listed, marked relocatable, and never count as code the runtime loads. */
#ifndef IB_CUDABIN_H
#define IB_CUDABIN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

enum ib_cuda_kind
{
  IB_CUDA_SASS,
  IB_CUDA_PTX,
  IB_CUDA_LTOIR,
};

struct ib_cuda_entry
{
  enum ib_cuda_kind kind;
  unsigned sm;       /* 121 for sm_121 / compute_121 */
  char variant;      /* 'a', 'f' or 0 */
  const char *compression; /* "none", "lz4", "zstd" */
  uint64_t size;     /* as stored */
  uint64_t uncompressed_size;
  bool relocatable;  /* from __nv_relfatbin (-rdc): input to nvlink, never loaded */
  unsigned ptx_major, ptx_minor; /* PTX: its .version (0.0 when absent) */
  size_t n_kernels;
  char **kernels;    /* __global__ entry points, as the symbol table names them */
  uint64_t offset, stored; /* where its stored bytes lie in the file, and how many (a compressed
                            * entry's size pads them): enough to read this one entry back alone */
};

struct ib_cuda_names;

struct ib_cuda_file
{
  size_t n;
  struct ib_cuda_entry *e;
  /* When set, it holds the entries' kernel names, each distinct name once,
   * shared by every entry that lists it (the arrays stay the entries' own):
   * libtorch_cuda.so names its 19,303 kernels 155,142 times, one per
   * architecture, 36 MB as copies and 4.5 MB kept once (`imgverify
   * --jit-budget` peaked at 76 MiB on them).  Every list that is kept
   * whole has one (an inspection's, a record read back); a streamed
   * inspection's entries own their names, and go with them. */
  struct ib_cuda_names *names;
};

/* NAME (LEN bytes, no NUL among them) as F's table keeps it, added when
 * new; the table is made by the first call and freed with F.  The copy
 * is shared: nobody changes or frees it. */
char *ib_cuda_names_intern (struct ib_cuda_file *f, const char *name, size_t len);

/* Inspect FD (WHAT names it in messages).  A file with no GPU code gives an
 * empty list; a damaged container or entry is an IB_EKERNELS error. */
int ib_cuda_inspect (int fd, const char *what, struct ib_cuda_file **out, ib_error_t *err);
void ib_cuda_file_free (struct ib_cuda_file *f);

/* The same, calling FN for each SASS entry once it is parsed, with its
 * index in the list and its payload (ib_payload_stream reads the cubin's
 * bytes, uncompressed): how a caller extracts the cubins it wants. */
struct ib_payload;
typedef int (*ib_cuda_sass_fn) (void *data, const struct ib_cuda_entry *e, size_t index,
                                const struct ib_payload *pl, ib_error_t *err);
int ib_cuda_inspect_each (int fd, const char *what, ib_cuda_sass_fn fn, void *data, struct ib_cuda_file **out,
                          ib_error_t *err);

/* The same, handing each entry (of any kind) to FN once it is whole, with
 * its index in the file's list, and then dropping it: no list is built,
 * so memory holds one entry's kernel names, however many the file has.
 * How a record is written while the file is inspected (kindex.h).  A
 * negative FN stops the inspection with its error. */
typedef int (*ib_cuda_entry_fn) (void *data, const struct ib_cuda_entry *e, size_t index, ib_error_t *err);
int ib_cuda_inspect_stream (int fd, const char *what, ib_cuda_entry_fn fn, void *data, ib_error_t *err);

/* The payload of E, read back from the file it was inspected in (FD, WHAT
 * names it in messages) by its recorded place: one entry, without reading
 * the rest of the file.  An entry that lies past the file's end is an
 * IB_EKERNELS error (E was not read from this content). */
int ib_cuda_entry_payload (const struct ib_cuda_entry *e, int fd, const char *what, struct ib_payload *out,
                           ib_error_t *err);

const char *ib_cuda_kind_name (enum ib_cuda_kind k);
/* "sm_121a", "compute_120", "ltoir_100" */
void ib_cuda_entry_arch (const struct ib_cuda_entry *e, char *buf, size_t n);

/* CUDA's binary compatibility: does SASS for SM/VARIANT run, without a JIT,
 * on a GPU of compute capability MAJOR.MINOR?  Plain sm_XY runs on X.Z for
 * every Z >= Y; sm_XYa only on X.Y; sm_XYf on its family, X.Z for Z >= Y. */
bool ib_sass_runs_on (unsigned sm, char variant, unsigned major, unsigned minor);

/* {"entries":[{"kind","sm","variant","compression","size","uncompressed_size",
 *  "offset","stored","relocatable","ptx_version" (PTX only),"kernels":[…]}]} */
cJSON *ib_cuda_file_json (const struct ib_cuda_file *f);
/* One entry of that list: how a caller writes a large file's list an
 * entry at a time (torch's 2,730 entries name 155,142 kernels: as one
 * tree and its text, 110 MB). */
cJSON *ib_cuda_entry_json (const struct ib_cuda_entry *e);
/* The inverse, for the per-content cache. */
int ib_cuda_file_from_json (const cJSON *j, struct ib_cuda_file **out, ib_error_t *err);

#endif
