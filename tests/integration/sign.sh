# Signatures (--sign-with, --verify-signature-with): a real signer
# (openssl, ssh-keygen) before the tag, a cosign-style referrer about the
# image, verified by openssl itself and by imgverify; a signature about
# another image, one that does not verify beside one that does.  Split from
# attest.sh, whose attestations these sign.

source "$ROOT/tests/attest/edit-store.sh"
XSD=$ROOT/tests/attest/junit-10.xsd

# sig_of STORE-OR-LAYOUT DIGEST: the signature artifacts listed about DIGEST
# in an OCI layout, as JSON lines {artifact, payload (file), signature
# (file, decoded), artifactType}: read with Python, not imgbuild.
sig_of() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import base64, json, os, sys
lay, digest = sys.argv[1:3]
def path(d): return os.path.join(lay, "blobs", *d.split(":"))
for i, e in enumerate(json.load(open(os.path.join(lay, "index.json")))["manifests"]):
    m = json.load(open(path(e["digest"])))
    if m.get("subject", {}).get("digest") != digest or m.get("artifactType") != "application/vnd.dev.cosign.artifact.sig.v1+json":
        continue
    l = m["layers"][0]
    assert l["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json", l
    open(f"payload{i}", "wb").write(open(path(l["digest"]), "rb").read())
    open(f"sig{i}", "wb").write(base64.b64decode(l["annotations"]["dev.cosignproject.cosign/signature"], validate=True))
    print(json.dumps({"artifact": e["digest"], "payload": f"payload{i}", "signature": f"sig{i}",
                      "listedType": e.get("artifactType")}))
PY
}

# retag_attestation STORE TAG: rewrite one statement of TAG's in-toto
# artifact (a field of the SLSA predicate) and list the changed artifact in
# its place, as someone editing the attestations after signing would.
retag_attestation() {
  IMGBUILD_STORE=$1 edit_store "$2" <<'PY'
ent = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == img and m["artifactType"] == "application/vnd.in-toto+json")
m = json.load(open(path(ent["digest"])))
st = json.load(open(path(m["layers"][0]["digest"])))
st["predicate"]["runDetails"]["builder"]["id"] = "https://evil.invalid/builder"
m["layers"][0]["digest"], m["layers"][0]["size"] = put(json.dumps(st).encode())
ent["digest"], ent["size"] = put(json.dumps(m).encode())
save()
PY
}

OPENSSL_VERIFY='openssl dgst -sha256 -verify pub.pem -signature "$IMGBUILD_SIGNATURE"'

