#!/usr/bin/python3
"""Check the attestations about an image in an OCI layout with parsers and
schemas that imgbuild did not write, and print what a verifier reads.

  check.py LAYOUT MANIFEST-DIGEST

For every artifact of the layout whose `subject` is the image (found by
reading the manifests index.json lists, as a registry's referrers API or
`oras discover` would), every layer of type application/vnd.in-toto+json is
parsed as an in-toto Statement v1 by the in-toto project's own Python
bindings (tests/attest/in_toto_attestation, from github.com/in-toto/attestation,
commit 051624ce466deaed4c5a66e66877f69b471fccbe, python/, Apache-2.0) over
Debian's python3-protobuf: json_format.Parse refuses unknown fields and
wrong types, and Statement.validate() is the project's validation.  Then by
predicate type:

  https://slsa.dev/provenance/v1: parsed as the SLSA Provenance v1 message
    (in_toto_attestation/predicates/provenance/v1, the same message as
    github.com/slsa-framework/slsa spec/schema/provenance.proto), with the
    fields the SLSA spec marks REQUIRED checked, every resolvedDependency
    validated as a ResourceDescriptor;
  https://spdx.dev/Document: the SPDX 2.3 JSON schema (tests/attest/
    spdx-schema-2.3.json, from github.com/spdx/spdx-spec, branch support/2.3,
    commit ed8c9b520963b651fce3c86422b387e92e6d9a8f, schemas/spdx-schema.json),
    and what the document DESCRIBES is a package whose SHA256 is the image's
    manifest digest;
  imgbuild's own: docs/imgbuild-build-predicate.schema.json.

Prints one JSON document (what the tests assert on); exits 1 with the
reason on stderr when anything is refused."""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jsonschema  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2  # noqa: E402
from in_toto_attestation.v1 import statement_pb2  # noqa: E402
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor  # noqa: E402
from in_toto_attestation.v1.statement import Statement  # noqa: E402

INTOTO = "application/vnd.in-toto+json"
SLSA = "https://slsa.dev/provenance/v1"
SPDX = "https://spdx.dev/Document"
OURS = "https://imgbuild.invalid/attestation/build/v1"


def fail(msg):
    print(f"check.py: {msg}", file=sys.stderr)
    sys.exit(1)


def blob(layout, digest):
    alg, hexd = digest.split(":", 1)
    data = open(os.path.join(layout, "blobs", alg, hexd), "rb").read()
    if hashlib.sha256(data).hexdigest() != hexd:
        fail(f"blob {digest} does not match its digest")
    return data


def check_slsa(pred, where):
    prov = provenance_pb2.Provenance()
    try:
        json_format.Parse(json.dumps(pred), prov)
    except json_format.ParseError as e:
        fail(f"{where}: not a SLSA Provenance v1 predicate: {e}")
    bd, rd = prov.build_definition, prov.run_details
    # REQUIRED by https://slsa.dev/spec/v1.0/provenance
    if not bd.build_type:
        fail(f"{where}: buildDefinition.buildType is required")
    if len(bd.external_parameters) == 0:
        fail(f"{where}: buildDefinition.externalParameters is required")
    if not rd.builder.id:
        fail(f"{where}: runDetails.builder.id is required")
    for i, dep in enumerate(bd.resolved_dependencies):
        rdesc = ResourceDescriptor(name=dep.name, uri=dep.uri, digest=dict(dep.digest))
        try:
            rdesc.validate()
        except ValueError as e:
            fail(f"{where}: resolvedDependencies[{i}]: {e}")
    return {
        "buildType": bd.build_type,
        "builder": rd.builder.id,
        "startedOn": pred["runDetails"]["metadata"]["startedOn"],
        "finishedOn": pred["runDetails"]["metadata"]["finishedOn"],
        "resolvedDependencies": [{"name": d.name, "uri": d.uri, "digest": dict(d.digest)}
                                 for d in bd.resolved_dependencies],
    }


