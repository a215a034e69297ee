# Reports (issue "A report never says pass for a check that did not run, and
# lists every problem it stopped on"): per gate, a failing build's JSON holds
# the failing problem in `problems`, first and marked; per gate, an empty
# section is a skip with its reason, never a pass; one provenance record per
# build, so a Dockerfile build of the same digest does not erase the
# definition's gates; --require-gates and its default.

R_VLLM=/usr/local/lib/python3.12/dist-packages/vllm

add_to_section() { # IMAGE.CONF SECTION LINE: LINE at the end of [SECTION]
  python3 - "$1" "$2" "$3" <<'PY'
import sys
p, sec, line = sys.argv[1:]
s = open(p).read()
a = s.index("[%s]" % sec)
b = s.find("\n[", a)
b = len(s) if b < 0 else b
open(p, "w").write(s[:b].rstrip("\n") + "\n" + line + "\n" + s[b:])
PY
}

# A failed build's report: valid, failed with CODE, and its first problem
# is GATE's error, marked as the one that stopped the build and equal to
# the `error` line's end.
failed_report_is_complete() { # REPORT.json CODE GATE
  validate "$1"
  jq -e --argjson c "$2" --arg g "$3" '
    .status == "fail" and .exit_code == $c
    and .problems[0].gate == $g and .problems[0].severity == "error" and .problems[0].stopped == true
    and ([.problems[] | select(.stopped)] | length) == 1
    and (.problems[0].message as $m | .error | contains($m))' "$1"
}

t_failing_definition_gate_lists_every_problem() {
  build_base
  copy_images d
  # Three errors: a target the base lacks, a source that does not exist,
  # and (the definition has a manifest.lock) a replaced target without a pin.
  add_to_section d/dsv41-flash-dcp2/image.conf copy "file files/engram.py $R_VLLM/not_in_base.py"
  add_to_section d/dsv41-flash-dcp2/image.conf copy "file files/no_such_source.py $R_VLLM/envs.py"
  rc=0
  "$IB" --json d/dsv41-flash-dcp2 >r.json 2>err.txt || rc=$?
  [ "$rc" = 3 ]
  failed_report_is_complete r.json 3 definition
  jq -e '[.problems[] | select(.gate == "definition" and .severity == "error")] | length == 3' r.json
  jq -e '[.problems[].message] | any(contains("not_in_base.py` does not exist in the base"))
         and any(contains("no_such_source.py")) and any(contains("envs.py has no pin"))' r.json
  # Both on stderr too, and one error line.
  grep -q 'not_in_base.py` does not exist in the base' err.txt
  grep -q 'no_such_source.py' err.txt
  [ "$(grep -c 'error:' err.txt)" = 1 ]
  jq -e '.gates[] | select(.name == "definition") | .status == "fail"' r.json
}

t_failing_symbol_gate_lists_every_problem() {
  build_base
  copy_images d
  add_to_section d/dsv41-flash-dcp2/image.conf symbols "python vllm/v1/core/kv_cache_utils.py no_such_name_one"
  add_to_section d/dsv41-flash-dcp2/image.conf symbols "python vllm/distributed/parallel_state.py no_such_name_two"
  rc=0
  "$IB" --json d/dsv41-flash-dcp2 -t s:1 >r.json 2>err.txt || rc=$?
  [ "$rc" = 5 ]
  failed_report_is_complete r.json 5 symbols
  # Every error, not only the first (which used to be only in `error`).
  jq -e '[.problems[] | select(.gate == "symbols" and .severity == "error") | .message]
         | (length == 2) and any(contains("no_such_name_one")) and any(contains("no_such_name_two"))' r.json
  grep -q 'no_such_name_one' err.txt
  grep -q 'no_such_name_two' err.txt
  refute skopeo inspect "oci:$IMGBUILD_STORE:s:1" >/dev/null 2>&1
}

t_failing_kernel_gate_lists_every_problem() {
  build_base
  copy_images d
  add_to_section d/dsv41-flash-dcp2/image.conf kernels \
    "require /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so* no_such_kernel_xyz"
  rc=0
  "$IB" --json d/dsv41-flash-dcp2 -t k:1 >r.json 2>err.txt || rc=$?
  [ "$rc" = 6 ]
  failed_report_is_complete r.json 6 kernels
  jq -e '.problems[0].message | contains("no_such_kernel_xyz")' r.json
  grep -q 'no_such_kernel_xyz' err.txt
}

