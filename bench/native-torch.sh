#!/usr/bin/env bash
# The native link gate on the torch image of scripts/real-base.sh (Debian
# bookworm, python3-torch and python3-scipy): a build over it with
# `[native] package torch scipy`, cold (a fresh store: every ELF record read
# out of the base layer) and warm (a rebuild: records from the cache, no
# layer read), the gate's own seconds from the build's gate table, and the
# CPU seconds of the whole build (a machine shared with other work makes
# wall-clock times long; CPU time is what the gate costs).
# Usage: bench/native-torch.sh       (prints a table; asserts nothing)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
W=$(mktemp -d /tmp/ibbench.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
export IMGBUILD_STORE=$W/store
ref=$("$ROOT/scripts/real-base.sh" | sed -n 's/^ref=//p')
mkdir -p "$W/d"
echo bench >"$W/d/note.txt"
printf '[image]\nname = torch-native:1\nfrom = %s\n[copy]\nfile note.txt /etc/imgbuild-note\n[new]\n/etc/imgbuild-note\n[native]\npackage torch scipy\n' \
  "$ref" >"$W/d/image.conf"
gate() { sed -n 's/^imgbuild: gate native *pass *\([0-9.]*\)s.*/\1/p' "$1"; }
note() { sed -n 's/^imgbuild: native: //p' "$1"; }
# The base's file list is made once per store by the first build; a build
# without [native] makes it, so that "cold" is the gate's own first run.
sed '/^\[native\]/,$d' "$W/d/image.conf" >"$W/d/plain.conf"
mkdir -p "$W/p" && cp "$W/d/plain.conf" "$W/p/image.conf" && cp "$W/d/note.txt" "$W/p/"
"$IB" -q -t plain:1 "$W/p" >/dev/null
cpu() { /usr/bin/time -f '%e %U %S' -o "$1.time" "${@:2}"; }
cpu "$W/cold" "$IB" "$W/d" 2>"$W/cold.err" >/dev/null
cpu "$W/warm" "$IB" -t torch-native:2 "$W/d" 2>"$W/warm.err" >/dev/null
printf '%-5s %8s %8s %8s  %s\n' run gate_s wall_s cpu_s note
for r in cold warm; do
  read -r wall user sys <"$W/$r.time"
  printf '%-5s %8s %8s %8.2f  %s\n' "$r" "$(gate "$W/$r.err")" "$wall" "$(echo "$user + $sys" | bc)" "$(note "$W/$r.err")"
done
