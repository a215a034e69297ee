# The smoke test across nodes (issue 21), on a machine without GPUs: the
# real launcher (OpenMPI's mpirun), the real runtime (runc), a real
# registry, and "nodes" that are network namespaces made here (one machine,
# addresses of our own, nothing off it: tests/cluster/netns.sh).  mpirun
# reaches the nodes through tests/cluster/agent.sh, which stands in for ssh
# (OMPI_MCA_plm_rsh_agent) and gives each node its own store.  The program
# in the rank containers is tests/cluster/rankcheck.c ([smoke] gpus-per-rank
# 0): the ranks meet at NCCL_COMM_ID as NCCL's bootstrap would.  "No GPU" is
# this machine's real state; a killed rank container is a real kill.  The
# GPU half (DCP2 over NCCL between two namespaces): tests/gpu/multinode.sh.

source "$ROOT/tests/cluster/netns.sh"

mn_require() {
  [ "$(id -u)" = 0 ] || skip_test "network namespaces and runc need root"
  command -v mpirun >/dev/null || skip_test "no mpirun (openmpi-bin; scripts/install-deps.sh test)"
  command -v runc >/dev/null || skip_test "no runc"
}

# The stand-in DCP2 definition with a smoke program that needs no GPU.
mn_definition() { # DIR
  copy_images "$1"
  sed -i 's/^\[smoke\]$/[smoke]\ngpus-per-rank 0/' "$1/dsv41-flash-dcp2/image.conf"
  cc -O2 -o rankcheck "$ROOT/tests/cluster/rankcheck.c"
  cc -O2 -DHOLD=600 -o rankcheck-hold "$ROOT/tests/cluster/rankcheck.c"
}

# mn_lan: namespaces $P-h (the head: registry, imgverify, mpirun), $P-a and
# $P-b (the nodes, 10.213.7.1 and .2); the registry at 10.214.7.10:5000 on
# the head, which the nodes reach through a route via the head (node b's
# can be taken away).  NODES_MAP names each node's store.
mn_lan() {
  P=ib21$(printf %04x $((RANDOM)))
  trap 'lan_down "$P"' EXIT
  lan_up "$P" 10.213.7
  ip -n "$P-h" addr add 10.214.7.10/24 dev "$P-h-e"
  ip -n "$P-a" route add 10.214.7.0/24 via 10.213.7.10
  ip -n "$P-b" route add 10.214.7.0/24 via 10.213.7.10
  mkdir -p reg nodeA nodeB coord
  {
    echo "version: 0.1"
    echo "log: {level: warn}"
    echo "storage: {filesystem: {rootdirectory: $PWD/reg/data}, delete: {enabled: true}}"
    echo "http: {addr: '10.214.7.10:5000'}"
  } >reg/config.yml
  service reg/log nsenter --net="/run/netns/$P-h" docker-registry serve reg/config.yml
  for _ in $(seq 1 100); do
    in_ns "$P-h" curl -s -o /dev/null http://10.214.7.10:5000/v2/ && break
    sleep 0.1
  done
  # Each node its own TMPDIR, as two machines have: OpenMPI's session
  # folders are named by host name and user, the same for both nodes here,
  # and one daemon's cleanup can race the other's mkdir (mpirun exit 213).
  mkdir -p tmpA tmpB
  printf '10.213.7.1 %s %s TMPDIR=%s\n10.213.7.2 %s %s TMPDIR=%s\n' "$P-a" "$PWD/nodeA" "$PWD/tmpA" \
    "$P-b" "$PWD/nodeB" "$PWD/tmpB" >nodes.map
  export NODES_MAP=$PWD/nodes.map OMPI_MCA_plm_rsh_agent=$ROOT/tests/cluster/agent.sh
}

# imgverify --smoke across the two nodes, from the head, with its own store.
# The image is the stand-in's (the same digest; the seed store's warm-up
# build recorded the original definition too): --definition picks ours.
# $MN_UNDER: words before imgverify (salloc ...: inside a Slurm allocation).
mn_verify() { # REF ARGS...
  local ref=$1
  shift
  # shellcheck disable=SC2086 # MN_UNDER's words, one each
  IMGBUILD_STORE=$PWD/coord timeout 600 nsenter --net="/run/netns/$P-h" ${MN_UNDER:-} \
    "$IV" --smoke --hosts 10.213.7.1,10.213.7.2 --tls-verify=false --definition d/dsv41-flash-dcp2 "$@" "$ref"
}