t_failing_smoke_gate_lists_its_problem() {
  build_base
  copy_images d
  # The smoke gate reports no problems of its own: its error becomes one.
  sed -i 's|^nccl .*|nccl /usr/lib/nothere/libnccl.so.2|' d/dsv41-flash-dcp2/image.conf
  rc=0
  "$IB" --json d/dsv41-flash-dcp2 -t m:1 >r.json 2>err.txt || rc=$?
  [ "$rc" = 7 ]
  failed_report_is_complete r.json 7 smoke
  jq -e '.problems[0].message | contains("/usr/lib/nothere/libnccl.so.2 is not in it")' r.json
}

t_failure_outside_the_gates_is_a_problem_too() {
  copy_images d
  sed -i 's|^from = .*|from = oci:nothere:x|' d/dsv41-flash-dcp2/image.conf
  rc=0
  "$IB" --json d/dsv41-flash-dcp2 >r.json 2>/dev/null || rc=$?
  [ "$rc" != 0 ]
  failed_report_is_complete r.json "$rc" build
}

# A small image over scratch: one text file, and the sections given.
tiny_def() { # DIR [SECTION-TEXT]
  mkdir -p "$1"
  echo hello >"$1/hello.txt"
  printf '[image]\nname = tiny:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile hello.txt /etc/hello.txt\n[new]\n/\n%s\n' \
    "${2:-}" >"$1/image.conf"
}

# Build DIR and verify it: GATE is a skip whose reason matches RE, in both
# reports, and no row of GATE says pass.
skipped_in_both() { # DIR GATE RE
  "$IB" --json "$1" >b.json
  validate b.json
  jq -e --arg g "$2" --arg re "$3" '[.gates[] | select(.name == $g)] | length >= 1 and all(.status == "skip" and (.reason | test($re)))' b.json
  # The table (not with --json) says the same.
  "$IB" "$1" >/dev/null 2>b.err
  grep -Eq "gate $2 +skip .*$3" b.err
  refute grep -Eq "gate $2 +pass" b.err
  [ "$(jq -r .exit_code b.json)" = 0 ]
  "$IV" --json tiny:1 >v.json
  validate v.json
  "$IV" tiny:1 2>v.err
  if [ "$2" != definition ]; then
    # The rows of this definition's record (an earlier build of the same
    # content keeps its own).
    jq -e --arg g "$2" --arg re "$3" --arg dpath "$(realpath "$1/image.conf")" \
      '[.gates[] | select(.name == $g and .definition == $dpath)] | length == 1 and all(.status == "skip" and (.reason | test($re)))' v.json
    grep -Eq "gate $2 +skip" v.err
    refute grep -Eq "gate $2 +pass" v.err
  fi
}

t_no_symbols_section_is_a_skip_never_a_pass() {
  tiny_def t
  skipped_in_both ./t symbols 'no \[symbols\] in .*image.conf'
  # A [symbols] section that matches nothing of the image checks nothing.
  tiny_def u "$(printf '[symbols]\npython-path /usr/lib/python3/dist-packages')"
  skipped_in_both ./u symbols 'matched nothing: no overlay Python file under /usr/lib/python3/dist-packages'
}

t_no_kernels_requirement_is_a_skip_never_a_pass() {
  tiny_def t
  skipped_in_both ./t kernels 'no \[kernels\] requirement in .*image.conf'
  # A target alone requires nothing.
  tiny_def u "$(printf '[kernels]\ntarget 12.1')"
  skipped_in_both ./u kernels 'no \[kernels\] requirement in'
}

t_definition_copying_nothing_is_a_skip_never_a_pass() {
  mkdir t
  printf '[image]\nname = tiny:1\nfrom = scratch\nplatform = linux/amd64\n[env]\nA = 1\n' >t/image.conf
  skipped_in_both ./t definition 'copies nothing'
  # imgverify's provenance gate compares nothing either: its record lists
  # no file.
  "$IV" --json tiny:1 >p.json
  jq -e '[.gates[] | select(.name == "provenance")] | length == 1
         and all(.status == "skip" and (.reason | test("the record of .*image.conf lists no file")))' p.json
}

