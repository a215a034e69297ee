#!/usr/bin/env bash
# Shared objects whose symbol tables together are far larger than the link
# gate's budget for whole records (linkgate.c), built here with gcc into DIR:
#   libbigI.so.1   I = 1..N: FUNCS exported functions each, with long
#                  C++-like names of their own (the names are the bulk of a
#                  record, as libtorch_cpu's are)
#   bigusers.so    needs every libbigI.so.1 and calls one function of each
# One object file of FUNCS functions is compiled once; each library is that
# object with its symbols renamed (objcopy --prefix-symbols), so N libraries
# cost N links, not N compilations.
# Usage: tests/native/biglibs.sh DIR N FUNCS
set -eu
d=$1 n=$2 funcs=$3
mkdir -p "$d/build"
cd "$d/build"
pad=_ZN5torch3jit6tensorexpr8analysis17BufferAccessBoundsInferenceVisitor
awk -v n="$funcs" -v pad="$pad" 'BEGIN { for (i = 0; i < n; i++) printf "int %s_f%d_Ev(void){return %d;}\n", pad, i, i }' >funcs.c
gcc -O0 -fPIC -c funcs.c -o funcs.o
users=
for i in $(seq 1 "$n"); do
  objcopy --prefix-symbols="b${i}" funcs.o "b$i.o"
  gcc -shared -Wl,-soname,"libbig$i.so.1" "b$i.o" -o "$d/libbig$i.so.1"
  users="$users extern int b${i}${pad}_f0_Ev(void);"
  calls="${calls:-0} + b${i}${pad}_f0_Ev()"
done
echo "$users int bigusers(void){return $calls;}" >users.c
gcc -O0 -fPIC -shared -Wl,--no-as-needed users.c -L"$d" $(for i in $(seq 1 "$n"); do echo "-l:libbig$i.so.1"; done) -o "$d/bigusers.so"
