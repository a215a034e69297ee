# Attestations in the ecosystem's formats (issue "Speak the ecosystem's
# formats"): in-toto Statements v1 (SLSA Provenance v1, imgbuild's build
# facts, the SPDX 2.3 SBOM) attached as an OCI artifact about the image,
# judged by parsers and schemas imgbuild did not write (tests/attest/check.py:
# the in-toto project's Python bindings over Debian's python3-protobuf, the
# SPDX project's 2.3 JSON schema), carried by oci:, docker-archive: and a
# registry (Debian's docker-registry, skopeo), read back by imgverify.

CHECK=$ROOT/tests/attest/check.py

attest_of() { # LAYOUT DIGEST: check.py's findings about the image
  /usr/bin/python3 "$CHECK" "$1" "$2"
}

t_attest_statements_pass_the_intoto_and_slsa_parsers() {
  build_base
  # The seed store's warm-up build of this image left its artifact: only
  # the one this build writes is judged (an artifact the build failed to
  # attach to the image would otherwise be stood in for by that one).
  jq '[.manifests[].digest]' "$IMGBUILD_STORE/index.json" >before.json
  "$IB" -q dsv41-flash-dcp2 >out.txt
  digest=$(cut -d' ' -f2 out.txt)
  attest_of "$IMGBUILD_STORE" "$digest" |
    jq --slurpfile old before.json '.artifacts |= map(select(.digest as $d | $old[0] | index($d) | not))' >a.json
  # One artifact, of the type current tools attach, with the three statements.
  jq -e '.artifacts | length == 1' a.json
  jq -e '.artifacts[0] | .artifactType == "application/vnd.in-toto+json"
           and .indexArtifactType == "application/vnd.in-toto+json"
           and .predicateTypes == ["https://slsa.dev/provenance/v1", "https://imgbuild.invalid/attestation/build/v1",
                                   "https://spdx.dev/Document"]' a.json
  # What a verifier reads: the base by digest, the definition and every
  # source by their content's sha256, nvcc by digest.
  base=$(manifest_digest dsv41-flash-b12x:local)
  jq -e --arg b "${base#sha256:}" '.artifacts[0].slsa.resolvedDependencies[0] == {"name": "base",
           "uri": "dsv41-flash-b12x:local", "digest": {"sha256": $b}}' a.json
  conf=$(sha256sum "$ROOT/images/dsv41-flash-dcp2/image.conf" | cut -d' ' -f1)
  jq -e --arg c "$conf" '.artifacts[0].slsa.resolvedDependencies[] | select(.name == "definition") | .digest.sha256 == $c' a.json
  for f in "$ROOT"/images/dsv41-flash-dcp2/files/*.py; do
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    jq -e --arg u "file://$f" --arg s "$sum" \
      '[.artifacts[0].slsa.resolvedDependencies[] | select(.uri == $u and .digest.sha256 == $s)] | length == 1' a.json >/dev/null
  done
  nvcc=$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  jq -e --arg s "$(sha256sum "$nvcc" | cut -d' ' -f1)" \
    '.artifacts[0].slsa.resolvedDependencies[] | select(.name == "nvcc") | .digest.sha256 == $s' a.json
  jq -e '.artifacts[0].slsa | .builder == "https://imgbuild.invalid/builder/imgbuild" and .startedOn <= .finishedOn' a.json
  jq -e '.artifacts[0].imgbuild.gates | .symbols == "pass" and .kernels == "pass"' a.json
  # The parsers refuse what they must: an unknown field in a statement, and
  # a statement about another image.
  art=$(jq -r '.artifacts[0].digest' a.json)
  /usr/bin/python3 - "$IMGBUILD_STORE" "$art" <<'PY'
import hashlib, json, os, shutil, sys
store, art = sys.argv[1:3]
def path(d): return os.path.join(store, "blobs", *d.split(":"))
m = json.load(open(path(art)))
st = json.load(open(path(m["layers"][0]["digest"])))
st["predicate"]["buildDefinition"]["buildTypo"] = "x"
b = json.dumps(st).encode()
d = "sha256:" + hashlib.sha256(b).hexdigest()
open(path(d), "wb").write(b)
m["layers"][0]["digest"], m["layers"][0]["size"] = d, len(b)
os.makedirs("bad/blobs/sha256")
for f in os.listdir(os.path.join(store, "blobs", "sha256")):
    os.link(os.path.join(store, "blobs", "sha256", f), os.path.join("bad/blobs/sha256", f))
mb = json.dumps(m).encode()
md = "sha256:" + hashlib.sha256(mb).hexdigest()
open(os.path.join("bad", "blobs", *md.split(":")), "wb").write(mb)
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": m["mediaType"], "digest": md, "size": len(mb)}]},
          open("bad/index.json", "w"))
PY
  refute /usr/bin/python3 "$CHECK" bad "$digest" 2>err.txt
  grep 'not a SLSA Provenance v1 predicate: .*buildTypo' err.txt
  /usr/bin/python3 "$CHECK" "$IMGBUILD_STORE" "sha256:$(printf x | sha256sum | cut -d' ' -f1)" >none.json
  jq -e '.artifacts == []' none.json
}

# The statements go where the image goes: an OCI layout, a docker-archive
# (its OCI half), and imgverify reads them back from each.
t_attest_travel_with_oci_and_docker_archive_outputs() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:lay:dcp2:1 --output docker-archive:dcp2.tar >out.txt
  digest=$(cut -d' ' -f2 out.txt)
  attest_of lay "$digest" >lay.json
  mkdir arch && tar -xf dcp2.tar -C arch
  attest_of arch "$digest" >arch.json
  for f in lay.json arch.json; do
    jq -e '.artifacts | length == 1 and (.[0].predicateTypes | length == 3)' "$f"
  done
  for ref in oci:lay:dcp2:1 docker-archive:dcp2.tar; do
    IMGBUILD_STORE=$PWD/v "$IV" --json "$ref" >v.json
    jq -e '[.gates[] | select(.status == "pass") | .name] | index("provenance") and index("symbols") and index("kernels")' v.json
  done
}

# pushed_dcp2: a registry ($REG) with the stand-in base and the DCP2 image
# pushed as dcp2:1 with its attestation; $digest and $hex name the image.
pushed_dcp2() {
  build_base
  registry_start open
  push_base
  "$IB" -q dsv41-flash-dcp2 --push "docker://$REG/dcp2:1" >out.txt
  digest=$(cut -d' ' -f2 out.txt)
  hex=${digest#sha256:}
}

# A registry without the referrers API (Debian's docker-registry 2.8
# answers 404 to /v2/NAME/referrers/DIGEST): the artifact is found through
# the referrers tag sha256-HEX, as the distribution spec 1.1 says; skopeo
# copies that tag and the artifacts it lists; imgverify of the pulled image
# finds and checks them.
t_attest_registry_referrers_tag_and_skopeo() {
  pushed_dcp2
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$REG/v2/dcp2/referrers/$digest")" = 404 ]
  skopeo inspect --raw --tls-verify=false "docker://$REG/dcp2:sha256-$hex" >ref.json
  jq -e '.mediaType == "application/vnd.oci.image.index.v1+json"
         and ([.manifests[] | select(.artifactType == "application/vnd.in-toto+json")] | length == 1)' ref.json
  # skopeo carries the referrers tag and the artifact it lists.
  skopeo copy -q --all --src-tls-verify=false "docker://$REG/dcp2:sha256-$hex" oci:copied:refs
  skopeo copy -q --src-tls-verify=false "docker://$REG/dcp2:1" oci:copied:img
  attest_of copied "$digest" >c.json
  jq -e '.artifacts | length == 1 and (.[0].predicateTypes | length == 3)' c.json
  # imgverify of the pulled image.
  IMGBUILD_STORE=$PWD/v "$IV" --json "docker://$REG/dcp2:1" >v.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "provenance") | .status == "pass")' v.json
  attest_of v "$digest" | jq -e '.artifacts | length == 1'
}

# A mirror made with skopeo: the image and its referrers tag copied to
# another repository and to an OCI layout.  skopeo 1.9 writes the index of
# the tag without the entries' artifactType; imgverify reads the type from
# the artifact's manifest (its artifactType, else its config's media type,
# as the distribution spec's referrers API does), finds the provenance and
# reruns the gates.  With the attestations deleted from the mirror (the
# artifact the tag lists, then the tag), an image whose config says
# imgbuild built it fails, naming what is missing (exit 10), unless the
# user asks for less (--require-gates without provenance).
t_attest_found_in_a_skopeo_mirror_and_missing_fails() {
  pushed_dcp2
  local tls="--src-tls-verify=false --dest-tls-verify=false"
  skopeo copy -q --all $tls "docker://$REG/dcp2:sha256-$hex" "docker://$REG/mirror:sha256-$hex"
  skopeo copy -q $tls "docker://$REG/dcp2:1" "docker://$REG/mirror:1"
  # What skopeo wrote: the artifact listed, its artifactType gone.
  skopeo inspect --raw --tls-verify=false "docker://$REG/mirror:sha256-$hex" >tag.json
  jq -e '(.manifests | length == 1) and (.manifests[0] | has("artifactType") | not)' tag.json
  art=$(jq -r '.manifests[0].digest' tag.json)
  # The mirror: provenance found, the recorded gates run again and pass.
  local gates='[.gates[] | select(.status == "pass") | .name] | index("provenance") and index("symbols") and index("native") and index("kernels")'
  IMGBUILD_STORE=$PWD/v1 "$IV" --json "docker://$REG/mirror:1" >v.json
  jq -e ".status == \"pass\" and ($gates)" v.json
  # The same copied into an OCI layout, the tag by its name.
  skopeo copy -q --all --src-tls-verify=false "docker://$REG/mirror:sha256-$hex" "oci:lay:sha256-$hex"
  skopeo copy -q --src-tls-verify=false "docker://$REG/mirror:1" oci:lay:img
  IMGBUILD_STORE=$PWD/v2 "$IV" --json oci:lay:img >l.json
  jq -e ".status == \"pass\" and ($gates)" l.json
  # The artifact deleted from the mirror, its tag left: named, exit 10.
  curl -sf -X DELETE "http://$REG/v2/mirror/manifests/$art"
  IMGBUILD_STORE=$PWD/v3 expect_fail 10 "provenance missing: the referrers tag sha256-$hex of docker://$REG/mirror lists $art \\(of a type it does not say\\), which the registry does not have" \
    "$IV" "docker://$REG/mirror:1"
  rm "lay/blobs/sha256/${art#sha256:}"
  IMGBUILD_STORE=$PWD/v4 expect_fail 10 "provenance missing: artifact $art is listed about image $digest, and is not there" \
    "$IV" oci:lay:img
  # The tag deleted too: the config says imgbuild built the image.
  tagdigest=$(curl -sI -H 'Accept: application/vnd.oci.image.index.v1+json' "http://$REG/v2/mirror/manifests/sha256-$hex" |
    tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p')
  curl -sf -X DELETE "http://$REG/v2/mirror/manifests/$tagdigest"
  IMGBUILD_STORE=$PWD/v5 expect_fail 10 "provenance missing: the image.s config says imgbuild built it \\(history .imgbuild: [A-Z]+ [^)]*\\), and docker://$REG/mirror:1 carries no attestation about $digest: copy its referrers tag sha256-$hex with it" \
    "$IV" "docker://$REG/mirror:1"
  IMGBUILD_STORE=$PWD/v6 "$IV" --json "docker://$REG/mirror:1" --require-gates none >n.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "provenance") | .status == "skip")' n.json
  IMGBUILD_STORE=$PWD/v6 expect_fail 10 'provenance missing: the image.s config says imgbuild built it' \
    "$IV" "docker://$REG/mirror:1" --require-gates provenance
  grep -q 'gate provenance did not run, and --require-gates names it' stderr.txt
}

source "$ROOT/tests/attest/edit-store.sh"

# old_format TAG: rewrite the image's artifact in $IMGBUILD_STORE to the
# format imgbuild wrote before (artifactType application/vnd.imgbuild.
# provenance.v1+json, the record as its one layer).
old_format() {
  edit_store "$1" <<'PY'
ent = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == img)
m = json.load(open(path(ent["digest"])))
ours = next(l for l in m["layers"] if l["annotations"]["in-toto.io/predicate-type"].startswith("https://imgbuild.invalid/"))
record = json.load(open(path(ours["digest"])))["predicate"]
d, n = put(json.dumps(record).encode())
m["artifactType"] = "application/vnd.imgbuild.provenance.v1+json"
m["layers"] = [{"mediaType": "application/vnd.imgbuild.provenance.v1+json", "digest": d, "size": n}]
ent["digest"], ent["size"] = put(json.dumps(m).encode())
ent["artifactType"] = m["artifactType"]
save()
PY
}

t_attest_old_format_is_still_read() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t old:1 >/dev/null
  old_format old:1
  jq -e '[.manifests[] | select(.artifactType == "application/vnd.imgbuild.provenance.v1+json")] | length == 1' \
    "$IMGBUILD_STORE/index.json"
  "$IV" --json old:1 >v.json
  jq -e '[.gates[] | select(.status == "pass") | .name] | index("provenance") and index("symbols") and index("kernels")' v.json
}

# A statement that names another image is refused, with exit 4.
t_attest_statement_about_another_image_is_refused() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t other:1 >/dev/null
  edit_store other:1 <<'PY'
ent = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == img)
m = json.load(open(path(ent["digest"])))
st = json.load(open(path(m["layers"][2]["digest"])))
st["subject"][0]["digest"]["sha256"] = hashlib.sha256(b"another image").hexdigest()
m["layers"][2]["digest"], m["layers"][2]["size"] = put(json.dumps(st).encode())
ent["digest"], ent["size"] = put(json.dumps(m).encode())
save()
PY
  expect_fail 4 'statement sha256:[0-9a-f]{64}: its subject is not the image sha256:' "$IV" other:1
}

# The SBOM over a small base with a handwritten dpkg status file: what is
# installed (any state but not-installed and config-files) with its
# version, Python distributions of the three kinds (one added by the
# build's own layer), and the shared object with GPU code with its SMs.
# sbom_base: the folder base/ of a small base with a handwritten dpkg
# status file, Python distributions of three kinds and GPU code.
sbom_base() {
  mkdir -p base/files sbom
  cat >base/files/status <<'ST'
Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Multi-Arch: same
Version: 2.36-9+deb12u4
Description: GNU C Library: Shared libraries
 Contains the standard libraries.

Package: gone
Status: deinstall ok config-files
Architecture: all
Version: 1.0
Description: removed, its conffiles kept

Package: python3-yaml
Status: install ok installed
Architecture: amd64
Version: 6.0-3+b2
Depends: libc6 (>= 2.14)
Description: YAML parser and emitter for Python3

Package: never
Status: purge ok not-installed
Architecture: all

Package: half
Status: install reinstreq half-installed
Architecture: all
Version: 0.1~rc1
ST
  printf 'Metadata-Version: 2.1\nName: numpy\nVersion: 1.24.2\nSummary: arrays\n\nName: not-this\n' >base/files/METADATA
  printf 'Metadata-Version: 1.1\nName: PyYAML\nVersion: 6.0\n' >base/files/PKG-INFO
  printf 'Metadata-Version: 1.0\nName: distro-info\nVersion: 1.5\n' >base/files/distro_info.egg-info
  cp "$ROOT/images/dsv41-flash-b12x/native/libflashinfer_dcp.so" base/files/
  local py=/usr/lib/python3/dist-packages
  cat >base/image.conf <<CONF
[image]
name = sbase:1
from = scratch
gzip-level = 1
[copy]
file files/status /var/lib/dpkg/status
file files/METADATA $py/numpy-1.24.2.dist-info/METADATA
file files/PKG-INFO $py/PyYAML-6.0.egg-info/PKG-INFO
file files/distro_info.egg-info $py/distro_info-1.5.egg-info
file files/libflashinfer_dcp.so /usr/lib/libflashinfer_dcp.so
[new]
/
CONF
}

t_attest_sbom_lists_dpkg_python_and_gpu_code() {
  sbom_base
  py=/usr/lib/python3/dist-packages
  "$IB" -q base >/dev/null
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0\n' >sbom/METADATA
  printf '[image]\nname = sbom:1\nfrom = sbase:1\n[copy]\nfile METADATA /usr/local/lib/python3.12/dist-packages/vllm-0.11.0.dist-info/METADATA\n[new]\n/usr/local/lib/python3.12/dist-packages/vllm-0.11.0.dist-info/\n' >sbom/image.conf
  "$IB" -q sbom >out.txt
  attest_of "$IMGBUILD_STORE" "$(cut -d' ' -f2 out.txt)" >a.json
  jq -e '.artifacts[0].spdx.deb == [["libc6", "2.36-9+deb12u4"], ["python3-yaml", "6.0-3+b2"], ["half", "0.1~rc1"]]' a.json
  jq -e --arg py "$py" '.artifacts[0].spdx.pypi | sort == ([
      ["PyYAML", "6.0", "\($py)/PyYAML-6.0.egg-info/PKG-INFO"],
      ["distro-info", "1.5", "\($py)/distro_info-1.5.egg-info"],
      ["numpy", "1.24.2", "\($py)/numpy-1.24.2.dist-info/METADATA"],
      ["vllm", "0.11.0", "/usr/local/lib/python3.12/dist-packages/vllm-0.11.0.dist-info/METADATA"]] | sort)' a.json
  jq -e '.artifacts[0].spdx.gpu == [["/usr/lib/libflashinfer_dcp.so", ["sm_121a", "compute_120"]]]' a.json
  # What the SBOM took from each package file is cached by the file's
  # content: the next build lists the same packages and reads no layer of
  # the base for them (strace: the base's layer blob is never opened).
  [ "$(ls "$IMGBUILD_STORE/imgbuild/sbom" | wc -l)" = 5 ]
  local man layer
  man=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == "sbase:1") | .digest' \
    "$IMGBUILD_STORE/index.json" | cut -d: -f2)
  layer=$(jq -r '.layers[0].digest' "$IMGBUILD_STORE/blobs/sha256/$man" | cut -d: -f2)
  traced -f -e trace=openat -o open.txt "$IB" -q sbom -t sbom:2 >out2.txt
  ! grep -q "$layer" open.txt
  attest_of "$IMGBUILD_STORE" "$(cut -d' ' -f2 out2.txt)" >b.json
  [ "$(jq -c '.artifacts[0].spdx' a.json)" = "$(jq -c '.artifacts[0].spdx' b.json)" ]
  # An entry cut short is no entry: that file is read again, the same.
  for f in "$IMGBUILD_STORE"/imgbuild/sbom/*; do head -c 10 "$f" >"$f.cut" && mv "$f.cut" "$f"; done
  "$IB" -q sbom -t sbom:3 >out3.txt
  attest_of "$IMGBUILD_STORE" "$(cut -d' ' -f2 out3.txt)" >c.json
  [ "$(jq -c '.artifacts[0].spdx' a.json)" = "$(jq -c '.artifacts[0].spdx' c.json)" ]
}

# Issue 18: a cold build (a store that never saw the base) fills the SBOM's
# cache in the file-list pass (builder/attest/sbom.c's indexer), so its SBOM reads
# no layer; with the indexers off (IMGBUILD_NO_INDEXERS=1) the SBOM reads
# the base's layer itself.  Both list the same packages, and every cache
# entry is byte for byte the same.
# sbom over layout:base built cold twice, with the indexers (store s-one)
# and without (s-own): MODE.opens (strace), MODE.out, MODE.spdx.
sbom_one_and_own() {
  for mode in one own; do
    off=
    [ "$mode" = own ] && off=1
    (export IMGBUILD_NO_INDEXERS=$off IMGBUILD_STORE="$PWD/s-$mode"
     traced -f -qq -e trace=openat -o "$mode.opens" "$IB" -q sbom >"$mode.out")
    attest_of "$PWD/s-$mode" "$(cut -d' ' -f2 "$mode.out")" | jq -c '.artifacts[0].spdx' >"$mode.spdx"
  done
}

t_attest_sbom_cold_build_fills_its_cache_in_the_one_pass() {
  sbom_base
  "$IB" -q base --output "oci:$PWD/layout:base" >/dev/null
  cp base/files/status sbom/status.copy
  printf '[image]\nname = sbom:1\nfrom = oci:%s/layout:base\n[copy]\nfile status.copy /etc/status.copy\n[new]\n/etc/status.copy\n' \
    "$PWD" >sbom/image.conf
  sbom_one_and_own
  local layer
  layer=$(jq -r '.layers[0].digest' "layout/blobs/sha256/$(jq -r '.manifests[0].digest' layout/index.json | cut -d: -f2)" \
    | cut -d: -f2)
  cmp one.spdx own.spdx
  jq -e '.deb | length == 3' one.spdx # not vacuous: the packages are there
  jq -e '.pypi | length == 3' one.spdx
  n=0
  for f in s-own/imgbuild/sbom/*; do
    cmp "$f" "s-one/imgbuild/sbom/$(basename "$f")"
    n=$((n + 1))
  done
  [ "$n" = 4 ]
  # The SBOM's own read is the one opening of the blob fewer.
  one=$(grep -c "blobs/sha256/$layer\"" one.opens) # the blob: not the caches named by it
  own=$(grep -c "blobs/sha256/$layer\"" own.opens)
  [ "$one" -lt "$own" ]
  # Exactly: the layer's bytes are opened once, by the one pass that lists
  # it, copies it into the store and feeds every indexer (the SBOM's too);
  # the store's copy is not read again.  (The SBOM's indexer missing read
  # it a second time and the count above still held, the kernels' indexer
  # saving the other read.)
  [ "$one" = 1 ]
  [ "$(grep -c "s-one/blobs/sha256/$layer\"" one.opens)" = 0 ]
}

# ---- the SBOM's GPU-code list, kept per base (builder/sbom.c) --------------

# sbom_pred STORE DIGEST: the SBOM statement's predicate about DIGEST, as
# compact JSON without its creation time (the one field that differs
# between two builds of the same image): read with Python, not imgbuild.
sbom_pred() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, os, sys
lay, digest = sys.argv[1:3]
def blob(d): return json.load(open(os.path.join(lay, "blobs", *d.split(":"))))
found = []
for e in json.load(open(os.path.join(lay, "index.json")))["manifests"]:
    m = blob(e["digest"])
    if m.get("subject", {}).get("digest") != digest:
        continue
    for l in m.get("layers", []):
        if l.get("annotations", {}).get("in-toto.io/predicate-type") == "https://spdx.dev/Document":
            p = blob(l["digest"])["predicate"]
            del p["creationInfo"]["created"]
            found.append(json.dumps(p, sort_keys=True, separators=(",", ":")))
assert len(set(found)) == 1, found
print(found[0])
PY
}

# gpu_base: the base sbase:1 of sbom_base, plus the same GPU code under a
# name no glob matches, reached through a link that one matches.
gpu_base() {
  sbom_base
  cp base/files/libflashinfer_dcp.so base/files/code.bin
  sed -i -e '/^\[new\]$/i file files/code.bin /opt/gpu/code.bin' -e '/^\[new\]$/i symlink /usr/lib/libgpu.so /opt/gpu/code.bin' \
    base/image.conf
  "$IB" -q base >/dev/null
  echo data >plain.bin
}

# gpu_def NAME COPY-LINE...: an image over sbase:1 with those [copy] lines.
gpu_def() {
  local dir=$1
  shift
  mkdir -p "$dir"
  { printf '[image]\nname = %s:1\nfrom = sbase:1\n[copy]\n' "$dir"
    for l in "$@"; do echo "$l"; done
    printf '[new]\n/opt/new/\n'; } >"$dir/image.conf"
}

# kept_build NAME KIND: build it, its SBOM predicate in NAME.sbom; then the
# same image again with no list of KIND (a memo folder) kept, whose SBOM
# must be the same byte for byte (but for the time).
kept_build() {
  "$IB" "$1" 2>"$1.err" >"$1.out"
  sbom_pred "$IMGBUILD_STORE" "$(cut -d' ' -f2 "$1.out")" >"$1.sbom"
  mv "$IMGBUILD_STORE/imgbuild/$2" "$1.kept"
  "$IB" -q "$1" >"$1.again"
  cmp "$1.out" "$1.again"
  sbom_pred "$IMGBUILD_STORE" "$(cut -d' ' -f2 "$1.again")" | cmp - "$1.sbom"
  rm -rf "$IMGBUILD_STORE/imgbuild/$2" && mv "$1.kept" "$IMGBUILD_STORE/imgbuild/$2"
}

# cut_kept KIND: the one kept list of KIND cut to its first three lines.
cut_kept() {
  local m
  m=$(ls "$IMGBUILD_STORE/imgbuild/$1"/*)
  head -n 3 "$m" >cut && cat cut >"$m"
}

# gpu_build NAME: kept_build of the GPU list, which goes to NAME.gpu.
gpu_build() {
  kept_build "$1" sbom-gpu
  jq -c '[.packages[] | select(.comment // "" | startswith("GPU code:")) | [.name, .comment]] | sort' "$1.sbom" >"$1.gpu"
}

GPU_BOTH='[["/opt/gpu/code.bin","GPU code: sm_121a compute_120"],["/usr/lib/libflashinfer_dcp.so","GPU code: sm_121a compute_120"]]'

# Issue 18: the SBOM's GPU-code list over the base is kept, and a build
# whose overlay changes nothing the glob read gets it again, the same
# SBOM, without globbing the base's paths.
t_attest_sbom_gpu_list_reused_when_the_overlay_changes_nothing_it_read() {
  gpu_base
  # The base's own build (the whole image its key) kept it already.
  gpu_def a "file $PWD/plain.bin /opt/new/a.txt"
  gpu_build a
  grep -q 'sbom: the GPU-code list over the base, reused' a.err
  [ "$(cat a.gpu)" = "$GPU_BOTH" ]
  gpu_def b "file $PWD/plain.bin /opt/new/b.txt"
  gpu_build b
  grep -q 'sbom: the GPU-code list over the base, reused' b.err
  [ "$(cat b.gpu)" = "$GPU_BOTH" ]
  # A kept list cut short is no list: made again, the same.
  cut_kept sbom-gpu
  gpu_def c "file $PWD/plain.bin /opt/new/c.txt"
  gpu_build c
  refute grep -q 'GPU-code list over the base, reused' c.err
  [ "$(cat c.gpu)" = "$GPU_BOTH" ]
}

# An overlay that changes what the glob read, or adds what it would match,
# gets the list made again (a kept one would be wrong): a GPU object added;
# the base's GPU object replaced by data under its own name; and the file
# behind a matched link replaced by data under a name no glob matches.
# Each SBOM is the one made with nothing kept (gpu_build).
t_attest_sbom_gpu_list_not_reused_when_the_overlay_changes_a_read() {
  gpu_base
  gpu_def a "file $PWD/plain.bin /opt/new/a.txt"
  gpu_build a
  [ "$(cat a.gpu)" = "$GPU_BOTH" ]
  gpu_def added "file $PWD/base/files/code.bin /opt/new/libnew.so"
  gpu_build added
  refute grep -q 'GPU-code list over the base, reused' added.err
  jq -e 'length == 3 and any(.[0] == "/opt/new/libnew.so")' added.gpu
  gpu_build a # the kept list is A's again
  gpu_def replaced "file $PWD/plain.bin /usr/lib/libflashinfer_dcp.so"
  gpu_build replaced
  refute grep -q 'GPU-code list over the base, reused' replaced.err
  [ "$(cat replaced.gpu)" = '[["/opt/gpu/code.bin","GPU code: sm_121a compute_120"]]' ]
  gpu_build a
  gpu_def behind "file $PWD/plain.bin /opt/gpu/code.bin"
  gpu_build behind
  refute grep -q 'GPU-code list over the base, reused' behind.err
  [ "$(cat behind.gpu)" = '[["/usr/lib/libflashinfer_dcp.so","GPU code: sm_121a compute_120"]]' ]
}

# ---- the SBOM's package list, kept per base (builder/attest/sbom.c) ----------------

# pkg_build NAME: kept_build of the package list; the packages' purls go
# to NAME.pkgs.
pkg_build() {
  kept_build "$1" sbom-packages
  jq -c '[.packages[] | .externalRefs[0].referenceLocator // empty]' "$1.sbom" >"$1.pkgs"
}

# (in the view's order: the Python files' paths come before dpkg's)
PKGS_BASE='["pkg:pypi/PyYAML@6.0","pkg:pypi/distro-info@1.5","pkg:pypi/numpy@1.24.2","pkg:deb/debian/libc6@2.36-9+deb12u4?arch=amd64","pkg:deb/debian/python3-yaml@6.0-3+b2?arch=amd64","pkg:deb/debian/half@0.1~rc1?arch=all"]'

# Issue 18: the SBOM's Debian and Python packages over the base are kept,
# and a build whose overlay adds no package file and changes none of their
# paths gets them again, the same SBOM, without walking the base's paths
# or parsing dpkg's status.
t_attest_sbom_package_list_reused_when_the_overlay_changes_none_of_its_files() {
  gpu_base
  # The base's own build (the whole image its key) kept it already.
  gpu_def a "file $PWD/plain.bin /opt/new/a.txt"
  pkg_build a
  grep -q 'sbom: the package list over the base, reused' a.err
  [ "$(cat a.pkgs)" = "$PKGS_BASE" ]
  # A file beside a package file, in its folder: nothing the list read.
  gpu_def b "file $PWD/plain.bin /usr/lib/python3/dist-packages/numpy-1.24.2.dist-info/RECORD"
  echo /usr/lib/python3/dist-packages/numpy-1.24.2.dist-info/RECORD >>b/image.conf # under [new]
  pkg_build b
  grep -q 'sbom: the package list over the base, reused' b.err
  [ "$(cat b.pkgs)" = "$PKGS_BASE" ]
  # A kept list cut short, or with a line not ours, is no list: made again, the same.
  cut_kept sbom-packages
  gpu_def c "file $PWD/plain.bin /opt/new/c.txt"
  pkg_build c
  refute grep -q 'package list over the base, reused' c.err
  [ "$(cat c.pkgs)" = "$PKGS_BASE" ]
  local m
  m=$(ls "$IMGBUILD_STORE"/imgbuild/sbom-packages/*)
  grep -q 'pkg:pypi/numpy' "$m" # kept whole again
  sed -i 's|^p\t0\tpy\\t|p\t0\tgem\\t|' "$m"
  grep -q 'gem' "$m"
  gpu_def d "file $PWD/plain.bin /opt/new/d.txt"
  pkg_build d
  refute grep -q 'package list over the base, reused' d.err
  [ "$(cat d.pkgs)" = "$PKGS_BASE" ]
}

# An overlay that adds a package file, replaces one, or puts a link where
# one was gets the list made again (a kept one would be wrong), and so does
# an image over another base; each SBOM is the one made with nothing kept
# (pkg_build), and a list made over an overlay that hid a package file is
# not kept for the next.
t_attest_sbom_package_list_not_reused_when_the_overlay_changes_one() {
  gpu_base
  gpu_def a "file $PWD/plain.bin /opt/new/a.txt"
  pkg_build a
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0\n' >METADATA
  gpu_def added "file $PWD/METADATA /opt/new/vllm-0.11.0.dist-info/METADATA"
  pkg_build added
  refute grep -q 'package list over the base, reused' added.err
  jq -e 'length == 7 and index("pkg:pypi/vllm@0.11.0")' added.pkgs
  printf 'Package: only\nStatus: install ok installed\nArchitecture: all\nVersion: 2\n' >status
  gpu_def replaced "file $PWD/status /var/lib/dpkg/status"
  pkg_build replaced
  refute grep -q 'package list over the base, reused' replaced.err
  jq -e 'index("pkg:deb/debian/only@2?arch=all") and (index("pkg:deb/debian/libc6@2.36-9+deb12u4?arch=amd64") | not)' replaced.pkgs
  # dpkg's status replaced by a link: no file there, so no Debian package
  # listed (the walk takes regular files only); the path was read.
  gpu_def linked "file $PWD/status /opt/new/status" "symlink /var/lib/dpkg/status /opt/new/status"
  pkg_build linked
  refute grep -q 'package list over the base, reused' linked.err
  [ "$(cat linked.pkgs)" = '["pkg:pypi/PyYAML@6.0","pkg:pypi/distro-info@1.5","pkg:pypi/numpy@1.24.2"]' ]
  pkg_build a # the kept list is still the base's
  grep -q 'sbom: the package list over the base, reused' a.err
  [ "$(cat a.pkgs)" = "$PKGS_BASE" ]
  # Another base (its dpkg status another): another key, the list made.
  sed -i -e 's/^name = sbase:1$/name = sbase:2/' -e 's|^file files/status .*|file '"$PWD"'/status /var/lib/dpkg/status|' \
    base/image.conf
  "$IB" -q base >/dev/null
  mkdir -p e && sed 's/^from = sbase:1$/from = sbase:2/' a/image.conf >e/image.conf
  sed -i 's/^name = a:1$/name = e:1/' e/image.conf
  pkg_build e
  jq -e 'index("pkg:deb/debian/only@2?arch=all") and (index("pkg:deb/debian/libc6@2.36-9+deb12u4?arch=amd64") | not)' e.pkgs
}

# The SBOM's list of GPU code comes from the same pass (kernels/kindex.c):
# the base with a shared object with GPU code and a man page reached by a
# link named like a library (libOpenCL.so.7.gz, as Debian ships it: the
# default glob *.so.* takes it), built cold with and without indexers: the
# same SBOM, the same GPU-code records, and the indexed build reads the
# layer for neither the package files nor the GPU code, the man page
# included (known from the pass to be no ELF object, so read by nobody).
t_attest_sbom_gpu_code_list_from_the_one_pass() {
  sbom_base
  printf '.TH libOpenCL 7\nnot an ELF object\n' >base/files/libOpenCL.7
  sed -i 's|^\[new\]$|file files/libOpenCL.7 /usr/share/man/man7/libOpenCL.7.gz\nsymlink /usr/share/man/man7/libOpenCL.so.7.gz libOpenCL.7.gz\n[new]|' \
    base/image.conf
  "$IB" -q base --output "oci:$PWD/layout:base" >/dev/null
  printf '[image]\nname = sbom:1\nfrom = oci:%s/layout:base\n' "$PWD" >sbom/image.conf
  sbom_one_and_own
  local layer
  layer=$(jq -r '.layers[0].digest' "layout/blobs/sha256/$(jq -r '.manifests[0].digest' layout/index.json | cut -d: -f2)" \
    | cut -d: -f2)
  cmp one.spdx own.spdx
  jq -e '.gpu == [["/usr/lib/libflashinfer_dcp.so", ["sm_121a", "compute_120"]]]' one.spdx # not vacuous
  # Every record the SBOM's own reads made, the pass made the same.
  n=0
  for f in s-own/imgbuild/kernels/*; do
    cmp "$f" "s-one/imgbuild/kernels/$(basename "$f")"
    n=$((n + 1))
  done
  [ "$n" = 2 ] # the shared object and the man page
  one=$(grep -c "blobs/sha256/$layer\"" one.opens) # the blob: not the caches named by it
  own=$(grep -c "blobs/sha256/$layer\"" own.opens)
  [ "$one" = $((own - 2)) ]
}

XSD=$ROOT/tests/attest/junit-10.xsd

requirement_lines() { # CONF SECTION: its python, native and require lines
  awk -v want="[$2]" '/^\[/ { s = $1 } s == want && /^(python|native|require) /' "$1" | wc -l
}

# A failing build's JUnit report, validated against the JUnit XSD of
# Jenkins' xunit plugin (tests/attest/junit-10.xsd, github.com/jenkinsci/
# xunit-plugin, commit 0c3752259ca17669b739481b2785a3e4cea1cc0f,
# src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd,
# MIT) with xmllint, and read by junitparser: the failing requirement line
# is a failure with its file and line; what the stopped build never reached
# is skipped, not passed.
t_junit_report_of_a_failing_build_shows_the_requirement() {
  build_base
  copy_images d
  conf=d/dsv41-flash-dcp2/image.conf
  line=$(grep -n '^python vllm/v1/core/kv_cache_utils.py' "$conf" | cut -d: -f1)
  sed -i "${line}s/\$/ no_such_function/" "$conf"
  rc=0
  "$IB" -q --json d/dsv41-flash-dcp2 --report junit:r.xml --report json:r.json >stdout.json 2>err.txt || rc=$?
  [ "$rc" = 5 ]
  xmllint --noout --schema "$XSD" r.xml
  cmp r.json stdout.json
  validate r.json
  junit_cases r.xml >cases.txt
  cat cases.txt
  [ "$(grep -c '|failure|' cases.txt)" = 2 ]
  grep -E "^imgbuild\.gates\|symbols\|$conf\|$line\|failure\|image\.conf:$line: .*no_such_function" cases.txt
  grep -E "^imgbuild\.requirements\.symbols\|image\.conf:$line: python .*kv_cache_utils\.py get_swa_block_size get_kv_cache_config no_such_function\|.*/image\.conf\|$line\|failure\|image\.conf:$line: .*does not define required symbol no_such_function" cases.txt
  # The other requirement lines of [symbols] passed; [kernels]' never ran.
  grep -E '^imgbuild\.requirements\.symbols\|.*\|pass\|$' cases.txt | grep -v "|$line|pass"
  [ "$(grep -c '^imgbuild\.requirements\.kernels|.*|skipped|gate kernels did not run$' cases.txt)" = \
    "$(requirement_lines "$conf" kernels)" ]
  grep -E '^imgbuild\.gates\|kernels\|\|\|skipped\|did not run' cases.txt
  # The counts in the report are the cases'.
  xmllint --xpath 'string(/testsuites/@tests)' r.xml | grep -qx "$(wc -l <cases.txt)"
}

