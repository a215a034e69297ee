# Port triage (issue 17): drift pins written by imgbuild --lock and checked
# by the definition gate, imgverify --diff, and imgverify --triage with its
# buckets, --require-superset and [triage] require lines, on the stand-in.

TV=dsv41-flash-b12x/site-packages/vllm
# The seed's four "needs a 3-way merge" files: our pin is newer in these.
MERGE4="model_executor/layers/sparse_attn_indexer.py v1/attention/backends/mla/indexer.py
v1/attention/backends/mla/sparse_swa.py v1/core/kv_cache_utils.py"

# newer_body FILE [ADD]: the first module-level def or class of FILE gets one
# more statement in its body (a newer version of it); with ADD, a new
# function drift_probe_added is appended.  Prints the changed name.
newer_body() {
  python3 - "$1" "${2:-}" <<'PY'
import ast, sys
p, add = sys.argv[1], sys.argv[2]
src = open(p).read()
lines = src.splitlines(True)
node = next(n for n in ast.parse(src).body if isinstance(n, (ast.FunctionDef, ast.ClassDef)))
first = node.body[0]
indent = lines[first.lineno - 1][: first.col_offset]
lines.insert(first.lineno - 1, indent + "_newer_upstream = 1\n")
if add:
    lines.append("\n\ndef drift_probe_added():\n    return 1\n")
open(p, "w").write("".join(lines))
print(node.name)
PY
}

