/* imgverify --node-pull, --node-rank and --node-sweep: what the launcher
 * of the smoke test across nodes starts on each node
 * (builder/cluster/smoke_cluster.h says the whole run). */
#ifndef IB_NODE_H
#define IB_NODE_H

#include "builder/core/build.h"

/* What the launcher starts on each node (imgverify --node-pull and
 * --node-rank); their exit codes are imgverify's. */
struct ib_node_options
{
  const char *ref;
  const char *store;
  struct ib_remote_options remote;
  const char *slots;      /* --node-slots "1,2": the GPUs each node (by its rank in the pull) needs */
  const char *definition; /* --node-definition HEX: the definition's gate text */
  const char *program;    /* --node-program: the smoke program on the node */
  const char *run_id;     /* --node-run-id: names the run's containers */
  int dcp;
};
/* The GPUs of this node that the smoke test may use: IMGBUILD_NODE_GPUS
 * ("1" or "0,2": device indices, for nodes that share a machine or GPUs
 * kept for other work), else all of /dev/nvidia*.  *DEVICE: the index of
 * the LOCAL-th of them (-1 when there is none). */
int ib_node_gpus (int local, int *device);
int ib_node_pull_main (const struct ib_node_options *o);
int ib_node_rank_main (const struct ib_node_options *o);
/* imgverify --node-sweep RUN-ID: after a failed run, every container of
 * that run still on the node is killed and deleted (what a reaper that
 * was itself stopped left). */
int ib_node_sweep_main (const struct ib_node_options *o);

#endif