t_junit_report_of_imgverify_passes_every_line() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --report junit:b.xml >/dev/null
  xmllint --noout --schema "$XSD" b.xml
  "$IV" dsv41-flash-dcp2:local --report junit:v.xml --report json:v.json 2>/dev/null
  xmllint --noout --schema "$XSD" v.xml
  validate v.json
  junit_cases v.xml >cases.txt
  ! grep -E '\|(failure|error)\|' cases.txt
  # Each requirement line of the recorded definition passed, named by the
  # definition's file (its recorded gate sections have their own numbering:
  # no line).
  conf=$ROOT/images/dsv41-flash-dcp2/image.conf
  [ "$(grep -c "^imgverify\.requirements\..*|$conf||pass|\$" cases.txt)" = $(($(requirement_lines "$conf" symbols) + $(requirement_lines "$conf" kernels))) ]
  ! grep 'did not run' cases.txt
  grep -E '^imgverify\.gates\|provenance \[.*image\.conf\]\|\|\|pass\|$' cases.txt
  # A bad --report is a usage error.
  expect_fail 2 '--report takes junit:FILE or json:FILE' "$IV" --report xml:x dsv41-flash-dcp2:local
  rc=0; "$IB" --report junit: dsv41-flash-dcp2 2>err.txt || rc=$?
  [ "$rc" = 2 ]
  grep -- '--report takes junit:FILE or json:FILE' err.txt
}

