#!/usr/bin/env bash
# The folder tests/gpu/multinode.sh needs on the GPU machine (no package
# registry there): tests/gpu/prepare-carry.sh's (the tools, runc, the
# stand-in base), and OpenMPI (Debian's openmpi-bin and its libraries, run
# from the folder through OPAL_PREFIX), Debian's docker-registry, iproute2's
# ip and util-linux's nsenter, with the shared libraries they need.
# Usage: prepare-multinode-carry.sh DIR: leaves DIR/carry.tgz (the run tool
# carries 64 MiB at most), which tests/gpu/multinode.sh unpacks.
set -eu
D=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$ROOT/tests/gpu/prepare-carry.sh" "$D"
mkdir -p "$D/ompi"
for pkg in openmpi-bin openmpi-common libopenmpi3 libpmix2; do
  dpkg -L "$pkg" | while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    case $f in /usr/share/doc/* | /usr/share/man/* | /usr/include/*) continue ;; esac
    mkdir -p "$D/ompi$(dirname "$f")"
    cp -a "$f" "$D/ompi$f"
  done
done
# Debian's mpirun is an alternatives link to orterun.
ln -sfn orterun "$D/ompi/usr/bin/mpirun"
cp "$(command -v docker-registry)" "$(command -v ip)" "$(command -v nsenter)" "$D/bin/"
# The libraries of every ELF file carried, but the C library's own.
find "$D/ompi" "$D/bin" -type f | while read -r f; do
  file -b "$f" | grep -q '^ELF' || continue
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in libc.so* | libm.so* | libpthread* | libdl* | librt* | ld-linux* | libstdc++* | libgcc_s*) ;;
    *) [ -e "$D/lib/$(basename "$lib")" ] || cp -L "$lib" "$D/lib/" ;;
  esac
done
du -sh "$D" "$D/ompi" "$D/lib"
tar czf "$D.tgz" -C "$D" . && rm -rf "$D" && mkdir -p "$D" && mv "$D.tgz" "$D/carry.tgz"
du -sh "$D/carry.tgz"