# drop_def FILE NAME: FILE without its module-level def or class NAME.
drop_def() {
  python3 - "$1" "$2" <<'PY'
import ast, sys
p, name = sys.argv[1], sys.argv[2]
src = open(p).read()
lines = src.splitlines(True)
node = next(n for n in ast.parse(src).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
start = min([node.lineno] + [d.lineno for d in node.decorator_list])
del lines[start - 1 : node.end_lineno]
open(p, "w").write("".join(lines))
PY
  refute grep -Eq "^(def|class) $2\b" "$1"
}

t_drift_pins_fail_the_build_when_the_base_moves() {
  build_base
  copy_images d
  # The committed lock is what --lock writes against the stand-in base.
  "$IB" --lock d/dsv41-flash-dcp2 >lock.out
  [ "$(cat lock.out)" = d/dsv41-flash-dcp2/manifest.lock ]
  diff <(grep -v '^# base' "$ROOT/images/dsv41-flash-dcp2/manifest.lock") \
    <(grep -v '^# base' d/dsv41-flash-dcp2/manifest.lock)
  [ "$(grep -c '^/' d/dsv41-flash-dcp2/manifest.lock)" = 23 ]
  [ "$(grep -c ' absent$' d/dsv41-flash-dcp2/manifest.lock)" = 7 ]
  # A second base whose vLLM tree is newer in four of the replaced files.
  : >expected
  for f in $MERGE4; do
    echo "$f $(newer_body d/$TV/$f add)" >>expected
  done
  "$IB" -q d/dsv41-flash-b12x -t base:newer >/dev/null
  expect_fail 3 'gate definition: manifest.txt:[0-9]+: .* drifted from its pin' \
    "$IB" d/dsv41-flash-dcp2 --from base:newer -t dcp2:drift
  # Exactly those four, each with what changed in it.
  # One problem line each (the gate's row and the error line repeat the first).
  grep '^imgbuild: definition: ' stderr.txt >problems.txt
  [ "$(grep -c 'drifted from its pin' problems.txt)" = 4 ]
  while read -r f name; do
    grep "$SITE/vllm/$f drifted" problems.txt >line.txt
    [ "$(wc -l <line.txt)" = 1 ]
    grep -Eq "pinned sha256:[0-9a-f]{64} \(manifest.lock:[0-9]+\), found sha256:[0-9a-f]{64} \(layer sha256:[0-9a-f]{64}\); definitions changed: $name; definitions added: drift_probe_added( \(and 3 more, listed above\))?$" line.txt
  done <expected
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2:drift" >/dev/null 2>&1
  # Locked again over the new base, the same build passes.
  "$IB" -q --lock d/dsv41-flash-dcp2 --from base:newer >/dev/null
  "$IB" -q d/dsv41-flash-dcp2 --from base:newer -t dcp2:relocked >ok.out
  grep -q '^dcp2:relocked sha256:' ok.out
}

t_drift_pins_catch_a_new_file_that_upstream_landed() {
  build_base
  copy_images d
  # Upstream lands candidate_blocks.py, which the overlay adds as [new].
  cp d/dsv41-flash-dcp2/files/candidate_blocks.py d/$TV/v1/core/candidate_blocks.py
  "$IB" -q d/dsv41-flash-b12x -t base:landed >/dev/null
  expect_fail 3 'v1/core/candidate_blocks.py is new in this definition but the base now has it .*manifest.lock:[0-9]+ pins it absent\): upstream landed the file; definitions added: .*CandidateBlocks' \
    "$IB" d/dsv41-flash-dcp2 --from base:landed -t dcp2:landed
  # A target without a pin fails too, and a malformed lock line is named.
  copy_images e
  sed -i '/cp_utils.py sha256/,+1d' e/dsv41-flash-dcp2/manifest.lock
  echo 'garbage' >>e/dsv41-flash-dcp2/manifest.lock
  expect_fail 3 'manifest.lock:[0-9]+: malformed line' "$IB" e/dsv41-flash-dcp2 -t dcp2:nopin
  grep -q 'v1/worker/cp_utils.py has no pin in manifest.lock' stderr.txt
}

# --diff names every kind of change between two small images (from scratch,
# no base needed): content, mode alone, a symbolic link's target, a file
# turned into a link, a file gone, a file new; and nothing for a file that
# is the same on both sides.
t_diff_names_every_kind_of_change() {
  mkdir -p a b
  echo same >a/same.txt
  echo one >a/content.txt
  echo two >b/content.txt
  printf '#!/bin/sh\n' >a/run.sh
  echo gone >a/gone.txt
  echo file >a/type.txt
  echo new >b/new.txt
  cp a/same.txt a/run.sh b/
  printf '[image]\nname = diff:a\nfrom = scratch\n[copy]\nfile same.txt /same.txt\nfile content.txt /content.txt\nfile run.sh /run.sh mode=0644\nsymlink /link same.txt\nfile gone.txt /gone.txt\nfile type.txt /type.txt\n[new]\n/\n' >a/image.conf
  printf '[image]\nname = diff:b\nfrom = scratch\n[copy]\nfile same.txt /same.txt\nfile content.txt /content.txt\nfile run.sh /run.sh mode=0755\nsymlink /link content.txt\nsymlink /type.txt same.txt\nfile new.txt /new.txt\n[new]\n/\n' >b/image.conf
  "$IB" -q --smoke=off a >/dev/null
  "$IB" -q --smoke=off b >/dev/null
  "$IV" --diff diff:a diff:b --json >diff.json
  jq -r '.files[] | "\(.change) \(.path)"' diff.json | sort >got.txt
  printf '%s\n' 'added /new.txt' 'changed /content.txt' 'changed /link' 'changed /run.sh' 'changed /type.txt' \
    'removed /gone.txt' >want.txt
  diff want.txt got.txt
  jq -e '.summary.added == 1 and .summary.removed == 1 and .summary.changed == 4' diff.json
}

t_diff_lists_the_overlay_and_prebake_files() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  "$IV" --diff dsv41-flash-b12x:local dsv41-flash-dcp2:local --json >diff.json
  "$IV" --diff dsv41-flash-b12x:local dsv41-flash-dcp2:local >diff.txt
  # Expected: every overlay file that differs from the base's, and every
  # file of the prebake layer (read with tar from the image's last layer).
  def=$ROOT/images/dsv41-flash-dcp2
  grep -v '^#' "$def/manifest.txt" | while read -r flat target; do
    [ -n "$flat" ] || continue
    cmp -s "$def/files/$flat" "$ROOT/images/$TV/$target" || echo "$SITE/vllm/$target"
  done >expected
  [ "$(wc -l <expected)" = 22 ] # weight_utils.py is byte-identical to the base's
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq -r '.layers[-1].digest')
  tar tzf "$IMGBUILD_STORE/blobs/sha256/${layer#sha256:}" | grep -v '/$' | sed 's|^\./||; s|^|/|' >>expected
  [ "$(wc -l <expected)" -gt 22 ]
  diff <(sort expected) <(jq -r '.files[].path' diff.json | sort)
  jq -e '.summary.removed == 0 and ([.files[].change] | all(. == "added" or . == "changed"))' diff.json
  # Layer and digest of each side; definitions and kernels per file.
  jq -e --arg p "$SITE/vllm/distributed/communication_op.py" '.files[] | select(.path == $p)
    | .change == "changed" and .a.layer == 0 and .b.layer == 1 and (.b.sha256 | startswith("sha256:"))
      and (.definitions.added | index("get_dcp_group") and index("dcp_a2a_exchange"))' diff.json
  jq -e --arg p "$SITE/vllm/prebaked/dcp2/dcp2_kernels.fatbin" '.files[] | select(.path == $p)
    | .b.layer == 2 and (.kernels.added | index("sm_121a dcp2_attn_partial_f32") and index("sm_90a dcp2_a2a_combine_bf16"))' diff.json
  jq -e --arg p "$SITE/vllm/model_executor/models/deepseek_v4_1/engram.py" '.files[] | select(.path == $p)
    | .change == "added" and (.definitions.added | index("_kai_pool"))' diff.json
  n=$(wc -l <expected)
  grep -q "^$((n - 15)) added, 0 removed, 15 changed$" diff.txt
  grep -Eq '^ +kernels added: sm_121a dcp_lse_combine, sm_90a dcp_lse_combine$' diff.txt
  # Against the definition folder: the overlay as it would be built.
  "$IV" --diff dsv41-flash-b12x:local "$def" --json >folder.json
  diff <(grep "^$SITE/vllm/" expected | grep -v /prebaked/ | sort) <(jq -r '.files[].path' folder.json | sort)
  jq -e '[.files[].b.layer_digest] | all(. == "definition")' folder.json
}

