# link-check (issue 14): the native link gate, ld.so's view of an image.
# The t_ tests use small images made here (the host's glibc, Debian's
# aarch64 cross glibc, objects built with gcc); the tall_ tests (make
# test-all) use the real Debian base of scripts/real-base.sh and glibc's own
# ldd -r in a chroot of it as the oracle.

# A small base: the host's glibc (or Debian's arm64 cross glibc) laid out as
# Debian lays it out, merged /usr included (/lib -> usr/lib), an
# /etc/ld.so.conf that includes ld.so.conf.d/*.conf, /usr/local/lib there.
small_base() { # DIR amd64|arm64 NAME:TAG
  local dir=$1 arch=$2 name=$3 triplet src ld
  if [ "$arch" = amd64 ]; then
    triplet=x86_64-linux-gnu src=$(dirname "$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)") ld=ld-linux-x86-64.so.2
  else
    triplet=aarch64-linux-gnu src=/usr/aarch64-linux-gnu/lib ld=ld-linux-aarch64.so.1
  fi
  mkdir -p "$dir/files"
  for f in libc.so.6 libm.so.6 $ld; do cp "$(readlink -f "$src/$f")" "$dir/files/$f"; done
  echo 'include /etc/ld.so.conf.d/*.conf' >"$dir/files/ld.so.conf"
  printf '# libc default configuration\n/usr/local/lib\n' >"$dir/files/libc.conf"
  {
    printf '[image]\nname = %s\nfrom = scratch\nplatform = linux/%s\n[copy]\n' "$name" "$arch"
    for f in libc.so.6 libm.so.6 $ld; do echo "file files/$f /usr/lib/$triplet/$f"; done
    echo "symlink /lib usr/lib"
    [ "$arch" = amd64 ] && echo "symlink /lib64/$ld ../lib/$triplet/$ld"
    echo "file files/ld.so.conf /etc/ld.so.conf"
    echo "file files/libc.conf /etc/ld.so.conf.d/libc.conf"
    printf '[new]\n/\n'
  } >"$dir/image.conf"
  "$IB" -q "$dir" >/dev/null
}

# A definition over BASE with the planted objects FILES (names in plant/)
# under /usr/local/lib/planted, and the gate on with its defaults.
planted_def() { # DIR BASE NAME:TAG FILE...
  local dir=$1 base=$2 name=$3 f
  shift 3
  mkdir -p "$dir"
  {
    printf '[image]\nname = %s\nfrom = %s\n[copy]\n' "$name" "$base"
    for f in "$@"; do
      case $f in
        liblinkbase.so.1|libdup.so.1|libver.so.1) echo "file $PWD/plant/$f /usr/local/lib/$f" ;;
        early/libdup.so.1) echo "file $PWD/plant/$f /opt/early/libdup.so.1" ;;
        *) echo "file $PWD/plant/$f /usr/local/lib/planted/$f" ;;
      esac
    done
    printf '[new]\n/\n[native]\n'
  } >"$dir/image.conf"
}

t_native_planted_failures_are_each_named() {
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base amd64 small:1
  planted_def bad small:1 bad:1 ext_newer.so needs_absent.so glibc_future.so arm64.so user_dup.so \
    liblinkbase.so.1 libdup.so.1 early/libdup.so.1 ver_user.so libver.so.1
  expect_fail 5 'gate native: .*(and [0-9]+ more, listed above)' "$IB" bad
  local e=stderr.txt
  # The symbol at another version than the one asked for (the version
  # itself is there: VER_2 names other_fn).
  grep -q '/usr/local/lib/planted/ver_user.so: undefined symbol ver_fn@VER_2' $e
  # Built again, the link records come from their cache: the same verdicts.
  grep -E '^imgbuild: (native: (warning: )?/|error: )' $e | sort >first.txt
  expect_fail 5 'gate native: .*(and [0-9]+ more, listed above)' "$IB" bad
  grep -E '^imgbuild: (native: (warning: )?/|error: )' $e | sort >again.txt
  grep -q ' 0 files read in 0 layer passes' $e
  diff first.txt again.txt
  grep -q 'ver_fn@VER_2' again.txt
  # An extension built against a symbol the base's library lacks.
  grep -q '/usr/local/lib/planted/ext_newer.so: undefined symbol base_new (scope: 4 objects: /usr/local/lib/planted/ext_newer.so, liblinkbase.so.1, libc.so.6' $e
  # A DT_NEEDED on a soname the image does not have: who, and where it looked.
  grep -q '/usr/local/lib/planted/needs_absent.so: needs libabsent.so.7, which is not in the image (searched ld.so.conf /usr/local/lib; default /lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib:/usr/lib)' $e
  # A GLIBC_2.99-versioned reference.
  grep -Eq '/usr/local/lib/planted/glibc_future.so: version GLIBC_2.99 of libc.so.6 not found in /usr/lib/x86_64-linux-gnu/libc.so.6, which defines up to GLIBC_2\.[0-9]+' $e
  grep -q 'glibc_future.so: undefined symbol glibc_future_fn@GLIBC_2.99' $e
  # An aarch64 object in an x86-64 image.
  grep -q '/usr/local/lib/planted/arm64.so: an aarch64 object in an x86-64 image' $e
  # A second copy earlier in the search path that lacks the symbol.
  grep -q '/usr/local/lib/planted/user_dup.so: undefined symbol dup_fn (.*defined in /usr/local/lib/libdup.so.1, which this load does not bring in)' $e
  grep -q 'warning: /usr/local/lib/planted/user_dup.so: libdup.so.1 resolves to /opt/early/libdup.so.1; other copies later in its search path, not taken: /usr/local/lib/libdup.so.1' $e
  refute skopeo inspect "oci:$IMGBUILD_STORE:bad:1" >/dev/null 2>&1
  # imgverify --native says the same of the same objects, and as JSON.
  "$IB" -q base >/dev/null
  planted_def good small:1 good:1 ok.so liblinkbase.so.1
  "$IB" -q good >/dev/null
  "$IV" --native --json good:1 '/usr/local/lib/planted/*.so' >good.json
  jq -e '.objects | length == 1 and .[0].problems == [] and (.[0].loaded | map(.path) | index("/usr/local/lib/liblinkbase.so.1"))' good.json
  jq -e '.objects[0].objects[0].needs.GLIBC | startswith("GLIBC_2.")' good.json
}

