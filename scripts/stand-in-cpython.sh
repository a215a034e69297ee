#!/usr/bin/env bash
# stand-in-cpython.sh LOCK OUT: the stand-in base's glibc and CPython 3.12
# for amd64, from Ubuntu 24.04's packages (the vLLM images are an Ubuntu
# with CPython 3.12; Debian has none: bookworm has 3.11, trixie 3.13).
# Each .deb of LOCK is fetched from $UBUNTU_MIRROR (default Ubuntu's
# archive), kept in OUT/../deb, and must have LOCK's SHA-256; OUT gets
#   lib/  the loader, libc and the libraries python3.12 needs, for
#         /lib/x86_64-linux-gnu (glibc 2.39: python3.12 needs GLIBC_2.38);
#   usr/  bin/python3.12, bin/python3 and lib/python3.12 (the minimal
#         standard library), for /usr.
# So the symbol gate's syntax check runs the image's own interpreter over
# the dsv41-flash-dcp2 overlay, as it does on a real base.
# Where the archive cannot be reached, OUT gets the build machine's glibc
# and no CPython, and OUT/NO-CPYTHON says why: the syntax check then falls
# back to the build machine's python3, whose refusals are only warnings,
# and the tests that need the image's CPython skip, naming that file.  A
# .deb whose digest differs is an error (exit 8): nothing is written.
set -eu
lock=$1 out=$2
mirror=${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
debs=$(dirname "$out")/deb
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp/lib" "$tmp/usr" "$debs"

fetch() { # POOL-PATH SHA256: prints the .deb's path; 1: not fetched, 2: wrong digest
  local f=$debs/${1##*/}
  if [ ! -s "$f" ]; then
    curl -fsS --retry 2 --connect-timeout 20 -m 300 -o "$f.part" "$mirror/$1" || { rm -f "$f.part"; return 1; }
    mv "$f.part" "$f"
  fi
  if [ "$(sha256sum <"$f" | cut -d' ' -f1)" != "$2" ]; then
    echo "stand-in-cpython: $mirror/$1: SHA-256 $(sha256sum <"$f" | cut -d' ' -f1), $lock pins $2" >&2
    rm -f "$f"
    return 2
  fi
  echo "$f"
}

root=$tmp/root
missing=
while read -r path sha; do
  case $path in '' | '#'*) continue ;; esac
  rc=0
  deb=$(fetch "$path" "$sha") || rc=$?
  [ "$rc" != 2 ] || { rm -rf "$tmp"; exit 8; }
  if [ "$rc" != 0 ]; then
    missing="$mirror/$path could not be fetched"
    break
  fi
  dpkg-deb -x "$deb" "$root"
done <"$lock"

if [ -z "$missing" ]; then
  so=$root/usr/lib/x86_64-linux-gnu
  for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libz.so.1 libexpat.so.1; do
    cp "$(readlink -f "$so/$f")" "$tmp/lib/$f"
  done
  mkdir -p "$tmp/usr/bin" "$tmp/usr/lib"
  cp -p "$root/usr/bin/python3.12" "$tmp/usr/bin/python3.12"
  ln -s python3.12 "$tmp/usr/bin/python3"
  cp -a "$root/usr/lib/python3.12" "$tmp/usr/lib/python3.12"
else
  echo "stand-in-cpython: warning: $missing; the stand-in base gets the build machine's glibc and no CPython (UBUNTU_MIRROR names another archive)" >&2
  for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    cp "$(readlink -f "/lib/x86_64-linux-gnu/$f")" "$tmp/lib/$f"
  done
  echo "$missing" >"$tmp/NO-CPYTHON"
fi
chmod 0755 "$tmp/lib/ld-linux-x86-64.so.2" "$tmp/lib/libc.so.6"
rm -rf "$root" "$out"
mv "$tmp" "$out"
