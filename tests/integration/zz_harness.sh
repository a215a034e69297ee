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

# A skipped test is neither a pass nor a failure, and says why.
t_harness_counts_a_skip_apart() {
  out=$(cd "$ROOT" && bash -c '
    source tests/lib.sh
    gpu() { skip_test "no reason at all"; false; }
    bare() { return 77; }
    run_test gpu; run_test bare
    echo "pass=$T_PASS fail=$T_FAIL skip=$T_SKIP"
    finish' 2>&1)
  echo "$out"
  echo "$out" | grep -qx 'skip gpu: no reason at all'
  # A bare 77 without a reason is a failure, not a quiet skip.
  echo "$out" | grep -qx 'FAIL bare'
  echo "$out" | grep -qx 'pass=0 fail=1 skip=1'
}

# No test asserts with an && list (tests/and_lists.py says why): the check
# finds none in the suites, and finds the one planted here.
t_harness_no_assertion_is_an_and_list() {
  # What it guards against: bash goes on past the failing first half.
  out=$(bash -c 'set -e; f() { [ 1 = 2 ] && [ 1 = 1 ]; echo reached; }; f')
  [ "$out" = reached ]
  python3 "$ROOT/tests/and_lists.py" "$ROOT"
  mkdir -p planted/tests/integration
  printf 't_x() {\n  [ "$n" -ge 3 ] && [ "$n" -le 4 ]\n  grep -q x f && rc=1\n  true\n}\n' >planted/tests/integration/x.sh
  rc=0
  python3 "$ROOT/tests/and_lists.py" planted >found.txt || rc=$?
  cat found.txt
  [ "$rc" = 1 ]
  [ "$(wc -l <found.txt)" = 1 ]
  grep -q '^tests/integration/x.sh:2: ' found.txt
}

# The mutation list parses whole (tests/mutate.py): every block has its six
# fields, each one line.  A second line of code in a `find:` was once read
# as a field of its own and dropped, so the mutation applied was its first
# line only; such a block is now refused, as is the planted one here.
t_harness_mutation_list_is_read_whole() {
  python3 -c 'import importlib.util, sys
s = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
print(len(m.parse(sys.argv[2])), "mutations")' "$ROOT/tests/mutate.py" "$ROOT/tests/mutations.txt"
  printf 'name: two lines\nfile: a.c\nfind: x = 1;\n  y = 2;\nreplace: x = 2;\nsuite: s\ntests: t\n' >planted.txt
  rc=0
  python3 -c 'import importlib.util, sys
s = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
m.parse(sys.argv[2])' "$ROOT/tests/mutate.py" planted.txt 2>err.txt || rc=$?
  cat err.txt
  [ "$rc" = 1 ]
  grep -q 'two lines: `y = 2;` is no field' err.txt
}

# No mutation is stale (tests/mutate.py --check): a block whose `find` an
# edit of its file has moved tests nothing, and four of them once sat so
# unnoticed until a full mutation run.  The check passes on the tree and
# names the one planted here.
t_harness_no_mutation_is_stale() {
  python3 "$ROOT/tests/mutate.py" --check "$ROOT"
  mkdir -p planted/tests planted/src
  printf 'int f (int x)\n{\n  return x + 1;\n}\n' >planted/src/a.c
  printf 'name: moved\nfile: src/a.c\nfind: return x + 2;\nreplace: return x;\nsuite: s\ntests: t\n' >planted/tests/mutations.txt
  printf '\nname: here\nfile: src/a.c\nfind: return x + 1;\nreplace: return x;\nsuite: s\ntests: t\n' >>planted/tests/mutations.txt
  rc=0
  python3 "$ROOT/tests/mutate.py" --check planted 2>err.txt || rc=$?
  cat err.txt
  [ "$rc" = 1 ]
  [ "$(wc -l <err.txt)" = 1 ]
  grep -q 'stale: moved (src/a.c): `find` occurs 0 times' err.txt
}

# The gate table of docs/gates.md names, beside each case, the test that
# covers it (issue 45): tests/gate_table.py holds it to the tests, so that
# it cannot name a test that is gone nor leave a case without one unsaid.
t_harness_gate_table_names_only_tests_that_exist() {
  python3 "$ROOT/tests/gate_table.py" | tee out.txt
  grep -Eq '^gate-table: 1[0-9] rows, [3-9][0-9] tests named, all of them exist$' out.txt
  # A test renamed away: named.
  sed 's/`t_shipped_libcuda`/`t_shipped_libcuda_gone`/' "$ROOT/docs/gates.md" >gone.md
  refute python3 "$ROOT/tests/gate_table.py" gone.md >out.txt
  grep -q 'test `t_shipped_libcuda_gone` does not exist' out.txt
  # A case whose test was dropped, without "no test yet": named.
  sed 's/ (`t_recipe_with_nothing_to_check_is_a_skip`)//' "$ROOT/docs/gates.md" >bare.md
  refute python3 "$ROOT/tests/gate_table.py" bare.md >out.txt
  grep -q '`recipe` skips: `no check of its files could run' out.txt
  # A unit test and a script are looked up where they live.
  sed 's/(`t_native_gate_passes_and_a_rebuild_reads_no_layer`)/(`unit:no_such_unit_test`, `tests\/gpu\/no-such.sh`)/' \
    "$ROOT/docs/gates.md" >unit.md
  refute python3 "$ROOT/tests/gate_table.py" unit.md >out.txt
  grep -q 'test `unit:no_such_unit_test` does not exist' out.txt
  grep -q 'test `tests/gpu/no-such.sh` does not exist' out.txt
}

# A mutation is killed only by a test named for it (tests/mutate.py): the
# same real bug (a kernels record's CRC not compared) is killed when its
# block names the unit test that catches it, and not when the block names
# a test that does not, although another test of the list would fail; a
# mutation that does not compile is broken.  The verdicts the runner's
# output can give (a failure of an unnamed test, a runner that stopped
# inside a test or outside any, skips, a named test that fails unmutated
# too) are each checked on that output.
t_harness_mutation_is_killed_only_by_its_named_test() {
  crc='find: get_le (end + 8, 4) == r->crc\nreplace: true\nsuite: ^unit$\n'
  printf "name: crc named\nfile: kernels/kindex.c\n$crc%s\n\n" 'tests: ^kernels_record_cut_damaged_or_old_reads_as_none$' >list.txt
  printf "name: crc unnamed\nfile: kernels/kindex.c\n$crc%s\n\n" 'tests: ^kernels_indexer_redoes_an_old_record$' >>list.txt
  printf 'name: no build\nfile: kernels/kindex.c\nfind: get_le (end + 8, 4) == r->crc\nreplace: no_such_name\nsuite: ^unit$\ntests: ^kernels_record_cut_damaged_or_old_reads_as_none$\n' >>list.txt
  rc=0
  MUTATE_REPORT=$PWD/table.md MUTATE_LOGS=$PWD/logs python3 "$ROOT/tests/mutate.py" --list list.txt >out.txt 2>&1 || rc=$?
  cat out.txt table.md
  [ "$rc" = 1 ]
  grep -q '^| 1 | crc named | .* | killed | failed: kernels_record_cut_damaged_or_old_reads_as_none |' table.md
  grep -q '^| 2 | crc unnamed | .* | SURVIVED | 1 passed |' table.md
  grep -q '^| 3 | no build | .* | broken | the mutated code does not build |' table.md
  grep -q '3 of 3 mutations run: 1 killed, 1 survived, 1 broken, 0 stale' table.md
  grep -q 'baseline: 2 tests unmutated, 0 failed' out.txt
  python3 - "$ROOT/tests/mutate.py" <<'PY'
import importlib.util, sys
s = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
named = {("core", "t_a"), ("unit", "u_a"), ("unit", "u_b")}
def verdict(*runs):
    return m.classify(True, list(runs), named)
cases = [
    # Another test of the suite failed, the named one passed: broken.
    (verdict(("core", ["t_a", "t_b"], 1, "ok t_a\nFAIL t_b\n    why\n1 passed, 1 failed\n")), "broken"),
    (verdict(("core", ["t_a"], 1, "FAIL t_a\n0 passed, 1 failed\n")), "killed"),
    (verdict(("core", ["t_a"], 0, "ok t_a\n1 passed, 0 failed\n")), "SURVIVED"),
    # The unit runner stopped inside u_b (a crash): u_b failed.
    (verdict(("unit", ["u_a", "u_b"], 1, "ok u_a\n1 passed, 1 failed\n")), "killed"),
    # run.sh itself died before its summary: the harness, not a test.
    (verdict(("core", ["t_a"], 2, "tests/lib.sh: line 9: x: unbound variable\n")), "broken"),
    (verdict(("core", ["t_a"], 0, "skip t_a: no GPU\n0 passed, 0 failed\n")), "broken"),
    (m.classify(False, [], named), "broken"),
    # The named test failed, but it fails unmutated too (the baseline).
    (m.classify(True, [("core", ["t_a"], 1, "FAIL t_a\n0 passed, 1 failed\n")], named, {("core", "t_a")}), "broken"),
    (m.classify(True, [("core", ["t_a"], 1, "FAIL t_a\n0 passed, 1 failed\n")], {("core", "t_a")},
                {("core", "t_a")}), "broken"),
]
for (got, detail), want in cases:
    print(got, "|", detail)
    assert got == want, (got, want, detail)
PY
}

# A mutation that makes a program wait forever (a pull whose lister never
# lists the layer the transfer waits on) must not stop the run: a runner
# past MUTATE_TEST_TIMEOUT is killed with its process group, and the test it
# was in failed, timed out, which kills the mutation when it is the named
# one (and is an unnamed failure otherwise).  The baseline (every named
# test of the list, unmutated, which takes longer than any one mutation's
# runs) has no limit: under one, its slowest runner was cut and a sound
# test counted as failing unmutated.
t_harness_mutation_that_hangs_is_killed_by_the_timeout() {
  mkdir -p top/tests
  printf '#!/bin/bash\necho "ok t_a"\nsleep 300 &\necho $! >"$(dirname "$0")/bg.pid"\nsleep 300\n' >top/tests/run.sh
  chmod +x top/tests/run.sh
  MUTATE_TEST_TIMEOUT=2 python3 - "$ROOT/tests/mutate.py" "$PWD/top" <<'PY'
import importlib.util, io, os, sys
s = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
runs = m.run_tests(sys.argv[2], [[("core", ["t_a", "t_hang"])]], dict(os.environ), io.BytesIO(), m.test_timeout())
assert runs == [("core", ["t_a", "t_hang"], 124, "ok t_a\nFAIL t_hang: timed out after 2 s\n")], runs
assert m.classify(True, runs, {("core", "t_hang")}) == ("killed", "failed: t_hang")
assert m.classify(True, runs, {("core", "t_a")})[0] == "broken"
PY
  # Its group went with it: nothing it started is left (a killed child is
  # reaped by init a moment later: a zombie until then).
  local bg
  bg=$(cat top/tests/bg.pid)
  for _ in $(seq 1 50); do
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.1
  done
  refute kill -0 "$bg" 2>/dev/null
}

# --shard K/N: the N shards of the list are disjoint and together the whole
# list; shard tables of one commit merge into one (its runs listed), and
# tables of two commits are refused.
t_harness_mutation_shards_merge_into_one_table() {
  python3 - "$ROOT/tests/mutate.py" "$ROOT/tests/mutations.txt" <<'PY'
import importlib.util, sys
s = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
muts = m.parse(sys.argv[2])
for n in (1, 3, 7):
    got = sorted(i for k in range(1, n + 1) for i, _ in m.shard_of(muts, k, n))
    assert got == list(range(1, len(muts) + 1)), n
row = lambda i, r: [str(i), f"mutation {i} | piped", "`a.c`", "^unit$: `x|y`", r, "detail", "1"]
m.write_table("one.md", "c0ffee", 3, ["- run: shard 1/2 (2 mutations) on `c0ffee`"], {1: row(1, "killed"), 3: row(3, "SURVIVED")})
m.write_table("two.md", "c0ffee", 3, ["- run: shard 2/2 (1 mutations) on `c0ffee`"], {2: row(2, "broken")})
m.write_table("other.md", "beef", 3, ["- run: shard 2/2 (1 mutations) on `beef`"], {2: row(2, "killed")})
m.merge("all.md", ["one.md", "two.md"])
commit, runs, rows = m.read_table("all.md")
assert commit == "c0ffee" and len(runs) == 2 and sorted(rows) == [1, 2, 3], (commit, runs, rows)
assert rows[1][1] == "mutation 1 | piped" and rows[2][4] == "broken"
text = open("all.md").read()
assert "3 of 3 mutations run: 1 killed, 1 survived, 1 broken, 0 stale." in text, text
try:
    m.merge("bad.md", ["one.md", "other.md"])
    raise AssertionError("tables of two commits merged")
except SystemExit as e:
    assert "shards of one commit only" in str(e), e
PY
}
