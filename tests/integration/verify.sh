# imgverify (issue "imgverify, provenance and the CI image pipeline"):
# images from every transport and from other tools, each kind of damage
# caught with its exit code and a message naming it, the JSON report
# against its schema, and the human report seen in a real terminal.

t_verify_passes_on_every_transport() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:layout:dcp2:1 --output docker-archive:dcp2.tar >/dev/null
  "$IV" --json dsv41-flash-dcp2:local >store.json
  validate store.json
  jq -e '.status == "pass" and ([.gates[].name] | index("provenance") and index("symbols") and index("kernels"))' store.json
  jq -e '.gates[] | select(.name == "provenance") | .detail == "recorded files and kernels match"' store.json
  IMGBUILD_STORE=$PWD/s2 "$IV" --json oci:layout:dcp2:1 >oci.json
  validate oci.json
  # The provenance travelled with the layout: all the gates ran.
  # toolchains and driver skip: the stand-in base has no CUDA toolchain and
  # nothing that asks of the driver (issue 45: never a pass over nothing).
  jq -e '.status == "pass" and ([.gates[] | select(.status == "pass") | .name] == ["integrity", "provenance", "symbols", "native", "kernels", "ptx", "jit-budget"])' oci.json
  jq -e '[.gates[] | select(.name == ("toolchains", "driver")) | .status] == ["skip", "skip"]' oci.json
  IMGBUILD_STORE=$PWD/s3 "$IV" --json docker-archive:dcp2.tar >archive.json
  validate archive.json
  # The archive kept the manifest (same digest) and carried the provenance.
  jq -e '.status == "pass" and .integrity.blobs == 5' archive.json
  [ "$(jq -r .manifest archive.json)" = "$(jq -r .manifest store.json)" ]
  jq -e '[.gates[] | select(.status == "pass") | .name] == ["integrity", "provenance", "symbols", "native", "kernels", "ptx", "jit-budget"]' archive.json
  # With the definition given, its sources are compared with the image.
  "$IV" --definition "$ROOT/images/dsv41-flash-dcp2" dsv41-flash-dcp2:local
  "$IV" --store
}

t_verify_images_made_by_other_tools() {
  docker_start
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  skopeo copy -q "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" oci:skopeo-copy:x
  # Copied without its attestations, an image imgbuild built has its
  # provenance missing (exit 10); its integrity is checked when the user
  # asks for no more.
  IMGBUILD_STORE=$PWD/s2 expect_fail 10 'provenance missing: the image.s config says imgbuild built it' \
    "$IV" oci:skopeo-copy:x
  IMGBUILD_STORE=$PWD/s2 "$IV" --json --require-gates none oci:skopeo-copy:x >skopeo.json
  jq -e '.status == "pass" and .integrity.blobs == 5' skopeo.json
  "$IB" -q dsv41-flash-dcp2 --output docker-archive:dcp2.tar >/dev/null
  $D load -i dcp2.tar >/dev/null
  $D save dsv41-flash-dcp2:local -o saved.tar
  IMGBUILD_STORE=$PWD/s3 "$IV" --json --require-gates none docker-archive:saved.tar >saved.json
  validate saved.json
  jq -e '.status == "pass"' saved.json
  $D rmi -f dsv41-flash-dcp2:local >/dev/null
}

