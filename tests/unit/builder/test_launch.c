/* The smoke test across nodes without nodes: the hosts list, the command
 * lines of mpirun and srun, a rank's place from each launcher's
 * environment, the launchers' tagged output split by rank, the bandwidth
 * lines (nccl-tests' figures) and the [smoke] keys of issue 21. */
#include <stdlib.h>
#include <string.h>

#include "builder/definition/definition.h"
#include "builder/smoke/launch.h"
#include "builder/smoke/nccl_log.h"
#include "util/fsutil.h"
#include "tests/unit/test.h"

void
launch_hosts_parse_and_rank_placement (struct test_ctx *t)
{
  struct ib_hosts h;
  ib_error_t e = NULL;
  CHECK (t, ib_hosts_parse ("spark1,spark2:2,10.0.0.3", &h, &e) == 0);
  CHECK (t, h.n == 3 && h.ranks == 4 && h.slots[1] == 2);
  CHECK_STR (t, ib_hosts_of_rank (&h, 0), "spark1");
  CHECK_STR (t, ib_hosts_of_rank (&h, 1), "spark2");
  CHECK_STR (t, ib_hosts_of_rank (&h, 2), "spark2");
  CHECK_STR (t, ib_hosts_of_rank (&h, 3), "10.0.0.3");
  CHECK_STR (t, ib_hosts_of_rank (&h, 4), "?");
  ib_hosts_clear (&h);
  static const char *const bad[] = { "", ",", "a,a", "a:0", "a:65", "a:x", "a:", "a b", "a;rm", "$(x)", NULL };
  for (int i = 0; bad[i]; i++)
    {
      CHECK (t, ib_hosts_parse (bad[i], &h, &e) < 0);
      CHECK (t, e && e->class == IB_EUSAGE && strncmp (e->msg, "--hosts: ", 9) == 0);
      ib_error_release (&e);
    }
}

static char *
line_of (const struct ib_launch_step *s)
{
  char **argv = ib_launch_argv (s, NULL);
  char *line = ib_launch_shell_line (argv);
  ib_launch_argv_free (argv);
  return line;
}

void
launch_command_lines_of_mpirun_and_srun (struct test_ctx *t)
{
  struct ib_hosts h;
  CHECK (t, ib_hosts_parse ("n1:2,n2:2", &h, NULL) == 0);
  char *env[] = { "NCCL_COMM_ID=n1:29517", "NCCL_IB_HCA=mlx5_0,mlx5_1" };
  char *prog[] = { "/usr/bin/imgverify", "--node-rank", "docker://r/x@sha256:ab", "it's" };
  struct ib_launch_step s = { .launcher = IB_LAUNCH_MPIRUN, .hosts = &h, .env = env, .n_env = 2, .argv = prog,
                              .n_argv = 4, .as_root = true };
  char *l = line_of (&s);
  CHECK_STR (t, l, "mpirun --allow-run-as-root --host n1:2,n2:2 -np 4 --map-by slot --bind-to none --mca plm '^isolated' --tag-output "
                   "-x NCCL_COMM_ID=n1:29517 -x NCCL_IB_HCA=mlx5_0,mlx5_1 /usr/bin/imgverify --node-rank "
                   "docker://r/x@sha256:ab 'it'\\''s'");
  free (l);
  s.per_node = true;
  s.as_root = false;
  s.n_env = 0;
  s.n_argv = 1;
  l = line_of (&s);
  CHECK_STR (t, l, "mpirun --host n1:2,n2:2 -np 2 --map-by node --bind-to none --mca plm '^isolated' --tag-output /usr/bin/imgverify");
  free (l);
  s.launcher = IB_LAUNCH_SRUN;
  s.per_node = false;
  s.n_env = 2;
  l = line_of (&s);
  CHECK_STR (t, l, "srun --nodes=2 --nodelist=n1,n2 --ntasks=4 --ntasks-per-node=2 --distribution=block "
                   "--kill-on-bad-exit=1 --label --export=ALL env NCCL_COMM_ID=n1:29517 "
                   "NCCL_IB_HCA=mlx5_0,mlx5_1 /usr/bin/imgverify");
  free (l);
  ib_hosts_clear (&h);
  enum ib_launcher which;
  ib_error_t e = NULL;
  unsetenv ("SLURM_JOB_ID");
  CHECK (t, ib_launcher_choose (NULL, &which, &e) == 0 && which == IB_LAUNCH_MPIRUN);
  setenv ("SLURM_JOB_ID", "4242", 1);
  CHECK (t, ib_launcher_choose ("auto", &which, &e) == 0 && which == IB_LAUNCH_SRUN);
  CHECK (t, ib_launcher_choose ("mpirun", &which, &e) == 0 && which == IB_LAUNCH_MPIRUN);
  unsetenv ("SLURM_JOB_ID");
  CHECK (t, ib_launcher_choose ("pdsh", &which, &e) < 0 && e->class == IB_EUSAGE);
  ib_error_release (&e);
}