# imgverify --native REF with no glob checks what the build's gate checks
# (the overlay's objects, wherever they are), not only dist-packages: an
# overlay's /usr/local/lib/libprobe.so that needs a library the image lacks
# fails it, named with what it needs, as glibc's ldd -r says in a chroot of
# the image.  An image with no provenance
# record is checked whole.
t_native_imgverify_without_glob_checks_what_the_build_checked() {
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base amd64 small:1
  mkdir -p probe
  printf '[image]\nname = probe:1\nfrom = small:1\n[copy]\nfile %s /usr/local/lib/libprobe.so\n[new]\n/\n' \
    "$PWD/plant/needs_absent.so" >probe/image.conf
  "$IB" -q probe >/dev/null
  umoci unpack --image "$IMGBUILD_STORE:probe:1" bundle >/dev/null
  # ldd -r is the image's loader with these three variables (no shell in
  # this image to run the ldd script): chroot and exec from Python.
  python3 -c 'import os, sys; os.chroot(sys.argv[1]); os.chdir("/"); os.execve("/lib64/ld-linux-x86-64.so.2", ["ld.so", sys.argv[2]], {"LD_TRACE_LOADED_OBJECTS": "1", "LD_WARN": "yes", "LD_BIND_NOW": "yes"})' \
    bundle/rootfs /usr/local/lib/libprobe.so >ldd.out 2>&1
  grep -q 'libabsent.so.7 => not found' ldd.out
  grep -q 'undefined symbol: absent_fn.*(/usr/local/lib/libprobe.so)' ldd.out
  local rc=0
  "$IV" --native probe:1 2>v.err || rc=$?
  [ "$rc" = 5 ]
  grep -q '^error: /usr/local/lib/libprobe.so: needs libabsent.so.7, which is not in the image' v.err
  grep -q '^error: /usr/local/lib/libprobe.so: undefined symbol absent_fn' v.err
  grep -q "^native: as $PWD/probe/image.conf's build checked: the objects of the layers from 1 on$" v.err
  # The glob names the same faults; the old default (extension modules
  # under dist-packages) passed over them.
  rc=0
  "$IV" --native probe:1 '/usr/local/lib/*.so' 2>glob.err || rc=$?
  [ "$rc" = 5 ]
  diff <(grep '^error:' v.err) <(grep '^error:' glob.err)
  "$IV" --native probe:1 '/*/dist-packages/*.so' '/*/site-packages/*.so' 2>old.err
  # With no record (the image copied without its attestations, into a store
  # that never saw it): every ELF object of the image, libprobe.so among them.
  skopeo copy -q "oci:$IMGBUILD_STORE:probe:1" oci:bare:probe >/dev/null
  rc=0
  IMGBUILD_STORE=$PWD/other "$IV" --native --json oci:bare:probe >bare.json 2>bare.err || rc=$?
  [ "$rc" = 5 ]
  diff <(grep '^error:' v.err) <(grep '^error:' bare.err)
  grep -q '^native: no provenance record: every ELF object of the image$' bare.err
  jq -e '.scope == "no provenance record: every ELF object of the image" and ([.objects[].path] | index("/usr/local/lib/libprobe.so") and index("/usr/lib/x86_64-linux-gnu/libm.so.6"))' bare.json
}