flip_byte() { # FILE OFFSET-FRACTION-PERCENT
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
p, pct = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[len(b) * pct // 100] ^= 0x55
open(p, "wb").write(b)
PY
}

t_damage_is_caught_with_its_exit_code() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:good:dcp2:1 >/dev/null
  # A byte of a layer blob (the overlay).
  cp -r good bad-layer
  layer=$(skopeo inspect --raw oci:good:dcp2:1 | jq -r '.layers[-2].digest' | cut -d: -f2)
  flip_byte "bad-layer/blobs/sha256/$layer" 50
  # Read in place, the damage shows as corrupt gzip data or a wrong digest.
  IMGBUILD_STORE=$PWD/s1 expect_fail 4 "sha256:$layer" "$IV" oci:bad-layer:dcp2:1
  # The same damage inside the local store itself.
  cp -al "$IMGBUILD_STORE" s-store
  rm "s-store/blobs/sha256/$layer"
  cp "bad-layer/blobs/sha256/$layer" "s-store/blobs/sha256/$layer"
  IMGBUILD_STORE=$PWD/s-store "$IV" --json dsv41-flash-dcp2:local >layer.json || true
  validate layer.json
  jq -e --arg l "$layer" '.exit_code == 4 and (.error | contains($l))' layer.json
  IMGBUILD_STORE=$PWD/s-store expect_fail 4 "sha256:$layer" "$IV" --store
  # A flipped byte is caught by gzip's own check first.  The same tar
  # recompressed (valid gzip, the same diff_id, another digest) is seen
  # only by the layer's digest check.
  cp -al "$IMGBUILD_STORE" s-recompressed
  rm "s-recompressed/blobs/sha256/$layer"
  gzip -dc "$IMGBUILD_STORE/blobs/sha256/$layer" | gzip -1 -n >"s-recompressed/blobs/sha256/$layer"
  refute cmp -s "$IMGBUILD_STORE/blobs/sha256/$layer" "s-recompressed/blobs/sha256/$layer"
  IMGBUILD_STORE=$PWD/s-recompressed expect_fail 4 "layer blob sha256:$layer: content has digest" \
    "$IV" dsv41-flash-dcp2:local
  # The same, read through (the layer reader's check, not the record's).
  IMGBUILD_STORE=$PWD/s-recompressed expect_fail 4 "layer blob sha256:$layer: content has digest" \
    "$IV" --full dsv41-flash-dcp2:local
  # A byte of the config.
  cp -r good bad-config
  config=$(skopeo inspect --raw oci:good:dcp2:1 | jq -r '.config.digest' | cut -d: -f2)
  flip_byte "bad-config/blobs/sha256/$config" 50
  IMGBUILD_STORE=$PWD/s2 expect_fail 4 "sha256:$config" "$IV" oci:bad-config:dcp2:1
}

t_changed_overlay_file_in_a_self_consistent_image_is_caught() {
  build_base
  copy_images d
  # A layer whose digests are all right, but one file is not the source.
  echo "# tampered" >>d/dsv41-flash-dcp2/files/engram.py
  "$IB" -q d/dsv41-flash-dcp2 >/dev/null
  "$IV" dsv41-flash-dcp2:local # self-consistent: integrity and its own provenance pass
  expect_fail 4 'manifest.txt:[0-9]+: .*/deepseek_v4_1/engram.py in the image \(layer 1\) differs from its source .*files/engram.py' \
    "$IV" --definition "$ROOT/images/dsv41-flash-dcp2" dsv41-flash-dcp2:local
}

# store_edit TAG WHAT: rewrite one thing of a tagged image in $IMGBUILD_STORE
# and every digest above it, so that only WHAT is wrong: "provenance" (an
# overlay file's recorded sha256), "size" (a layer descriptor's size),
# "config-size" (the config descriptor's size), "diff_id" (the config's
# diff_id of the overlay layer), "manifest" (a byte
# of the manifest blob itself).  Files are replaced, never written in place
# (the store is hard links into the tests' seed store).
store_edit() {
  /usr/bin/python3 - "$IMGBUILD_STORE" "$1" "$2" <<'PY'
import hashlib, json, os, sys
store, tag, what = sys.argv[1:4]
def path(d): return os.path.join(store, "blobs", *d.split(":"))
def read(d): return open(path(d), "rb").read()
def replace(p, b):
    open(p + ".tmp", "wb").write(b)
    os.replace(p + ".tmp", p)
def put(b):
    d = "sha256:" + hashlib.sha256(b).hexdigest()
    replace(path(d), b)
    return d, len(b)
idx = json.load(open(f"{store}/index.json"))
ann = lambda m, k: m.get("annotations", {}).get(k)
ent = next(m for m in idx["manifests"] if ann(m, "org.opencontainers.image.ref.name") == tag)
old = ent["digest"]
man = json.loads(read(old))
if what == "provenance":
    art = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == old)
    am = json.loads(read(art["digest"]))
    # The record: the predicate of imgbuild's own in-toto statement.
    k = next(i for i, l in enumerate(am["layers"])
             if l["annotations"]["in-toto.io/predicate-type"].startswith("https://imgbuild.invalid/"))
    st = json.loads(read(am["layers"][k]["digest"]))
    f = next(f for f in st["predicate"]["files"] if f["target"].endswith("/cp_utils.py"))
    f["sha256"] = hashlib.sha256(b"not the file").hexdigest()
    am["layers"][k]["digest"], am["layers"][k]["size"] = put(json.dumps(st).encode())
    art["digest"], art["size"] = put(json.dumps(am).encode())