# imgverify's provenance gate over a record that lists no file (a
# definition of only [new] and [label]): a skip saying so, never a pass,
# in the store and through an OCI layout; --require-gates provenance makes
# it a failure (10).  The same definition with one [copy] file passes:
# the record then lists it.
t_provenance_of_a_record_listing_no_file_is_a_skip() {
  mkdir t
  printf '[image]\nname = tiny:1\nfrom = scratch\nplatform = linux/amd64\n[new]\n/opt/\n[label]\nx = 1\n' >t/image.conf
  "$IB" -q ./t --output oci:layout:tiny:1 >/dev/null
  for store in "$IMGBUILD_STORE tiny:1" "$PWD/s-oci oci:layout:tiny:1"; do
    IMGBUILD_STORE=${store% *} "$IV" --json "${store#* }" >v.json
    validate v.json
    jq -e --arg f "$(realpath t/image.conf)" '.status == "pass"
      and ([.gates[] | select(.name == "provenance")] | length == 1
           and .[0].status == "skip" and .[0].reason == "the record of \($f) lists no file")' v.json
  done
  "$IV" tiny:1 >/dev/null 2>v.err
  grep -Eq 'gate provenance +skip .*lists no file' v.err
  refute grep -Eq 'gate provenance +pass' v.err
  expect_fail 10 'gate provenance did not run, and --require-gates names it: the record of .*t/image.conf lists no file' \
    "$IV" --require-gates provenance tiny:1
  # One file copied: the record lists it, and the gate passes over it.
  echo hello >t/hello.txt
  printf '[copy]\nfile hello.txt /opt/hello.txt\n' >>t/image.conf
  "$IB" -q ./t -t one:1 >/dev/null
  "$IV" --json one:1 >one.json
  jq -e '.gates[] | select(.name == "provenance") | .status == "pass"' one.json
}

t_no_smoke_section_is_a_skip_never_a_pass() {
  build_base
  tiny_def t
  skipped_in_both ./t smoke 'no \[smoke\] in .*image.conf'
  # imgverify without --smoke says that it was not asked for.
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  "$IV" --json dsv41-flash-dcp2:local >v2.json
  validate v2.json
  jq -e '.gates[] | select(.name == "smoke") | .status == "skip" and (.reason | contains("--smoke"))' v2.json
}

t_verify_without_provenance_skips_with_the_reason() {
  tiny_def t
  "$IB" -q ./t --output oci:layout:tiny:1 >/dev/null
  # skopeo copies the image, not the provenance beside it: by default that
  # is provenance missing (the config says imgbuild built it); asked for
  # less, every gate but integrity is a skip with its reason.
  skopeo copy -q oci:layout:tiny:1 oci:bare:tiny:1
  IMGBUILD_STORE=$PWD/s2 expect_fail 10 'provenance missing' "$IV" oci:bare:tiny:1
  IMGBUILD_STORE=$PWD/s2 "$IV" --json --require-gates none oci:bare:tiny:1 >v.json
  validate v.json
  jq -e '.status == "pass" and ([.gates[] | select(.name != "integrity") | .status] | all(. == "skip"))
         and ([.gates[] | select(.name == "symbols")][0].reason | contains("no provenance recorded"))' v.json
  IMGBUILD_STORE=$PWD/s2 expect_fail 5 'gate symbols did not run, and --require-gates names it: no provenance recorded' \
    "$IV" --require-gates symbols oci:bare:tiny:1
  expect_fail 2 '`symbol` is not a gate' "$IV" --require-gates symbol tiny:1
}

records_of() { # MANIFEST-DIGEST: its provenance artifacts in the store, "digest definition" per line
  jq -r --arg d "$1" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d)
                      | "\(.digest) \(.annotations["vnd.imgbuild.definition"])"' "$IMGBUILD_STORE/index.json"
}

