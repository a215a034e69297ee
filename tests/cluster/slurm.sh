# A Slurm cluster of two nodes on this machine (issue 48), for the smoke
# test across nodes under a real Slurm: Debian's slurm-wlm (22.05) and
# munge, nothing of the machine's configuration (/etc/slurm, /etc/munge)
# read or written.  Built on tests/cluster/netns.sh's LAN: slurmctld in the
# head namespace (PREFIX-h, NET.10), one slurmd per node namespace
# (`slurmd -N NAME` inside PREFIX-a and PREFIX-b, NodeAddr NET.1 and NET.2),
# munged beside them (its socket a file: the namespaces share the file
# system).  The daemons listen inside the test's namespaces, which nothing
# off the LAN reaches.
#
#   slurm_up PREFIX NET DIR MAP [TRACK]
#                                write DIR/slurm.conf (nodes named by their
#                                addresses: NET.1 and NET.2, as --hosts and
#                                NCCL_COMM_ID name them), start munged,
#                                slurmctld and both slurmd, and wait until
#                                sinfo shows both nodes idle; exports
#                                SLURM_CONF.  Each task gets its node's
#                                store and environment from MAP (agent.sh's
#                                "ADDRESS NAMESPACE STORE [VAR=VALUE...]"
#                                lines) through Slurm's TaskProlog, as a
#                                site sets its tasks' environment.
#                                TRACK: how slurmstepd finds a step's
#                                processes, proctrack/linuxproc (its
#                                children, the default) or proctrack/cgroup
#                                (its cgroup, cgroup v1, as most sites run:
#                                what the step started ends with it, the
#                                processes of a session of their own too)
#   slurm_down PREFIX DIR        stop them all (the jobs first: a slurmd
#                                that stops leaves its jobs' slurmstepd
#                                running), remove the cgroups of
#                                proctrack/cgroup, and fail if any process
#                                is left
#   slurm_procs PREFIX DIR       the pids of DIR's daemons (pgrep: their
#                                command lines name DIR) and of whatever
#                                runs in the node namespaces: none after
#                                slurm_down
#   slurm_ps PREFIX              the processes of the three namespaces,
#                                "NAMESPACE PID COMMAND" a line
#
# The daemons run as the test's services (tests/lib.sh `service`), so the
# runner stops them whatever the test's result.

_slurm_conf() { # PREFIX NET DIR TRACK
  local net=$2 dir=$3 track=$4
  cat <<CONF
ClusterName=ib48
SlurmctldHost=$(uname -n)($net.10)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$(readlink "$dir/run")/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$(readlink "$dir/run")/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=$track
TaskPlugin=task/none
TaskProlog=$dir/task-prolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=$net.1 NodeAddr=$net.1 CPUs=1 State=UNKNOWN
NodeName=$net.2 NodeAddr=$net.2 CPUs=1 State=UNKNOWN
PartitionName=ib Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

slurm_up() {
  local p=$1 net=$2 dir=$3 map=$4 track=${5:-proctrack/linuxproc} n name
  mkdir -p "$dir/ctld"
  # The daemons' sockets (munged's, each slurmstepd's in its spool folder)
  # need paths of at most 108 bytes, which a test's folder may pass: they
  # live in a short folder, DIR/run, which slurm_down removes.
  ln -sfn "$(mktemp -d /tmp/ibslurm.XXXXXX)" "$dir/run"
  chmod 755 "$dir/run/"
  mkdir -p "$dir/run/munge"
  _slurm_conf "$p" "$net" "$dir" "$track" >"$dir/slurm.conf"
  # (cgroup v1, where each slurmd keeps its own tree: slurm_NODENAME.)
  printf '%s\n' CgroupPlugin=cgroup/v1 CgroupMountpoint=/sys/fs/cgroup CgroupAutomount=no ConstrainCores=no \
    ConstrainRAMSpace=no ConstrainDevices=no >"$dir/cgroup.conf"
  cat >"$dir/task-prolog.sh" <<PROLOG
#!/bin/sh
# slurmstepd runs it before each task; its "export NAME=VALUE" lines go to
# the task's environment.
line=\$(grep "^\$SLURMD_NODENAME " "$map") || exit 0
echo "export IMGBUILD_STORE=\$(echo "\$line" | cut -d' ' -f3)"
for kv in \$(echo "\$line" | cut -s -d' ' -f4-); do echo "export \$kv"; done
PROLOG
  chmod 755 "$dir/task-prolog.sh"
  export SLURM_CONF=$dir/slurm.conf
  mungekey -c -k "$dir/munge.key"
  service "$dir/munged.log" munged -F --force --socket="$(readlink "$dir/run")/munge/munge.socket" \
    --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" --seed-file="$dir/munge.seed" \
    --log-file="$dir/munged.log"
  for _ in $(seq 1 50); do [ -S "$dir/run/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$dir/run/munge/munge.socket" ] || { cat "$dir/munged.log" >&2; return 1; }
  service "$dir/slurmctld.out" nsenter --net="/run/netns/$p-h" slurmctld -D -i -f "$dir/slurm.conf"
  for n in a b; do
    name=$net.$([ $n = a ] && echo 1 || echo 2)
    mkdir -p "$dir/run/$name"
    service "$dir/slurmd-$n.out" nsenter --net="/run/netns/$p-$n" slurmd -D -N "$name" -f "$dir/slurm.conf"
  done
  # (sinfo retries an unreachable slurmctld for a minute: 5 s each time.)
  for _ in $(seq 1 300); do
    [ "$(in_ns "$p-h" timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' ')" = "$net.1 idle $net.2 idle " ] && return 0
    sleep 0.2
  done
  echo "slurm did not come up:" >&2
  in_ns "$p-h" timeout 5 sinfo -N >&2 || true
  tail -20 "$dir"/slurmctld.log "$dir"/slurmd-*.log "$dir"/*.out >&2 || true
  return 1
}

slurm_procs() { # PREFIX DIR
  local p=$1 dir=$2
  pgrep -f -- "$dir/" || true
  slurm_ps "$p" | grep -E "^$p-[ab] |^$p-h [0-9]+ .*slurm" | cut -d' ' -f2
  true
}

# Each namespace's processes by name (slurmd, slurmstepd, imgverify...),
# for a test's message.
slurm_ps() { # PREFIX
  local n pid
  for n in h a b; do
    [ -e "/run/netns/$1-$n" ] || continue
    for pid in $(ip netns pids "$1-$n"); do echo "$1-$n $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"; done
  done
}

slurm_down() { # PREFIX DIR
  local p=$1 dir=$2 f pid
  # The jobs first: a slurmd that stops leaves its jobs' slurmstepd running.
  in_ns "$p-h" timeout 10 scancel --partition=ib 2>/dev/null || true
  for _ in $(seq 1 100); do
    slurm_ps "$p" | grep -q slurmstepd || break
    sleep 0.1
  done
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  [ -L "$dir/run" ] && rm -rf "$(readlink "$dir/run")" "$dir/run"
  # proctrack/cgroup's trees (empty now: their processes have ended).
  local net
  net=$(sed -n 's/^NodeName=\([0-9.]*\)\.1 .*/\1/p' "$dir/slurm.conf")
  for f in /sys/fs/cgroup/*/"slurm_$net.1" /sys/fs/cgroup/*/"slurm_$net.2"; do
    [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  local left
  left=$(slurm_procs "$p" "$dir")
  [ -z "$left" ] || { echo "slurm_down: still running: $left" >&2; return 1; }
}
