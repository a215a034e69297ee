# shellcheck shell=bash
# What the GPU scripts that build with a carry share (smoke.sh,
# probe-one.sh), sourced after `set -euo pipefail`:
#   gpu_setup CARRY OUT DEFS
# CARRY (a folder, or the carry.tgz that prepare-carry.sh --pack makes,
# unpacked first), OUT (made, its summary.txt emptied), the carry's tools
# and libraries on the paths, IB and IV the carry's imgbuild and imgverify;
# exits 2 when this machine has no usable GPU (OUT/gpus.txt: nvidia-smi -L);
# the carry's store copied to IMGBUILD_STORE and the scratch folder DEFS
# removed.  Then each step with the exit code it must have (expect), what
# its log must say (expect_in), and gpu_finish at the end: exit 1 listing
# the failures, 0 when there were none.

gpu_setup() {
  CARRY=$(readlink -f "$1"); OUT=$2
  if [ -f "$CARRY" ]; then
    rm -rf /tmp/ib-carry && mkdir -p /tmp/ib-carry && tar xzf "$CARRY" -C /tmp/ib-carry && CARRY=/tmp/ib-carry
  fi
  mkdir -p "$OUT"
  : >"$OUT/summary.txt"
  export LD_LIBRARY_PATH=$CARRY/lib PATH=$CARRY/bin:/usr/local/cuda/bin:$PATH
  export IMGBUILD_STORE=/tmp/ib-store NCCL_NVLS_ENABLE=0
  IB=$CARRY/build/imgbuild IV=$CARRY/build/imgverify
  if [ ! -e /dev/nvidia0 ] || ! nvidia-smi -L >"$OUT/gpus.txt"; then
    echo "$(basename "$0"): this machine has no usable GPU: nothing was tested" >&2
    exit 2
  fi
  rm -rf "$IMGBUILD_STORE" "$3" && cp -a "$CARRY/store" "$IMGBUILD_STORE"
  FAILED=()
  STEPS=0
}

step() { echo "== $*" | tee -a "$OUT/summary.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
fail() { FAILED+=("$*"); echo "   FAIL: $*" | tee -a "$OUT/summary.txt"; }

# expect CODE NAME LOG CMD...: CMD must exit with CODE ("any": the code is
# recorded, not judged).
expect() {
  local want=$1 name=$2 log=$3 t0 rc=0
  shift 3
  STEPS=$((STEPS + 1))
  t0=$(now)
  "$@" >"$log" 2>&1 || rc=$?
  echo "   exit $rc, must be $want ($(since "$t0") s)" | tee -a "$OUT/summary.txt"
  if [ "$want" != any ] && [ "$rc" != "$want" ]; then
    fail "$name: exit $rc, must be $want (log: $log)"
    tail -20 "$log" >&2
  fi
}

# expect_in LOG REGEX NAME: the log of a step must say REGEX.
expect_in() {
  grep -Eq -- "$2" "$1" || fail "$3: \`$2\` not in $1"
}

# not_tagged TAG: a failed build left no tag (imgverify: 9, does not resolve).
not_tagged() {
  local rc=0
  "$IV" --kernels "$1" >/dev/null 2>&1 || rc=$?
  if [ "$rc" = 9 ]; then
    echo "   $1 not tagged" | tee -a "$OUT/summary.txt"
  else
    fail "$1: imgverify --kernels exit $rc, must be 9 (the tag must not exist)"
  fi
}

gpu_finish() {
  if [ ${#FAILED[@]} -gt 0 ]; then
    { echo "FAILED: ${#FAILED[@]} check(s) of $STEPS steps:"; printf '  %s\n' "${FAILED[@]}"; } | tee -a "$OUT/summary.txt"
    exit 1
  fi
  echo "PASSED: all $STEPS steps as they must be" | tee -a "$OUT/summary.txt"
}
