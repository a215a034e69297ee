#!/usr/bin/env bash
# `make bench`: imgbuild against the peer tools on bases of real size, in
# one run, on the same input, each figure the median of several runs with
# its peak RSS.  Writes bench/results/*.tsv, bench/RESULTS.md and one PNG
# per scenario (bench/report.py).  Asserts nothing: figures only.
#
# Scenarios (BENCH_SCENARIOS, default "real gpu gen:4 gen:16 gen:30"):
#   real     scripts/real-base.sh: Debian bookworm + python3-torch + scipy
#            (one layer, ~2 GB uncompressed)
#   gpu      real + one layer of /usr/local/cuda/lib64 (the CUDA toolkit's
#            own large libraries: cuBLAS, cuFFT, cuDNN, NCCL, ...); its
#            definition adds [kernels] (NCCL's, for the GB10) and [target]
#   cuda     scripts/real-base.sh --cuda: Debian trixie + contrib's
#            python3-torch-cuda (PyTorch 2.6 built with CUDA, cuBLAS, NCCL
#            2.22.3, cuDNN 9 copied in), the standing real CUDA base; its
#            definition requires NCCL's kernels for an H200 (9.0)
#   gen:N    real + generated layers (~2 GB each) up to N GB uncompressed:
#            a realistic mix of Python trees, shared objects without GPU
#            code (the base's own, salted), with GPU code (CUDA's), and
#            data files
# Each base is cached under BENCH_CACHE (default /var/cache/imgbuild/bench)
# and work goes to BENCH_WORK (default /var/tmp/imgbuild-bench), both outside
# the repository.  Before a scenario the free disk is checked against what
# it needs (base, docker's copy, registry copies, the built images); one
# that does not fit is skipped and RESULTS.md says so.
#
# Per scenario, the definition is the DCP2-sized overlay: 23 torch files
# changed, [symbols] check-package torch, [native] package torch scipy.
#   limit       igzip -dc | sha256sum of each layer (and sha256 of the blob),
#               layers two at a time: one inflate + SHA-256 pass on 2 cores
#   cold        imgbuild, a fresh store (base never seen)
#   warm        imgbuild again, same store, another tag
#   umoci       umoci insert of the same 23 files into the base's layout (its
#               layer lacks the tar footer: see add_layer)
#   docker      docker build --no-cache of the 23-COPY Dockerfile, the base
#               already loaded (the Docker Engine the bench starts itself)
#   docker-load docker load of the base archive (+ docker = from a load)
#   skopeo      skopeo copy of the result to a new OCI layout
#   verify      imgverify of the result: its layers were read through by the
#               builds in this store, so their bytes are hashed and their
#               diff_ids and entries are those reads' (layers/read/readthrough.h)
#   verify-fresh (gpu, cuda) imgverify with a store of its own, empty,
#               of the result read in place from the build's store as an
#               OCI layout: what a CI step on another machine pays
#   kernels-json, jit-budget-cold, jit-budget-warm (gpu, cuda): imgverify
#               --kernels --json of the base (a store that has read it),
#               --jit-budget --json --gpu 12.1 with an empty store, then again
#   verify-full imgverify --full: every layer inflated and checked again (a
#               store that never read the image);  sha256sum, openssl-sha256:
#               of its blobs, 2 at a time;  inflate: igzip -dc of its layers,
#               2 at a time (the floor of a diff_id check);  verify-bytes,
#               verify-gates, verify-full-bytes, verify-full-gates: the same
#               runs of imgverify, its byte pass and its other gates apart
#               (from its report's gates[].seconds)
#   push-new-*  to an empty loopback registry: imgbuild (warm build + push),
#               skopeo copy, docker push
#   pull-cold-imgbuild  imgbuild --from docker://REG/base with a fresh store:
#               the download and the cold build, the base listed as it arrives
#   pull-skopeo skopeo copy of that base to a new OCI layout (the download alone)
#   push-thin-* base already in the registry (another repository):
#               imgbuild --from docker://REG/base --push, skopeo copy, docker push;
#               every run a new tag, and imgbuild's build under one local
#               name (bench:thin), as a CI pipeline rebuilds its image: a
#               rebuild of the same inputs keeps its attestation
#               (builder/attest/provenance.c), one under a new name records a new one
# Knobs: BENCH_RUNS (3), BENCH_COLD_RUNS (BENCH_RUNS), BENCH_WARM_RUNS
# (BENCH_RUNS; warm builds, umoci inserts and thin pushes take a fraction
# of a second, and their medians want more runs than a 16 GB pass can afford),
# BENCH_SKIP_DOCKER=1, BENCH_BASES_ONLY=1 (make the bases, measure nothing).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
IV=$ROOT/build/imgverify
CACHE=${BENCH_CACHE:-/var/cache/imgbuild/bench}
WORK=${BENCH_WORK:-/var/tmp/imgbuild-bench}
RES=$ROOT/bench/results
RUNS=${BENCH_RUNS:-3}
COLD_RUNS=${BENCH_COLD_RUNS:-$RUNS}
WARM_RUNS=${BENCH_WARM_RUNS:-$RUNS}
SCENARIOS=${BENCH_SCENARIOS:-real gpu cuda gen:4 gen:16 gen:30}
SITE=usr/lib/python3/dist-packages
GIB=$((1024 * 1024 * 1024))