# Issue 45's rule for an image that no definition describes (imgverify
# with no provenance: every ELF object): a shared library is judged as the
# program that loads it finds it.  A plugin whose symbol its host defines
# (the oracle: that host dlopens it and calls it; ldd -r alone reports the
# symbol) is left to that program, one warning for the object, as is one
# whose symbol nothing in the image defines; the same plugin marked
# executable, an executable, and an extension module (its program is the
# interpreter) keep the strict verdict; --ldd stays ldd -r's.
t_native_every_object_leaves_a_plugin_to_the_program_that_loads_it() {
  small_base base amd64 small:1
  mkdir -p p
  cat >p/host.c <<'EOF2'
#include <dlfcn.h>
#include <stdio.h>
int host_fn (void) { return 42; }
int main (int argc, char **argv) {
  void *h = argc > 1 ? dlopen (argv[1], RTLD_NOW) : NULL;
  if (h == NULL) { fprintf (stderr, "%s\n", argc > 1 ? dlerror () : "usage: host PLUGIN"); return 1; }
  int (*f) (void) = (int (*) (void)) dlsym (h, "plugin_fn");
  printf ("%d\n", f ());
  return 0;
}
EOF2
  echo 'int host_fn (void); int plugin_fn (void) { return host_fn (); }' >p/plugin.c
  echo 'int lonely_fn (void); int plugin_fn (void) { return lonely_fn (); }' >p/lonely.c
  echo 'int ext_missing_fn (void); int PyInit_ext (void) { return ext_missing_fn (); }' >p/ext.c
  echo 'int nowhere_fn (void); int main (void) { return nowhere_fn (); }' >p/orphan.c
  gcc -rdynamic p/host.c -o p/host -ldl
  gcc -shared -fPIC p/plugin.c -o p/plugin.so
  gcc -shared -fPIC p/lonely.c -o p/lonely.so
  gcc -shared -fPIC p/ext.c -o p/ext.so
  # An executable whose library lost its symbol (linked against a copy that had it).
  echo 'int nowhere_fn (void) { return 0; }' >p/gone_full.c
  echo 'int other_fn (void) { return 0; }' >p/gone.c
  gcc -shared -fPIC -Wl,-soname,libgone.so.1 p/gone_full.c -o p/libgone.so.1
  gcc p/orphan.c -Lp -l:libgone.so.1 -o p/orphan
  gcc -shared -fPIC -Wl,-soname,libgone.so.1 p/gone.c -o p/libgone.so.1
  [ "$(p/host "$PWD/p/plugin.so")" = 42 ]
  ldd -r p/plugin.so 2>&1 | grep -q 'undefined symbol: host_fn'
  mkdir -p d
  {
    printf '[image]\nname = plug:1\nfrom = small:1\n[copy]\n'
    printf 'file %s /usr/local/bin/host\nfile %s /usr/local/bin/orphan\n' "$PWD/p/host" "$PWD/p/orphan"
    printf 'file %s /usr/local/lib/plugin.so mode=0644\n' "$PWD/p/plugin.so"
    printf 'file %s /usr/local/lib/lonely.so mode=0644\n' "$PWD/p/lonely.so"
    printf 'file %s /usr/local/lib/python3/dist-packages/ext.so mode=0644\n' "$PWD/p/ext.so"
    printf 'file %s /usr/local/lib/libgone.so.1 mode=0644\n' "$PWD/p/libgone.so.1"
    printf 'file %s /usr/local/lib/plugin_x.so mode=0755\n[new]\n/usr/local/\n' "$PWD/p/plugin.so"
  } >d/image.conf
  "$IB" -q d >/dev/null
  skopeo copy -q "oci:$IMGBUILD_STORE:plug:1" oci:bare:plug >/dev/null
  rc=0
  IMGBUILD_STORE=$PWD/other "$IV" --native --json oci:bare:plug >v.json 2>v.err || rc=$?
  [ "$rc" = 5 ]
  grep -q '^native: no provenance record: every ELF object of the image$' v.err
  grep -qF 'warning: /usr/local/lib/plugin.so: symbol host_fn unchecked: 1 symbol that its load does not define, left to the program that loads it (this one is defined in /usr/local/bin/host)' v.err
  grep -qF 'warning: /usr/local/lib/lonely.so: symbol lonely_fn unchecked: 1 symbol that its load does not define, left to the program that loads it (this one is defined nowhere in the image)' v.err
  refute grep -q '^error: /usr/local/lib/plugin.so\|^error: /usr/local/lib/lonely.so' v.err
  grep -q '^error: /usr/local/lib/plugin_x.so: undefined symbol host_fn (.*defined in /usr/local/bin/host, which this load does not bring in)' v.err
  grep -q '^error: /usr/local/bin/orphan: undefined symbol nowhere_fn' v.err
  # An extension module's program is known (the interpreter): what it
  # lacks, its import lacks; an error.
  grep -q '^error: /usr/local/lib/python3/dist-packages/ext.so: undefined symbol ext_missing_fn' v.err
  [ "$(grep -c '^error:' v.err)" = 3 ]
  jq -e '[.objects[] | select(.path == "/usr/local/lib/plugin.so") | .problems[] | .kind] == ["unchecked"]' v.json
  # --ldd: ldd -r's verdict, the plugin's symbol an error.
  rc=0
  IMGBUILD_STORE=$PWD/other "$IV" --native --ldd oci:bare:plug 2>ldd.err >/dev/null || rc=$?
  [ "$rc" = 5 ]
  grep -q '^error: /usr/local/lib/plugin.so: undefined symbol host_fn' ldd.err
}

# Issue 46: an undefined symbol that no relocation binds (a linker leaves
# one in .dynsym: libtorch_python.so's PyExc_FutureWarning) is never
# looked up by ld.so, and ldd -r does not report it: neither does the gate.
# The same object with its relocation is reported by both.
t_native_reports_only_symbols_a_relocation_binds() {
  small_base base amd64 small:1
  mkdir -p u
  echo 'extern int no_such_symbol_y; int g(void) { return no_such_symbol_y; }' >u/b.c
  gcc -shared -fPIC u/b.c -o u/bound.so
  cp u/bound.so u/unbound.so
  python3 "$ROOT/tests/native/unbind.py" u/unbound.so no_such_symbol_y
  readelf --dyn-syms -W u/unbound.so | grep -q ' UND no_such_symbol_y$'
  # The oracle: glibc's own ldd -r on each.
  ldd -r u/bound.so 2>&1 | grep -q 'undefined symbol: no_such_symbol_y'
  refute grep -q 'undefined symbol' <(ldd -r u/unbound.so 2>&1)
  mkdir -p d
  printf '[image]\nname = unbound:1\nfrom = small:1\n[copy]\nfile %s /opt/u/bound.so\nfile %s /opt/u/unbound.so\n[new]\n/opt/u/\n[native]\n' \
    "$PWD/u/bound.so" "$PWD/u/unbound.so" >d/image.conf
  rc=0
  "$IB" d 2>build.err >/dev/null || rc=$?
  [ "$rc" = 5 ]
  grep -q '/opt/u/bound.so: undefined symbol no_such_symbol_y' build.err
  refute grep -q '/opt/u/unbound.so: undefined symbol' build.err
  "$IV" --native --ldd --json unbound:1 '/opt/u/*.so' >u.json 2>/dev/null || true
  jq -e '[.objects[] | select(.path == "/opt/u/unbound.so") | .problems[]] == []' u.json
  jq -e '[.objects[] | select(.path == "/opt/u/bound.so") | .problems[] | select(.kind == "undefined")] | length == 1' u.json
}

