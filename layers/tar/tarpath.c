#include "layers/tar/tarpath.h"

#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

bool
ib_whiteout_names_nothing (const char *gone)
{
  return *gone == '\0' || strcmp (gone, ".") == 0 || strcmp (gone, "..") == 0;
}

char *
ib_clean_tar_path (const char *p)
{
  size_t n = strlen (p);
  char *out = ib_xmalloc (n + 1);
  size_t o = 0;
  const char *s = p;
  while (*s)
    {
      while (*s == '/')
        s++;
      const char *e = s;
      while (*e && *e != '/')
        e++;
      size_t len = (size_t) (e - s);
      if (len == 0 || (len == 1 && s[0] == '.'))
        {
          s = e;
          continue;
        }
      if (len == 2 && s[0] == '.' && s[1] == '.')
        {
          free (out);
          return NULL;
        }
      if (o)
        out[o++] = '/';
      memcpy (out + o, s, len);
      o += len;
      s = e;
    }
  out[o] = '\0';
  if (o == 0)
    {
      free (out);
      return NULL;
    }
  return out;
}