# The seed's triage on the stand-in: their base is the stand-in base; ours
# is newer in the four merge files and has its own versions of the seven
# files their base lacks (each a subset of the overlay's).
make_ours() {
  copy_images d
  for f in $MERGE4; do newer_body d/$TV/$f >/dev/null; done
  grep -v '^#' d/dsv41-flash-dcp2/manifest.txt | while read -r flat target; do
    case $target in
      model_executor/models/deepseek_v4_1/* | v1/core/candidate_blocks.py)
        mkdir -p "$(dirname "d/$TV/$target")"
        cp "d/dsv41-flash-dcp2/files/$flat" "d/$TV/$target"
        echo "# our in-tree version" >>"d/$TV/$target" ;;
    esac
  done
  # Their weight_utils.py patch (the overlay's is byte-identical otherwise).
  printf '\n\ndef weight_utils_port_fix():\n    return 1\n' >>d/dsv41-flash-dcp2/files/weight_utils.py
  "$IB" -q d/dsv41-flash-b12x -t ours:1 >/dev/null
}

t_triage_reproduces_the_seed_buckets() {
  build_base
  make_ours
  "$IV" --triage d/dsv41-flash-dcp2 --against ours:1 --their-base dsv41-flash-b12x:local --require-superset \
    --json >t.json
  jq -e '.status == "pass" and .buckets == {"clean": 12, "merge": 4, "new-theirs": 7}' t.json
  for f in $MERGE4; do
    jq -e --arg t "$SITE/vllm/$f" '.files[] | select(.target == $t) | .bucket == "merge"
      and (.their_base_to_ours | test("definitions changed: "))' t.json
  done
  [ "$(jq '[.files[] | select(.bucket == "new-theirs") | .target
        | select(test("/deepseek_v4_1/|/candidate_blocks.py$"))] | length' t.json)" = 7 ]
  jq -e '[.files[] | select(.bucket == "clean") | .ours.sha256 == .theirs.sha256] | all' t.json
  # The table says the same.
  "$IV" --triage d/dsv41-flash-dcp2 --against ours:1 --their-base dsv41-flash-b12x:local >t.txt
  tail -1 t.txt | grep -qx '12 clean, 4 merge, 7 new-theirs, 23 files'
  grep -qx 'merge      v1/core/kv_cache_utils.py' t.txt
  # The real overlay over the stand-in base: a strict superset; one file
  # is identical, the other replaced files differ, seven are new.
  "$IV" --triage "$ROOT/images/dsv41-flash-dcp2" --against dsv41-flash-b12x:local --require-superset >real.txt \
    2>real.err
  tail -1 real.txt | grep -qx '1 identical, 15 differs, 7 new, 23 files'
  grep -q 'gate superset *pass' real.err
}

t_triage_superset_and_require_fail_where_they_must() {
  build_base
  copy_images d
  # The definition names the seed's fixes in [triage]; they are present.
  grep -q '^require .*_kai_pool@deepseek_v4_1/engram.py' d/dsv41-flash-dcp2/image.conf
  "$IV" --triage d/dsv41-flash-dcp2 --against dsv41-flash-b12x:local --require-superset --json >ok.json
  jq -e '.status == "pass" and ([.gates[] | select(.name == "require") | .detail] == ["4 named fixes present in the overlay"])' ok.json
  # A planted removal: the overlay's communication_op.py loses a definition
  # that the base's version has.
  drop_def d/dsv41-flash-dcp2/files/communication_op.py broadcast_tensor_dict
  expect_fail 5 'manifest.txt:[0-9]+: .*/vllm/distributed/communication_op.py: python broadcast_tensor_dict of dsv41-flash-b12x:local \(layer 0\) is missing from the overlay.s version .*/files/communication_op.py' \
    "$IV" --triage d/dsv41-flash-dcp2 --against dsv41-flash-b12x:local --require-superset
  # Without --require-superset that is no failure; a named fix that is gone is.
  "$IV" --triage d/dsv41-flash-dcp2 --against dsv41-flash-b12x:local >/dev/null
  drop_def d/dsv41-flash-dcp2/files/engram.py _kai_pool
  expect_fail 5 'image.conf:[0-9]+: require _kai_pool@deepseek_v4_1/engram.py: .*/files/engram.py \(the overlay.s .*/deepseek_v4_1/engram.py\) does not define _kai_pool' \
    "$IV" --triage d/dsv41-flash-dcp2 --against dsv41-flash-b12x:local
  # --triage without --against is a usage error.
  rc=0
  "$IV" --triage d/dsv41-flash-dcp2 2>usage.txt || rc=$?
  [ "$rc" = 2 ]
  grep -q '^Usage: imgverify' usage.txt
}
