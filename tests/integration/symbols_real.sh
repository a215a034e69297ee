# The symbol gate on a real base made from Debian packages
# (scripts/real-base.sh: bookworm with python3-torch and python3-scipy), with
# CPython itself as the oracle: `python3 -c "import M"` in a chroot of the
# merged image, and compile() for the syntax campaigns.
# The long tier (tall_*, `make test-all`): the cold extraction of the 2 GB
# base for the chroot is minutes on 2 cores, too long for CI's `make test`;
# there the campaigns run 1,000 mutants each.  The base's setuid files
# (su, mount) are counted, not refused (issue 45): it builds with no flag.

REAL_SITE=usr/lib/python3/dist-packages

real_base() { # [real-base.sh ARGS]: sets rootfs, oci, ref
  eval "$("$ROOT/scripts/real-base.sh" "$@")"
}

# A store that has seen the real base once (its file list, the extracted
# layer the gate's CPython runs in, the per-file caches, the reverse index),
# shared by the tests of a run as build_base shares the stand-in's.
real_store() {
  local seed=$T_TOP/real-seed-store
  if [ ! -f "$seed/index.json" ]; then
    mkdir -p "$T_TOP/real-warm/files/torch"
    echo "# warm" >"$T_TOP/real-warm/files/torch/__config__.py"
    cat "$rootfs/$REAL_SITE/torch/__config__.py" >>"$T_TOP/real-warm/files/torch/__config__.py"
    real_def "$T_TOP/real-warm" torch
    IMGBUILD_STORE=$seed "$IB" -q --smoke=off "$T_TOP/real-warm" -t warm:1 >/dev/null
  fi
  mkdir -p "$IMGBUILD_STORE"
  cp -al "$seed/." "$IMGBUILD_STORE/"
}

# DIR/image.conf over the real base: every file of DIR/files at its place
# under dist-packages ([new] for those the base lacks); PACKAGES checked.
real_def() { # DIR PACKAGE...
  local dir=$1 f
  shift
  {
    printf '[image]\nname = real-overlay:1\nfrom = %s\n[copy]\n' "$ref"
    (cd "$dir/files" && find . -type f | sed 's|^\./||' | sort) | while read -r f; do
      echo "file files/$f /$REAL_SITE/$f"
    done
    echo "[new]"
    (cd "$dir/files" && find . -type f | sed 's|^\./||' | sort) | while read -r f; do
      [ -e "$rootfs/$REAL_SITE/$f" ] || echo "/$REAL_SITE/$f"
    done
    printf '[symbols]\npython-path /%s\n' "$REAL_SITE"
    for p in "$@"; do echo "check-package $p"; done
  } >"$dir/image.conf"
}

# CPython's verdict: import MODULE in a chroot of the base with DIR/files
# over it (overlayfs in a private mount namespace; the base stays as it is).
oracle_import() { # DIR MODULE
  local up=$PWD/oracle-up.$$ mnt=$PWD/oracle-mnt.$$ rc=0
  rm -rf "$up" && mkdir -p "$up/$REAL_SITE" "$mnt"
  cp -a "$1/files/." "$up/$REAL_SITE/"
  unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1:$2" "$3" && mount -t proc proc "$3/proc" &&
    exec chroot "$3" python3 -c "import $4"' sh "$up" "$rootfs" "$mnt" "$2" >oracle.out 2>&1 || rc=$?
  rm -rf "$up"
  rmdir "$mnt"
  return $rc
}

# One oracle case: a copy of torch/_jit_internal.py (imported by `import
# torch`, its names imported by torch/functional.py and torch/nn/functional.py)
# changed by the sed or python script in $2; the gate's verdict and CPython's.
oracle_case() { # NAME EDIT-SCRIPT(python, file path in argv[1]) MODULE
  local d=case-$1
  mkdir -p "$d/files/torch"
  cp "$rootfs/$REAL_SITE/torch/_jit_internal.py" "$d/files/torch/"
  python3 -c "$2" "$d/files/torch/_jit_internal.py"
  real_def "$d" torch
  local gate=pass cpython=pass
  "$IB" --smoke=off "$d" -t "case:$1" >"$d.out" 2>"$d.err" || gate=fail
  oracle_import "$d" "${3:-torch}" || cpython=fail
  echo "$1 gate=$gate cpython=$cpython" | tee -a verdicts.txt
  [ "$gate" = fail ] && grep 'error:' "$d.err" | head -1 | tee -a verdicts.txt
  return 0
}