# A base with an extension module in a Python package (pkg/ok.so, which
# needs libm's cos and liblinkbase.so.1's base_old) and, by default, that
# library in /usr/local/lib (else the planted FILE at DEST); and a
# definition over it that copies DATA as /etc/note.txt and checks the package.
module_base() { # [FILE DEST]
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base amd64 small:1
  mkdir -p mb
  printf '[image]\nname = mod:1\nfrom = small:1\n[copy]\nfile %s /usr/lib/python3/dist-packages/pkg/ok.so\nfile %s %s\n[new]\n/\n' \
    "$PWD/plant/ok.so" "$PWD/plant/${1:-liblinkbase.so.1}" "${2:-/usr/local/lib/liblinkbase.so.1}" >mb/image.conf
  "$IB" -q mb >/dev/null
}
note_def() { # DIR NAME:TAG TEXT [copy line...]
  local dir=$1 name=$2 text=$3
  shift 3
  mkdir -p "$dir"
  echo "$text" >"$dir/note.txt"
  {
    printf '[image]\nname = %s\nfrom = mod:1\n[copy]\nfile note.txt /etc/note.txt\n' "$name"
    for l in "$@"; do echo "$l"; done
    printf '[new]\n/\n[native]\npackage pkg\n'
  } >"$dir/image.conf"
}

# The verdict over the base is kept: a build whose overlay changes nothing
# the gate read (a data file) gets it again, without loading an object.
t_native_verdict_reused_when_the_overlay_changes_nothing_it_read() {
  module_base
  note_def a a:1 one
  "$IB" a 2>first.err >/dev/null
  grep -Eq 'native: 1 objects, [0-9]+ loaded, [1-9][0-9]* symbol references; 0 warnings.* cached$' first.err
  note_def b b:1 two
  "$IB" b 2>second.err >/dev/null
  grep -q 'gate native *pass' second.err
  grep -Eq 'native: 1 objects, [0-9]+ loaded, [1-9][0-9]* symbol references; 0 warnings.*; the verdict over the base, reused' second.err
  # The counts are the first build's.
  diff <(sed -n 's/^imgbuild: native: \([^;]*\);.*/\1/p' first.err) <(sed -n 's/^imgbuild: native: \([^;]*\);.*/\1/p' second.err)
  skopeo inspect "oci:$IMGBUILD_STORE:b:1" >/dev/null
}

