#!/usr/bin/env bash
# The GPU half of the smoke test across nodes (issue 21), on the GPU machine
# (kind nvidia-h200-x2), run from the repository root:
#   tests/gpu/multinode.sh CARRY OUT
# CARRY: tests/gpu/prepare-multinode-carry.sh makes it (the tools, runc,
# OpenMPI, Debian's docker-registry, their libraries, the stand-in base).
#
# Only simulated, and said so: two "nodes" are two network namespaces of
# this one machine (tests/cluster/netns.sh: node a 10.213.9.1 and node b
# 10.213.9.2, each joined by a veth pair to a bridge of a third namespace;
# the registry and mpirun run on a head namespace 10.213.9.10 on that
# bridge, as on a login node), each node with one GPU of its own
# (IMGBUILD_NODE_GPUS=0 and =1) and its own store, and its own NCCL host id
# (NCCL_HOSTID), so NCCL treats them as two machines: no NVLink, no shared
# memory between them, NCCL over the veths (sockets: there is no IB, so
# `expect-transport-nodes NET/Socket` in this test's definition).
#
#   1. the single-machine smoke test on both GPUs (P2P): its busbw figures
#   2. imgbuild --smoke=required --hosts A,B --push: the DCP2 cases pass on
#      one rank per node, NCCL's links say NET/Socket between the nodes, the
#      busbw figures of the same collectives beside step 1's
#   3. imgverify --smoke --hosts A,B on the pushed digest, killing node b's
#      rank container mid-test: exit 7 within the timeout, node b named,
#      no container left on either node
#
# On a machine with one GPU (kind nvidia-h200, when no x2 is lent) both
# nodes' containers get that GPU: their NCCL host ids differ, so NCCL sees
# two machines (no duplicate-GPU refusal, no P2P or SHM between them) and
# the ranks meet over the veths as above.  Step 1 needs two GPUs and is
# then not run (said in OUT/summary.txt, its column "-").
#
# A test, not a log: each step has the exit code it must have; the script
# exits 1 when any step did otherwise, listing them in OUT/summary.txt, 0
# when all did, 2 when it cannot run at all (no GPU, no namespaces).
set -euo pipefail
[ $# = 2 ] || { echo "usage: tests/gpu/multinode.sh CARRY OUT" >&2; exit 2; }
CARRY=$(readlink -f "$1"); OUT=$(mkdir -p "$2" && readlink -f "$2")
# The packed carry (DIR/carry.tgz) is unpacked first.
[ -f "$CARRY" ] || CARRY=$CARRY/carry.tgz
rm -rf /tmp/ib-mn-carry && mkdir -p /tmp/ib-mn-carry && tar xzf "$CARRY" -C /tmp/ib-mn-carry && CARRY=/tmp/ib-mn-carry
ROOT=$(pwd)
: >"$OUT/summary.txt"
export LD_LIBRARY_PATH=$CARRY/lib PATH=$CARRY/bin:$CARRY/ompi/usr/bin:/usr/local/cuda/bin:$PATH
export OPAL_PREFIX=$CARRY/ompi/usr
# PMIx finds its plugins where Debian put them, not under OPAL_PREFIX.
export PMIX_MCA_mca_base_component_path=$CARRY/ompi/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
# mpirun (OpenMPI 4.1.4, the carried hwloc) died with SIGSEGV in
# hwloc_shmem_topology_write, sharing its topology at a fixed address, on
# one of two runs in the GPU machine's VM. The shared topology is for MPI
# programs; the ranks here are not, so it is turned off.
export OMPI_MCA_rtc_hwloc_vmhole=none
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
IB=$CARRY/build/imgbuild IV=$CARRY/build/imgverify
W=/tmp/ib-mn
FAILED=()
step() { echo "== $*" | tee -a "$OUT/summary.txt"; }
fail() { FAILED+=("$*"); echo "   FAIL: $*" | tee -a "$OUT/summary.txt"; }
expect() { # CODE NAME LOG CMD... (ERRLOG=FILE: stderr apart, for a --json LOG)
  local want=$1 name=$2 log=$3 rc=0 t0
  shift 3
  t0=$(date +%s)
  if [ -n "${ERRLOG:-}" ]; then "$@" >"$log" 2>"$ERRLOG" || rc=$?; else "$@" >"$log" 2>&1 || rc=$?; fi
  echo "   exit $rc, must be $want ($(($(date +%s) - t0)) s)" | tee -a "$OUT/summary.txt"
  [ "$rc" = "$want" ] || { fail "$name: exit $rc, must be $want (log: $log)"; tail -20 "$log" >&2; }
}
expect_in() { grep -Eq -- "$2" "$1" || fail "$3: \`$2\` not in $1"; }

if ! nvidia-smi -L >"$OUT/gpus.txt" || [ "$(wc -l <"$OUT/gpus.txt")" -lt 1 ]; then
  echo "multinode.sh: this machine has no GPU: nothing was tested" >&2
  exit 2
fi
ngpu=$(wc -l <"$OUT/gpus.txt")
gpu_b=1
if [ "$ngpu" -lt 2 ]; then
  gpu_b=0
  echo "one GPU on this machine: both nodes' containers get GPU 0 (two NCCL host ids); step 1 (P2P, two GPUs) not run" |
    tee -a "$OUT/summary.txt"
fi
mpirun --version >"$OUT/mpirun.txt" 2>&1 || { cat "$OUT/mpirun.txt" >&2; echo "multinode.sh: mpirun does not run" >&2; exit 2; }
source "$ROOT/tests/cluster/netns.sh"
P=ib21g
lan_down "$P"
if ! lan_up "$P" 10.213.9 2>"$OUT/netns.txt"; then
  cat "$OUT/netns.txt" >&2
  echo "multinode.sh: cannot make network namespaces and veth pairs here: nothing was tested" >&2
  lan_down "$P"
  exit 2
fi
trap 'lan_down "$P"' EXIT
rm -rf "$W" && mkdir -p "$W"/{nodeA,nodeB,coord,reg} && cp -a "$CARRY/store" "$W/store"
export IMGBUILD_STORE=$W/store
cat >"$W/reg/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $W/reg/data}}
http: {addr: '10.213.9.10:5000'}
EOF
setsid nsenter --net="/run/netns/$P-h" docker-registry serve "$W/reg/config.yml" >"$OUT/registry.log" 2>&1 &
# Each node: its namespace, its store, its GPU, its NCCL host id.
# Each node its own TMPDIR, as two machines have: OpenMPI's session folders
# are named by host name and user, the same for both "nodes" here, and one
# daemon's cleanup raced the other's mkdir (mpirun exit 213, "A call to
# mkdir was unable to create the desired directory").
mkdir -p "$W/tmpA" "$W/tmpB"
cat >"$W/nodes.map" <<EOF
10.213.9.1 $P-a $W/nodeA IMGBUILD_NODE_GPUS=0 NCCL_HOSTID=ib21-node-a TMPDIR=$W/tmpA
10.213.9.2 $P-b $W/nodeB IMGBUILD_NODE_GPUS=$gpu_b NCCL_HOSTID=ib21-node-b TMPDIR=$W/tmpB
EOF
export NODES_MAP=$W/nodes.map OMPI_MCA_plm_rsh_agent=$ROOT/tests/cluster/agent.sh
# NCCL between the nodes: the veths, sockets (no IB here); mpirun's own
# traffic on them too.
export NCCL_SOCKET_IFNAME=$P- NCCL_IB_DISABLE=1 OMPI_MCA_oob_tcp_if_include=10.213.9.0/24
in_head() { nsenter --net="/run/netns/$P-h" "$@"; }

step "base: stand-in + this machine's NCCL"
expect 0 base "$OUT/base.txt" "$IB" tests/gpu/nccl-layer
cp -a images "$W/defs" && ln -sfn "$ROOT/kernels" "$W/kernels"
sed -i 's/^expect-transport P2P$/expect-transport P2P\nexpect-transport-nodes NET\/Socket\nranks 2/' "$W/defs/dsv41-flash-dcp2/image.conf"
grep -q '^expect-transport-nodes NET/Socket$' "$W/defs/dsv41-flash-dcp2/image.conf"

if [ "$ngpu" -ge 2 ]; then
  step "1. one machine, both GPUs (P2P): the figures to compare"
  ERRLOG=$OUT/one.err expect 0 one "$OUT/one.txt" "$IB" --smoke=required --json "$W/defs/dsv41-flash-dcp2" -t dcp2-one:1
  mv "$OUT/one.txt" "$OUT/one.json"
  "$IB" --smoke=required "$W/defs/dsv41-flash-dcp2" -t dcp2-one:2 >"$OUT/one.txt" 2>&1 || fail "one: human output"
  expect_in "$OUT/one.txt" 'smoke: NCCL 0\[0\] -> 1\[1\] via P2P' one
else
  step "1. not run: one GPU (P2P needs two)"
  echo '{"smoke": {"bandwidth": []}}' >"$OUT/one.json"
fi

step "2. imgbuild --smoke=required --hosts 10.213.9.1,10.213.9.2 --push: DCP2 across the nodes over NET/Socket"
# The machine's NCCL draws a jit-budget warning on stderr: kept apart from
# the report.
ERRLOG=$OUT/nodes.err expect 0 nodes "$OUT/nodes.json" in_head "$IB" --smoke=required --json --tls-verify=false \
  --hosts 10.213.9.1,10.213.9.2 --push docker://10.213.9.10:5000/dcp2:1 "$W/defs/dsv41-flash-dcp2"
python3 - "$OUT/one.json" "$OUT/nodes.json" >"$OUT/compare.txt" <<'PY' || fail "nodes: the report is not as it must be"
import json, sys
one = json.load(open(sys.argv[1]))["smoke"]
nodes = json.load(open(sys.argv[2]))
s = nodes["smoke"]
ok = nodes["status"] == "pass" and s["status"] == "pass" and s["launcher"] == "mpirun" and s["world"] == 2
for l in s.get("links", []):
    print("link", l["from"], l["from_host"], "->", l["to"], l["to_host"], l["transport"], l["channels"], "ok" if l["ok"] else "NOT OK")
    ok = ok and l["ok"] and l["transport"].startswith("NET/Socket") and l["from_host"] != l["to_host"]
ok = ok and len(s.get("links", [])) >= 2
print("%-32s %12s %14s %14s" % ("collective", "bytes", "busbw 1 machine", "busbw 2 nodes"))
b1 = {(b["collective"], b["bytes"]): b for b in one.get("bandwidth", [])}
for b in s.get("bandwidth", []):
    o = b1.get((b["collective"], b["bytes"]))
    print("%-32s %12d %14s %14.2f" % (b["collective"], b["bytes"], "%.2f" % o["busbw_gbs"] if o else "-", b["busbw_gbs"]))
ok = ok and len(s.get("bandwidth", [])) >= 6
for r in s.get("ranks", []):
    fails = [l for l in r["output"].splitlines() if ": FAIL" in l]
    passes = [l for l in r["output"].splitlines() if l.startswith("case ") and ": ok" in l]
    print("rank", r["rank"], r["host"], len(passes), "cases ok,", len(fails), "failed")
    ok = ok and not fails and len(passes) >= 12
sys.exit(0 if ok else 1)
PY
cat "$OUT/compare.txt" | tee -a "$OUT/summary.txt"
digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest"])' "$OUT/nodes.json" || true)
if [ -z "$digest" ]; then
  # What the launcher alone does between the namespaces, for the record.
  in_head mpirun --allow-run-as-root --mca plm '^isolated' -np 2 --host 10.213.9.1,10.213.9.2 --tag-output hostname >"$OUT/mpirun-alone.txt" 2>&1 ||
    true
  fail "nodes: nothing pushed; step 3 not run (mpirun alone: $OUT/mpirun-alone.txt)"
  printf 'FAILED: %s\n' "${FAILED[@]}" | tee -a "$OUT/summary.txt"
  exit 1
fi

step "3. imgverify --smoke --hosts on the pushed digest; node b's rank container killed mid-test: 7, named, nothing left"
ref=docker://10.213.9.10:5000/dcp2@$digest
( IMGBUILD_STORE=$W/coord in_head "$IV" --smoke --hosts 10.213.9.1,10.213.9.2 --tls-verify=false \
    --definition "$W/defs/dsv41-flash-dcp2" "$ref" >"$OUT/kill.txt" 2>&1 && echo 0 >"$W/kill.rc" ||
    echo $? >"$W/kill.rc" ) &
verify_pid=$!
killed=
for _ in $(seq 1 900); do
  id=$(runc --root "$W/nodeB/imgbuild/run/runc" list -q 2>/dev/null || true)
  if [ -n "$id" ] && grep -qs '^case ' "$W"/nodeB/imgbuild/run/bundle-*/output; then
    runc --root "$W/nodeB/imgbuild/run/runc" kill "$id" KILL && killed=$id
    break
  fi
  sleep 0.2
done
# That one only: a plain wait would wait for the registry too (netns.sh).
wait "$verify_pid"
[ -n "$killed" ] || fail "kill: node b's rank container never ran a case"
rc=$(cat "$W/kill.rc")
echo "   killed $killed; exit $rc, must be 7" | tee -a "$OUT/summary.txt"
[ "$rc" = 7 ] || fail "kill: exit $rc, must be 7"
expect_in "$OUT/kill.txt" 'error: .*node 10\.213\.9\.2 \(rank 1\): the smoke program was killed' kill
for n in nodeA nodeB; do
  left=$(runc --root "$W/$n/imgbuild/run/runc" list -q 2>/dev/null || true)
  [ -z "$left" ] || fail "kill: containers left on $n: $left"
done
! pgrep -f '^/opt/imgbuild/dcp2_smoke' >/dev/null || fail "kill: a dcp2_smoke is still running"
grep -E 'error|smoke:' "$OUT/kill.txt" | tail -8 | tee -a "$OUT/summary.txt"

if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${FAILED[@]}" | tee -a "$OUT/summary.txt"
  exit 1
fi
echo "all steps as they must be" | tee -a "$OUT/summary.txt"
