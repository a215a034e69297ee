#!/usr/bin/env bash
# Shared objects that fail to link in ways the link gate must name, built
# here with gcc (and Debian's aarch64 cross compiler), into DIR:
#   liblinkbase.so.1      v1 of a library: base_old only
#   ext_newer.so          built against v2 (base_old, base_new): needs base_new
#   needs_absent.so       DT_NEEDED libabsent.so.7, which no image has
#   glibc_future.so       needs glibc_future_fn@GLIBC_2.99 of libc.so.6
#   arm64.so              an aarch64 object
#   x86.so                an x86-64 object that links (for the arm64 image)
#   libdup.so.1           the real one: dup_fn
#   early/libdup.so.1     a copy without dup_fn, earlier in user_dup.so's RUNPATH
#   user_dup.so           RUNPATH /opt/early, needs dup_fn of libdup.so.1
#   ok.so                 links: libm's cos, the base library's base_old
#   libver.so.1           defines versions VER_1 and VER_2, ver_fn only at VER_1
#   ver_user.so           built against a libver.so.1 with ver_fn at VER_2:
#                         the version is there, the symbol is not at it
# Usage: tests/native/plant.sh DIR
set -eu
d=$1
mkdir -p "$d/build" "$d/early"
cd "$d/build"
cc() { gcc -O1 -fPIC -shared -Wl,--no-as-needed "$@"; }

echo 'int base_old(void){return 1;}' >base1.c
printf 'int base_old(void){return 1;}\nint base_new(void){return 2;}\n' >base2.c
mkdir -p v2
cc -Wl,-soname,liblinkbase.so.1 base1.c -o "$d/liblinkbase.so.1"
cc -Wl,-soname,liblinkbase.so.1 base2.c -o v2/liblinkbase.so.1
ln -sf liblinkbase.so.1 v2/liblinkbase.so
echo 'extern int base_new(void); int ext(void){return base_new();}' >ext.c
cc ext.c -Lv2 -llinkbase -o "$d/ext_newer.so"

echo 'int absent_fn(void){return 0;}' >absent.c
cc -Wl,-soname,libabsent.so.7 absent.c -o libabsent.so
echo 'extern int absent_fn(void); int f(void){return absent_fn();}' >na.c
cc na.c -L. -labsent -o "$d/needs_absent.so"

# A stand-in libc.so.6 that defines GLIBC_2.99, linked against only.
echo 'GLIBC_2.99 { global: glibc_future_fn; };' >future.map
echo 'int glibc_future_fn(void){return 0;}' >future.c
mkdir -p fut
cc -Wl,-soname,libc.so.6 -Wl,--version-script=future.map -nostdlib future.c -o fut/libc.so.6
ln -sf libc.so.6 fut/libcfut.so
echo 'extern int glibc_future_fn(void); int g(void){return glibc_future_fn();}' >gf.c
cc gf.c -Lfut -lcfut -o "$d/glibc_future.so"

echo 'int arm(void){return 3;}' >arm.c
aarch64-linux-gnu-gcc -O1 -fPIC -shared arm.c -o "$d/arm64.so"
echo 'int x86(void){return 4;}' >x86.c
cc x86.c -o "$d/x86.so"

echo 'int dup_fn(void){return 5;}' >dup.c
echo 'int dup_other(void){return 6;}' >dup0.c
cc -Wl,-soname,libdup.so.1 dup.c -o "$d/libdup.so.1"
cc -Wl,-soname,libdup.so.1 dup0.c -o "$d/early/libdup.so.1"
ln -sf "$d/libdup.so.1" libdup.so
echo 'extern int dup_fn(void); int u(void){return dup_fn();}' >user.c
cc user.c -L. -ldup -Wl,--enable-new-dtags,-rpath,/opt/early -o "$d/user_dup.so"

echo 'int ver_fn(void){return 7;} int other_fn(void){return 8;}' >ver.c
echo 'VER_1 { global: ver_fn; }; VER_2 { global: other_fn; } VER_1;' >ver1.map
echo 'VER_1 { global: other_fn; }; VER_2 { global: ver_fn; } VER_1;' >ver2.map
mkdir -p ver2
cc -Wl,-soname,libver.so.1 -Wl,--version-script=ver1.map ver.c -o "$d/libver.so.1"
cc -Wl,-soname,libver.so.1 -Wl,--version-script=ver2.map ver.c -o ver2/libver.so.1
ln -sf libver.so.1 ver2/libver.so
echo 'extern int ver_fn(void); int vu(void){return ver_fn();}' >vu.c
cc vu.c -Lver2 -lver -o "$d/ver_user.so"

ln -sf "$d/liblinkbase.so.1" liblinkbase.so
echo '#include <math.h>
extern int base_old(void); double ok(double x){return cos(x)+base_old();}' >ok.c
cc ok.c -L. -llinkbase -lm -o "$d/ok.so"
rm -rf "$d/build"