say() { echo "bench: $*" >&2; }
free_bytes() { df -B1 --output=avail "$1" | tail -1; }

[ "$(id -u)" = 0 ] || { say "needs root (debootstrap, dockerd)"; exit 8; }
"$ROOT/scripts/install-deps.sh" bench
[ -x "$IB" ] || make -C "$ROOT" -j2 all >/dev/null
mkdir -p "$CACHE" "$WORK" "$RES"
say "scenarios: $SCENARIOS; $RUNS runs each ($COLD_RUNS cold, $WARM_RUNS warm); cache $CACHE, work $WORK"
say "time: the real base once (debootstrap, ~5 min), then per scenario and run roughly 4x the time of one"
say "      gzip pass over its layers (cold builds, umoci and docker re-read or re-write the base)"

W=$WORK/run
SOCK=$W/docker.sock
D="docker -H unix://$SOCK"
REG_PID=
cleanup() {
  [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null || true
  if [ -f "$W/dockerd.pid" ]; then
    kill "$(cat "$W/dockerd.pid")" 2>/dev/null || true
    for _ in $(seq 1 40); do [ -e "$W/dockerd.pid" ] || break; sleep 0.5; done
  fi
  umount "$W/dd/overlay2"/*/merged 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

# ---- measuring ---------------------------------------------------------
# measure SCENARIO NAME CMD...: one run; appends "seconds rss_kib own_kib"
# to $W/NAME.runs.  rss_kib is GNU time's: the largest of the command and
# every program it ran.  own_kib: imgbuild's and imgverify's own peak, from
# their report's `resources` (REPORT=1 adds --report json:FILE to the
# command); "-" for the peers.
# Wall time from the clock in nanoseconds around the command (GNU time's %e
# counts in hundredths: a 12 ms umoci insert read as 0.01 or 0.02 s, a
# ratio of 4 or 8 for the same warm build); GNU time for the peak RSS.
clock_ns() { date +%s%N; }
seconds_since() { awk -v ns=$(($(clock_ns) - $1)) 'BEGIN { printf "%.4f", ns / 1e9 }'; }
measure() {
  local sc=$1 name=$2 t0
  shift 2
  rm -f "$W/$name.rep.json"
  t0=$(clock_ns)
  if ! /usr/bin/time -f '%M' -o "$W/$name.t" "$@" ${REPORT:+--report "json:$W/$name.rep.json"} \
    >"$W/$name.out" 2>"$W/$name.err"; then
    say "$sc: $name failed: $*"
    tail -5 "$W/$name.err" >&2
    return 1
  fi
  echo "$(seconds_since "$t0") $(tail -1 "$W/$name.t") $(own_rss "$name")" >>"$W/$name.runs"
}
# measure_any SCENARIO NAME CMD...: as measure, the exit status aside (a
# gate that fails on the base, e.g. its hostile entries, still times the check)
measure_any() {
  local sc=$1 name=$2 t0
  shift 2
  rm -f "$W/$name.rep.json"
  t0=$(clock_ns)
  /usr/bin/time -f '%M' -o "$W/$name.t" "$@" ${REPORT:+--report "json:$W/$name.rep.json"} \
    >"$W/$name.out" 2>"$W/$name.err" || true
  echo "$(seconds_since "$t0") $(tail -1 "$W/$name.t") $(own_rss "$name")" >>"$W/$name.runs"
}
own_rss() { jq -r '.resources.peak_rss_kib // "-"' "$W/$1.rep.json" 2>/dev/null || echo -; }
# split_verify NAME: the last imgverify run NAME's time as its report
# splits it: the byte pass (the integrity gate: every blob's digest, every
# layer's diff_id and entries) and the other gates (summed), appended as
# runs of NAME-bytes and NAME-gates with that run's peak RSS.  The rest of
# the total is opening the image and writing the report.  Nothing when the
# run left no report.
split_verify() {
  local rest bytes gates name=$1 rep=$W/$1.rep.json
  rest=$(tail -1 "$W/$name.runs" | cut -d' ' -f2-)
  bytes=$(jq -r '[.gates[] | select(.name == "integrity") | .seconds] | add // empty' "$rep" 2>/dev/null) || return 0
  gates=$(jq -r '[.gates[] | select(.name != "integrity") | .seconds] | add // 0' "$rep" 2>/dev/null) || return 0
  [ -n "$bytes" ] || return 0
  printf '%.4f %s\n' "$bytes" "$rest" >>"$W/$name-bytes.runs"
  printf '%.4f %s\n' "$gates" "$rest" >>"$W/$name-gates.runs"
}
# record SCENARIO NAME NOTE: the median of $W/NAME.runs into the results
record() {
  local sc=$1 name=$2 note=${3:-}
  [ -s "$W/$name.runs" ] || return 0
  sort -n "$W/$name.runs" | awk -v sc="$sc" -v n="$name" -v note="$note" '
    { s[NR] = $1; if ($2 > rss) rss = $2; if ($3 != "-" && $3 != "" && $3 + 0 > own) own = $3 }
    END { m = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2;
          printf "%s\t%s\t%d\t%.4f\t%.4f\t%.4f\t%d\t%s\t%s\n", sc, n, NR, m, s[1], s[NR], rss, note,
                 own ? own : "-" }' >>"$RES/$sc.tsv"
}

# ---- inputs ------------------------------------------------------------
real_base() { # KEY [real-base.sh ARGS...]
  local k=$1
  shift
  "$ROOT/scripts/real-base.sh" "$@" | sed -n "s/^$k=//p"
}
# The base a scenario's definition changes files of (its rootfs: the
# overlay's files and the Dockerfile's come from it).
base_args() { [ "$1" = cuda ] && echo "--cuda --arch amd64" || true; }

# copy_layout SRC DST: blobs hard-linked (never written to), the rest copied
copy_layout() {
  mkdir -p "$2/blobs/sha256"
  cp "$1/oci-layout" "$1/index.json" "$2/"
  ln -f "$1"/blobs/sha256/* "$2/blobs/sha256/" 2>/dev/null || cp "$1"/blobs/sha256/* "$2/blobs/sha256/"
}

uncompressed_bytes() { # LAYOUT:TAG -> sum of layer sizes, uncompressed (from the cache note)
  cat "$1/uncompressed" 2>/dev/null || echo 0
}

# add_layer LAYOUT:TAG NEW-TAG DIR PATH...: a layer of PATH... (relative to
# DIR) by GNU tar, added with `umoci raw add-layer`.  Not `umoci insert`:
# Debian's umoci 0.4.7 never closes the tar writer of an inserted layer, so
# the layer lacks the end-of-archive blocks and its last file's padding
# (umoci issue 436, fixed in 0.4.8); GNU tar, Python's tarfile and imgbuild
# refuse such a layer as truncated.
add_layer() {
  local image=$1 tag=$2 dir=$3
  shift 3
  tar --numeric-owner --owner=0 --group=0 -C "$dir" -cf "$WORK/layer.tar" "$@"
  umoci raw add-layer --image "$image" --tag "$tag" "$WORK/layer.tar"
  rm -f "$WORK/layer.tar"
}

make_gpu_base() { # DIR
  local real
  real=$(real_base oci)
  rm -rf "$1.tmp" && mkdir -p "$1.tmp"
  copy_layout "$real" "$1.tmp/oci"
  say "gpu: a layer of /usr/local/cuda/lib64 ($(du -shL /usr/local/cuda/lib64 | cut -f1))"
  # /usr/local/cuda and its lib64 are symbolic links (to cuda-13.0, to
  # targets/…/lib): the layer holds the files under the path the image
  # uses, staged as hard links.
  rm -rf "$WORK/gpustage" && mkdir -p "$WORK/gpustage/usr/local/cuda/lib64"
  cp -al "$(readlink -f /usr/local/cuda/lib64)/." "$WORK/gpustage/usr/local/cuda/lib64/" 2>/dev/null \
    || cp -a "$(readlink -f /usr/local/cuda/lib64)/." "$WORK/gpustage/usr/local/cuda/lib64/"
  add_layer "$1.tmp/oci:real" base "$WORK/gpustage" usr
  rm -rf "$WORK/gpustage"
  echo $(($(du -sb "$(real_base rootfs)" | cut -f1) + $(du -sb /usr/local/cuda/lib64/ | cut -f1))) >"$1.tmp/uncompressed"
  mv "$1.tmp" "$1"
}

# gen_layer DIR K BYTES: a realistic mix of about BYTES in DIR (salted by K so
# that no file's content repeats another layer's)
gen_layer() {
  local dir=$1 k=$2 want=$3 rootfs got=0 i=0
  rootfs=$(real_base rootfs)
  mapfile -t so < <(find "$rootfs/usr/lib" -name '*.so*' -type f -size +1M | sort)
  mapfile -t gpu < <(find /usr/local/cuda/lib64 -name '*.so*' -type f -size +20M | sort)
  mkdir -p "$dir/opt/gen$k"
  while [ "$got" -lt "$want" ]; do
    i=$((i + 1))
    local d=$dir/opt/gen$k/pkg$i
    mkdir -p "$d/lib" "$d/gpu" "$d/data"
    # Python: a torch tree, each file salted (10%)
    cp -r "$rootfs/$SITE/torch" "$d/python"
    find "$d/python" -name '*.py' -exec sed -i "1i # gen $k $i" {} +
    # shared objects without GPU code (45%) and with (35%), salted at the end
    local b=0 j=0
    while [ "$b" -lt $((want / 20)) ] && [ "$j" -lt "${#so[@]}" ]; do
      cp "${so[$(((j * 7 + i) % ${#so[@]}))]}" "$d/lib/lib$j.so" && echo "gen $k $i $j" >>"$d/lib/lib$j.so"
      b=$((b + $(stat -c %s "$d/lib/lib$j.so"))); j=$((j + 1))
    done
    b=0 j=0
    while [ "$b" -lt $((want / 30)) ] && [ "$j" -lt "${#gpu[@]}" ]; do
      cp "${gpu[$(((j + i) % ${#gpu[@]}))]}" "$d/gpu/libg$j.so" && echo "gen $k $i $j" >>"$d/gpu/libg$j.so"
      b=$((b + $(stat -c %s "$d/gpu/libg$j.so"))); j=$((j + 1))
    done
    # data files (10%): text that compresses as documentation and configs do
    for j in $(seq 1 8); do
      find "$rootfs/usr/share" -type f -size -64k 2>/dev/null | head -2000 | xargs cat 2>/dev/null | head -c $((want / 100)) >"$d/data/d$j.txt" || true
    done
    got=$(du -sb "$dir" | cut -f1)
  done
}

make_gen_base() { # DIR GB
  local dir=$1 gb=$2 real rootfs total k=0
  real=$(real_base oci)
  rootfs=$(real_base rootfs)
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  copy_layout "$real" "$dir.tmp/oci"
  total=$(du -sb "$rootfs" | cut -f1)
  local tag=real
  while [ "$total" -lt $((gb * GIB)) ]; do
    k=$((k + 1))
    local chunk=$((2 * GIB))
    [ $((gb * GIB - total)) -lt "$chunk" ] && chunk=$((gb * GIB - total))
    say "gen:$gb: layer $k, $((chunk / 1048576)) MiB (generated, then added)"
    rm -rf "$WORK/gen" && gen_layer "$WORK/gen" "$k" "$chunk"
    total=$((total + $(du -sb "$WORK/gen" | cut -f1)))
    add_layer "$dir.tmp/oci:$tag" "l$k" "$WORK/gen" "opt/gen$k"
    tag=l$k
    rm -rf "$WORK/gen"
  done
  umoci tag --image "$dir.tmp/oci:$tag" base
  echo "$total" >"$dir.tmp/uncompressed"
  mv "$dir.tmp" "$dir"
}

# base SCENARIO -> prints the cached layout dir (tag "base" or "real")
base_of() {
  case $1 in
    real)
      local d=$CACHE/real
      if [ ! -d "$d" ]; then
        mkdir -p "$d.tmp" && copy_layout "$(real_base oci)" "$d.tmp/oci"
        umoci tag --image "$d.tmp/oci:real" base
        du -sb "$(real_base rootfs)" | cut -f1 >"$d.tmp/uncompressed"
        mv "$d.tmp" "$d"
      fi
      echo "$d" ;;
    gpu) [ -d "$CACHE/gpu" ] || make_gpu_base "$CACHE/gpu"; echo "$CACHE/gpu" ;;
    cuda)
      local d=$CACHE/cuda oci
      if [ ! -d "$d" ]; then
        # shellcheck disable=SC2046
        oci=$(real_base oci $(base_args cuda))
        mkdir -p "$d.tmp" && copy_layout "$oci" "$d.tmp/oci"
        umoci tag --image "$d.tmp/oci:cuda" base
        # Its layers' own bytes, inflated (the rootfs holds more: apt's lists).
        local b n=0
        for b in $(jq -r '.layers[].digest' "$oci/blobs/sha256/$(jq -r '.manifests[0].digest' "$oci/index.json" | cut -d: -f2)" | cut -d: -f2); do
          n=$((n + $(gzip -dc "$oci/blobs/sha256/$b" | wc -c)))
        done
        echo "$n" >"$d.tmp/uncompressed"
        mv "$d.tmp" "$d"
      fi
      echo "$d" ;;
    gen:*) [ -d "$CACHE/gen${1#gen:}" ] || make_gen_base "$CACHE/gen${1#gen:}" "${1#gen:}"; echo "$CACHE/gen${1#gen:}" ;;
  esac
}

# need SCENARIO -> bytes of free disk the scenario needs, from what a run
# holds at once (the base compressed is ~0.45x of its size; measured on
# gen:16, 7.35 of 16.14 GiB): the store's copy of the base, the registry's,
# one more copy at a time (skopeo's layouts, a pulled store, each removed
# once measured), the cache when the base is not made yet, and docker's
# unpacked copy (1x) and archive (checked again before docker load, with
# what is left then).  The layouts are hard links of the cache.
need_bytes() {
  local gb have=0
  case $1 in real) gb=2 ;; gpu) gb=5 ;; cuda) gb=8 ;; gen:*) gb=${1#gen:} ;; esac
  case $1 in real | gpu | cuda) [ -d "$CACHE/$1" ] && have=1 ;; gen:*) [ -d "$CACHE/gen${1#gen:}" ] && have=1 ;; esac
  local n=$((gb * GIB * 15 / 10 + 2 * GIB))
  [ "$have" = 1 ] || n=$((n + gb * GIB * 5 / 10))
  [ "${BENCH_SKIP_DOCKER:-}" = 1 ] || n=$((n + gb * GIB * 15 / 10))
  echo "$n"
}

# ---- the services --------------------------------------------------------
start_dockerd() {
  (setsid dockerd --host "unix://$SOCK" --data-root "$W/dd" --exec-root "$W/de" --pidfile "$W/dockerd.pid" \
    --iptables=false --bridge=none --storage-driver=overlay2 >"$W/dockerd.log" 2>&1 &)
  for _ in $(seq 1 120); do $D version >/dev/null 2>&1 && return 0; sleep 0.5; done
  say "dockerd did not start"; tail -5 "$W/dockerd.log" >&2; return 1
}
stop_dockerd() {
  [ -f "$W/dockerd.pid" ] || return 0
  kill "$(cat "$W/dockerd.pid")" 2>/dev/null || true
  for _ in $(seq 1 60); do [ -e "$W/dockerd.pid" ] || break; sleep 0.5; done
  rm -rf "$W/dd" "$W/de"
}
PORT=
start_registry() { # a fresh, empty registry on loopback
  stop_registry
  rm -rf "$W/reg" && mkdir -p "$W/reg"
  [ -n "$PORT" ] || PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'version: 0.1\nstorage: {filesystem: {rootdirectory: %s/reg}}\nhttp: {addr: "127.0.0.1:%s"}\nlog: {level: error}\n' \
    "$W" "$PORT" >"$W/reg.yml"
  setsid docker-registry serve "$W/reg.yml" >"$W/reg.log" 2>&1 &
  REG_PID=$!
  for _ in $(seq 1 60); do curl -fs "http://127.0.0.1:$PORT/v2/" >/dev/null && return 0; sleep 0.25; done
  say "docker-registry did not start"; return 1
}
# (wait gives the registry's 143 for the SIGTERM: not a failure of the bench)
stop_registry() {
  if [ -n "$REG_PID" ] && kill "$REG_PID" 2>/dev/null; then wait "$REG_PID" 2>/dev/null || true; fi
  REG_PID=
}

# ---- one scenario --------------------------------------------------------
overlay() { # DIR LAYOUT SCENARIO: the definition and the same files staged for umoci/docker
  local dir=$1 rootfs packages="torch scipy"
  # shellcheck disable=SC2046
  rootfs=$(real_base rootfs $(base_args "$3"))
  [ "$3" != cuda ] || packages=torch
  mkdir -p "$dir/def" "$dir/ctx/stage"
  {
    printf '[image]\nname = bench:1\nfrom = oci:%s:base\n[copy]\n' "$2"
    (cd "$rootfs/$SITE" && find torch -name '*.py' -type f | sort | awk 'NR % 50 == 0' | head -23) | while read -r f; do
      mkdir -p "$dir/def/files/$(dirname "$f")" "$dir/ctx/stage/$SITE/$(dirname "$f")"
      { echo "# bench"; cat "$rootfs/$SITE/$f"; } >"$dir/def/files/$f"
      cp "$dir/def/files/$f" "$dir/ctx/stage/$SITE/$f"
      echo "file files/$f /$SITE/$f"
      echo "COPY stage/$SITE/$f /$SITE/$f" >>"$dir/ctx/Dockerfile.copies"
    done
    printf '[symbols]\npython-path /%s\ncheck-package torch\n[native]\npackage %s\n' "$SITE" "$packages"
    # Over CUDA's libraries, the GPU-code gates too, as the real image has
    # them: NCCL's kernels for the GB10 (its 218 MB library read as a stream),
    # and the fleet's driver, PTX and JIT checks of every GPU library.
    if [ "$3" = gpu ]; then
      printf '[kernels]\ntarget 12.1\nrequire /usr/local/cuda/lib64/libnccl.so* %s\n[target]\ngpu = 12.1\ndriver = 580.95.05\n' \
        'ncclDevKernel_SendRecv ncclDevKernel_AllGather_RING_LL'
    fi
    # Over the CUDA base: NCCL's kernels for the GPU its SASS runs on (an
    # H200); [target] would fail the build on the libcuda1 that Debian's
    # package pulls in (the driver gate's verdict, tests/integration/cuda_base.sh).
    if [ "$3" = cuda ]; then
      printf '[kernels]\ntarget 9.0\nrequire /usr/lib/x86_64-linux-gnu/libnccl.so* %s\n' \
        'ncclDevKernel_SendRecv ncclDevKernel_AllGather_RING_LL'
    fi
  } >"$dir/def/image.conf"
  { echo "FROM bench-base:1"; cat "$dir/ctx/Dockerfile.copies"; } >"$dir/ctx/Dockerfile"
  rm "$dir/ctx/Dockerfile.copies"
}

run_scenario() {
  local sc=$1 base layout
  local need free
  need=$(need_bytes "$sc")
  free=$(free_bytes "$WORK")
  if [ "$free" -lt "$need" ]; then
    say "$sc: SKIPPED: needs ~$((need / GIB)) GiB of free disk, $WORK has $((free / GIB)) GiB"
    printf '%s\tskipped\t0\t0\t0\t0\t0\tneeds ~%d GiB of free disk; this machine had %d GiB\n' "$sc" $((need / GIB)) $((free / GIB)) >"$RES/$sc.tsv"
    return 0
  fi
  base=$(base_of "$sc")
  rm -rf "$W" && mkdir -p "$W"
  : >"$RES/$sc.tsv"
  layout=$W/layout
  copy_layout "$base/oci" "$layout"
  local unc comp nl
  unc=$(cat "$base/uncompressed")
  mapfile -t blobs < <(jq -r '.layers[].digest' "$layout/blobs/sha256/$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == "base") | .digest' "$layout/index.json" | cut -d: -f2)" | cut -d: -f2)
  nl=${#blobs[@]}
  comp=0
  for b in "${blobs[@]}"; do comp=$((comp + $(stat -c %s "$layout/blobs/sha256/$b"))); done
  printf '%s\tinput\t%d\t%d\t%d\t0\t0\t%s\t%s\n' "$sc" "$nl" "$unc" "$comp" "$(date -u +%FT%TZ)" \
    "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)" >>"$RES/$sc.tsv"
  say "$sc: $nl layers, $((unc / 1048576)) MiB uncompressed, $((comp / 1048576)) MiB compressed"
  overlay "$W" "$layout" "$sc"
  export IMGBUILD_STORE=$W/store
  local ibf=(--smoke=off)

  # the limit: one inflate + SHA-256 pass, both cores
  local inflate="gzip -dc"
  command -v igzip >/dev/null && inflate="igzip -dc"
  for b in "${blobs[@]}"; do echo "$layout/blobs/sha256/$b"; done >"$W/blobs.txt"
  printf '#!/bin/bash\ntee >(sha256sum >/dev/null) <"$1" | %s | sha256sum >/dev/null\n' "$inflate" >"$W/pass.sh"
  chmod +x "$W/pass.sh"
  for _ in $(seq 1 "$RUNS"); do measure "$sc" limit xargs -P2 -n1 "$W/pass.sh" <"$W/blobs.txt"; done
  record "$sc" limit "$inflate | sha256sum per layer + sha256sum of the blob, 2 layers at once"
  # The same pass with OpenSSL's SHA-256 (the CPU's SHA instructions, as
  # imgbuild's): the stricter limit, said beside the issue's.
  printf '#!/bin/bash\ntee >(openssl dgst -sha256 >/dev/null) <"$1" | %s | openssl dgst -sha256 >/dev/null\n' "$inflate" >"$W/pass-openssl.sh"
  chmod +x "$W/pass-openssl.sh"
  for _ in $(seq 1 "$RUNS"); do measure "$sc" limit-openssl xargs -P2 -n1 "$W/pass-openssl.sh" <"$W/blobs.txt"; done
  record "$sc" limit-openssl "$inflate | openssl dgst -sha256 per layer + openssl of the blob, 2 layers at once"

  for r in $(seq 1 "$COLD_RUNS"); do
    rm -rf "$W/store"
    REPORT=1 measure "$sc" cold "$IB" "${ibf[@]}" "$W/def" -t "bench:c$r"
  done
  record "$sc" cold "imgbuild, fresh store"
  # Warm: the base in the store (an oci: base is re-hashed on every build,
  # as any artifact read in place), the definition over its tag.
  skopeo copy -q "oci:$layout:base" "oci:$W/store:bench-base:1"
  mkdir -p "$W/defw" && cp -r "$W/def/." "$W/defw/"
  sed -i 's|^from = .*|from = bench-base:1|' "$W/defw/image.conf"
  "$IB" "${ibf[@]}" "$W/defw" -t bench:w0 >/dev/null 2>&1
  for r in $(seq 1 "$WARM_RUNS"); do REPORT=1 measure "$sc" warm "$IB" "${ibf[@]}" "$W/defw" -t "bench:w$r"; done
  record "$sc" warm "imgbuild, base in the store, caches warm, new tag"
  for r in $(seq 1 "$WARM_RUNS"); do measure "$sc" umoci umoci insert --image "$layout:base" --tag "u$r" "$W/ctx/stage" /; done
  record "$sc" umoci "umoci insert of the 23 files"

  for r in $(seq 1 "$RUNS"); do
    rm -rf "$W/sk"
    measure "$sc" skopeo skopeo copy -q "oci:$W/store:bench:w1" "oci:$W/sk:r"
  done
  rm -rf "$W/sk"
  record "$sc" skopeo "skopeo copy of the result to a new OCI layout"
  # The real bases have setuid programs (su, mount): as the builds above,
  # imgverify accepts them by default (issue 45), counted in its report.
  for r in $(seq 1 "$RUNS"); do
    REPORT=1 measure_any "$sc" verify "$IV" bench:w1
    split_verify verify
    REPORT=1 measure_any "$sc" verify-full "$IV" --full bench:w1
    split_verify verify-full
  done
  # Over GPU libraries: imgverify as another machine's CI step runs it
  # (a store of its own that never read the image; the result read in
  # place as an OCI layout, the build's store being one), and the GPU-code
  # listings' peaks.
  if [ "$sc" = gpu ] || [ "$sc" = cuda ]; then
    for r in $(seq 1 "$COLD_RUNS"); do
      rm -rf "$W/vstore"
      IMGBUILD_STORE=$W/vstore REPORT=1 measure_any "$sc" verify-fresh "$IV" "oci:$W/store:bench:w1"
    done
    rm -rf "$W/vstore"
    measure "$sc" kernels-json "$IV" --kernels --json "oci:$layout:base"
    for r in $(seq 1 "$COLD_RUNS"); do
      rm -rf "$W/jstore"
      IMGBUILD_STORE=$W/jstore measure "$sc" jit-budget-cold "$IV" --jit-budget --json --gpu 12.1 "oci:$layout:base"
    done
    IMGBUILD_STORE=$W/jstore measure "$sc" jit-budget-warm "$IV" --jit-budget --json --gpu 12.1 "oci:$layout:base"
    rm -rf "$W/jstore"
    record "$sc" verify-fresh "imgverify of the result read in place (oci:), a store of its own, empty: every layer read, every gate"
    record "$sc" kernels-json "imgverify --kernels --json of the base (the build's store)"
    record "$sc" jit-budget-cold "imgverify --jit-budget --json --gpu 12.1 of the base, a store of its own, empty"
    record "$sc" jit-budget-warm "the same again, its GPU-code records kept"
  fi
  # How its layers went (its last run's report): the row says it.
  local how
  how=$(jq -r '.integrity | "\(.layers_known) of \(.layers_read + .layers_known) layers hashed only, read through before"' \
    "$W/verify.rep.json" 2>/dev/null) || how="its report has no layer counts"
  record "$sc" verify "imgverify of the result (store; every gate, timed pass or fail; $how)"
  record "$sc" verify-bytes "of which the byte pass: its report's integrity gate (blob digests; diff_ids and entries as read before)"
  record "$sc" verify-gates "of which the other gates: their seconds in its report, summed"
  record "$sc" verify-full "imgverify --full of the result: every layer inflated and checked again"
  record "$sc" verify-full-bytes "of which the byte pass (blob digests, diff_ids, entries)"
  record "$sc" verify-full-gates "of which the other gates, summed"
  local man
  man=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == "bench:w1") | .digest' "$W/store/index.json" | cut -d: -f2)
  jq -r '.layers[].digest, .config.digest' "$W/store/blobs/sha256/$man" | cut -d: -f2 | while read -r b; do
    if [ -f "$W/store/blobs/sha256/$b" ]; then echo "$W/store/blobs/sha256/$b"; else echo "$layout/blobs/sha256/$b"; fi
  done >"$W/rblobs.txt"
  if [ -s "$W/rblobs.txt" ]; then
    for r in $(seq 1 "$RUNS"); do measure "$sc" sha256sum xargs -P2 -n1 sha256sum <"$W/rblobs.txt"; done
    record "$sc" sha256sum "sha256sum of the result's blobs, 2 at a time"
    # coreutils' sha256sum does not use the CPU's SHA instructions; OpenSSL
    # (which imgbuild hashes with) does: the stricter peer, beside it.
    for r in $(seq 1 "$RUNS"); do measure "$sc" openssl-sha256 xargs -P2 -n1 openssl dgst -sha256 <"$W/rblobs.txt"; done
    record "$sc" openssl-sha256 "openssl dgst -sha256 of the result's blobs, 2 at a time"
    # The floor of any check of a diff_id: inflating the layers alone.  One
    # gzip stream inflates on one core, so an image whose bytes are mostly
    # one layer cannot be checked faster than that layer inflates.
    jq -r '.layers[].digest' "$W/store/blobs/sha256/$man" | cut -d: -f2 | while read -r b; do
      if [ -f "$W/store/blobs/sha256/$b" ]; then echo "$W/store/blobs/sha256/$b"; else echo "$layout/blobs/sha256/$b"; fi
    done >"$W/rlayers.txt"
    if command -v igzip >/dev/null; then
      for r in $(seq 1 "$RUNS"); do measure "$sc" inflate xargs -P2 -n1 sh -c 'igzip -dc "$1" >/dev/null' _ <"$W/rlayers.txt"; done
      record "$sc" inflate "igzip -dc of the result's layers alone, 2 at a time: the floor of a diff_id check"
    fi
  fi

  # pushes: a fresh registry for each "new" run
  local P=127.0.0.1
  for r in $(seq 1 "$RUNS"); do
    start_registry
    REPORT=1 measure "$sc" push-new-imgbuild "$IB" "${ibf[@]}" "$W/def" -t "bench:p$r" --push "docker://$P:$PORT/ib:1"
    start_registry
    measure "$sc" push-new-skopeo skopeo copy -q --dest-tls-verify=false "oci:$W/store:bench:w1" "docker://$P:$PORT/sk:1"
  done
  record "$sc" push-new-imgbuild "imgbuild warm build + --push, empty registry"
  record "$sc" push-new-skopeo "skopeo copy to an empty registry"
  start_registry
  skopeo copy -q --dest-tls-verify=false "oci:$layout:base" "docker://$P:$PORT/base:1"
  # (a thin push takes a fraction of a second: its median wants the warm
  # builds' runs; the first, under a new base name, is one of them)
  for r in $(seq 1 "$WARM_RUNS"); do
    REPORT=1 measure "$sc" push-thin-imgbuild "$IB" "${ibf[@]}" --from "docker://$P:$PORT/base:1" "$W/def" -t bench:thin --push "docker://$P:$PORT/thin-ib:$r"
    measure "$sc" push-thin-skopeo skopeo copy -q --dest-tls-verify=false "oci:$W/store:bench:thin" "docker://$P:$PORT/thin-sk:$r"
  done
  record "$sc" push-thin-imgbuild "imgbuild warm build --from the registry's base + --push"
  record "$sc" push-thin-skopeo "skopeo copy, base already in the registry (another repository)"
  # Cold builds from the registry: a fresh store each run, the base
  # downloaded and listed as it arrives (layers/view/pull_lists.h); skopeo's copy
  # of the same base to a new layout is the download alone.
  # (one copy of the base at a time beside the registry's: see need_bytes)
  for r in $(seq 1 "$COLD_RUNS"); do
    IMGBUILD_STORE=$W/pstore
    REPORT=1 measure "$sc" pull-cold-imgbuild "$IB" "${ibf[@]}" --from "docker://$P:$PORT/base:1" "$W/def" -t "bench:pc$r"
    IMGBUILD_STORE=$W/store
    rm -rf "$W/pstore"
    measure "$sc" pull-skopeo skopeo copy -q --src-tls-verify=false "docker://$P:$PORT/base:1" "oci:$W/pl:base"
    rm -rf "$W/pl"
  done
  record "$sc" pull-cold-imgbuild "imgbuild cold build --from the registry's base, fresh store (pull + build)"
  record "$sc" pull-skopeo "skopeo copy of the registry's base to a new OCI layout (the pull alone)"

  # docker load holds the archive (the layers uncompressed) and the
  # engine's unpacked copy at once, beside the store's and the registry's
  # copies: checked here, with what is left, rather than failing half-way
  # (gen:16 on a disk with 51 GiB free did, at 819cb77's estimate).
  local docker_need=$((2 * unc + 2 * GIB)) docker_free
  docker_free=$(free_bytes "$WORK")
  if [ "${BENCH_SKIP_DOCKER:-}" != 1 ] && [ "$docker_free" -lt "$docker_need" ]; then
    say "$sc: docker rows SKIPPED: docker load needs ~$((docker_need / GIB)) GiB free, $WORK has $((docker_free / GIB)) GiB"
    printf '%s\tdocker-skipped\t0\t0\t0\t0\t0\tdocker load needs ~%d GiB of free disk (the archive and its unpacked copy) beside the store and the registry; this machine had %d GiB left\n' \
      "$sc" $((docker_need / GIB)) $((docker_free / GIB)) >>"$RES/$sc.tsv"
  elif [ "${BENCH_SKIP_DOCKER:-}" != 1 ]; then
    start_dockerd
    skopeo copy -q "oci:$layout:base" "docker-archive:$W/base.tar:bench-base:1"
    for r in $(seq 1 "$RUNS"); do
      $D rmi -f bench-base:1 >/dev/null 2>&1 || true
      $D image prune -af >/dev/null 2>&1 || true
      measure "$sc" docker-load $D load -q -i "$W/base.tar"
    done
    record "$sc" docker-load "docker load of the base archive"
    rm -f "$W/base.tar"
    for r in $(seq 1 "$RUNS"); do measure "$sc" docker env DOCKER_BUILDKIT=0 $D build -q --no-cache -t "bench:d$r" "$W/ctx"; done
    record "$sc" docker "docker build --no-cache, 23 COPY, base loaded (client RSS)"
    for r in $(seq 1 "$RUNS"); do
      start_registry
      $D tag bench:d1 "$P:$PORT/dk:1"
      measure "$sc" push-new-docker $D push -q "$P:$PORT/dk:1"
      $D rmi "$P:$PORT/dk:1" >/dev/null
    done
    record "$sc" push-new-docker "docker push to an empty registry (client RSS)"
    start_registry
    $D tag bench-base:1 "$P:$PORT/base:1" && $D push -q "$P:$PORT/base:1" >/dev/null
    for r in $(seq 1 "$RUNS"); do
      $D tag bench:d1 "$P:$PORT/thin-dk:$r"
      measure "$sc" push-thin-docker $D push -q "$P:$PORT/thin-dk:$r"
    done
    record "$sc" push-thin-docker "docker push, base already in the registry (client RSS)"
    stop_dockerd
  fi
  stop_registry
  say "$sc: done ($(wc -l <"$RES/$sc.tsv") figures)"
}

# BENCH_BASES_ONLY=1: make (or find) each scenario's base in the cache and
# stop, measuring nothing: the hour a 30 GB base takes to generate can then
# go beside other work, and the measured run finds it made.
if [ "${BENCH_BASES_ONLY:-}" = 1 ]; then
  for sc in $SCENARIOS; do say "$sc: base in $(base_of "$sc")"; done
  exit 0
fi
for sc in $SCENARIOS; do run_scenario "$sc"; done
{
  echo "machine	$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))	$(free -g | awk '/Mem:/ { print $2 }') GiB	$(uname -r)	load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "date	$(date -u +%FT%TZ)"
  echo "commit	$(git -C "$ROOT" rev-parse --short HEAD)"
  echo "runs (each, cold, warm)	$RUNS	$COLD_RUNS	$WARM_RUNS"
} >"$RES/machine.tsv"
/usr/bin/python3 "$ROOT/bench/report.py" "$RES" "$ROOT/bench"
# Work and docker data go; the cached bases stay (BENCH_CACHE; rm -rf to free)
rm -rf "$WORK/gen"
say "wrote $ROOT/bench/RESULTS.md and its plots; bases stay cached in $CACHE ($(du -sh "$CACHE" | cut -f1))"
