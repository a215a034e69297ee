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
if [ -n "${IB_RESULTS:-}" ]; then
  # The record of this run (tests/lib.sh, result_row): what ran, where.
  mkdir -p "$IB_RESULTS"
  : >"$IB_RESULTS/results-${IB_RESULTS_PHASE:-main}.tsv"
  printf 'phase %s: commit %s%s, tests/run.sh %q %q, IMGBUILD_TEST_ALL=%s IB_BUILD=%s, started %s, %s cores, %s\n' \
    "${IB_RESULTS_PHASE:-main}" "$(git rev-parse --short=12 HEAD)" "$(git diff --quiet HEAD -- . ':!tests/results' || echo ' (with uncommitted changes)')" \
    "$suite_re" "$test_re" "${IMGBUILD_TEST_ALL:-0}" "${IB_BUILD:-build}" "$(date -u '+%F %H:%M UTC')" "$(nproc)" "$(uname -srm)" \
    >>"$IB_RESULTS/runs.txt"
fi
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
print_slowest
[ "$T_SKIP" = 0 ] || echo "$T_SKIP skipped (not counted as passed)"
echo "$T_PASS passed, $T_FAIL failed"
if [ -n "${IB_RESULTS:-}" ]; then
  echo "phase ${IB_RESULTS_PHASE:-main}: $T_PASS passed, $T_FAIL failed, $T_SKIP skipped, ended $(date -u '+%F %H:%M UTC')" >>"$IB_RESULTS/runs.txt"
  python3 tests/results-summary.py "$IB_RESULTS"
fi
[ "$T_FAIL" = 0 ]