tall_real_gate_equals_cpython_import() {
  real_base
  real_store
  local f='import sys; p = sys.argv[1]; s = open(p).read()'
  oracle_case unchanged "$f; open(p, 'w').write('# a comment, nothing else\n' + s)"
  oracle_case missing-name "$f; open(p, 'w').write(s + '\nfrom torch._utils import no_such_helper\n')"
  oracle_case removed-definition "$f; open(p, 'w').write(s.replace('def boolean_dispatch(', 'def boolean_dispatch_gone('))"
  oracle_case missing-colon "$f; open(p, 'w').write(s.replace('def is_scripting() -> bool:', 'def is_scripting() -> bool'))"
  oracle_case bad-indent "$f; open(p, 'w').write(s.replace('\ndef is_scripting()', '\n  def is_scripting()'))"
  oracle_case bad-dedent "$f; open(p, 'w').write(s.replace('\ndef is_scripting() -> bool:\n    r', '\ndef is_scripting() -> bool:\nr', 1))"
  oracle_case conflict-markers "$f; open(p, 'w').write(s.replace('\ndef is_scripting() -> bool:', '\n<<<<<<< ours\ndef is_scripting() -> bool:\n=======\ndef is_scripting():\n>>>>>>> theirs', 1))"
  oracle_case guarded-missing "$f; open(p, 'w').write(s + '\ntry:\n    import torch.no_such_module_at_all\nexcept ImportError:\n    pass\n')"
  # Conditions (docs/gates.md): never met by CPython 3.11, always met, and
  # one that only the run decides (a warning; the image imports).
  oracle_case cond-never "$f; open(p, 'w').write(s + '\nimport sys\nif sys.version_info < (3, 0):\n    from torch._utils import no_such_helper\n')"
  oracle_case cond-always "$f; open(p, 'w').write(s + '\nimport sys\nif sys.version_info >= (3, 8):\n    from torch._utils import no_such_helper\n')"
  oracle_case cond-run-time "$f; open(p, 'w').write(s + '\nimport os\nif os.environ.get(\"IMGBUILD_NEVER_SET\"):\n    import torch.no_such_module_at_all\n')"
  # A new extension module that is no Python module (no PyInit__fake_ext).
  mkdir -p case-no-pyinit/files/torch
  cp "$(find "$rootfs/usr/lib/x86_64-linux-gnu" -name 'libz.so.1*' -type f | head -1)" \
    case-no-pyinit/files/torch/_fake_ext.cpython-311-x86_64-linux-gnu.so
  echo 'import torch._fake_ext' >case-no-pyinit/files/torch/_use_fake.py
  real_def case-no-pyinit torch
  local gate=pass cpython=pass
  "$IB" --smoke=off case-no-pyinit -t case:pyinit >case-no-pyinit.out 2>case-no-pyinit.err || gate=fail
  oracle_import case-no-pyinit torch._use_fake || cpython=fail
  echo "no-pyinit gate=$gate cpython=$cpython" | tee -a verdicts.txt
  cat verdicts.txt
  # Every case: the gate's verdict is CPython's.
  awk '/ gate=/ { split($2, g, "="); split($3, c, "="); if (g[2] != c[2]) bad = 1 } END { exit bad }' verdicts.txt
  [ "$(grep -c 'gate=pass cpython=pass' verdicts.txt)" = 4 ]
  [ "$(grep -c 'gate=fail cpython=fail' verdicts.txt)" = 8 ]
  # And the messages say what CPython would.
  grep -q "torch/_jit_internal.py:[0-9]*: from torch._utils import no_such_helper: no_such_helper is not defined in torch/_utils.py" verdicts.txt
  grep -q "torch/functional.py:13: from torch._jit_internal import boolean_dispatch: .*imported by the image's torch/functional.py" verdicts.txt
  grep -q "torch/_jit_internal.py:[0-9]*: CPython 3.11 refuses it: expected ':'" verdicts.txt
  grep -q "torch/_jit_internal.py:[0-9]*: CPython 3.11 refuses it: .*(a merge conflict marker)" verdicts.txt
  grep -q "torch/_use_fake.py:1: import torch._fake_ext: .* does not export PyInit__fake_ext" case-no-pyinit.err
  grep -q "torch.no_such_module_at_all.*a guarded import: a warning" case-guarded-missing.err
  grep -q "torch.no_such_module_at_all.*under the condition \`(os.environ.get(\"IMGBUILD_NEVER_SET\"))\` at line [0-9]*, which a static reading cannot decide: a warning" case-cond-run-time.err
  never() { sed -n 's/.*, \([0-9]*\) never run by this Python.*/\1/p' "$1"; }
  [ "$(never case-cond-never.err)" = "$(($(never case-unchanged.err) + 1))" ]
  # Nothing failed was tagged.
  refute skopeo inspect "oci:$IMGBUILD_STORE:case:missing-colon" >/dev/null 2>&1
  keep verdicts.txt
  figure "$(grep -c ' gate=' verdicts.txt) cases over torch: the gate's verdict = CPython's import on every one ($(grep -c 'gate=pass cpython=pass' verdicts.txt) pass, $(grep -c 'gate=fail cpython=fail' verdicts.txt) fail)"
}

