#!/usr/bin/env python3
"""The link gate against glibc's own ldd -r, object by object.

Usage: compare_ldd.py ROOTFS REPORT.json [--python]

REPORT is `imgverify --native --json` of an image made from ROOTFS.  For
each object it checked, `ldd -r OBJ` is run in a chroot of ROOTFS (by the
image's own glibc), and three sets are compared: the libraries it loads
(each one's real path), the libraries it does not find, and the undefined
symbols (symbol, version, the real path of the object that needs it) with
the versions not found (version, the object that needs it).

With --python the report was made loading extension modules as the
image's Python does: ldd's undefined symbols are taken minus those that the
interpreter's own closure (ldd of /usr/bin/python3, nm -D --defined-only)
exports, and the loaded lists are not compared (the interpreter's closure
is loaded first).  Prints one line per difference and a summary line:
  native-ldd: N objects, N equal, N differ
"""
import json, os, re, subprocess, sys

def real(rootfs, path):
    """PATH as the kernel resolves it inside ROOTFS (absolute links stay inside)."""
    parts, out, hops = [p for p in path.split("/") if p], [], 0
    while parts:
        p = parts.pop(0)
        if p == ".":
            continue
        if p == "..":
            if out:
                out.pop()
            continue
        cand = rootfs + "/" + "/".join(out + [p])
        if os.path.islink(cand) and hops < 40:
            hops += 1
            t = os.readlink(cand)
            if t.startswith("/"):
                out = []
            parts = [x for x in t.split("/") if x] + parts
            continue
        out.append(p)
    return "/" + "/".join(out)

def run_ldd(rootfs, paths):
    """ldd -r of every path in one chroot: {path: output lines}."""
    script = 'for f in "$@"; do echo "@@@ $f"; ldd -r "$f" 2>&1; done'
    out = subprocess.run(["chroot", rootfs, "/bin/sh", "-c", script, "sh"] + paths,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C"}).stdout
    res, cur = {}, None
    for line in out.splitlines():
        if line.startswith("@@@ "):
            cur = line[4:]
            res[cur] = []
        elif cur is not None:
            res[cur].append(line)
    return res

UNDEF = re.compile(r"^undefined symbol: (\S+?)(?:, version (\S+))?\s+\((.*)\)$")
VERS = re.compile(r"^(?:\S+: )?(\S+): version `([^']+)' not found \(required by (.*)\)$")
LOADED = re.compile(r"^\s+(\S+) => (\S+) \(0x[0-9a-f]+\)$")
INTERP = re.compile(r"^\s+(/\S+) \(0x[0-9a-f]+\)$")
MISSING = re.compile(r"^\s+(\S+) => not found$")

def parse(rootfs, lines):
    loaded, missing, undef, vers = set(), set(), set(), set()
    for l in lines:
        if m := UNDEF.match(l):
            undef.add((m[1], m[2], real(rootfs, m[3])))
        elif m := VERS.match(l):
            vers.add((m[2], real(rootfs, m[3])))
        elif m := MISSING.match(l):
            missing.add(m[1])
        elif m := LOADED.match(l):
            loaded.add(real(rootfs, m[2]))
        elif m := INTERP.match(l):
            loaded.add(real(rootfs, m[1]))
    return loaded, missing, undef, vers

def interpreter_exports(rootfs):
    """What the global scope of /usr/bin/python3 defines, by nm."""
    py = real(rootfs, "/usr/bin/python3")
    objs = [py] + sorted(parse(rootfs, run_ldd(rootfs, [py])[py])[0])
    names = set()
    for o in objs:
        out = subprocess.run(["nm", "-D", "--defined-only", rootfs + o], capture_output=True, text=True).stdout
        for l in out.splitlines():
            f = l.split()
            if len(f) >= 3:
                names.add(f[2].split("@")[0])
    return names

def main():
    rootfs, report = sys.argv[1], json.load(open(sys.argv[2]))
    python = "--python" in sys.argv
    objs = report["objects"]
    cache = os.environ.get("COMPARE_LDD_CACHE")  # for working on the comparison itself
    if cache and os.path.exists(cache):
        ldd = json.load(open(cache))
    else:
        ldd = run_ldd(rootfs, [o["path"] for o in objs])
        if cache:
            json.dump(ldd, open(cache, "w"))
    exports = interpreter_exports(rootfs) if python else set()
    equal = differ = 0
    for o in objs:
        L, M, U, V = parse(rootfs, ldd.get(o["path"], []))
        if python and o["loaded_as"] == "python":
            U = {u for u in U if u[0] not in exports}
        probs = o["problems"]
        m = {p["name"] for p in probs if p["kind"] == "missing"}
        u = {(p["name"], p.get("version"), p["object"]) for p in probs if p["kind"] == "undefined"}
        v = {(p["name"], p["object"]) for p in probs if p["kind"] == "version"}
        mine_loaded = {l["path"] for l in o["loaded"][1:] if l["path"]}
        checks = [("missing", M, m), ("undefined", U, u), ("version", V, v)]
        if o["loaded_as"] == "ldd":
            # ldd also lists the vDSO (no path) and the dynamic loader by its PT_INTERP path.
            checks.append(("loaded", L, mine_loaded))
        bad = [(what, sorted(a - b)[:5], sorted(b - a)[:5]) for what, a, b in checks if a != b]
        if bad:
            differ += 1
            for what, only_ldd, only_us in bad:
                print(f"DIFF {o['path']}: {what}: only ldd: {only_ldd} only imgverify: {only_us}")
        else:
            equal += 1
    print(f"native-ldd: {len(objs)} objects, {equal} equal, {differ} differ")
    return 0 if differ == 0 and objs else 1

sys.exit(main())
