#!/usr/bin/env bash
# What a first-use JIT of torch's PTX costs (issue 46: the JIT budget's
# estimate wants a rate measured, not guessed): the whole PTX entries of
# the sample that tests/gpu/prepare-cuobj-carry.sh carries (10 of the 341
# compute_90 entries of Debian's libtorch_cuda.so 2.6, evenly spaced),
# extracted by cuobjdump and compiled by ptxas, as the driver's JIT does,
# for sm_90 (H200) and sm_121 (GB10), one at a time and all at once.
#   tests/gpu/ptx-jit-rate.sh CARRY OUT
# OUT/rates.tsv: arch, entry, PTX bytes, seconds; OUT/summary.txt: PTX bytes
# per second of one ptxas, and the wall time of all of them in parallel.
set -euo pipefail
C=$(readlink -f "$1") OUT=$2
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$OUT"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# (cuobjdump --dump-ptx, split per entry: -xptx all stopped after three)
cuobjdump --dump-ptx "$C/torch-ptx-sample.fatbin" | awk -v d="$T" '
  /^Fatbin ptx code:/ { n++; body = 0; next }
  n && !body && /^$/ { body = 1; next }
  n && body { print > sprintf("%s/entry%02d.ptx", d, n) }'
[ "$(ls "$T"/*.ptx | wc -l)" -ge 10 ] || { echo "cuobjdump gave $(ls "$T"/*.ptx | wc -l) PTX entries, not 10" >&2; exit 1; }
{ ptxas --version | tail -2; nproc; } >"$OUT/env.txt"
printf 'arch\tentry\tptx_bytes\tseconds\n' >"$OUT/rates.tsv"
for arch in sm_90 sm_121; do
  for p in "$T"/*.ptx; do
    t0=$(date +%s.%N)
    ptxas -arch="$arch" -O3 "$p" -o "$T/out.cubin" 2>>"$OUT/ptxas.err" || echo "ptxas failed on $(basename "$p") for $arch" >>"$OUT/ptxas.err"
    printf '%s\t%s\t%s\t%s\n' "$arch" "$(basename "$p")" "$(stat -c %s "$p")" \
      "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')" >>"$OUT/rates.tsv"
  done
  t0=$(date +%s.%N)
  for p in "$T"/*.ptx; do ptxas -arch="$arch" -O3 "$p" -o "$p.$arch.cubin" 2>/dev/null & done
  wait
  echo "$arch all $(ls "$T"/*.ptx | wc -l) in parallel: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s" >>"$OUT/summary.txt"
done
awk -F'\t' 'NR > 1 { b[$1] += $3; s[$1] += $4 } END { for (a in b) printf "%s one ptxas: %d PTX bytes in %.2f s = %.2f MB/s\n", a, b[a], s[a], b[a] / s[a] / 1e6 }' \
  "$OUT/rates.tsv" | sort >>"$OUT/summary.txt"
cat "$OUT/env.txt" "$OUT/summary.txt"
