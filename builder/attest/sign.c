#include "builder/attest/sign.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/cleanup.h"
#include "util/fsutil.h"
#include "builder/attest/provenance.h"

extern char **environ;

#define MAX_SIGNATURE (1u << 20)

/* The repository part of NAME (cosign's docker-reference): without the
 * tag, which follows the last ':' after the last '/'. */
static char *
repository_of (const char *name)
{
  char *out = ib_xstrdup (name);
  char *slash = strrchr (out, '/');
  char *colon = strrchr (slash ? slash : out, ':');
  if (colon)
    *colon = '\0';
  return out;
}

static char *
payload_of (const struct ib_image *img, const char *name, const struct ib_descriptor *attestation,
            const char *definition)
{
  cJSON *p = cJSON_CreateObject ();
  cJSON *crit = cJSON_AddObjectToObject (p, "critical");
  cleanup_free char *repo = repository_of (name);
  cJSON_AddStringToObject (cJSON_AddObjectToObject (crit, "identity"), "docker-reference", repo);
  cJSON_AddStringToObject (cJSON_AddObjectToObject (crit, "image"), "docker-manifest-digest", img->manifest.digest.s);
  cJSON_AddStringToObject (crit, "type", "cosign container image signature");
  cJSON *opt = cJSON_AddObjectToObject (p, "optional");
  if (attestation)
    cJSON_AddStringToObject (opt, IB_SIGN_OPTIONAL_ATTESTATION, attestation->digest.s);
  if (definition && *definition)
    cJSON_AddStringToObject (opt, IB_SIGN_OPTIONAL_DEFINITION, definition);
  char *text = cJSON_PrintUnformatted (p);
  cJSON_Delete (p);
  return text;
}

/* A private folder for the payload and signature files. */
struct hook_files
{
  char *dir, *payload, *signature;
};

static int
hook_files_make (struct hook_files *f, const char *payload, size_t len, const unsigned char *sig, size_t sig_len,
                 ib_error_t *err)
{
  const char *tmp = getenv ("TMPDIR");
  f->dir = ib_xasprintf ("%s/imgbuild-sign.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  f->payload = NULL;
  f->signature = NULL;
  if (mkdtemp (f->dir) == NULL)
    return ib_error_errno (err, errno, IB_EENV, "create a folder `%s`", f->dir);
  f->payload = ib_path_join (f->dir, "payload.json");
  f->signature = ib_path_join (f->dir, "signature");
  if (ib_write_file_atomic (f->payload, payload, len, 0600, err) < 0)
    return -1;
  return sig ? ib_write_file_atomic (f->signature, sig, sig_len, 0600, err) : 0;
}

static void
hook_files_remove (struct hook_files *f)
{
  if (f->dir)
    ib_remove_tree (f->dir, NULL);
  free (f->dir);
  free (f->payload);
  free (f->signature);
}

/* environ without our variables, then ours. */
static char **
hook_env (const struct hook_files *f, const char *digest, const char *name)
{
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = ib_xcalloc (n + 5, sizeof (*env));
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp (environ[i], "IMGBUILD_SIGN", 13) != 0)
      env[k++] = ib_xstrdup (environ[i]);
  env[k++] = ib_xasprintf ("IMGBUILD_SIGN_PAYLOAD=%s", f->payload);
  env[k++] = ib_xasprintf ("IMGBUILD_SIGNATURE=%s", f->signature);
  env[k++] = ib_xasprintf ("IMGBUILD_SIGN_DIGEST=%s", digest);
  env[k++] = ib_xasprintf ("IMGBUILD_SIGN_NAME=%s", name);
  return env;
}

static void
free_env (char **env)
{
  for (size_t i = 0; env[i]; i++)
    free (env[i]);
  free (env);
}

/* Run `/bin/sh -c CMD`, the payload on stdin, stdout to the signature file
 * (SIGNING) or to our stderr; *STATUS is its wait status. */
