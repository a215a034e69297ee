# The test runner itself: a test fails at its first failing command, even in
# the middle, and `refute` and `expect_fail` fail when they must.

t_harness_fails_a_test_at_its_first_failing_command() {
  out=$(cd "$ROOT" && bash -c '
    source tests/lib.sh
    mid() { false; true; }
    ref() { refute true; true; }
    code() { expect_fail 5 x sh -c "echo \"imgbuild: error: x\" >&2; exit 3"; true; }
    two() { expect_fail 3 x sh -c "echo \"imgbuild: error: x\" >&2; echo \"imgbuild: error: y\" >&2; exit 3"; true; }
    fine() { refute false; expect_fail 3 x sh -c "echo \"imgbuild: error: x\" >&2; exit 3"; }
    for t in mid ref code two fine; do run_test $t; done
    finish' 2>&1)
  echo "$out"
  [ "$(echo "$out" | grep -c '^FAIL')" = 4 ]
  echo "$out" | grep -qx 'ok fine'
}
