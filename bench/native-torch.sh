#!/usr/bin/env bash
# The native link gate on the torch image of scripts/real-base.sh (Debian
# bookworm, python3-torch and python3-scipy): a build over it with
# `[native] package torch scipy`, cold (a fresh store: every ELF record read
# out of the base layer) and warm (a rebuild: records from the cache, no
# layer read), the gate's own seconds from the build's gate table.
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
s0=$(date +%s.%N)
"$IB" "$W/d" 2>"$W/cold.err" >/dev/null
s1=$(date +%s.%N)
"$IB" -t torch-native:2 "$W/d" 2>"$W/warm.err" >/dev/null
s2=$(date +%s.%N)
printf '%-6s %10s %10s  %s\n' run gate_s build_s note
printf '%-6s %10s %10.2f  %s\n' cold "$(gate "$W/cold.err")" "$(echo "$s1 - $s0" | bc)" "$(note "$W/cold.err")"
printf '%-6s %10s %10.2f  %s\n' warm "$(gate "$W/warm.err")" "$(echo "$s2 - $s1" | bc)" "$(note "$W/warm.err")"
