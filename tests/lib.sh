# Shared by the integration suites: a tiny runner, the real services the
# tests start themselves (dockerd on a private socket), and helpers.
# Every test runs in a subshell with `set -e` in a fresh scratch folder; a
# test passes when its function returns 0.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IB=$ROOT/${IB_BUILD:-build}/imgbuild
IV=$ROOT/${IB_BUILD:-build}/imgverify
SITE=/usr/local/lib/python3.12/dist-packages
T_PASS=0
T_FAIL=0
T_SKIP=0
T_TOP=$(mktemp -d /tmp/ibt.XXXXXX)
T_TIMES=$T_TOP/times # SECONDS<TAB>NAME per test run
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
  # The aarch64 tier (make test-all runs the suites with the aarch64 tools
  # under qemu, IB_NO_DAEMON=1) leaves out the tests that start a daemon, a
  # registry or a container: they are skips, said so, never passes.
  if [ -n "${IB_NO_DAEMON:-}" ] &&
    declare -f "$name" | grep -Eq 'docker_start|registry_start|proxy_start|push_base|\$D |dockerd|runc|--run|--load|docker-daemon:'; then
    T_SKIP=$((T_SKIP + 1))
    echo "skip $name: starts a daemon, a registry or a container (IB_NO_DAEMON)"
    return 0
  fi
  mkdir -p "$dir"
  local t0=$SECONDS
  (
    cd "$dir" || exit 1
    export IMGBUILD_STORE=$dir/store IB_TEST=$name
    # Sanitized tools (make test SANITIZE=1) write their reports here, so
    # that one from a command whose failure a test expects still counts.
    if [ -n "${IB_SANITIZE:-}" ]; then
      export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$dir/sanitizer"
      export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$dir/sanitizer"
    fi
    set -e
    "$name"
  ) >"$dir/log" 2>&1
  rc=$?
  services_stop "$dir"
  if compgen -G "$dir/sanitizer.*" >/dev/null; then
    echo "  sanitizer reports:" >>"$dir/log"
    cat "$dir"/sanitizer.* >>"$dir/log"
    rc=1
  fi
  printf '%s\t%s\n' $((SECONDS - t0)) "$name" >>"$T_TIMES"
  [ -z "${IB_RESULTS:-}" ] || result_row "$name" "$rc" $((SECONDS - t0)) "$dir"
  if [ "$rc" = 77 ] && [ -s "$dir/skip.reason" ]; then
    # Skipped (skip_test): not a pass, and said so with its reason.
    T_SKIP=$((T_SKIP + 1))
    echo "skip $name: $(cat "$dir/skip.reason")"
    [ -n "${IB_KEEP:-}" ] || rm -rf "$dir"
  elif [ "$rc" = 0 ]; then
    T_PASS=$((T_PASS + 1))
    echo "ok $name"
    # A passed test's registries, stores and archives go at once: the suite
    # would otherwise hold gigabytes until the end (a failed one is kept).
    [ -n "${IB_KEEP:-}" ] || rm -rf "$dir"
  else
    T_FAIL=$((T_FAIL + 1))
    echo "FAIL $name"
    grep -v '^[[:space:]]*$' "$dir/log" | tail -25 | sed 's/^/    /'
  fi
}

# The slowest tests of this run and the time of all (a line each, before
# the last line): where a tier's time goes, in every CI log.
print_slowest() {
  [ -s "$T_TIMES" ] || return 0
  echo "time: $(awk -F'\t' '{s += $1} END {print s}' "$T_TIMES") s in $(wc -l <"$T_TIMES") tests; the slowest:"
  sort -t$'\t' -k1,1nr "$T_TIMES" | head -"${IB_SLOWEST:-12}" | awk -F'\t' '{printf "  %4d s  %s\n", $1, $2}'
}

