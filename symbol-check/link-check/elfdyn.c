#include "symbol-check/link-check/elfdyn.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "util/strmap.h"

#define MAX_SECTION (1024u << 20)
#define TEXT_MAGIC "imgbuild-elflink 2"
#define TEXT_END "\x01end"

/* ---- reading ------------------------------------------------------------- */

struct sect
{
  char *data;
  size_t size;
};

/* Section I of SH (any type), NUL-terminated; an absent one is empty. */
static int
read_section (int fd, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, int i, const char *what, struct sect *out,
              ib_error_t *err)
{
  out->data = NULL;
  out->size = 0;
  if (i < 0 || i >= eh->e_shnum || sh[i].sh_type == SHT_NOBITS)
    return 0;
  if (sh[i].sh_size > MAX_SECTION)
    return ib_error (err, IB_EINTEGRITY, "`%s`: an ELF section of %llu bytes", what,
                     (unsigned long long) sh[i].sh_size);
  out->data = ib_xmalloc (sh[i].sh_size + 1);
  out->size = sh[i].sh_size;
  out->data[out->size] = '\0';
  if (ib_elf_read_at (fd, out->data, out->size, sh[i].sh_offset, what, err) < 0)
    {
      free (out->data);
      out->data = NULL;
      return -1;
    }
  return 0;
}

/* A string of the table, where it lies: the record keeps the table as its
 * arena (one allocation, not one per name: libtorch's 10^5 names were
 * 3.2 MB of strings beside the table they were copied from, in the
 * file-list pass's peak). */
static char *
str_at (const struct sect *strtab, uint64_t off)
{
  if (strtab->data == NULL || off >= strtab->size)
    return NULL;
  return strtab->data + off;
}

/* Tabs and newlines (which no sane name has) made harmless for the
 * cache's line format, in the whole table at once: every string of it
 * reads as its copy so cleaned did. */
static void
clean_strings (struct sect *strtab)
{
  for (size_t i = 0; i < strtab->size; i++)
    if (strtab->data[i] == '\n' || strtab->data[i] == '\t')
      strtab->data[i] = '?';
}

struct parse
{
  struct ib_elf_link *l;
  struct sect dynstr, syms, versym, verdef, verneed, dyn;
  char **verdef_by_ndx; /* non-base verdef names by index */
  struct ib_elf_verneed **verneed_by_ndx;
  size_t n_ndx;
  /* The .dynsym indexes a dynamic relocation names (REL or RELA sections
   * linked to .dynsym, the PLT's included); NULL when the object has no
   * such section, and then every undefined symbol counts. */
  unsigned char *relocated;
};

static void
parse_clear (struct parse *p)
{
  free (p->dynstr.data);
  free (p->syms.data);
  free (p->versym.data);
  free (p->verdef.data);
  free (p->verneed.data);
  free (p->dyn.data);
  free (p->verdef_by_ndx);
  free (p->verneed_by_ndx);
  free (p->relocated);
}

static void
push_str (char ***list, size_t *n, char *s)
{
  if (s == NULL)
    return;
  *list = ib_xrealloc (*list, (*n + 1) * sizeof (**list));
  (*list)[(*n)++] = s;
}

static void
parse_dynamic (struct parse *p)
{
  struct ib_elf_link *l = p->l;
  const Elf64_Dyn *d = (const Elf64_Dyn *) p->dyn.data;
  size_t n = p->dyn.size / sizeof (Elf64_Dyn);
  for (size_t i = 0; d && i < n && d[i].d_tag != DT_NULL; i++)
    switch (d[i].d_tag)
      {
      case DT_NEEDED:
        push_str (&l->needed, &l->n_needed, str_at (&p->dynstr, d[i].d_un.d_val));
        break;
      case DT_SONAME:
        l->soname = str_at (&p->dynstr, d[i].d_un.d_val);
        break;
      case DT_RPATH:
        l->rpath = str_at (&p->dynstr, d[i].d_un.d_val);
        break;
      case DT_RUNPATH:
        l->runpath = str_at (&p->dynstr, d[i].d_un.d_val);
        break;
      case DT_FLAGS_1:
        l->nodeflib = (d[i].d_un.d_val & DF_1_NODEFLIB) != 0;
        break;
      default:
        break;
      }
}

