# imgbuild core (issue "imgbuild core"): the main job, its output judged by
# skopeo, umoci and a real Docker Engine, reproducibility, foreign bases, and
# every bad input refused with the store's tags intact.

DCP2_DEF=$ROOT/images/dsv41-flash-dcp2
VLLM=$SITE/vllm

t_main_job_prints_tag_and_digest() {
  "$IB" dsv41-flash-b12x >base.out
  "$IB" dsv41-flash-dcp2 >out
  grep -Eq '^dsv41-flash-dcp2:local sha256:[0-9a-f]{64}$' out
  # What it printed is what the store and skopeo see.
  [ "$(cut -d' ' -f2 out)" = "$(manifest_digest dsv41-flash-dcp2:local)" ]
}

# The base's layers, unchanged, then the overlay (the 23 files) and the
# prebaked kernels.
t_skopeo_sees_base_layers_unchanged_plus_new_ones() {
  build_base
  "$IB" -q dsv41-flash-dcp2 --json >report.json
  skopeo inspect "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.Layers[]' >base.layers
  skopeo inspect "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq -r '.Layers[]' >dcp2.layers
  [ "$(wc -l <dcp2.layers)" = $(($(wc -l <base.layers) + 2)) ]
  [ "$(tail -2 dcp2.layers)" = "$(jq -r '.layer.digest, .prebake.layer' report.json)" ]
  [ "$(head -n "$(wc -l <base.layers)" dcp2.layers)" = "$(cat base.layers)" ]
  # skopeo copies it (checking every digest on the way).
  skopeo copy -q "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" oci:copy:x
}

t_umoci_unpacks_the_23_files() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  umoci unpack --image "$IMGBUILD_STORE:dsv41-flash-dcp2:local" bundle >/dev/null
  local n=0 flat target
  while read -r flat target; do
    case $flat in '#'* | '') continue ;; esac
    cmp "$DCP2_DEF/files/$flat" "bundle/rootfs$VLLM/$target"
    [ "$(stat -c %u:%g:%a "bundle/rootfs$VLLM/$target")" = 0:0:644 ]
    n=$((n + 1))
  done <"$DCP2_DEF/manifest.txt"
  [ "$n" = 23 ]
  # The base is still there beneath: busybox runs the shell.
  [ -x bundle/rootfs/bin/busybox ]
  [ "$(readlink bundle/rootfs/bin/sh)" = busybox ]
}

t_docker_archive_loads_and_runs_in_dockerd() {
  docker_start
  build_base
  "$IB" -q dsv41-flash-dcp2 --output docker-archive:dcp2.tar >/dev/null
  $D load -i dcp2.tar
  $D run --rm --network none dsv41-flash-dcp2:local cat "$VLLM/v1/attention/backends/mla/sparse_swa.py" >out.py
  cmp out.py "$DCP2_DEF/files/sparse_swa.py"
  # skopeo reads the same archive: the base's layer, the overlay, the prebake layer.
  skopeo inspect docker-archive:dcp2.tar | jq -e '.Layers | length == 3'
  $D rmi -f dsv41-flash-dcp2:local >/dev/null
}

t_same_digest_from_two_checkouts() {
  copy_images a
  (umask 077 && copy_images b)
  find b -type f -exec touch -d '2001-02-03 04:05:06' {} +
  find a -type f -exec chmod g+w,o+r {} +
  for x in a b; do
    IMGBUILD_STORE=$PWD/store-$x "$IB" -q "$x/dsv41-flash-b12x" >/dev/null
    IMGBUILD_STORE=$PWD/store-$x "$IB" -q "$x/dsv41-flash-dcp2" >"$x.out"
  done
  cat a.out b.out
  cmp a.out b.out
  # And SOURCE_DATE_EPOCH is honoured: another time, another digest.
  SOURCE_DATE_EPOCH=1700000000 IMGBUILD_STORE=$PWD/store-a "$IB" -q a/dsv41-flash-dcp2 >c.out
  refute cmp -s a.out c.out
}

