#!/usr/bin/env bash
# A thin build over a known base: the 23-file DCP2 overlay over the stand-in
# base (200 MB of layer, NCCL in it), by imgbuild (warm store, gates on,
# smoke off) and by the peer tools on the same input in the same run:
#   umoci insert   the same files as one new layer into an OCI layout
#   docker build   FROM the base (already in the daemon) + one COPY
# Prints seconds, peak RSS and the ratios; asserts nothing.  Needs root,
# dockerd, umoci, skopeo (scripts/install-deps.sh test) and `make all`.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
W=$(mktemp -d /tmp/ibthin.XXXXXX)
SOCK=$W/d.sock
cleanup() {
  [ -f "$W/d.pid" ] && kill "$(cat "$W/d.pid")" 2>/dev/null && sleep 2
  rm -rf "$W"
}
trap cleanup EXIT
export IMGBUILD_STORE=$W/store
SITE=/usr/local/lib/python3.12/dist-packages
D="docker -H unix://$SOCK"
measure() { # NAME CMD... -> "seconds rss" in $W/NAME.m
  local name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$W/$name.m" "$@" >/dev/null 2>"$W/$name.err" || { cat "$W/$name.err"; exit 1; }
}

# The base, in the store, in an OCI layout for umoci, and in a dockerd.
"$IB" -q "$ROOT/images/dsv41-flash-b12x" --output oci:"$W/layout":base --output docker-archive:"$W/base.tar" >/dev/null
"$IB" -q --smoke=off "$ROOT/images/dsv41-flash-dcp2" -t warm:1 >/dev/null # warms the caches
(setsid dockerd --host "unix://$SOCK" --data-root "$W/dd" --exec-root "$W/de" --pidfile "$W/d.pid" \
  --iptables=false --bridge=none --storage-driver=vfs >"$W/dockerd.log" 2>&1 &)
for _ in $(seq 1 120); do $D version >/dev/null 2>&1 && break; sleep 0.5; done
$D load -i "$W/base.tar" >/dev/null

# The same 23 files, staged at their targets.
mkdir -p "$W/ctx/stage"
grep -v '^#' "$ROOT/images/dsv41-flash-dcp2/manifest.txt" | while read -r flat target; do
  [ -n "$flat" ] || continue
  mkdir -p "$(dirname "$W/ctx/stage$SITE/vllm/$target")"
  cp "$ROOT/images/dsv41-flash-dcp2/files/$flat" "$W/ctx/stage$SITE/vllm/$target"
done
printf 'FROM dsv41-flash-b12x:local\nCOPY stage/ /\n' >"$W/ctx/Dockerfile"

measure imgbuild "$IB" -q --smoke=off "$ROOT/images/dsv41-flash-dcp2" -t bench:1
measure umoci umoci insert --image "$W/layout:base" --tag thin "$W/ctx/stage" /
measure docker env DOCKER_BUILDKIT=0 $D build -q -t bench:1 "$W/ctx"
echo "thin build: 23 files over a 1-layer base of $(du -sh "$W/layout/blobs" | cut -f1) (OCI layout)"
printf '%-40s %8s %14s %8s\n' tool seconds "peak RSS KiB" ratio
read -r ts tm <"$W/imgbuild.m"
for t in imgbuild umoci docker; do
  read -r s m <"$W/$t.m"
  printf '%-40s %8s %14s %7sx\n' "$t" "$s" "$m" "$(awk -v a="$s" -v b="$ts" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')"
done
echo "(imgbuild runs the definition, symbol and kernel gates too; the ratio is seconds / imgbuild's seconds;"
echo " docker's RSS is the client's: the work happens in dockerd)"
