# Robustness (issue 13): a full disk, several writers in one store.

# A definition over scratch with one incompressible file of $1 MiB.
big_def() {
  mkdir -p "$2"
  head -c "$(($1 << 20))" /dev/urandom >"$2/blob.bin"
  printf '[image]\nname = big:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile blob.bin /data/blob.bin\n[new]\n/data/\n' \
    >"$2/image.conf"
}

# mount_small DIR MiB: a tmpfs of that size (unmounted by the caller).
mount_small() { mkdir -p "$1" && mount -t tmpfs -o "size=$2m" tmpfs "$1"; }

t_robust_full_disk_one_clear_error_store_intact() {
  big_def 4 small-def
  big_def 40 big-def
  mount_small disk 24
  local rc=0
  # The store fills up mid-layer: one error line, exit 8, no tag, and the
  # store verifies.
  IMGBUILD_STORE=$PWD/disk/store "$IB" -q --smoke=off small-def -t small:1 >/dev/null || rc=$?
  [ "$rc" = 0 ]
  IMGBUILD_STORE=$PWD/disk/store expect_fail 8 "No space left on device" "$IB" -q --smoke=off big-def -t big:1 || rc=$?
  cat stderr.txt
  IMGBUILD_STORE=$PWD/disk/store "$IV" --store || rc=$?
  grep -q '"small:1"' disk/store/index.json || rc=$?
  grep -q '"big:1"' disk/store/index.json && rc=1
  # No temporary file is left behind to hold the space.
  [ -z "$(find disk/store -name '.tmp-*' -o -name '*.tmp-*')" ] || rc=$?
  # An --output target on a full disk: the image is tagged in the store
  # (its gates passed), the output fails with one error, the target
  # layout is left as it was (no tag naming a partial image).
  "$IB" -q --smoke=off small-def -t small:1 --output "oci:$PWD/disk/out:small:1" >/dev/null || rc=$?
  expect_fail 8 "No space left on device" "$IB" -q --smoke=off big-def -t big:1 --output "oci:$PWD/disk/out:big:1" || rc=$?
  cat stderr.txt
  grep -q '"big:1"' "$IMGBUILD_STORE/index.json" || rc=$?
  grep -q '"big:1"' disk/out/index.json && rc=1
  IMGBUILD_STORE=$PWD/disk/out "$IV" --store || rc=$?
  expect_fail 8 "No space left on device" "$IB" -q --smoke=off big-def -t big:1 --output "docker-archive:$PWD/disk/big.tar" || rc=$?
  [ ! -e disk/big.tar ] && [ -z "$(ls disk | grep 'big.tar.tmp')" ] || rc=$?
  umount disk
  [ "$rc" = 0 ]
}

