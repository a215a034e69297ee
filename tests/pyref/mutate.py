#!/usr/bin/env python3
"""Syntax mutations of real Python files, for judging the symbol gate's
syntax check against CPython's compile().

  mutate.py make OUTDIR N SEED SOURCE...   write OUTDIR/mNNNN.py (N mutants of
                                           the sources) and OUTDIR/index.json
  mutate.py verdicts DIR                   compile() every mNNNN.py of DIR with
                                           this interpreter, as import does;
                                           print {"mNNNN.py": [refused, line]}

Each mutant is one real file with one change: drop a ':' ending a line,
indent or dedent a line, drop a line, wrap a line in merge conflict markers,
drop a bracket, drop a quote.  Many changes are harmless (inside a string, a
dropped blank line), so both verdicts occur."""
import json
import os
import random
import sys

KINDS = ["colon", "indent", "dedent", "drop-line", "conflict", "bracket", "quote"]


def mutate(src, kind, rng):
    lines = src.split(b"\n")
    idx = [i for i, l in enumerate(lines) if l.strip()]
    if not idx:
        return None
    if kind == "colon":
        cand = [i for i in idx if lines[i].rstrip().endswith(b":")]
        if not cand:
            return None
        i = rng.choice(cand)
        l = lines[i].rstrip()
        lines[i] = l[:-1]
    elif kind == "indent":
        i = rng.choice(idx)
        lines[i] = b"    " + lines[i]
    elif kind == "dedent":
        cand = [i for i in idx if lines[i][:1] in (b" ", b"\t")]
        if not cand:
            return None
        i = rng.choice(cand)
        lines[i] = lines[i].lstrip()
    elif kind == "drop-line":
        i = rng.choice(idx)
        del lines[i]
    elif kind == "conflict":
        i = rng.choice(idx)
        lines[i:i + 1] = [b"<<<<<<< ours", lines[i], b"=======", lines[i], b">>>>>>> theirs"]
    else:
        chars = b"()[]{}" if kind == "bracket" else b"'\""
        pos = [p for p, c in enumerate(src) if c in chars]
        if not pos:
            return None
        p = rng.choice(pos)
        return src[:p] + src[p + 1:]
    return b"\n".join(lines)


def make(out, n, seed, sources):
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    index = {}
    k = 0
    while k < n:
        path = rng.choice(sources)
        kind = KINDS[k % len(KINDS)]
        with open(path, "rb") as f:
            src = f.read()
        m = mutate(src, kind, rng)
        if m is None:
            continue
        name = f"m{k:04d}.py"
        with open(os.path.join(out, name), "wb") as f:
            f.write(m)
        index[name] = {"source": path, "kind": kind}
        k += 1
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=0, sort_keys=True)


def verdicts(d):
    out = {}
    for name in sorted(os.listdir(d)):
        if not (name.startswith("m") and name.endswith(".py")):
            continue
        with open(os.path.join(d, name), "rb") as f:
            src = f.read()
        try:
            compile(src, name, "exec", dont_inherit=True)
            out[name] = [False, 0]
        except SyntaxError as e:
            out[name] = [True, e.lineno or 0]
        except Exception:
            out[name] = [True, 0]
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    else:
        verdicts(sys.argv[2])