/* The verdef chain: every name into L->verdefs, the non-base ones by index. */
static void
parse_verdef (struct parse *p)
{
  size_t off = 0;
  for (int guard = 0; p->verdef.data && off + sizeof (Elf64_Verdef) <= p->verdef.size && guard < 65536; guard++)
    {
      const Elf64_Verdef *vd = (const Elf64_Verdef *) (p->verdef.data + off);
      if (vd->vd_aux && off + vd->vd_aux + sizeof (Elf64_Verdaux) <= p->verdef.size)
        {
          const Elf64_Verdaux *aux = (const Elf64_Verdaux *) (p->verdef.data + off + vd->vd_aux);
          char *name = str_at (&p->dynstr, aux->vda_name);
          unsigned ndx = vd->vd_ndx & 0x7fff;
          if (name && !(vd->vd_flags & VER_FLG_BASE) && ndx < p->n_ndx)
            p->verdef_by_ndx[ndx] = name;
          push_str (&p->l->verdefs, &p->l->n_verdefs, name);
        }
      if (vd->vd_next == 0)
        break;
      off += vd->vd_next;
    }
}

static void
parse_verneed (struct parse *p)
{
  struct ib_elf_link *l = p->l;
  cleanup_free unsigned *ndx_of = NULL;
  size_t off = 0;
  for (int guard = 0; p->verneed.data && off + sizeof (Elf64_Verneed) <= p->verneed.size && guard < 65536; guard++)
    {
      const Elf64_Verneed *vn = (const Elf64_Verneed *) (p->verneed.data + off);
      size_t aoff = off + vn->vn_aux;
      for (unsigned k = 0; k < vn->vn_cnt && aoff + sizeof (Elf64_Vernaux) <= p->verneed.size; k++)
        {
          const Elf64_Vernaux *a = (const Elf64_Vernaux *) (p->verneed.data + aoff);
          char *file = str_at (&p->dynstr, vn->vn_file), *ver = str_at (&p->dynstr, a->vna_name);
          if (file && ver)
            {
              l->verneed = ib_xrealloc (l->verneed, (l->n_verneed + 1) * sizeof (*l->verneed));
              ndx_of = ib_xrealloc (ndx_of, (l->n_verneed + 1) * sizeof (*ndx_of));
              ndx_of[l->n_verneed] = a->vna_other & 0x7fff;
              l->verneed[l->n_verneed++] = (struct ib_elf_verneed){ file, ver, (a->vna_flags & VER_FLG_WEAK) != 0 };
            }
          if (a->vna_next == 0)
            break;
          aoff += a->vna_next;
        }
      if (vn->vn_next == 0)
        break;
      off += vn->vn_next;
    }
  /* Indexes point into the final array: filled once it stopped moving. */
  for (size_t i = 0; i < l->n_verneed; i++)
    if (ndx_of[i] < p->n_ndx)
      p->verneed_by_ndx[ndx_of[i]] = &l->verneed[i];
}

/* glibc's check_match: which definitions a lookup may ever return. */
static bool
usable_definition (const Elf64_Sym *s)
{
  unsigned type = ELF64_ST_TYPE (s->st_info), bind = ELF64_ST_BIND (s->st_info);
  if (s->st_shndx == SHN_UNDEF)
    return false;
  if (s->st_value == 0 && type != STT_TLS && s->st_shndx != SHN_ABS)
    return false;
  if (type != STT_NOTYPE && type != STT_OBJECT && type != STT_FUNC && type != STT_COMMON && type != STT_TLS
      && type != STT_GNU_IFUNC)
    return false;
  return bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
}

static void
parse_symbols (struct parse *p)
{
  struct ib_elf_link *l = p->l;
  size_t n = p->syms.size / sizeof (Elf64_Sym);
  const uint16_t *vs = (const uint16_t *) p->versym.data;
  size_t n_vs = p->versym.size / 2;
  l->has_versym = vs != NULL;
  for (size_t i = 1; i < n; i++)
    {
      const Elf64_Sym *s = (const Elf64_Sym *) p->syms.data + i;
      char *name = str_at (&p->dynstr, s->st_name);
      if (name == NULL || !*name)
        continue;
      unsigned v = vs && i < n_vs ? vs[i] : 1, ndx = v & 0x7fff;
      if (s->st_shndx == SHN_UNDEF)
        {
          if (ELF64_ST_BIND (s->st_info) != STB_GLOBAL)
            continue; /* weak: absence is allowed */
          if (p->relocated && !p->relocated[i])
            continue; /* no relocation binds it: ld.so never looks it up, nor does ldd -r report it */
          const struct ib_elf_verneed *vn = ndx > 1 && ndx < p->n_ndx ? p->verneed_by_ndx[ndx] : NULL;
          l->refs = ib_xrealloc (l->refs, (l->n_refs + 1) * sizeof (*l->refs));
          l->refs[l->n_refs++] = (struct ib_elf_ref){ name, vn ? vn->version : NULL, vn ? vn->file : NULL };
          continue;
        }
      if (!usable_definition (s))
        continue;
      char *ver = ndx < p->n_ndx ? p->verdef_by_ndx[ndx] : NULL;
      l->defs = ib_xrealloc (l->defs, (l->n_defs + 1) * sizeof (*l->defs));
      l->defs[l->n_defs++] = (struct ib_elf_def){ name, ver, ndx, (v & 0x8000) != 0 };
    }
}