void
launch_rank_from_each_launchers_environment (struct test_ctx *t)
{
  static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL };
  for (int i = 0; vars[i]; i++)
    unsetenv (vars[i]);
  int r = -1, n = -1, l = -1;
  CHECK (t, ib_launch_rank_from_env (&r, &n, &l) < 0);
  setenv ("SLURM_PROCID", "3", 1);
  setenv ("SLURM_NTASKS", "4", 1);
  setenv ("SLURM_LOCALID", "1", 1);
  CHECK (t, ib_launch_rank_from_env (&r, &n, &l) == 0 && r == 3 && n == 4 && l == 1);
  /* OpenMPI's first (mpirun inside a Slurm allocation sets both). */
  setenv ("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv ("OMPI_COMM_WORLD_SIZE", "8", 1);
  CHECK (t, ib_launch_rank_from_env (&r, &n, &l) == 0 && r == 2 && n == 8 && l == 0);
  /* A rank outside the size, or not a number, is not a place. */
  setenv ("OMPI_COMM_WORLD_RANK", "8", 1);
  CHECK (t, ib_launch_rank_from_env (&r, &n, &l) == 0 && r == 3 && n == 4);
  setenv ("SLURM_PROCID", "x", 1);
  CHECK (t, ib_launch_rank_from_env (&r, &n, &l) < 0);
  for (int i = 0; vars[i]; i++)
    unsetenv (vars[i]);
}

void
launch_output_split_by_rank (struct test_ctx *t)
{
  const char *mp = "[1,1]<stdout>:rankcheck: rank 1 met rank 0\n"
                   "[1,0]<stdout>:rankcheck: rank 0 met rank 1\n"
                   "[1,1]<stderr>:imgverify: error: rank 1: killed\n"
                   "--------------------------------------------------------------------------\n"
                   "  Process name: [[17199,1],1]\n"
                   "[1,7]<stdout>:not a rank of this job\n";
  char **per = NULL, *rest = NULL;
  ib_launch_split (IB_LAUNCH_MPIRUN, mp, 2, &per, &rest);
  CHECK_STR (t, per[0], "rankcheck: rank 0 met rank 1\n");
  CHECK_STR (t, per[1], "rankcheck: rank 1 met rank 0\nimgverify: error: rank 1: killed\n");
  CHECK (t, strstr (rest, "Process name: [[17199,1],1]") && strstr (rest, "[1,7]<stdout>"));
  ib_launch_split_free (per, 2);
  free (rest);
  /* As OpenMPI 4.1 printed it on the GPU machine: its daemons (job 0) on
   * stderr, not the ranks. */
  ib_launch_split (IB_LAUNCH_MPIRUN,
                   "[0,1]<stderr>:PMIx was unable to find a usable compression library\n"
                   "[1,0]<stdout>:NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
                   2, &per, &rest);
  CHECK_STR (t, per[0], "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n");
  CHECK_STR (t, per[1], "");
  CHECK (t, strstr (rest, "[0,1]<stderr>:PMIx was unable"));
  ib_launch_split_free (per, 2);
  free (rest);
  /* OpenMPI tags chunks, not lines: a line in two pieces, and another
   * rank's piece between two of rank 0's (as on the GPU machine). */
  ib_launch_split (IB_LAUNCH_MPIRUN,
                   "[1,1]<stdout>:vm:10:10 [0] NCCL INFO[1,1]<stdout>: P2P Chunksize set to 131072\n"
                   "[1,0]<stdout>:bw all-gather[1,1]<stdout>:case x: ok\n"
                   "[1,0]<stdout>: 16777216 1.5\n"
                   "[1,0]<stdout>:vm:10:10 [0] NCCL INF[1,0]<stderr>:imgverify: error: rank 0: killed\n",
                   2, &per, &rest);
  CHECK_STR (t, per[0], "bw all-gather 16777216 1.5\nvm:10:10 [0] NCCL INF\nimgverify: error: rank 0: killed\n");
  CHECK_STR (t, per[1], "vm:10:10 [0] NCCL INFO P2P Chunksize set to 131072\ncase x: ok\n");
  CHECK_STR (t, rest, "");
  ib_launch_split_free (per, 2);
  free (rest);
  ib_launch_split (IB_LAUNCH_SRUN, " 0: a\n1: b\n 1: c\nsrun: error: spark2: task 1: Killed\n 7: stray\n", 2, &per,
                   &rest);
  CHECK_STR (t, per[0], "a\n");
  CHECK_STR (t, per[1], "b\nc\n");
  CHECK_STR (t, rest, "srun: error: spark2: task 1: Killed\n 7: stray\n");
  ib_launch_split_free (per, 2);
  free (rest);
  /* slurmstepd's word under a task's label, as Slurm 22.05 wrote it when
   * srun --kill-on-bad-exit ended rank 0 (tests/integration/multinode.sh):
   * the launcher's, not the rank's error. */
  ib_launch_split (IB_LAUNCH_SRUN,
                   "0: imgverify: rank 0 of 2: container imgbuild-smoke-6b1404e7256a-rank0\n"
                   "0: slurmstepd-10.213.7.1: error: *** STEP 2.1 ON 10.213.7.1 CANCELLED AT 2026-12-05T12:34:48 ***\n",
                   2, &per, &rest);
  CHECK_STR (t, per[0], "imgverify: rank 0 of 2: container imgbuild-smoke-6b1404e7256a-rank0\n");
  CHECK (t, strstr (rest, "0: slurmstepd-10.213.7.1: error: *** STEP 2.1") == rest);
  ib_launch_split_free (per, 2);
  free (rest);
}