t_dockerfile_after_definition_keeps_both_records() {
  build_base
  dcp2_definition_and_dockerfile
  dpath=$(realpath d/dsv41-flash-dcp2/image.conf)
  dock=$(realpath ctx/Dockerfile)
  "$IB" -q d/dsv41-flash-dcp2 >def.out
  "$IB" -q -f ctx/Dockerfile -t dsv41-flash-dcp2:local >df.out
  cmp def.out df.out
  digest=$(cut -d' ' -f2 def.out)
  records_of "$digest" >records.txt
  [ "$(wc -l <records.txt)" = 2 ]
  grep -q " $dpath\$" records.txt
  grep -q " $dock\$" records.txt
  # imgverify runs the definition's symbol and kernel requirements, and
  # says which definition each row is about.
  "$IV" --json dsv41-flash-dcp2:local >v.json
  validate v.json
  jq -e --arg dpath "$dpath" --arg dock "$dock" '
    .status == "pass"
    and ([.definitions[].file] | sort) == ([$dpath, $dock] | sort)
    and ([.gates[] | select(.definition == $dpath and (.name == "symbols" or .name == "kernels")) | .status] == ["pass", "pass"])
    and ([.gates[] | select(.definition == $dock and (.name == "symbols" or .name == "kernels")) | .status] == ["skip", "skip"])
    and ([.gates[] | select(.definition == $dock and .name == "symbols")][0].reason == "no [symbols] in the recorded definition \($dock)")
    and .required_gates == ["symbols", "native", "kernels"]' v.json
  "$IV" dsv41-flash-dcp2:local 2>v.err
  grep -q "definition [12] of 2: $dpath (recorded)" v.err
  grep -q "gate symbols *skip .*no \[symbols\] in the recorded definition $dock" v.err
  # A rebuild of the definition replaces its own record only.
  df_art=$(grep " $dock\$" records.txt | cut -d' ' -f1)
  "$IB" -q d/dsv41-flash-dcp2 -t again:1 >/dev/null
  records_of "$digest" >records2.txt
  [ "$(wc -l <records2.txt)" = 2 ]
  grep -q "^$df_art $dock\$" records2.txt
  # Both records travel with the image (oci: and docker-archive:).
  "$IB" -q d/dsv41-flash-dcp2 --output oci:layout:x:1 --output docker-archive:x.tar >/dev/null
  IMGBUILD_STORE=$PWD/s-oci "$IV" --json oci:layout:x:1 >oci.json
  jq -e '.status == "pass" and (.definitions | length == 2)' oci.json
  IMGBUILD_STORE=$PWD/s-tar "$IV" --json docker-archive:x.tar >tar.json
  jq -e '.status == "pass" and (.definitions | length == 2)' tar.json
}

# Add, in the store, LINE to [SECTION] of DEFINITION's record about
# DIGEST: a test image whose recorded requirement is broken.
break_record() { # DIGEST DEFINITION SECTION LINE
  python3 - "$IMGBUILD_STORE" "$@" <<'PY'
import hashlib, json, os, sys
store, subject, definition, section, line = sys.argv[1:]
def blob(d): return os.path.join(store, "blobs/sha256", d.split(":")[1])
def put(b):
    d = "sha256:" + hashlib.sha256(b).hexdigest()
    open(blob(d), "wb").write(b)
    return d, len(b)
index = json.load(open(os.path.join(store, "index.json")))
for e in index["manifests"]:
    a = e.get("annotations", {})
    if a.get("vnd.imgbuild.subject") == subject and a.get("vnd.imgbuild.definition") == definition:
        m = json.load(open(blob(e["digest"])))
        # The record: the predicate of imgbuild's own in-toto statement.
        k = next(i for i, l in enumerate(m["layers"])
                 if l["annotations"]["in-toto.io/predicate-type"].startswith("https://imgbuild.invalid/"))
        st = json.load(open(blob(m["layers"][k]["digest"])))
        rec = st["predicate"]
        g = rec["definition"]["gates"]
        a = g.index("[%s]" % section)
        b = g.find("\n[", a)
        b = len(g) if b < 0 else b
        rec["definition"]["gates"] = g[:b] + "\n" + line + g[b:]
        m["layers"][k]["digest"], m["layers"][k]["size"] = put(json.dumps(st).encode())
        e["digest"], e["size"] = put(json.dumps(m).encode())
        break
else:
    sys.exit("no record of %s" % definition)
json.dump(index, open(os.path.join(store, "index.json"), "w"))
PY
}