elif what == "size":
    man["layers"][-2]["size"] += 1
elif what == "config-size":
    man["config"]["size"] += 1
elif what == "diff_id":
    cfg = json.loads(read(man["config"]["digest"]))
    ids = cfg["rootfs"]["diff_ids"]
    ids[-2] = ids[0]   # a real diff_id, of another layer
    man["config"]["digest"], man["config"]["size"] = put(json.dumps(cfg).encode())
if what in ("size", "config-size", "diff_id"):
    ent["digest"], ent["size"] = put(json.dumps(man).encode())
    for m in idx["manifests"]:   # the provenance follows its image
        if ann(m, "vnd.imgbuild.subject") == old:
            m["annotations"]["vnd.imgbuild.subject"] = ent["digest"]
if what == "manifest":
    b = bytearray(read(old))
    b[len(b) // 2] ^= 0x01
    replace(path(old), bytes(b))
replace(f"{store}/index.json", json.dumps(idx).encode())
print(ent["digest"])
PY
}

# A provenance that no longer matches the content: exit 4.
t_provenance_that_no_longer_matches_the_content_is_caught() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t clean:1 >/dev/null
  "$IV" clean:1 >/dev/null
  store_edit clean:1 provenance
  expect_fail 4 '/vllm/v1/worker/cp_utils.py has sha256 [0-9a-f]{64}, its provenance says [0-9a-f]{64}' "$IV" clean:1
  "$IV" --json clean:1 >p.json || true
  jq -e '.exit_code == 4 and (.gates[] | select(.name == "provenance") | .status == "fail")' p.json
}

# Each integrity check on its own: everything else about the image is right.
t_size_diff_id_and_manifest_damage_each_exit_4() {
  build_base
  for t in a b c d; do "$IB" -q dsv41-flash-dcp2 -t $t:1 >/dev/null; done
  "$IV" a:1 >/dev/null
  # Each damage twice: over a layer this store read before (its bytes hashed,
  # the rest from the record: verify.c) and read through again (--full: the
  # layer reader's own checks), since either path alone would hide the other.
  store_edit a:1 size >/dev/null
  expect_fail 4 'layer blob sha256:[0-9a-f]{64}: size is [0-9]+, manifest says [0-9]+' "$IV" a:1
  expect_fail 4 'layer blob sha256:[0-9a-f]{64}: size is [0-9]+, manifest says [0-9]+' "$IV" --full a:1
  store_edit b:1 diff_id >/dev/null
  expect_fail 4 'layer blob sha256:[0-9a-f]{64}: uncompressed digest sha256:[0-9a-f]{64}, config says diff_id' "$IV" b:1
  expect_fail 4 'layer blob sha256:[0-9a-f]{64}: uncompressed digest sha256:[0-9a-f]{64}, config says diff_id' "$IV" --full b:1
  store_edit d:1 config-size >/dev/null
  expect_fail 4 'blob sha256:[0-9a-f]{64}: size is [0-9]+, descriptor says [0-9]+' "$IV" d:1
  m=$(store_edit c:1 manifest)
  expect_fail 4 "${m#sha256:}" "$IV" c:1
  # The whole-store check names each of them.
  refute "$IV" --store 2>store.err
  cat store.err
}