tall_real_all_of_torch_and_scipy_unchanged_has_no_errors() {
  real_base
  real_store
  mkdir -p all
  (cd "$rootfs/$REAL_SITE" && find torch scipy -name '*.py' -type f) | while read -r f; do
    mkdir -p "all/tree/$(dirname "$f")"
    cp -p "$rootfs/$REAL_SITE/$f" "all/tree/$f"
  done
  printf '[image]\nname = all:1\nfrom = %s\n[copy]\ntree tree/torch /%s/torch\ntree tree/scipy /%s/scipy\n' \
    "$ref" "$REAL_SITE" "$REAL_SITE" >all/image.conf
  printf '[symbols]\npython-path /%s\ncheck-package torch\ncheck-package scipy\n' "$REAL_SITE" >>all/image.conf
  "$IB" --smoke=off all 2>all.err >/dev/null
  cat all.err | grep -v 'warning:'
  grep -q 'gate symbols *pass' all.err
  # Every module of both packages went through the gate.
  n=$(sed -n 's/.*symbols: \([0-9]*\) overlay files.*/\1/p' all.err)
  [ "$n" -gt 1900 ]
  grep -Eq 'symbols: .* [1-9][0-9]* warnings, [1-9][0-9]* unchecked' all.err
  grep -E 'gate symbols|symbols: [0-9]+ overlay files' all.err >summary.txt || true
  keep summary.txt
  figure "unchanged torch + scipy: $n overlay files, 0 errors ($(grep -Eo '[0-9]+ warnings, [0-9]+ unchecked' all.err | head -1))"
}

campaign_size() { [ -n "${IMGBUILD_TEST_ALL:-}" ] && echo 1000 || echo "$1"; }

tall_real_syntax_campaign_agrees_with_cpython_3_11() {
  real_base
  real_store
  "$ROOT/tests/pyref/syntax-campaign.sh" "$IB" "$ref" "$rootfs" "/$REAL_SITE" "$(campaign_size 150)" 311 \
    /usr/bin/python3.11 $(find "$rootfs/$REAL_SITE/torch" -name '*.py' -type f -size +1k | sort) | tee campaign.out
  grep -Eq '^syntax-campaign: [0-9]+ mutants, [1-9][0-9]* refused by the reference, [0-9]+ agree, 0 disagree' campaign.out
  keep campaign.out
  figure "$(grep '^syntax-campaign:' campaign.out) (CPython 3.11)"
}

tall_real_syntax_campaign_agrees_with_cpython_3_13() {
  real_base --suite trixie --packages python3
  "$ROOT/tests/pyref/syntax-campaign.sh" "$IB" "$ref" "$rootfs" /usr/lib/python3/dist-packages "$(campaign_size 100)" 313 \
    chroot:/usr/bin/python3.13 $(find "$rootfs/usr/lib/python3.13" -name '*.py' -type f -size +1k | sort) | tee campaign.out
  grep -Eq '^syntax-campaign: [0-9]+ mutants, [1-9][0-9]* refused by the reference, [0-9]+ agree, 0 disagree' campaign.out
  keep campaign.out
  figure "$(grep '^syntax-campaign:' campaign.out) (CPython 3.13 in a trixie chroot)"
}
