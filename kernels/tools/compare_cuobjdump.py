#!/usr/bin/env python3
"""Compare what imgverify --kernels finds in files with what NVIDIA's
cuobjdump reports (--list-elf, --dump-elf-symbols): the set of (SASS arch,
__global__ kernel) pairs must be equal.  Prints one line per file and
exits 1 on any difference.  Needs cuobjdump (the GPU machine has it).

Usage: compare_cuobjdump.py IMGVERIFY FILE..."""
import json
import re
import subprocess
import sys


def ours(imgverify, path):
    out = subprocess.run([imgverify, "--kernels", "--json", path], capture_output=True, check=True, text=True)
    pairs, elfs = set(), 0
    for f in json.loads(out.stdout)["files"]:
        for e in f["entries"]:
            # Relocatable cubins (__nv_relfatbin) are nvlink's input: the
            # runtime never loads them, and cuobjdump --list-elf omits them.
            if e["kind"] != "sass" or e.get("relocatable"):
                continue
            elfs += 1
            arch = f"sm_{e['sm']}{e['variant']}"
            pairs.update((arch, k) for k in e["kernels"])
    return pairs, elfs


def theirs(path):
    listing = subprocess.run(["cuobjdump", "--list-elf", path], capture_output=True, text=True)
    elfs = len([l for l in listing.stdout.splitlines() if l.startswith("ELF file")])
    dump = subprocess.run(["cuobjdump", "--dump-elf-symbols", path], capture_output=True, text=True)
    pairs, arch = set(), None
    for line in dump.stdout.splitlines():
        m = re.match(r"\s*arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        if "STT_FUNC" in line and "STO_ENTRY" in line and arch:
            pairs.add((arch, line.split()[-1]))
    return pairs, elfs


def main():
    imgverify, files = sys.argv[1], sys.argv[2:]
    bad = 0
    for path in files:
        a, na = ours(imgverify, path)
        b, nb = theirs(path)
        # The set of pairs, and the number of loadable cubins.
        same = a == b and na == nb
        bad += not same
        archs = sorted({x for x, _ in a})
        print(f"{'SAME' if same else 'DIFFERENT'} {path}: imgverify {len(a)} (arch, kernel) pairs in {na} cubins, "
              f"cuobjdump {len(b)} in {nb}; archs {' '.join(archs)}")
        if not same:
            print("  only imgverify:", sorted(a - b)[:8])
            print("  only cuobjdump:", sorted(b - a)[:8])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