t_dropped_required_kernel_is_caught() {
  build_base
  copy_images d
  # The prebaked DCP2 fatbin without its bf16 combine kernel, built with the
  # kernel requirements removed, then verified against the real definition.
  sed 's/^DCP2_EXPORT(dcp2_a2a_combine_bf16/#if 0\nDCP2_EXPORT(dcp2_a2a_combine_bf16/; s/^            a2a_combine<__nv_bfloat16>(packet, out, lse_out, n, B, Hs, D, base2))/            a2a_combine<__nv_bfloat16>(packet, out, lse_out, n, B, Hs, D, base2))\n#endif/' \
    "$ROOT/kernels/dcp2/dcp2_kernels.cu" >d/dcp2_partial.cu
  grep -q '#if 0' d/dcp2_partial.cu
  sed -i 's|^source ../../kernels/dcp2/dcp2_kernels.cu |source ../dcp2_partial.cu |; /^require .*prebaked/d' d/dsv41-flash-dcp2/image.conf
  "$IB" -q d/dsv41-flash-dcp2 -t no-bf16-combine:1 >/dev/null
  "$IV" --json --definition "$ROOT/images/dsv41-flash-dcp2" no-bf16-combine:1 >k.json || true
  validate k.json
  jq -e '.exit_code == 6 and (.error | contains("kernel dcp2_a2a_combine_bf16 has no SASS"))' k.json
  expect_fail 6 'kernel dcp2_a2a_combine_bf16 has no SASS that runs on compute capability 12.1' \
    "$IV" --definition "$ROOT/images/dsv41-flash-dcp2" no-bf16-combine:1
}

t_human_report_in_a_terminal() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  in_terminal "$PWD/t1.sock" screen.txt "env IMGBUILD_STORE=$IMGBUILD_STORE $IV --jobs 1 dsv41-flash-dcp2:local"
  sed 's/\x1b\[[0-9;]*m//g' screen.txt >plain.txt
  cat plain.txt
  grep -q 'EXIT=0' plain.txt
  # The progress bar (bytes, rate, time) and the gate table, in colour.
  grep -Eq 'imgverify: verify \[[#.]+\] +[0-9]+% [0-9.]+ [kMGT]?B / [0-9.]+ [kMGT]?B +[0-9.]+ [kMGT]?B/s +took [0-9]+s' plain.txt
  grep -Eq 'gate integrity +pass' plain.txt
  grep -Eq 'gate kernels +pass' plain.txt
  grep -q $'\x1b\[32m' screen.txt
  # NO_COLOR: the same report on the terminal, without colour.
  in_terminal "$PWD/t2.sock" screen2.txt "env NO_COLOR=1 IMGBUILD_STORE=$IMGBUILD_STORE $IV dsv41-flash-dcp2:local"
  grep -q 'EXIT=0' screen2.txt
  grep -Eq 'gate integrity +pass' screen2.txt
  refute grep -q $'\x1b\[3[12]m' screen2.txt
}

