#!/usr/bin/env bash
# Install what imgbuild needs from Debian's archive: `build` for the tools and
# the main job, `fuzz` for the libFuzzer harnesses (clang), `test` for
# the test suite's real peers (Docker Engine, skopeo,
# umoci, runc, the registry, the static qemu-user that runs an arm64
# image's CPython), `arm64` for the aarch64 cross-build and its
# tests (Debian's cross compiler, the arm64 -dev packages through multiarch,
# qemu-user, and the arm64 libraries the tests read).  Only missing packages
# are installed.
set -eu
build=(gcc g++ make pkg-config libarchive-dev libcjson-dev libssl-dev zlib1g-dev libzstd-dev liblz4-dev libisal-dev
       libcurl4-openssl-dev busybox-static python3 ca-certificates libtomlplusplus-dev go-md2man curl)
# (go-md2man: `make install` renders the man pages, docs/man/*.md; curl:
# the stand-in base's glibc and CPython, scripts/stand-in-cpython.sh.)
fuzz=(clang libclang-rt-dev)
test=(skopeo umoci docker.io runc docker-registry apache2-utils openssl curl tmux jq iproute2 procps openmpi-bin python3-jsonschema python3-protobuf python3-junitparser libxml2-utils strace
      time file gcc-aarch64-linux-gnu binutils openssh-server openssh-client zstd isal
      libc6-dev-arm64-cross man-db qemu-user-static slurm-wlm munge)
# (isal: igzip, a second inflater that judges the layers imgbuild writes;
# man-db: `man -l` reads the rendered man pages as a user would,
# tests/integration/docs.sh; qemu-user-static: the syntax check runs an
# image of another architecture's own CPython under it, in its chroot;
# slurm-wlm and munge: a real Slurm for the smoke test across nodes,
# tests/cluster/slurm.sh starts daemons of its own, never the packages'.)
# `bench` (make bench): the peers of `test`, igzip (ISA-L) for the limit,
# matplotlib for the plots.
bench=(isal python3-matplotlib)
arm64=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user libarchive-dev:arm64 libcjson-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64
       libzstd-dev:arm64 liblz4-dev:arm64 libcurl4-openssl-dev:arm64 libstdc++6:arm64 libpython3.11:arm64)
want=("${build[@]}")
[ "${1:-build}" = test ] && want+=("${test[@]}" "${fuzz[@]}")
[ "${1:-build}" = bench ] && want+=("${test[@]}" "${bench[@]}")
[ "${1:-build}" = fuzz ] && want+=("${fuzz[@]}")
[ "${1:-build}" = arm64 ] && want+=("${arm64[@]}")
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
# The :arm64 packages come from the same archive once dpkg knows the
# architecture (multiarch); they install beside the amd64 ones.
if [ "${1:-build}" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
