# fuzz (issue 13): every libFuzzer harness runs briefly from its seed
# corpus, where the regression input of every crash found so far is kept;
# a crash, leak or sanitizer report fails the test.  The long campaigns are
# `make fuzz FUZZ_SECONDS=N`; this only keeps them from rotting.

# 5 s each in `make test` (every seed runs in well under a second; the 12
# harnesses took 3 of CI's minutes at 15 s), 15 s in `make test-all`.
FUZZ_TEST_SECONDS=${IB_FUZZ_TEST_SECONDS:-$([ "${IMGBUILD_TEST_ALL:-0}" = 1 ] && echo 15 || echo 5)}

fuzz_briefly() {
  IB_FUZZ_BUILD=$ROOT/${IB_FUZZ_BUILD:-build-fuzz} IB_FUZZ_WORK=$PWD "$ROOT/tests/fuzz/run.sh" "$FUZZ_TEST_SECONDS" "$1"
  # It ran, from the seeds: at least every seed was executed.
  local seeds execs
  seeds=$(find "$ROOT/tests/fuzz/corpus/$1" -type f | wc -l)
  execs=$(awk '{ print $4 }' executions)
  [ "$execs" -ge "$seeds" ]
}

for _n in $(ls "$ROOT/tests/fuzz/corpus"); do
  eval "t_fuzz_$_n() { fuzz_briefly $_n; }"
done
unset _n