# A run whose rank on node b is killed mid-test (its container, once both
# ranks run and node b's has met rank 0): it fails with exit 7, naming
# node b, and every node answers the sweep.  Its report NAME.json, its
# stderr NAME.err.
mn_killed_run() { # NAME ARGS...
  local name=$1 a b id pid rc=0
  shift
  mn_verify "$ref" --json "$@" --smoke-program "$PWD/rankcheck-hold" >"$name.json" 2>"$name.err" &
  pid=$!
  for _ in $(seq 1 600); do
    a=$(runc --root nodeA/imgbuild/run/runc list -q 2>/dev/null | wc -l)
    b=$(runc --root nodeB/imgbuild/run/runc list -q 2>/dev/null | wc -l)
    [ "$a$b" = 11 ] && grep -q 'met rank 0' nodeB/imgbuild/run/bundle-*/output 2>/dev/null && break
    sleep 0.2
  done
  id=$(runc --root nodeB/imgbuild/run/runc list -q)
  [ -n "$id" ]
  runc --root nodeB/imgbuild/run/runc kill "$id" KILL
  wait "$pid" || rc=$?
  cat "$name.err"
  [ "$rc" = 7 ]
  grep 'error:' "$name.err" | grep -q 'node 10.213.7.2 (rank 1): the smoke program was killed (SIGKILL) (exit 137)'
  jq -e '.smoke.status == "fail" and (.smoke.sweep | length == 2) and all(.smoke.sweep[]; .answered)' "$name.json"
}

# The candidate pushed from the head to its registry: $digest, and $ref
# by digest.
mn_push() {
  IMGBUILD_STORE=$IMGBUILD_STORE in_ns "$P-h" "$IB" -q --smoke=off --tls-verify=false --json \
    --push docker://10.214.7.10:5000/dcp2:1 d/dsv41-flash-dcp2 >push.json
  digest=$(jq -r .manifest push.json)
  ref=docker://10.214.7.10:5000/dcp2@$digest
}

# A passed run through LAUNCHER: both nodes pulled the image by digest into
# their own stores, one rank ran on each, and the ranks met at
# NCCL_COMM_ID (node a's address) from inside their containers.
mn_passed() { # JSON LAUNCHER
  local j=$1 n
  validate "$j"
  jq -e --arg l "$2" '.status == "pass" and .smoke.status == "pass" and .smoke.launcher == $l and .smoke.world == 2
    and .smoke.nccl_comm_id == "10.213.7.1:29517"' "$j"
  jq -e '[.smoke.nodes[] | .host + " " + .pull] == ["10.213.7.1 pass", "10.213.7.2 pass"]' "$j"
  jq -e '.smoke.ranks[0].host == "10.213.7.1" and .smoke.ranks[1].host == "10.213.7.2"' "$j"
  jq -r '.smoke.ranks[0].output' "$j" | grep -qx 'rankcheck: rank 0 met rank 1'
  jq -r '.smoke.ranks[1].output' "$j" | grep -qx 'rankcheck: rank 1 met rank 0 (world 2)'
  for n in nodeA nodeB; do
    [ -f "$n/blobs/sha256/${digest#sha256:}" ]
    jq -r ".smoke.nodes[] | select(.host == \"10.213.7.$([ $n = nodeA ] && echo 1 || echo 2)\") | .pull_output" \
      "$j" | grep -q "pulled $digest into $PWD/$n"
  done
}

# No container of the smoke test on either node, running or not, no
# bundle, nothing mounted, no smoke program running.
mn_nothing_left() {
  local n
  for n in nodeA nodeB; do
    [ -z "$(runc --root "$n/imgbuild/run/runc" list -q 2>/dev/null)" ]
    [ -z "$(ls "$n/imgbuild/run" | grep -v '^runc$' || true)" ]
    refute grep -q "$PWD/$n" /proc/mounts
  done
  # (Another suite's smoke program may run meanwhile: only those whose root
  # is a bundle of these nodes count.)
  local p
  for p in $(pgrep -f "^/opt/imgbuild/dcp2_smoke" || true); do
    if readlink "/proc/$p/root" 2>/dev/null | grep -q "^$PWD/node"; then
      log "a smoke program of these nodes is still running: pid $p"
      return 1
    fi
  done
}