t_dockerfile_gives_the_same_digest() {
  build_base
  dcp2_definition_and_dockerfile
  refute grep -q '^\[prebake\]' d/dsv41-flash-dcp2/image.conf
  "$IB" -q d/dsv41-flash-dcp2 >def.out
  "$IB" -q -f ctx/Dockerfile -t dsv41-flash-dcp2:local >df.out
  cat def.out df.out
  cmp def.out df.out
}

t_oci_output_and_oci_base() {
  build_base
  "$IB" -q dsv41-flash-b12x --output oci:layout:base:1 >/dev/null
  skopeo inspect oci:layout:base:1 >/dev/null
  # A base read from another layout, into a fresh store: each layer listed
  # from the layout's own blob (layers/view/pull_lists.h), every one of
  # them, and read once: by the lister, whose read copies it into the store
  # (one read and one hash; a copy beside it read it a second time).
  IMGBUILD_STORE=$PWD/store2 traced -f -qq -e trace=openat -o build.opens "$IB" --from oci:layout:base:1 \
    dsv41-flash-dcp2 --output oci:out:dcp2:1 >build.out 2>build.err
  [ "$(cut -d' ' -f2 build.out)" = "sha256:$(skopeo inspect --raw oci:out:dcp2:1 | sha256sum | cut -d' ' -f1)" ]
  local n l
  n=$(skopeo inspect --raw oci:layout:base:1 | jq '.layers | length')
  grep "layers listed while the pull went on" build.err
  grep -q "base oci:layout:base:1: $n of $n layers listed while the pull went on" build.err
  for l in $(skopeo inspect --raw oci:layout:base:1 | jq -r '.layers[].digest | sub("sha256:"; "")'); do
    grep "layout/blobs/sha256/$l\"" build.opens | grep -v ENOENT | cut -d' ' -f1 | sort -u >"$l.readers"
    log "layer $l read from the layout by $(wc -l <"$l.readers") threads"
    [ "$(wc -l <"$l.readers")" = 1 ]
    [ -f "store2/blobs/sha256/$l" ]
  done
  # The same layers as an image built over the base where it was made.
  "$IB" -q dsv41-flash-dcp2 --output oci:out0:dcp2:1 >/dev/null
  [ "$(skopeo inspect --raw oci:out:dcp2:1 | jq -c .layers)" = "$(skopeo inspect --raw oci:out0:dcp2:1 | jq -c .layers)" ]
}

# scripts/stand-in-cpython.sh, against a mirror on disk (curl's file://)
# holding the .debs that make stand-in fetched: the stand-in's glibc and
# CPython 3.12 unpacked and runnable; a .deb whose bytes differ from the
# pinned digest is an error (8) that writes nothing; an archive that cannot
# be reached gives the build machine's glibc, no CPython and NO-CPYTHON
# saying why.
t_stand_in_cpython_pinned_fetched_or_said_missing() {
  local lock=$ROOT/images/dsv41-flash-b12x/native/noble-amd64.lock cached=$ROOT/images/dsv41-flash-b12x/native/deb p f
  [ ! -f "$ROOT/images/dsv41-flash-b12x/native/amd64/NO-CPYTHON" ] || skip_test "make stand-in fetched no .debs: $(cat "$ROOT/images/dsv41-flash-b12x/native/amd64/NO-CPYTHON")"
  grep -v '^#' "$lock" | while read -r p _; do
    mkdir -p "mirror/$(dirname "$p")"
    cp "$cached/$(basename "$p")" "mirror/$p"
  done
  UBUNTU_MIRROR=file://$PWD/mirror "$ROOT/scripts/stand-in-cpython.sh" "$lock" good/amd64
  [ ! -e good/amd64/NO-CPYTHON ]
  mkdir root && cp -a good/amd64/usr root/ && cp -a good/amd64/lib root/lib64
  mkdir -p root/lib && ln -s ../lib64 root/lib/x86_64-linux-gnu
  [ "$(chroot root /lib64/ld-linux-x86-64.so.2 --library-path /lib64 /usr/bin/python3.12 -c 'import sys; print(sys.version_info[:2])')" = "(3, 12)" ]
  # One byte changed in the mirror's libc6: exit 8, nothing written.
  f=$(ls mirror/pool/main/g/glibc/libc6_*.deb)
  printf x | dd of="$f" bs=1 seek=1000 conv=notrunc 2>/dev/null
  rc=0
  UBUNTU_MIRROR=file://$PWD/mirror "$ROOT/scripts/stand-in-cpython.sh" "$lock" bad/amd64 2>bad.err || rc=$?
  [ "$rc" = 8 ]
  grep -q 'libc6_.*: SHA-256 [0-9a-f]*, .* pins ' bad.err
  [ ! -e bad/amd64 ]
  refute ls bad/amd64.tmp 2>/dev/null
  # No archive: the build machine's glibc, no CPython, and why.
  UBUNTU_MIRROR=file://$PWD/nowhere "$ROOT/scripts/stand-in-cpython.sh" "$lock" none/amd64 2>none.err
  grep -q 'could not be fetched' none/amd64/NO-CPYTHON
  [ -x none/amd64/lib/libc.so.6 ]
  [ ! -e none/amd64/usr/bin/python3.12 ]
  grep -q "warning: .* no CPython" none.err
}

