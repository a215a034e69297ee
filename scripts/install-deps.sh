#!/usr/bin/env bash
# Install what imgbuild needs from Debian's archive: `build` for the tools and
# the main job, `fuzz` for the libFuzzer harnesses (clang), `test` for
# the test suite's real peers (Docker Engine, skopeo,
# umoci, runc, the registry).  Only missing packages are installed.
set -eu
build=(gcc g++ make pkg-config libarchive-dev libcjson-dev libssl-dev zlib1g-dev libzstd-dev liblz4-dev
       libcurl4-openssl-dev busybox-static python3 ca-certificates)
fuzz=(clang libclang-rt-dev)
test=(skopeo umoci docker.io runc docker-registry apache2-utils openssl curl tmux jq iproute2 procps python3-jsonschema strace
      time file gcc-aarch64-linux-gnu binutils)
want=("${build[@]}")
[ "${1:-build}" = test ] && want+=("${test[@]}" "${fuzz[@]}")
[ "${1:-build}" = fuzz ] && want+=("${fuzz[@]}")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or install them)" >&2
  exit 8
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