/* Which rank failed first, from the launcher's own lines: srun's as Slurm
 * 22.05 printed them when node 10.213.7.2's rank container was killed
 * (task 1 failed, then srun ended task 0), and mpirun's. */
void
launch_first_failed_from_the_launchers_lines (struct test_ctx *t)
{
  const char *srun = "srun: error: 10.213.7.2: task 1: Exited with exit code 7\n"
                     "srun: launch/slurm: _step_signal: Terminating StepId=2.1\n"
                     "srun: error: 10.213.7.1: task 0: Terminated\n"
                     "srun: Force Terminated StepId=2.1\n";
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, srun) == 1);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, "srun: error: Task launch for StepId=1.0 failed on node b\n"
                                                    "srun: error: spark-3: tasks 2-3: Killed\n")
                == 2);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, "srun: error: spark-1: tasks 0,2: Exited with exit code 1\n") == 0);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, "srun: error: Unable to create step for job 4: task x\n") == -1);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, "") == -1);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_MPIRUN, "-----\n  Process name: [[17199,1],1]\n  Exit code: 7\n") == 1);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_MPIRUN, srun) == -1);
  CHECK (t, ib_launch_first_failed (IB_LAUNCH_SRUN, NULL) == -1);
}

void
nccl_bandwidth_lines_as_json (struct test_ctx *t)
{
  const char *out = "dcp2_smoke: 2 ranks, dcp 2 (1 groups)\n"
                    "nccl all-to-all (dcp group 0)     ranks 2     1048576 B       52.1 us  algbw   20.13 GB/s  busbw "
                    "  10.06 GB/s\n"
                    "nccl all-gather (all ranks)       ranks 2   134217728 B     5500.0 us  algbw   24.40 GB/s  busbw "
                    "  12.20 GB/s\n"
                    "nccl garbage ranks x\n";
  cJSON *j = ib_nccl_bandwidth_json (out);
  CHECK (t, cJSON_GetArraySize (j) == 2);
  cJSON *a = cJSON_GetArrayItem (j, 0), *g = cJSON_GetArrayItem (j, 1);
  CHECK_STR (t, cJSON_GetStringValue (cJSON_GetObjectItem (a, "collective")), "all-to-all (dcp group 0)");
  CHECK (t, cJSON_GetNumberValue (cJSON_GetObjectItem (a, "bytes")) == 1048576);
  CHECK (t, cJSON_GetNumberValue (cJSON_GetObjectItem (g, "ranks")) == 2);
  /* busbw = algbw x (n-1)/n, as nccl-tests counts all-gather. */
  double alg = cJSON_GetNumberValue (cJSON_GetObjectItem (g, "algbw_gbs"));
  double bus = cJSON_GetNumberValue (cJSON_GetObjectItem (g, "busbw_gbs"));
  CHECK (t, alg == 24.40 && bus == 12.20);
  cJSON_Delete (j);
}