# A base made by tools that are not ours: docker import + docker save.
t_foreign_base_from_docker_save() {
  docker_start
  build_base
  umoci unpack --image "$IMGBUILD_STORE:dsv41-flash-b12x:local" b >/dev/null
  tar -C b/rootfs -c . | $D import - foreign-base:1 >/dev/null
  $D save foreign-base:1 -o foreign.tar
  "$IB" -q --from docker-archive:foreign.tar dsv41-flash-dcp2 -t dcp2-foreign:1 \
    --output docker-archive:out.tar >/dev/null
  # The base's layer keeps its digest: that of its layer.tar in the save file.
  mkdir x
  tar -C x -xf foreign.tar
  base_layer=$(jq -r '.[0].Layers[0]' x/manifest.json)
  want=sha256:$(sha256sum "x/$base_layer" | cut -d' ' -f1)
  got=$(skopeo inspect "oci:$IMGBUILD_STORE:dcp2-foreign:1" | jq -r '.Layers[0]')
  [ "$want" = "$got" ]
  $D load -i out.tar >/dev/null
  $D run --rm --network none dcp2-foreign:1 cat "$VLLM/v1/core/candidate_blocks.py" | cmp - "$DCP2_DEF/files/candidate_blocks.py"
  $D rmi -f dcp2-foreign:1 foreign-base:1 >/dev/null
}

# Each bad manifest line: a one-line error naming it, exit 3, old tag kept.
bad_manifest_case() { # LINE REGEX (@ in REGEX stands for the new line's number)
  copy_images defs
  echo "$1" >>defs/dsv41-flash-dcp2/manifest.txt
  local n
  n=$(wc -l <defs/dsv41-flash-dcp2/manifest.txt)
  expect_fail 3 "${2//@/$n}" "$IB" defs/dsv41-flash-dcp2
  [ "$(manifest_digest dsv41-flash-dcp2:local)" = "$(cut -d' ' -f2 good.out)" ]
}

t_bad_inputs_leave_the_tag_alone() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >good.out
  bad_manifest_case "cp_utils.py ../../../../etc/cron.d/x" 'manifest.txt:@: target `\.\./.*` has a `\.\.` part'
  rm -rf defs
  bad_manifest_case "cp_utils.py /etc/passwd" 'manifest.txt:@: target `/etc/passwd` is absolute'
  rm -rf defs
  bad_manifest_case "nope.py distributed/nope.py" 'manifest.txt:@: source `.*/files/nope.py`: No such file'
  rm -rf defs
  bad_manifest_case "cp_utils.py v1/worker/cp_utils.py" 'manifest.txt:@: duplicate target `.*/v1/worker/cp_utils.py` \(also manifest.txt:10\)'
  rm -rf defs
  bad_manifest_case "cp_utils.py v1/worker/not_in_base.py" 'manifest.txt:@: target `.*/not_in_base.py` does not exist in the base'
  # Nothing half-written stays in the store.
  [ -z "$(find "$IMGBUILD_STORE/blobs/sha256" -name '.tmp-*')" ]
}

