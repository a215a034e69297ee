#!/usr/bin/env bash
# On the GPU machine (issue 15): imgverify's entry counts and JIT budget
# against NVIDIA's cuobjdump on the machine's own NCCL and cuBLASLt, and
# imgverify's peak RSS on each.  Usage: jit-budget.sh DIR (imgverify and
# the shared libraries it needs, from prepare-jit.sh) OUT-DIR
set -u
D=$1
O=$2
export LD_LIBRARY_PATH=$D/lib
IV=$D/imgverify
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
{
  nvidia-smi -L
  echo "cuobjdump: $CUOBJDUMP"
  "$CUOBJDUMP" --version
  uname -a
} >"$O/env.txt" 2>&1
files=$(ls /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/lib/x86_64-linux-gnu/libcublasLt.so* \
  /usr/local/cuda*/lib*/libnccl.so* /usr/local/cuda*/lib*/libcublasLt.so* \
  /usr/local/cuda*/targets/*/lib/libcublasLt.so* /usr/local/lib/python3*/dist-packages/nvidia/*/lib/lib{nccl,cublasLt}.so* 2>/dev/null |
  xargs -r -n1 readlink -f | sort -u | head -8)
# Peak RSS of a command, in KiB: /usr/bin/time when there is one, else
# Python's getrusage of the child.
peak() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1
  else
    python3 -c 'import resource,subprocess,sys; subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
  fi
}
printf '%-60s %8s %8s %8s %8s %8s %8s %8s %8s %9s\n' file cuobj_elf ours_sass cuobj_ptx ours_ptx reloc budget_sass budget_ptx jit rss_kib >"$O/counts.txt"
for f in $files; do
  "$CUOBJDUMP" --list-elf "$f" >elf.txt 2>&1
  "$CUOBJDUMP" --list-ptx "$f" >ptx.txt 2>&1
  { echo "== $f"; cat elf.txt ptx.txt; } >>"$O/cuobjdump-list.txt"
  "$IV" --kernels --json "$f" >k.json
  "$IV" --jit-budget --json "$f" >b.json
  { echo "== $f"; cat b.json; } >>"$O/jit-budget.json.txt"
  "$IV" --jit-budget "$f" >>"$O/jit-budget.txt" 2>&1
  n() { grep -oE "$1" "$2" | wc -l; }
  num() { grep -oE "\"$1\":[0-9]+" b.json | head -1 | cut -d: -f2; }
  printf '%-60s %8s %8s %8s %8s %8s %8s %8s %8s %9s\n' "$f" "$(grep -c '^ELF file' elf.txt)" \
    "$(n '"kind":"sass"[^}]*"relocatable":false' k.json)" "$(grep -c '^PTX file' ptx.txt)" \
    "$(n '"kind":"ptx"[^}]*"relocatable":false' k.json)" "$(n '"relocatable":true' k.json)" \
    "$(num sass_entries)" "$(num ptx_entries)" "$(num jit)" "$(peak "$IV" --kernels --json "$f")" >>"$O/counts.txt"
done
# (arch, kernel) pairs against cuobjdump --dump-elf-symbols.
python3 "$D/compare_cuobjdump.py" "$IV" $files >"$O/compare-pairs.txt" 2>&1
cat "$O/counts.txt" "$O/compare-pairs.txt"