static int
cmp_def (const void *a, const void *b)
{
  const struct ib_elf_def *x = a, *y = b;
  int c = strcmp (x->name, y->name);
  return c ? c : (int) x->ndx - (int) y->ndx;
}

/* The .dynsym indexes that the relocation sections linked to DYNSYM name,
 * read 64 KiB at a time (libtorch_cpu's .rela.dyn is megabytes). */
static int
read_relocated (int fd, const char *what, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, int dynsym, struct parse *p,
                ib_error_t *err)
{
  size_t n_syms = dynsym >= 0 ? sh[dynsym].sh_size / sizeof (Elf64_Sym) : 0;
  cleanup_free char *buf = NULL;
  for (int i = 0; dynsym >= 0 && i < eh->e_shnum; i++)
    {
      size_t ent = sh[i].sh_type == SHT_RELA ? sizeof (Elf64_Rela) : sh[i].sh_type == SHT_REL ? sizeof (Elf64_Rel) : 0;
      if (ent == 0 || sh[i].sh_link != (unsigned) dynsym || sh[i].sh_entsize != ent)
        continue;
      if (p->relocated == NULL)
        p->relocated = ib_xcalloc (n_syms + 1, 1);
      if (buf == NULL)
        buf = ib_xmalloc (4096 * sizeof (Elf64_Rela));
      size_t per = 4096 * sizeof (Elf64_Rela) / ent, total = sh[i].sh_size / ent;
      for (size_t at = 0; at < total; at += per)
        {
          size_t k = total - at < per ? total - at : per;
          if (ib_elf_read_at (fd, buf, k * ent, sh[i].sh_offset + at * ent, what, err) < 0)
            return -1;
          for (size_t r = 0; r < k; r++)
            {
              /* r_info is the second word of both forms. */
              uint64_t info;
              memcpy (&info, buf + r * ent + sizeof (uint64_t), sizeof (info));
              size_t sym = ELF64_R_SYM (info);
              if (sym > 0 && sym < n_syms)
                p->relocated[sym] = 1;
            }
        }
    }
  return 0;
}

static int
read_tables (int fd, const char *what, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, struct parse *p,
             ib_error_t *err)
{
  int dynsym = -1, dynamic = -1, versym = -1, verdef = -1, verneed = -1;
  for (int i = 0; i < eh->e_shnum; i++)
    switch (sh[i].sh_type)
      {
      case SHT_DYNSYM: dynsym = i; break;
      case SHT_DYNAMIC: dynamic = i; break;
      case SHT_GNU_versym: versym = i; break;
      case SHT_GNU_verdef: verdef = i; break;
      case SHT_GNU_verneed: verneed = i; break;
      default: break;
      }
  int strtab = dynamic >= 0 ? (int) sh[dynamic].sh_link : dynsym >= 0 ? (int) sh[dynsym].sh_link : -1;
  if ((dynsym >= 0 && sh[dynsym].sh_entsize != sizeof (Elf64_Sym)) || strtab >= eh->e_shnum)
    return ib_error (err, IB_EINTEGRITY, "`%s`: malformed dynamic symbol table", what);
  if (read_section (fd, eh, sh, strtab, what, &p->dynstr, err) < 0
      || read_section (fd, eh, sh, dynamic, what, &p->dyn, err) < 0
      || read_section (fd, eh, sh, dynsym, what, &p->syms, err) < 0
      || read_section (fd, eh, sh, versym, what, &p->versym, err) < 0
      || read_section (fd, eh, sh, verdef, what, &p->verdef, err) < 0
      || read_section (fd, eh, sh, verneed, what, &p->verneed, err) < 0
      || read_relocated (fd, what, eh, sh, dynsym, p, err) < 0)
    return -1;
  return 0;
}

