#!/usr/bin/env python3
"""NVIDIA's cuobjdump against imgverify --kernels --json on a shared object
too large to carry to the GPU machine (tests/gpu/fatbin-skeleton.py): the
same entries, in the same order, of the same kinds and architectures, and
the same PTX ISA versions on a sample of whole PTX entries.

  cuobjdump-lists.py SKELETON IMGVERIFY.json [PTX-SAMPLE.fatbin]

IMGVERIFY.json: [{kind, sm, variant, relocatable, offset, ptx_version}],
imgverify's entries of the real file (made where the file is).  Prints what
it compared; exit 1 on any difference, 2 when cuobjdump is missing."""
import json
import re
import shutil
import subprocess
import sys


def listing(path, every=False):
    cmd = ["cuobjdump"] + (["-all"] if every else []) + ["--list-elf", "--list-ptx", path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[:300]}")
    got = []
    for line in out.stdout.splitlines():
        m = re.match(r"(ELF|PTX) file\s+\d+: .*\.(sm_\w+|compute_\w+)\.(cubin|ptx)$", line)
        if m:
            got.append(("sass" if m.group(1) == "ELF" else "ptx", m.group(2).replace("compute_", "sm_")))
    return got


def main(argv):
    if not shutil.which("cuobjdump"):
        print("cuobjdump is not on PATH", file=sys.stderr)
        return 2
    skel, ours_path = argv[1], argv[2]
    ours = json.load(open(ours_path))
    bad = 0
    # cuobjdump lists the loadable entries (.nv_fatbin) by default, and with
    # -all nvlink's relocatable input (__nv_relfatbin) too.
    for every in (False, True):
        want = [(e["kind"], f"sm_{e['sm']}{e['variant']}") for e in ours if every or not e["relocatable"]]
        got = listing(skel, every)
        what = f"{skel} ({'-all: every fatbin' if every else 'the loadable fatbin'})"
        if sorted(got) != sorted(want):
            bad = 1
            print(f"{what}: entries differ: cuobjdump {len(got)}, imgverify {len(want)}")
            for k in sorted(set(got) | set(want)):
                if got.count(k) != want.count(k):
                    print(f"  {k[0]} {k[1]}: cuobjdump {got.count(k)}, imgverify {want.count(k)}")
        else:
            kinds = {}
            for k in want:
                kinds[k] = kinds.get(k, 0) + 1
            print(f"{what}: the same {len(want)} entries: " + ", ".join(f"{n} {k[0]} {k[1]}" for k, n in sorted(kinds.items())))
    if len(argv) > 3:
        sample = argv[3]
        offsets = [int(x) for x in open(sample + ".offsets")]
        by_off = {e["offset"]: e for e in ours}
        dump = subprocess.run(["cuobjdump", "--dump-ptx", sample], capture_output=True, text=True).stdout
        versions = re.findall(r"^\.version (\d+\.\d+)", dump, re.M)
        mine = [by_off[o]["ptx_version"] if o in by_off else None for o in offsets]
        if versions != mine:
            bad = 1
            print(f"{sample}: PTX versions differ: cuobjdump {versions}, imgverify {mine}")
        else:
            print(f"{sample}: the same PTX ISA version on {len(mine)} whole PTX entries: {sorted(set(mine))}")
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv) if len(sys.argv) >= 3 else __doc__)
