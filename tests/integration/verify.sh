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
  jq -e '.status == "pass" and ([.gates[] | select(.status == "pass") | .name] == ["integrity", "provenance", "symbols", "kernels"])' oci.json
  IMGBUILD_STORE=$PWD/s3 "$IV" --json docker-archive:dcp2.tar >archive.json
  validate archive.json
  # The archive kept the manifest (same digest) and carried the provenance.
  jq -e '.status == "pass" and .integrity.blobs == 5' archive.json
  [ "$(jq -r .manifest archive.json)" = "$(jq -r .manifest store.json)" ]
  jq -e '[.gates[] | select(.status == "pass") | .name] == ["integrity", "provenance", "symbols", "kernels"]' archive.json
  # With the definition given, its sources are compared with the image.
  "$IV" --definition "$ROOT/images/dsv41-flash-dcp2" dsv41-flash-dcp2:local
  "$IV" --store
}

t_verify_images_made_by_other_tools() {
  docker_start
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  skopeo copy -q "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" oci:skopeo-copy:x
  IMGBUILD_STORE=$PWD/s2 "$IV" --json oci:skopeo-copy:x >skopeo.json
  jq -e '.status == "pass" and .integrity.blobs == 5' skopeo.json
  "$IB" -q dsv41-flash-dcp2 --output docker-archive:dcp2.tar >/dev/null
  $D load -i dcp2.tar >/dev/null
  $D save dsv41-flash-dcp2:local -o saved.tar
  IMGBUILD_STORE=$PWD/s3 "$IV" --json docker-archive:saved.tar >saved.json
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
  IMGBUILD_STORE=$PWD/s1 expect_fail 4 "blob sha256:$layer: content has digest" "$IV" oci:bad-layer:dcp2:1
  # The same damage inside the local store itself.
  cp -al "$IMGBUILD_STORE" s-store
  rm "s-store/blobs/sha256/$layer"
  cp "bad-layer/blobs/sha256/$layer" "s-store/blobs/sha256/$layer"
  IMGBUILD_STORE=$PWD/s-store "$IV" --json dsv41-flash-dcp2:local >layer.json || true
  validate layer.json
  jq -e --arg l "$layer" '.exit_code == 4 and (.error | contains($l))' layer.json
  IMGBUILD_STORE=$PWD/s-store expect_fail 4 "sha256:$layer" "$IV" --store
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
  # A provenance that no longer matches the content: exit 4 too.
  "$IB" -q dsv41-flash-dcp2 -t clean:1 >/dev/null
  art=$(jq -r --arg d "$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == "clean:1") | .digest' "$IMGBUILD_STORE/index.json")" \
    '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' "$IMGBUILD_STORE/index.json")
  [ -n "$art" ]
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
