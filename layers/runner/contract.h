/* The launch contract: what a container of the image needs from its
 * runtime (the size of /dev/shm, the IPC namespace, GPU device nodes, the
 * locked-memory limit, capabilities), written in a definition's [run] or
 * [smoke] section, used exactly by the smoke test (bundle.c), and recorded
 * in the provenance so that the serving deployment can use the same one.
 *
 *   shm-size SIZE          /dev/shm, a tmpfs of SIZE (64m, 8g; default 8g)
 *   ipc private|host       an IPC namespace of its own (default), or the host's
 *   devices all|N[,N...]   which GPUs' device nodes (default all)
 *   memlock keep|unlimited|SIZE   RLIMIT_MEMLOCK (default keep: the runtime's)
 *   cap-add CAP...         capabilities beyond none (CAP_IPC_LOCK, SYS_NICE) */
#ifndef IB_CONTRACT_H
#define IB_CONTRACT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define IB_CONTRACT_UNLIMITED (~0ull)

struct ib_contract
{
  unsigned long long shm_bytes;
  bool ipc_host;
  char *devices;                 /* NULL: all; else "0,1" */
  bool memlock_set;
  unsigned long long memlock;    /* bytes, or IB_CONTRACT_UNLIMITED */
  size_t n_caps;
  char **caps;                   /* "CAP_IPC_LOCK" */
  unsigned set;                  /* which keys a definition wrote (bits) */
};

void ib_contract_init (struct ib_contract *c);
void ib_contract_clear (struct ib_contract *c);

/* One line "KEY VALUE..." of [run] or [smoke] (WORDS split by blanks).
 * Returns 1 when KEY is not a contract key (the caller tries its own), 0
 * when taken, -1 on a bad value or a key given twice. */
int ib_contract_line (struct ib_contract *c, char *const *w, int n, const char *origin, ib_error_t *err);

/* "64m" -> 67108864; -1 when not a size. */
int ib_parse_size (const char *s, unsigned long long *out);

/* Is GPU INDEX one of the contract's devices? */
bool ib_contract_has_gpu (const struct ib_contract *c, int index);

/* {"shm_size","ipc","devices","memlock","capabilities"} */
cJSON *ib_contract_json (const struct ib_contract *c);
/* The inverse (a provenance's record): C starts from the defaults. */
int ib_contract_from_json (const cJSON *j, struct ib_contract *c, ib_error_t *err);

#endif