# --sign-with runs a real signer (openssl, ECDSA P-256 over SHA-256, what
# cosign's keys are) before the tag; the signature is a cosign-style
# referrer whose payload names the image and its attestations; openssl
# itself verifies it, and imgverify --verify-signature-with with openssl
# passes with the right key and fails (exit 4) with another key, after the
# attestations were changed, and after the signed payload was changed.
t_sign_with_openssl_verified_by_openssl() {
  build_base
  openssl ecparam -name prime256v1 -genkey -noout -out key.pem 2>/dev/null
  openssl ec -in key.pem -pubout -out pub.pem 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out other.pem 2>/dev/null
  openssl ec -in other.pem -pubout -out other.pub 2>/dev/null
  "$IB" -q --json dsv41-flash-dcp2 --sign-with 'openssl dgst -sha256 -sign key.pem' >b.json
  validate b.json
  digest=$(jq -r .manifest b.json)
  sig_of "$IMGBUILD_STORE" "$digest" >sigs.json
  [ "$(wc -l <sigs.json)" = 1 ]
  jq -e --arg a "$(jq -r .signature.artifact b.json)" '.artifact == $a and .listedType == "application/vnd.dev.cosign.artifact.sig.v1+json"' sigs.json
  p=$(jq -r .payload sigs.json); s=$(jq -r .signature sigs.json)
  # The payload is cosign's simple signing JSON about this image, covering
  # the in-toto artifact listed with it.
  att=$(jq -r --arg d "$digest" '.manifests[] | select(.artifactType == "application/vnd.in-toto+json"
           and .annotations["vnd.imgbuild.subject"] == $d) | .digest' "$IMGBUILD_STORE/index.json")
  jq -e --arg d "$digest" --arg a "$att" '.critical.type == "cosign container image signature"
      and .critical.image["docker-manifest-digest"] == $d and .critical.identity["docker-reference"] == "dsv41-flash-dcp2"
      and .optional["vnd.imgbuild.attestation"] == $a' "$p"
  jq -e --arg a "$att" '.signature.attestation == $a' b.json
  # openssl verifies it (not imgbuild); the other key does not.
  openssl dgst -sha256 -verify pub.pem -signature "$s" "$p"
  refute openssl dgst -sha256 -verify other.pub -signature "$s" "$p"
  # imgverify: verified with the right key; listed but a skip without a verifier.
  "$IV" --json dsv41-flash-dcp2:local --verify-signature-with "$OPENSSL_VERIFY" >v.json 2>err.txt
  validate v.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "signature") | .status == "pass")
         and (.signatures | length == 1 and .[0].verified == true)' v.json
  grep 'Verified OK' err.txt
  "$IV" --json dsv41-flash-dcp2:local >v0.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "signature") | .status == "skip"
         and .reason == "1 signature, none verified: no --verify-signature-with")' v0.json
  # Another key: no signature verifies.
  expect_fail 4 'no signature of sha256:[0-9a-f]{64} verifies with' \
    "$IV" dsv41-flash-dcp2:local --verify-signature-with 'openssl dgst -sha256 -verify other.pub -signature "$IMGBUILD_SIGNATURE"'
  # The JUnit report of that run shows the failing gate.
  rc=0; "$IV" dsv41-flash-dcp2:local --report junit:j.xml \
    --verify-signature-with 'openssl dgst -sha256 -verify other.pub -signature "$IMGBUILD_SIGNATURE"' 2>/dev/null || rc=$?
  [ "$rc" = 4 ]
  xmllint --noout --schema "$XSD" j.xml
  junit_cases j.xml | grep -E '^imgverify\.gates\|signature\|\|\|failure\|no signature of sha256:'
  # A statement changed after signing: the signature still verifies over
  # its payload, but the payload covers attestations the image no longer carries.
  "$IB" -q dsv41-flash-dcp2 -t edited:1 --sign-with 'openssl dgst -sha256 -sign key.pem' >/dev/null
  retag_attestation "$IMGBUILD_STORE" edited:1
  expect_fail 4 'signature sha256:[0-9a-f]{64} signs the attestations sha256:[0-9a-f]{64}, which the image does not carry' \
    "$IV" edited:1 --verify-signature-with "$OPENSSL_VERIFY"
  # The signed payload itself changed (and re-listed): openssl refuses it.
  "$IB" -q dsv41-flash-dcp2 -t forged:1 --sign-with 'openssl dgst -sha256 -sign key.pem' >/dev/null
  edit_store forged:1 <<'PY'
ent = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == img and m["artifactType"].startswith("application/vnd.dev.cosign"))
m = json.load(open(path(ent["digest"])))
p = json.load(open(path(m["layers"][0]["digest"])))
p["critical"]["identity"]["docker-reference"] = "someone-else"
m["layers"][0]["digest"], m["layers"][0]["size"] = put(json.dumps(p).encode())
ent["digest"], ent["size"] = put(json.dumps(m).encode())
save()
PY
  expect_fail 4 'no signature of sha256:[0-9a-f]{64} verifies with' \
    "$IV" forged:1 --verify-signature-with "$OPENSSL_VERIFY"
  grep -E 'warning: signature sha256:[0-9a-f]{64} does not verify with' stderr.txt
}

# Two small images over scratch, A and B (the same file, another
# variable in the config: two digests, one content), signed by
# key.pem when SIGN is given; pub.pem, other.pem, other.pub made too.
two_signed_images() { # SIGN-A SIGN-B (yes/no)
  openssl ecparam -name prime256v1 -genkey -noout -out key.pem 2>/dev/null
  openssl ec -in key.pem -pubout -out pub.pem 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out other.pem 2>/dev/null
  openssl ec -in other.pem -pubout -out other.pub 2>/dev/null
  local n
  for n in a b; do
    mkdir -p $n
    echo same >$n/x.txt
    printf '[image]\nname = %s:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile x.txt /x.txt\n[new]\n/\n[env]\nWHICH = %s\n' $n $n \
      >$n/image.conf
  done
  local sign=(--sign-with 'openssl dgst -sha256 -sign key.pem')
  if [ "$1" = yes ]; then "$IB" -q a "${sign[@]}" >a.out; else "$IB" -q a >a.out; fi
  if [ "$2" = yes ]; then "$IB" -q b "${sign[@]}" >b.out; else "$IB" -q b >b.out; fi
}

