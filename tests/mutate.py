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
rebuilt there, and the named tests run; the mutation is "killed" when they
fail, "SURVIVED" when they pass, "stale" when FIND is not in the file exactly
once, "no build" when the mutated code does not compile.  A table goes to
stdout (and to $MUTATE_REPORT, default build/mutate.md); the exit status is 1
when any mutation survived or is stale.
Usage: tests/mutate.py [NAME-REGEX]
       tests/mutate.py --check [ROOT]   (only: is any mutation stale?)"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = {"name", "file", "find", "replace", "suite", "tests"}


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


def scratch_copy():
    """The working tree (tracked and untracked, not ignored) plus the build
    outputs, so that each mutation rebuilds one object."""
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
    for so in ("_b12x_C.abi3.so", "libflashinfer_dcp.so"):
        p = os.path.join("images/dsv41-flash-b12x/native", so)
        if os.path.exists(os.path.join(ROOT, p)):
            shutil.copy2(os.path.join(ROOT, p), os.path.join(top, p))
    return top


def make(top, log):
    return subprocess.run(["make", "-j2", "all"], cwd=top, stdout=log, stderr=subprocess.STDOUT).returncode == 0


def run_tests(top, m, log, env):
    p = subprocess.run(["tests/run.sh", m["suite"], m["tests"]], cwd=top, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=env)
    out = p.stdout.decode("utf-8", "replace")
    log.write(out.encode())
    last = out.strip().splitlines()[-1] if out.strip() else ""
    ran = re.match(r"^(\d+) passed, (\d+) failed$", last)
    return p.returncode, last, ran


def main():
    if sys.argv[1:2] == ["--check"]:
        # Without building or running anything: does every block still
        # name code that is there?  (The harness suite runs this.)
        root = sys.argv[2] if len(sys.argv) > 2 else ROOT
        bad = stale(parse(os.path.join(root, "tests/mutations.txt")), root)
        for m, why in bad:
            print(f"mutate: stale: {m['name']} ({m['file']}): {why}", file=sys.stderr)
        sys.exit(1 if bad else 0)
    pick = re.compile(sys.argv[1] if len(sys.argv) > 1 else ".")
    muts = [m for m in parse(os.path.join(ROOT, "tests/mutations.txt")) if pick.search(m["name"])]
    report = os.environ.get("MUTATE_REPORT", os.path.join(ROOT, "build/mutate.md"))
    os.makedirs(os.path.dirname(report), exist_ok=True)
    logdir = report[:-3] + "-logs" if report.endswith(".md") else report + "-logs"
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    top = scratch_copy()
    rows = []
    try:
        with open(os.path.join(logdir, "00-baseline.log"), "wb") as log:
            if not make(top, log):
                sys.exit(f"mutate: the unmutated tree does not build (see {logdir}/00-baseline.log)")
        env = dict(os.environ, IB_TEST_SEED=os.path.join(top, ".seed-store"))
        # The tests' seed store (the stand-in base), built once by unmutated code.
        with open(os.path.join(logdir, "00-baseline.log"), "ab") as log:
            subprocess.run(["bash", "-c", "source tests/lib.sh; trap finish EXIT; set -e; "
                            "export IMGBUILD_STORE=$T_TOP/s; build_base"], cwd=top, env=env, stdout=log,
                           stderr=subprocess.STDOUT, check=True)
        for i, m in enumerate(muts, 1):
            path = os.path.join(top, m["file"])
            text = open(path).read()
            n = text.count(m["find"])
            t0 = time.time()
            result, detail = "stale", f"`find` occurs {n} times"
            if n == 1:
                with open(os.path.join(logdir, f"{i:02d}.log"), "wb") as log:
                    open(path, "w").write(text.replace(m["find"], m["replace"]))
                    try:
                        if not make(top, log):
                            result, detail = "no build", "the mutated code does not compile"
                        else:
                            rc, last, ran = run_tests(top, m, log, env)
                            if ran and int(ran.group(1)) + int(ran.group(2)) == 0:
                                result, detail = "stale", "no test matched"
                            elif rc != 0:
                                result, detail = "killed", last
                            else:
                                result, detail = "SURVIVED", last
                    finally:
                        open(path, "w").write(text)
            rows.append((i, m, result, detail, time.time() - t0))
            print(f"{i:2d} {result:8s} {m['name']} ({detail}; {time.time() - t0:.0f}s)", flush=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    with open(report, "w") as f:
        f.write("| # | mutation | file | tests | result |\n| --- | --- | --- | --- | --- |\n")
        for i, m, result, detail, secs in rows:
            f.write(f"| {i} | {m['name']} | `{m['file']}` | {m['suite']}: `{m['tests']}` | {result} ({detail}) |\n")
    killed = sum(r[2] == "killed" for r in rows)
    print(f"mutate: {len(rows)} mutations, {killed} killed, "
          f"{sum(r[2] == 'SURVIVED' for r in rows)} survived, {sum(r[2] == 'stale' for r in rows)} stale, "
          f"{sum(r[2] == 'no build' for r in rows)} did not build; table in {report}")
    sys.exit(0 if killed == len(rows) else 1)


if __name__ == "__main__":
    main()
