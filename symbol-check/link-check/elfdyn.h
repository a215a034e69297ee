/* What the dynamic loader needs to know of one ELF object, and nothing
 * more: its machine, SONAME, DT_NEEDED, DT_RPATH/DT_RUNPATH, DF_1_NODEFLIB,
 * the symbols it defines (with the version index and hidden bit that
 * glibc's do_lookup_x matches on), the undefined non-weak symbols that a
 * dynamic relocation binds (with the version and file from
 * .gnu.version_r; one that no relocation names is never looked up), the
 * versions it needs (verneed) and the versions it defines (verdef).
 *
 * 64-bit little-endian objects of any machine (32-bit ones give their
 * machine only, which is all the loader looks at before skipping them) (x86-64 and aarch64 on the
 * same host: nothing is run), read section by section with pread, never
 * whole.  A record is also a small text, so that the link gate caches it by
 * the file's content digest and a warm build reads no layer. */
#ifndef IB_ELFDYN_H
#define IB_ELFDYN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

struct ib_elf_def
{
  char *name;
  char *version;     /* the non-base verdef of its index; NULL when none */
  unsigned ndx;      /* .gnu.version index (0x7fff bits); 1 when unversioned */
  bool hidden;       /* the 0x8000 bit: only a lookup of that version finds it */
};

struct ib_elf_ref
{
  char *name;
  char *version; /* NULL: an unversioned reference */
  char *file;    /* the verneed file the version is looked for in, or NULL */
};

struct ib_elf_verneed
{
  char *file, *version;
  bool weak;
};

struct ib_elf_link
{
  unsigned machine;  /* e_machine: 62 x86-64, 183 aarch64 */
  unsigned type;     /* e_type: 2 executable, 3 shared object or PIE */
  bool nodeflib;     /* DF_1_NODEFLIB: no ld.so.cache, no default folders */
  bool has_versym;   /* a .gnu.version table: version rules apply to its definitions */
  bool elf32;        /* a 32-bit object: only MACHINE and TYPE are read */
  char *soname;      /* NULL when none */
  char *rpath, *runpath;
  size_t n_needed;
  char **needed;
  size_t n_defs;
  struct ib_elf_def *defs; /* sorted by name (then index) */
  size_t n_refs;
  struct ib_elf_ref *refs; /* undefined, non-weak, in .dynsym order */
  size_t n_verneed;
  struct ib_elf_verneed *verneed;
  size_t n_verdefs;
  char **verdefs; /* every verdef name, the base (the SONAME) included */
  /* The text a record was made from (its cache text) or the ELF file's
   * string table it was read from: every string above points into it
   * (one allocation, not one per symbol name: libtorch's record has some
   * 10^5); NULL when each string is its own (a head). */
  char *arena;
  size_t arena_size;
  /* A head (ib_elf_link_head): no DEFS nor REFS, but the hashes of the
   * names defined (ib_elf_name_hash), sorted, each once; NULL in a whole
   * record. */
  uint32_t *hashes;
  size_t n_hashes;
};

/* 0 and *OUT, or -1: not an ELF object (IB_ESYMBOLS), not 64-bit
 * little-endian (IB_ESYMBOLS), damaged (IB_EINTEGRITY), I/O (IB_EENV). */
int ib_elf_link_read (int fd, const char *what, struct ib_elf_link **out, ib_error_t *err);
void ib_elf_link_free (struct ib_elf_link *l);

/* The record as text (the cache), and back; NULL when TEXT is not a whole
 * record of this format.  From text: TEXT (from malloc) becomes the
 * record's on success, its strings point into it, ib_elf_link_free frees
 * it; on failure it is still the caller's, changed. */
char *ib_elf_link_to_text (const struct ib_elf_link *l, size_t *len);
/* The same text written to F (the cache file, streamed: libtorch's record
 * is 6.4 MB of text, which the file-list pass need not hold); -1 when F
 * has an error. */
int ib_elf_link_write_text (const struct ib_elf_link *l, FILE *f);
struct ib_elf_link *ib_elf_link_from_text (char *text);

/* What the loader reads of L, without its symbols (the bulk of a record:
 * libtorch_cpu's is 3.8 MB): every field but DEFS and REFS (N_DEFS and
 * N_REFS 0), each string its own, and the hashes of the names L defines,
 * 4 bytes a name, so that a lookup needs the whole record only of the
 * objects that may define the name. */
struct ib_elf_link *ib_elf_link_head (const struct ib_elf_link *l);
uint32_t ib_elf_name_hash (const char *name);
/* The hashes of the names L (a head or a whole record) defines, sorted,
 * each once: *N of them, the array from malloc. */
uint32_t *ib_elf_link_hashes (const struct ib_elf_link *l, size_t *n);
/* The bytes L holds in memory, its text and arrays. */
size_t ib_elf_link_bytes (const struct ib_elf_link *l);

/* The first definition named NAME (the others follow it), or NULL. */
const struct ib_elf_def *ib_elf_link_find (const struct ib_elf_link *l, const char *name, size_t *count);
/* Does L satisfy REF, by glibc's version rules (dl-lookup.c check_match)? */
bool ib_elf_link_satisfies (const struct ib_elf_link *l, const struct ib_elf_ref *ref);
bool ib_elf_link_defines_version (const struct ib_elf_link *l, const char *version);

/* "x86-64", "aarch64", or "machine N" in BUF. */
const char *ib_elf_machine_name (unsigned machine, char buf[32]);

#endif
