#include "layers/registry/curl.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/fsutil.h"

/* The library's entry points, as dlsym finds them. */
struct curl_api
{
  curl_version_info_data *(*version_info) (CURLversion v);
  CURL *(*easy_init) (void);
  void (*easy_cleanup) (CURL *h);
  void (*easy_reset) (CURL *h);
  CURLcode (*easy_setopt) (CURL *h, CURLoption option, ...);
  CURLcode (*easy_getinfo) (CURL *h, CURLINFO info, ...);
  CURLcode (*easy_perform) (CURL *h);
  const char *(*easy_strerror) (CURLcode code);
  struct curl_slist *(*slist_append) (struct curl_slist *list, const char *s);
  void (*slist_free_all) (struct curl_slist *list);
};

struct ib_curl
{
  void *lib; /* this handle's reference to the library (dlopen counts them) */
  struct curl_api api;
  CURL *h;
};

/* dlsym by the plain name: libcurl.so.4 is Debian's OpenSSL flavour, whose
 * symbols carry the version CURL_OPENSSL_4, but other builds of the same
 * soname carry none or another; the plain name finds the default one. */
static const struct
{
  const char *name;
  size_t off;
} entry_points[] = {
  { "curl_version_info", offsetof (struct curl_api, version_info) },
  { "curl_easy_init", offsetof (struct curl_api, easy_init) },
  { "curl_easy_cleanup", offsetof (struct curl_api, easy_cleanup) },
  { "curl_easy_reset", offsetof (struct curl_api, easy_reset) },
  { "curl_easy_setopt", offsetof (struct curl_api, easy_setopt) },
  { "curl_easy_getinfo", offsetof (struct curl_api, easy_getinfo) },
  { "curl_easy_perform", offsetof (struct curl_api, easy_perform) },
  { "curl_easy_strerror", offsetof (struct curl_api, easy_strerror) },
  { "curl_slist_append", offsetof (struct curl_api, slist_append) },
  { "curl_slist_free_all", offsetof (struct curl_api, slist_free_all) },
};

/* POSIX: a function pointer has the representation of a data pointer
 * (what makes dlsym usable at all). */
_Static_assert (sizeof (void *) == sizeof (void (*) (void)), "function pointers are data pointers");

static int
bind_entry_points (struct ib_curl *c, const char *file, ib_error_t *err)
{
  for (size_t i = 0; i < sizeof (entry_points) / sizeof (entry_points[0]); i++)
    {
      void *p = dlsym (c->lib, entry_points[i].name);
      if (p == NULL)
        return ib_error (err, IB_EENV, "%s has no %s: not a libcurl", file, entry_points[i].name);
      memcpy ((char *) &c->api + entry_points[i].off, &p, sizeof (p));
    }
  /* curl_easy_init runs the library's global set-up the first time; from
   * 7.84 on that is thread-safe, and the parallel transfers' workers each
   * make their handle on their own thread. */
  const curl_version_info_data *v = c->api.version_info (CURLVERSION_NOW);
  if ((v->features & CURL_VERSION_THREADSAFE) == 0)
    return ib_error (err, IB_EENV, "%s is libcurl %s, whose global set-up is not thread-safe (7.84 or later is)",
                     file, v->version);
  return 0;
}

int
ib_curl_open (const char *library, struct ib_curl **out, ib_error_t *err)
{
  const char *file = library ? library : "libcurl.so.4";
  struct ib_curl *c = ib_xcalloc (1, sizeof (*c));
  /* NODELETE: the last handle's dlclose does not unload it, so that the
   * next handle does not set up TLS all over again. */
  c->lib = dlopen (file, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  int r = 0;
  if (c->lib == NULL)
    {
      const char *why = dlerror ();
      r = ib_error (err, IB_EENV, "%s (a registry or a Docker Engine needs libcurl 7.84 or later; Debian: libcurl4)",
                    why ? why : file);
    }
  if (r == 0)
    r = bind_entry_points (c, file, err);
  if (r == 0 && (c->h = c->api.easy_init ()) == NULL)
    r = ib_error (err, IB_EENV, "curl_easy_init failed");
  if (r < 0)
    {
      ib_curl_free (c);
      return -1;
    }
  *out = c;
  return 0;
}

void
ib_curl_free (struct ib_curl *c)
{
  if (c == NULL)
    return;
  if (c->h)
    c->api.easy_cleanup (c->h);
  if (c->lib)
    dlclose (c->lib);
  free (c);
}

void
ib_curl_reset (struct ib_curl *c)
{
  c->api.easy_reset (c->h);
}

/* The ranges of option numbers by the type of their argument (curl.h). */
static bool
long_option (CURLoption o)
{
  return o < CURLOPTTYPE_OBJECTPOINT;
}

static bool
pointer_option (CURLoption o)
{
  return (o >= CURLOPTTYPE_OBJECTPOINT && o < CURLOPTTYPE_FUNCTIONPOINT) || o >= CURLOPTTYPE_BLOB;
}

static bool
off_option (CURLoption o)
{
  return o >= CURLOPTTYPE_OFF_T && o < CURLOPTTYPE_BLOB;
}

CURLcode
ib_curl_set_long (struct ib_curl *c, CURLoption option, long value)
{
  if (!long_option (option))
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_setopt (c->h, option, value);
}

CURLcode
ib_curl_set_off (struct ib_curl *c, CURLoption option, curl_off_t value)
{
  if (!off_option (option))
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_setopt (c->h, option, value);
}

CURLcode
ib_curl_set_ptr (struct ib_curl *c, CURLoption option, const void *value)
{
  if (!pointer_option (option))
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_setopt (c->h, option, value);
}

CURLcode
ib_curl_set_data_fn (struct ib_curl *c, CURLoption option, ib_curl_data_fn fn)
{
  if (option != CURLOPT_WRITEFUNCTION && option != CURLOPT_READFUNCTION && option != CURLOPT_HEADERFUNCTION)
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_setopt (c->h, option, fn);
}

CURLcode
ib_curl_set_prereq_fn (struct ib_curl *c, curl_prereq_callback fn)
{
  return c->api.easy_setopt (c->h, CURLOPT_PREREQFUNCTION, fn);
}

CURLcode
ib_curl_perform (struct ib_curl *c)
{
  return c->api.easy_perform (c->h);
}

CURLcode
ib_curl_info_long (struct ib_curl *c, CURLINFO info, long *value)
{
  if ((info & CURLINFO_TYPEMASK) != CURLINFO_LONG)
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_getinfo (c->h, info, value);
}

CURLcode
ib_curl_info_off (struct ib_curl *c, CURLINFO info, curl_off_t *value)
{
  if ((info & CURLINFO_TYPEMASK) != CURLINFO_OFF_T)
    return CURLE_BAD_FUNCTION_ARGUMENT;
  return c->api.easy_getinfo (c->h, info, value);
}

const char *
ib_curl_strerror (const struct ib_curl *c, CURLcode code)
{
  return c->api.easy_strerror (code);
}

struct curl_slist *
ib_curl_slist_append (struct ib_curl *c, struct curl_slist *list, const char *s)
{
  return c->api.slist_append (list, s);
}

void
ib_curl_slist_free_all (struct ib_curl *c, struct curl_slist *list)
{
  c->api.slist_free_all (list);
}

char *
ib_url_escape (const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen (s);
  char *out = ib_xmalloc (3 * n + 1), *o = out;
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    {
      if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr ("-._~", *p))
        *o++ = (char) *p;
      else
        {
          *o++ = '%';
          *o++ = hex[*p >> 4];
          *o++ = hex[*p & 15];
        }
    }
  *o = '\0';
  return out;
}