static int
run_hook (const char *cmd, const struct hook_files *f, const char *digest, const char *name, bool signing,
          int *status, ib_error_t *err)
{
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, f->payload, O_RDONLY, 0);
  if (signing)
    posix_spawn_file_actions_addopen (&fa, 1, f->signature, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  else
    posix_spawn_file_actions_adddup2 (&fa, 2, 1);
  char *argv[] = { (char *) "sh", (char *) "-c", (char *) cmd, NULL };
  char **env = hook_env (f, digest, name);
  pid_t pid;
  int r = posix_spawn (&pid, "/bin/sh", &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy (&fa);
  free_env (env);
  if (r != 0)
    return ib_error_errno (err, r, IB_EENV, "start /bin/sh");
  while (waitpid (pid, status, 0) < 0)
    if (errno != EINTR)
      return ib_error_errno (err, errno, IB_EENV, "wait for `%s`", cmd);
  return 0;
}

static char *
describe_status (int status)
{
  if (WIFEXITED (status))
    return ib_xasprintf ("exit status %d", WEXITSTATUS (status));
  return ib_xasprintf ("killed by signal %d", WIFSIGNALED (status) ? WTERMSIG (status) : 0);
}

static char *
base64_of (const unsigned char *buf, size_t len)
{
  char *out = ib_xmalloc (4 * ((len + 2) / 3) + 1);
  EVP_EncodeBlock ((unsigned char *) out, buf, (int) len);
  return out;
}

/* Decode the base64 TEXT: -1 when it is not base64. */
static int
base64_decode (const char *text, unsigned char **out, size_t *len)
{
  size_t n = strlen (text);
  if (n == 0 || n % 4 != 0 || n > 4 * (size_t) MAX_SIGNATURE)
    return -1;
  unsigned char *buf = ib_xmalloc (n / 4 * 3 + 1);
  int got = EVP_DecodeBlock (buf, (const unsigned char *) text, (int) n);
  if (got < 0)
    {
      free (buf);
      return -1;
    }
  /* EVP_DecodeBlock counts the padding as zero bytes. */
  size_t pad = (text[n - 1] == '=') + (text[n - 2] == '=');
  *out = buf;
  *len = (size_t) got - pad;
  return 0;
}

/* The signature artifact: the payload as its one layer, with the
 * signature in its annotation. */
static int
put_artifact (struct ib_store *s, const struct ib_image *img, const char *payload, const unsigned char *sig,
              size_t sig_len, const char *definition, struct ib_descriptor *out, ib_error_t *err)
{
  struct ib_descriptor layer = { .media_type = IB_MT_COSIGN_SIMPLESIGNING, .size = strlen (payload) };
  if (ib_store_put_blob (s, payload, layer.size, &layer.digest, err) < 0)
    return -1;
  cJSON *l = ib_descriptor_to_json (&layer);
  cleanup_free char *b64 = base64_of (sig, sig_len);
  cJSON_AddStringToObject (cJSON_AddObjectToObject (l, "annotations"), IB_ANNOTATION_COSIGN_SIGNATURE, b64);
  cJSON *layers = cJSON_CreateArray ();
  cJSON_AddItemToArray (layers, l);
  return ib_artifact_write (s, img, IB_MT_COSIGN_SIGNATURE, layers, definition, out, err);
}

int
ib_sign_image (struct ib_store *s, const struct ib_image *img, const char *name,
               const struct ib_descriptor *attestation, const char *definition, const char *cmd,
               struct ib_descriptor *out, ib_error_t *err)
{
  cleanup_free char *payload = payload_of (img, name, attestation, definition);
  struct hook_files f = { 0 };
  cleanup_free char *sig = NULL;
  size_t sig_len = 0;
  int status = 0;
  int r = hook_files_make (&f, payload, strlen (payload), NULL, 0, err);
  if (r == 0)
    r = run_hook (cmd, &f, img->manifest.digest.s, name, true, &status, err);
  if (r == 0 && status != 0)
    {
      cleanup_free char *why = describe_status (status);
      r = ib_error (err, IB_EENV, "the signer failed (%s)", why);
    }
  if (r == 0 && ib_read_file (f.signature, MAX_SIGNATURE, &sig, &sig_len, err) < 0)
    r = ib_error_wrap (err, "the signer's signature");
  if (r == 0 && sig_len == 0)
    r = ib_error (err, IB_EENV, "the signer wrote no signature (on stdout, or to $IMGBUILD_SIGNATURE)");
  hook_files_remove (&f);
  if (r == 0)
    r = put_artifact (s, img, payload, (const unsigned char *) sig, sig_len, definition, out, err);
  return r < 0 ? ib_error_wrap (err, "--sign-with `%s`", cmd) : 0;
}

static const char *
string_at (const cJSON *j, const char *a, const char *b)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (j, a), b);
  return cJSON_IsString (v) ? v->valuestring : NULL;
}

