#!/usr/bin/env bash
# The symbol gate's syntax check against CPython's compile(), on mutants of
# real files (tests/pyref/mutate.py): N mutants go into one overlay as a new
# package, one imgbuild run judges them all, and the reference interpreter
# compiles each one.  The verdicts (refused or not, and the line) must agree.
#
# Usage: syntax-campaign.sh IMGBUILD BASE-REF ROOTFS PYTHON-PATH N SEED REFERENCE SOURCE...
#   BASE-REF      the base (oci:DIR:NAME), whose CPython the gate asks
#   ROOTFS        that base's file system (for REFERENCE=chroot)
#   PYTHON-PATH   the image's site folder the mutants go into
#   REFERENCE     "chroot:/usr/bin/python3.X" (that interpreter in a chroot of
#                 ROOTFS) or a program of this machine ("/usr/bin/python3.11")
# Prints "syntax-campaign: N mutants, R refused by the reference, A agree, D disagree"
# and the first disagreements; exit 1 when any disagree.
# Needs root (chroot, and the gate's own chroot); uses $IMGBUILD_STORE.
set -euo pipefail
ib=$1 ref=$2 rootfs=$3 pypath=$4 n=$5 seed=$6 reference=$7
shift 7
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=imgbuild_mutants
python3 "$here/mutate.py" make "$work/def/$pkg" "$n" "$seed" "$@"
: >"$work/def/$pkg/__init__.py"
rm "$work/def/$pkg/index.json"
cat >"$work/def/image.conf" <<EOF
[image]
name = syntax-campaign:$seed
from = $ref
[copy]
tree $pkg $pypath/$pkg
[new]
$pypath/$pkg/
[symbols]
python-path $pypath
check-package $pkg
EOF
# The gate's verdicts: every problem line that names a mutant.
"$ib" --smoke=off --allow-unsafe-base --json "$work/def" >"$work/report.json" 2>"$work/stderr" || true
python3 - "$work/report.json" >"$work/gate.json" <<'PY'
import json, re, sys
doc = json.load(open(sys.argv[1]))
found = {}
def walk(x):
    if isinstance(x, str):
        m = re.search(r"imgbuild_mutants/(m\d+\.py):(\d+)?:? ?(.*)", x)
        if m and ("refuses it" in x or "unterminated" in x or "never closed" in x):
            found.setdefault(m.group(1), [True, int(m.group(2) or 0)])
    elif isinstance(x, dict):
        for v in x.values(): walk(v)
    elif isinstance(x, list):
        for v in x: walk(v)
walk(doc)
json.dump(found, sys.stdout)
PY
# The reference's verdicts.
if [ "${reference#chroot:}" != "$reference" ]; then
  # A private mount namespace: the shared rootfs is left as it is.
  unshare -m sh -c 'mount --bind "$1" "$2/mnt" && exec chroot "$2" "$3" -W ignore - verdicts /mnt' sh \
    "$work/def/$pkg" "$rootfs" "${reference#chroot:}" <"$here/mutate.py" >"$work/ref.json"
else
  "$reference" "$here/mutate.py" verdicts "$work/def/$pkg" >"$work/ref.json"
fi
python3 - "$work/gate.json" "$work/ref.json" "$work/stderr" <<'PY'
import json, sys
gate = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))
bad = []
for name, (refused, line) in sorted(ref.items()):
    g = gate.get(name, [False, 0])
    if g[0] != refused or (refused and g[1] != line):
        bad.append((name, (refused, line), tuple(g)))
refused = sum(1 for v in ref.values() if v[0])
print(f"syntax-campaign: {len(ref)} mutants, {refused} refused by the reference, "
      f"{len(ref) - len(bad)} agree, {len(bad)} disagree")
for name, want, got in bad[:10]:
    print(f"  {name}: reference {want}, gate {got}")
if bad:
    sys.stdout.write(open(sys.argv[3]).read()[-3000:])
sys.exit(1 if bad else 0)
PY