# imgverify runs the definition's gates on an image built without them: a
# symbol gate failure alone is exit 5; with a kernel gate failure too, the
# first in the documented order (integrity, symbols, kernels, smoke) wins,
# and the report lists both.
t_gate_failures_in_imgverify_and_which_exit_code_wins() {
  build_base
  copy_images d
  printf 'from vllm.v1.core.no_such_module import thing\n' >>d/dsv41-flash-dcp2/files/candidate_blocks.py
  cp -r d/dsv41-flash-dcp2 d/ungated
  sed -i '/^\[symbols\]/,/^\[prebake\]/{/^\[/!d}' d/ungated/image.conf
  "$IB" -q d/ungated -t ungated:1 >/dev/null
  "$IV" ungated:1 >/dev/null # its own (recorded) gates pass
  expect_fail 5 'candidate_blocks.py:[0-9]+: from vllm.v1.core.no_such_module: module vllm.v1.core.no_such_module is not in the image' \
    "$IV" --definition d/dsv41-flash-dcp2 ungated:1
  # Symbols and kernels both fail: 5 wins, both are reported.
  sed -i 's|^require /usr/local/lib/python3.12/dist-packages/flashinfer\* dcp_lse_combine$|& no_such_kernel|' d/dsv41-flash-dcp2/image.conf
  grep -q 'dcp_lse_combine no_such_kernel' d/dsv41-flash-dcp2/image.conf
  "$IV" --json --definition d/dsv41-flash-dcp2 ungated:1 >both.json || true
  validate both.json
  jq -e '.exit_code == 5 and ([.gates[] | select(.status == "fail") | .name] == ["symbols", "kernels"])' both.json
  expect_fail 5 'no_such_module' "$IV" --definition d/dsv41-flash-dcp2 ungated:1
  # The kernel gate alone: 6.
  cp -r d/dsv41-flash-dcp2 d/kernels-only
  sed -i '/^\[symbols\]/,/^\[prebake\]/{/^\[/!d}' d/kernels-only/image.conf
  expect_fail 6 'kernel no_such_kernel has no SASS' "$IV" --definition d/kernels-only ungated:1
  # A source that differs from the image (provenance, 4) wins over both.
  echo "# changed after the build" >>d/dsv41-flash-dcp2/files/engram.py
  "$IV" --json --definition d/dsv41-flash-dcp2 ungated:1 >three.json || true
  jq -e '.exit_code == 4 and ([.gates[] | select(.status == "fail") | .name] == ["provenance", "symbols", "kernels"])' three.json
  expect_fail 4 'engram.py in the image \(layer [0-9]+\) differs from its source' "$IV" --definition d/dsv41-flash-dcp2 ungated:1
  # Integrity too (a layer byte of a copy): 4 wins over both gates.
  "$IB" -q d/ungated -t ungated:1 --output oci:lay:u:1 >/dev/null
  layer=$(skopeo inspect --raw oci:lay:u:1 | jq -r '.layers[-2].digest' | cut -d: -f2)
  flip_byte "lay/blobs/sha256/$layer" 50
  IMGBUILD_STORE=$PWD/s1 expect_fail 4 "sha256:$layer" "$IV" --definition d/dsv41-flash-dcp2 oci:lay:u:1
}

# --smoke on a machine without GPUs: the smoke test cannot run, and the
# image is not passed.
t_imgverify_smoke_without_gpus_fails() {
  [ ! -e /dev/nvidia0 ] || skip_test "this host has a GPU: tests/gpu/smoke.sh tests it"
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  expect_fail 7 'smoke: --smoke=required, but this machine has no GPU' "$IV" --smoke dsv41-flash-dcp2:local
  "$IV" --json --smoke dsv41-flash-dcp2:local >s.json || true
  jq -e '.status == "fail" and .exit_code == 7 and (.gates[] | select(.name == "smoke") | .status == "fail")' s.json
  # Without --smoke, the same image passes: the failure is the smoke test's.
  "$IV" dsv41-flash-dcp2:local >/dev/null
}

# A layer whose blob this store has read through (a build, a pull, an
# imgverify) is hashed, its diff_id and hostile entries taken from that
# read's record (layers/read/readthrough.h); --full reads it through again.
# The bytes are hashed every time, and a record that lies about the
# diff_id is caught by the config, then mended by --full.
t_verify_hashes_the_layers_it_has_read_and_full_reads_them() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t r:1 >/dev/null
  local n layer rec
  n=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:r:1" | jq '.layers | length')
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:r:1" | jq -r '.layers[-2].digest' | cut -d: -f2)
  "$IV" --json r:1 >1.json
  jq -e --argjson n "$n" '.status == "pass" and .integrity.layers_read + .integrity.layers_known == $n' 1.json
  "$IV" --json r:1 >2.json
  jq -e --argjson n "$n" '.status == "pass" and .integrity.layers_known == $n and .integrity.layers_read == 0' 2.json
  jq -e --arg n "$n" '.gates[] | select(.name == "integrity") | .detail
                      | contains("0 layer(s) read through, \($n) hashed and known from an earlier read")' 2.json
  "$IV" --full --json r:1 >3.json
  jq -e --argjson n "$n" '.status == "pass" and .integrity.layers_read == $n and .integrity.layers_known == 0' 3.json
  # The record of the overlay layer says another diff_id, its seal made
  # right: the config's diff_id disagrees, as if the layer had been read.
  rec=$IMGBUILD_STORE/imgbuild/read-through/$layer
  [ -s "$rec" ]
  /usr/bin/python3 - "$rec" <<'PY'