# The record of a run (IB_RESULTS, which `make test-all` sets to
# tests/results/test-all-<commit>/): a row per test in results.tsv (name,
# result, seconds, skip reason) and, in a folder per test, what the test
# kept of its comparison with the real tool (keep) and its figures (figure),
# one results-PHASE.tsv per phase of the run (IB_RESULTS_PHASE: main,
# sanitized, arm64),
# so that a reader sees on which commit each claim about real content was
# last true.  tests/results-summary.py writes summary.md from them.
result_row() { # NAME RC SECONDS DIR
  local r=fail why=
  case $2 in 0) r=pass ;; 77) [ -s "$4/skip.reason" ] && r=skip && why=$(head -c 300 "$4/skip.reason" | tr '\t\n' '  ') ;; esac
  printf '%s\t%s\t%s\t%s\n' "$1" "$r" "$3" "$why" >>"$IB_RESULTS/results-${IB_RESULTS_PHASE:-main}.tsv"
  # A failure keeps its log (the test's folder is kept too, but in /tmp).
  [ "$r" != fail ] || { mkdir -p "$IB_RESULTS/$1" && cp "$4/log" "$IB_RESULTS/$1/failed-${IB_RESULTS_PHASE:-main}.log"; }
}
# keep FILE...: copies each FILE into the test's folder of the record.
keep() {
  [ -n "${IB_RESULTS:-}" ] || return 0
  mkdir -p "$IB_RESULTS/$IB_TEST"
  cp -- "$@" "$IB_RESULTS/$IB_TEST/"
}
# figure TEXT: one line of what the test measured, in its log and the record.
figure() {
  echo "figure: $*"
  [ -n "${IB_RESULTS:-}" ] || return 0
  mkdir -p "$IB_RESULTS/$IB_TEST"
  echo "$*" >>"$IB_RESULTS/$IB_TEST/figures.txt"
}

