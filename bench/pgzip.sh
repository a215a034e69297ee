#!/usr/bin/env bash
# Issue 18: util/pgzip.c (the layer compressor) on 1 and 2 threads beside
# gzip -6 and pigz -6 -p2, on the same uncompressed input: seconds (wall),
# compressed bytes.  Input: FILE, else the tar of the real Debian + torch
# base's layer (scripts/real-base.sh, /var/cache/imgbuild/realbase).
# Nothing is asserted.  Usage: bench/pgzip.sh [FILE]
set -eu
cd "$(dirname "$0")/.."
make -s build/libimgbuild.a
work=$(mktemp -d "${TMPDIR:-/tmp}/ibpgzip.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror bench/pgzip_cat.c build/libimgbuild.a \
  $(pkg-config --libs zlib) -lpthread -o "$work/pgzip_cat"
input=${1:-}
if [ -z "$input" ]; then
  layout=$(ls -d /var/cache/imgbuild/realbase/bookworm-amd64-*/oci | head -1)
  manifest=$(jq -r '.manifests[0].digest' "$layout/index.json")
  layer=$(jq -r '.layers | max_by(.size) | .digest' "$layout/blobs/sha256/${manifest#sha256:}")
  input=$work/layer.tar
  gzip -dc <"$layout/blobs/sha256/${layer#sha256:}" >"$input"
fi
echo "input: $(stat -c %s "$input") bytes; $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"
run() { # NAME CMD...
  local t0 t1
  t0=$(date +%s.%N)
  "${@:2}" <"$input" >"$work/out.gz"
  t1=$(date +%s.%N)
  printf '%-18s %7.1f s %12d bytes\n' "$1" "$(echo "$t1 - $t0" | bc)" "$(stat -c %s "$work/out.gz")"
}
run "pgzip 1 thread" "$work/pgzip_cat" 1
cp "$work/out.gz" "$work/one.gz"
run "pgzip 2 threads" "$work/pgzip_cat" 2
cmp "$work/one.gz" "$work/out.gz" && echo "pgzip 1 and 2 threads: the same bytes"
run "gzip -6" gzip -6 -n
run "pigz -6 -p2" pigz -6 -n -p2
echo "load after: $(uptime | sed 's/.*load average: //')"