import hashlib, re, sys
text = open(sys.argv[1]).read()
body = text[: text.rindex("end ")]
body = re.sub(r"diff_id sha256:[0-9a-f]{64}", "diff_id sha256:" + "0" * 64, body)
open(sys.argv[1], "w").write(body + "end sha256:" + hashlib.sha256(body.encode()).hexdigest() + "\n")
PY
  expect_fail 4 "layer blob sha256:$layer: uncompressed digest sha256:0{64}, config says diff_id" "$IV" r:1
  "$IV" --full r:1 >/dev/null
  "$IV" --json r:1 >4.json
  jq -e --argjson n "$n" '.status == "pass" and .integrity.layers_known == $n' 4.json
  # Its bytes damaged in a copy of the store, the record still there: the
  # digest of the bytes fails it, no inflate needed.
  cp -al "$IMGBUILD_STORE" s-damaged
  rm "s-damaged/blobs/sha256/$layer"
  cp "$IMGBUILD_STORE/blobs/sha256/$layer" "s-damaged/blobs/sha256/$layer"
  flip_byte "s-damaged/blobs/sha256/$layer" 50
  IMGBUILD_STORE=$PWD/s-damaged "$IV" --json r:1 >5.json || true
  jq -e --arg l "sha256:$layer" '.exit_code == 4 and (.error | contains("layer blob \($l): content has digest"))
                                 and .integrity.layers_known >= 1' 5.json
}

# A store that never read the image (a CI step on another machine) reads
# each layer once for every check (issue 46): the file list's pass, with the
# gates' indexers, checks the digests and keeps the read-through record; the
# integrity check does not hash again what that pass of this run read where
# it is (`integrity.layers_in_pass`), and the gates read no layer again.
# Each layer blob is opened once (the pass), and once more where the symbol
# gate reads the files it checks by range (the overlay's) or writes its
# interpreter's root (the stand-in's layers that hold /usr/bin/python3.12,
# its libraries and standard library), from the checkpoint before each
# file: the pass recorded the inflate index of every layer of 8 MiB or more
# in the local store (a view's artifact is never written).  Before, the
# gates opened the stand-in's two layers 13 times (the base's 10), and
# until 39dc472 each layer was opened once more to be hashed.  The verdicts
# are those of a store that had read the image.
t_verify_in_a_fresh_store_reads_each_layer_once() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:layout:dcp2:1 >/dev/null
  "$IV" --json dsv41-flash-dcp2:local >store.json
  local man n l c
  man=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == "dcp2:1") | .digest' layout/index.json | cut -d: -f2)
  n=$(jq '.layers | length' "layout/blobs/sha256/$man")
  # (LeakSanitizer cannot run under ptrace: under SANITIZE=1 it is off for
  # this one run, the rest of ASan's checks on)
  IMGBUILD_STORE=$PWD/fresh ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -e trace=openat -o opens.txt "$IV" --json oci:layout:dcp2:1 >fresh.json
  jq -e --argjson n "$n" '.status == "pass" and .integrity.layers_known == $n and .integrity.layers_read == 0
                           and .integrity.layers_in_pass == $n' fresh.json
  diff <(jq -c '[.gates[] | {name, status}]' store.json) <(jq -c '[.gates[] | {name, status}]' fresh.json)
  local all=0 indexed=0
  for l in $(jq -r '.layers[].digest' "layout/blobs/sha256/$man" | cut -d: -f2); do
    c=$(grep -c "layout/blobs/sha256/$l\"" opens.txt || true)
    log "layer ${l:0:12}: opened $c times"
    [ "$c" -ge 1 ]
    [ "$c" -le 2 ]
    all=$((all + c))
    if [ "$(stat -c %s "layout/blobs/sha256/$l")" -ge $((8 << 20)) ]; then
      [ -s "fresh/imgbuild/inflate-index/$l" ]
      indexed=$((indexed + 1))
    fi
  done
  [ "$indexed" -ge 1 ]
  [ "$all" -le $((2 * n - 1)) ]
  figure "a fresh store's imgverify of the stand-in's $n layers: their blobs opened $all times (one pass each, the symbol gate's range read of the overlay and its interpreter's root from the $indexed inflate index(es) the pass recorded); the same verdicts"
}