t_multinode_two_nodes_meet_through_mpirun_and_a_killed_rank_ends_the_run() {
  mn_require
  build_base
  mn_definition d
  mn_lan
  mn_push

  # 1. Both nodes pull the image by digest into their own stores, mpirun
  # starts one rank per node, each in a container on its node, and they
  # meet at NCCL_COMM_ID (node a's address) from inside the containers.
  mn_verify "$ref" --json --smoke-program "$PWD/rankcheck" >pass.json 2>pass.err
  cat pass.err
  mn_passed pass.json mpirun
  jq -r '.smoke.commands.ranks' pass.json | grep -q '^mpirun --allow-run-as-root --host 10.213.7.1:1,10.213.7.2:1 -np 2 --map-by slot .* -x NCCL_COMM_ID=10.213.7.1:29517 .*--node-rank '"$ref"
  jq -e '.smoke.links_not_checked | startswith("gpus-per-rank 0")' pass.json
  mn_nothing_left

  # 2. Node b's rank container is killed mid-test: the run ends (mpirun
  # stops rank 0, whose reaper removes its container), naming node b.
  mn_killed_run kill
  mn_nothing_left

  # 3. Node b cannot reach the registry: the pull fails there, named, and
  # no rank starts anywhere.
  ip -n "$P-b" route del 10.214.7.0/24
  rc=0
  mn_verify "$ref" --json --smoke-program "$PWD/rankcheck" >nopull.json 2>nopull.err || rc=$?
  cat nopull.err
  [ "$rc" = 8 ]
  grep 'error:' nopull.err | grep -q "pull: node 10.213.7.2: cannot pull $ref into $PWD/nodeB: "
  jq -e '[.smoke.nodes[].pull] == ["pass", "fail"] and (.smoke | has("ranks") | not)' nopull.json
  mn_nothing_left
}

t_multinode_launch_lines_and_a_node_without_gpu() {
  mn_require
  build_base
  registry_start
  "$IB" -q --smoke=off --json --push "docker://$REG/dcp2:1" dsv41-flash-dcp2 >push.json
  digest=$(jq -r .manifest push.json)
  ref=docker://$REG/dcp2@$digest
  iv=$ROOT/${IB_BUILD:-build}/imgverify
  # The command lines: mpirun by default, srun inside a Slurm allocation.
  "$IV" --smoke --hosts spark1,spark2,spark3,spark4 --dry-run "$ref" >mpirun.txt 2>err.txt
  cat mpirun.txt
  defhex=$(sed -n 2p mpirun.txt | sed 's/.*--node-definition \([0-9a-f]*\).*/\1/')
  run=$(sed -n 2p mpirun.txt | sed 's/ --node-run-id [0-9a-f]*//')
  [ "$(sed -n 1p mpirun.txt)" = "mpirun --allow-run-as-root --host spark1:1,spark2:1,spark3:1,spark4:1 -np 4 --map-by node --bind-to none --mca plm '^isolated' --tag-output $iv --node-pull $ref --node-slots 1,1,1,1" ]
  [ "$run" = "mpirun --allow-run-as-root --host spark1:1,spark2:1,spark3:1,spark4:1 -np 4 --map-by slot --bind-to none --mca plm '^isolated' --tag-output -x NCCL_COMM_ID=spark1:29517 $iv --node-rank $ref --dcp 2 --node-definition $defhex" ]
  # The definition travels as the hex of its gate sections.
  echo "$defhex" | python3 -c 'import sys; print(bytes.fromhex(sys.stdin.read().strip()).decode())' |
    grep -qx 'expect-transport P2P'
  SLURM_JOB_ID=4242 NCCL_SOCKET_IFNAME=enp1s0f1np1 "$IV" --smoke --hosts spark1,spark2 --comm-port 40000 --dry-run "$ref" >srun.txt
  cat srun.txt
  [ "$(sed -n 1p srun.txt)" = "srun --nodes=2 --nodelist=spark1,spark2 --ntasks=2 --ntasks-per-node=1 --distribution=block --kill-on-bad-exit=1 --label --export=ALL $iv --node-pull $ref --node-slots 1,1" ]
  sed -n 2p srun.txt | grep -q "^srun --nodes=2 --nodelist=spark1,spark2 --ntasks=2 --ntasks-per-node=1 --distribution=block --kill-on-bad-exit=1 --label --export=ALL env NCCL_COMM_ID=spark1:40000 NCCL_SOCKET_IFNAME=enp1s0f1np1 $iv --node-rank $ref "
  # Bad hosts, a reference without a digest, srun with unequal nodes.
  expect_fail 2 '--hosts: `spark1` is named twice' "$IV" --smoke --hosts spark1,spark1 "$ref"
  expect_fail 2 '--hosts: `a:0`: the GPUs of a host are 1 to 64' "$IV" --smoke --hosts a:0 "$ref"
  expect_fail 2 'each node pulls the image by digest: `docker://[^`]*:1` is not docker://REGISTRY/REPO@sha256' \
    "$IV" --smoke --hosts a,b "docker://$REG/dcp2:1"
  SLURM_JOB_ID=1 expect_fail 2 'srun starts as many ranks on every node' "$IV" --smoke --hosts a:2,b:4 "$ref"
  expect_fail 2 '--hosts, --launcher, --comm-port, --smoke-program and --dry-run go with --smoke' \
    "$IV" --hosts a,b "$ref"
  expect_fail 2 '--hosts: the nodes pull the image from a registry: add --push' \
    "$IB" --smoke=required --hosts a,b dsv41-flash-dcp2

  # This machine has no GPU: the real state.  mpirun starts the pull on
  # this machine as the one node; it pulls, then refuses, named.
  [ ! -e /dev/nvidia0 ] || skip_test "this host has a GPU: tests/gpu/multinode.sh tests it"
  mkdir node
  rc=0
  IMGBUILD_STORE=$PWD/node "$IV" --json --smoke --hosts 127.0.0.1:2 --definition "$ROOT/images/dsv41-flash-dcp2" \
    "$ref" >nogpu.json 2>nogpu.err || rc=$?
  cat nogpu.err
  [ "$rc" = 7 ]
  grep 'error:' nogpu.err | grep -q 'pull: node 127.0.0.1: this node has 0 GPUs (no /dev/nvidia0), --hosts gives it 2'
  [ -f "node/blobs/sha256/${digest#sha256:}" ]
  jq -e '.smoke.status == "fail" and .smoke.nodes[0].pull == "fail"' nogpu.json
  # imgbuild --smoke=required --hosts after --push: the candidate goes to
  # the registry untagged, the nodes refuse, and no tag names it.
  rc=0
  "$IB" --smoke=required --hosts 127.0.0.1:2 --push "docker://$REG/dcp2:2" -t dcp2:2 dsv41-flash-dcp2 2>build.err || rc=$?
  cat build.err
  [ "$rc" = 7 ]
  grep 'error:' build.err | grep -q 'pull: node 127.0.0.1: this node has 0 GPUs'
  grep -q "the candidate goes to docker://$REG/dcp2@sha256:" build.err
  refute skopeo inspect --tls-verify=false "docker://$REG/dcp2:2" >/dev/null 2>&1
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:2" >/dev/null 2>&1
}

