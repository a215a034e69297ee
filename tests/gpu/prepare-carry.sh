#!/usr/bin/env bash
# Make the folder that tests/gpu/smoke.sh needs on the GPU machine (which has
# no package registry): the tools, their shared libraries, runc, and a store
# with the stand-in base built without NCCL.  Usage: prepare-carry.sh DIR
set -eu
D=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$D" && mkdir -p "$D/build" "$D/lib" "$D/bin"
cp "$ROOT"/build/{imgbuild,imgverify,dcp2_smoke} "$D/build/"
cp "$(command -v runc)" "$D/bin/"
for lib in $(ldd "$ROOT/build/imgbuild" "$(command -v runc)" | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$lib") in libc.so*|libm.so*|libpthread*|libdl*|librt*|ld-linux*|libstdc++*|libgcc_s*) ;; *) cp -L "$lib" "$D/lib/" ;; esac
done
tmp=$(mktemp -d)
cp -r "$ROOT/images/." "$tmp/"
sed -i '/libnccl.so.2/d' "$tmp/dsv41-flash-b12x/image.conf"
IMGBUILD_STORE=$D/store "$ROOT/build/imgbuild" -q "$tmp/dsv41-flash-b12x" -t dsv41-flash-b12x:no-nccl
rm -rf "$tmp" "$D/store/imgbuild"
du -sh "$D"