# ---- the real base (make test-all) ------------------------------------------

# The SBOM of an image built over the Debian base of scripts/real-base.sh
# (bookworm, python3-torch, python3-scipy) against the real thing in a
# chroot of that very image (unpacked by umoci): its dpkg packages and
# versions equal dpkg-query -W's, its Python distributions on sys.path
# equal importlib.metadata's.
tall_attest_sbom_equals_dpkg_query_and_importlib() {
  local out ref
  out=$("$ROOT/scripts/real-base.sh" --arch amd64)
  ref=$(echo "$out" | sed -n 's/^ref=//p')
  mkdir -p d
  printf '[image]\nname = torch-sbom:1\nfrom = %s\n[copy]\nfile METADATA /usr/local/lib/python3.11/dist-packages/imgbuild_probe-0.1.dist-info/METADATA\n[new]\n/usr/local/lib/python3.11/dist-packages/imgbuild_probe-0.1.dist-info/\n' \
    "$ref" >d/image.conf
  printf 'Metadata-Version: 2.1\nName: imgbuild-probe\nVersion: 0.1\n' >d/METADATA
  "$IB" -q --allow-unsafe-base d --output oci:lay:x >out.txt
  attest_of "$IMGBUILD_STORE" "$(cut -d' ' -f2 out.txt)" >a.json
  umoci raw unpack --image lay:x rootfs
  chroot rootfs dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\n' |
    awk '$1 != "not-installed" && $1 != "config-files" { print $2 " " $3 }' | sort >dpkg.txt
  jq -r '.artifacts[0].spdx.deb[] | "\(.[0]) \(.[1])"' a.json | sort >sbom-deb.txt
  diff dpkg.txt sbom-deb.txt
  [ "$(wc -l <dpkg.txt)" -gt 100 ]
  grep -q '^python3-torch ' sbom-deb.txt
  chroot rootfs /usr/bin/python3 -c '
import importlib.metadata as m, sys
for d in m.distributions():
    print(d.metadata["Name"], d.version)' | sort -u >py.txt
  # Ours lists every distribution in the image; those on the interpreter's
  # sys.path are what importlib finds.
  paths=$(chroot rootfs /usr/bin/python3 -c 'import sys; print("|".join(p for p in sys.path if p))')
  jq -r --arg p "$paths" '.artifacts[0].spdx.pypi[] | select(.[2] | test("^(" + $p + ")/[^/]+$|^(" + $p + ")/[^/]+/[^/]+$")) | "\(.[0]) \(.[1])"' a.json |
    sort -u >sbom-py.txt
  diff py.txt sbom-py.txt
  grep -q '^imgbuild-probe 0.1$' sbom-py.txt
  grep -qi '^torch ' sbom-py.txt
  keep dpkg.txt py.txt
  figure "SBOM = dpkg-query -W on $(wc -l <dpkg.txt) packages; = importlib.metadata on $(wc -l <py.txt) distributions (bookworm + python3-torch)"
}