int
ib_elf_link_read (int fd, const char *what, struct ib_elf_link **out, ib_error_t *err)
{
  Elf64_Ehdr eh;
  ssize_t got = pread (fd, &eh, sizeof (eh), 0);
  if (got < 0)
    return ib_error_errno (err, errno, IB_EENV, "read `%s`", what);
  if ((size_t) got < SELFMAG || memcmp (eh.e_ident, ELFMAG, SELFMAG) != 0)
    return ib_error (err, IB_ESYMBOLS, "`%s` is not an ELF file", what);
  if ((size_t) got >= sizeof (Elf32_Ehdr) && eh.e_ident[EI_CLASS] == ELFCLASS32 && eh.e_ident[EI_DATA] == ELFDATA2LSB)
    {
      /* Another class: the loader skips it, the gate names its machine. */
      *out = ib_xcalloc (1, sizeof (struct ib_elf_link));
      (*out)->machine = ((const Elf32_Ehdr *) &eh)->e_machine;
      (*out)->type = ((const Elf32_Ehdr *) &eh)->e_type;
      (*out)->elf32 = true;
      return 0;
    }
  if ((size_t) got < sizeof (eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return ib_error (err, IB_ESYMBOLS, "`%s` is not a 64-bit little-endian ELF file", what);
  if (eh.e_shentsize != sizeof (Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 65000)
    return ib_error (err, IB_EINTEGRITY, "`%s` has no usable section headers", what);
  cleanup_free Elf64_Shdr *sh = ib_xcalloc (eh.e_shnum, sizeof (*sh));
  if (ib_elf_read_at (fd, sh, eh.e_shnum * sizeof (*sh), eh.e_shoff, what, err) < 0)
    return -1;
  struct parse p = { .l = ib_xcalloc (1, sizeof (struct ib_elf_link)) };
  p.l->machine = eh.e_machine;
  p.l->type = eh.e_type;
  if (read_tables (fd, what, &eh, sh, &p, err) < 0)
    {
      parse_clear (&p);
      ib_elf_link_free (p.l);
      return -1;
    }
  clean_strings (&p.dynstr);
  p.n_ndx = 0x8000;
  p.verdef_by_ndx = ib_xcalloc (p.n_ndx, sizeof (*p.verdef_by_ndx));
  p.verneed_by_ndx = ib_xcalloc (p.n_ndx, sizeof (*p.verneed_by_ndx));
  parse_dynamic (&p);
  parse_verdef (&p);
  parse_verneed (&p);
  parse_symbols (&p);
  ib_qsort (p.l->defs, p.l->n_defs, sizeof (*p.l->defs), cmp_def);
  /* The record's strings all lie in the string table: it is the arena. */
  p.l->arena_size = p.dynstr.data ? p.dynstr.size + 1 : 0;
  p.l->arena = steal_pointer (&p.dynstr.data);
  *out = p.l;
  parse_clear (&p);
  return 0;
}

/* The strings of a record read from an ELF file: each its own. */
static void
free_strings (struct ib_elf_link *l)
{
  free (l->soname);
  free (l->rpath);
  free (l->runpath);
  for (size_t i = 0; i < l->n_needed; i++)
    free (l->needed[i]);
  for (size_t i = 0; i < l->n_defs; i++)
    {
      free (l->defs[i].name);
      free (l->defs[i].version);
    }
  for (size_t i = 0; i < l->n_refs; i++)
    {
      free (l->refs[i].name);
      free (l->refs[i].version);
      free (l->refs[i].file);
    }
  for (size_t i = 0; i < l->n_verneed; i++)
    {
      free (l->verneed[i].file);
      free (l->verneed[i].version);
    }
  for (size_t i = 0; i < l->n_verdefs; i++)
    free (l->verdefs[i]);
}

/* The record and its arrays, not the strings they point to. */
static void
free_arrays (struct ib_elf_link *l)
{
  free (l->needed);
  free (l->defs);
  free (l->refs);
  free (l->verneed);
  free (l->verdefs);
  free (l->hashes);
  free (l);
}

void
ib_elf_link_free (struct ib_elf_link *l)
{
  if (l == NULL)
    return;
  if (l->arena == NULL)
    free_strings (l);
  free (l->arena);
  free_arrays (l);
}

/* ---- the cache text ------------------------------------------------------ */

static const char *
or_empty (const char *s)
{
  return s ? s : "";
}

int
ib_elf_link_write_text (const struct ib_elf_link *l, FILE *f)
{
  fprintf (f, "%s machine=%u type=%u nodeflib=%d versym=%d elf32=%d\n", TEXT_MAGIC, l->machine, l->type,
           l->nodeflib, l->has_versym, l->elf32);
  if (l->soname)
    fprintf (f, "S\t%s\n", l->soname);
  if (l->rpath)
    fprintf (f, "R\t%s\n", l->rpath);
  if (l->runpath)
    fprintf (f, "U\t%s\n", l->runpath);
  for (size_t i = 0; i < l->n_needed; i++)
    fprintf (f, "N\t%s\n", l->needed[i]);
  for (size_t i = 0; i < l->n_verdefs; i++)
    fprintf (f, "V\t%s\n", l->verdefs[i]);
  for (size_t i = 0; i < l->n_verneed; i++)
    fprintf (f, "W\t%s\t%s\t%d\n", l->verneed[i].file, l->verneed[i].version, l->verneed[i].weak);
  for (size_t i = 0; i < l->n_defs; i++)
    fprintf (f, "D\t%s\t%u\t%d\t%s\n", l->defs[i].name, l->defs[i].ndx, l->defs[i].hidden,
             or_empty (l->defs[i].version));
  for (size_t i = 0; i < l->n_refs; i++)
    fprintf (f, "F\t%s\t%s\t%s\n", l->refs[i].name, or_empty (l->refs[i].version), or_empty (l->refs[i].file));
  fprintf (f, "%s\n", TEXT_END);
  return ferror (f) ? -1 : 0;
}

char *
ib_elf_link_to_text (const struct ib_elf_link *l, size_t *len)
{
  char *text = NULL;
  FILE *f = open_memstream (&text, len);
  ib_elf_link_write_text (l, f);
  fclose (f);
  return text;
}

/* Split LINE at tabs into at most MAX fields; returns the count. */
static size_t
fields (char *line, char **f, size_t max)
{
  /* By hand, not strtok_r: a warm build splits some 10^6 of these lines.
   * An empty field between two tabs stays a field ("" for or_null), as
   * the writer meant it; strtok_r would have shifted the next one into
   * its place. */
  size_t n = 0;
  while (n < max)
    {
      f[n++] = line;
      char *tab = strchr (line, '\t');
      if (tab == NULL)
        break;
      *tab = '\0';
      line = tab + 1;
    }
  while (n > 0 && *f[n - 1] == '\0')
    f[--n] = NULL; /* trailing empty fields vanish, as they did */
  return n;
}

static char *
or_null (char *s)
{
  return s && *s ? s : NULL;
}

/* The record being read from text: the arrays of definitions and
 * references, sized by counting their lines first. */
struct text_parse
{
  struct ib_elf_link *l;
  size_t cap_defs, cap_refs;
};

/* One line of the text (its fields NUL-separated in place: the strings
 * stay in the text).  Empty trailing fields vanish in strtok: they count
 * back as "". */
static bool
parse_line (struct text_parse *p, char *line)
{
  struct ib_elf_link *l = p->l;
  char *f[5] = { 0 };
  char kind = line[0];
  if (line[0] == '\0' || line[1] != '\t')
    return false;
  size_t n = fields (line + 2, f, 5);
  if (n == 0)
    return false;
  switch (kind)
    {
    case 'S': l->soname = f[0]; return true;
    case 'R': l->rpath = f[0]; return true;
    case 'U': l->runpath = f[0]; return true;
    case 'N': push_str (&l->needed, &l->n_needed, f[0]); return true;
    case 'V': push_str (&l->verdefs, &l->n_verdefs, f[0]); return true;
    case 'W':
      if (n != 3)
        return false;
      l->verneed = ib_xrealloc (l->verneed, (l->n_verneed + 1) * sizeof (*l->verneed));
      l->verneed[l->n_verneed++] = (struct ib_elf_verneed){ f[0], f[1], f[2][0] == '1' };
      return true;
    case 'D':
      if (n < 3 || l->n_defs == p->cap_defs)
        return false;
      l->defs[l->n_defs++] = (struct ib_elf_def){ f[0], or_null (f[3]), (unsigned) atoi (f[1]), f[2][0] == '1' };
      return true;
    case 'F':
      if (l->n_refs == p->cap_refs)
        return false;
      l->refs[l->n_refs++] = (struct ib_elf_ref){ f[0], or_null (f[1]), or_null (f[2]) };
      return true;
    default:
      return false;
    }
}

/* The lines of TEXT that are definitions ("D\t") and references ("F\t"),
 * counted in one pass. */
static void
count_lines (const char *text, size_t *defs, size_t *refs)
{
  *defs = *refs = 0;
  for (const char *p = text; p; p = strchr (p, '\n'))
    {
      p += *p == '\n';
      if (p[0] != '\0' && p[1] == '\t')
        {
          *defs += p[0] == 'D';
          *refs += p[0] == 'F';
        }
    }
}

/* The next non-empty line of *REST, NUL-terminated in place (strtok_r's
 * "\n" without its cost); NULL at the end. */
static char *
next_line (char **rest)
{
  char *c = *rest;
  while (*c == '\n')
    c++;
  if (*c == '\0')
    return NULL;
  char *eol = strchr (c, '\n');
  if (eol)
    *eol++ = '\0';
  *rest = eol ? eol : c + strlen (c);
  return c;
}

struct ib_elf_link *
ib_elf_link_from_text (char *text)
{
  size_t len = strlen (text), m = strlen (TEXT_END "\n");
  if (len < m || strcmp (text + len - m, TEXT_END "\n") != 0)
    return NULL;
  text[len - m] = '\0';
  struct ib_elf_link *l = ib_xcalloc (1, sizeof (*l));
  l->arena_size = len + 1;
  struct text_parse p = { .l = l };
  count_lines (text, &p.cap_defs, &p.cap_refs);
  l->defs = ib_xcalloc (p.cap_defs + 1, sizeof (*l->defs));
  l->refs = ib_xcalloc (p.cap_refs + 1, sizeof (*l->refs));
  int nodeflib, versym, elf32;
  char *rest = text, *line = next_line (&rest);
  bool ok = line != NULL
            && sscanf (line, TEXT_MAGIC " machine=%u type=%u nodeflib=%d versym=%d elf32=%d", &l->machine, &l->type,
                       &nodeflib, &versym, &elf32)
                   == 5;
  l->nodeflib = ok && nodeflib;
  l->has_versym = ok && versym;
  l->elf32 = ok && elf32;
  for (line = ok ? next_line (&rest) : NULL; line && ok; line = next_line (&rest))
    ok = parse_line (&p, line);
  if (!ok)
    {
      free_arrays (l); /* TEXT, and the strings in it, are still the caller's */
      return NULL;
    }
  l->arena = text;
  return l;
}

/* ---- heads --------------------------------------------------------------- */

static char *
dup_or_null (const char *s)
{
  return s ? ib_xstrdup (s) : NULL;
}

uint32_t
ib_elf_name_hash (const char *name)
{
  uint64_t h = ib_str_hash (name);
  return (uint32_t) (h ^ (h >> 32));
}

static int
cmp_u32 (const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
  return x < y ? -1 : x > y;
}

uint32_t *
ib_elf_link_hashes (const struct ib_elf_link *l, size_t *n)
{
  if (l->hashes)
    {
      *n = l->n_hashes;
      uint32_t *h = ib_xcalloc (l->n_hashes + 1, sizeof (*h));
      memcpy (h, l->hashes, l->n_hashes * sizeof (*h));
      return h;
    }
  uint32_t *h = ib_xcalloc (l->n_defs + 1, sizeof (*h));
  for (size_t i = 0; i < l->n_defs; i++)
    h[i] = ib_elf_name_hash (l->defs[i].name);
  ib_qsort (h, l->n_defs, sizeof (*h), cmp_u32);
  size_t m = 0;
  for (size_t i = 0; i < l->n_defs; i++)
    if (m == 0 || h[i] != h[m - 1])
      h[m++] = h[i];
  *n = m;
  return h;
}

struct ib_elf_link *
ib_elf_link_head (const struct ib_elf_link *l)
{
  struct ib_elf_link *h = ib_xcalloc (1, sizeof (*h));
  h->machine = l->machine;
  h->type = l->type;
  h->nodeflib = l->nodeflib;
  h->has_versym = l->has_versym;
  h->elf32 = l->elf32;
  h->soname = dup_or_null (l->soname);
  h->rpath = dup_or_null (l->rpath);
  h->runpath = dup_or_null (l->runpath);
  h->n_needed = l->n_needed;
  h->needed = ib_xcalloc (l->n_needed + 1, sizeof (*h->needed));
  for (size_t i = 0; i < l->n_needed; i++)
    h->needed[i] = ib_xstrdup (l->needed[i]);
  h->n_verneed = l->n_verneed;
  h->verneed = ib_xcalloc (l->n_verneed + 1, sizeof (*h->verneed));
  for (size_t i = 0; i < l->n_verneed; i++)
    h->verneed[i] = (struct ib_elf_verneed){ ib_xstrdup (l->verneed[i].file), ib_xstrdup (l->verneed[i].version),
                                             l->verneed[i].weak };
  h->n_verdefs = l->n_verdefs;
  h->verdefs = ib_xcalloc (l->n_verdefs + 1, sizeof (*h->verdefs));
  for (size_t i = 0; i < l->n_verdefs; i++)
    h->verdefs[i] = ib_xstrdup (l->verdefs[i]);
  h->hashes = ib_elf_link_hashes (l, &h->n_hashes);
  return h;
}

size_t
ib_elf_link_bytes (const struct ib_elf_link *l)
{
  size_t n = sizeof (*l) + l->n_defs * sizeof (*l->defs) + l->n_refs * sizeof (*l->refs)
             + l->n_needed * sizeof (*l->needed) + l->n_verneed * sizeof (*l->verneed)
             + l->n_verdefs * sizeof (*l->verdefs) + l->n_hashes * sizeof (*l->hashes);
  if (l->arena)
    return n + l->arena_size;
  /* Each string its own allocation: its bytes and malloc's 16 or so. */
  for (size_t i = 0; i < l->n_defs; i++)
    n += strlen (l->defs[i].name) + 17 + (l->defs[i].version ? strlen (l->defs[i].version) + 17 : 0);
  for (size_t i = 0; i < l->n_refs; i++)
    n += strlen (l->refs[i].name) + 17 + (l->refs[i].version ? strlen (l->refs[i].version) + 17 : 0)
         + (l->refs[i].file ? strlen (l->refs[i].file) + 17 : 0);
  return n;
}

/* ---- lookups ------------------------------------------------------------- */

const struct ib_elf_def *
ib_elf_link_find (const struct ib_elf_link *l, const char *name, size_t *count)
{
  size_t lo = 0, hi = l->n_defs;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      if (strcmp (l->defs[mid].name, name) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  size_t n = 0;
  while (lo + n < l->n_defs && strcmp (l->defs[lo + n].name, name) == 0)
    n++;
  *count = n;
  return n ? &l->defs[lo] : NULL;
}

bool
ib_elf_link_satisfies (const struct ib_elf_link *l, const struct ib_elf_ref *ref)
{
  size_t n;
  const struct ib_elf_def *d = ib_elf_link_find (l, ref->name, &n);
  if (d == NULL)
    return false;
  if (!l->has_versym)
    return true; /* an unversioned object satisfies any reference */
  size_t versioned = 0;
  for (size_t i = 0; i < n; i++)
    {
      if (ref->version)
        {
          /* The version matches, or the definition has none (index 0 or 1,
           * or the base's) and is not hidden. */
          if ((d[i].version && strcmp (d[i].version, ref->version) == 0) || (d[i].version == NULL && !d[i].hidden))
            return true;
          continue;
        }
      /* Unversioned reference: the oldest definitions are taken at once; a
       * later version only when it is the one non-hidden candidate. */
      if (d[i].ndx < 3)
        return true;
      if (!d[i].hidden)
        versioned++;
    }
  return ref->version == NULL && versioned == 1;
}

bool
ib_elf_link_defines_version (const struct ib_elf_link *l, const char *version)
{
  for (size_t i = 0; i < l->n_verdefs; i++)
    if (strcmp (l->verdefs[i], version) == 0)
      return true;
  return false;
}

const char *
ib_elf_machine_name (unsigned machine, char buf[32])
{
  switch (machine)
    {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_PPC64: return "ppc64";
    case EM_RISCV: return "riscv";
    case EM_S390: return "s390";
    default:
      snprintf (buf, 32, "machine %u", machine);
      return buf;
    }
}