# An overlay that changes what the gate read is checked in full and fails:
# a library it loaded, now a link to one without base_old; a path it
# looked up and found empty (libm.so.6 earlier in the search path), now a
# link to a libm without cos.  Neither entry is an object the gate would
# pick by itself (links, and files named like data).
t_native_verdict_not_reused_when_the_overlay_changes_a_read() {
  module_base
  note_def a a:1 one
  "$IB" -q a >/dev/null
  mkdir -p fake
  echo 'int other(void){return 0;}' >fake/o.c
  gcc -O1 -fPIC -shared -Wl,-soname,liblinkbase.so.1 fake/o.c -o fake/linkbase.bin
  gcc -O1 -fPIC -shared -Wl,-soname,libm.so.6 fake/o.c -o fake/m.bin
  chmod 644 fake/*.bin
  note_def d d:1 one "file $PWD/fake/m.bin /opt/fake/m.bin" "symlink /usr/local/lib/libm.so.6 /opt/fake/m.bin"
  expect_fail 5 'gate native' "$IB" d
  grep -q 'cos' stderr.txt
  refute grep -q 'the verdict over the base, reused' stderr.txt
  "$IB" -q -t a:2 a >/dev/null # a verdict over A's overlay again: C is compared with it alone
  note_def c c:1 one "file $PWD/fake/linkbase.bin /opt/fake/linkbase.bin" "symlink /usr/local/lib/liblinkbase.so.1 /opt/fake/linkbase.bin"
  expect_fail 5 'gate native' "$IB" c
  grep -q 'base_old' stderr.txt
  refute grep -q 'the verdict over the base, reused' stderr.txt
  refute skopeo inspect "oci:$IMGBUILD_STORE:c:1" >/dev/null 2>&1
  # The verdict kept is the last one, made over C's overlay: it does not
  # hold for an image without C's link either (one full check), whose own
  # verdict then serves the next.
  note_def e e:1 three
  "$IB" e 2>e.err >/dev/null
  grep -q 'gate native *pass' e.err
  refute grep -q 'the verdict over the base, reused' e.err
  note_def f f:1 four
  "$IB" f 2>f.err >/dev/null
  grep -q 'the verdict over the base, reused' f.err
  # An object the overlay adds is always checked.
  note_def g g:1 four "file $PWD/plant/needs_absent.so /usr/local/lib/planted/na.so"
  expect_fail 5 'gate native' "$IB" g
  grep -q 'libabsent.so.7' stderr.txt
}

# A failing verdict is kept as well, and said again, every problem.
t_native_failing_verdict_reused_in_full() {
  module_base needs_absent.so /usr/lib/python3/dist-packages/pkg/na.so
  note_def a a:1 one
  expect_fail 5 'gate native' "$IB" a
  grep '^imgbuild: native: /' stderr.txt | sort >first.problems
  grep -q 'libabsent.so.7' first.problems
  grep -q 'liblinkbase.so.1' first.problems
  note_def b b:1 two
  expect_fail 5 'gate native' "$IB" b
  grep -q 'the verdict over the base, reused' stderr.txt
  grep '^imgbuild: native: /' stderr.txt | sort >second.problems
  diff first.problems second.problems
}

# A kept verdict cut short or damaged is not used: the gate runs in full.
t_native_damaged_verdict_runs_the_gate_again() {
  module_base
  note_def a a:1 one
  "$IB" -q a >/dev/null
  local m
  m=$(ls "$IMGBUILD_STORE"/imgbuild/native-memo/*)
  [ "$(wc -l <"$m")" -gt 10 ]
  head -n 5 "$m" >cut && cat cut >"$m"
  note_def b b:1 two
  "$IB" b 2>b.err >/dev/null
  grep -Eq 'native: 1 objects, .* cached$' b.err
  # Written again whole, then one seen line damaged.
  grep -q '^end$' "$m"
  # (a mode that is no number, the line's fields otherwise whole)
  sed -i '0,/^s\t/s/^s\t\(.\)\t[0-7]*\t/s\t\1\tzz\t/' "$m"
  grep -qP '^s\t.\tzz\t' "$m"
  note_def c c:1 three
  "$IB" c 2>c.err >/dev/null
  grep -Eq 'native: 1 objects, .* cached$' c.err
  refute grep -q 'the verdict over the base, reused' c.err
}

# The whole ELF records (symbols included) that the gate holds are kept
# within a budget (symbol-check/link-check/reccache.h): evictions, the records read
# again from the store's cache, change no verdict, no problem and no
# order.  The planted failures, checked holding every record and holding
# none beyond the one or two a lookup needs (IMGBUILD_LINK_CACHE_KIB=0).
t_native_verdict_same_whatever_the_record_budget() {
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base amd64 small:1
  planted_def bad small:1 bad:1 ext_newer.so needs_absent.so glibc_future.so user_dup.so ok.so \
    liblinkbase.so.1 libdup.so.1 early/libdup.so.1 ver_user.so libver.so.1
  expect_fail 5 'gate native' "$IB" bad
  grep -E '^imgbuild: (native: (warning: )?/|error: )' stderr.txt >all.problems
  rm -rf "$IMGBUILD_STORE/imgbuild/native-memo"
  IMGBUILD_LINK_CACHE_KIB=0 expect_fail 5 'gate native' "$IB" bad
  grep -E '^imgbuild: (native: (warning: )?/|error: )' stderr.txt >none.problems
  diff all.problems none.problems
  grep -q 'undefined symbol' none.problems
  # Every object as ldd loads it, and as the image's Python would.
  for how in --ldd ""; do
    IMGBUILD_LINK_CACHE_KIB=1048576 "$IV" --native $how --json bad:1 '/usr/local/lib/*.so*' '/usr/local/lib/planted/*.so' \
      '/usr/lib/x86_64-linux-gnu/*.so*' >all.json || true
    IMGBUILD_LINK_CACHE_KIB=0 "$IV" --native $how --json bad:1 '/usr/local/lib/*.so*' '/usr/local/lib/planted/*.so' \
      '/usr/lib/x86_64-linux-gnu/*.so*' >none.json || true
    jq -e '.record_cache.evictions == 0' all.json
    jq -e '.record_cache.budget_kib == 0' none.json
    jq -e '.record_cache.loads > 0' none.json
    diff <(jq -S 'del(.record_cache)' all.json) <(jq -S 'del(.record_cache)' none.json)
    jq -e '[.objects[].problems[] | select(.kind == "undefined")] | length > 0' none.json
  done
}

# The gate's memory is bounded by its budget, not by the image's symbol
# tables: 60 libraries of 6000 exported functions with long names
# (360,000 definitions) and an object that loads them all.  Holding every
# record and a map of every name, the gate took imgverify to 77 MB; within
# the budget it peaks at 28 MB.
t_native_memory_bounded_by_the_record_budget() {
  "$ROOT/tests/native/biglibs.sh" "$PWD/big" 60 6000
  small_base base amd64 small:1
  mkdir -p bigdef
  {
    printf '[image]\nname = big:1\nfrom = small:1\n[copy]\n'
    for f in big/*.so*; do echo "file $PWD/$f /usr/local/lib/${f#big/}"; done
    printf '[new]\n/\n[native]\n'
  } >bigdef/image.conf
  "$IB" -q bigdef >/dev/null
  rm -rf "$IMGBUILD_STORE/imgbuild/native-memo"
  "$IV" big:1 --report json:rep.json 2>verify.err >/dev/null
  grep -Eq 'native: 61 objects, [0-9]+ loaded, [1-9][0-9]* symbol references; 0 warnings' verify.err
  jq -e '.gates[] | select(.name == "native") | .status == "pass"' rep.json
  local peak
  peak=$(jq -e '.resources.peak_rss_kib' rep.json)
  log "imgverify peak RSS: $peak KiB"
  # (not under the sanitizers, whose shadow memory is no figure of ours)
  [ -n "${IB_SANITIZE:-}" ] || [ "$peak" -lt $((48 * 1024)) ]
}

t_native_gate_passes_and_a_rebuild_reads_no_layer() {
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base amd64 small:1
  planted_def good small:1 good:1 ok.so liblinkbase.so.1
  "$IB" good 2>first.err >/dev/null
  grep -q 'gate native *pass' first.err
  grep -Eq 'native: 2 objects, [0-9]+ loaded, [1-9][0-9]* symbol references; 0 warnings.*; [1-9][0-9]* files read in [1-9][0-9]* layer passes' first.err
  # Warm, the overlay's objects picked again: every record from the cache
  # by content digest, no layer opened.
  echo changed >plant/ok.txt
  sed -i "s|^\[new\]|file $PWD/plant/ok.txt /etc/ok.txt\n[new]|" good/image.conf
  "$IB" -t good:2 good 2>second.err >/dev/null
  grep -Eq 'native: 2 objects, .* 0 files read in 0 layer passes, [1-9][0-9]* cached' second.err
  # The gate is recorded and imgverify runs it again from the provenance.
  "$IV" --json good:2 >v.json
  jq -e '.gates[] | select(.name == "native") | .status == "pass"' v.json
  validate v.json
}

t_native_arm64_image_checked_on_this_x86_machine() {
  "$ROOT/tests/native/plant.sh" "$PWD/plant"
  small_base base arm64 small-arm:1
  # An aarch64 object links against the arm64 glibc; an x86-64 one is named.
  mkdir -p p
  echo '#include <math.h>
double arm_ok(double x){return cos(x);}' >p/ok.c
  aarch64-linux-gnu-gcc -O1 -fPIC -shared -Wl,--no-as-needed p/ok.c -lm -o plant/arm_ok.so
  planted_def good small-arm:1 arm-good:1 arm_ok.so
  "$IB" good 2>good.err >/dev/null
  grep -q 'gate native *pass' good.err
  "$IV" --native --json arm-good:1 '/usr/local/lib/planted/*.so' >arm.json
  jq -e '.objects[0].loaded | map(.path) | index("/usr/lib/aarch64-linux-gnu/libm.so.6")' arm.json
  planted_def bad small-arm:1 arm-bad:1 arm_ok.so x86.so
  expect_fail 5 '/usr/local/lib/planted/x86.so: an x86-64 object in an aarch64 image' "$IB" bad
}

t_native_driver_library_is_injected_not_missing() {
  small_base base amd64 small:1
  mkdir -p plant
  # libcuda.so.1 comes from the container runtime: its absence is no error,
  # its cu* symbols are reported unchecked; cublasGemmEx is not the driver's.
  echo 'int cuInit(unsigned f){return (int)f;} int cuDriverGetVersion(int *v){*v=13000;return 0;}' >plant/cuda.c
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 plant/cuda.c -o plant/libcuda.so
  echo 'extern int cuInit(unsigned); int start(void){return cuInit(0);}' >plant/user.c
  gcc -shared -fPIC plant/user.c -Lplant -lcuda -o plant/uses_cuda.so
  echo 'extern int cuInit(unsigned); extern int cublasGemmEx(void); int g(void){return cuInit(0)+cublasGemmEx();}' >plant/blas.c
  gcc -shared -fPIC -Wl,--unresolved-symbols=ignore-all plant/blas.c -Lplant -lcuda -o plant/uses_cublas.so
  planted_def good small:1 cuda:1 uses_cuda.so
  "$IB" good 2>good.err >/dev/null
  grep -q 'gate native *pass' good.err
  grep -q 'warning: /usr/local/lib/planted/uses_cuda.so: symbol cuInit unchecked: left to the driver.s libcuda.so.1' good.err
  # With a declared driver, the symbols are checked against it.
  cp plant/libcuda.so good/libcuda.so.1
  printf 'driver libcuda.so.1\n' >>good/image.conf
  "$IB" -t cuda:2 good 2>driver.err >/dev/null
  refute grep -q 'warning:.*unchecked' driver.err
  planted_def bad small:1 cuda:3 uses_cublas.so
  expect_fail 5 'uses_cublas.so: undefined symbol cublasGemmEx' "$IB" bad
  # allow-undefined turns it into a note.
  printf 'allow-undefined cublas*\n' >>bad/image.conf
  "$IB" -t cuda:4 bad 2>allowed.err >/dev/null
  grep -Eq 'native: .* 1 allowed' allowed.err
}

# ld.so's order on planted chains, against glibc's own ld.so: an object with
# DT_RUNPATH ignores the DT_RPATH of the objects that loaded it (dl-load.c:
# "When the object has the RUNPATH information we don't use any RPATHs"),
# one without takes that of its loader chain.  Two libx.so.1, one in a/ (the
# chain's DT_RPATH) and one in b/ (the loader's DT_RUNPATH); every path is
# $ORIGIN-relative, so the host's ld.so --list of the tree and the gate on
# the image with the tree at /usr/local/lib/planted load the same copies.
t_native_rpath_and_runpath_chains_load_what_ld_so_loads() {
  small_base base amd64 small:1
  mkdir -p tree/a tree/b
  so() { gcc -O1 -fPIC -shared -Wl,--no-as-needed "$@"; }
  echo 'int x_a(void){return 1;}' >a.c
  echo 'int x_b(void){return 2;}' >b.c
  so -Wl,-soname,libx.so.1 a.c -o tree/a/libx.so.1
  so -Wl,-soname,libx.so.1 b.c -o tree/b/libx.so.1
  echo 'extern int x_b(void); int m1(void){return x_b();}' >m1.c
  echo 'extern int x_a(void); int m2(void){return x_a();}' >m2.c
  # mid_runpath.so: DT_RUNPATH $ORIGIN/b; mid_plain.so: no search path.
  so -Wl,--enable-new-dtags,-rpath,'$ORIGIN/b' m1.c -Ltree/b -l:libx.so.1 -o tree/mid_runpath.so
  so m2.c -Ltree/a -l:libx.so.1 -o tree/mid_plain.so
  # The tops: DT_RPATH $ORIGIN/a:$ORIGIN (old tags), one over each mid;
  # a third with DT_RUNPATH over mid_plain (a RUNPATH is not inherited).
  echo 'int top(void){return 0;}' >top.c
  so -Wl,--disable-new-dtags,-rpath,'$ORIGIN/a:$ORIGIN' -Wl,-rpath-link,tree/a:tree/b top.c -Ltree \
    -l:mid_runpath.so -o tree/top_over_runpath.so
  so -Wl,--disable-new-dtags,-rpath,'$ORIGIN/a:$ORIGIN' -Wl,-rpath-link,tree/a:tree/b top.c -Ltree \
    -l:mid_plain.so -o tree/top_over_plain.so
  so -Wl,--enable-new-dtags,-rpath,'$ORIGIN/a:$ORIGIN' -Wl,-rpath-link,tree/a:tree/b top.c -Ltree \
    -l:mid_plain.so -o tree/top_runpath_over_plain.so
  readelf -d tree/top_over_runpath.so | grep -q '(RPATH).*\$ORIGIN/a'
  readelf -d tree/mid_runpath.so | grep -q '(RUNPATH).*\$ORIGIN/b'
  mkdir -p def
  {
    printf '[image]\nname = chains:1\nfrom = small:1\n[copy]\n'
    for f in a/libx.so.1 b/libx.so.1 mid_runpath.so mid_plain.so top_over_runpath.so top_over_plain.so \
      top_runpath_over_plain.so; do
      echo "file $PWD/tree/$f /usr/local/lib/planted/$f"
    done
    printf '[new]\n/\n'
  } >def/image.conf
  "$IB" -q --smoke=off def >/dev/null
  "$IV" --native --json chains:1 '/usr/local/lib/planted/top_*.so' >gate.json || true
  local ld n=0
  ld=$(readlink -f /lib64/ld-linux-x86-64.so.2)
  for top in top_over_runpath top_over_plain top_runpath_over_plain; do
    # glibc's answer, as ldd asks it: the copies under the tree it loads
    # for this top, and the sonames it does not find.
    LD_TRACE_LOADED_OBJECTS=1 "$ld" "$PWD/tree/$top.so" >"$top.trace"
    { sed -n "s|.* => $PWD/tree/\(.*\) (0x.*|/usr/local/lib/planted/\1|p" "$top.trace"
      sed -n 's|^[[:space:]]*\([^ ]*\) => not found$|missing \1|p' "$top.trace"; } | sort >"$top.ld"
    jq -r --arg p "/usr/local/lib/planted/$top.so" '.objects[] | select(.path == $p) |
      (.loaded[].path | select(. != null and startswith("/usr/local/lib/planted/"))),
      (.problems[] | select(.kind == "missing") | "missing " + .name)' \
      gate.json | grep -vx "/usr/local/lib/planted/$top.so" | sort -u >"$top.gate"
    echo "$top: ld.so $(tr '\n' ' ' <"$top.ld"); gate $(tr '\n' ' ' <"$top.gate")"
    diff "$top.ld" "$top.gate"
    n=$((n + 1))
  done
  [ "$n" = 3 ]
  # What ld.so found, so that the comparison is of the cases meant.
  grep -qx /usr/local/lib/planted/b/libx.so.1 top_over_runpath.ld
  grep -qx /usr/local/lib/planted/a/libx.so.1 top_over_plain.ld
  grep -qx 'missing libx.so.1' top_runpath_over_plain.ld
}

# ---- the real base (make test-all) ------------------------------------------

real_base() { # ARCH: sets RB_ROOTFS, RB_REF
  local out
  out=$("$ROOT/scripts/real-base.sh" --arch "$1")
  RB_ROOTFS=$(echo "$out" | sed -n 's/^rootfs=//p')
  RB_REF=$(echo "$out" | sed -n 's/^ref=//p')
}

# Objects of the torch image as ldd sees them: torch's and scipy's
# extension modules, torch's libraries, and the system's libraries.
TORCH_GLOBS=('/usr/lib/python3/dist-packages/torch/*.so' '/usr/lib/python3/dist-packages/scipy/*.so'
             '/usr/lib/x86_64-linux-gnu/libtorch*.so*' '/usr/lib/x86_64-linux-gnu/*.so.*')

tall_native_equals_ldd_r_on_the_torch_image() {
  real_base amd64
  "$IV" --native --ldd --json "$RB_REF" "${TORCH_GLOBS[@]}" >ldd.json || true
  python3 "$ROOT/tests/native/compare_ldd.py" "$RB_ROOTFS" ldd.json | tee cmp.out
  grep -Eq '^native-ldd: ([0-9]+) objects, \1 equal, 0 differ' cmp.out
  n=$(sed -n 's/^native-ldd: \([0-9]*\) objects.*/\1/p' cmp.out)
  [ "$n" -ge 300 ]
  # Not vacuous: torch's extension modules are among them, loaded with libtorch.
  jq -e '[.objects[] | select(.path | test("torch/_C\\."))] | length == 1' ldd.json
  jq -e '[.objects[].loaded[].path] | map(select(. != null and test("libtorch_cpu"))) | length > 0' ldd.json
  keep cmp.out
  figure "$(grep '^native-ldd:' cmp.out) (torch image, --ldd, against glibc's ldd -r)"
}