# Under a real Slurm (issue 48): Debian's slurmctld in the head namespace,
# a slurmd in each node's (tests/cluster/slurm.sh), imgverify inside an
# allocation (salloc), so that --launcher auto picks srun, as on a DGX
# cluster.  The nodes' names in Slurm are their addresses, as --hosts
# gives them to srun and NCCL_COMM_ID.  TRACK: slurm_up's.
mn_slurm() { # [TRACK]
  command -v slurmctld >/dev/null || skip_test "no slurmctld (slurm-wlm; scripts/install-deps.sh test)"
  command -v munged >/dev/null || skip_test "no munged (munge; scripts/install-deps.sh test)"
  source "$ROOT/tests/cluster/slurm.sh"
  trap 'slurm_down "$P" "$PWD/slurm" || true; lan_down "$P"' EXIT
  slurm_up "$P" 10.213.7 "$PWD/slurm" "$PWD/nodes.map" "${1:-}"
  MN_UNDER="salloc --quiet --nodes=2 --nodelist=10.213.7.1,10.213.7.2 --time=15"
}

# Nothing of a run left on the nodes: no container, bundle, mount or smoke
# program (mn_nothing_left), no job in Slurm, and nothing running in the
# node namespaces but their slurmd (no slurmstepd, no imgverify, no
# reaper, no rank), within 10 s of the run's end (slurmstepd reports the
# step's end before it exits).
mn_slurm_nothing_left() {
  mn_nothing_left
  local left
  for _ in $(seq 1 50); do
    left=$(slurm_ps "$P" | grep -E "^$P-[ab] " | grep -v ' slurmd -D -N ' || true)
    [ -z "$left" ] && break
    sleep 0.2
  done
  [ -z "$left" ] || { log "left running on the nodes:" "$left"; return 1; }
  [ -z "$(in_ns "$P-h" squeue -h)" ]
}

