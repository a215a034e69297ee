# symbol-check (issue "symbol-check"): the extractor against CPython's ast,
# and the Python and native symbol gate failing where it must.

VLLM_BASE=dsv41-flash-b12x/site-packages/vllm

add_to_symbols() { # DEFS-COPY LINE: a line at the end of the dcp2 definition's [symbols]
  python3 - "$1/dsv41-flash-dcp2/image.conf" "$2" <<'PY'
import sys
p, line = sys.argv[1], sys.argv[2]
s = open(p).read()
a = s.index("[symbols]")
b = s.find("\n[", a)
b = len(s) if b < 0 else b
open(p, "w").write(s[:b].rstrip("\n") + "\n" + line + "\n" + s[b:])
PY
}

t_python_symbols_equal_ast_on_the_stdlib() {
  python3 "$ROOT/tests/pyref/compare.py" "$IV" --stdlib | tee cmp.out
  grep -Eq '^python-symbols: [0-9]+ files, ([0-9]+) equal, 0 differ' cmp.out
  # Not a vacuous pass: the standard library has hundreds of modules.
  n=$(sed -n 's/^python-symbols: \([0-9]*\) files.*/\1/p' cmp.out)
  [ "$n" -gt 500 ]
}

t_python_symbols_equal_ast_on_the_tricky_corpus() {
  python3 "$ROOT/tests/pyref/compare.py" "$IV" $(find "$ROOT/tests/pyref/corpus" -name '*.py') | tee cmp.out
  grep -q ' 0 differ, 0 unparsable' cmp.out
  # The reference must see what it is meant to see (guards the corpus).
  "$IV" --python-symbols "$ROOT/tests/pyref/corpus/pkg/sub/tricky.py" >out.json
  for name in fh4 star_exc in_case3 t3 ann1 __getattr__ semicolon_b walrus comp_walrus rest v_pat; do
    jq -e --arg n "$name" '.files[0].definitions | index($n)' out.json >/dev/null
  done
  for name in ann2 local listcomp_var inner_method lambda_walrus q; do
    refute jq -e --arg n "$name" '.files[0].definitions | index($n)' out.json >/dev/null
  done
}

# CPython's own answer, from running the module: its namespace afterwards
# (every binding of the file executes) is what the extractor must report.
t_python_symbols_equal_the_executed_namespace() {
  f=$ROOT/tests/pyref/corpus/run/walrus_run.py
  "$IV" --python-symbols "$f" | jq -r '.files[0].definitions[]' | sort >ours.txt
  python3 -c 'import runpy, sys
ns = runpy.run_path(sys.argv[1])
print("\n".join(sorted(k for k in ns if not (k.startswith("__") and k.endswith("__")))))' "$f" >cpython.txt
  diff ours.txt cpython.txt
  # Not vacuous: assignment expressions in a condition, a comprehension, a
  # default, a guard and a decorator bind; in a lambda, def or class body not.
  for n in w_if w_comp w_nested w_default w_guard w_deco w_base; do grep -qx "$n" cpython.txt; done
  for n in w_lambda_body w_in_function_expr w_in_class i; do refute grep -qx "$n" cpython.txt; done
}

t_symbol_gate_passes_and_is_warm_the_second_time() {
  build_base
  "$IB" dsv41-flash-dcp2 2>first.err >/dev/null
  grep -q 'gate symbols *pass' first.err
  grep -Eq 'symbols: 23 overlay files, [1-9][0-9]* imports' first.err
  # The second time, no base file is read again: all from the cache.  Seen
  # from outside, not from the gate's own counter: the base's layer blob is
  # never opened.
  base=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.layers[0].digest' | cut -d: -f2)
  traced -f -qq -e trace=openat,open -o opens.txt "$IB" -t again:1 dsv41-flash-dcp2 2>second.err >/dev/null
  grep -q 'gate symbols *pass' second.err
  grep -q "$IMGBUILD_STORE/index.json" opens.txt # the trace saw the build's opens
  refute grep -q "blobs/sha256/$base" opens.txt
  # Every answer cached, the syntax check's too (the stand-in's own CPython
  # gave them: exact answers are kept).
  grep -Eq 'symbols: .* 0 read, [1-9][0-9]* cached' second.err
  grep -q 'syntax: 0 compiled, 23 from the cache' second.err
  # Cold (its cache gone), the same build must read the base layer.
  rm -rf "$IMGBUILD_STORE/imgbuild/pysyms" "$IMGBUILD_STORE/imgbuild/elfsyms"
  traced -f -qq -e trace=openat,open -o cold.txt "$IB" -t cold:1 dsv41-flash-dcp2 2>cold.err >/dev/null
  grep -q "blobs/sha256/$base" cold.txt
}

t_removed_base_definition_fails_the_build() {
  copy_images d
  # The base loses get_dcp_group, which the overlay imports.
  python3 - d/$VLLM_BASE/distributed/parallel_state.py <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r"\ndef get_dcp_group\(\).*?\n\n\n", "\n", s, flags=re.S)
open(p, "w").write(s)
PY
  refute grep -q 'def get_dcp_group' d/$VLLM_BASE/distributed/parallel_state.py
  "$IB" -q d/dsv41-flash-b12x -t base:broken >/dev/null
  expect_fail 5 'vllm/distributed/communication_op.py:[0-9]+: from vllm.distributed.parallel_state import get_dcp_group: get_dcp_group is not defined in vllm/distributed/parallel_state.py \(layer sha256:[0-9a-f]{64}\)' \
    "$IB" d/dsv41-flash-dcp2 -t dcp2:2 --from base:broken
  # The required-symbol list catches it too, as a second problem.
  grep -q 'parallel_state.py does not define required symbol get_dcp_group' stderr.txt
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:2" >/dev/null 2>&1
}

