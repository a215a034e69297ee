#!/usr/bin/env bash
# The symbol gate on the real base (scripts/real-base.sh: bookworm with
# python3-torch and python3-scipy): the DCP2-sized case, 23 torch files
# changed (a comment added), check-package torch.
#   cold   a fresh store: the base layer's file list, the layer extracted for
#          the image's CPython (syntax), every torch file scanned for the
#          reverse-import index, the overlay's imports
#   warm   a rebuild with one overlay file changed again: per-file caches,
#          one index entry per replaced module, one CPython run for the one
#          new file (and on "warm, same" none at all)
# Then the same warm case over a base twice as large (the real base plus a
# layer of 1,141 more modules), to show warm does not grow with the base.
# Usage: bench/symbols-real.sh          (prints a table; asserts nothing)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
eval "$("$ROOT/scripts/real-base.sh")"
W=$(mktemp -d /tmp/ibbench.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
export IMGBUILD_STORE=$W/store
SITE=usr/lib/python3/dist-packages

overlay() { # DIR FROM SALT
  mkdir -p "$1"
  {
    printf '[image]\nname = bench-real:1\nfrom = %s\n[copy]\n' "$2"
    (cd "$rootfs/$SITE" && find torch -name '*.py' -type f | sort | awk 'NR % 50 == 0' | head -23) | while read -r f; do
      mkdir -p "$1/files/$(dirname "$f")"
      { echo "# $3"; cat "$rootfs/$SITE/$f"; } >"$1/files/$f"
      echo "file files/$f /$SITE/$f"
    done
    printf '[symbols]\npython-path /%s\ncheck-package torch\n' "$SITE"
  } >"$1/image.conf"
}

gate_time() { # DIR TAG: seconds of the symbol gate, and its counters
  "$IB" --smoke=off "$1" -t "$2" 2>"$W/err" >/dev/null
  t=$(sed -n 's/.*gate symbols *pass *\([0-9.]*\)s.*/\1/p' "$W/err")
  c=$(sed -n 's/.*symbols: [0-9]* overlay files.*; \([0-9]* read, [0-9]* cached\).*/\1/p' "$W/err")
  s=$(sed -n 's/.*syntax: \([0-9]* compiled\).*, \([0-9]*\) from the cache/\1, \2 cached/p' "$W/err")
  printf '%-34s %8ss   %-22s syntax %s\n' "$3" "$t" "$c" "$s"
}

printf '%-34s %9s   %-22s %s\n' case "gate" "files" ""
overlay "$W/o1" "$ref" one
gate_time "$W/o1" b:1 "cold (fresh store)"
gate_time "$W/o1" b:2 "warm, same overlay"
f=$(sed -n 's/^file \(files\/[^ ]*\) .*/\1/p' "$W/o1/image.conf" | head -1)
echo "# changed" >>"$W/o1/$f"
gate_time "$W/o1" b:3 "warm, one file changed"

# A base twice the size: the real base plus a layer of every torch module again
# under another name (a second copy of the tree).
mkdir -p "$W/big/tree"
cp -r "$rootfs/$SITE/torch" "$W/big/tree/torch2"
printf '[image]\nname = bench-big:1\nfrom = %s\n[copy]\ntree tree/torch2 /%s/torch2\n[new]\n/%s/torch2/\n' \
  "$ref" "$SITE" "$SITE" >"$W/big/image.conf"
"$IB" -q --smoke=off "$W/big" >/dev/null
overlay "$W/o2" bench-big:1 two
gate_time "$W/o2" c:1 "2x base: first build"
echo "# changed" >>"$W/o2/$f"
gate_time "$W/o2" c:2 "2x base: warm, one file changed"
