#include "builder/core/privileged.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/tar/tarcheck.h"
#include "util/cleanup.h"
#include "util/fsutil.h"

/* The names shown in the note; the JSON has every entry. */
#define SHOWN 4

size_t
ib_report_privileged (struct ib_report *r, cJSON *into, const char *whose, const char *const *texts, size_t n)
{
  size_t count[IB_TAR_FINDING_KINDS] = { 0 }, total = 0;
  cleanup_free char *names = NULL;
  size_t used = 0;
  cJSON *entries = cJSON_CreateArray ();
  for (size_t i = 0; i < n; i++)
    {
      enum ib_tar_finding k = ib_tar_finding_kind (texts[i]);
      if (k == IB_TAR_ESCAPE)
        continue;
      count[k]++;
      cJSON_AddItemToArray (entries, cJSON_CreateString (texts[i]));
      if (total++ < SHOWN)
        {
          cleanup_free char *name = ib_tar_finding_name (texts[i]);
          ib_xappend (&names, &used, total > 1 ? ", " : "", total > 1 ? 2 : 0);
          ib_xappend (&names, &used, name, strlen (name));
        }
    }
  if (total == 0)
    {
      cJSON_Delete (entries);
      return 0;
    }
  ib_report_note (r,
                  "%s: %zu setuid/setgid file(s), %zu device node(s), %zu FIFO(s), %zu socket(s), as distribution "
                  "bases have (%s%s; --json lists them)",
                  whose, count[IB_TAR_SETID], count[IB_TAR_DEVICE], count[IB_TAR_FIFO], count[IB_TAR_SOCKET], names,
                  total > SHOWN ? ", ..." : "");
  cJSON *p = cJSON_AddObjectToObject (into, "privileged_entries");
  cJSON_AddNumberToObject (p, "setuid_files", (double) count[IB_TAR_SETID]);
  cJSON_AddNumberToObject (p, "device_nodes", (double) count[IB_TAR_DEVICE]);
  cJSON_AddNumberToObject (p, "fifos", (double) count[IB_TAR_FIFO]);
  cJSON_AddNumberToObject (p, "sockets", (double) count[IB_TAR_SOCKET]);
  cJSON_AddItemToObject (p, "entries", entries);
  return total;
}