tall_multinode_srun_under_slurm_starts_a_rank_per_node_and_a_killed_rank_ends_the_run() {
  mn_require
  build_base
  mn_definition d
  mn_lan
  mn_slurm
  mn_push

  # 1. Inside the allocation srun is the launcher: each node's slurmd
  # starts the pull there (into the node's own store, by digest), then one
  # rank per node, which meet at NCCL_COMM_ID from their containers.
  mn_verify "$ref" --json --smoke-program "$PWD/rankcheck" >pass.json 2>pass.err
  cat pass.err
  mn_passed pass.json srun
  jq -r '.smoke.commands.ranks' pass.json |
    grep -q '^srun --nodes=2 --nodelist=10.213.7.1,10.213.7.2 --ntasks=2 --ntasks-per-node=1 .* env NCCL_COMM_ID=10.213.7.1:29517 .*--node-rank '"$ref"
  # Each slurmd launched one task of each step (the pull, the ranks).
  for n in 1 2; do
    [ "$(grep -c 'launch task StepId=[0-9]*\.[01] ' "slurm/slurmd-10.213.7.$n.log")" = 2 ]
  done
  mn_slurm_nothing_left

  # 2. Node b's rank container is killed mid-test: its task fails, srun
  # (--kill-on-bad-exit) ends the step, and the error names node b.
  mn_killed_run kill
  jq -e '.smoke.launcher == "srun"' kill.json
  mn_slurm_nothing_left

  # 3. The same under mpirun in the allocation: OpenMPI starts its daemons
  # on the nodes through Slurm (a step of the job on each node per mpirun;
  # no remote shell: agent.sh is not given), the run passes, and a killed
  # rank ends it, naming node b.
  MN_UNDER="env -u OMPI_MCA_plm_rsh_agent $MN_UNDER"
  before=$(cat slurm/slurmd-10.213.7.[12].log | grep -c 'launch task')
  mn_verify "$ref" --json --launcher mpirun --smoke-program "$PWD/rankcheck" >mpi.json 2>mpi.err
  cat mpi.err
  mn_passed mpi.json mpirun
  jq -r '.smoke.commands.ranks' mpi.json | grep -q '^mpirun --allow-run-as-root --host 10.213.7.1:1,10.213.7.2:1 -np 2 '
  for n in 1 2; do
    [ "$(grep -c 'launch task StepId=3\.[01] ' "slurm/slurmd-10.213.7.$n.log")" = 2 ]
  done
  [ "$(cat slurm/slurmd-10.213.7.[12].log | grep -c 'launch task')" = $((before + 4)) ]
  mn_slurm_nothing_left
  mn_killed_run mpikill --launcher mpirun
  jq -e '.smoke.launcher == "mpirun"' mpikill.json
  mn_slurm_nothing_left

  # 4. Slurm stops, and no process of it is left (slurm_down fails else).
  slurm_down "$P" "$PWD/slurm"
  refute pgrep -f "$PWD/slurm/"
  [ -z "$(slurm_ps "$P" | grep -E "^$P-[ab] |slurm" || true)" ]
  figure "Slurm: srun and mpirun each start a rank per node (2 nodes), pass; a killed rank ends each run naming its node; nothing left"
}

# Most Slurm sites track a step's processes by its cgroup (proctrack/
# cgroup): when srun ends the step, slurmstepd kills every process of it,
# rank 0's reaper too (a session of its own does not leave a cgroup), so
# rank 0's container outlives its reaper.  The sweep removes it, its bundle
# and the rank's folder, which is named after the container for that.
tall_multinode_srun_under_slurm_with_cgroup_tracking_a_killed_rank_leaves_nothing() {
  mn_require
  grep -q ' /sys/fs/cgroup/freezer cgroup ' /proc/mounts || skip_test "no cgroup v1 freezer (Slurm's proctrack/cgroup)"
  build_base
  mn_definition d
  mn_lan
  mn_slurm proctrack/cgroup
  mn_push
  mn_killed_run kill
  jq -e '.smoke.launcher == "srun"' kill.json
  # Rank 0's container was left to the sweep: its reaper ended with the step.
  jq -e '.smoke.sweep[0].removed == 1' kill.json
  mn_slurm_nothing_left
  slurm_down "$P" "$PWD/slurm"
  refute pgrep -f "$PWD/slurm/"
  [ -z "$(ls -d /sys/fs/cgroup/*/slurm_10.213.7.[12] 2>/dev/null)" ]
  figure "Slurm with proctrack/cgroup: a killed rank's run leaves no container, bundle or cgroup"
}