# The reverse edge: the overlay's weight_utils.py drops default_weight_loader,
# which the base's own model_loader/__init__.py (not in the overlay) imports.
# The overlay's imports all resolve; the image is broken all the same.
t_overlay_dropping_a_name_the_base_imports_fails() {
  build_base
  copy_images d
  sed -i 's/^def default_weight_loader(/def default_weight_loader_v2(/' d/dsv41-flash-dcp2/files/weight_utils.py
  refute grep -q '^def default_weight_loader(' d/dsv41-flash-dcp2/files/weight_utils.py
  expect_fail 5 'model_loader/__init__.py:1: from vllm.model_executor.model_loader.weight_utils import default_weight_loader: default_weight_loader was defined in the base.s vllm/model_executor/model_loader/weight_utils.py and the overlay.s no longer defines it \(layer sha256:[0-9a-f]{64}\) \(imported by the image.s vllm/model_executor/model_loader/__init__.py; the overlay replaces vllm.model_executor.model_loader.weight_utils\)' \
    "$IB" --smoke=off d/dsv41-flash-dcp2 -t dcp2:rev
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:rev" >/dev/null 2>&1
  # The name the base does not import is free to go: safetensors_weights_iterator
  # is imported too, find_weight_files is not.
  copy_images e
  sed -i 's/^def find_weight_files(/def find_weight_files_v2(/' e/dsv41-flash-dcp2/files/weight_utils.py
  "$IB" -q --smoke=off e/dsv41-flash-dcp2 -t dcp2:rev-ok
}

# The reverse-import index is one file, written durably once (it was one
# file per imported module, each fsynced by itself: 3,902 fsyncs and one to
# three seconds of a cold build over the CUDA base).  A damaged one is made
# again, never trusted: the reverse edge above is still found.
t_reverse_index_is_one_file_made_again_when_damaged() {
  build_base
  copy_images d
  sed -i 's/^def default_weight_loader(/def default_weight_loader_v2(/' d/dsv41-flash-dcp2/files/weight_utils.py
  expect_fail 5 'model_loader/__init__.py:1: from vllm.model_executor.model_loader.weight_utils import default_weight_loader: default_weight_loader was defined in the base' \
    "$IB" --smoke=off d/dsv41-flash-dcp2 -t dcp2:rev
  local idx
  idx=$(grep -rlx 'imgbuild-pyrevidx 4' "$IMGBUILD_STORE/imgbuild/pyrevidx")
  [ "$(echo "$idx" | wc -l)" = 1 ]
  [ "$(dirname "$idx")" = "$IMGBUILD_STORE/imgbuild/pyrevidx" ]
  [ "$(head -1 "$idx")" = "imgbuild-pyrevidx 4" ]
  grep -q $'^vllm.model_executor.model_loader.weight_utils\t#' "$idx"
  # Damaged: nothing but its first line.  Made again, the same bytes.
  cp "$idx" whole.idx
  head -c 10 whole.idx >"$idx"
  expect_fail 5 'default_weight_loader was defined in the base' "$IB" --smoke=off d/dsv41-flash-dcp2 -t dcp2:rev
  cmp whole.idx "$idx"
}

# The reverse edge under a condition: files of an image built first import
# a name under `if os.environ.get(...)` (only the run decides) and under
# `if sys.version_info < (3, 0)` (never on the stand-in's 3.12); the image
# above drops that name: a warning naming the condition for the first,
# nothing for the second, and it tags.  Unconditional, the same import
# fails (t_overlay_dropping_a_name_the_base_imports_fails).
t_base_importers_under_conditions_judged_as_the_images_python_decides() {
  build_base
  local P=/usr/local/lib/python3.12/dist-packages W=model_executor/model_loader/weight_utils.py
  mkdir -p a/files b/files
  printf 'import os\nif os.environ.get("VLLM_X"):\n    from vllm.model_executor.model_loader.weight_utils import find_weight_files\n' >a/files/cond_user.py
  printf 'import sys\nif sys.version_info < (3, 0):\n    from vllm.model_executor.model_loader.weight_utils import find_weight_files\n' >a/files/old_user.py
  printf '[image]\nname = cond-base:1\nfrom = dsv41-flash-b12x:local\n[copy]\nfile files/cond_user.py %s/vllm/cond_user.py\nfile files/old_user.py %s/vllm/old_user.py\n[new]\n%s/vllm/cond_user.py\n%s/vllm/old_user.py\n[symbols]\npython-path %s\ncheck-package vllm\n' \
    "$P" "$P" "$P" "$P" "$P" >a/image.conf
  "$IB" -q --smoke=off a -t cond-base:1 >/dev/null
  sed 's/^def find_weight_files(/def find_weight_files_v2(/' "$ROOT/images/dsv41-flash-dcp2/files/weight_utils.py" >b/files/weight_utils.py
  printf '[image]\nname = cond-top:1\nfrom = cond-base:1\n[copy]\nfile files/weight_utils.py %s/vllm/%s\n[symbols]\npython-path %s\ncheck-package vllm\n' \
    "$P" "$W" "$P" >b/image.conf
  "$IB" --smoke=off b -t cond-top:1 >/dev/null 2>b.err
  grep -q 'gate symbols *pass' b.err
  grep -q 'warning: vllm/cond_user.py:3: from vllm.model_executor.model_loader.weight_utils import find_weight_files: find_weight_files was defined in the base.s .*(under the condition `(os.environ.get("VLLM_X"))` at line 2, which a static reading cannot decide: a warning)' b.err
  refute grep -q 'old_user.py' b.err
  grep -q ', 1 never run by this Python' b.err
}

t_missing_required_symbol_fails_the_build() {
  build_base
  copy_images d
  add_to_symbols d "python vllm/v1/core/kv_cache_utils.py get_swa_block_size no_such_helper"
  expect_fail 5 'image.conf:[0-9]+: .*kv_cache_utils.py does not define required symbol no_such_helper' \
    "$IB" d/dsv41-flash-dcp2 -t dcp2:3
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:3" >/dev/null 2>&1
}

t_missing_native_symbol_fails_the_build() {
  build_base
  copy_images d
  add_to_symbols d "native /usr/local/lib/python3.12/dist-packages/vllm/_b12x_C*.so b12x_missing_op"
  expect_fail 5 '_b12x_C.abi3.so does not export dynamic symbol b12x_missing_op' "$IB" d/dsv41-flash-dcp2 -t n:1
  copy_images e
  add_to_symbols e "native /usr/local/lib/python3.12/dist-packages/vllm/_b12x_C*.so b12x_fused_moe@B12X_9.9"
  expect_fail 5 'does not export dynamic symbol b12x_fused_moe@B12X_9.9' "$IB" e/dsv41-flash-dcp2 -t n:2
  copy_images f
  add_to_symbols f "native /usr/lib/libnothere.so* x"
  expect_fail 5 'no shared object in the image matches /usr/lib/libnothere.so' "$IB" f/dsv41-flash-dcp2 -t n:3
}

