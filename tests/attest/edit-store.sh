# shellcheck shell=bash
# Sourced by tests/integration/attest.sh and sign.sh.

# edit_store TAG <<'PY' ... PY: run the Python on stdin over $IMGBUILD_STORE
# as someone editing the store by hand, with store, tag, path(D), put(BYTES)
# -> (digest, size), idx (index.json), ann(ENTRY, KEY) and img (TAG's
# manifest digest) defined; save() writes idx back.
STORE_PY='import hashlib, json, os, sys
store, tag = sys.argv[1:3]
def path(d): return os.path.join(store, "blobs", *d.split(":"))
def put(b):
    d = "sha256:" + hashlib.sha256(b).hexdigest()
    open(path(d) + ".tmp", "wb").write(b)
    os.replace(path(d) + ".tmp", path(d))
    return d, len(b)
idx = json.load(open(f"{store}/index.json"))
ann = lambda m, k: m.get("annotations", {}).get(k)
img = next(m for m in idx["manifests"] if ann(m, "org.opencontainers.image.ref.name") == tag)["digest"]
def save():
    open(f"{store}/index.json.tmp", "w").write(json.dumps(idx))
    os.replace(f"{store}/index.json.tmp", f"{store}/index.json")
'
edit_store() {
  /usr/bin/python3 -c "$STORE_PY$(cat)" "$IMGBUILD_STORE" "$1"
}