t_corrupt_base_blob_is_refused() {
  build_base
  "$IB" -q dsv41-flash-b12x --output oci:layout:base:1 >/dev/null
  "$IB" -q dsv41-flash-dcp2 >good.out
  layer=$(skopeo inspect oci:layout:base:1 | jq -r '.Layers[0]' | cut -d: -f2)
  # Flip one byte in the middle of the base layer.
  python3 - "layout/blobs/sha256/$layer" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0xff
open(p, 'wb').write(b)
PY
  IMGBUILD_STORE=$PWD/fresh expect_fail 4 "blob sha256:$layer: content has digest" \
    "$IB" --from oci:layout:base:1 dsv41-flash-dcp2
  refute env IMGBUILD_STORE=$PWD/fresh skopeo inspect oci:fresh:dsv41-flash-dcp2:local >/dev/null 2>&1
  # Neither the lister's read (which copies what it reads) nor the copy
  # after it left the damaged bytes in the store, under any name.
  [ ! -e "fresh/blobs/sha256/$layer" ]
  [ -z "$(find fresh/blobs/sha256 -name '.tmp-*')" ]
  [ "$(manifest_digest dsv41-flash-dcp2:local)" = "$(cut -d' ' -f2 good.out)" ]
}

t_truncated_docker_archive_is_refused() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >good.out
  "$IB" -q dsv41-flash-b12x --output docker-archive:base.tar >/dev/null
  head -c $(($(stat -c %s base.tar) / 2)) base.tar >half.tar
  expect_fail 4 'half.tar` is damaged or truncated' "$IB" --from docker-archive:half.tar dsv41-flash-dcp2
  [ "$(manifest_digest dsv41-flash-dcp2:local)" = "$(cut -d' ' -f2 good.out)" ]
  # The whole archive works as a base.
  "$IB" -q --from docker-archive:base.tar dsv41-flash-dcp2 -t from-archive:1 >/dev/null
}

t_usage_errors() {
  expect_fail 2 'not NAME:TAG' "$IB" -t nocolon dsv41-flash-dcp2
  "$IB" --help | grep -q 'Exit codes'
  rc=0; "$IB" >/dev/null 2>&1 || rc=$?; [ $rc = 2 ]
  expect_fail 3 'definition `nope`' "$IB" nope
  expect_fail 9 '`nothere:1` is not tagged' "$IB" --from nothere:1 dsv41-flash-dcp2
}

