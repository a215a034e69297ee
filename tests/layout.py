#!/usr/bin/env python3
"""The layout's rules, read off the tree (tests/integration/layout.sh).

  tests/layout.py includes [ROOT]   every #include "..." of the project's C
      names its file from the repository's root, that file exists, and it
      points down the component order:
          util < layers < {kernels, symbol-check} < builder < cli
      (kernels and symbol-check never include each other).  tests/ and
      bench/ may include anything; images/ is image content, not ours.
  tests/layout.py includers HEADER [ROOT]   the C files (library, programs,
      unit tests) whose compilation reads HEADER, directly or through other
      headers: what `make` must rebuild when HEADER changes.

Exit 0 when the rule holds, 1 with one line per offence otherwise.
"""
import os
import re
import sys

RANK = {"util": 0, "layers": 1, "kernels": 2, "symbol-check": 2, "builder": 3, "cli": 4}
FREE = ("tests", "bench")          # may include any component
SKIP = ("images", ".git")          # not the project's C
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def c_files(root):
    for top, dirs, files in os.walk(root):
        rel = os.path.relpath(top, root)
        first = rel.split(os.sep)[0]
        if rel != "." and (first in SKIP or first == "build" or first.startswith(("build-", "."))):
            dirs[:] = []
            continue
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cc")):
                yield os.path.normpath(os.path.join(rel, f))


def includes(root, path):
    with open(os.path.join(root, path), errors="replace") as f:
        return INCLUDE.findall(f.read())


def component(path):
    return path.split("/")[0]


def check_includes(root):
    bad = []
    for f in c_files(root):
        a = component(f)
        for inc in includes(root, f):
            if not os.path.isfile(os.path.join(root, inc)):
                bad.append(f"{f}: #include \"{inc}\" does not name a file from the repository's root")
                continue
            b = component(inc)
            if a in FREE or a == b or b in FREE:
                if b in FREE and a not in FREE:
                    bad.append(f"{f}: #include \"{inc}\": the components never include tests/ or bench/")
                continue
            if a not in RANK or b not in RANK:
                bad.append(f"{f}: #include \"{inc}\": {a}/ or {b}/ is not a component")
            elif RANK[b] > RANK[a]:
                bad.append(f"{f}: #include \"{inc}\": {a}/ may not include {b}/ (above it)")
            elif RANK[b] == RANK[a]:
                bad.append(f"{f}: #include \"{inc}\": {a}/ and {b}/ never include each other")
    return bad


def includers(root, header):
    graph = {f: [i for i in includes(root, f) if os.path.isfile(os.path.join(root, i))] for f in c_files(root)}
    def reads(f):
        seen, todo = set(), list(graph.get(f, []))
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                todo.extend(graph.get(i, []))
        return seen

    return sorted(f for f in graph if f.endswith((".c", ".cc")) and header in reads(f))


def main(argv):
    if len(argv) >= 2 and argv[1] == "includes":
        bad = check_includes(argv[2] if len(argv) > 2 else ".")
        for b in bad:
            print(b)
        return 1 if bad else 0
    if len(argv) >= 3 and argv[1] == "includers":
        for f in includers(argv[3] if len(argv) > 3 else ".", argv[2]):
            print(f)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
