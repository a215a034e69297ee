#!/usr/bin/env bash
# Run the fuzz harnesses (all, or those named) for SECONDS each, from their
# seed corpus (tests/fuzz/corpus/NAME, read only) and a working corpus that
# grows across runs ($IB_FUZZ_WORK/corpus/NAME).  A crash, leak or
# sanitizer report stops that harness, keeps the input in
# $IB_FUZZ_WORK/artifacts/NAME/ and makes the exit status 1.  Every run
# appends "DATE NAME SECONDS EXECUTIONS RC" to $IB_FUZZ_WORK/executions;
# the last lines printed are the totals per harness over all runs.
# Usage: tests/fuzz/run.sh SECONDS [NAME...]   (make fuzz FUZZ_SECONDS=N)
set -u
cd "$(dirname "$0")/../.."
B=${IB_FUZZ_BUILD:-build-fuzz}
W=${IB_FUZZ_WORK:-$B}
secs=${1:-180}
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(ls tests/fuzz/corpus)
# ASan's default quarantine (256 MB of freed memory held back) makes each
# execution touch fresh pages: page faults were most of the time of the
# slower harnesses.  32 MB is far more than one execution of these inputs
# frees, so a use after free within an execution (or the next) still
# shows; measured on the seeds: 1.8 to 7 times the executions per second.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=32}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
fail=0
for n in "${names[@]}"; do
  bin=$B/fuzz/fuzz_$n
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin is not built (make SANITIZE=fuzz fuzzers)" >&2
    exit 8
  fi
  mkdir -p "$W/corpus/$n" "$W/artifacts/$n" "$W/logs"
  log=$W/logs/$n.log
  "$bin" -max_total_time="$secs" -timeout="${IB_FUZZ_TIMEOUT:-120}" -report_slow_units=60 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$W/artifacts/$n/" "$W/corpus/$n" "tests/fuzz/corpus/$n" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # Stopped without its final stats: the last status line's count.
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  echo "$(date -u +%FT%TZ) $n $secs ${execs:-0} $rc" >>"$W/executions"
  if [ "$rc" = 0 ]; then
    echo "fuzz $n: ${execs:-0} executions in ${secs}s, no crash"
  else
    fail=1
    echo "fuzz $n: FAILED (exit $rc) after ${execs:-0} executions; input in $W/artifacts/$n/"
    grep -E 'ERROR|runtime error|^fuzz:|SUMMARY|^    #[0-9] ' "$log" | head -20 | sed 's/^/    /'
  fi
done
awk '{ n[$2] += $4; if ($5 != 0) c[$2]++ } END { for (k in n) printf "total %s: %d executions, %d failed runs\n", k, n[k], c[k] }' \
  "$W/executions" | sort
exit $fail
