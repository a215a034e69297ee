/* Launching one process per GPU across nodes with the launcher the cluster
 * already uses, never a home-made one: OpenMPI's mpirun (the default; how
 * NVIDIA's multi-Spark NCCL instructions and nccl-tests run), or Slurm's
 * srun inside an allocation (SLURM_JOB_ID set).  This module only makes the
 * command lines, reads a rank's place from the launcher's environment, runs
 * the launcher under a timeout and splits its tagged output by rank; what
 * runs on the nodes is smoke_cluster.c's business.
 *
 * Hosts are written H1,H2:2,... : a host (name or address, as the launcher
 * and NCCL reach it) and its GPUs (slots, default 1: a DGX Spark has one). */
#ifndef IB_LAUNCH_H
#define IB_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

enum ib_launcher
{
  IB_LAUNCH_MPIRUN,
  IB_LAUNCH_SRUN,
};

struct ib_hosts
{
  size_t n;
  char **name;
  int *slots;
  int ranks; /* the sum of the slots */
};

/* "H1,H2:2": at most 1024 hosts of 1..64 slots; a usage error otherwise. */
int ib_hosts_parse (const char *text, struct ib_hosts *h, ib_error_t *err);
void ib_hosts_clear (struct ib_hosts *h);
/* The host that rank R runs on (ranks fill each host's slots in order, as
 * mpirun --map-by slot and srun's block distribution place them). */
const char *ib_hosts_of_rank (const struct ib_hosts *h, int rank);

/* NAME "mpirun", "srun" or NULL/"auto" (srun when SLURM_JOB_ID is set). */
int ib_launcher_choose (const char *name, enum ib_launcher *out, ib_error_t *err);
const char *ib_launcher_name (enum ib_launcher l);

struct ib_launch_step
{
  enum ib_launcher launcher;
  const struct ib_hosts *hosts;
  bool per_node;          /* one process per node (the pull), else one per slot */
  char *const *env;       /* NAME=VALUE given to every process */
  size_t n_env;
  char *const *argv;      /* the program each process runs, and its arguments */
  size_t n_argv;
  bool as_root;           /* mpirun refuses root without --allow-run-as-root */
};

/* The launcher's command line (NULL-terminated, malloc'd strings). */
char **ib_launch_argv (const struct ib_launch_step *s, size_t *n);
void ib_launch_argv_free (char **argv);
/* One line, each word quoted for a POSIX shell where it needs it. */
char *ib_launch_shell_line (char *const *argv);

/* This process's place, from its launcher's environment: OpenMPI's
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, else Slurm's
 * SLURM_PROCID/NTASKS/LOCALID.  -1 when neither says. */
int ib_launch_rank_from_env (int *rank, int *size, int *local_rank);

/* Run ARGV in a process group of its own; its stdout and stderr together
 * into *OUTPUT (also written to ECHO_FD as they come when >= 0).  After
 * TIMEOUT_S the group gets SIGTERM, then SIGKILL after GRACE_S: *TIMED_OUT.
 * *CODE: the exit status, or 128 + signal. */
int ib_launch_run (char *const *argv, int timeout_s, int grace_s, int echo_fd, char **output, int *code,
                   bool *timed_out, ib_error_t *err);

/* mpirun --tag-output lines "[1,R]<stdout>:TEXT" / "<stderr>:": the text
 * of rank R's lines (each with its newline); srun --label lines "R: TEXT"
 * likewise.  Lines of the launcher itself go to *LAUNCHER, and so do those
 * that Slurm's slurmstepd writes into a task's stream under its label
 * ("R: slurmstepd-HOST: error: *** STEP 2.1 ON HOST CANCELLED ... ***"). */
void ib_launch_split (enum ib_launcher l, const char *output, int ranks, char ***per_rank, char **launcher);
/* The process that failed first, as the launcher's own lines (ib_launch_split's
 * LAUNCHER) name it: mpirun's "Process name: [[J,1],R]", srun's first
 * "srun: error: HOST: task R: Exited with exit code N" (or "tasks R-S:
 * Killed"; the tasks that it then ends come later).  -1 when none says. */
int ib_launch_first_failed (enum ib_launcher l, const char *launcher);
/* The launcher's own words worth quoting when it failed: the first line of
 * LAUNCHER (ib_launch_split's) that is neither a ruler of dashes nor one of
 * OpenMPI's and PMIx's notes on plugins they could not load, or NULL. */
char *ib_launch_said (const char *launcher);
void ib_launch_split_free (char **per_rank, int ranks);

#endif