# A signature about another image, replayed: A and B hold the same files
# (two digests: another variable in the config), and A's signature (by the
# verifying key, its payload and signature untouched) is listed about B,
# its manifest's subject rewritten to B, as a registry's referrers list
# could carry it.  openssl verifies it; what it is about makes it wrong for
# B: imgverify of B fails (exit 4) naming the image it signs, beside B's
# own good signature too (not "attestations changed after signing": the
# attestation it covers is A's).
t_signature_about_another_image_fails() {
  two_signed_images yes yes
  A=$(cut -d' ' -f2 a.out)
  B=$(cut -d' ' -f2 b.out)
  [ "$A" != "$B" ]
  "$IV" a:1 --verify-signature-with "$OPENSSL_VERIFY" >/dev/null 2>&1
  "$IV" b:1 --verify-signature-with "$OPENSSL_VERIFY" >/dev/null 2>&1
  A=$A edit_store b:1 <<'PY'
a = os.environ["A"]
for ent in [m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == a
            and m["artifactType"] == "application/vnd.dev.cosign.artifact.sig.v1+json"]:
    m = json.load(open(path(ent["digest"])))
    m["subject"]["digest"], m["subject"]["size"] = img, os.path.getsize(path(img))
    new = dict(ent, annotations=dict(ent["annotations"], **{"vnd.imgbuild.subject": img}))
    new["digest"], new["size"] = put(json.dumps(m).encode())
    idx["manifests"].append(new)
save()
PY
  # openssl itself verifies both signatures listed about B.
  sig_of "$IMGBUILD_STORE" "$B" >sigs.json
  [ "$(wc -l <sigs.json)" = 2 ]
  while read -r l; do
    openssl dgst -sha256 -verify pub.pem -signature "$(jq -r .signature <<<"$l")" "$(jq -r .payload <<<"$l")"
  done <sigs.json
  expect_fail 4 "signature sha256:[0-9a-f]{64} signs image $A, not $B" \
    "$IV" b:1 --verify-signature-with "$OPENSSL_VERIFY"
  "$IV" --json b:1 --verify-signature-with "$OPENSSL_VERIFY" >v.json 2>/dev/null || true
  validate v.json
  jq -e --arg a "$A" '.status == "fail" and .exit_code == 4
    and (.gates[] | select(.name == "signature") | .status == "fail")
    and ([.problems[] | select(.gate == "signature" and .severity == "error")] | length == 1)
    and (.problems[0].message | contains("signs image " + $a))' v.json
  # Without a verifier too: listed about B, it is not B's.
  expect_fail 4 "signs image $A, not $B" "$IV" b:1
}

# A signature that does not verify beside one that does: B's own signature
# by key.pem, and a second over the same payload by other.pem.  Verified
# with pub.pem, the image passes and the other one is a warning naming it
# (with other.pub the other way round); with no key of either, it fails.
t_signature_not_verifying_beside_one_that_does_warns() {
  two_signed_images no yes
  B=$(cut -d' ' -f2 b.out)
  sig_of "$IMGBUILD_STORE" "$B" >sigs.json
  [ "$(wc -l <sigs.json)" = 1 ]
  good=$(jq -r .artifact sigs.json)
  openssl dgst -sha256 -sign other.pem -out other.sig "$(jq -r .payload sigs.json)"
  edit_store b:1 <<'PY'
import base64
ent = next(m for m in idx["manifests"] if ann(m, "vnd.imgbuild.subject") == img and m["artifactType"].startswith("application/vnd.dev.cosign"))
m = json.load(open(path(ent["digest"])))
m["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"] = base64.b64encode(open("other.sig", "rb").read()).decode()
new = dict(ent)
new["digest"], new["size"] = put(json.dumps(m).encode())
idx["manifests"].append(new)
save()
PY
  sig_of "$IMGBUILD_STORE" "$B" >sigs2.json
  [ "$(wc -l <sigs2.json)" = 2 ]
  bad=$(jq -r --arg g "$good" 'select(.artifact != $g) | .artifact' sigs2.json)
  # openssl's own answer for each: the good one by pub.pem, the other by other.pub.
  openssl dgst -sha256 -verify pub.pem -signature "$(jq -r --arg g "$good" 'select(.artifact == $g) | .signature' sigs2.json)" \
    "$(jq -r --arg g "$good" 'select(.artifact == $g) | .payload' sigs2.json)"
  refute openssl dgst -sha256 -verify pub.pem -signature "$(jq -r --arg b "$bad" 'select(.artifact == $b) | .signature' sigs2.json)" \
    "$(jq -r --arg b "$bad" 'select(.artifact == $b) | .payload' sigs2.json)"
  "$IV" --json b:1 --verify-signature-with "$OPENSSL_VERIFY" >v.json 2>err.txt
  validate v.json
  jq -e --arg g "$good" --arg b "$bad" '.status == "pass" and .exit_code == 0
    and (.gates[] | select(.name == "signature") | .status == "pass" and .detail == "1 of 2 signatures verified with `openssl dgst -sha256 -verify pub.pem -signature \"$IMGBUILD_SIGNATURE\"`")
    and ([.signatures[] | {artifact, verified}] | sort_by(.artifact)) == ([{artifact: $g, verified: true}, {artifact: $b, verified: false}] | sort_by(.artifact))
    and ([.problems[] | select(.gate == "signature")] | length == 1 and .[0].severity == "warning" and (.[0].message | startswith("signature " + $b + " does not verify with")))' v.json
  grep -q "warning: signature $bad does not verify with" err.txt
  refute grep -q 'error:' err.txt
  # The other key: the same verdict, the other signature named.
  "$IV" b:1 --verify-signature-with 'openssl dgst -sha256 -verify other.pub -signature "$IMGBUILD_SIGNATURE"' >/dev/null 2>err2.txt
  grep -q "warning: signature $good does not verify with" err2.txt
  refute grep -q "warning: signature $bad" err2.txt
  # Neither: no signature verifies, a failure.
  openssl ecparam -name prime256v1 -genkey -noout -out third.pem 2>/dev/null
  openssl ec -in third.pem -pubout -out third.pub 2>/dev/null
  expect_fail 4 'no signature of sha256:[0-9a-f]{64} verifies with .* \(2 signatures\)' \
    "$IV" b:1 --verify-signature-with 'openssl dgst -sha256 -verify third.pub -signature "$IMGBUILD_SIGNATURE"'
}

