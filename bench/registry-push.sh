#!/usr/bin/env bash
# Pushing a thin image whose base is already in the registry (another
# repository of it), through a counting proxy on loopback, by imgbuild and
# by the peer tools on the same image in the same run:
#   imgbuild --push   (the build is warm; gates rerun, then the push)
#   skopeo copy       oci:STORE:dsv41-flash-dcp2:local → the registry
#   docker push       of the same image loaded into a dockerd
# and pulling it back into an empty store / layout / daemon that already
# has the base.  Prints seconds, peak RSS, bytes sent and received, and the
# ratios; asserts nothing.  Needs root, dockerd, skopeo, docker-registry
# (scripts/install-deps.sh test) and `make all`.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
W=$(mktemp -d /tmp/ibpush.XXXXXX)
SOCK=$W/d.sock
D="docker -H unix://$SOCK"
cleanup() {
  [ -f "$W/d.pid" ] && kill "$(cat "$W/d.pid")" 2>/dev/null && sleep 2
  [ -f "$W/pids" ] && xargs kill <"$W/pids" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
export IMGBUILD_STORE=$W/store
cd "$W"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'version: 0.1\nstorage: {filesystem: {rootdirectory: %s/reg}}\nhttp: {addr: "127.0.0.1:%s"}\n' "$W" "$port" >reg.yml
(setsid docker-registry serve reg.yml >reg.log 2>&1 & echo $! >>pids)
(setsid python3 "$ROOT/tests/registry/proxy.py" proxy.port "$port" proxy.jsonl & echo $! >>pids)
(setsid dockerd --host "unix://$SOCK" --data-root "$W/dd" --exec-root "$W/de" --pidfile "$W/d.pid" \
  --iptables=false --bridge=none --storage-driver=vfs >dockerd.log 2>&1 &)
for _ in $(seq 1 120); do [ -s proxy.port ] && $D version >/dev/null 2>&1 && break; sleep 0.5; done
P=127.0.0.1:$(cat proxy.port)

measure() { # NAME CMD... -> "seconds rss up down" in NAME.m
  local name=$1
  shift
  : >proxy.jsonl
  /usr/bin/time -f '%e %M' -o "$name.t" "$@" >/dev/null 2>"$name.err" || { cat "$name.err"; exit 1; }
  echo "$(cat "$name.t") $(jq -s '[.[].up // 0] | add // 0' proxy.jsonl) $(jq -s '[.[].down // 0] | add // 0' proxy.jsonl)" >"$name.m"
}

# The base in the registry (as its own repository), in the daemon, and the
# thin image built (warm) in the store.
"$IB" -q "$ROOT/images/dsv41-flash-b12x" --output docker-archive:base.tar >/dev/null
skopeo copy -q --dest-tls-verify=false "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" "docker://$P/dsv41-flash-b12x:local"
"$IB" -q --smoke=off --from "docker://$P/dsv41-flash-b12x:local" "$ROOT/images/dsv41-flash-dcp2" >/dev/null
$D load -i base.tar >/dev/null
"$IB" -q --smoke=off --from "docker://$P/dsv41-flash-b12x:local" "$ROOT/images/dsv41-flash-dcp2" \
  --output docker-archive:dcp2.tar:dsv41-flash-dcp2:local >/dev/null
$D load -i dcp2.tar >/dev/null
$D tag dsv41-flash-dcp2:local "$P/dcp2-docker:1"

measure imgbuild-push "$IB" -q --smoke=off --from "docker://$P/dsv41-flash-b12x:local" "$ROOT/images/dsv41-flash-dcp2" \
  --push "docker://$P/dcp2-imgbuild:1"
measure skopeo-push skopeo copy -q --dest-tls-verify=false "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" \
  "docker://$P/dcp2-skopeo:1"
measure docker-push $D push -q "$P/dcp2-docker:1"
# Pulls into a place that already has the base.
skopeo copy -q "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" oci:pullstore:dsv41-flash-b12x:local
printf 'FROM docker://%s/dcp2-imgbuild:1\n' "$P" >Dockerfile.pull
measure imgbuild-pull env IMGBUILD_STORE=$W/pullstore "$IB" -q --smoke=off -f Dockerfile.pull -t pulled:1 .
skopeo copy -q "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" oci:layout:base
measure skopeo-pull skopeo copy -q --src-tls-verify=false "docker://$P/dcp2-imgbuild:1" oci:layout:dcp2
$D rmi -f "$P/dcp2-docker:1" dsv41-flash-dcp2:local >/dev/null
measure docker-pull $D pull -q "$P/dcp2-imgbuild:1"

echo "thin push/pull: the DCP2 image (base layer $(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq '.layers[0].size') bytes) over a loopback registry"
printf '%-16s %8s %13s %12s %12s %7s\n' tool seconds "peak RSS KiB" "bytes up" "bytes down" ratio
for op in push pull; do
  read -r ts _ <"imgbuild-$op.m"
  for t in imgbuild skopeo docker; do
    read -r s m up down <"$t-$op.m"
    printf '%-16s %8s %13s %12s %12s %6sx\n' "$t-$op" "$s" "$m" "$up" "$down" \
      "$(awk -v a="$s" -v b="$ts" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')"
  done
done
echo "(imgbuild-push reruns the warm build and its gates before pushing; imgbuild-pull is a build FROM the"
echo " pushed image with nothing added, into a store that has the base only; skopeo-pull into a layout that"
echo " has the base; docker pull into the daemon that has the base loaded from an archive.  The ratio is"
echo " seconds / imgbuild's; docker's RSS is the client's, the work is dockerd's)"