void
definition_smoke_keys_across_nodes (struct test_ctx *t)
{
  struct ib_definition *d = NULL;
  ib_error_t e = NULL;
  CHECK (t, ib_definition_from_gate_text ("[smoke]\nkernels /k.fatbin\ngpus-per-rank 0\n"
                                          "expect-transport-nodes NET/Socket\nexpect-transport P2P\n",
                                          &d, &e) == 0);
  CHECK (t, d && d->smoke_gpus_per_rank == 0);
  CHECK_STR (t, d ? d->smoke_expect_transport_nodes : "", "NET/Socket");
  CHECK_STR (t, d ? d->smoke_expect_transport : "", "P2P");
  ib_definition_free (d);
  d = NULL;
  CHECK (t, ib_definition_from_gate_text ("[smoke]\nkernels /k.fatbin\n", &d, &e) == 0);
  CHECK (t, d && d->smoke_gpus_per_rank == 1 && d->smoke_expect_transport_nodes == NULL);
  ib_definition_free (d);
  d = NULL;
  CHECK (t, ib_definition_from_gate_text ("[smoke]\nkernels /k.fatbin\ngpus-per-rank 2\n", &d, &e) < 0);
  CHECK (t, e && strstr (e->msg, "gpus-per-rank is 0 or 1"));
  ib_error_release (&e);
  CHECK (t, ib_definition_from_gate_text ("[smoke]\nkernels /k.fatbin\nexpect-transport-nodes TCP\n", &d, &e) < 0);
  CHECK (t, e && strstr (e->msg, "expect-transport-nodes `TCP`"));
  ib_error_release (&e);
}

void
launch_said_skips_plugin_notes (struct test_ctx *t)
{
  /* What mpirun printed on the GPU machine, where the system's PMIx plugins
   * did not match the carried library: the reason is the last line. */
  const char *text = "[vm:00619] pmix_mca_base_component_repository_open: unable to open /usr/lib/x86_64-linux-gnu/"
                     "pmix2/lib/pmix/pmix_mca_pcompress_zlib: \n"
                     "--------------------------------------------------------------------------\n"
                     "Sorry!  You were supposed to get help about:\n"
                     "    unavailable\n"
                     "But I couldn't open the help file:\n"
                     "--------------------------------------------------------------------------\n"
                     "All nodes which are allocated for this job are already filled.\n";
  char *said = ib_launch_said (text);
  CHECK_STR (t, said, "All nodes which are allocated for this job are already filled.");
  free (said);
  said = ib_launch_said ("node spark-2 is unavailable for this job\n");
  CHECK_STR (t, said, "node spark-2 is unavailable for this job");
  free (said);
  CHECK (t, ib_launch_said ("-----\n\n") == NULL);
  /* The second GPU run: each plugin note over three lines, then PMIx's
   * advice box from each daemon (tagged, job 0), then the reason. */
  const char *gpu = "[vm:00708] pmix_mca_base_component_repository_open: unable to open /usr/lib/x86_64-linux-gnu/"
                    "pmix2/lib/pmix/pmix_mca_pcompress_zlib: \n"
                    "    dlopen error: /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/pmix_mca_pcompress_zlib.so: undefined "
                    "symbol: pmix_output_info\n"
                    "    Perhaps a missing symbol, or compiled for a different version of pmix? (ignored)\n"
                    "[0,1]<stderr>:------------------------------------------------------------\n"
                    "[0,1]<stderr>:PMIx was unable to find a usable compression library\n"
                    "[0,1]<stderr>:on the system. We will therefore be unable to compress\n"
                    "[0,1]<stderr>:------------------------------------------------------------\n"
                    "------------------------------------------------------------\n"
                    "A call to mkdir was unable to create the desired directory:\n"
                    "  Directory: /tmp/ompi.vm.0/jf.0/1\n"
                    "------------------------------------------------------------\n";
  said = ib_launch_said (gpu);
  CHECK_STR (t, said, "A call to mkdir was unable to create the desired directory:");
  free (said);
}

/* OpenMPI's daemons can write a NUL in the middle of the launcher's
 * output; the captured text must go on past it, or every rank's lines
 * after it are lost (the NCCL log among them). */
void
launch_run_keeps_output_after_a_nul (struct test_ctx *t)
{
  char *argv[] = { "/bin/sh", "-c", "printf '[0,2]<stderr>:\\000[1,0]<stdout>:after\\n'", NULL };
  char *out = NULL;
  int code = -1;
  bool timed_out = true;
  ib_error_t err = NULL;
  CHECK (t, ib_launch_run (argv, 30, 1, -1, &out, &code, &timed_out, &err) == 0);
  CHECK (t, code == 0 && !timed_out);
  CHECK (t, out && strstr (out, "[1,0]<stdout>:after"));
  char **per = NULL, *rest = NULL;
  ib_launch_split (IB_LAUNCH_MPIRUN, out ? out : "", 1, &per, &rest);
  CHECK_STR (t, per[0], "after\n");
  ib_launch_split_free (per, 1);
  free (rest);
  free (out);
  ib_error_release (&err);
}
