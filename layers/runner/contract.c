#include "layers/runner/contract.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/fsutil.h"

enum
{
  SET_SHM = 1,
  SET_IPC = 2,
  SET_DEVICES = 4,
  SET_MEMLOCK = 8,
  SET_CAPS = 16, /* ib_contract_from_json clears it between capabilities */
};

void
ib_contract_init (struct ib_contract *c)
{
  memset (c, 0, sizeof (*c));
  /* NCCL's shared-memory transport wants more than the usual 64 MiB. */
  c->shm_bytes = 8ull << 30;
}

void
ib_contract_clear (struct ib_contract *c)
{
  free (c->devices);
  for (size_t i = 0; i < c->n_caps; i++)
    free (c->caps[i]);
  free (c->caps);
  memset (c, 0, sizeof (*c));
}

int
ib_parse_size (const char *s, unsigned long long *out)
{
  char *end;
  if (!isdigit ((unsigned char) *s))
    return -1;
  unsigned long long v = strtoull (s, &end, 10);
  unsigned shift = 0;
  switch (tolower ((unsigned char) *end))
    {
    case '\0': break;
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    default: return -1;
    }
  if (*end && end[1] && !(tolower ((unsigned char) end[1]) == 'b' && end[2] == '\0')
      && !(tolower ((unsigned char) end[1]) == 'i' && tolower ((unsigned char) end[2]) == 'b' && end[3] == '\0'))
    return -1;
  if (v == 0 || v > (~0ull >> shift) >> 1)
    return -1;
  *out = v << shift;
  return 0;
}

static int
once (struct ib_contract *c, unsigned bit, const char *key, const char *origin, ib_error_t *err)
{
  if (c->set & bit)
    return ib_error (err, IB_EDEFINITION, "%s: `%s` of the launch contract is given twice ([run] and [smoke] share it)",
                     origin, key);
  c->set |= bit;
  return 0;
}

static bool
valid_devices (const char *s)
{
  if (*s == '\0' || *s == ',')
    return false;
  for (const char *p = s; *p; p++)
    if (!isdigit ((unsigned char) *p) && !(*p == ',' && p[1] && p[1] != ','))
      return false;
  return true;
}