def check_spdx(pred, where, image):
    schema = json.load(open(os.path.join(HERE, "spdx-schema-2.3.json")))
    try:
        jsonschema.validate(pred, schema)
    except jsonschema.ValidationError as e:
        fail(f"{where}: not SPDX 2.3: {e.message} at {list(e.absolute_path)}")
    # What the document DESCRIBES is the image: a package whose SHA256 is
    # the manifest digest (the statement's subject says so of the statement;
    # this says it of the SBOM itself, which travels without its envelope).
    described = {r["relatedSpdxElement"] for r in pred.get("relationships", [])
                 if r["spdxElementId"] == "SPDXRef-DOCUMENT" and r["relationshipType"] == "DESCRIBES"}
    sums = [c["checksumValue"] for p in pred["packages"] if p["SPDXID"] in described
            for c in p.get("checksums", []) if c["algorithm"] == "SHA256"]
    if sums != [image.split(":", 1)[1]]:
        fail(f"{where}: the SBOM describes {sums or 'no package with a SHA256'}, not the image {image}")
    out = {"deb": [], "pypi": [], "gpu": []}
    for p in pred["packages"]:
        purl = next((r["referenceLocator"] for r in p.get("externalRefs", [])
                     if r["referenceType"] == "purl"), "")
        if purl.startswith("pkg:deb/"):
            out["deb"].append([p["name"], p["versionInfo"]])
        elif purl.startswith("pkg:pypi/"):
            out["pypi"].append([p["name"], p["versionInfo"], p.get("sourceInfo", "")])
        elif p.get("comment", "").startswith("GPU code:"):
            out["gpu"].append([p["name"], p["comment"][len("GPU code: "):].split()])
    return out


def check_ours(pred, where):
    root = os.path.dirname(os.path.dirname(HERE))
    schema = json.load(open(os.path.join(root, "docs", "imgbuild-build-predicate.schema.json")))
    try:
        jsonschema.validate(pred, schema)
    except jsonschema.ValidationError as e:
        fail(f"{where}: not an imgbuild build predicate: {e.message} at {list(e.absolute_path)}")
    return {"gates": {g["name"]: g["status"] for g in pred["gates"]}, "base": pred["base"]}


def check_statement(layout, layer, image, where):
    text = blob(layout, layer["digest"])
    pb = statement_pb2.Statement()
    try:
        json_format.Parse(text, pb)
        Statement.copy_from_pb(pb).validate()
    except (json_format.ParseError, ValueError) as e:
        fail(f"{where}: not an in-toto Statement v1: {e}")
    st = json.loads(text)
    if not any(s["digest"].get("sha256") == image.split(":", 1)[1] for s in st["subject"]):
        fail(f"{where}: subject[].digest does not name {image}")
    ann = layer.get("annotations", {}).get("in-toto.io/predicate-type")
    if ann != st["predicateType"]:
        fail(f"{where}: layer annotation says {ann}, statement says {st['predicateType']}")
    kinds = {SLSA: ("slsa", check_slsa), SPDX: ("spdx", lambda p, w: check_spdx(p, w, image)),
             OURS: ("imgbuild", check_ours)}
    if st["predicateType"] not in kinds:
        fail(f"{where}: unknown predicateType {st['predicateType']}")
    key, fn = kinds[st["predicateType"]]
    return key, fn(st["predicate"], where)


def main():
    layout, image = sys.argv[1], sys.argv[2]
    index = json.load(open(os.path.join(layout, "index.json")))
    out = {"artifacts": []}
    # The manifests the layout lists, and those of the indexes it lists (a
    # referrers tag copied by skopeo is such an index), each once.
    todo, seen = list(index["manifests"]), set()
    while todo:
        m = todo.pop(0)
        if m["digest"] in seen:
            continue
        seen.add(m["digest"])
        if m.get("mediaType") == "application/vnd.oci.image.index.v1+json":
            todo += json.loads(blob(layout, m["digest"]))["manifests"]
        if m.get("mediaType") != "application/vnd.oci.image.manifest.v1+json":
            continue
        man = json.loads(blob(layout, m["digest"]))
        if man.get("subject", {}).get("digest") != image:
            continue
        art = {"digest": m["digest"], "artifactType": man.get("artifactType"),
               "indexArtifactType": m.get("artifactType"), "predicateTypes": []}
        for i, layer in enumerate(man["layers"]):
            if layer["mediaType"] != INTOTO:
                continue
            key, facts = check_statement(layout, layer, image, f"{m['digest']} layer {i}")
            art["predicateTypes"].append(json.loads(blob(layout, layer["digest"]))["predicateType"])
            art[key] = facts
        out["artifacts"].append(art)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