# A new layer of several 1 MiB blocks (util/pgzip.h) deflated on 1 thread
# and on 4 threads, and again on 4 in another store: one manifest digest.
# The layer is gzip that gzip, igzip and Python's gzip inflate to the tar
# whose sha256 is the config's diff_id, and umoci unpacks the file.
t_large_layer_same_digest_for_any_jobs() {
  mkdir d
  python3 - d/big.bin <<'PY'
import random, sys
r = random.Random(18)
words = [bytes(r.choice(b"abcdefghij _\n") for _ in range(r.randint(2, 9))) for _ in range(500)]
with open(sys.argv[1], "wb") as f:
    for i in range(12):  # 1 MiB of text-like bytes, then 1 MiB of random ones
        f.write(b" ".join(r.choice(words) for _ in range(200000))[: 1 << 20])
        f.write(r.randbytes(1 << 20) if i % 3 == 0 else bytes(1 << 19))
PY
  printf '[image]\nname = big:1\nfrom = scratch\n[copy]\nfile big.bin /big.bin\n[new]\n/\n' >d/image.conf
  IMGBUILD_STORE=$PWD/s1 "$IB" -q --jobs 1 d >j1.out
  IMGBUILD_STORE=$PWD/s4 "$IB" -q --jobs 4 d >j4.out
  IMGBUILD_STORE=$PWD/s4b "$IB" -q --jobs 4 d >j4b.out
  cat j1.out j4.out j4b.out
  cmp j1.out j4.out
  cmp j4.out j4b.out
  local layer diff_id blob
  layer=$(skopeo inspect "oci:$PWD/s1:big:1" | jq -r '.Layers[0]')
  diff_id=$(skopeo inspect --config "oci:$PWD/s1:big:1" | jq -r '.rootfs.diff_ids[0]')
  blob=s1/blobs/sha256/${layer#sha256:}
  [ "$(stat -c %s "$blob")" -gt 4000000 ]
  cmp "$blob" "s4/blobs/sha256/${layer#sha256:}"
  gzip -t "$blob"
  [ "sha256:$(gzip -dc <"$blob" | sha256sum | cut -d' ' -f1)" = "$diff_id" ]
  [ "sha256:$(igzip -dc <"$blob" | sha256sum | cut -d' ' -f1)" = "$diff_id" ]
  [ "sha256:$(python3 -c 'import gzip, hashlib, sys; print(hashlib.sha256(gzip.open(sys.argv[1]).read()).hexdigest())' "$blob")" = "$diff_id" ]
  umoci unpack --image "s4:big:1" b >/dev/null
  cmp d/big.bin b/rootfs/big.bin
  # --jobs is checked: a usage error, nothing built.
  local rc=0
  "$IB" -q --jobs 0 d 2>err.txt || rc=$?
  [ "$rc" = 2 ]
  grep -q 'jobs is a number from 1 to 64' err.txt
  "$IB" --help | grep -q -- '--jobs N'
}

# Killed at chosen moments, the store never names a blob it lacks, every
# blob matches its name, and a tag, when present, points at a whole image.
# The kill is injected at the syscall (strace: SIGKILL at the Nth write),
# not after a guessed delay; N spreads over a whole build's writes, the
# content differs each round, and at least one kill must land inside a
# blob write (its temporary file left behind).
t_kill_at_any_moment_keeps_the_store_consistent() {
  build_base
  copy_images d
  # The writes of a warm build (caches filled by the first), counted.  Each
  # build changes one of the overlay's files: a new layer, its syntax
  # checked by the stand-in's CPython.
  local f=d/dsv41-flash-dcp2/files/cp_utils.py
  cp "$f" cp_utils.orig
  { cat cp_utils.orig; echo "# round 0"; } >"$f"
  "$IB" -q d/dsv41-flash-dcp2 -t warm:1 >/dev/null
  { cat cp_utils.orig; echo "# round -1"; } >"$f"
  traced -f -qq -e trace=write -o writes.txt "$IB" -q d/dsv41-flash-dcp2 -t counted:1 >/dev/null
  # strace counts `when=N` per process: N is taken from the process that
  # writes most (imgbuild itself; the syntax checker it starts writes too).
  total=$(grep 'write(' writes.txt | awk '{print $1}' | sort | uniq -c | sort -rn | awk 'NR == 1 {print $1}')
  echo "imgbuild makes $total writes in a build"
  [ "$total" -gt 20 ]
  killed=0 left=0
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    { cat cp_utils.orig; echo "# round $i"; } >"$f"
    # Kill points spread geometrically: the layer's blob is written in the
    # first few writes, the syntax check's root in the hundreds after them.
    n=$(awk -v t="$total" -v i="$i" 'BEGIN { n = int(t ^ (i / 13)); print n < 1 ? 1 : n }')
    rc=0
    traced -f -qq -o /dev/null -e trace=write -e inject=write:signal=KILL:when=$n \
      "$IB" -q d/dsv41-flash-dcp2 -t killed:$i >/dev/null 2>&1 || rc=$?
    [ "$rc" = 0 ] || killed=$((killed + 1))
    if ls -A "$IMGBUILD_STORE/blobs/sha256" | grep -q '^\.tmp-'; then left=$((left + 1)); fi
    jq -e . "$IMGBUILD_STORE/index.json" >/dev/null
    for b in "$IMGBUILD_STORE"/blobs/sha256/*; do
      [ "$(sha256sum "$b" | cut -d' ' -f1)" = "$(basename "$b")" ]
    done
    if jq -e --arg t "killed:$i" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t)' \
      "$IMGBUILD_STORE/index.json" >/dev/null; then
      skopeo inspect "oci:$IMGBUILD_STORE:killed:$i" >/dev/null
      "$IV" "killed:$i" >/dev/null
    fi
  done
  echo "killed $killed of 12 builds; a blob temporary left after $left"
  [ "$killed" -ge 10 ]
  [ "$left" -ge 1 ]
  # The store still builds and verifies.
  "$IB" -q d/dsv41-flash-dcp2 -t after:1 >/dev/null
  "$IV" --store >/dev/null
}

# libcurl (and the two dozen libraries it needs) is loaded only by a run
# that talks to a registry or a Docker Engine (layers/registry/curl.c): a build
# into the local store and a check of a local image open none of it.
t_local_build_and_check_load_no_libcurl() {
  mkdir -p d
  echo one >d/one.txt
  printf '[image]\nname = local:1\nfrom = scratch\n[copy]\nfile one.txt /one.txt\n[new]\n/\n' >d/image.conf
  readelf -d "$IB" >dynamic.txt
  grep -q 'NEEDED.*libc.so.6' dynamic.txt
  refute grep -q 'libcurl\.so' dynamic.txt
  traced -f -qq -e trace=openat,open -o build.opens "$IB" -q --smoke=off d >out.txt
  grep -q 'local:1 sha256:' out.txt
  grep -q 'libc.so.6' build.opens # the trace saw the loader's opens
  refute grep -q 'libcurl\.so' build.opens
  traced -f -qq -e trace=openat,open -o verify.opens "$IV" local:1 >/dev/null 2>verify.err
  grep -q 'gate integrity *pass' verify.err
  refute grep -q 'libcurl\.so' verify.opens
}

# A build again of the same image writes no blob the store already holds
# (layers/store/store.c): the rebuilt layer and config are the same bytes, and
# their files, inodes and all, stay as they were (a rename of a new copy
# over them would give them new inodes).  The overlay's blob is not even
# compressed again: its tar's digest finds it (layers/tar/tarlayer.c).
t_build_again_writes_no_blob_the_store_holds() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t again:1 >one.out
  ls -i "$IMGBUILD_STORE/blobs/sha256" | sort -k2 >before.txt
  "$IB" dsv41-flash-dcp2 -t again:2 >two.out 2>two.err
  grep -q '^imgbuild: layer sha256:.*, kept from an earlier build of the same files$' two.err
  ls -i "$IMGBUILD_STORE/blobs/sha256" | sort -k2 >after.txt
  [ "$(cut -d' ' -f2 one.out)" = "$(cut -d' ' -f2 two.out)" ]
  [ "$(wc -l <before.txt)" -gt 3 ]
  join -1 2 -2 2 before.txt after.txt | awk '$2 != $3' >replaced.txt
  [ ! -s replaced.txt ]
  [ "$(join -1 2 -2 2 before.txt after.txt | wc -l)" = "$(wc -l <before.txt)" ]
  "$IV" again:2 >/dev/null
}

# A build that writes several blobs syncs each one's bytes, but the store's
# blob folder once, before the tag (layers/store/store.c), not once per blob.
t_build_syncs_the_blob_folder_once_before_its_tag() {
  build_base
  traced -f -y -qq -e trace=fsync,rename -o sync.trace "$IB" -q dsv41-flash-dcp2 -t sync:1 >out.txt
  grep -q '^sync:1 sha256:' out.txt
  [ "$(grep -c 'fsync([0-9]*<[^>]*/blobs/sha256/\.tmp-' sync.trace)" -ge 3 ]
  [ "$(grep -c 'fsync([0-9]*<[^>]*/blobs/sha256>)' sync.trace)" = 1 ]
  # ... after the last blob's rename and before index.json's.
  grep -n 'rename(\|fsync([0-9]*<[^>]*/blobs/sha256>)' sync.trace | tail -2 >last.txt
  grep -q 'blobs/sha256>' <(head -1 last.txt)
  grep -q 'index.json' <(tail -1 last.txt)
  "$IV" sync:1 >/dev/null
}