# Four builds at once into one store: two of the same image and name, two
# of other images; all succeed and the store verifies.
t_robust_four_parallel_builds_into_one_store() {
  build_base
  copy_images d
  echo "# variant" >>d/dsv41-flash-dcp2/files/engram.py
  local pids=() rc=0
  "$IB" -q --smoke=off dsv41-flash-dcp2 >a.out 2>a.err & pids+=($!)
  "$IB" -q --smoke=off dsv41-flash-dcp2 >b.out 2>b.err & pids+=($!)
  "$IB" -q --smoke=off d/dsv41-flash-dcp2 -t variant:1 >c.out 2>c.err & pids+=($!)
  big_def 8 bd
  "$IB" -q --smoke=off bd -t big:1 >e.out 2>e.err & pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat ./*.err
  [ "$rc" = 0 ]
  [ "$(cut -d' ' -f2 a.out)" = "$(cut -d' ' -f2 b.out)" ]
  [ "$(cut -d' ' -f2 a.out)" != "$(cut -d' ' -f2 c.out)" ]
  "$IV" --store
  "$IV" dsv41-flash-dcp2:local
  "$IV" variant:1
  "$IV" big:1
}

# imgbuild --gc while builds run: it waits for them (every open store holds
# the users lock shared), then removes exactly what nothing reaches: the
# seed's untagged warm-up image, a planted orphan blob, a temporary of a
# killed build and the cache entry of a removed blob; every tag and its
# provenance referrer survive and verify.  Untagging an image then frees its
# blobs and drops its referrer from index.json.
t_robust_gc_in_the_middle_of_builds_keeps_what_is_needed() {
  build_base
  copy_images d
  echo "# variant" >>d/dsv41-flash-dcp2/files/engram.py
  local S=$IMGBUILD_STORE orphan
  orphan=$(printf 'orphan blob' | sha256sum | cut -d' ' -f1)
  printf 'orphan blob' >"$S/blobs/sha256/$orphan"
  head -c 4096 /dev/urandom >"$S/blobs/sha256/.tmp-killed"
  mkdir -p "$S/imgbuild/files/$orphan"
  : >"$S/imgbuild/files/$orphan/list"
  local pids=() rc=0
  "$IB" -q --smoke=off dsv41-flash-dcp2 >a.out 2>a.err & pids+=($!)
  "$IB" -q --smoke=off d/dsv41-flash-dcp2 -t variant:1 >c.out 2>c.err & pids+=($!)
  # gc starts once a build holds the store (the users lock is taken).
  for _ in $(seq 200); do flock -n -x "$S/imgbuild/users.lock" true || break; sleep 0.05; done
  refute flock -n -x "$S/imgbuild/users.lock" true
  "$IB" --gc --json >gc.json 2>gc.err & pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat ./*.err
  [ "$rc" = 0 ]
  jq -e '.blobs_removed >= 2 and .temporaries == 1 and .cache_entries >= 1' gc.json
  [ ! -e "$S/blobs/sha256/$orphan" ]
  [ ! -e "$S/blobs/sha256/.tmp-killed" ]
  [ ! -e "$S/imgbuild/files/$orphan" ]
  "$IV" --store
  "$IV" dsv41-flash-dcp2:local
  "$IV" variant:1
  skopeo inspect "oci:$S:variant:1" >/dev/null
  # Everything is reachable now: a second collection removes nothing.
  "$IB" --gc --json >gc2.json
  jq -e '.blobs_removed == 0 and .referrers_dropped == 0' gc2.json
  # Untag variant:1: its own blobs and its provenance referrer go, the
  # base's layers (shared with dsv41-flash-dcp2:local) stay.
  local variant
  variant=$(cut -d' ' -f2 c.out)
  jq -e --arg d "$variant" '[.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d)] | length >= 1' "$S/index.json"
  refs=$(jq -r --arg d "$variant" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' "$S/index.json")
  jq -c '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] != "variant:1"))' \
    "$S/index.json" >"$S/index.new" && mv "$S/index.new" "$S/index.json"
  "$IB" --gc --json >gc3.json
  jq -e '.blobs_removed >= 3 and .referrers_dropped >= 1' gc3.json
  [ ! -e "$S/blobs/sha256/${variant#sha256:}" ]
  jq -e --arg d "$variant" '[.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d)] | length == 0' "$S/index.json"
  # The referrers' own manifests go too, not only their lines in index.json.
  for r in $refs; do [ ! -e "$S/blobs/sha256/${r#sha256:}" ]; done
  "$IV" --store
  "$IV" dsv41-flash-dcp2:local
  expect_fail 9 'variant:1' "$IV" variant:1
}

# SIGKILL at random moments (a delay drawn uniformly over 0.9 times the
# length of an uninterrupted run, the whole process group killed, as a node
# that loses power) across the five kinds of work: a build, --output to an
# OCI layout, --push to a registry, --load into the Docker Engine, and
# imgverify of a layout into a store that holds none of its caches (it
# writes file lists, views and link records as it reads), until each kind
# has been killed 10 times (30 rounds at most; 50 kills at least) in
# `make test-all`, 5 times (15 rounds at most) in `make test`, whose
# share of CI's time the campaign was the largest of (108 s), each
# round with new content.  A run that ends before its draw is not a kill: the window shrinks
# (a machine faster than at calibration would otherwise kill too few runs).
# The window has no floor of its own: a warm build over the stand-in takes
# ~0.1 s, and on a fast machine less; a floor of 0.1 s with draws from
# 0.05 s killed one run of 0.06 s in five, too few for 9 in 30 rounds.
# After every round: the store verifies; a tag, wherever it appears (store,
# layout, registry, Docker), names a whole image that verifies; imgverify
# run again over what the killed one left gives the gates' verdicts of an
# uninterrupted run; after the campaign, each kind runs through.
kill_round() { # SECONDS-MAX CMD...: runs CMD, kills its group at a random moment; 0 when it was killed
  local max=$1 pid delay
  shift
  delay=$(python3 -c "import random; print(round(random.uniform(0.005, $max), 3))")
  setsid "$@" >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 0
  fi
  wait "$pid" 2>/dev/null || true
  return 1
}

timed() { # CMD...: prints the wall seconds of CMD (which must succeed)
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  python3 -c "print(max(0.01, 0.9 * ($t1 - $t0)))"
}

tag_in_store() { jq -e --arg t "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t)' \
  "$IMGBUILD_STORE/index.json" >/dev/null; }

t_robust_kill_campaign_build_output_push_load_and_imgverify() {
  build_base
  registry_start open
  docker_start
  copy_images d
  local def=d/dsv41-flash-dcp2 kind i max killed=0 rounds=0 ref_gates=
  local kills=$([ "${IMGBUILD_TEST_ALL:-0}" = 1 ] && echo 10 || echo 5)
  local -A per=()
  for kind in build output push load verify; do
    # A first run fills the caches; the second, with new content as in
    # every round, gives the length of a run that the kills spread over.
    for w in warm calibrate; do
      echo "x = 0  # $kind $w" >$def/files/extra.py
      case $kind in
        build) max=$(timed "$IB" -q --smoke=off $def -t $w:$kind) ;;
        output) max=$(timed "$IB" -q --smoke=off $def -t $w:$kind --output "oci:$PWD/layout:$w") ;;
        push) max=$(timed "$IB" -q --smoke=off $def -t $w:$kind --push "docker://$REG/k:$w") ;;
        load) max=$(DOCKER_HOST=unix://$DOCKER_SOCK timed "$IB" -q --smoke=off $def -t $w:$kind --load) ;;
        verify)
          "$IB" -q --smoke=off $def -t $w:$kind --output "oci:$PWD/vlayout:$w" >/dev/null
          max=$(IMGBUILD_STORE=$PWD/vstore-$w timed "$IV" "oci:$PWD/vlayout:$w")
          rm -rf "vstore-$w" ;;
      esac
    done
    if [ $kind = verify ]; then
      # The verdicts of an uninterrupted imgverify into a store without caches.
      IMGBUILD_STORE=$PWD/vstore-ref "$IV" --json "oci:$PWD/vlayout:calibrate" >ref.json
      ref_gates=$(jq -c '[.gates[] | {name, status}]' ref.json)
      rm -rf vstore-ref
    fi
    per[$kind]=0
    i=0
    while [ "${per[$kind]}" -lt "$kills" ] && [ "$i" -lt $((3 * kills)) ]; do
      i=$((i + 1))
      echo "x = $i  # $kind round $i" >$def/files/extra.py
      local cmd=("$IB" -q --smoke=off $def -t "$kind:$i")
      case $kind in
        output) cmd+=(--output "oci:$PWD/layout:$kind-$i") ;;
        push) cmd+=(--push "docker://$REG/k:$i") ;;
        load) cmd=(env DOCKER_HOST=unix://$DOCKER_SOCK "${cmd[@]}" --load) ;;
        verify)
          "${cmd[@]}" --output "oci:$PWD/vlayout:$i" >/dev/null
          cmd=(env IMGBUILD_STORE=$PWD/vstore-$i "$IV" "oci:$PWD/vlayout:$i") ;;
      esac
      rounds=$((rounds + 1))
      if kill_round "$max" "${cmd[@]}"; then
        killed=$((killed + 1)); per[$kind]=$((per[$kind] + 1))
      else
        max=$(python3 -c "print(max(0.01, 0.75 * $max))")
      fi
      "$IV" --store >/dev/null
      if tag_in_store "$kind:$i"; then "$IV" "$kind:$i" >/dev/null; fi
      case $kind in
        output)
          if [ -f layout/index.json ] && jq -e --arg t "$kind-$i" \
            '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t)' layout/index.json >/dev/null; then
            tag_in_store "$kind:$i"
            skopeo inspect "oci:$PWD/layout:$kind-$i" >/dev/null
            "$IV" "oci:$PWD/layout:$kind-$i" >/dev/null
          fi ;;
        push)
          if skopeo inspect --tls-verify=false "docker://$REG/k:$i" >/dev/null 2>&1; then
            tag_in_store "$kind:$i"
            "$IV" "docker://$REG/k:$i" >/dev/null
          fi ;;
        load)
          if $D image inspect "$kind:$i" >/dev/null 2>&1; then
            tag_in_store "$kind:$i"
            [ "$($D image inspect -f '{{.ID}}' "$kind:$i")" = "$(skopeo inspect --raw "oci:$IMGBUILD_STORE:$kind:$i" | jq -r .config.digest)" ]
          fi ;;
        verify)
          # Over the caches the killed run left: the uninterrupted verdicts.
          IMGBUILD_STORE=$PWD/vstore-$i "$IV" --json "oci:$PWD/vlayout:$i" >v.json
          [ "$(jq -c '[.gates[] | {name, status}]' v.json)" = "$ref_gates" ]
          rm -rf "vstore-$i" ;;
      esac
    done
    # After the kills, the same work runs through.
    "${cmd[@]}" >/dev/null
    "$IV" "$kind:$i" >/dev/null
  done
  figure "killed $killed of $rounds runs (build ${per[build]}, output ${per[output]}, push ${per[push]}, load ${per[load]}, imgverify ${per[verify]})"
  for kind in build output push load verify; do
    [ "${per[$kind]}" -ge "$kills" ] || { log "$kind: killed ${per[$kind]} times in $((3 * kills)) rounds, fewer than $kills"; return 1; }
  done
  [ "$killed" -ge $((5 * kills)) ]
  "$IV" --store
}

# A layer's file list (files/) and extracted tree (rootfs/) are named by
# its diff_id, which names no blob: gc keeps them while a kept image's
# config names that diff_id and removes them with the last such image
# (they had stayed forever, the extracted trees gigabytes each).
gc_base() { # LAYOUT NAME: a one-layer base of one file
  mkdir -p "rootfs-$2/opt" && echo "$2" >"rootfs-$2/opt/$2.txt"
  tar --numeric-owner --owner=0 --group=0 -C "rootfs-$2" -cf "$2.tar" opt
  umoci init --layout "$1" && umoci new --image "$1:base" && umoci raw add-layer --image "$1:base" --tag base "$2.tar"
}
layer_ids() { # TAG: the diff_ids of a tagged image of the store, hex
  local S=$IMGBUILD_STORE m c
  m=$(jq -r --arg t "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t) | .digest' "$S/index.json" | cut -d: -f2)
  c=$(jq -r '.config.digest' "$S/blobs/sha256/$m" | cut -d: -f2)
  jq -r '.rootfs.diff_ids[]' "$S/blobs/sha256/$c" | cut -d: -f2
}

t_robust_gc_sweeps_the_layer_caches_of_images_no_longer_kept() {
  local S=$IMGBUILD_STORE id
  gc_base la one && gc_base lb two
  mkdir -p def && echo hello >def/hello.txt
  printf '[image]\nname = x:1\nfrom = scratch\n[copy]\nfile hello.txt /hello.txt\n[new]\n/hello.txt\n' >def/image.conf
  "$IB" -q --smoke=off --from oci:la:base def -t a:1 >/dev/null
  "$IB" -q --smoke=off --from oci:lb:base def -t b:1 >/dev/null
  layer_ids a:1 >a.ids && layer_ids b:1 >b.ids
  [ "$(wc -l <a.ids)" = 2 ]
  while read -r id; do [ -e "$S/imgbuild/files/$id" ]; done < <(cat a.ids b.ids)
  # A list and a tree of a layer no image names, as a removed image leaves.
  local stray
  stray=$(printf 'stray layer' | sha256sum | cut -d' ' -f1)
  printf 'x' >"$S/imgbuild/files/$stray"
  mkdir -p "$S/imgbuild/rootfs/$stray/opt"
  # The overlay's blob kept by its diff_id (layer-gz/, one: the same layer
  # over either base), and one for a layer no image names.
  [ "$(ls "$S/imgbuild/layer-gz" | wc -l)" = 1 ]
  printf 'x' >"$S/imgbuild/layer-gz/$stray-gz6"
  "$IB" --gc --json >gc.json
  [ ! -e "$S/imgbuild/files/$stray" ]
  [ ! -e "$S/imgbuild/rootfs/$stray" ]
  [ ! -e "$S/imgbuild/layer-gz/$stray-gz6" ]
  [ "$(ls "$S/imgbuild/layer-gz" | wc -l)" = 1 ]
  while read -r id; do [ -e "$S/imgbuild/files/$id" ]; done < <(cat a.ids b.ids)
  # Untag a:1: its base layer's list goes; b:1's stay, and both share the
  # overlay's layer (the same bytes over either base), which stays too.
  jq -c '.manifests |= map(select(.annotations["org.opencontainers.image.ref.name"] != "a:1"))' "$S/index.json" >i.json
  cp i.json "$S/index.json"
  "$IB" --gc --json >gc2.json
  jq -e '.cache_entries >= 1' gc2.json
  id=$(head -1 a.ids)
  [ ! -e "$S/imgbuild/files/$id" ]
  while read -r id; do [ -e "$S/imgbuild/files/$id" ]; done <b.ids
  "$IV" b:1 >/dev/null
}

# A base of several layers: its merged view is kept whole (views/, named by
# the layers' OCI ChainID, computed here from the config as the image spec
# defines it), a warm build reads it instead of the layers' lists, a damaged
# one is made again, and gc keeps it, and the verdicts kept for that base
# (named after its ChainID too), exactly while an image begins with those
# layers.
t_robust_merged_view_of_a_base_is_kept_by_chain_id() {
  local S=$IMGBUILD_STORE chain="" id n=0
  mkdir -p r1/opt r2/opt r3/opt && echo one >r1/opt/one.txt && echo two >r2/opt/two.txt && echo three >r3/opt/three.txt
  : >r3/opt/.wh.one.txt
  umoci init --layout lc && umoci new --image lc:base
  for k in 1 2 3; do
    tar --numeric-owner --owner=0 --group=0 -C "r$k" -cf "l$k.tar" opt
    umoci raw add-layer --image lc:base --tag base "l$k.tar"
  done
  skopeo copy -q oci:lc:base "oci:$S:base:1"
  mkdir -p def && echo hello >def/hello.txt
  printf '[image]\nname = x:1\nfrom = base:1\n[copy]\nfile hello.txt /hello.txt\n[new]\n/hello.txt\n' >def/image.conf
  "$IB" -q --smoke=off def -t x:1 >x1.out
  layer_ids base:1 >base.ids
  [ "$(wc -l <base.ids)" = 3 ]
  while read -r id; do
    n=$((n + 1))
    if [ "$n" = 1 ]; then chain=sha256:$id; else chain=sha256:$(printf '%s sha256:%s' "$chain" "$id" | sha256sum | cut -d' ' -f1); fi
  done <base.ids
  ls "$S/imgbuild/views" >views.txt
  cat views.txt
  grep -qx "${chain#sha256:}" views.txt
  # The layers' lists are not read again: removed, they stay away.
  rm -f "$S/imgbuild/files/"*
  "$IB" -q --smoke=off def -t x:2 >x2.out
  [ "$(cut -d' ' -f2 x1.out)" = "$(cut -d' ' -f2 x2.out)" ]
  while read -r id; do [ ! -e "$S/imgbuild/files/$id" ]; done <base.ids
  # The whiteout of layer 3 holds in the view read back.
  "$IB" -q --smoke=off --json def -t x:3 >x3.json
  umoci unpack --image "$S:x:3" u >/dev/null
  [ ! -e u/rootfs/opt/one.txt ]
  [ -e u/rootfs/opt/two.txt ]
  # A damaged view is a miss: computed from the lists again, and rewritten.
  printf 'not a view' >"$S/imgbuild/views/${chain#sha256:}"
  "$IB" -q --smoke=off def -t x:4 >x4.out
  [ "$(cut -d' ' -f2 x1.out)" = "$(cut -d' ' -f2 x4.out)" ]
  [ "$(stat -c %s "$S/imgbuild/views/${chain#sha256:}")" -gt 100 ]
  while read -r id; do [ -e "$S/imgbuild/files/$id" ]; done <base.ids
  # The SBOM's GPU and package lists kept for this base are named after
  # its ChainID too.
  ls "$S/imgbuild/sbom-gpu" "$S/imgbuild/sbom-packages" >memos.txt
  cat memos.txt
  [ "$(grep -c "^${chain#sha256:}-" memos.txt)" = 2 ]
  # gc: kept while any image begins with those layers, swept after.
  "$IB" --gc --json >gc.json
  [ -e "$S/imgbuild/views/${chain#sha256:}" ]
  ls "$S/imgbuild/sbom-gpu" "$S/imgbuild/sbom-packages" >memos.txt
  [ "$(grep -c "^${chain#sha256:}-" memos.txt)" = 2 ]
  jq -c '.manifests = []' "$S/index.json" >i.json
  cp i.json "$S/index.json"
  "$IB" --gc --json >gc2.json
  [ ! -e "$S/imgbuild/views/${chain#sha256:}" ]
  ls "$S/imgbuild/sbom-gpu" "$S/imgbuild/sbom-packages" >memos.txt
  refute grep -q "^${chain#sha256:}-" memos.txt
}

# many_entry_base LAYOUT LAYERS FILES: a base of LAYERS layers of FILES
# empty regular files each (and their folders), with paths of some 70
# bytes, as a base of 16 GB has 190,000 entries in 8 layers.
many_entry_base() {
  local k
  umoci init --layout "$1" && umoci new --image "$1:base"
  for k in $(seq 1 "$2"); do
    python3 - "m$k.tar" "$k" "$3" <<'PY'
import sys, tarfile
out, layer, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    for d in range(0, n, 100):
        folder = tarfile.TarInfo(f"usr/share/generated-{layer}/package-{d // 100:05d}")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        t.addfile(folder)
        for i in range(d, min(d + 100, n)):
            f = tarfile.TarInfo(f"{folder.name}/module_with_a_longer_name_{i:06d}.py")
            f.mode = 0o644
            t.addfile(f)
PY
    umoci raw add-layer --image "$1:base" --tag base "m$k.tar"
    rm -f "m$k.tar"
  done
}

# The memory of a build and of imgverify over a base of many entries is
# bounded (issue 18: 64 MiB at 16 GB).  Every layer's file list and the
# merged view are written through a small buffer, not built whole in
# memory; a list just computed is read back mapped, its digests and paths
# off the heap, and the heap its pass used is given back; the pages of the
# mapped lists that a write read are given back as it goes.  Over 8 layers
# of 20,000 files the build peaked at 80 MB before (imgverify, which merges
# and writes the view of the image's 9 layers, at 74 MB); now at 34 and 38
# MB (without the read-back 49, without giving back the heap 45, without
# giving back the pages a write read 47 and 51, written from one buffer 61
# and 54).
t_robust_memory_over_a_base_of_many_entries_bounded() {
  many_entry_base lm 8 20000
  mkdir -p def && echo hello >def/hello.txt
  printf '[image]\nname = x:1\nfrom = scratch\n[copy]\nfile hello.txt /hello.txt\n[new]\n/hello.txt\n' >def/image.conf
  "$IB" -q --smoke=off --from oci:lm:base def -t x:1 --report json:build.json >x1.out
  "$IV" x:1 --report json:verify.json 2>verify.err >/dev/null
  jq -e '.status == "pass"' verify.json
  local views built verified
  views=$(ls "$IMGBUILD_STORE/imgbuild/views" | wc -l)
  [ "$views" -ge 1 ]
  built=$(jq -e '.resources.peak_rss_kib' build.json)
  verified=$(jq -e '.resources.peak_rss_kib' verify.json)
  log "peak RSS over 160,000 entries: build $built KiB, imgverify $verified KiB"
  # (not under the sanitizers, whose shadow memory is no figure of ours)
  [ -n "${IB_SANITIZE:-}" ] || [ "$built" -lt $((42 * 1024)) ]
  [ -n "${IB_SANITIZE:-}" ] || [ "$verified" -lt $((44 * 1024)) ]
}