# imgverify's reports with the times and resources taken out.
verdict_of() { jq -S 'del(.. | .seconds?) | del(.resources)' "$1"; }

# A big gzip layer's inflate index (layers/read/inflate_index.h): recorded by
# the first imgverify, used by the next (its two threads) with the same
# report; a forged one (a checkpoint's history changed, its hash made
# right) is not believed: the same report, and it is dropped; the blob
# altered after its index was recorded fails as it does without one; gc
# removes the index with its blob.
t_verify_inflate_index_recorded_used_forged_and_swept() {
  local S=$IMGBUILD_STORE layer idx
  mkdir d
  /usr/bin/python3 - d/big.bin <<'PY'
import random, sys
r = random.Random(7)
text = bytes(r.choice(b"abcdefgh \n") for _ in range(1 << 15))
with open(sys.argv[1], "wb") as f:
    for i in range(40):  # 40 MiB, half of it random: a layer of about 24 MiB
        f.write(r.randbytes(1 << 19))
        f.write(text[i:] + text[:i] * 15)
PY
  printf '[image]\nname = big:1\nfrom = scratch\n[copy]\nfile big.bin /big.bin\n[new]\n/\n' >d/image.conf
  "$IB" -q --smoke=off d -t big:1 >/dev/null
  layer=$(skopeo inspect "oci:$S:big:1" | jq -r '.Layers[0]' | cut -d: -f2)
  idx=$S/imgbuild/inflate-index/$layer
  # --full: the layer is inflated each time (without it, a layer this
  # store has read through is only hashed, and its index not read).
  "$IV" --full --json big:1 >1.json
  [ -s "$idx" ]
  "$IV" --full --json big:1 >2.json
  [ -s "$idx" ]
  diff <(verdict_of 1.json) <(verdict_of 2.json)
  /usr/bin/python3 - "$idx" <<'PY'
import hashlib, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[-40:-32])[0]
snap = (len(b) - 73 - 40) // n - 16
b[73 + snap - 32768 + 1000] ^= 1  # the first checkpoint's history (its last 32 KiB)
b[-32:] = hashlib.sha256(b[:-32]).digest()
open(sys.argv[1], "wb").write(b)
PY
  "$IV" --full --json big:1 >3.json
  diff <(verdict_of 1.json) <(verdict_of 3.json)
  [ ! -e "$idx" ]
  # Recorded again; in a copy of the store, the blob altered after it.
  "$IV" --full big:1 >/dev/null
  [ -s "$idx" ]
  cp -r "$S" s2
  flip_byte "s2/blobs/sha256/$layer" 60
  local rc=0
  IMGBUILD_STORE=$PWD/s2 "$IV" --full --json big:1 >4.json || rc=$?
  [ "$rc" = 4 ]
  rm -f "s2/imgbuild/inflate-index/$layer"
  IMGBUILD_STORE=$PWD/s2 "$IV" --full --json big:1 >5.json || true
  diff <(verdict_of 4.json) <(verdict_of 5.json)
  # Untagged and collected, the index and the record of the layer's read
  # (layers/read/readthrough.h) go with their blob.
  [ -s "$S/imgbuild/read-through/$layer" ]
  jq -c '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] != "big:1"))' "$S/index.json" >i.json
  cp i.json "$S/index.json"
  "$IB" --gc >/dev/null
  [ ! -e "$S/blobs/sha256/$layer" ]
  [ ! -e "$idx" ]
  [ ! -e "$S/imgbuild/read-through/$layer" ]
}
