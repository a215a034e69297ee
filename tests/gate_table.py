#!/usr/bin/env python3
"""The gate table of docs/gates.md ("### Gate × verdict") against the tests.

    gate_table.py [GATES-MD]

Every case of every cell (cases are separated by "; " outside parentheses)
names the test that covers it in backquotes, or says "no test yet"; a cell
that is "never" (or starts with "never:") has no case.  Every test named
exists: `t_NAME`/`tall_NAME` as a function of tests/integration/*.sh,
`unit:NAME` as a line `T (NAME)` of tests/unit/tests.def, `tests/PATH` as a
file.  Prints one line per problem and exits 1 when there is any; else
prints how many tests the table names."""
import glob, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs/gates.md")
REF = re.compile(r"`((?:t|tall)_[a-z0-9_]+|unit:[a-z0-9_]+|tests/[^`\s]+)`")


def table_rows(text):
    lines = text.splitlines()
    try:
        at = next(i for i, l in enumerate(lines) if l.startswith("### Gate × verdict"))
    except StopIteration:
        sys.exit(f"{doc}: no `### Gate × verdict` section")
    rows = []
    for l in lines[at + 1:]:
        if l.startswith("#"):
            break
        if l.startswith("| ") and not l.startswith("| gate ") and not l.startswith("| ---"):
            rows.append(l)
    return rows


def cells(row):
    """A row's cells, split on | outside backquotes."""
    out, cur, code = [], "", False
    for ch in row.strip()[1:-1]:
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def cases(cell):
    out, cur, depth, code = [], "", 0, False
    i = 0
    while i < len(cell):
        ch = cell[i]
        if ch == "`":
            code = not code
        elif not code and ch == "(":
            depth += 1
        elif not code and ch == ")":
            depth -= 1
        if not code and depth == 0 and cell.startswith("; ", i):
            out.append(cur.strip())
            cur = ""
            i += 2
            continue
        cur += ch
        i += 1
    out.append(cur.strip())
    return [c for c in out if c]


def existing():
    funcs = set()
    for f in glob.glob(os.path.join(ROOT, "tests/integration/*.sh")):
        funcs |= set(re.findall(r"^((?:t|tall)_[a-z0-9_]+)\(\)", open(f).read(), re.M))
    units = set(re.findall(r"^T \(([a-z0-9_]+)\)", open(os.path.join(ROOT, "tests/unit/tests.def")).read(), re.M))
    return funcs, units


def main():
    funcs, units = existing()
    problems, named = [], set()
    heads = ["passes", "fails", "warns", "skips"]
    rows = table_rows(open(doc).read())
    if not rows:
        problems.append("the table has no row")
    for row in rows:
        c = cells(row)
        if len(c) != 5:
            problems.append(f"row `{c[0]}`: {len(c)} cells, not 5")
            continue
        for head, cell in zip(heads, c[1:]):
            if cell.startswith("never"):
                continue
            for case in cases(cell):
                refs = REF.findall(case)
                if not refs and "no test yet" not in case:
                    problems.append(f"{c[0]} {head}: `{case[:80]}` names no test and does not say \"no test yet\"")
                for r in refs:
                    named.add(r)
                    if r.startswith("unit:"):
                        ok = r[5:] in units
                    elif r.startswith("tests/"):
                        ok = os.path.exists(os.path.join(ROOT, r))
                    else:
                        ok = r in funcs
                    if not ok:
                        problems.append(f"{c[0]} {head}: test `{r}` does not exist")
    for p in problems:
        print(f"gate-table: {p}")
    if problems:
        sys.exit(1)
    print(f"gate-table: {len(rows)} rows, {len(named)} tests named, all of them exist")


main()
