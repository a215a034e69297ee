#!/usr/bin/env python3
"""Run imgverify --python-symbols and the ast reference over the same files
and compare them file by file.  Prints a summary line:
  "python-symbols: N files, N equal, N differ, N unparsable by ast"
and the first differences.  Exit status 1 when any file differs.
Usage: compare.py IMGVERIFY FILE... | compare.py IMGVERIFY --stdlib"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def batches(items, n=400):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def run_ours(imgverify, files):
    out = {}
    for b in batches(files):
        p = subprocess.run([imgverify, "--python-symbols", *b], capture_output=True)
        doc = json.loads(p.stdout.decode("utf-8", "surrogateescape"))
        for f in doc["files"]:
            out[f["path"]] = f
        for line in p.stderr.decode("utf-8", "replace").splitlines():
            print("imgverify:", line, file=sys.stderr)
    return out


def run_reference(files):
    out, unparsable = {}, []
    for b in batches(files):
        p = subprocess.run([sys.executable, os.path.join(HERE, "pyast_ref.py"), *b],
                           capture_output=True, check=True)
        doc = json.loads(p.stdout)
        for f in doc["files"]:
            out[f["path"]] = f
        unparsable += doc["unparsable"]
    return out, unparsable


def stdlib_files():
    files = []
    for root in sorted(glob.glob("/usr/lib/python3.*")):
        if os.path.isdir(root):
            files += sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def normal(cond):
    """A condition as ast.unparse spells it (the reference writes ast's
    spelling, imgverify the source's): the same expression, the same text."""
    import ast
    try:
        return ast.unparse(ast.parse(cond, mode="eval"))
    except SyntaxError:  # a case pattern: `(case P if G)`
        try:
            case = ast.parse("match _:\n    %s:\n        pass\n" % cond[1:-1]).body[0].cases[0]
        except SyntaxError:  # a case under another condition: as written
            return " ".join(cond.split())
        return "case " + ast.unparse(case.pattern) + (" if " + ast.unparse(case.guard) if case.guard else "")


def normalized(doc):
    if doc is None:
        return None
    doc = json.loads(json.dumps(doc))
    for im in doc["imports"]:
        if "condition" in im:
            im["condition"] = normal(im["condition"])
    return doc


def main():
    imgverify = sys.argv[1]
    files = stdlib_files() if sys.argv[2:] == ["--stdlib"] else sys.argv[2:]
    ref, unparsable = run_reference(files)
    ours = run_ours(imgverify, list(ref))
    differ = []
    for path, want in ref.items():
        want, got = normalized(want), normalized(ours.get(path))
        if got != want:
            differ.append((path, want, got))
    print(f"python-symbols: {len(ref)} files, {len(ref) - len(differ)} equal, {len(differ)} differ, "
          f"{len(unparsable)} unparsable by ast")
    for path, want, got in differ[:10]:
        print(f"DIFF {path}")
        if got is None:
            print("  imgverify gave nothing")
            continue
        for key in ("definitions", "imports"):
            if want[key] != got[key]:
                if key == "definitions":
                    print("  only in ast:", sorted(set(want[key]) - set(got[key]))[:10])
                    print("  only in imgverify:", sorted(set(got[key]) - set(want[key]))[:10])
                else:
                    w = [json.dumps(x) for x in want[key]]
                    g = [json.dumps(x) for x in got[key]]
                    print("  imports only in ast:", [x for x in w if x not in g][:3])
                    print("  imports only in imgverify:", [x for x in g if x not in w][:3])
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