# Named as extension modules: a glob of every '*.so' under dist-packages also
# takes torch/lib's links to /usr/lib/x86_64-linux-gnu, where
# libtorch_python.so is a library whose 251 Python symbols only the
# interpreter that loads torch._C gives (ldd -r reports them too).
tall_native_extension_modules_equal_ldd_minus_the_interpreter() {
  real_base amd64
  "$IV" --native --json "$RB_REF" '/usr/lib/python3/dist-packages/*.cpython-*.so' \
    '/usr/lib/python3/dist-packages/*.abi3.so' >py.json
  jq -e '[.objects[] | select(.loaded_as != "python")] == []' py.json
  jq -e '[.objects[] | select(.loaded_as == "python")] | length > 100' py.json
  python3 "$ROOT/tests/native/compare_ldd.py" "$RB_ROOTFS" py.json --python | tee cmp.out
  grep -Eq '^native-ldd: ([0-9]+) objects, \1 equal, 0 differ' cmp.out
  keep cmp.out
  figure "$(grep '^native-ldd:' cmp.out) (extension modules, against ldd -r less the interpreter's symbols)"
}

# Issue 45's rule on the real base with no provenance (every ELF object):
# an error only where the image's own loader refuses (ldd -r in a chroot
# names what the object lacks); the plugins, one warning each, left to the
# programs that load them, which do: python3 imports torch (whose
# libtorch_python.so takes 251 symbols from the interpreter), perl loads
# POSIX.so.  Before the rule: 1,275 errors over 36 objects.
tall_native_every_object_of_the_real_base_errs_only_where_its_loader_does() {
  real_base amd64
  rc=0
  IMGBUILD_STORE=$PWD/s "$IV" --native "$RB_REF" >/dev/null 2>v.err || rc=$?
  grep -q '^native: no provenance record: every ELF object of the image$' v.err
  grep -E '^(error|warning):' v.err | sed -E 's/^(error|warning): ([^:]*):.*/\1 \2/' | sort -u >objects.txt
  local kind o errs=0
  while read -r kind o; do
    [ "$kind" = error ] || continue
    errs=$((errs + 1))
    chroot "$RB_ROOTFS" ldd -r "$o" >"ldd.$errs" 2>&1 || true
    grep -Eq 'not found|undefined symbol' "ldd.$errs"
  done <objects.txt
  [ "$rc" = $((errs > 0 ? 5 : 0)) ]
  grep -Eq '^warning: /usr/lib/x86_64-linux-gnu/libtorch_python.so[.0-9]*: symbol Py[A-Za-z_]* unchecked: [0-9]+ symbols that its load does not define, left to the program that loads it \(this one is defined in /usr/bin/python3' v.err
  chroot "$RB_ROOTFS" python3 -c 'import torch' 2>/dev/null
  grep -q '^warning: /usr/lib/x86_64-linux-gnu/perl-base/auto/POSIX/POSIX.so: symbol .* unchecked' v.err
  [ "$(chroot "$RB_ROOTFS" perl -MPOSIX -e 'print POSIX::floor(1.5)')" = 1 ]
  keep v.err objects.txt
  figure "every ELF object of bookworm + python3-torch, no provenance: $(grep -c '^error ' objects.txt) objects in error, each refused by ldd -r in a chroot; $(grep -c '^warning ' objects.txt) objects with a warning, the plugins left to their programs (python3 imports torch, perl loads POSIX.so); $(grep '^native:' v.err | tail -1)"
}

