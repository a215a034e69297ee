#include "symbol-check/elfsyms.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fsutil.h"

#define MAX_SECTION (512u << 20)

static int
read_section (int fd, const Elf64_Shdr *sh, const char *what, char **out, ib_error_t *err)
{
  if (sh->sh_size > MAX_SECTION)
    return ib_error (err, IB_EINTEGRITY, "`%s`: an ELF section of %llu bytes", what,
                     (unsigned long long) sh->sh_size);
  char *buf = ib_xmalloc (sh->sh_size + 1);
  if (ib_elf_read_at (fd, buf, sh->sh_size, sh->sh_offset, what, err) < 0)
    {
      free (buf);
      return -1;
    }
  buf[sh->sh_size] = '\0';
  *out = buf;
  return 0;
}

/* Version index -> name, from the verdef chain. */
static const char *
version_name (const char *verdef, size_t vlen, const char *strtab, size_t slen, unsigned idx)
{
  size_t off = 0;
  /* The entries sit where vd_next says, aligned or not: copied out, never
   * read through a cast pointer. */
  for (int guard = 0; verdef && off + sizeof (Elf64_Verdef) <= vlen && guard < 4096; guard++)
    {
      Elf64_Verdef vd;
      memcpy (&vd, verdef + off, sizeof (vd));
      if (vd.vd_ndx == idx && vd.vd_aux && off + vd.vd_aux + sizeof (Elf64_Verdaux) <= vlen)
        {
          Elf64_Verdaux aux;
          memcpy (&aux, verdef + off + vd.vd_aux, sizeof (aux));
          return aux.vda_name < slen ? strtab + aux.vda_name : NULL;
        }
      if (vd.vd_next == 0)
        break;
      off += vd.vd_next;
    }
  return NULL;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The defined symbols of .dynsym (section DYNSYM of the NSH in SH) into S. */
static int
read_dynsyms (int fd, const char *what, const Elf64_Shdr *sh, unsigned nsh, int dynsym, int versym, int verdef,
              struct ib_elf_symbols *s, ib_error_t *err)
{
  if (sh[dynsym].sh_link >= nsh || sh[dynsym].sh_entsize != sizeof (Elf64_Sym))
    return ib_error (err, IB_EINTEGRITY, "`%s`: malformed .dynsym", what);
  cleanup_free char *syms = NULL, *strtab = NULL, *vs = NULL, *vd = NULL, *vdstr = NULL;
  const Elf64_Shdr *st = &sh[sh[dynsym].sh_link];
  if (read_section (fd, &sh[dynsym], what, &syms, err) < 0 || read_section (fd, st, what, &strtab, err) < 0)
    return -1;
  if (versym >= 0 && read_section (fd, &sh[versym], what, &vs, err) < 0)
    return -1;
  if (verdef >= 0 && sh[verdef].sh_link < nsh
      && (read_section (fd, &sh[verdef], what, &vd, err) < 0
          || read_section (fd, &sh[sh[verdef].sh_link], what, &vdstr, err) < 0))
    return -1;
  size_t n = sh[dynsym].sh_size / sizeof (Elf64_Sym);
  s->names = ib_xcalloc (n ? n : 1, sizeof (*s->names));
  for (size_t i = 1; i < n; i++)
    {
      const Elf64_Sym *sym = (const Elf64_Sym *) syms + i;
      if (sym->st_shndx == SHN_UNDEF || sym->st_name >= st->sh_size || strtab[sym->st_name] == '\0')
        continue;
      const char *name = strtab + sym->st_name;
      unsigned v = vs && (i + 1) * 2 <= sh[versym].sh_size ? ((const uint16_t *) vs)[i] : 0;
      const char *ver = (v & 0x7fff) > 1 && vd ? version_name (vd, sh[verdef].sh_size, vdstr,
                                                               sh[sh[verdef].sh_link].sh_size, v & 0x7fff)
                                                : NULL;
      s->names[s->n++] = ver ? ib_xasprintf ("%s%s%s", name, (v & 0x8000) ? "@" : "@@", ver) : ib_xstrdup (name);
    }
  ib_qsort (s->names, s->n, sizeof (*s->names), cmp_str);
  return 0;
}

int
ib_elf_dynsyms (int fd, const char *what, struct ib_elf_symbols **out, ib_error_t *err)
{
  Elf64_Ehdr eh;
  if (ib_elf_read_at (fd, &eh, sizeof (eh), 0, what, err) < 0)
    return -1;
  if (memcmp (eh.e_ident, ELFMAG, SELFMAG) != 0)
    return ib_error (err, IB_ESYMBOLS, "`%s` is not an ELF file", what);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return ib_error (err, IB_ESYMBOLS, "`%s` is not a 64-bit little-endian ELF file", what);
  if (eh.e_shentsize != sizeof (Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 65000)
    return ib_error (err, IB_EINTEGRITY, "`%s` has no usable section headers", what);
  cleanup_free Elf64_Shdr *sh = ib_xcalloc (eh.e_shnum, sizeof (*sh));
  if (ib_elf_read_at (fd, sh, eh.e_shnum * sizeof (*sh), eh.e_shoff, what, err) < 0)
    return -1;
  int dynsym = -1, versym = -1, verdef = -1;
  for (int i = 0; i < eh.e_shnum; i++)
    {
      if (sh[i].sh_type == SHT_DYNSYM)
        dynsym = i;
      else if (sh[i].sh_type == SHT_GNU_versym)
        versym = i;
      else if (sh[i].sh_type == SHT_GNU_verdef)
        verdef = i;
    }
  struct ib_elf_symbols *s = ib_xcalloc (1, sizeof (*s));
  s->machine = eh.e_machine;
  /* No .dynsym: a static object exports nothing dynamically.  On an error
   * nothing is handed out (the caller has nothing to free). */
  if (dynsym >= 0 && read_dynsyms (fd, what, sh, eh.e_shnum, dynsym, versym, verdef, s, err) < 0)
    {
      ib_elf_symbols_free (s);
      return -1;
    }
  *out = s;
  return 0;
}

void
ib_elf_symbols_free (struct ib_elf_symbols *s)
{
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->n; i++)
    free (s->names[i]);
  free (s->names);
  free (s);
}

bool
ib_elf_exports (const struct ib_elf_symbols *s, const char *required)
{
  const char *at = strchr (required, '@');
  size_t base = at ? (size_t) (at - required) : strlen (required);
  const char *ver = at ? at + 1 + (at[1] == '@') : NULL;
  for (size_t i = 0; i < s->n; i++)
    {
      const char *n = s->names[i];
      if (strncmp (n, required, base) != 0 || (n[base] != '\0' && n[base] != '@'))
        continue;
      if (ver == NULL)
        return true;
      const char *nv = n[base] == '@' ? n + base + 1 + (n[base + 1] == '@') : NULL;
      if (nv && strcmp (nv, ver) == 0)
        return true;
    }
  return false;
}
