#include "kernels/cudabin.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/strmap.h"
#include "kernels/payload.h"

#define FATBIN_MAGIC 0xBA55ED50u
#define EM_CUDA_ 190
#define STO_CUDA_ENTRY 0x10
#define FLAG_LZ4 0x2000ull
#define FLAG_ZSTD 0x8000ull
#define FLAG_ARCH_SPECIFIC 0x100000ull
#define FLAG_FAMILY 0x200000ull
#define MAX_ENTRY (2ull << 30) /* one cubin or PTX, uncompressed */
#define SCAN_CHUNK (1u << 20)

struct inspector
{
  int fd;
  const char *what;
  uint64_t file_size;
  struct ib_cuda_file *out;
  ib_error_t *err;
  bool relocatable; /* reading __nv_relfatbin */
  ib_cuda_sass_fn sass_fn; /* optional: each SASS entry's payload */
  void *sass_data;
  ib_cuda_entry_fn entry_fn; /* optional: each entry, then dropped (ib_cuda_inspect_stream) */
  void *entry_data;
  size_t dropped; /* entries handed to ENTRY_FN and dropped: OUT holds the ones after them */
  struct ib_payload_scratch *scratch; /* every entry's stream's buffers */
};

/* Hand a parsed SASS entry and its payload to the caller's function. */
static int
sass_done (struct inspector *in, const struct ib_payload *pl)
{
  if (in->sass_fn == NULL)
    return 0;
  size_t i = in->out->n - 1;
  return in->sass_fn (in->sass_data, &in->out->e[i], in->dropped + i, pl, in->err);
}

static void
entry_clear (struct ib_cuda_entry *e)
{
  for (size_t k = 0; k < e->n_kernels; k++)
    free (e->kernels[k]);
  free (e->kernels);
}

/* The last entry is whole: streaming, it goes to the caller's function
 * and out of memory, so that a file of 47,000 kernels (cuBLASLt) costs
 * one entry's names, not all of them. */
static int
entry_done (struct inspector *in)
{
  if (in->entry_fn == NULL)
    return 0;
  struct ib_cuda_file *f = in->out;
  int r = in->entry_fn (in->entry_data, &f->e[f->n - 1], in->dropped + f->n - 1, in->err);
  entry_clear (&f->e[--f->n]);
  in->dropped++;
  return r;
}