tall_native_gate_passes_on_the_torch_image_and_is_warm() {
  real_base amd64
  mkdir -p d
  printf '[image]\nname = torch-native:1\nfrom = %s\n[copy]\nfile note.txt /etc/imgbuild-note\n[new]\n/etc/imgbuild-note\n[native]\npackage torch scipy\n' \
    "$RB_REF" >d/image.conf
  echo hello >d/note.txt
  "$IB" d 2>cold.err >/dev/null
  grep -q 'gate native *pass' cold.err
  grep -Eq 'native: [1-9][0-9]{2,} objects' cold.err
  echo hello again >d/note.txt
  "$IB" -t torch-native:2 d 2>warm.err >/dev/null
  grep -Eq 'native: [1-9][0-9]{2,} objects, .*; the verdict over the base, reused' warm.err
  figure "$(grep -Eo 'native: [0-9]+ objects[^;]*' cold.err | head -1) cold; warm: the verdict over the base reused"
}

tall_native_arm64_debian_packages() {
  real_base arm64
  "$IV" --native --json "$RB_REF" '/usr/lib/python3/dist-packages/*.so' '/usr/lib/aarch64-linux-gnu/*.so.*' >arm.json 2>arm.err || true
  jq -e '.objects | length > 300' arm.json
  # Every object is aarch64 and finds its libraries among Debian's arm64 files.
  jq -e '[.objects[].problems[] | select(.kind == "machine" or .kind == "missing")] == []' arm.json
  jq -e '[.objects[] | select(.path | test("torch/_C\\."))][0].loaded | map(.path) | map(select(. != null and test("aarch64-linux-gnu/libtorch_cpu"))) | length == 1' arm.json
  jq -e '.provides.GLIBC | startswith("GLIBC_2.")' arm.json
  figure "arm64 Debian packages: $(jq '.objects | length' arm.json) objects, none missing a library or of another machine"
}
