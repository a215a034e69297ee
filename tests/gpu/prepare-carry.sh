#!/usr/bin/env bash
# Make the folder that tests/gpu/smoke.sh needs on the GPU machine (which has
# no package registry): the tools, their shared libraries, runc, and a store
# with the stand-in base built without NCCL.  Usage: prepare-carry.sh DIR [--pack]
# --pack leaves DIR/carry.tgz only (the run tool carries 64 MiB at most; the
# folder is ~70 MB, 31 MB packed); tests/gpu/smoke.sh takes either.
set -eu
D=$1 PACK=${2:-}
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
if [ "$PACK" = --pack ]; then
  tar czf "$D.tgz" -C "$D" . && rm -rf "$D" && mkdir -p "$D" && mv "$D.tgz" "$D/carry.tgz"
fi
du -sh "$D"
