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
