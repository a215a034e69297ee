# imgverify reads the artifact it is given (issue 13): an oci: layout and a
# docker-archive: file are read where they are, never through the store's
# copy of the same digests; nothing is copied into the store or written to
# the artifact; a registry image is checked as the registry serves it.

# flip_at FILE OFFSET: one byte of FILE changes in place.
flip_at() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off)
    b = f.read(1)[0]
    f.seek(off)
    f.write(bytes([b ^ 0x55]))
PY
}

# member_offset ARCHIVE MEMBER: where MEMBER's data starts in the tar.
member_offset() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    print(t.getmember(sys.argv[2]).offset_data)
PY
}

# A listing of a folder (names, sizes, digests) to show it did not change.
tree_sum() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum; }
store_blobs() { find "$IMGBUILD_STORE/blobs/sha256" -type f | wc -l; }

t_inplace_damaged_layout_and_archive_fail_while_the_store_is_good() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:good:dcp2:1 --output docker-archive:good.tar >/dev/null
  raw=$(skopeo inspect --raw oci:good:dcp2:1)
  layer=$(echo "$raw" | jq -r '.layers[-2].digest' | cut -d: -f2)
  config=$(echo "$raw" | jq -r '.config.digest' | cut -d: -f2)
  # The store has every digest of the image, good.
  [ -f "$IMGBUILD_STORE/blobs/sha256/$layer" ]
  [ -f "$IMGBUILD_STORE/blobs/sha256/$config" ]
  blobs=$(store_blobs)
  # (The layout has imgbuild/lock and users.lock: --output wrote it through
  # the store's code.  Verifying it must add and change nothing.)
  good_sum=$(tree_sum good)
  # The good layout and archive pass, read in place.
  "$IV" --json oci:good:dcp2:1 >good.json
  jq -e '.status == "pass" and .integrity.blobs == 5' good.json
  "$IV" docker-archive:good.tar
  # The issue's commands: one byte of the overlay layer in a copy of the layout.
  cp -a good damaged
  flip_at "damaged/blobs/sha256/$layer" 100
  before=$(tree_sum damaged)
  expect_fail 4 "sha256:$layer" "$IV" oci:damaged:dcp2:1
  "$IV" --json oci:damaged:dcp2:1 >damaged.json || true
  validate damaged.json
  jq -e --arg l "sha256:$layer" '.exit_code == 4 and (.error | contains($l)) and .integrity.bad == 1' damaged.json
  # A damaged config, too, and a layout whose layer is missing.
  cp -a good damaged-config
  flip_at "damaged-config/blobs/sha256/$config" 10
  expect_fail 4 "sha256:$config" "$IV" oci:damaged-config:dcp2:1
  cp -a good missing
  rm "missing/blobs/sha256/$layer"
  expect_fail 4 "sha256:$layer" "$IV" oci:missing:dcp2:1
  # The archive: the same byte of the same layer, inside its tar member.
  cp good.tar damaged.tar
  off=$(member_offset damaged.tar "blobs/sha256/$layer")
  flip_at damaged.tar $((off + 100))
  expect_fail 4 "sha256:$layer" "$IV" docker-archive:damaged.tar
  # Compressed, the archive is inflated once into a temporary file: the
  # damage is still found, the good one passes, and no temporary is left.
  gzip -k damaged.tar
  gzip -k good.tar
  expect_fail 4 "sha256:$layer" "$IV" docker-archive:damaged.tar.gz
  "$IV" docker-archive:good.tar.gz
  [ -z "$(find "$IMGBUILD_STORE/imgbuild/tmp" -type f 2>/dev/null)" ]
  # Nothing was copied into the store, nothing written to the artifacts.
  [ "$(store_blobs)" = "$blobs" ]
  [ "$(tree_sum damaged)" = "$before" ]
  [ "$(tree_sum good)" = "$good_sum" ]
  # imgbuild --from keeps its dedupe (documented): the store's good copy is
  # used, so building over the damaged layout succeeds from the store.
  "$IB" --help | grep -q 'a blob the store already has'
}

