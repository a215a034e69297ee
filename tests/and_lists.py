#!/usr/bin/env python3
"""Assertions written as `A && B` in a test body: under `set -e`, bash does
not stop at a failing command of an && list unless it is the last one, so
`[ "$n" -ge 3 ] && [ "$n" -le 4 ]` lets a test go on, and pass, with n = 1.
(`make mutate` found two such checks that could not fail.)  Prints each
one found in ROOT/tests/integration/*.sh as FILE:LINE: TEXT and exits 1;
a condition that guards an action (`&& break`, `&& rc=1`, `&& echo ...`)
is not an assertion and is let be.
Usage: tests/and_lists.py ROOT"""
import re, sys, glob
bad = []
for p in sorted(glob.glob(sys.argv[1] + "/tests/integration/*.sh")):
    for n, line in enumerate(open(p), 1):
        s = line.strip()
        if s.startswith("#"):
            continue
        # quoted text says nothing about the shell's lists
        t = re.sub(r"'[^']*'", "''", s)
        t = re.sub(r'"(\\.|[^"\\])*"', '""', t)
        if " && " not in t or "||" in t:
            continue
        if not re.match(r"(\[|\[\[|test|grep|jq|cmp|diff|!)\s", t):
            continue
        last = t.rsplit(" && ", 1)[1].strip()
        # A condition that guards an action is not an assertion.
        if re.match(r"(break|continue|return|echo|log|printf|[A-Za-z_][A-Za-z0-9_]*=)", last) or "| tee" in t:
            continue
        bad.append(f"{p[len(sys.argv[1]) + 1:]}:{n}: {s}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