t_recorded_requirement_broken_fails_verify() {
  build_base
  dcp2_definition_and_dockerfile
  dpath=$(realpath d/dsv41-flash-dcp2/image.conf)
  "$IB" -q d/dsv41-flash-dcp2 >def.out
  "$IB" -q -f ctx/Dockerfile -t dsv41-flash-dcp2:local >/dev/null
  cp "$IMGBUILD_STORE/index.json" index.good
  break_record "$(cut -d' ' -f2 def.out)" "$dpath" symbols "python vllm/v1/core/kv_cache_utils.py recorded_but_missing"
  "$IV" --json dsv41-flash-dcp2:local >v.json 2>v.err || true
  validate v.json
  jq -e --arg dpath "$dpath" '.exit_code == 5
    and .problems[0].stopped and .problems[0].definition == $dpath
    and (.problems[0].message | contains("recorded_but_missing"))' v.json
  expect_fail 5 'recorded_but_missing' "$IV" dsv41-flash-dcp2:local
  # A broken kernel requirement, the same way.
  cp index.good "$IMGBUILD_STORE/index.json"
  break_record "$(cut -d' ' -f2 def.out)" "$dpath" kernels "require $SITE/nvidia/nccl/lib/libnccl.so* recorded_kernel_missing"
  expect_fail 6 'recorded_kernel_missing' "$IV" dsv41-flash-dcp2:local
  cp index.good "$IMGBUILD_STORE/index.json"
  # --definition names the one to check; its file on disk is intact.
  "$IV" --json --definition d/dsv41-flash-dcp2 dsv41-flash-dcp2:local >one.json
  jq -e --arg dpath "$dpath" '.status == "pass" and .definitions == [{"file": $dpath, "recorded": true, "image": "dsv41-flash-dcp2:local"}]' one.json
}

t_require_gates_and_its_default() {
  build_base
  dcp2_definition_and_dockerfile
  # A store where only the Dockerfile built the image: nothing required by
  # default (its build ran no symbol or kernel gate), skipped rows say why.
  "$IB" -q -f ctx/Dockerfile -t dsv41-flash-dcp2:local >/dev/null
  "$IV" --json dsv41-flash-dcp2:local >v.json
  validate v.json
  jq -e '.status == "pass" and .required_gates == []
    and ([.gates[] | select(.name == "symbols" or .name == "kernels") | .status] == ["skip", "skip"])' v.json
  "$IV" --json --require-gates symbols,kernels dsv41-flash-dcp2:local >req.json || true
  validate req.json
  jq -e '.exit_code == 5 and .required_gates == ["symbols", "kernels"]
    and .problems[0].gate == "symbols" and .problems[0].stopped
    and ([.problems[] | select(.severity == "error") | .gate] | sort) == ["kernels", "symbols"]' req.json
  expect_fail 5 'gate symbols did not run, and --require-gates names it: no \[symbols\] in the recorded definition .*/ctx/Dockerfile' \
    "$IV" --require-gates symbols,kernels dsv41-flash-dcp2:local
  # Once the definition built it too, its gates are required by default:
  # a --definition without them fails to run them.
  "$IB" -q d/dsv41-flash-dcp2 >/dev/null
  cp -r d/dsv41-flash-dcp2 d/bare
  python3 - d/bare/image.conf <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r"\n\[(symbols|kernels)\].*?(?=\n\[|\Z)", "\n", s, flags=re.S)
open(p, "w").write(s)
PY
  expect_fail 5 'gate symbols did not run, and a recorded build of this image ran it' \
    "$IV" --definition d/bare dsv41-flash-dcp2:local
  "$IV" --require-gates none --definition d/bare dsv41-flash-dcp2:local
}

