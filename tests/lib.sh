# Shared by the integration suites: a tiny runner, the real services the
# tests start themselves (dockerd on a private socket), and helpers.
# Every test runs in a subshell with `set -e` in a fresh scratch folder; a
# test passes when its function returns 0.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IB=$ROOT/build/imgbuild
IV=$ROOT/build/imgverify
SITE=/usr/local/lib/python3.12/dist-packages
T_PASS=0
T_FAIL=0
T_TOP=$(mktemp -d /tmp/ibt.XXXXXX)
DOCKER_SOCK=$T_TOP/d.sock
D="docker -H unix://$DOCKER_SOCK"

log() { printf '  %s\n' "$*" >&2; }

# `! cmd` never stops a `set -e` script; this does.
refute() {
  if "$@"; then
    log "expected to fail: $*"
    return 1
  fi
  return 0
}

# The test runs outside any `if`, `&&` or `||`: there bash would ignore
# `set -e` in the whole subshell, and a test would fail only by its last
# command (tests/integration/zz_harness.sh checks this).
run_test() {
  local name=$1
  local dir=$T_TOP/$name rc=0
  mkdir -p "$dir"
  (
    cd "$dir" || exit 1
    export IMGBUILD_STORE=$dir/store
    set -e
    "$name"
  ) >"$dir/log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    T_PASS=$((T_PASS + 1))
    echo "ok $name"
  else
    T_FAIL=$((T_FAIL + 1))
    echo "FAIL $name"
    grep -v '^[[:space:]]*$' "$dir/log" | tail -25 | sed 's/^/    /'
  fi
}

# expect_fail CODE REGEX CMD...: CMD must exit with CODE and print exactly one
# "error:" line on stderr, matching REGEX.
expect_fail() {
  local code=$1 re=$2
  shift 2
  local rc=0
  "$@" >stdout.txt 2>stderr.txt || rc=$?
  if [ "$rc" != "$code" ]; then
    log "expected exit $code, got $rc from: $*"
    cat stderr.txt >&2
    return 1
  fi
  local n
  n=$(grep -c 'error:' stderr.txt || true)
  if [ "$n" != 1 ]; then
    log "expected one error line, got $n"
    cat stderr.txt >&2
    return 1
  fi
  if ! grep 'error:' stderr.txt | grep -Eq -- "$re"; then
    log "error line does not match /$re/:"
    cat stderr.txt >&2
    return 1
  fi
}

# The definitions of images/ copied to a scratch folder, to be edited.
copy_images() {
  mkdir -p "$1"
  cp -r "$ROOT/images/." "$1/"
  # The definitions name the repository's kernels/ as ../../kernels.
  ln -sfn "$ROOT/kernels" "$(dirname "$1")/kernels"
}

# The stand-in base (with its 218 MB NCCL) is built once per run into a seed
# store; each test gets a copy made of hard links (blobs never change in
# place, and every write is a new file renamed over).
build_base() {
  local seed=$T_TOP/seed-store
  if [ ! -f "$seed/index.json" ]; then
    IMGBUILD_STORE=$seed "$IB" -q "$ROOT/images/dsv41-flash-b12x" >/dev/null
    # One DCP2 build warms the store's caches (the base layer's file list,
    # symbols, kernels, compiles); its tag is dropped, its caches kept.
    IMGBUILD_STORE=$seed "$IB" -q "$ROOT/images/dsv41-flash-dcp2" -t warmup:1 >/dev/null
    jq -c '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] != "warmup:1"))' \
      "$seed/index.json" >"$seed/index.new" && mv "$seed/index.new" "$seed/index.json"
  fi
  mkdir -p "$IMGBUILD_STORE"
  cp -al "$seed/." "$IMGBUILD_STORE/"
}

manifest_digest() { # NAME:TAG in the store
  skopeo inspect --raw "oci:$IMGBUILD_STORE:$1" | sha256sum | sed 's/^/sha256:/; s/ .*//'
}

docker_start() {
  [ -S "$DOCKER_SOCK" ] && $D version >/dev/null 2>&1 && return 0
  (setsid dockerd --host "unix://$DOCKER_SOCK" --data-root "$T_TOP/dd" --exec-root "$T_TOP/de" \
     --pidfile "$T_TOP/d.pid" --iptables=false --ip-masq=false --bridge=none --storage-driver=vfs \
     >"$T_TOP/dockerd.log" 2>&1 &)
  for _ in $(seq 1 120); do
    $D version >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "dockerd did not start:" >&2
  tail -20 "$T_TOP/dockerd.log" >&2
  return 1
}

docker_stop() {
  [ -f "$T_TOP/d.pid" ] || return 0
  local pid
  pid=$(cat "$T_TOP/d.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  # vfs leaves plain folders; containerd's shims are children of dockerd.
  rm -rf "$T_TOP/dd" "$T_TOP/de" 2>/dev/null || true
}

finish() {
  docker_stop
  rm -rf "$T_TOP"
}
