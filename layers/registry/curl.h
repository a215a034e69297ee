/* libcurl, loaded when a transfer needs it.
 *
 * Linked, libcurl and the libraries it needs (TLS, Kerberos, LDAP, SSH,
 * HTTP/2, IDN: some 25 of the programs' 45) were mapped and relocated at
 * every start of imgbuild and imgverify, though most runs (a build into the
 * local store, a check of a local image) talk to no registry and no Docker
 * Engine.  The programs do not link it: ib_curl_open loads libcurl.so.4
 * (dlopen) for the handle it makes, and the handle keeps the library's entry
 * points, so nothing of the library lives in a global of ours.
 *
 * The setters are typed: curl_easy_setopt reads its one argument by the
 * type the option's number says (CURLOPTTYPE_*), and its compile-time type
 * checks (curl/typecheck-gcc.h) do not reach a wrapper; each setter here
 * takes one type and refuses (CURLE_BAD_FUNCTION_ARGUMENT) an option of
 * another.  Each returns what curl returns. */
#ifndef IB_REGISTRY_CURL_H
#define IB_REGISTRY_CURL_H

#include <curl/curl.h>

#include "util/error.h"

/* One easy handle (its connections are kept alive across requests). */
struct ib_curl;

/* A new handle of LIBRARY (a file name for dlopen; NULL: libcurl.so.4).
 * IB_EENV when the library cannot be loaded, lacks an entry point, or its
 * global set-up is not thread-safe (libcurl before 7.84: the parallel
 * transfers make handles on several threads). */
int ib_curl_open (const char *library, struct ib_curl **out, ib_error_t *err);
void ib_curl_free (struct ib_curl *c);

/* curl_easy_reset: the options only, the connections stay. */
void ib_curl_reset (struct ib_curl *c);
CURLcode ib_curl_set_long (struct ib_curl *c, CURLoption option, long value);
CURLcode ib_curl_set_off (struct ib_curl *c, CURLoption option, curl_off_t value);
/* A string, a data pointer or a curl_slist, kept by the caller until the
 * transfer is done (curl copies strings, not the others). */
CURLcode ib_curl_set_ptr (struct ib_curl *c, CURLoption option, const void *value);
/* CURLOPT_WRITEFUNCTION, CURLOPT_READFUNCTION, CURLOPT_HEADERFUNCTION:
 * the three share one signature. */
typedef size_t (*ib_curl_data_fn) (char *buf, size_t size, size_t n, void *data);
CURLcode ib_curl_set_data_fn (struct ib_curl *c, CURLoption option, ib_curl_data_fn fn);
CURLcode ib_curl_set_prereq_fn (struct ib_curl *c, curl_prereq_callback fn);
CURLcode ib_curl_perform (struct ib_curl *c);
CURLcode ib_curl_info_long (struct ib_curl *c, CURLINFO info, long *value);
CURLcode ib_curl_info_off (struct ib_curl *c, CURLINFO info, curl_off_t *value);
const char *ib_curl_strerror (const struct ib_curl *c, CURLcode code);
/* curl_slist_append and curl_slist_free_all (the list is curl's: it must
 * be freed by the library that made it). */
struct curl_slist *ib_curl_slist_append (struct ib_curl *c, struct curl_slist *list, const char *s);
void ib_curl_slist_free_all (struct ib_curl *c, struct curl_slist *list);

/* S percent-encoded as curl_easy_escape does (all but RFC 3986's
 * unreserved ALPHA DIGIT - . _ ~), malloc'd: without loading libcurl. */
char *ib_url_escape (const char *s);

#endif
