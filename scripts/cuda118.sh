#!/bin/bash
# Real CUDA 11.8 toolchain files from Debian bookworm's non-free component
# (nvidia-cuda-toolkit 11.8: ptxas, libnvrtc, libcudart), amd64 and arm64,
# unpacked (dpkg -x) into a cache folder for the JIT-toolchain tests.  The
# machine's own apt configuration is left as it is: a private sources file
# and lists folder under the cache.
#
#   scripts/cuda118.sh [--print]   -> prints the cache folder; it holds
#                                     amd64/ and arm64/ roots
set -euo pipefail
CACHE=${IMGBUILD_CUDA118_CACHE:-/var/cache/imgbuild/cuda118}
PKGS=(nvidia-cuda-toolkit libnvrtc11.2 libcudart11.0)
if [ -e "$CACHE/done" ]; then
  echo "$CACHE"
  exit 0
fi
mkdir -p "$CACHE/apt/lists/partial" "$CACHE/debs" "$CACHE/amd64" "$CACHE/arm64"
cat >"$CACHE/apt/sources.list" <<'SRC'
deb [arch=amd64,arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm contrib non-free
SRC
APT=(-o Dir::Etc::SourceList="$CACHE/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
  -o Dir::State::Lists="$CACHE/apt/lists" -o APT::Architectures::=amd64 -o APT::Architectures::=arm64
  -o Debug::NoLocking=1)
apt-get "${APT[@]}" update >&2
cd "$CACHE/debs"
for arch in amd64 arm64; do
  for p in "${PKGS[@]}"; do
    # Not every package is built for arm64: take what there is.
    apt-get "${APT[@]}" download "$p:$arch" >&2 || echo "cuda118: no $p for $arch" >&2
  done
done
for deb in *.deb; do
  case $deb in
    *_arm64.deb) dpkg -x "$deb" "$CACHE/arm64" ;;
    *) dpkg -x "$deb" "$CACHE/amd64" ;;
  esac
done
# The unpacked files are what the tests read; the .debs (~200 MB) go.
rm -f "$CACHE"/debs/*.deb
touch "$CACHE/done"
echo "$CACHE"
