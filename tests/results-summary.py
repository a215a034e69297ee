#!/usr/bin/env python3
"""summary.md of a recorded run of the suite (make test-all sets IB_RESULTS).

tests/run.sh and tests/lib.sh leave in the record folder:
    runs.txt              a line when each phase starts and when it ends
    results-PHASE.tsv     a row per test: name, pass|fail|skip, seconds, reason
    TEST/figures.txt      the test's `figure` lines (what it measured)
    TEST/*                what it kept of its comparison (`keep`), and the
                          log of a failure (failed-PHASE.log)
The summary puts the long tier (tall_*: the comparisons with CPython,
ldd -r, dpkg-query, importlib.metadata, Slurm) first, with each test's
figures and kept files, then every phase's counts and its failures and
skips, so that a reader sees on which commit each claim was last true.
Usage: tests/results-summary.py DIR"""
import os
import sys


def rows(path):
    out = []
    for line in open(path).read().splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            out.append((f[0], f[1], int(f[2] or 0), f[3] if len(f) > 3 else ""))
    return out


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def main(d):
    phases = sorted(p[len("results-"):-len(".tsv")] for p in os.listdir(d)
                    if p.startswith("results-") and p.endswith(".tsv"))
    # main first: it holds the long tier.
    phases.sort(key=lambda p: (p != "main", p))
    runs = open(os.path.join(d, "runs.txt")).read().splitlines() if os.path.exists(os.path.join(d, "runs.txt")) else []
    commit = "?"
    for r in runs:
        if " commit " in r:
            commit = r.split(" commit ", 1)[1].split(",", 1)[0]
    md = [f"# The suite on record: `{commit}`", "",
          "Written by tests/results-summary.py from what tests/run.sh recorded "
          "(IB_RESULTS; `make test-all` sets it). Runs:", ""]
    md += [f"- {cell(r)}" for r in runs] + [""]
    data = {p: rows(os.path.join(d, f"results-{p}.tsv")) for p in phases}
    tall = [r for r in data.get("main", []) if r[0].startswith("tall_")]
    md += ["## The long tier: each comparison with the real tool", ""]
    if not tall:
        md += ["No tall_ test ran in this record.", ""]
    else:
        md += ["| test | result | seconds | figures | kept |", "| --- | --- | ---: | --- | --- |"]
        for name, res, secs, why in tall:
            tdir = os.path.join(d, name)
            figs = []
            kept = []
            if os.path.isdir(tdir):
                fp = os.path.join(tdir, "figures.txt")
                if os.path.exists(fp):
                    figs = open(fp).read().splitlines()
                kept = sorted(k for k in os.listdir(tdir) if k != "figures.txt")
            what = "<br>".join(cell(f) for f in figs) or (cell(why) if why else "")
            files = ", ".join(f"[{k}]({name}/{k})" for k in kept)
            md.append(f"| `{name}` | {res.upper() if res == 'fail' else res} | {secs} | {what} | {files} |")
        md.append("")
    md += ["## Every phase", ""]
    for p in phases:
        rs = data[p]
        n = {k: sum(1 for r in rs if r[1] == k) for k in ("pass", "fail", "skip")}
        secs = sum(r[2] for r in rs)
        md.append(f"- {p}: {len(rs)} integration tests: {n['pass']} passed, {n['fail']} failed, "
                  f"{n['skip']} skipped, {secs} s (the unit tests are counted in runs.txt's end line)")
        for name, res, _, why in rs:
            if res == "fail":
                md.append(f"  - FAIL `{name}`: log in {name}/failed-{p}.log")
            elif res == "skip":
                md.append(f"  - skip `{name}`: {cell(why)}")
    md.append("")
    open(os.path.join(d, "summary.md"), "w").write("\n".join(md))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1])
    main(sys.argv[1])