# A signer that fails, or writes no signature, fails the build before the
# tag (exit 8): the store has no tag, and no signature of the image.
t_sign_with_failing_signer_tags_nothing() {
  build_base
  expect_fail 8 'sign-with `echo refused >&2; exit 3`: the signer failed \(exit status 3\)' \
    "$IB" -q dsv41-flash-dcp2 -t s:1 --sign-with 'echo refused >&2; exit 3'
  grep -x 'refused' stderr.txt
  expect_fail 8 'the signer wrote no signature' "$IB" -q dsv41-flash-dcp2 -t s:2 --sign-with 'cat >/dev/null'
  refute jq -e '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] | test("^s:"))' \
    "$IMGBUILD_STORE/index.json"
  refute jq -e '.manifests[] | select(.artifactType == "application/vnd.dev.cosign.artifact.sig.v1+json")' \
    "$IMGBUILD_STORE/index.json"
}

# ssh-keygen -Y sign (stdin to stdout) as the signer; the signature travels
# with the image to a registry (the referrers tag lists it, skopeo sees it)
# and to a docker-archive, and imgverify of each verifies it with ssh-keygen
# -Y verify.  A rebuild replaces its signature; a rebuild without
# --sign-with leaves none (the old one signed the attestations it replaced).
t_sign_with_ssh_keygen_travels_with_the_image() {
  build_base
  registry_start open
  push_base
  ssh-keygen -q -t ed25519 -N '' -f sk -C builder
  echo "builder $(cat sk.pub)" >allowed
  verify='ssh-keygen -Y verify -f allowed -I builder -n imgbuild -s "$IMGBUILD_SIGNATURE"'
  "$IB" -q dsv41-flash-dcp2 --sign-with 'ssh-keygen -Y sign -f sk -n imgbuild -q' \
    --push "docker://$REG/dcp2:1" --output docker-archive:dcp2.tar >out.txt
  digest=$(cut -d' ' -f2 out.txt)
  skopeo inspect --raw --tls-verify=false "docker://$REG/dcp2:sha256-${digest#sha256:}" >ref.json
  jq -e '[.manifests[].artifactType] | sort == ["application/vnd.dev.cosign.artifact.sig.v1+json", "application/vnd.in-toto+json"]' ref.json
  for ref in "docker://$REG/dcp2:1" docker-archive:dcp2.tar; do
    IMGBUILD_STORE=$PWD/v "$IV" --json "$ref" --verify-signature-with "$verify" >v.json 2>err.txt
    jq -e '.status == "pass" and (.signatures | length == 1 and .[0].verified == true)' v.json
    grep 'Good "imgbuild" signature for builder' err.txt
  done
  # ssh-keygen itself, on what the pulled store holds.
  sig_of v "$digest" >sigs.json
  ssh-keygen -Y verify -f allowed -I builder -n imgbuild -s "$(jq -r .signature sigs.json)" <"$(jq -r .payload sigs.json)"
  # Rebuilt and re-signed: still one signature, the new one; rebuilt unsigned: none.
  "$IB" -q dsv41-flash-dcp2 --sign-with 'ssh-keygen -Y sign -f sk -n imgbuild -q' >/dev/null
  [ "$(sig_of "$IMGBUILD_STORE" "$digest" | wc -l)" = 1 ]
  "$IV" dsv41-flash-dcp2:local --verify-signature-with "$verify" 2>/dev/null
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  [ "$(sig_of "$IMGBUILD_STORE" "$digest" | wc -l)" = 0 ]
  expect_fail 4 'no signature of sha256:[0-9a-f]{64} verifies with .* \(0 signatures\)' \
    "$IV" dsv41-flash-dcp2:local --verify-signature-with "$verify"
}
