#!/usr/bin/env bash
# make images / make verify: every definition under images/, bases first
# (a definition whose `from` is another definition's name comes after it).
# Usage: build-images.sh build|verify [IMGBUILD-OPTIONS...]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mode=$1
shift
declare -A name_of from_of
for conf in "$ROOT"/images/*/image.conf; do
  dir=$(dirname "$conf")
  name_of[$dir]=$(sed -n 's/^name *= *//p' "$conf" | head -1)
  from_of[$dir]=$(sed -n 's/^from *= *//p' "$conf" | head -1)
done
done_names=" "
order=()
while [ ${#order[@]} -lt ${#name_of[@]} ]; do
  progressed=false
  for dir in "${!name_of[@]}"; do
    case " ${order[*]:-} " in *" $dir "*) continue ;; esac
    from=${from_of[$dir]}
    dep=false
    for other in "${!name_of[@]}"; do [ "${name_of[$other]}" = "$from" ] && dep=true; done
    if ! $dep || [[ $done_names == *" $from "* ]]; then
      order+=("$dir")
      done_names+="${name_of[$dir]} "
      progressed=true
    fi
  done
  $progressed || { echo "build-images: the definitions' bases form a cycle" >&2; exit 3; }
done
for dir in "${order[@]}"; do
  if [ "$mode" = build ]; then
    "$ROOT/build/imgbuild" "$@" "$dir"
  else
    echo "imgverify ${name_of[$dir]}" >&2
    "$ROOT/build/imgverify" "$@" --definition "$dir" "${name_of[$dir]}"
  fi
done