t_unresolvable_import_warns_or_fails_by_policy() {
  build_base
  copy_images d
  # vllm.envs answers through a module-level __getattr__.
  printf 'from vllm.envs import VLLM_CACHE_ROOT\n' >>d/dsv41-flash-dcp2/files/engram.py
  "$IB" d/dsv41-flash-dcp2 -t warn:1 2>warn.err >/dev/null
  grep -q 'warning: vllm/model_executor/models/deepseek_v4_1/engram.py:[0-9]*: from vllm.envs import VLLM_CACHE_ROOT: VLLM_CACHE_ROOT is not resolvable statically (vllm/envs.py has a module-level __getattr__)' warn.err
  sed -i 's/^unresolved warn/unresolved error/' d/dsv41-flash-dcp2/image.conf
  expect_fail 5 'VLLM_CACHE_ROOT is not resolvable statically' "$IB" d/dsv41-flash-dcp2 -t warn:2
}

# An `__all__` name that nothing the module's file binds: `from pkg.mod
# import ghost`.  CPython's answer depends on what runs: alone, the import
# fails (ImportError, and `from pkg.mod import *` an AttributeError); with a
# module that binds the name at run time (as an extension does), it
# succeeds.  A static reading cannot tell the two apart, so the gate warns
# in both, naming the name and __all__, and with `unresolved error` fails
# (5); a name neither bound nor in __all__ fails in both.
t_all_name_nothing_binds_warns_or_fails_by_policy() {
  local P=/usr/local/lib/python3.11/dist-packages d f files
  mkdir -p alone/pkg bound/pkg
  for d in alone bound; do
    printf '__all__ = ["present", "ghost"]\npresent = 1\n' >$d/pkg/mod.py
    printf 'from pkg.mod import present, ghost\n' >$d/pkg/user.py
  done
  : >alone/pkg/__init__.py
  # bound/: the package binds pkg.mod.ghost at run time, from another module.
  printf 'from pkg import _binder\n' >bound/pkg/__init__.py
  printf 'import pkg.mod\nsetattr(pkg.mod, "gh" + "ost", 2)\n' >bound/pkg/_binder.py
  for d in alone bound; do
    files=
    for f in $(cd $d && ls pkg/*.py); do files+="file $f $P/$f"$'\n'; done
    printf '[image]\nname = %s:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\n%s[new]\n/\n[symbols]\npython-path %s\nunresolved warn\n' \
      "$d" "$files" "$P" >$d/image.conf
  done
  # CPython, on the same files.
  export PYTHONDONTWRITEBYTECODE=1
  refute env PYTHONPATH=alone python3 -c 'from pkg.mod import ghost' 2>err.txt
  grep -q "ImportError: cannot import name 'ghost' from 'pkg.mod'" err.txt
  refute env PYTHONPATH=alone python3 -c 'from pkg.mod import *' 2>err.txt
  grep -q "AttributeError: module 'pkg.mod' has no attribute 'ghost'" err.txt
  refute env PYTHONPATH=alone python3 -c 'import pkg.user' 2>/dev/null
  PYTHONPATH=bound python3 -c 'import pkg.user; from pkg.mod import *; assert ghost == 2'
  for d in alone bound; do
    "$IB" --json "$d" >$d.json
    validate $d.json
    jq -e '.status == "pass" and (.gates[] | select(.name == "symbols") | .status == "pass")
      and ([.problems[] | select(.gate == "symbols")] | length == 1 and .[0].severity == "warning"
           and .[0].message == "pkg/user.py:1: from pkg.mod import ghost: ghost is in __all__ of pkg/mod.py but bound at run time, not by the file")' $d.json
    "$IB" "$d" >/dev/null 2>$d.err
    grep -q 'warning: pkg/user.py:1: from pkg.mod import ghost: ghost is in __all__ of pkg/mod.py' $d.err
    refute grep -q 'warning: .*present' $d.err
  done
  # imgverify reruns the gate with the definition: the same warning.
  "$IV" --definition alone alone:1 >/dev/null 2>v.err
  grep -q 'warning: pkg/user.py:1: from pkg.mod import ghost: ghost is in __all__' v.err
  # And with the definition it recorded, which keeps only its gate lines:
  # the packages checked by default come from the files the record lists,
  # as the build's came from its [copy] items (it checked 0 imports before).
  "$IV" alone:1 >/dev/null 2>v2.err
  grep -q 'warning: pkg/user.py:1: from pkg.mod import ghost: ghost is in __all__' v2.err
  # Policy error: a failure, nothing tagged.
  sed -i 's/^unresolved warn$/unresolved error/' alone/image.conf
  expect_fail 5 'from pkg.mod import ghost: ghost is in __all__ of pkg/mod.py but bound at run time' \
    "$IB" alone -t alone:2
  refute skopeo inspect "oci:$IMGBUILD_STORE:alone:2" >/dev/null 2>&1
  # Out of __all__, the same unbound name fails whatever the policy.
  sed -i 's/^unresolved error$/unresolved warn/' alone/image.conf
  sed -i 's/, "ghost"\]/]/' alone/pkg/mod.py
  expect_fail 5 'from pkg.mod import ghost: ghost is not defined in pkg/mod.py' "$IB" alone -t alone:3
}

# A plain `import a.b` of a module that is not there fails as a from-import
# does (every plain import of the overlay resolves, so nothing else tests it).
t_plain_import_of_a_missing_module_fails() {
  build_base
  copy_images d
  printf 'import vllm.nope\n' >>d/dsv41-flash-dcp2/files/candidate_blocks.py
  expect_fail 5 'candidate_blocks.py:[0-9]+: import vllm.nope: module vllm.nope is not in the image' \
    "$IB" d/dsv41-flash-dcp2 -t m:1
  refute skopeo inspect "oci:$IMGBUILD_STORE:m:1" >/dev/null 2>&1
  # `import vllm.nope as n` too.
  sed -i 's/^import vllm.nope$/import vllm.nope as n/' d/dsv41-flash-dcp2/files/candidate_blocks.py
  expect_fail 5 'candidate_blocks.py:[0-9]+: import vllm.nope: module vllm.nope is not in the image' "$IB" d/dsv41-flash-dcp2 -t m:1
}

t_import_of_a_missing_module_fails() {
  build_base
  copy_images d
  printf 'from vllm.v1.core.no_such_module import thing\n' >>d/dsv41-flash-dcp2/files/candidate_blocks.py
  expect_fail 5 'candidate_blocks.py:[0-9]+: from vllm.v1.core.no_such_module: module vllm.v1.core.no_such_module is not in the image' \
    "$IB" d/dsv41-flash-dcp2 -t m:1
}

# Issue 46: what an import runs under, as the image's Python decides it.
# torch 2.6 imports its internal torch._inductor.fb only under `if
# config.is_fbcode():`, which only the run decides: a module missing there
# is a warning that names the condition, and the build tags.  A condition
# the image's Python decides is decided: never met (a version it is not, a
# platform it is not) and the import is no fault, counted as never run;
# always met and the missing module fails as an unconditional import does.
# The definition can state a module absent (allow-missing MODULE): its
# warning says so and the line is in the provenance (imgverify reruns the
# gate with it).  The oracle is the stand-in's own CPython 3.12 running the
# same lines: they import with the environment unset, fail with VLLM_FB
# set (the warning was no noise), and the always-met import fails.
t_import_conditions_decided_as_the_images_python_decides() {
  stand_in_has_cpython
  [ "$(id -u)" = 0 ] || skip_test "the stand-in's CPython runs in a chroot: root"
  build_base
  copy_images d
  local f=d/dsv41-flash-dcp2/files/candidate_blocks.py
  cat >cond.py <<'PY'
import os, sys
if os.environ.get("VLLM_FB"):
    from vllm.fb.utils import log_cache
if not os.environ.get("VLLM_FB_OFF"):
    pass
else:
    from vllm.v1 import fb_only
if sys.version_info < (3, 8) or sys.platform == "win32":
    import vllm.py37_only
if sys.platform.startswith("linux"): pass
elif True:
    import vllm.not_linux
PY
  printf 'import sys
if sys.version_info >= (3, 8):
    import vllm.py38_plus
' >always.py
  cat cond.py >>"$f"
  "$IB" --smoke=off d/dsv41-flash-dcp2 -t m:1 >/dev/null 2>w.err
  grep -q 'gate symbols *pass' w.err
  grep -q 'warning: .*module vllm.fb.utils is not in the image .*(under the condition `(os.environ.get("VLLM_FB"))` at line [0-9]*, which a static reading cannot decide: a warning)' w.err
  grep -q 'warning: .*fb_only is not defined in .*(under the condition `not (not os.environ.get("VLLM_FB_OFF"))` at line [0-9]*, which a static reading cannot decide' w.err
  refute grep -q 'py37_only\|not_linux' w.err
  grep -q 'symbols: .*, 2 never run by this Python' w.err
  # Always met: an error, as without its `if`.
  cat always.py >>"$f"
  expect_fail 5 'candidate_blocks.py:[0-9]+: import vllm.py38_plus: module vllm.py38_plus is not in the image' \
    "$IB" --smoke=off d/dsv41-flash-dcp2 -t m:2
  refute skopeo inspect "oci:$IMGBUILD_STORE:m:2" >/dev/null 2>&1
  # The oracle: the image's CPython, on the same lines.
  # (a copy: the checkout and the test folder may be on two filesystems)
  cp -a "$ROOT/images/dsv41-flash-b12x/native/amd64" root
  mkdir -p root/tmp && cp cond.py always.py root/tmp/
  local py=("$(command -v chroot)" root /lib/ld-linux-x86-64.so.2 --library-path /lib /usr/bin/python3.12)
  env -i "${py[@]}" /tmp/cond.py
  refute env -i VLLM_FB=1 "${py[@]}" /tmp/cond.py 2>fb.err
  refute env -i "${py[@]}" /tmp/always.py 2>always.err
  grep -q 'ModuleNotFoundError' fb.err
  grep -q 'ModuleNotFoundError' always.err
  # Stated absent: the warning says so, and the provenance keeps the line.
  head -n -3 "$f" >f.tmp && cat f.tmp >"$f"
  sed -i 's/^unresolved warn$/unresolved warn\nallow-missing vllm.fb vllm.v1.fb_only/' d/dsv41-flash-dcp2/image.conf
  "$IB" --smoke=off d/dsv41-flash-dcp2 -t m:3 >/dev/null 2>ok.err
  grep -q 'gate symbols *pass' ok.err
  grep -q 'warning: .*module vllm.fb.utils is not in the image .*(allow-missing vllm.fb in the definition: a warning)' ok.err
  grep -q 'warning: .*fb_only is not defined in .*(allow-missing vllm.v1.fb_only in the definition: a warning)' ok.err
  grep -rlq 'allow-missing vllm.fb vllm.v1.fb_only' "$IMGBUILD_STORE/blobs/sha256"
  "$IV" m:3 2>v.err >/dev/null
  grep -q 'allow-missing vllm.fb in the definition: a warning' v.err
}

# Issue 18: one pass over each base layer.  A cold build (a store that has
# never seen the base) fills the symbol and native gates' caches from the
# file-list pass (layers/store/indexer.h); the same build with the indexers off
# (IMGBUILD_NO_INDEXERS=1) has each gate read the layers itself.  Both
# must decide the same (the same image, the same gate rows, the same
# problems), every record the gates made themselves must be byte for byte
# the one the indexers made, and the indexed build must open the base's
# layer blob fewer times.
t_one_pass_cold_build_equals_the_gates_own_reads() {
  build_base
  "$IB" -q dsv41-flash-b12x -t b:1 --output "oci:$PWD/layout:base" >/dev/null
  copy_images d
  sed -i "s|^from = .*|from = oci:$PWD/layout:base|" d/dsv41-flash-dcp2/image.conf
  base=$(jq -r '.layers[-1].digest' "layout/blobs/sha256/$(jq -r '.manifests[0].digest' layout/index.json | cut -d: -f2)" | cut -d: -f2)
  for mode in one gates; do
    off=
    [ "$mode" = gates ] && off=1
    (export IMGBUILD_NO_INDEXERS=$off IMGBUILD_STORE="$PWD/s-$mode"
     traced -f -qq -e trace=openat,open -o "$mode.opens" "$IB" --smoke=off -t x:1 d/dsv41-flash-dcp2 >"$mode.out" 2>"$mode.err")
    grep -q "gate symbols *pass" "$mode.err"
    grep -q "gate native *pass" "$mode.err"
    sed -n 's/^imgbuild: gate \([a-z-]*\) *\([a-z]*\) .*/\1 \2/p' "$mode.err" >"$mode.rows"
    # Every line the two gates said, less their counters (which differ by design).
    grep -E '^imgbuild: (symbols|native): ' "$mode.err" | grep -Ev ' layer passes, | read, [0-9]+ cached;' | sort >"$mode.problems"
  done
  cmp one.out gates.out # the same manifest digest
  cmp one.rows gates.rows
  cmp one.problems gates.problems
  grep -q 'symbols: Python' one.problems # not vacuous: the gates' own lines are compared
  # The gates read no layer in the indexed build; without indexers they do.
  grep -Eq 'native: .* 0 files read in 0 layer passes, [1-9][0-9]* cached' one.err
  grep -Eq 'native: .* [1-9][0-9]* files read in [1-9][0-9]* layer passes' gates.err
  # The symbol gate reads the overlay's files (its syntax check wants their
  # text) and, with the indexers, next to nothing of the base.
  read_one=$(sed -n 's/^imgbuild: symbols: 23 overlay files.*; \([0-9]*\) read, .*/\1/p' one.err)
  read_gates=$(sed -n 's/^imgbuild: symbols: 23 overlay files.*; \([0-9]*\) read, .*/\1/p' gates.err)
  [ "$read_one" = 23 ] # the overlay's 23: the base's files (extension modules too) all from the indexers
  [ "$read_gates" -gt 30 ]
  # Every record the gates made is the indexers' record, byte for byte.
  n=0
  for kind in pysyms elflink ldconf elfsyms; do
    for f in s-gates/imgbuild/$kind/*; do
      [ -f "$f" ] || continue
      case $(basename "$f") in .*) continue ;; esac
      cmp "$f" "s-one/imgbuild/$kind/$(basename "$f")"
      n=$((n + 1))
    done
  done
  [ "$n" -ge 10 ]
  # Seen from outside: the base layer's blob is opened fewer times.
  one=$(grep -c "blobs/sha256/$base" one.opens)
  gates=$(grep -c "blobs/sha256/$base" gates.opens)
  [ "$one" -lt "$gates" ]
}

# DIR/base: a base with the build machine's CPython 3.11 in it, laid out as
# Debian's merged /usr (/lib and /lib64 are links, the libraries reached by
# their SONAME links, the build machine's ld.so.conf and ld.so.cache), and
# 8 MB that no interpreter needs; DIR/over: an
# overlay over LAYOUT's `base` with one Python file, FILE's text.
python_base() { # DIR LAYOUT FILE
  local d=$1 py=/usr/bin/python3.11 lib=/usr/lib/x86_64-linux-gnu f real
  mkdir -p "$d/base" "$d/over/files"
  head -c 8000000 /dev/urandom >"$d/base/junk.bin"
  {
    printf '[image]\nname = pybase:1\nfrom = scratch\n[copy]\n'
    echo "file $py $py mode=0755"
    echo "symlink /usr/bin/python3 python3.11"
    echo "symlink /lib usr/lib"
    echo "symlink /lib64 usr/lib64"
    echo "symlink /usr/lib64/ld-linux-x86-64.so.2 ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libz.so.1 libexpat.so.1; do
      real=$(readlink -f "$lib/$f")
      echo "file $real $lib/$(basename "$real") mode=0755"
      [ "$(basename "$real")" = "$f" ] || echo "symlink $lib/$f $(basename "$real")"
    done
    echo "tree /usr/lib/python3.11/encodings /usr/lib/python3.11/encodings"
    echo "file /usr/lib/python3.11/os.py /usr/lib/python3.11/os.py"
    echo "file /usr/lib/python3.11/warnings.py /usr/lib/python3.11/warnings.py"
    echo "file junk.bin /usr/share/junk.bin"
    # As Debian's: the loader finds the libraries by ld.so.cache's paths.
    echo "file /etc/ld.so.cache /etc/ld.so.cache"
    echo "file /etc/ld.so.conf /etc/ld.so.conf"
    echo "tree /etc/ld.so.conf.d /etc/ld.so.conf.d"
    printf '[new]\n/\n'
  } >"$d/base/image.conf"
  "$IB" -q --smoke=off "$d/base" --output "oci:$2:base" >/dev/null
  cp "$3" "$d/over/files/m.py"
  printf '[image]\nname = pyover:1\nfrom = oci:%s:base\n[copy]\n' "$2" >"$d/over/image.conf"
  printf 'file files/m.py /usr/lib/python3/dist-packages/pkg/m.py\n[new]\n/usr/lib/python3/\n' >>"$d/over/image.conf"
  printf '[symbols]\npython-path /usr/lib/python3/dist-packages\ncheck-package pkg\n[native]\npackage pkg\n' \
    >>"$d/over/image.conf"
}

# A test that runs the image's CPython (python_base's) in a chroot: root,
# the build machine's python3.11, and not the aarch64 tools under qemu
# (an amd64 image's CPython is not run there); else it is skipped.
needs_image_cpython() {
  [ "$(id -u)" = 0 ] || skip_test "the chroot needs root"
  [ -x /usr/bin/python3.11 ] || skip_test "no /usr/bin/python3.11 on this machine"
  [ -z "${IB_TEST_PLATFORM:-}" ] || skip_test "the image's CPython runs only on its own architecture"
}

# p/over built cold with the indexers (store s-closure) and without
# (s-whole): both pass, the syntax checked by the image's CPython in a
# chroot, the same image.
closure_and_whole() {
  for mode in closure whole; do
    off=
    [ "$mode" = whole ] && off=1
    (export IMGBUILD_NO_INDEXERS=$off IMGBUILD_STORE="$PWD/s-$mode"
     "$IB" --smoke=off p/over >"$mode.out" 2>"$mode.err")
    grep -q 'gate symbols *pass' "$mode.err"
    grep -q "by the image's /usr/bin/python3.11 (in a chroot)" "$mode.err"
  done
  cmp closure.out whole.out
}

# The syntax check of a cold build runs the image's CPython in a chroot of
# only the files it needs (symbol-check/pycompile/pyroot.c): no layer of the base is
# extracted into the store, and the answers are those of the interpreter
# over the whole extracted image (the way taken when the link records are
# not cached: IMGBUILD_NO_INDEXERS).
t_cold_syntax_check_extracts_only_the_interpreters_files() {
  needs_image_cpython
  printf 'def f(:\n    pass\n' >bad.py
  printf 'X = 1\n' >good.py
  python_base p "$PWD/layout" good.py
  closure_and_whole
  # The whole layers on disk only the other way.
  [ -z "$(ls -A s-closure/imgbuild/rootfs 2>/dev/null)" ]
  [ -n "$(ls -A s-whole/imgbuild/rootfs)" ]
  # A file CPython refuses: the same verdict, the same words.
  cp bad.py p/over/files/m.py
  for mode in closure whole; do
    off=
    [ "$mode" = whole ] && off=1
    rm -rf "s-$mode"
    (export IMGBUILD_NO_INDEXERS=$off IMGBUILD_STORE="$PWD/s-$mode"
     expect_fail 5 'symbols' "$IB" --smoke=off p/over)
    grep -E '^imgbuild: (symbols|error)' stderr.txt >"$mode.lines"
  done
  grep -q 'never closed\|invalid syntax' closure.lines
  cmp closure.lines whole.lines
  [ -z "$(ls -A s-closure/imgbuild/rootfs 2>/dev/null)" ]
}

# The same without [native]: the native indexer is registered for the
# symbol gate's syntax check too (builder/indexers.c), so the interpreter's
# program closure is found from cached records and no layer is extracted
# whole; the verdict is the full extraction's.
t_cold_syntax_check_without_native_extracts_only_the_interpreters_files() {
  needs_image_cpython
  printf 'X = 1\n' >good.py
  python_base p "$PWD/layout" good.py
  sed -i '/^\[native\]$/,$d' p/over/image.conf
  ! grep -q native p/over/image.conf # not vacuous: no [native] left
  closure_and_whole
  [ -z "$(ls -A s-closure/imgbuild/rootfs 2>/dev/null)" ]
  [ -n "$(ls -A s-whole/imgbuild/rootfs)" ]
}

# layer_of TAR NAME=TEXT...: a layer with the files of pkg/ in the order given
# (one name may come twice), not in path order as imgbuild writes its own.
layer_of() {
  python3 - "$@" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for spec in sys.argv[2:]:
        name, text = spec.split("=", 1)
        data = (text + "\n").encode()
        ti = tarfile.TarInfo("usr/lib/python3/dist-packages/pkg/" + name)
        ti.size, ti.mode = len(data), 0o644
        t.addfile(ti, io.BytesIO(data))
PY
}

# verify_order N IMAGE [DEF]: imgverify of LAYOUT:IMAGE (its top layer is
# the overlay) against DEF (def/); the symbol gate's lines less its counters of
# files read and answers cached (which differ by design) to N.lines, those
# counters to N.counts.
verify_order() {
  expect_fail 5 'gate symbols' "$IV" --allow-unsafe-base --definition "${3:-def}" "oci:$PWD/layout:$2"
  grep '^imgverify: symbols: ' stderr.txt | grep -v '^imgverify: symbols: Python ' |
    sed 's/; [0-9]* read, [0-9]* cached;/;/' >"$1.lines"
  sed -n 's/^imgverify: symbols: .*; \([0-9]* read, [0-9]* cached\);.*/\1/p' stderr.txt >"$1.counts"
}

# A warm check takes its overlay's files from the caches (by content
# digest) in the order their layer holds them, which is the report's: the
# same lines, byte for byte, as reading them.  Another overlay layer, a
# layer with a path twice, or a damaged record of the order: read again.
t_symbol_gate_overlay_files_from_the_caches_in_the_layers_order() {
  needs_image_cpython
  printf 'X = 1\n' >good.py
  python_base p "$PWD/layout" good.py
  imp() { echo "$1.py=from pkg.a import missing_$2"; }
  layer_of mid1.tar 'a.py=x = 1'
  layer_of mid2.tar 'a.py=missing_z = 1'
  layer_of top1.tar "$(imp z z)" "$(imp m m)" "$(imp b b)"
  layer_of top2.tar "$(imp z y)" "$(imp m m)" "$(imp b b)"
  layer_of dup.tar "$(imp z q)" "$(imp m m)" "$(imp b b)" "$(imp z z)"
  for i in 1 2; do
    umoci raw add-layer --image layout:base --tag "i$i" mid1.tar
    umoci raw add-layer --image "layout:i$i" --tag "i$i" "top$i.tar"
  done
  umoci raw add-layer --image layout:base --tag b2 mid2.tar
  umoci raw add-layer --image layout:b2 --tag b2 top1.tar
  umoci raw add-layer --image layout:base --tag dup mid1.tar
  umoci raw add-layer --image layout:dup --tag dup dup.tar
  mkdir -p def/files
  printf '[image]\nname = over:1\nfrom = oci:%s/layout:base\n[copy]\n' "$PWD" >def/image.conf
  for n in z m b; do
    echo "from pkg.a import missing_$n" >"def/files/$n.py"
    echo "file files/$n.py /usr/lib/python3/dist-packages/pkg/$n.py" >>def/image.conf
  done
  printf '[symbols]\npython-path /usr/lib/python3/dist-packages\ncheck-package pkg\n' >>def/image.conf
  verify_order cold i1
  # The report's order is the layer's (z m b), not the paths' (b m z).
  [ "$(grep -o 'import missing_[a-z]*' cold.lines | tr '\n' ' ')" = "import missing_z import missing_m import missing_b " ]
  grep -q '^[1-9][0-9]* read' cold.counts
  verify_order warm i1
  grep -qx '0 read, [1-9][0-9]* cached' warm.counts
  cmp cold.lines warm.lines
  memo=$(ls "$IMGBUILD_STORE"/imgbuild/pyorder/*) # the one record: this overlay's
  # Over another base, the same overlay from the caches, judged by that
  # base: its new pkg/a.py too, indexed in imgverify's one pass over the
  # layers (the gate read it itself before that pass: 1 read).
  verify_order b2 b2
  grep -qx '0 read, [1-9][0-9]* cached' b2.counts
  refute grep -q 'import missing_z' b2.lines
  grep -q 'import missing_m' b2.lines
  # An overlay file changed: another layer, its files read.
  cp def/files/z.py z.keep
  echo "from pkg.a import missing_y" >def/files/z.py
  verify_order changed i2
  grep -q '^[1-9][0-9]* read' changed.counts
  grep -q 'import missing_y' changed.lines
  refute grep -q 'import missing_z' changed.lines
  cp z.keep def/files/z.py
  # The record of the order cut short, a line short, naming one of the
  # overlay's files twice (and so not another): each time read again, the
  # same lines.
  grep -q 'pkg/b.py' "$memo"
  head -n 2 "$memo" >cut
  cat cut >"$memo"
  verify_order cut i1
  grep -q '^[1-9][0-9]* read' cut.counts
  cmp cold.lines cut.lines
  grep -q 'pkg/b.py' "$memo" # written whole again
  sed -i '/pkg\/m.py/d' "$memo"
  verify_order short i1
  grep -q '^[1-9][0-9]* read' short.counts
  cmp cold.lines short.lines
  sed -i 's|pkg/b.py|pkg/z.py|' "$memo"
  [ "$(grep -c 'pkg/z.py' "$memo")" = 2 ]
  verify_order other i1
  grep -q '^[1-9][0-9]* read' other.counts
  cmp cold.lines other.lines
  verify_order again i1 # and whole again: from the caches
  grep -qx '0 read, [1-9][0-9]* cached' again.counts
  cmp cold.lines again.lines
  # A path twice in the layer: both copies checked, each time, none kept
  # (the definition names no file: its copy of z.py would be either).
  mkdir -p dup
  sed '/^\[copy\]/,/^\[symbols\]/{/^file /d}' def/image.conf >dup/image.conf
  refute grep -q '^file ' dup/image.conf
  for n in 1 2; do
    verify_order "dup$n" dup dup
    grep -q '^[1-9][0-9]* read' "dup$n.counts"
    [ "$(grep -o 'import missing_[a-z]*' "dup$n.lines" | tr '\n' ' ')" = "import missing_q import missing_m import missing_b import missing_z " ]
  done
  cmp dup1.lines dup2.lines
}

# The stand-in base has CPython 3.12 of its own (Ubuntu 24.04's, as the
# real base), and this machine none of that version: the syntax check runs
# the image's /usr/bin/python3.12 in its chroot.  A merge conflict marker
# outside a string is an error naming the file and the line; markers inside
# a string are none, in a file with a PEP 695 alias that python3.11 (the
# build machine's) refuses and 3.12 takes: no warning either.
t_conflict_markers_fail_the_stand_in_by_its_cpython() {
  stand_in_has_cpython
  build_base
  copy_images d
  f=d/dsv41-flash-dcp2/files/cp_utils.py
  python3 - "$f" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = "    return (pos // interleave) % dcp\n"
assert old in s
s = s.replace(old, "<<<<<<< ours\n" + old + "=======\n    return pos % dcp\n>>>>>>> theirs\n")
open(p, "w").write(s)
PY
  line=$(grep -n '^<<<<<<< ours$' "$f" | cut -d: -f1)
  [ -n "$line" ]
  # candidate_blocks.py: a PEP 695 alias (3.12) and markers in a docstring.
  printf '\ntype _Pair = tuple[int, int]\n\n\ndef _doc():\n    """\n=======\n<<<<<<< not a conflict\n>>>>>>> nor this\n    """\n' \
    >>d/dsv41-flash-dcp2/files/candidate_blocks.py
  expect_fail 5 "vllm/v1/worker/cp_utils.py:$line: .*merge conflict marker" "$IB" --smoke=off d/dsv41-flash-dcp2 -t dcp2:conflict
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:conflict" >/dev/null 2>&1
  refute grep -q 'candidate_blocks.py' stderr.txt
  grep -Eq "syntax: [1-9][0-9]* compiled by the image's /usr/bin/python3.12 \\(in a chroot\\)" stderr.txt
  # Resolved, the markers in the docstring do not fail it.
  cp "$ROOT/images/dsv41-flash-dcp2/files/cp_utils.py" "$f"
  "$IB" --smoke=off d/dsv41-flash-dcp2 -t dcp2:resolved >/dev/null 2>resolved.err
  grep -q 'gate symbols *pass' resolved.err
}

# An image with no interpreter of its own (Python files over scratch, of
# 3.12 by their path): the build machine's python3 of another version
# answers, and its refusals are only warnings, naming it (3.11 refuses a PEP
# 695 alias that 3.12 takes); a merge conflict marker outside a string is
# an error all the same, since every CPython refuses it.
t_no_interpreter_in_the_image_the_build_machines_refusals_warn() {
  local P=/usr/local/lib/python3.12/dist-packages
  [ ! -x /usr/bin/python3.12 ] || skip_test "this machine has a python3.12, which would answer for the image"
  mkdir -p w/pkg
  printf 'type Pair = tuple[int, int]\n' >w/pkg/alias.py
  : >w/pkg/__init__.py
  printf '[image]\nname = w:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile pkg/__init__.py %s/pkg/__init__.py\nfile pkg/alias.py %s/pkg/alias.py\n[new]\n/\n[symbols]\npython-path %s\ncheck-package pkg\n' \
    "$P" "$P" "$P" >w/image.conf
  "$IB" w >/dev/null 2>w.err
  grep -q "symbols: warning: pkg/alias.py:1: the build machine.s /usr/bin/python3 refuses it" w.err
  grep -q "syntax: .* compiled by the build machine's /usr/bin/python3," w.err
  grep -q 'gate symbols *pass' w.err
  printf 'def f():\n<<<<<<< ours\n    return 1\n=======\n    return 2\n>>>>>>> theirs\n' >w/pkg/alias.py
  expect_fail 5 'pkg/alias.py:2: every CPython refuses it: a merge conflict marker' "$IB" w -t w:2
}

# DIR/root: Debian trixie's CPython 3.13 for ARCH (python3-minimal and the
# packages it needs, unpacked from the .debs of
# $IMGBUILD_REALBASE_CACHE/debs/trixie-ARCH), and DIR/oci:base, an image of
# it laid out by umoci; sets BASE.  Without the .debs, in the long tier,
# scripts/real-base.sh's trixie base of python3-minimal (no ROOT then).
trixie_python_base() { # DIR ARCH
  local debs=${IMGBUILD_REALBASE_CACHE:-/var/cache/imgbuild/realbase}/debs/trixie-$2 p f
  mkdir -p "$1/root"
  for p in libc6 zlib1g libexpat1 libpython3.13-minimal python3.13-minimal python3-minimal; do
    f=$(ls "$debs/${p}"_*_"$2".deb 2>/dev/null | head -1)
    if [ -z "$f" ]; then
      [ -n "${IMGBUILD_TEST_ALL:-}" ] ||
        skip_test "no ${p}_*_$2.deb in $debs (IMGBUILD_TEST_ALL=1: scripts/real-base.sh makes the base)"
      BASE=$("$ROOT/scripts/real-base.sh" --arch "$2" --suite trixie --packages python3-minimal | sed -n 's/^ref=//p')
      return 0
    fi
    dpkg -x "$f" "$1/root"
  done
  # base-files' links (merged /usr)
  ln -s usr/lib "$1/root/lib"
  [ "$2" != amd64 ] || ln -s usr/lib64 "$1/root/lib64"
  umoci init --layout "$1/oci"
  umoci new --image "$1/oci:base"
  umoci config --image "$1/oci:base" --architecture="$2" --os=linux
  umoci insert --image "$1/oci:base" "$1/root" /
  BASE=oci:$PWD/$1/oci:base
}

needs_qemu_for_arm64() {
  [ "$(id -u)" = 0 ] || skip_test "the chroot needs root"
  [ -z "${IB_TEST_PLATFORM:-}" ] || skip_test "the aarch64 tools run an arm64 image's CPython natively"
  [ -x /usr/bin/qemu-aarch64-static ] || skip_test "no qemu-aarch64-static (apt-get install qemu-user-static)"
}

# An arm64 image's python3.13, which this machine does not have, judges the
# overlay's syntax under qemu-user: five files refused, each named, and a
# file of Python 3.12's grammar that the build machine's 3.11 refuses is
# not.  Without qemu (IMGBUILD_QEMU=off) the gate does not pass: a skip
# with its reason, which imgverify --require-gates symbols fails on.
t_arm64_image_syntax_checked_by_its_cpython_under_qemu() {
  needs_qemu_for_arm64
  trixie_python_base p arm64
  mkdir -p over/files
  printf 'def f(:\n    pass\n' >over/files/colon.py
  printf 'if x:\ny = 1\n' >over/files/indent.py
  printf 'x = (1,\n' >over/files/bracket.py
  printf 'x = = 1\n' >over/files/assign.py
  printf 'def g():\n<<<<<<< ours\n    return 1\n=======\n    return 2\n>>>>>>> theirs\n' >over/files/conflict.py
  printf 'type Pair = tuple[int, int]\n' >over/files/pep695.py
  {
    printf '[image]\nname = arm:1\nfrom = %s\n[copy]\n' "$BASE"
    for f in colon indent bracket assign conflict pep695; do
      echo "file files/$f.py /usr/lib/python3/dist-packages/pkg/$f.py"
    done
    printf '[new]\n/usr/lib/python3/dist-packages/\n'
    printf '[symbols]\npython-path /usr/lib/python3/dist-packages\ncheck-package pkg\n'
  } >over/image.conf
  expect_fail 5 'pkg/assign.py:1: CPython 3.13 refuses it: invalid syntax \(and 4 more' "$IB" --smoke=off over -t arm:1
  for f in colon:1 indent:2 bracket:1 assign:1 conflict:2; do
    grep -q "^imgbuild: symbols: pkg/${f%:*}.py:${f#*:}: CPython 3.13 refuses it" stderr.txt
  done
  refute grep -q 'pep695' stderr.txt
  grep -q "syntax: 6 compiled by the image's /usr/bin/python3.13 (under /usr/bin/qemu-aarch64-static, in a chroot)" \
    stderr.txt
  refute skopeo inspect "oci:$IMGBUILD_STORE:arm:1" >/dev/null 2>&1
  [ ! -x /usr/bin/python3.13 ] || return 0 # the rest needs no CPython 3.13 here
  # No qemu: the build machine's python3 answers; the conflict marker still
  # fails the build, the other refusals are warnings.
  export IMGBUILD_STORE=$PWD/noqemu IMGBUILD_QEMU=off
  expect_fail 5 'pkg/conflict.py:2: every CPython refuses it: a merge conflict marker' "$IB" --smoke=off over -t arm:2
  grep -q "symbols: syntax not checked by the image's CPython: /usr/bin/python3.13 is for arm64, .* IMGBUILD_QEMU=off" \
    stderr.txt
  # Without it: tagged, but the symbol gate skips, saying why.
  rm over/files/conflict.py
  sed -i '/conflict/d' over/image.conf
  "$IB" --smoke=off over -t arm:3 >/dev/null 2>off.err
  grep -q 'gate symbols *skip .*syntax not checked: /usr/bin/python3.13 is for arm64' off.err
  grep -q 'symbols: warning: pkg/colon.py:1: the build machine.s /usr/bin/python3 refuses it' off.err
  expect_fail 5 'gate symbols did not run, and --require-gates names it: syntax not checked' \
    "$IV" --require-gates symbols arm:3
  # With qemu, imgverify judges the tagged image as the build would have.
  unset IMGBUILD_QEMU
  expect_fail 5 'gate symbols: pkg/assign.py:1: CPython 3.13 refuses it' "$IV" arm:3
}

# The arm64 CPython 3.13 under qemu-user (the gate) against the x86-64
# CPython 3.13 of the same Debian release in a chroot (the reference), on
# 441 mutants of the arm64 image's own standard library
# (tests/pyref/syntax-campaign.sh): the same verdicts and lines.  Long
# (qemu-user compiles them in about three minutes on 2 cores).
tall_arm64_syntax_campaign_under_qemu_agrees_with_x86_64_cpython_3_13() {
  needs_qemu_for_arm64
  trixie_python_base ref amd64
  [ -d ref/root ] || skip_test "the x86-64 reference is made from the trixie-amd64 .debs"
  mkdir -p ref/root/mnt
  trixie_python_base p arm64
  [ -d p/root ] || skip_test "the mutants are made from the arm64 image's standard library"
  "$ROOT/tests/pyref/syntax-campaign.sh" "$IB" "$BASE" "$PWD/ref/root" /usr/lib/python3/dist-packages 441 45 \
    chroot:/usr/bin/python3.13 $(find p/root/usr/lib/python3.13 -maxdepth 1 -name '*.py' -type f) | tee campaign.out
  grep -q '^syntax-campaign: 441 mutants, [1-9][0-9]* refused by the reference, 441 agree, 0 disagree$' campaign.out
  keep campaign.out
  figure "$(grep '^syntax-campaign:' campaign.out) (arm64 CPython 3.13 under qemu against x86-64 3.13)"
}
