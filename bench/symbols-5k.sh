#!/usr/bin/env bash
# The symbol gate over a base of ~5,000 Python modules: cold (first build,
# every needed base file read out of the layer) and warm (a rebuild with a
# changed overlay: only cached content digests), beside the same import
# check done the obvious way with CPython's ast over the unpacked tree.
# Usage: bench/symbols-5k.sh [N-MODULES]    (prints a table; asserts nothing)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IB=$ROOT/build/imgbuild
N=${1:-5000}
W=$(mktemp -d /tmp/ibbench.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
export IMGBUILD_STORE=$W/store
SITE=/usr/local/lib/python3.12/dist-packages

# A base: N modules in 50 packages, each defining 20 names.
python3 - "$W/base/site/vllm" "$N" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
open(os.path.join(root, "__init__.py"), "w").write("__version__ = '0'\n")
for i in range(n):
    pkg = os.path.join(root, f"pkg{i % 50}")
    os.makedirs(pkg, exist_ok=True)
    init = os.path.join(pkg, "__init__.py")
    if not os.path.exists(init):
        open(init, "w").write("")
    with open(os.path.join(pkg, f"mod{i}.py"), "w") as f:
        f.write("import os\nfrom typing import Any\n\n")
        for k in range(20):
            f.write(f"def fn{k}(x: Any = None):\n    return os.path.join(str(x), '{k}')\n\n")
PY
printf '[image]\nname = bench-base:1\nfrom = scratch\n[copy]\ntree site %s\n[new]\n/\n' "$SITE" >"$W/base/image.conf"
"$IB" -q "$W/base" >/dev/null

# An overlay: 40 files, each importing 5 names from 25 base modules.
mkdir -p "$W/over/files"
python3 - "$W/over" "$N" <<'PY'
import sys
root, n = sys.argv[1], int(sys.argv[2])
with open(f"{root}/manifest.txt", "w") as man:
    for j in range(40):
        with open(f"{root}/files/over{j}.py", "w") as f:
            for k in range(25):
                i = (j * 997 + k * 131) % n
                f.write(f"from vllm.pkg{i % 50}.mod{i} import fn1, fn3, fn5, fn7, fn9\n")
            f.write("VALUE = 1\n")
        man.write(f"over{j}.py pkg{j % 50}/over{j}.py\n")
PY
printf '[image]\nname = bench-over:1\nfrom = bench-base:1\n[copy]\nmanifest manifest.txt files %s/vllm\n[new]\n/\n[symbols]\npython-path %s\ncheck-package vllm\n' \
  "$SITE" "$SITE" >"$W/over/image.conf"

gate_seconds() { jq -r '.gates[] | select(.name == "symbols") | .seconds' "$1"; }
/usr/bin/time -f '%M' -o "$W/cold.mem" "$IB" --json "$W/over" >"$W/cold.json"
echo "VALUE = 2" >>"$W/over/files/over0.py"
/usr/bin/time -f '%M' -o "$W/warm.mem" "$IB" --json "$W/over" -t bench-over:2 >"$W/warm.json"

# The peer: the same check with CPython's ast over the unpacked tree.
cat >"$W/peer.py" <<'PY'
import ast, os, sys, time
site, over = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
defs_cache, errors, names = {}, 0, 0
def defs(path):
    if path not in defs_cache:
        tree = ast.parse(open(path, "rb").read())
        out = set()
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)): out.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update(a.asname or a.name.split(".")[0] for a in n.names)
        defs_cache[path] = out
    return defs_cache[path]
for f in sorted(os.listdir(over)):
    for n in ast.walk(ast.parse(open(os.path.join(over, f), "rb").read())):
        if isinstance(n, ast.ImportFrom) and n.module.startswith("vllm"):
            p = os.path.join(site, *n.module.split(".")) + ".py"
            for a in n.names:
                names += 1
                errors += a.name not in defs(p)
print(f"{time.perf_counter() - t0:.4f} {names} {errors}")
PY
peer=$(/usr/bin/time -f '%M' -o "$W/peer.mem" python3 "$W/peer.py" "$W/base/site" "$W/over/files")
cold=$(gate_seconds "$W/cold.json")
warm=$(gate_seconds "$W/warm.json")
echo "symbol gate over a base of $N Python modules; 40 overlay files, 1000 imports, 5000 names"
printf '%-36s %10s %12s\n' "run" "seconds" "peak RSS KiB"
printf '%-36s %10.4f %12s\n' "imgbuild gate, cold (reads the layer)" "$cold" "$(cat "$W/cold.mem")"
printf '%-36s %10.4f %12s\n' "imgbuild gate, warm (cache)" "$warm" "$(cat "$W/warm.mem")"
printf '%-36s %10.4f %12s\n' "python3 ast on the unpacked tree" "${peer%% *}" "$(cat "$W/peer.mem")"
python3 -c "import sys; c,w,p=map(float,sys.argv[1:]); print(f'ratios: ast/warm {p/w:.1f}x, ast/cold {p/c:.1f}x')" "$cold" "$warm" "${peer%% *}"
echo "(peak RSS: the whole process; imgbuild's includes the build, the peer only the check)"