# skip_test REASON: end the test as skipped (counted apart, never a pass).
skip_test() {
  echo "$*" >skip.reason
  exit 77
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

# d/: the DCP2 definition without [prebake] (a Dockerfile cannot say what
# to prebake) and so without the kernels and smoke test that need it; ctx/:
# a Dockerfile with the same content.  Both give one digest (the gates
# change no content).
dcp2_definition_and_dockerfile() {
  copy_images d
  python3 - d/dsv41-flash-dcp2/image.conf <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r"\n\[(prebake|smoke)\].*?(?=\n\[|\Z)", "\n", s, flags=re.S)
s = re.sub(r"\nrequire .*(dcp_lse_combine|prebaked).*", "", s)
open(p, "w").write(s)
PY
  local def=$ROOT/images/dsv41-flash-dcp2 vllm=$SITE/vllm
  mkdir ctx
  cp "$def"/files/*.py ctx/
  {
    echo "ARG BASE=dsv41-flash-b12x:local"
    echo "FROM \$BASE"
    echo "# imgbuild:new $vllm/model_executor/models/deepseek_v4_1/"
    echo "# imgbuild:new $vllm/v1/core/candidate_blocks.py"
    grep -v '^#' "$def/manifest.txt" | while read -r flat target; do
      [ -n "$flat" ] && echo "COPY $flat $vllm/$target"
    done
    echo 'ENV DSV41_DCP_STAGE=3 DSV41_DCP_COMBINE=ag_rs \'
    echo '    DSV41_DCP_PREFILL_GATHER=0 DSV41_ENGRAM_MMAP=0 DSV41_ENGRAM_PREFETCH=0'
    echo 'LABEL org.opencontainers.image.title=dsv41-flash-dcp2 \'
    echo '      org.opencontainers.image.description="DeepSeek V4.1 Flash with decode context parallelism (DCP2 a2a overlay)"'
  } >ctx/Dockerfile
}

# The stand-in base (with its 218 MB NCCL) is built once per run into a seed
# store; each test gets a copy made of hard links (blobs never change in
# place, and every write is a new file renamed over).  $IB_TEST_SEED names a
# seed kept across runs (make mutate builds it once, with unmutated code).
build_base() {
  local seed=${IB_TEST_SEED:-$T_TOP/seed-store}
  if [ ! -f "$seed/index.json" ]; then
    # IB_TEST_PLATFORM: the aarch64 tools under qemu (whose machine is
    # aarch64) build the same linux/amd64 stand-in as the x86-64 tools.
    IMGBUILD_STORE=$seed "$IB" -q ${IB_TEST_PLATFORM:+--platform "$IB_TEST_PLATFORM"} "$ROOT/images/dsv41-flash-b12x" \
      >/dev/null
    # One DCP2 build warms the store's caches (the base layer's file list,
    # symbols, kernels, compiles); its tag is dropped, its caches kept.
    IMGBUILD_STORE=$seed "$IB" -q "$ROOT/images/dsv41-flash-dcp2" -t warmup:1 >/dev/null
    jq -c '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] != "warmup:1"))' \
      "$seed/index.json" >"$seed/index.new" && mv "$seed/index.new" "$seed/index.json"
  fi
  mkdir -p "$IMGBUILD_STORE"
  cp -al "$seed/." "$IMGBUILD_STORE/"
}

# The stand-in base's CPython 3.12 comes from Ubuntu's archive
# (scripts/stand-in-cpython.sh); where it could not be fetched the base has
# none, and a test that needs the image's own interpreter skips, saying why.
stand_in_has_cpython() {
  local why=$ROOT/images/dsv41-flash-b12x/native/amd64/NO-CPYTHON
  [ ! -f "$why" ] || skip_test "the stand-in base has no CPython: $(cat "$why")"
  [ -z "${IB_TEST_PLATFORM:-}" ] || skip_test "the aarch64 tools' stand-in is the amd64 one, whose CPython runs natively only on x86-64"
}

# Runs CMD in a fresh tmux server on SOCK (a terminal 160x40) and leaves
# the screen, escape sequences included, in SCREEN.
in_terminal() { # SOCK SCREEN CMD
  local sock=$1 screen=$2
  tmux -S "$sock" new-session -d -x 160 -y 40 "$3; echo EXIT=\$?; sleep 30"
  # Until the command has ended, 10 minutes at most: a build under ASan on
  # a loaded 2-core machine took more than the 30 s this once allowed.
  for _ in $(seq 1 3000); do
    tmux -S "$sock" capture-pane -e -p >"$screen"
    grep -q 'EXIT=' "$screen" && break
    sleep 0.2
  done
  tmux -S "$sock" kill-server || true
}

# junit_cases FILE (attest and sign suites): each test case as "classname|name|file|line|outcome|message",
# read by Debian's python3-junitparser (a JUnit consumer imgbuild did not write).
junit_cases() {
  /usr/bin/python3 - "$1" <<'PY'
import sys
from junitparser import JUnitXml, Failure, Skipped, Error
for suite in JUnitXml.fromfile(sys.argv[1]):
    for case in suite:
        r = case.result[0] if case.result else None
        kind = {Failure: "failure", Skipped: "skipped", Error: "error"}.get(type(r), "pass")
        print("|".join([case.classname, case.name, case._elem.get("file", ""), case._elem.get("line", ""),
                        kind, (r.message or "") if r is not None else ""]))
PY
}

# The JSON report schemas, one per program.
SCHEMA=$ROOT/docs/imgverify-report.schema.json
BUILD_SCHEMA=$ROOT/docs/imgbuild-report.schema.json

validate() { # JSON-FILE: against its report schema (imgverify's or imgbuild's, by its "schema")
  /usr/bin/python3 - "$SCHEMA" "$BUILD_SCHEMA" "$1" <<'PY'
import json, sys
import jsonschema
verify, build, doc = (json.load(open(p)) for p in sys.argv[1:])
schema = build if doc.get("schema") == "imgbuild.report/v1" else verify
jsonschema.validate(doc, schema)
PY
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

# node_start DIR: a Docker Engine of its own, a stand-in for one node of a
# cluster: socket DIR/d.sock, data root, exec root and pid file in DIR
# (several run side by side), no bridge or iptables; a test service, so it
# stops when the test ends.  node_docker DIR ARGS...: the docker CLI on it.
node_start() {
  local dir=$1
  mkdir -p "$dir"
  service "$dir/dockerd.log" dockerd --host "unix://$dir/d.sock" --data-root "$dir/dd" --exec-root "$dir/de" \
    --pidfile "$dir/d.pid" --iptables=false --ip-masq=false --bridge=none --storage-driver=vfs
  for _ in $(seq 1 120); do
    docker -H "unix://$dir/d.sock" version >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "dockerd in $dir did not start:" >&2
  tail -20 "$dir/dockerd.log" >&2
  return 1
}
node_docker() {
  local dir=$1
  shift
  docker -H "unix://$dir/d.sock" "$@"
}

# ssh_keys KEYS: a client key (id, also the authorized key) and a host key
# (host_key) made for the test.
ssh_keys() {
  mkdir -p "$1"
  ssh-keygen -q -t ed25519 -N '' -C imgbuild-test -f "$1/id"
  ssh-keygen -q -t ed25519 -N '' -C imgbuild-test-host -f "$1/host_key"
  cp "$1/id.pub" "$1/authorized_keys"
}

# ssh_node_start DIR KEYS: Debian's sshd for the node in DIR on a loopback
# port of its own, with the keys of KEYS, never the machine's SSH
# configuration or keys; its sessions have DOCKER_HOST=unix://DIR/d.sock, so
# `docker system dial-stdio` reaches that node's daemon.  Sets SSHD_PORT.
ssh_node_start() {
  local dir=$1 keys=$2
  SSHD_PORT=$(free_port)
  # sshd's privilege separation folder (Debian's package leaves it to its service).
  mkdir -p /run/sshd
  {
    echo "ListenAddress 127.0.0.1"
    echo "Port $SSHD_PORT"
    echo "HostKey $keys/host_key"
    echo "AuthorizedKeysFile $keys/authorized_keys"
    echo "PidFile none"
    echo "StrictModes no"
    echo "UsePAM no"
    echo "PasswordAuthentication no"
    echo "KbdInteractiveAuthentication no"
    echo "PermitRootLogin prohibit-password"
    echo "AllowUsers $(id -un)"
    echo "SetEnv DOCKER_HOST=unix://$dir/d.sock"
    echo "LogLevel VERBOSE"
  } >"$dir/sshd_config"
  service "$dir/sshd.log" /usr/sbin/sshd -D -e -f "$dir/sshd_config"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$SSHD_PORT") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "sshd in $dir did not start:" >&2
  cat "$dir/sshd.log" >&2
  return 1
}

# Services a test starts (registries, proxies, token services) run in the
# background with their pids in the test's folder; the runner stops them
# when the test ends, whatever its result.
service() { # LOG CMD...
  local log=$1
  shift
  setsid "$@" >>"$log" 2>&1 &
  echo $! >>"$PWD/service.pids"
}

services_stop() {
  [ -f "$1/service.pids" ] || return 0
  local pid
  while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$1/service.pids"
  while read -r pid; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done <"$1/service.pids"
  rm -f "$1/service.pids"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for_file() {
  for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "no $1" >&2
  return 1
}

# A self-signed certificate for 127.0.0.1 in DIR (cert.pem, key.pem).
make_cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/key.pem" -out "$1/cert.pem" -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
}

# registry_start [open|basic|token|tls]: Debian's docker-registry on loopback,
# data in ./registry-MODE; sets REG=127.0.0.1:PORT.  basic and token accept
# user ci with password $REG_PASSWORD; token uses tests/registry/token_server.py
# (its requests are logged to ./registry-token/token.jsonl).
REG_PASSWORD=s3cret-Pa55word
registry_start() {
  local mode=${1:-open} dir=$PWD/registry-${1:-open} port scheme=http
  mkdir -p "$dir"
  port=$(free_port)
  {
    echo "version: 0.1"
    echo "log: {level: info, accesslog: {disabled: false}}"
    echo "storage: {filesystem: {rootdirectory: $dir/data}, delete: {enabled: true}}"
    echo "http:"
    echo "  addr: 127.0.0.1:$port"
    case $mode in
      tls)
        make_cert "$dir"
        echo "  tls: {certificate: $dir/cert.pem, key: $dir/key.pem}"
        scheme=https ;;
      basic)
        htpasswd -Bbn ci "$REG_PASSWORD" >"$dir/htpasswd"
        echo "auth: {htpasswd: {realm: imgbuild-test, path: $dir/htpasswd}}" ;;
      token)
        make_cert "$dir"
        service "$dir/token.log" python3 "$ROOT/tests/registry/token_server.py" "$dir/token.port" \
          "$dir/key.pem" "$dir/cert.pem" imgbuild-test-issuer ci "$REG_PASSWORD" "$dir/token.jsonl"
        wait_for_file "$dir/token.port"
        echo "auth: {token: {realm: \"http://127.0.0.1:$(cat "$dir/token.port")/token\", service: imgbuild-test,"
        echo "  issuer: imgbuild-test-issuer, rootcertbundle: $dir/cert.pem}}" ;;
    esac
  } >"$dir/config.yml"
  service "$dir/registry.log" docker-registry serve "$dir/config.yml"
  for _ in $(seq 1 100); do
    curl -sk -o /dev/null "$scheme://127.0.0.1:$port/v2/" && break
    sleep 0.1
  done
  REG=127.0.0.1:$port
}

# proxy_start: tests/registry/proxy.py in front of $REG; sets PROXY; every
# request is logged to ./proxy.jsonl; faults come from ./faults.
proxy_start() {
  rm -f proxy.port
  service proxy.log python3 "$ROOT/tests/registry/proxy.py" "$PWD/proxy.port" "${REG#*:}" "$PWD/proxy.jsonl" \
    "$PWD/faults"
  wait_for_file proxy.port
  PROXY=127.0.0.1:$(cat proxy.port)
}

# auth_file FILE HOST USER PASSWORD: Docker's config.json format.
auth_file() {
  jq -n --arg h "$2" --arg a "$(printf '%s:%s' "$3" "$4" | base64 -w0)" '{auths: {($h): {auth: $a}}}' >"$1"
}

# push_base: the stand-in base into the registry $REG (skopeo, as a user
# would), with the credentials for basic/token registries.
push_base() {
  skopeo copy -q --dest-tls-verify=false ${1:+--dest-creds "$1"} "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" \
    "docker://$REG/dsv41-flash-b12x:local"
}

finish() {
  docker_stop
  [ -n "${IB_KEEP:-}" ] || rm -rf "$T_TOP"
}

# strace for the tests that watch a command's system calls: LeakSanitizer
# cannot run under ptrace (it stops with a fatal error), so leak checks are
# off for the traced command only; the same commands run untraced elsewhere.
traced() {
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace "$@"
}
