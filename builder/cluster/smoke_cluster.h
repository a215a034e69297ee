/* The smoke test across nodes (--hosts): one rank per GPU, started by the
 * cluster's own launcher (builder/smoke/launch.h: mpirun, or srun inside a Slurm
 * allocation), each rank in a container on its node with the same runtime
 * and launch contract as the single-machine smoke test (bundle.c).
 *
 * The steps on the nodes are builder/verify/node.h.
 *
 *   1. pull: one process per node, `imgverify --node-pull REF`: the node
 *      pulls the image by digest into its own store (what it has is not
 *      fetched again) and says how many GPUs it has;
 *   2. ranks: one process per GPU, `imgverify --node-rank REF ...`: rank
 *      and size from the launcher's environment, NCCL_COMM_ID (the first
 *      host's address and a port) for NCCL's own bootstrap, the container
 *      given that node's GPU of the rank; a reaper kills the container when
 *      the rank ends however it ends;
 *   3. after a failed run, one process per node, `imgverify --node-sweep`:
 *      what is left of the run's containers is killed and deleted, so that
 *      none is running on any node when imgverify returns.
 *
 * A node that cannot pull, has no GPU, or whose rank dies ends the whole
 * run (the launcher stops the other ranks; a timeout stops the launcher),
 * and the error names the node.  The report gains the nodes, the command
 * lines, NCCL's transport per peer pair with the hosts of both ends, and
 * the bandwidth figures (nccl-tests' busbw). */
#ifndef IB_SMOKE_CLUSTER_H
#define IB_SMOKE_CLUSTER_H

#include <stdbool.h>

#include "builder/core/build.h"

struct ib_cluster_options
{
  const char *hosts;    /* "H1,H2:2" */
  const char *launcher; /* "mpirun", "srun", NULL: auto */
  int comm_port;        /* NCCL_COMM_ID's port on the first host; 0: 29517 */
  bool dry_run;         /* print the launcher's command lines, run nothing */
  const char *node_imgverify; /* imgverify on the nodes; NULL: the one beside this program */
  const char *program;  /* --smoke-program: the smoke program on the nodes; NULL:
                           the definition's, else dcp2_smoke beside imgverify */
};

/* The coordinator: the smoke gate of B over REF (docker://...@sha256:...)
 * on the hosts of B->opt->cluster. */
int ib_smoke_cluster (struct ib_build *b, const char *ref, ib_error_t *err);

/* One rank's container on this node (ib_smoke_rank_run, builder/gates/gate_smoke.c): RANK of WORLD, its
 * node's GPU LOCAL_RANK, DCP groups of DCP; the program's output on stdout.
 * *EXIT_CODE: the program's. */
struct ib_smoke_rank
{
  int rank, world, local_rank, dcp;
  int device; /* the node's GPU of this rank (IMGBUILD_NODE_GPUS, else local_rank) */
  const char *program;
  const char *run_id; /* the container is imgbuild-smoke-RUN_ID-rankR */
};
#define IB_SMOKE_CONTAINER_PREFIX "imgbuild-smoke-"
/* A rank's folder beside its bundle (the kernel plan): this prefix, then
 * its container's name, then "-XXXXXX". */
#define IB_SMOKE_RANK_DIR_PREFIX "kprobe-"

#endif