# The caches that the store's good copy left (the layer's file list by
# diff_id, the fatbin's kernels by content digest) would answer
# `--kernels REF` without reading a byte of the artifact; they are used
# only once this run has hashed the artifact's own layer, so the damage is
# found (this test passes a damaged layout without that rule).
t_inplace_caches_only_after_hashing() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --output oci:good:dcp2:1 >/dev/null
  layer=$(skopeo inspect --raw oci:good:dcp2:1 | jq -r '.layers[-1].digest' | cut -d: -f2)
  [ -f "$IMGBUILD_STORE/imgbuild/files/$(skopeo inspect --config --raw oci:good:dcp2:1 | jq -r '.rootfs.diff_ids[-1]' | cut -d: -f2)" ]
  cp -a good damaged
  flip_at "damaged/blobs/sha256/$layer" 100
  expect_fail 4 "sha256:$layer" "$IV" --kernels oci:damaged:dcp2:1 '*.fatbin'
  "$IV" --kernels oci:good:dcp2:1 '*.fatbin' | grep -q 'dcp2_kernels.fatbin'
}

# The registry: every blob is fetched and hashed as served, also those the
# store has; a byte changed in the registry's own storage is caught.
t_inplace_registry_blob_damaged_in_its_storage() {
  build_base
  registry_start open
  "$IB" -q dsv41-flash-dcp2 --push "docker://$REG/dcp2:1" >/dev/null
  raw=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local")
  n=$(echo "$raw" | jq '.layers | length')
  layer=$(echo "$raw" | jq -r '.layers[-2].digest' | cut -d: -f2)
  [ -f "$IMGBUILD_STORE/blobs/sha256/$layer" ]
  "$IV" --json "docker://$REG/dcp2:1" >good.json
  # Every blob of the image (config and layers) came from the registry,
  # though the store had them all.
  jq -e --arg n "$((n + 1))" '.status == "pass" and (.transfers[0] | test("^pulled docker://.*: " + $n + " blobs fetched .*, 0 already in the store"))' good.json
  data=registry-open/data/docker/registry/v2/blobs/sha256/${layer:0:2}/$layer/data
  [ -f "$data" ]
  flip_at "$data" 100
  expect_fail 4 "sha256:$layer" "$IV" "docker://$REG/dcp2:1"
  # The store's good copy is untouched, and still verifies.
  "$IV" --store
  [ "$(sha256sum <"$IMGBUILD_STORE/blobs/sha256/$layer" | cut -d' ' -f1)" = "$layer" ]
}

# A large layout needs no room in the store: imgverify runs with the store
# on a tmpfs far smaller than the layout (a copy would fail with ENOSPC) and
# the store holds no more blobs after.  IMGBUILD_TEST_BIG_MB sets the layer
# size (make test: 256; make test-all: 2048).
t_inplace_large_layout_needs_no_store_space() {
  local mb=${IMGBUILD_TEST_BIG_MB:-256}
  /usr/bin/python3 - big "$mb" <<'PY'
import hashlib, io, json, os, sys, tarfile
root, mb = sys.argv[1], int(sys.argv[2])
os.makedirs(f"{root}/blobs/sha256")
def put(data):
    d = hashlib.sha256(data).hexdigest()
    open(f"{root}/blobs/sha256/{d}", "wb").write(data)
    return d
# An uncompressed layer of MB MiB, streamed to disk and hashed on the way.
tmp = f"{root}/layer.tmp"
with open(tmp, "wb") as f:
    with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("data/big.bin")
        ti.size = mb << 20
        class R(io.RawIOBase):
            left = ti.size
            def readable(self):
                return True
            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = os.urandom(n) if n else b""
                self.left -= n
                return n
        t.addfile(ti, io.BufferedReader(R(), 1 << 20))
h = hashlib.sha256()
with open(tmp, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
layer = h.hexdigest()
size = os.path.getsize(tmp)
os.rename(tmp, f"{root}/blobs/sha256/{layer}")
config = put(json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer]}}).encode())
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + config,
               "size": os.path.getsize(f"{root}/blobs/sha256/{config}")},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + layer,
                "size": size}]}).encode()
m = put(manifest)
open(f"{root}/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
open(f"{root}/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + m,
     "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "big"}}]}))
PY
  mkdir -p small
  mount -t tmpfs -o size=8m tmpfs small
  local rc=0
  IMGBUILD_STORE=$PWD/small/store "$IV" --json oci:big:big >big.json || rc=$?
  used=$(df -k --output=used small | tail -1)
  umount small
  cat big.json
  [ "$rc" = 0 ]
  jq -e --argjson b "$((mb << 20))" '.status == "pass" and .integrity.bytes > $b' big.json
  echo "layout: $(du -sk big | cut -f1) KiB; store used after imgverify: $used KiB"
  [ "$used" -lt 1024 ]
}