static int
pread_all (struct inspector *in, void *buf, size_t len, uint64_t off)
{
  if (off > in->file_size || len > in->file_size - off)
    return ib_error (in->err, IB_EKERNELS, "`%s`: data at %llu+%zu lies past the end of the file", in->what,
                     (unsigned long long) off, len);
  size_t got = 0;
  while (got < len)
    {
      ssize_t n = pread (in->fd, (char *) buf + got, len - got, (off_t) (off + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return ib_error_errno (in->err, n < 0 ? errno : EIO, IB_EENV, "read `%s`", in->what);
      got += (size_t) n;
    }
  return 0;
}

static struct ib_cuda_entry *
add_entry (struct ib_cuda_file *f)
{
  f->e = ib_xrealloc (f->e, (f->n + 1) * sizeof (*f->e));
  struct ib_cuda_entry *e = &f->e[f->n++];
  memset (e, 0, sizeof (*e));
  e->compression = "none";
  return e;
}

/* A kernel of E, whose file is OWNER: the name kept once in OWNER's table
 * (a list that is kept whole: libtorch_cuda.so names each kernel once per
 * architecture, 36 MB as copies), or, streaming (OWNER NULL), a copy that
 * goes with its entry. */
static void
add_kernel (struct ib_cuda_file *owner, struct ib_cuda_entry *e, const char *name, size_t len)
{
  e->kernels = ib_xrealloc (e->kernels, (e->n_kernels + 1) * sizeof (*e->kernels));
  e->kernels[e->n_kernels++] = owner ? ib_cuda_names_intern (owner, name, len) : strndup (name, len);
}

/* Where the inspection keeps its entries' names (add_kernel). */
static struct ib_cuda_file *
names_owner (const struct inspector *in)
{
  return in->entry_fn ? NULL : in->out;
}

/* ---- cubins (in memory: one entry's payload) ----------------------------- */

/* An ELF header inside a chunk or a byte array is copied out, never read
 * through a cast pointer (a misaligned access is undefined behaviour). */
static Elf64_Ehdr
ehdr_at (const unsigned char *p)
{
  Elf64_Ehdr eh;
  memcpy (&eh, p, sizeof (eh));
  return eh;
}

static bool
is_cuda_elf (const unsigned char *p, size_t n)
{
  return n >= sizeof (Elf64_Ehdr) && memcmp (p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64
         && ehdr_at (p).e_machine == EM_CUDA_;
}

/* "-arch sm_121a" in the ptxas command line that .note.nv.tkinfo keeps. */
static char
variant_from_note (const char *s, size_t len)
{
  for (size_t k = 0; k + 9 < len; k++)
    if (memcmp (s + k, "-arch sm_", 9) == 0)
      {
        size_t e = k + 9;
        while (e < len && s[e] >= '0' && s[e] <= '9')
          e++;
        return e < len && (s[e] == 'a' || s[e] == 'f') ? s[e] : 0;
      }
  return 0;
}

struct cubin_tables
{
  Elf64_Ehdr eh;
  Elf64_Shdr *sh;
  struct ib_payload_range *r; /* r[i]: section i's bytes when collected */
};

static void
cubin_tables_free (struct cubin_tables *t)
{
  for (unsigned i = 0; t->r && i < t->eh.e_shnum; i++)
    free (t->r[i].buf);
  free (t->r);
  free (t->sh);
}

static bool
section_in (const Elf64_Shdr *sh, uint64_t size)
{
  return sh->sh_type != SHT_NOBITS && sh->sh_offset <= size && sh->sh_size <= size - sh->sh_offset;
}

/* The cubin's ELF header and section headers, then (one more pass) the
 * sections the inspector reads: names, symbol tables and their strings,
 * notes.  Nothing else of the payload is kept. */
static int
cubin_read_tables (struct inspector *in, const struct ib_payload *pl, struct cubin_tables *t)
{
  struct ib_payload_range hr = { 0, sizeof (Elf64_Ehdr), NULL };
  if (pl->size < sizeof (Elf64_Ehdr))
    return ib_error (in->err, IB_EKERNELS, "`%s`: a cubin entry is not a CUDA ELF image", in->what);
  int r = ib_payload_collect (pl, &hr, 1, in->err);
  if (r == 0)
    memcpy (&t->eh, hr.buf, sizeof (t->eh));
  bool elf = r == 0 && is_cuda_elf (hr.buf, sizeof (Elf64_Ehdr));
  free (hr.buf);
  if (r < 0)
    return -1;
  if (!elf)
    return ib_error (in->err, IB_EKERNELS, "`%s`: a cubin entry is not a CUDA ELF image", in->what);
  const Elf64_Ehdr *eh = &t->eh;
  if (eh->e_shentsize != sizeof (Elf64_Shdr) || eh->e_shoff > pl->size
      || (uint64_t) eh->e_shnum * sizeof (Elf64_Shdr) > pl->size - eh->e_shoff)
    return ib_error (in->err, IB_EKERNELS, "`%s`: a cubin has no usable section headers", in->what);
  struct ib_payload_range sr = { eh->e_shoff, (uint64_t) eh->e_shnum * sizeof (Elf64_Shdr), NULL };
  if (ib_payload_collect (pl, &sr, 1, in->err) < 0)
    {
      free (sr.buf);
      return -1;
    }
  t->sh = (Elf64_Shdr *) sr.buf;
  t->r = ib_xcalloc (eh->e_shnum ? eh->e_shnum : 1, sizeof (*t->r));
  for (unsigned i = 0; i < eh->e_shnum; i++)
    {
      const Elf64_Shdr *s = &t->sh[i];
      bool want = i == eh->e_shstrndx || s->sh_type == SHT_SYMTAB
                  || (s->sh_type == SHT_NOTE && s->sh_size < (1u << 20));
      if (s->sh_type == SHT_SYMTAB && s->sh_link < eh->e_shnum && section_in (&t->sh[s->sh_link], pl->size))
        {
          t->r[s->sh_link].off = t->sh[s->sh_link].sh_offset;
          t->r[s->sh_link].len = t->sh[s->sh_link].sh_size;
        }
      if (want && section_in (s, pl->size))
        {
          t->r[i].off = s->sh_offset;
          t->r[i].len = s->sh_size;
        }
    }
  return ib_payload_collect (pl, t->r, eh->e_shnum, in->err);
}

/* Fill E (kind SASS) from a cubin.  SM and variant are taken from the
 * cubin only when E does not have them from its fatbin entry. */
static int
parse_cubin (struct inspector *in, const struct ib_payload *pl, struct ib_cuda_entry *e)
{
  __attribute__ ((cleanup (cubin_tables_free))) struct cubin_tables t = { 0 };
  if (cubin_read_tables (in, pl, &t) < 0)
    return -1;
  const Elf64_Ehdr *eh = &t.eh;
  if (e->sm == 0)
    e->sm = eh->e_ident[EI_ABIVERSION] >= 8 ? (eh->e_flags >> 8) & 0xff : eh->e_flags & 0xff;
  const char *shstr = eh->e_shstrndx < eh->e_shnum ? (const char *) t.r[eh->e_shstrndx].buf : NULL;
  size_t shstr_len = shstr ? t.r[eh->e_shstrndx].len : 0;
  for (unsigned i = 0; shstr && e->variant == 0 && i < eh->e_shnum; i++)
    if (t.sh[i].sh_type == SHT_NOTE && t.r[i].len && t.sh[i].sh_name < shstr_len
        && strcmp (shstr + t.sh[i].sh_name, ".note.nv.tkinfo") == 0)
      e->variant = variant_from_note ((const char *) t.r[i].buf, t.r[i].len);
  for (unsigned i = 0; i < eh->e_shnum; i++)
    {
      const Elf64_Shdr *sh = &t.sh[i];
      if (sh->sh_type != SHT_SYMTAB || sh->sh_entsize != sizeof (Elf64_Sym) || sh->sh_link >= eh->e_shnum
          || t.r[i].len == 0 || t.r[sh->sh_link].len == 0)
        continue;
      const Elf64_Sym *sym = (const Elf64_Sym *) t.r[i].buf;
      const char *str = (const char *) t.r[sh->sh_link].buf;
      size_t str_len = t.r[sh->sh_link].len;
      for (size_t k = 0; k < t.r[i].len / sizeof (Elf64_Sym); k++)
        if (ELF64_ST_TYPE (sym[k].st_info) == STT_FUNC && (sym[k].st_other & STO_CUDA_ENTRY)
            && sym[k].st_name < str_len)
          add_kernel (names_owner (in), e, str + sym[k].st_name,
                      strnlen (str + sym[k].st_name, str_len - sym[k].st_name));
    }
  return 0;
}

/* ---- PTX (streamed a line at a time) ---------------------------------- */

#define PTX_MAX_LINE (1u << 20)

static void
parse_ptx_line (const char *p, size_t n, struct ib_cuda_file *owner, struct ib_cuda_entry *e)
{
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t'))
    i++;
  if (e->ptx_major == 0 && n - i > 9 && memcmp (p + i, ".version", 8) == 0)
    {
      char v[32] = { 0 }; /* the line is not NUL-terminated */
      memcpy (v, p + i + 8, n - i - 8 < sizeof (v) - 1 ? n - i - 8 : sizeof (v) - 1);
      unsigned major, minor;
      if (sscanf (v, " %u.%u", &major, &minor) == 2)
        {
          e->ptx_major = major;
          e->ptx_minor = minor;
        }
    }
  for (; i + 7 < n; i++)
    {
      if (memcmp (p + i, ".entry", 6) != 0 || (i > 0 && p[i - 1] != ' ' && p[i - 1] != '\t')
          || (p[i + 6] != ' ' && p[i + 6] != '\t'))
        continue;
      size_t s = i + 6;
      while (s < n && (p[s] == ' ' || p[s] == '\t'))
        s++;
      size_t t = s;
      while (t < n && p[t] != '(' && p[t] != ' ' && p[t] != '\t' && p[t] != '\r')
        t++;
      if (t > s)
        add_kernel (owner, e, p + s, t - s);
      return;
    }
}

struct ptx_lines
{
  struct ib_cuda_file *owner;
  struct ib_cuda_entry *e;
  char *line;
  size_t len;
  size_t cap;    /* PTX_MAX_LINE, or the payload's size if smaller */
  bool too_long; /* the current line is past CAP: skipped */
};

static int
ptx_piece (void *data, const unsigned char *p, size_t n, uint64_t off, ib_error_t *err)
{
  (void) off;
  (void) err;
  struct ptx_lines *x = data;
  for (size_t i = 0; i < n;)
    {
      const unsigned char *nl = memchr (p + i, '\n', n - i);
      size_t end = nl ? (size_t) (nl - p) : n;
      if (!x->too_long && x->len + (end - i) <= x->cap)
        {
          memcpy (x->line + x->len, p + i, end - i);
          x->len += end - i;
        }
      else
        x->too_long = true;
      if (nl)
        {
          if (!x->too_long)
            parse_ptx_line (x->line, x->len, x->owner, x->e);
          x->len = 0;
          x->too_long = false;
        }
      i = end + (nl != NULL);
    }
  return 0;
}

static int
parse_ptx (const struct ib_payload *pl, struct ib_cuda_file *owner, struct ib_cuda_entry *e, ib_error_t *err)
{
  /* No line is longer than the payload: a small one needs a small buffer. */
  size_t cap = pl->size < PTX_MAX_LINE ? (size_t) pl->size : PTX_MAX_LINE;
  cleanup_free char *line = ib_xmalloc (cap + 1);
  struct ptx_lines x = { owner, e, line, 0, cap, false };
  if (ib_payload_stream (pl, ptx_piece, &x, err) < 0)
    return -1;
  if (x.len && !x.too_long)
    parse_ptx_line (x.line, x.len, owner, e);
  return 0;
}

/* ---- fatbin entries ------------------------------------------------------ */

/* How the entry's bytes are stored: by the flags, then by the payload's
 * magic (zstd), else a raw LZ4 block when the sizes say compressed. */
static int
entry_codec (struct inspector *in, uint64_t at, size_t stored, uint64_t flags, uint32_t csize, uint64_t usize,
             enum ib_payload_codec *codec)
{
  unsigned char m[4] = { 0 };
  if (stored >= 4 && pread_all (in, m, 4, at) < 0)
    return -1;
  bool zstd_magic = m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd;
  bool compressed = (flags & (FLAG_LZ4 | FLAG_ZSTD)) || (csize && usize > csize);
  *codec = !compressed ? IB_PAYLOAD_PLAIN : (flags & FLAG_ZSTD) || zstd_magic ? IB_PAYLOAD_ZSTD : IB_PAYLOAD_LZ4;
  return 0;
}

/* One entry at OFF; *NEXT receives the offset of the following one. */
static int
read_entry (struct inspector *in, uint64_t off, uint64_t end, uint64_t *next)
{
  unsigned char h[0x40] = { 0 };
  if (end - off < 16 || pread_all (in, h, 16, off) < 0)
    return ib_error (in->err, IB_EKERNELS, "`%s`: a fatbin entry header is cut at offset %llu", in->what,
                     (unsigned long long) off);
  uint16_t kind;
  uint32_t hsize;
  uint64_t psize;
  memcpy (&kind, h, 2);
  memcpy (&hsize, h + 4, 4);
  memcpy (&psize, h + 8, 8);
  if (hsize < 0x20 || hsize > 4096 || psize > end - off || hsize > end - off - psize)
    return ib_error (in->err, IB_EKERNELS, "`%s`: fatbin entry at offset %llu has impossible sizes", in->what,
                     (unsigned long long) off);
  if (pread_all (in, h, hsize < sizeof (h) ? hsize : sizeof (h), off) < 0)
    return -1;
  uint32_t csize = 0, arch = 0;
  uint64_t flags = 0, usize = 0;
  memcpy (&csize, h + 0x10, 4);
  memcpy (&arch, h + 0x1c, 4);
  if (hsize >= 0x30)
    memcpy (&flags, h + 0x28, 8);
  if (hsize >= 0x40)
    memcpy (&usize, h + 0x38, 8);
  *next = off + hsize + psize;
  if (kind != 1 && kind != 2 && kind != 8)
    return 0; /* another kind of payload (debug info, ...): not GPU code */
  struct ib_cuda_entry *e = add_entry (in->out);
  e->kind = kind == 2 ? IB_CUDA_SASS : kind == 1 ? IB_CUDA_PTX : IB_CUDA_LTOIR;
  e->sm = arch;
  e->variant = (flags & FLAG_ARCH_SPECIFIC) ? 'a' : (flags & FLAG_FAMILY) ? 'f' : 0;
  e->relocatable = in->relocatable;
  e->size = psize;
  size_t stored = csize && csize <= psize ? csize : psize;
  struct ib_payload pl = { in->fd, in->what, off + hsize, stored, stored, IB_PAYLOAD_PLAIN, in->scratch };
  if (entry_codec (in, pl.off, stored, flags, csize, usize, &pl.codec) < 0)
    return -1;
  if (pl.codec != IB_PAYLOAD_PLAIN)
    {
      if (usize > MAX_ENTRY)
        return ib_error (in->err, IB_EKERNELS, "`%s`: an entry claims %llu bytes uncompressed", in->what,
                         (unsigned long long) usize);
      pl.size = usize;
      e->compression = pl.codec == IB_PAYLOAD_ZSTD ? "zstd" : "lz4";
    }
  e->uncompressed_size = pl.size;
  e->offset = pl.off;
  e->stored = pl.stored;
  int r = e->kind == IB_CUDA_SASS  ? (parse_cubin (in, &pl, e) < 0 ? -1 : sass_done (in, &pl))
          : e->kind == IB_CUDA_PTX ? parse_ptx (&pl, names_owner (in), e, in->err)
                                   : 0;
  return r < 0 ? -1 : entry_done (in);
}

/* Fatbin containers from OFF to END, one after another; padding between
 * them is skipped 8 bytes at a time.  Returns the number found. */
static int
read_containers (struct inspector *in, uint64_t off, uint64_t end)
{
  int found = 0;
  while (off + 16 <= end)
    {
      unsigned char h[16];
      if (pread_all (in, h, 16, off) < 0)
        return -1;
      uint32_t magic;
      uint16_t hs;
      uint64_t size;
      memcpy (&magic, h, 4);
      memcpy (&hs, h + 6, 2);
      memcpy (&size, h + 8, 8);
      if (magic != FATBIN_MAGIC)
        {
          off += 8;
          continue;
        }
      if (hs < 16 || size > end - off || hs > end - off - size)
        return ib_error (in->err, IB_EKERNELS, "`%s`: fatbin container at offset %llu runs past its section",
                         in->what, (unsigned long long) off);
      found++;
      uint64_t e = off + hs, stop = off + hs + size;
      while (e < stop)
        {
          uint64_t next = stop;
          if (read_entry (in, e, stop, &next) < 0)
            return -1;
          e = next;
        }
      off = stop;
    }
  return found;
}

/* ---- host ELF files ------------------------------------------------------ */

/* How far a cubin reaches: its section and program header tables are
 * written last. */
static uint64_t
cubin_extent (const Elf64_Ehdr *eh)
{
  uint64_t sh = eh->e_shoff + (uint64_t) eh->e_shnum * eh->e_shentsize;
  uint64_t ph = eh->e_phoff + (uint64_t) eh->e_phnum * eh->e_phentsize;
  return sh > ph ? sh : ph;
}

/* A bare cubin (or one embedded at OFF): its extent from its header. */
static int
read_cubin_at (struct inspector *in, uint64_t off)
{
  Elf64_Ehdr eh;
  if (pread_all (in, &eh, sizeof (eh), off) < 0)
    return -1;
  uint64_t len = cubin_extent (&eh);
  if (len > MAX_ENTRY || len > in->file_size - off)
    return ib_error (in->err, IB_EKERNELS, "`%s`: cubin at offset %llu runs past the end", in->what,
                     (unsigned long long) off);
  struct ib_cuda_entry *e = add_entry (in->out);
  e->kind = IB_CUDA_SASS;
  e->size = e->uncompressed_size = e->stored = len;
  e->offset = off;
  struct ib_payload pl = { in->fd, in->what, off, len, len, IB_PAYLOAD_PLAIN, in->scratch };
  return parse_cubin (in, &pl, e) < 0 || sass_done (in, &pl) < 0 ? -1 : entry_done (in);
}

/* Fatbins or cubins inside a data section: looked for at 8-byte aligned
 * offsets, a chunk at a time, and validated by their headers. */
static int
scan_section (struct inspector *in, uint64_t off, uint64_t size)
{
  cleanup_free unsigned char *buf = ib_xmalloc ((size < SCAN_CHUNK ? (size_t) size : SCAN_CHUNK) + 8);
  for (uint64_t at = 0; at + 16 <= size;)
    {
      size_t n = size - at < SCAN_CHUNK ? (size_t) (size - at) : SCAN_CHUNK;
      if (pread_all (in, buf, n, off + at) < 0)
        return -1;
      bool jumped = false;
      for (size_t k = 0; k + 16 <= n && !jumped; k += 8)
        {
          uint32_t magic;
          memcpy (&magic, buf + k, 4);
          if (magic == FATBIN_MAGIC)
            {
              uint64_t csize;
              uint16_t hs;
              memcpy (&hs, buf + k + 6, 2);
              memcpy (&csize, buf + k + 8, 8);
              if (hs == 16 && csize <= size - at - k - hs)
                {
                  if (read_containers (in, off + at + k, off + at + k + hs + csize) < 0)
                    return -1;
                  at += k + hs + csize;
                  jumped = true;
                }
            }
          else if (k + sizeof (Elf64_Ehdr) <= n && is_cuda_elf (buf + k, n - k))
            {
              Elf64_Ehdr eh = ehdr_at (buf + k);
              uint64_t len = cubin_extent (&eh);
              if (len <= size - at - k)
                {
                  if (read_cubin_at (in, off + at + k) < 0)
                    return -1;
                  at += k + len;
                  jumped = true;
                }
            }
        }
      if (!jumped)
        at += n > 16 ? n - 8 : n;
    }
  return 0;
}

static int
inspect_host_elf (struct inspector *in, const Elf64_Ehdr *eh)
{
  if (eh->e_shentsize != sizeof (Elf64_Shdr) || eh->e_shnum == 0)
    return 0;
  cleanup_free Elf64_Shdr *sh = ib_xcalloc (eh->e_shnum, sizeof (*sh));
  if (pread_all (in, sh, eh->e_shnum * sizeof (*sh), eh->e_shoff) < 0)
    return -1;
  cleanup_free char *names = NULL;
  size_t names_len = 0;
  if (eh->e_shstrndx < eh->e_shnum && sh[eh->e_shstrndx].sh_size < (64u << 20))
    {
      names_len = sh[eh->e_shstrndx].sh_size;
      names = ib_xmalloc (names_len + 1);
      if (pread_all (in, names, names_len, sh[eh->e_shstrndx].sh_offset) < 0)
        return -1;
      names[names_len] = '\0';
    }
  bool any = false;
  for (unsigned i = 0; i < eh->e_shnum; i++)
    {
      const char *name = names && sh[i].sh_name < names_len ? names + sh[i].sh_name : "";
      if (sh[i].sh_type == SHT_NOBITS)
        continue;
      if (strcmp (name, ".nv_fatbin") == 0 || strcmp (name, "__nv_relfatbin") == 0)
        {
          /* -rdc objects: relocatable cubins that nvlink links, never what
           * the CUDA runtime loads. */
          in->relocatable = name[0] == '_';
          if (read_containers (in, sh[i].sh_offset, sh[i].sh_offset + sh[i].sh_size) < 0)
            return -1;
          any = true;
        }
    }
  if (any)
    return 0;
  /* No fatbin section: look for GPU code embedded in the data sections. */
  for (unsigned i = 0; i < eh->e_shnum; i++)
    {
      const char *name = names && sh[i].sh_name < names_len ? names + sh[i].sh_name : "";
      if (sh[i].sh_type == SHT_PROGBITS && !(sh[i].sh_flags & SHF_EXECINSTR) && strncmp (name, ".debug", 6) != 0
          && scan_section (in, sh[i].sh_offset, sh[i].sh_size) < 0)
        return -1;
    }
  return 0;
}

int
ib_cuda_inspect (int fd, const char *what, struct ib_cuda_file **out, ib_error_t *err)
{
  return ib_cuda_inspect_each (fd, what, NULL, NULL, out, err);
}

/* IN (its callbacks set) over its file: what the file holds into IN->OUT. */
static int
inspect_file (struct inspector *in)
{
  struct stat st;
  if (fstat (in->fd, &st) < 0)
    return ib_error_errno (in->err, errno, IB_EENV, "stat `%s`", in->what);
  in->file_size = (uint64_t) st.st_size;
  unsigned char head[sizeof (Elf64_Ehdr)] = { 0 };
  size_t n = in->file_size < sizeof (head) ? (size_t) in->file_size : sizeof (head);
  if (pread_all (in, head, n, 0) < 0)
    return -1;
  uint32_t magic = 0;
  memcpy (&magic, head, 4);
  if (magic == FATBIN_MAGIC)
    return read_containers (in, 0, in->file_size) < 0 ? -1 : 0;
  if (n == sizeof (head) && memcmp (head, ELFMAG, SELFMAG) == 0 && head[EI_CLASS] == ELFCLASS64
      && head[EI_DATA] == ELFDATA2LSB)
    {
      Elf64_Ehdr eh = ehdr_at (head);
      return eh.e_machine == EM_CUDA_ ? read_cubin_at (in, 0) : inspect_host_elf (in, &eh);
    }
  return 0;
}

static int
inspect (struct inspector *in)
{
  in->scratch = ib_payload_scratch_new ();
  int r = inspect_file (in);
  ib_payload_scratch_free (in->scratch);
  in->scratch = NULL;
  return r;
}

int
ib_cuda_inspect_each (int fd, const char *what, ib_cuda_sass_fn fn, void *data, struct ib_cuda_file **out,
                      ib_error_t *err)
{
  struct inspector in = { .fd = fd, .what = what, .err = err, .sass_fn = fn, .sass_data = data };
  in.out = ib_xcalloc (1, sizeof (struct ib_cuda_file));
  if (inspect (&in) < 0)
    {
      ib_cuda_file_free (in.out);
      return -1;
    }
  *out = in.out;
  return 0;
}

int
ib_cuda_inspect_stream (int fd, const char *what, ib_cuda_entry_fn fn, void *data, ib_error_t *err)
{
  struct inspector in = { .fd = fd, .what = what, .err = err, .entry_fn = fn, .entry_data = data };
  in.out = ib_xcalloc (1, sizeof (struct ib_cuda_file));
  int r = inspect (&in);
  ib_cuda_file_free (in.out); /* empty, or the entry that failed */
  return r;
}

/* ---- kernel names kept once ---------------------------------------------- */

/* The names live in chunks that never move (a name longer than a chunk
 * has one of its own), so that the map's keys stay where they are. */
#define NAMES_CHUNK (256u << 10)

struct names_chunk
{
  struct names_chunk *next;
  size_t used, cap;
  char s[];
};

struct ib_cuda_names
{
  struct ib_strmap *map;
  struct names_chunk *chunks;
  char **all; /* the copies, in the order added: the map's values index it */
  size_t n_all, cap_all;
  char *key; /* the name looked up, with its NUL */
  size_t key_cap;
};

static char *
names_store (struct ib_cuda_names *t, const char *name, size_t len)
{
  struct names_chunk *c = t->chunks;
  if (c == NULL || c->cap - c->used < len + 1)
    {
      size_t cap = len + 1 > NAMES_CHUNK ? len + 1 : NAMES_CHUNK;
      c = ib_xmalloc (sizeof (*c) + cap);
      c->used = 0;
      c->cap = cap;
      c->next = t->chunks;
      t->chunks = c;
    }
  char *s = c->s + c->used;
  memcpy (s, name, len);
  s[len] = '\0';
  c->used += len + 1;
  return s;
}

char *
ib_cuda_names_intern (struct ib_cuda_file *f, const char *name, size_t len)
{
  struct ib_cuda_names *t = f->names;
  if (t == NULL)
    {
      t = f->names = ib_xcalloc (1, sizeof (*t));
      t->map = ib_strmap_new ();
    }
  if (len + 1 > t->key_cap)
    {
      t->key_cap = len + 1 > 2 * t->key_cap ? len + 1 : 2 * t->key_cap;
      t->key = ib_xrealloc (t->key, t->key_cap);
    }
  memcpy (t->key, name, len);
  t->key[len] = '\0';
  size_t at;
  if (ib_strmap_get (t->map, t->key, &at))
    return t->all[at];
  if (t->n_all == t->cap_all)
    {
      t->cap_all = t->cap_all ? 2 * t->cap_all : 256;
      t->all = ib_xrealloc (t->all, t->cap_all * sizeof (*t->all));
    }
  char *s = names_store (t, name, len);
  t->all[t->n_all] = s;
  ib_strmap_put (t->map, s, t->n_all++);
  return s;
}

static void
names_free (struct ib_cuda_names *t)
{
  if (t == NULL)
    return;
  for (struct names_chunk *c = t->chunks, *next; c; c = next)
    {
      next = c->next;
      free (c);
    }
  ib_strmap_free (t->map);
  free (t->all);
  free (t->key);
  free (t);
}

void
ib_cuda_file_free (struct ib_cuda_file *f)
{
  if (f == NULL)
    return;
  for (size_t i = 0; i < f->n; i++)
    if (f->names)
      free (f->e[i].kernels); /* the names are the table's */
    else
      entry_clear (&f->e[i]);
  free (f->e);
  names_free (f->names);
  free (f);
}

int
ib_cuda_entry_payload (const struct ib_cuda_entry *e, int fd, const char *what, struct ib_payload *out,
                       ib_error_t *err)
{
  struct stat st;
  if (fstat (fd, &st) < 0)
    return ib_error_errno (err, errno, IB_EENV, "stat `%s`", what);
  uint64_t size = (uint64_t) st.st_size;
  if (e->stored == 0 || e->offset > size || e->stored > size - e->offset)
    return ib_error (err, IB_EKERNELS, "`%s`: no entry of %llu bytes at offset %llu (the file is %llu bytes)", what,
                     (unsigned long long) e->stored, (unsigned long long) e->offset, (unsigned long long) size);
  enum ib_payload_codec c = strcmp (e->compression, "zstd") == 0  ? IB_PAYLOAD_ZSTD
                            : strcmp (e->compression, "lz4") == 0 ? IB_PAYLOAD_LZ4
                                                                  : IB_PAYLOAD_PLAIN;
  *out = (struct ib_payload){ fd, what, e->offset, e->stored, e->uncompressed_size, c, NULL };
  return 0;
}

const char *
ib_cuda_kind_name (enum ib_cuda_kind k)
{
  return k == IB_CUDA_SASS ? "sass" : k == IB_CUDA_PTX ? "ptx" : "ltoir";
}

void
ib_cuda_entry_arch (const struct ib_cuda_entry *e, char *buf, size_t n)
{
  const char *prefix = e->kind == IB_CUDA_SASS ? "sm" : e->kind == IB_CUDA_PTX ? "compute" : "ltoir";
  snprintf (buf, n, "%s_%u%s", prefix, e->sm, e->variant == 'a' ? "a" : e->variant == 'f' ? "f" : "");
}

bool
ib_sass_runs_on (unsigned sm, char variant, unsigned major, unsigned minor)
{
  unsigned m = sm / 10, n = sm % 10;
  if (variant == 'a')
    return m == major && n == minor;
  return m == major && minor >= n;
}

cJSON *
ib_cuda_entry_json (const struct ib_cuda_entry *e)
{
  cJSON *j = cJSON_CreateObject ();
  char v[2] = { e->variant, 0 };
  cJSON_AddStringToObject (j, "kind", ib_cuda_kind_name (e->kind));
  cJSON_AddNumberToObject (j, "sm", e->sm);
  cJSON_AddStringToObject (j, "variant", v);
  cJSON_AddStringToObject (j, "compression", e->compression);
  cJSON_AddNumberToObject (j, "size", (double) e->size);
  cJSON_AddNumberToObject (j, "uncompressed_size", (double) e->uncompressed_size);
  cJSON_AddNumberToObject (j, "offset", (double) e->offset);
  cJSON_AddNumberToObject (j, "stored", (double) e->stored);
  cJSON_AddBoolToObject (j, "relocatable", e->relocatable);
  if (e->kind == IB_CUDA_PTX)
    {
      char pv[24];
      snprintf (pv, sizeof (pv), "%u.%u", e->ptx_major, e->ptx_minor);
      cJSON_AddStringToObject (j, "ptx_version", pv);
    }
  cJSON *k = cJSON_AddArrayToObject (j, "kernels");
  for (size_t x = 0; x < e->n_kernels; x++)
    cJSON_AddItemToArray (k, cJSON_CreateString (e->kernels[x]));
  return j;
}

cJSON *
ib_cuda_file_json (const struct ib_cuda_file *f)
{
  cJSON *o = cJSON_CreateObject ();
  cJSON *entries = cJSON_AddArrayToObject (o, "entries");
  for (size_t i = 0; i < f->n; i++)
    cJSON_AddItemToArray (entries, ib_cuda_entry_json (&f->e[i]));
  return o;
}

/* A byte count or offset; 0 when absent or not one (NaN must not reach a cast). */
static uint64_t
json_u64 (const cJSON *n)
{
  double v = cJSON_IsNumber (n) ? n->valuedouble : 0;
  return v >= 0 && v < 18446744073709551616.0 ? (uint64_t) v : 0;
}

int
ib_cuda_file_from_json (const cJSON *j, struct ib_cuda_file **out, ib_error_t *err)
{
  const cJSON *entries = cJSON_GetObjectItemCaseSensitive (j, "entries");
  if (!cJSON_IsArray (entries))
    return ib_error (err, IB_EINTEGRITY, "kernel cache entry without entries");
  struct ib_cuda_file *f = ib_xcalloc (1, sizeof (*f));
  const cJSON *x;
  cJSON_ArrayForEach (x, entries)
  {
    struct ib_cuda_entry *e = add_entry (f);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive (x, "kind");
    const cJSON *variant = cJSON_GetObjectItemCaseSensitive (x, "variant");
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive (x, "compression");
    const char *k = cJSON_IsString (kind) ? kind->valuestring : "";
    e->kind = strcmp (k, "sass") == 0 ? IB_CUDA_SASS : strcmp (k, "ptx") == 0 ? IB_CUDA_PTX : IB_CUDA_LTOIR;
    e->sm = (unsigned) cJSON_GetNumberValue (cJSON_GetObjectItemCaseSensitive (x, "sm"));
    e->variant = cJSON_IsString (variant) ? variant->valuestring[0] : 0;
    const char *c = cJSON_IsString (comp) ? comp->valuestring : "none";
    e->compression = strcmp (c, "zstd") == 0 ? "zstd" : strcmp (c, "lz4") == 0 ? "lz4" : "none";
    e->size = (uint64_t) cJSON_GetNumberValue (cJSON_GetObjectItemCaseSensitive (x, "size"));
    e->uncompressed_size = (uint64_t) cJSON_GetNumberValue (cJSON_GetObjectItemCaseSensitive (x, "uncompressed_size"));
    e->offset = json_u64 (cJSON_GetObjectItemCaseSensitive (x, "offset"));
    e->stored = json_u64 (cJSON_GetObjectItemCaseSensitive (x, "stored"));
    e->relocatable = cJSON_IsTrue (cJSON_GetObjectItemCaseSensitive (x, "relocatable"));
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive (x, "ptx_version");
    if (cJSON_IsString (pv))
      sscanf (pv->valuestring, "%u.%u", &e->ptx_major, &e->ptx_minor);
    const cJSON *kn;
    cJSON_ArrayForEach (kn, cJSON_GetObjectItemCaseSensitive (x, "kernels"))
    {
      if (cJSON_IsString (kn))
        add_kernel (f, e, kn->valuestring, strlen (kn->valuestring));
    }
  }
  *out = f;
  return 0;
}