/* The payload's claims: the image it names, the attestation it covers. */
static int
read_payload (struct ib_signature *out, ib_error_t *err)
{
  cJSON *p = cJSON_ParseWithLength (out->payload, out->payload_len);
  const cJSON *crit = cJSON_GetObjectItemCaseSensitive (p, "critical");
  const char *image = string_at (crit, "image", "docker-manifest-digest");
  const char *att = string_at (p, "optional", IB_SIGN_OPTIONAL_ATTESTATION);
  int r = 0;
  if (image == NULL)
    r = ib_error (err, IB_EINTEGRITY, "its payload is not a simple signing payload (no critical.image.docker-manifest-digest)");
  else
    {
      out->image = ib_xstrdup (image);
      out->attestation = att ? ib_xstrdup (att) : NULL;
    }
  cJSON_Delete (p);
  return r;
}

int
ib_signature_read (struct ib_store *s, const struct ib_descriptor *art, struct ib_signature *out, ib_error_t *err)
{
  memset (out, 0, sizeof (*out));
  out->artifact = art->digest;
  cleanup_free char *text = NULL;
  size_t len;
  if (ib_store_read_blob (s, &art->digest, 1 << 20, &text, &len, err) < 0)
    return ib_error_wrap (err, "signature %s", art->digest.s);
  cJSON *m = cJSON_ParseWithLength (text, len);
  const cJSON *subject = cJSON_GetObjectItemCaseSensitive (cJSON_GetObjectItemCaseSensitive (m, "subject"), "digest");
  const cJSON *l = cJSON_GetArrayItem (cJSON_GetObjectItemCaseSensitive (m, "layers"), 0);
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive (l, "mediaType");
  const char *b64 = string_at (l, "annotations", IB_ANNOTATION_COSIGN_SIGNATURE);
  struct ib_descriptor layer = { 0 };
  int r = 0;
  if (!cJSON_IsString (subject))
    r = ib_error (err, IB_EINTEGRITY, "it has no subject");
  else if (!cJSON_IsString (mt) || strcmp (mt->valuestring, IB_MT_COSIGN_SIMPLESIGNING) != 0)
    r = ib_error (err, IB_EINTEGRITY, "its first layer is not a %s payload", IB_MT_COSIGN_SIMPLESIGNING);
  else if (b64 == NULL || base64_decode (b64, &out->sig, &out->sig_len) < 0)
    r = ib_error (err, IB_EINTEGRITY, "its payload has no base64 %s annotation", IB_ANNOTATION_COSIGN_SIGNATURE);
  else if ((r = ib_descriptor_from_json (l, &layer, err)) == 0)
    {
      out->subject = ib_xstrdup (subject->valuestring);
      r = ib_store_read_blob (s, &layer.digest, 1 << 20, &out->payload, &out->payload_len, err);
    }
  if (r == 0)
    r = read_payload (out, err);
  ib_descriptor_clear (&layer);
  cJSON_Delete (m);
  if (r < 0)
    {
      ib_signature_clear (out);
      return ib_error_wrap (err, "signature %s", art->digest.s);
    }
  return 0;
}

void
ib_signature_clear (struct ib_signature *sig)
{
  free (sig->subject);
  free (sig->payload);
  free (sig->sig);
  free (sig->image);
  free (sig->attestation);
  sig->subject = sig->payload = sig->image = sig->attestation = NULL;
  sig->sig = NULL;
}

int
ib_signature_verify (const struct ib_signature *sig, const char *cmd, const char *name, bool *ok, ib_error_t *err)
{
  struct hook_files f = { 0 };
  int status = 0;
  *ok = false;
  int r = hook_files_make (&f, sig->payload, sig->payload_len, sig->sig, sig->sig_len, err);
  if (r == 0)
    r = run_hook (cmd, &f, sig->image, name, false, &status, err);
  hook_files_remove (&f);
  if (r < 0)
    return ib_error_wrap (err, "--verify-signature-with `%s`", cmd);
  *ok = status == 0;
  return 0;
}
