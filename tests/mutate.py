#!/usr/bin/env python3
"""make mutate: deliberate small bugs, each of which some test must catch.

tests/mutations.txt lists them (blocks separated by blank lines):
    name: what the bug is
    file: path in the repository
    find: text that occurs exactly once in the file (no line numbers: other
          edits of the file must not move the mutation)
    replace: the text that replaces it
    suite: tests/run.sh SUITE-REGEX
    tests: tests/run.sh TEST-REGEX (the tests that should catch it)

Each mutation is applied in a scratch copy of the working tree (never in the
tree itself: an interrupted run leaves nothing mutated there), the tools are
rebuilt there (the copy starts from the tree's build/, and make rebuilds only
what the mutated file reaches; its objects are put back afterwards), and the
named tests run, split over --jobs runners of tests/run.sh at once.  Results:
  killed    one of the named tests failed (its "FAIL NAME" line, or the unit
            runner stopped inside it)
  SURVIVED  every named test ran and passed
  broken    the mutated code does not build, or what failed is no named test
            (another test, the harness, a runner that stopped outside a test),
            or every named test was skipped, or what failed is a named
            test that fails on the unmutated tree too (the baseline)
  stale     `find` is not in the file exactly once, or no test has the names
A table (mutation, file, tests, result, seconds) goes to the report, by
default tests/results/mutate-<commit>.md for a run of the whole list or of a
shard (build/mutate.md for a NAME-REGEX run; $MUTATE_REPORT overrides; each
mutation's log in build/mutate-logs/, $MUTATE_LOGS overrides).  A
shard's run merges into that file when it is of the same commit, so that the
shards of one commit make one table; the header says which shard ran when.
The exit status is 1 when any mutation of this run was not killed.
First the tests that the run's mutations name run once on the unmutated tree
(--no-baseline skips it): a test that fails there kills no mutation.
Usage: tests/mutate.py [--shard K/N] [--jobs J] [--list FILE] [--no-baseline] [NAME-REGEX]
       tests/mutate.py --check [ROOT]   (only: is any mutation stale?)
       tests/mutate.py --merge OUT IN... (shard tables of one commit into OUT)"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = {"name", "file", "find", "replace", "suite", "tests"}
RESULTS = ("killed", "SURVIVED", "broken", "stale")


def parse(path):
    muts, cur = [], {}
    for line in open(path).read().splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                missing = FIELDS - set(cur)
                if missing:
                    sys.exit(f"mutate: {cur.get('name', '?')}: missing {sorted(missing)}")
                muts.append(cur)
            cur = {}
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        # A block's values are one line each: a second line of code would
        # be read as a key of its own and dropped, and the mutation applied
        # would silently be its first line only.
        if key not in FIELDS:
            sys.exit(f"mutate: {path}: {cur.get('name', '?')}: `{line.strip()}` is no field "
                     f"(one of {', '.join(sorted(FIELDS))}; find and replace are one line each)")
        if key in cur:
            sys.exit(f"mutate: {path}: {cur.get('name', '?')}: `{key}` given twice")
        cur[key] = value[1:] if value.startswith(" ") else value
    return muts


def stale(muts, root):
    """The mutations whose `find` is not in their file exactly once: an
    edit of the file moved the code under them, and until the block follows
    it the mutation tests nothing."""
    out = []
    for m in muts:
        path = os.path.join(root, m["file"])
        n = open(path).read().count(m["find"]) if os.path.isfile(path) else -1
        if n != 1:
            out.append((m, "no such file" if n < 0 else f"`find` occurs {n} times"))
    return out


def shard_of(muts, k, n):
    """Mutation i (1-based, in the list's order) is shard ((i - 1) mod N) + 1:
    the same share for the same list on any machine, and neighbours (often
    of one suite) spread over the shards."""
    return [(i, m) for i, m in enumerate(muts, 1) if (i - 1) % n == k - 1]


# ---- which tests a mutation names --------------------------------------------

def suite_tests(root, all_tier=False):
    """{suite: [test, ...]} in the order tests/run.sh runs them: the unit
    tests as tests/unit/tests.def lists them, then each integration suite's
    functions (t_*, and tall_* in the long tier), sorted as run.sh sorts."""
    out = {"unit": re.findall(r"^T \((\w+)\)", open(os.path.join(root, "tests/unit/tests.def")).read(), re.M)}
    tier = r"(?:t|tall)_" if all_tier else r"t_"
    d = os.path.join(root, "tests/integration")
    for f in sorted(os.listdir(d)):
        if f.endswith(".sh"):
            names = re.findall(rf"^({tier}\w+)\s*\(\)", open(os.path.join(d, f)).read(), re.M)
            out[f[:-3]] = sorted(set(names), key=lambda s: s.encode())
    return out


def named_tests(m, tests):
    """[(suite, test)] that the mutation's suite and tests regexes pick."""
    s_re, t_re = re.compile(m["suite"]), re.compile(m["tests"])
    return [(s, t) for s, names in tests.items() if s_re.search(s) for t in names if t_re.search(t)]


def chunks(named, jobs):
    """The named tests dealt round-robin to at most JOBS runners; each runner
    gets [(suite, [test, ...])] in the order run.sh would run them."""
    share = [[] for _ in range(min(jobs, len(named)) or 1)]
    for i, st in enumerate(named):
        share[i % len(share)].append(st)
    out = []
    for part in share:
        by = {}
        for s, t in part:
            by.setdefault(s, []).append(t)
        out.append(list(by.items()))
    return out


# ---- the verdict ---------------------------------------------------------------

def failures(runs):
    """The (suite, test) that failed in RUNS (as classify reads them)."""
    out = set()
    for suite, asked, rc, text in runs:
        seen = {m.group(2): m.group(1) for m in re.finditer(r"^(ok|FAIL|skip) (\w+)(?::|$)", text, re.M)}
        unheard = [t for t in asked if t not in seen]
        out |= {(suite, t) for t, what in seen.items() if what == "FAIL"}
        if suite == "unit" and unheard:
            out.add((suite, unheard[0]))
    return out


def classify(built, runs, named, unsound=frozenset()):
    """RUNS: [(suite, [tests asked], rc, output)] of tests/run.sh; NAMED: the
    set of the mutation's (suite, test); UNSOUND: tests that fail on the
    unmutated tree too (the baseline), whose failure proves nothing.
    Returns (result, detail).  A mutation is killed only by a named test's
    failure: a FAIL line, or, for the unit runner (one process), the test it
    was in when it stopped without its summary line.  Any other failure
    makes it broken."""
    if not built:
        return "broken", "the mutated code does not build"
    named = set(named) - set(unsound)
    if unsound and not named:
        return "broken", "its tests fail unmutated too: " + ", ".join(sorted(t for _, t in unsound))
    failed, other, passed, skipped, harness = [], [], [], [], []
    for suite, asked, rc, out in runs:
        seen = {}
        for line in out.splitlines():
            hit = re.match(r"^(ok|FAIL|skip) (\w+)(:|$)", line)
            if hit:
                seen[hit.group(2)] = hit.group(1)
        summary = re.search(r"^(\d+) passed, (\d+) failed$", out.strip().splitlines()[-1] if out.strip() else "")
        unheard = [t for t in asked if t not in seen]
        if unheard and suite == "unit":
            # The unit runner stopped (a crash, an abort) inside the first
            # test it had not reported: that test failed.
            seen[unheard[0]] = "FAIL"
            unheard = unheard[1:]
        for t, what in seen.items():
            key = (suite, t)
            if what == "FAIL":
                (failed if key in named else other).append(t)
            elif what == "ok":
                passed.append(t)
            else:
                skipped.append(t)
        if unheard or (rc != 0 and not any(v == "FAIL" for v in seen.values())) or \
                (summary is None and suite != "unit"):
            harness.append(f"{suite}: run.sh exit {rc}" + (f", no result for {', '.join(unheard)}" if unheard else ""))
    if failed:
        return "killed", "failed: " + ", ".join(sorted(set(failed)))
    if other or harness:
        return "broken", "; ".join(([f"unnamed test failed: {', '.join(sorted(set(other)))}"] if other else [])
                                   + harness)
    if not passed and skipped:
        return "broken", "every named test was skipped: " + ", ".join(skipped)
    if not passed:
        return "stale", "no test matched"
    return "SURVIVED", f"{len(passed)} passed" + (f", {len(skipped)} skipped" if skipped else "")


# ---- the scratch tree -----------------------------------------------------------

def scratch_copy():
    """The working tree (tracked and untracked, not ignored) plus the build
    outputs, with their times: make there rebuilds nothing until a file
    changes."""
    top = tempfile.mkdtemp(prefix="ibmutate.")
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src, dst = os.path.join(ROOT, f), os.path.join(top, f)
        if not os.path.lexists(src):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    if os.path.isdir(os.path.join(ROOT, "build")):
        shutil.copytree(os.path.join(ROOT, "build"), os.path.join(top, "build"), symlinks=True,
                        ignore=shutil.ignore_patterns("mutate*"))
        # The objects that hold the tree's own path (IB_IMAGES_DIR, the
        # Makefile's $(CURDIR)/images) and the programs linked from them are
        # made again here: a copied imgbuild would read the definitions of
        # the tree, not the copy's (a definition by name and the same one by
        # the copy's path would be two definitions, with a record each).
        for f in files:
            if f.endswith(".c") and os.path.isfile(os.path.join(top, f)) \
                    and "IB_IMAGES_DIR" in open(os.path.join(top, f), errors="replace").read():
                for p in (f[:-2] + ".o", f[:-2] + ".d"):
                    if os.path.exists(os.path.join(top, "build/obj", p)):
                        os.unlink(os.path.join(top, "build/obj", p))
        for prog in ("imgbuild", "imgverify", "unit-tests"):
            if os.path.exists(os.path.join(top, "build", prog)):
                os.unlink(os.path.join(top, "build", prog))
    for so in ("_b12x_C.abi3.so", "libflashinfer_dcp.so"):
        p = os.path.join("images/dsv41-flash-b12x/native", so)
        if os.path.exists(os.path.join(ROOT, p)):
            shutil.copy2(os.path.join(ROOT, p), os.path.join(top, p))
    return top


def make(top, log):
    return subprocess.run(["make", "-j2", "all"], cwd=top, stdout=log, stderr=subprocess.STDOUT).returncode == 0


def snapshot(build):
    out = {}
    for d, _, files in os.walk(build):
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            out[os.path.relpath(p, build)] = (st.st_mtime_ns, st.st_size)
    return out


def put_back(build, pristine, snap):
    """The build outputs as they were before the mutation: the objects it
    rebuilt are copied back (with their times) instead of compiled again."""
    now = snapshot(build)
    for rel, st in now.items():
        if rel not in snap:
            os.unlink(os.path.join(build, rel))
        elif st != snap[rel]:
            shutil.copy2(os.path.join(pristine, rel), os.path.join(build, rel))
    for rel in set(snap) - set(now):
        os.makedirs(os.path.dirname(os.path.join(build, rel)), exist_ok=True)
        shutil.copy2(os.path.join(pristine, rel), os.path.join(build, rel))


def test_timeout():
    """Seconds a runner of the named tests may take (MUTATE_TEST_TIMEOUT,
    default 900): a mutation can make a program wait forever (a pull whose
    lister never lists the layer it waits for), and the run must go on."""
    return float(os.environ.get("MUTATE_TEST_TIMEOUT", "900"))


def run_tests(top, plan, env, log, limit=None):
    """Each runner of PLAN is one tests/run.sh per suite, the runners at
    once, each in its own process group.  A runner past LIMIT seconds
    (a mutation's runs: test_timeout(); the baseline, every named test of
    the list on unmutated code, has none) is killed with its group: the
    test it was in failed ("timed out"), which kills the mutation when that
    test is named for it."""
    procs = []
    limit = limit or float("inf")
    for part in plan:
        script = []
        for suite, names in part:
            script.append(f"tests/run.sh '^{suite}$' '^({'|'.join(names)})$'; echo \"@@rc $?\"")
        procs.append((part, subprocess.Popen(["bash", "-c", "; ".join(script)], cwd=top, env=env,
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             start_new_session=True)))
    deadline = time.monotonic() + limit
    runs = []
    for part, p in procs:
        try:
            left = deadline - time.monotonic()
            out = p.communicate(timeout=max(0.1, left) if left != float("inf") else None)[0]
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out = p.communicate()[0]
            timed_out = True
        out = out.decode("utf-8", "replace")
        log.write(out.encode())
        pieces = re.split(r"^@@rc (\d+)$\n?", out, flags=re.M)
        done = (len(pieces) - 1) // 2
        for (suite, names), i in zip(part, range(0, len(pieces) - 1, 2)):
            runs.append((suite, names, int(pieces[i + 1]), pieces[i]))
        if timed_out:
            # The suite it stopped in: its first test without a verdict hung.
            for k, (suite, names) in enumerate(part[done:]):
                text = pieces[-1] if k == 0 else ""
                heard = set(re.findall(r"^(?:ok|FAIL|skip) (\w+)", text, re.M))
                hung = next((n for n in names if n not in heard), None) if k == 0 else None
                if hung:
                    text += f"FAIL {hung}: timed out after {limit:g} s\n"
                runs.append((suite, names, 124, text))
    return runs


def seed_store(top, env, log):
    """The integration tests' seed store (the stand-in base), built once by
    unmutated code, the first time a mutation needs a suite."""
    subprocess.run(["bash", "-c", "source tests/lib.sh; trap finish EXIT; set -e; "
                    "export IMGBUILD_STORE=$T_TOP/s; build_base"], cwd=top, env=env, stdout=log,
                   stderr=subprocess.STDOUT, check=True)


def try_one(top, m, tests, jobs, env, log, unsound=frozenset()):
    path = os.path.join(top, m["file"])
    if not os.path.isfile(path):
        return "stale", "no such file"
    text = open(path).read()
    n = text.count(m["find"])
    if n != 1:
        return "stale", f"`find` occurs {n} times"
    named = named_tests(m, tests)
    if not named:
        return "stale", "no test matched"
    unsound = set(named) & set(unsound)
    st = os.stat(path)
    open(path, "w").write(text.replace(m["find"], m["replace"]))
    try:
        if not make(top, log):
            return classify(False, [], set(named))
        return classify(True, run_tests(top, chunks(named, jobs), env, log, test_timeout()), set(named), unsound)
    finally:
        open(path, "w").write(text)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# ---- the table -------------------------------------------------------------------

def cell(s):
    return str(s).replace("|", "\\|")


def read_table(path):
    """(commit, [run lines], {index: row cells}) of a table this script wrote."""
    commit, runs, rows = None, [], {}
    for line in open(path).read().splitlines():
        if line.startswith("Commit: "):
            commit = line.split("`")[1]
        elif line.startswith("- run: "):
            runs.append(line)
        elif re.match(r"^\| \d+ \|", line):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[int(cells[0])] = cells
    return commit, runs, rows


def write_table(path, commit, total, runs, rows):
    counts = {r: sum(row[4] == r for row in rows.values()) for r in RESULTS}
    with open(path + ".tmp", "w") as f:
        f.write(f"# make mutate: tests/mutations.txt on `{commit}`\n\nCommit: `{commit}`\n\n")
        f.write(f"{len(rows)} of {total} mutations run: "
                + ", ".join(f"{counts[r]} {r.lower()}" for r in RESULTS) + ".\n\n")
        f.write("Runs (tests/mutate.py; a shard K/N is the mutations i with (i - 1) mod N = K - 1):\n\n")
        f.writelines(r + "\n" for r in runs)
        f.write("\n| # | mutation | file | tests (suite: regex) | result | detail | seconds |\n"
                "| --- | --- | --- | --- | --- | --- | --- |\n")
        for i in sorted(rows):
            f.write("| " + " | ".join(cell(c) for c in rows[i]) + " |\n")
    os.replace(path + ".tmp", path)


def merge(out, inputs):
    commit, runs, rows, total = None, [], {}, 0
    for p in inputs:
        c, r, w = read_table(p)
        if commit and c != commit:
            sys.exit(f"mutate: {p} is of commit {c}, not {commit}: shards of one commit only")
        commit = c
        runs += [x for x in r if x not in runs]
        rows.update(w)
        total = max(total, int(re.search(r"of (\d+) mutations", open(p).read()).group(1)))
    write_table(out, commit, total, runs, rows)


def commit_of(root):
    head = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("-dirty" if dirty else "")


def report_run(a, k, n, muts, rows, commit, start, t_start, unsound, over):
    """The table's line for this run: what ran, on which commit, how long."""
    what = (f"shard {k}/{n}" if n > 1 else "the whole list") + (f", names matching `{a.pick}`" if a.pick else "")
    done = f"{len(rows)} mutations" if over else f"{len(rows)} of {len(muts)} mutations so far (not over)"
    return (f"- run: {what} ({done}) on `{commit}`, started {start}, "
            f"{(time.time() - t_start) / 60:.0f} min, --jobs {a.jobs}, "
            + (f"baseline: {len(unsound)} named tests failed unmutated" if a.baseline else "no baseline"))


def save_report(report, commit, total, run, rows):
    """This run's rows into REPORT, merged with those of other runs (shards)
    of the same commit that it holds; this run's line replaces the one an
    earlier save of the same run wrote."""
    runs, merged = [run], dict(rows)
    if os.path.exists(report):
        c, old_runs, old_rows = read_table(report)
        if c == commit:
            key = run.split(" (")[0]
            runs = [r for r in old_runs if r.split(" (")[0] != key] + runs
            merged = {**old_rows, **rows}
    write_table(report, commit, total, runs, merged)


def main():
    if sys.argv[1:2] == ["--check"]:
        # Without building or running anything: does every block still
        # name code that is there?  (The harness suite runs this.)
        root = sys.argv[2] if len(sys.argv) > 2 else ROOT
        bad = stale(parse(os.path.join(root, "tests/mutations.txt")), root)
        for m, why in bad:
            print(f"mutate: stale: {m['name']} ({m['file']}): {why}", file=sys.stderr)
        sys.exit(1 if bad else 0)
    if sys.argv[1:2] == ["--merge"]:
        merge(sys.argv[2], sys.argv[3:])
        sys.exit(0)
    ap = argparse.ArgumentParser(usage=__doc__.split("Usage: ")[1])
    ap.add_argument("--shard", default="1/1")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", "2")))
    ap.add_argument("--list", default=os.path.join(ROOT, "tests/mutations.txt"))
    ap.add_argument("--no-baseline", dest="baseline", action="store_false",
                    help="skip running the named tests once on the unmutated tree")
    ap.add_argument("pick", nargs="?")
    a = ap.parse_args()
    k, _, n = a.shard.partition("/")
    k, n = int(k), int(n or 0)
    if not 1 <= k <= n:
        sys.exit(f"mutate: --shard K/N with 1 <= K <= N, not {a.shard}")
    every = parse(a.list)
    muts = [(i, m) for i, m in shard_of(every, k, n) if not a.pick or re.search(a.pick, m["name"])]
    commit = commit_of(ROOT)
    default = os.path.join(ROOT, "build/mutate.md" if a.pick else f"tests/results/mutate-{commit}.md")
    report = os.environ.get("MUTATE_REPORT", default)
    os.makedirs(os.path.dirname(os.path.abspath(report)), exist_ok=True)
    logdir = os.environ.get("MUTATE_LOGS", os.path.join(ROOT, "build", "mutate-logs"))
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    tests = suite_tests(ROOT, os.environ.get("IMGBUILD_TEST_ALL") == "1")
    start, t_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.time()
    top = scratch_copy()
    rows = {}
    try:
        with open(os.path.join(logdir, "00-baseline.log"), "wb") as log:
            if not make(top, log):
                sys.exit(f"mutate: the unmutated tree does not build (see {logdir}/00-baseline.log)")
        build, pristine = os.path.join(top, "build"), top + ".pristine"
        shutil.copytree(build, pristine, symlinks=True)
        snap = snapshot(build)
        # A mutant's run is no record of the tree (tests/lib.sh, IB_RESULTS):
        # run from a test of `make test-all`, it would write over the record.
        env = {k: v for k, v in os.environ.items() if k not in ("IB_RESULTS", "IB_RESULTS_PHASE")}
        env["IB_TEST_SEED"] = os.path.join(top, ".seed-store")
        seeded = False
        unsound = set()
        if a.baseline:
            # Every test some mutation of this run names, once, unmutated:
            # one that fails here kills nothing.
            every_named = sorted({st for _, m in muts for st in named_tests(m, tests)})
            t0 = time.time()
            with open(os.path.join(logdir, "00-baseline.log"), "ab") as log:
                if any(s != "unit" for s, _ in every_named):
                    seed_store(top, env, log)
                    seeded = True
                unsound = failures(run_tests(top, chunks(every_named, a.jobs), env, log))
            put_back(build, pristine, snap)
            print(f"  baseline: {len(every_named)} tests unmutated, {len(unsound)} failed"
                  + (": " + ", ".join(sorted(t for _, t in unsound)) if unsound else "")
                  + f" ({time.time() - t0:.0f}s)", flush=True)
        for i, m in muts:
            t0 = time.time()
            with open(os.path.join(logdir, f"{i:03d}.log"), "wb") as log:
                if not seeded and any(s != "unit" for s, _ in named_tests(m, tests)):
                    seed_store(top, env, log)
                    seeded = True
                try:
                    result, detail = try_one(top, m, tests, a.jobs, env, log, unsound)
                finally:
                    put_back(build, pristine, snap)
            secs = time.time() - t0
            rows[i] = [str(i), m["name"], f"`{m['file']}`", f"{m['suite']}: `{m['tests']}`", result, detail,
                       f"{secs:.0f}"]
            print(f"{i:3d} {result:8s} {m['name']} ({detail}; {secs:.0f}s)", flush=True)
            # Saved as it goes: a run stopped half-way leaves what it did.
            save_report(report, commit, len(every),
                        report_run(a, k, n, muts, rows, commit, start, t_start, unsound, False), rows)
    finally:
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(top + ".pristine", ignore_errors=True)
    save_report(report, commit, len(every), report_run(a, k, n, muts, rows, commit, start, t_start, unsound, True),
                rows)
    counts = {r: sum(row[4] == r for row in rows.values()) for r in RESULTS}
    print(f"mutate: {len(rows)} mutations, " + ", ".join(f"{counts[r]} {r.lower()}" for r in RESULTS)
          + f"; table in {report}")
    sys.exit(0 if counts["killed"] == len(rows) else 1)


if __name__ == "__main__":
    main()