int
ib_contract_line (struct ib_contract *c, char *const *w, int n, const char *origin, ib_error_t *err)
{
  const char *k = w[0];
  if (strcmp (k, "shm-size") && strcmp (k, "ipc") && strcmp (k, "devices") && strcmp (k, "memlock")
      && strcmp (k, "cap-add"))
    return 1;
  if (n < 2 || (n > 2 && strcmp (k, "cap-add")))
    return ib_error (err, IB_EDEFINITION, "%s: expected `%s VALUE`", origin, k);
  if (strcmp (k, "shm-size") == 0)
    {
      if (once (c, SET_SHM, k, origin, err) < 0)
        return -1;
      if (ib_parse_size (w[1], &c->shm_bytes) < 0)
        return ib_error (err, IB_EDEFINITION, "%s: shm-size `%s` is not a size (64m, 8g)", origin, w[1]);
      return 0;
    }
  if (strcmp (k, "ipc") == 0)
    {
      if (once (c, SET_IPC, k, origin, err) < 0)
        return -1;
      if (strcmp (w[1], "host") && strcmp (w[1], "private"))
        return ib_error (err, IB_EDEFINITION, "%s: ipc must be `private` or `host`, not `%s`", origin, w[1]);
      c->ipc_host = strcmp (w[1], "host") == 0;
      return 0;
    }
  if (strcmp (k, "devices") == 0)
    {
      if (once (c, SET_DEVICES, k, origin, err) < 0)
        return -1;
      if (strcmp (w[1], "all") == 0)
        return 0;
      if (!valid_devices (w[1]))
        return ib_error (err, IB_EDEFINITION, "%s: devices must be `all` or GPU indexes (0,1), not `%s`", origin, w[1]);
      c->devices = ib_xstrdup (w[1]);
      return 0;
    }
  if (strcmp (k, "memlock") == 0)
    {
      if (once (c, SET_MEMLOCK, k, origin, err) < 0)
        return -1;
      if (strcmp (w[1], "keep") == 0)
        return 0;
      c->memlock_set = true;
      if (strcmp (w[1], "unlimited") == 0)
        c->memlock = IB_CONTRACT_UNLIMITED;
      else if (ib_parse_size (w[1], &c->memlock) < 0)
        return ib_error (err, IB_EDEFINITION, "%s: memlock must be `keep`, `unlimited` or a size, not `%s`", origin,
                         w[1]);
      return 0;
    }
  if (once (c, SET_CAPS, k, origin, err) < 0)
    return -1;
  for (int i = 1; i < n; i++)
    {
      const char *name = strncasecmp (w[i], "CAP_", 4) == 0 ? w[i] + 4 : w[i];
      if (*name == '\0' || strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz") != strlen (name))
        return ib_error (err, IB_EDEFINITION, "%s: `%s` is not a capability name", origin, w[i]);
      char *cap = ib_xasprintf ("CAP_%s", name);
      for (char *p = cap; *p; p++)
        *p = (char) toupper ((unsigned char) *p);
      c->caps = ib_xrealloc (c->caps, (c->n_caps + 1) * sizeof (*c->caps));
      c->caps[c->n_caps++] = cap;
    }
  return 0;
}

bool
ib_contract_has_gpu (const struct ib_contract *c, int index)
{
  if (c->devices == NULL)
    return true;
  for (const char *p = c->devices; *p;)
    {
      if (atoi (p) == index)
        return true;
      p += strcspn (p, ",");
      p += *p == ',';
    }
  return false;
}

static void
add_size (cJSON *o, const char *key, unsigned long long v)
{
  char buf[32];
  if (v == IB_CONTRACT_UNLIMITED)
    snprintf (buf, sizeof (buf), "unlimited");
  else if (v % (1ull << 30) == 0)
    snprintf (buf, sizeof (buf), "%llug", v >> 30);
  else if (v % (1ull << 20) == 0)
    snprintf (buf, sizeof (buf), "%llum", v >> 20);
  else if (v % (1ull << 10) == 0)
    snprintf (buf, sizeof (buf), "%lluk", v >> 10);
  else
    snprintf (buf, sizeof (buf), "%llu", v);
  cJSON_AddStringToObject (o, key, buf);
}

cJSON *
ib_contract_json (const struct ib_contract *c)
{
  cJSON *o = cJSON_CreateObject ();
  add_size (o, "shm_size", c->shm_bytes);
  cJSON_AddStringToObject (o, "ipc", c->ipc_host ? "host" : "private");
  cJSON_AddStringToObject (o, "devices", c->devices ? c->devices : "all");
  if (c->memlock_set)
    add_size (o, "memlock", c->memlock);
  else
    cJSON_AddStringToObject (o, "memlock", "keep");
  cJSON *caps = cJSON_AddArrayToObject (o, "capabilities");
  for (size_t i = 0; i < c->n_caps; i++)
    cJSON_AddItemToArray (caps, cJSON_CreateString (c->caps[i]));
  return o;
}

int
ib_contract_from_json (const cJSON *j, struct ib_contract *c, ib_error_t *err)
{
  ib_contract_init (c);
  static const char *const keys[][2] = { { "shm_size", "shm-size" }, { "ipc", "ipc" }, { "devices", "devices" },
                                         { "memlock", "memlock" } };
  for (size_t i = 0; i < sizeof (keys) / sizeof (keys[0]); i++)
    {
      const char *v = cJSON_GetStringValue (cJSON_GetObjectItemCaseSensitive (j, keys[i][0]));
      char *w[2] = { (char *) keys[i][1], (char *) v };
      if (v && ib_contract_line (c, w, 2, "the recorded launch contract", err) < 0)
        {
          ib_contract_clear (c);
          return -1;
        }
    }
  const cJSON *cap;
  cJSON_ArrayForEach (cap, cJSON_GetObjectItemCaseSensitive (j, "capabilities"))
  {
    char *w[2] = { "cap-add", cJSON_GetStringValue (cap) };
    c->set &= ~16u; /* one capability at a time */
    if (w[1] && ib_contract_line (c, w, 2, "the recorded launch contract", err) < 0)
      {
        ib_contract_clear (c);
        return -1;
      }
  }
  return 0;
}