t_every_record_travels_through_a_registry() {
  registry_start open
  # Two definitions, one content: one digest, two records.
  tiny_def t
  tiny_def u "$(printf '[kernels]\ntarget 12.1')"
  "$IB" -q ./t >/dev/null
  "$IB" -q ./u --push "docker://$REG/tiny:1" >u.out
  digest=$(cut -d' ' -f2 u.out)
  [ "$(jq --arg d "$digest" '[.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d)] | length' \
    "$IMGBUILD_STORE/index.json")" = 2 ]
  # The referrers tag lists both, each with its definition.
  curl -sf "http://$REG/v2/tiny/manifests/sha256-${digest#sha256:}" \
    -H 'Accept: application/vnd.oci.image.index.v1+json' >referrers.json
  jq -e --arg t "$(realpath t/image.conf)" --arg u "$(realpath u/image.conf)" \
    '[.manifests[].annotations["vnd.imgbuild.definition"]] | sort == ([$t, $u] | sort)' referrers.json
  # A rebuild of one pushes its new record in place of its old one.
  "$IB" -q ./u --push "docker://$REG/tiny:1" >/dev/null
  curl -sf "http://$REG/v2/tiny/manifests/sha256-${digest#sha256:}" \
    -H 'Accept: application/vnd.oci.image.index.v1+json' | jq -e '.manifests | length == 2'
  IMGBUILD_STORE=$PWD/fresh "$IV" --json "docker://$REG/tiny:1" >v.json
  validate v.json
  jq -e --arg t "$(realpath t/image.conf)" --arg u "$(realpath u/image.conf)" \
    '.status == "pass" and ([.definitions[].file] | sort) == ([$t, $u] | sort)' v.json
}

# `resources` in both reports: the program's own peak RSS and CPU apart
# from the programs it waited for.  The oracle is the kernel's own
# accounting through GNU time, whose %M is the larger of the two; and a
# build that has to compile its kernels (a changed source: nvcc's cicc) has
# a child larger than itself, so the two figures are not one number twice.
t_report_separates_own_memory_from_its_programs() {
  build_base
  copy_images d
  rm d/../kernels && cp -r "$ROOT/kernels" kernels
  echo "// changed: the prebake cache misses, nvcc runs" >>kernels/dcp2/dcp2_kernels.cu
  /usr/bin/time -f '%M' -o time.txt "$IB" --json d/dsv41-flash-dcp2 -t m:1 >r.json 2>err.txt
  validate r.json
  jq -e '.prebake.compiled >= 1' r.json
  local self kids m
  self=$(jq -r '.resources.peak_rss_kib' r.json)
  kids=$(jq -r '.resources.children_peak_rss_kib' r.json)
  m=$(cat time.txt)
  log "own peak ${self} KiB, largest child ${kids} KiB, GNU time ${m} KiB"
  [ "$self" -gt 1024 ]
  [ "$kids" -gt 1024 ]
  jq -e '.resources.cpu_seconds > 0 and .resources.children_cpu_seconds > 0' r.json
  local big=$((self > kids ? self : kids))
  # Equal but for what the program allocated after its report.
  [ "$m" -ge "$big" ]
  [ "$m" -le $((big + big / 10)) ]
  # nvcc's compiler is larger than imgbuild (not under ASan, whose shadow
  # memory makes imgbuild itself large).
  [ -n "${IB_SANITIZE:-}" ] || [ "$kids" -gt "$self" ]
  "$IV" --json m:1 >v.json 2>/dev/null
  "$IV" --json --store >s.json 2>/dev/null
  for f in v.json s.json; do
    validate $f
    jq -e '.resources.peak_rss_kib > 1024' $f
  done
}

# A --report file is written whole (a temporary renamed over it) but not
# synced to disk, nor is its folder (builder/junit.c): it is no store state.
t_report_file_written_whole_without_a_disk_flush() {
  mkdir -p d
  echo one >d/one.txt
  printf '[image]\nname = rep:1\nfrom = scratch\n[copy]\nfile one.txt /one.txt\n[new]\n/\n' >d/image.conf
  traced -f -y -qq -e trace=fsync,rename -o t.trace "$IB" -q --smoke=off d --report json:rep.json \
    --report junit:rep.xml >/dev/null
  jq -e '.status == "pass"' rep.json >/dev/null
  grep -q '<testsuites' rep.xml
  grep -q 'rename(".*rep\.json\.tmp-' t.trace
  grep -q 'fsync(' t.trace # the store's own syncs: the trace saw them
  refute grep -q 'fsync([0-9]*<[^>]*rep\.\(json\|xml\)' t.trace
  refute grep -q "fsync([0-9]*<$PWD>)" t.trace
}
