# The layout (issue 44): the card's components at the top, includes that
# name their file from the root and point one way, each object rebuilt when
# a header it reads changes and only then, a README in each component.
# tests/layout.py reads the tree; these tests hold it to the rule and show
# that the checker sees a breach.

LAYOUT=$ROOT/tests/layout.py

# What the root holds: the card's six (builder, layers, symbol-check,
# kernels, images, tests) and the Makefile, then cli, util, bench, scripts,
# docs and the usual files.
t_layout_root_holds_the_card_and_nothing_else() {
  git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || skip_test "not a git checkout"
  git -C "$ROOT" ls-tree --name-only HEAD | LC_ALL=C sort >root
  printf '%s\n' .ci .gitignore Makefile README.md bench builder cli docs images kernels layers scripts symbol-check \
    tests util | LC_ALL=C sort >want
  diff want root
}

t_layout_includes_point_down_the_component_order() {
  python3 "$LAYOUT" includes "$ROOT"
}

# A copy of the tree's C with one include that runs back up (layers/ into
# builder/), one across (kernels/ into symbol-check/) and one not from the
# root: the checker names each of them, and only them.
t_layout_checker_names_an_include_that_breaks_the_rule() {
  (cd "$ROOT" && git ls-files -- '*.c' '*.h' '*.cc' '*.def' | tar -cf - -T -) | tar -xf -
  python3 "$LAYOUT" includes .
  sed -i '1i #include "builder/core/build.h"' layers/store/store.c
  sed -i '1i #include "symbol-check/symgate.h"' kernels/kgate.c
  sed -i '1i #include "digest.h"' layers/store/store_gc.c
  refute python3 "$LAYOUT" includes . >out
  cat out
  [ "$(wc -l <out)" = 3 ]
  grep -q '^layers/store/store.c: #include "builder/core/build.h": layers/ may not include builder/' out
  grep -q '^kernels/kgate.c: #include "symbol-check/symgate.h": kernels/ and symbol-check/ never include' out
  grep -q '^layers/store/store_gc.c: #include "digest.h" does not name a file' out
}

# make -W HEADER -n: what a change to HEADER rebuilds.  The objects compiled
# are exactly the C files that read it (directly or through another header),
# a nested header's change rebuilds something, and a low header's rebuilds
# far less than the whole library.
rebuilt_by() { # HEADER
  make -C "$ROOT" -n -W "$1" BUILD="${IB_BUILD:-build}" all 2>/dev/null |
    grep -oE ' -c [^ ]+\.(c|cc) ' | awk '{print $2}' | LC_ALL=C sort -u
}
t_layout_header_change_rebuilds_exactly_its_includers() {
  [ -f "$ROOT/${IB_BUILD:-build}/libimgbuild.a" ] || skip_test "the tools are not built in ${IB_BUILD:-build}"
  # A build outside make's view (the qemu wrappers of make test-arm64) has no .d files.
  compgen -G "$ROOT/${IB_BUILD:-build}/obj/util/*.d" >/dev/null || skip_test "no .d files in ${IB_BUILD:-build}"
  make -C "$ROOT" -q BUILD="${IB_BUILD:-build}" "${IB_BUILD:-build}/libimgbuild.a" ||
    skip_test "${IB_BUILD:-build} is not up to date"
  local h
  for h in kernels/dcp2/dcp2_math.h layers/store/digest.h symbol-check/link-check/elfdyn.h util/strmap.h; do
    rebuilt_by "$h" >got
    (cd "$ROOT" && python3 "$LAYOUT" includers "$h") | grep -Ev '^(tests/fuzz|bench|kernels/dcp2/dcp2_smoke\.c)' >want
    log "$h: $(wc -l <got) objects"
    [ -s want ]
    diff want got
  done
  # The smoke program, built whole, is relinked for its header too.
  make -C "$ROOT" -n -W kernels/dcp2/dcp2_math.h BUILD="${IB_BUILD:-build}" all 2>/dev/null | grep -q 'dcp2_smoke\.c'
  # And a header nobody reads rebuilds nothing.
  [ -z "$(make -C "$ROOT" -n -W images/dsv41-flash-b12x/flashinfer/include/dcp_common.cuh BUILD="${IB_BUILD:-build}" \
    "${IB_BUILD:-build}/libimgbuild.a" 2>/dev/null | grep -e ' -c ')" ]
}

# Each component says what it owns and what it may include.
t_layout_each_component_has_its_readme() {
  local c
  for c in util layers symbol-check kernels builder cli; do
    [ -s "$ROOT/$c/README.md" ] || { log "$c/README.md is missing"; return 1; }
    grep -qi 'include' "$ROOT/$c/README.md"
  done
  [ -s "$ROOT/docs/conventions.md" ]
}
