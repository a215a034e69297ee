#!/usr/bin/env bash
# The whole test suite: unit tests, then the integration suites, which start
# the real services they need.  Last line: "N passed, N failed".
# Usage: tests/run.sh [SUITE-REGEX [TEST-REGEX]]   (TEST-REGEX picks the
# suites' t_* functions and, the suite `unit` matched, the unit tests)
# Tests named tall_* are the long tier (real Debian bases, minutes each):
# they run with IMGBUILD_TEST_ALL=1, which `make test-all` sets.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
trap finish EXIT

suite_re=${1:-.}
test_re=${2:-.}
if [[ unit =~ $suite_re ]]; then
  # TEST-REGEX picks unit tests as it picks the suites' t_* functions.
  out=$("$ROOT/${IB_BUILD:-build}/unit-tests" "$test_re" 2>&1)
  echo "$out" | grep -v ' passed, .* failed$'
  p=$(echo "$out" | tail -1 | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  f=$(echo "$out" | tail -1 | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  T_PASS=$((T_PASS + ${p:-0}))
  T_FAIL=$((T_FAIL + ${f:-1}))
fi
for suite in tests/integration/*.sh; do
  [[ $(basename "$suite" .sh) =~ $suite_re ]] || continue
  source "$suite"
  tier='^t_'
  [ "${IMGBUILD_TEST_ALL:-0}" = 1 ] && tier='^(t|tall)_'
  for t in $(declare -F | awk '{print $3}' | grep -E "$tier" | sort); do
    [[ $t =~ $test_re ]] && run_test "$t"
    unset -f "$t"
  done
  for t in $(declare -F | awk '{print $3}' | grep '^tall_'); do unset -f "$t"; done
done
[ "$T_SKIP" = 0 ] || echo "$T_SKIP skipped (not counted as passed)"
echo "$T_PASS passed, $T_FAIL failed"
[ "$T_FAIL" = 0 ]
