# The Docker Engine transport (part of issue "Registry and Docker Engine
# transports"): a base read from a real dockerd, and --load sending only the
# layers the daemon lacks.

t_base_from_the_docker_engine() {
  docker_start
  build_base
  umoci unpack --image "$IMGBUILD_STORE:dsv41-flash-b12x:local" b >/dev/null
  tar -C b/rootfs -c . | $D import - from-docker:1 >/dev/null
  export DOCKER_HOST=unix://$DOCKER_SOCK
  # Named explicitly, and as a bare name the store does not have.
  IMGBUILD_STORE=$PWD/s1 "$IB" -q --from docker-daemon:from-docker:1 dsv41-flash-dcp2 -t d1:1 >/dev/null
  IMGBUILD_STORE=$PWD/s2 "$IB" -q --from from-docker:1 dsv41-flash-dcp2 -t d2:1 >/dev/null
  want=$($D image inspect from-docker:1 | jq -r '.[0].RootFS.Layers[0]')
  got=$(skopeo inspect --config "oci:$PWD/s1:d1:1" | jq -r '.rootfs.diff_ids[0]')
  [ "$want" = "$got" ]
  IMGBUILD_STORE=$PWD/s3 expect_fail 9 'Docker Engine has no image `no-such:1`' "$IB" --from docker-daemon:no-such:1 dsv41-flash-dcp2
  $D rmi -f from-docker:1 >/dev/null
}

t_load_sends_only_the_new_layers() {
  docker_start
  build_base
  export DOCKER_HOST=unix://$DOCKER_SOCK
  "$IB" -q dsv41-flash-b12x --output docker-archive:base.tar >/dev/null
  $D load -i base.tar >/dev/null
  # The bytes are counted on the socket itself (a relay in front of the
  # daemon), not taken from what imgbuild says it sent.
  service sock.log python3 "$ROOT/tests/docker/sockcount.py" "$PWD/counted.sock" "$DOCKER_SOCK" "$PWD/sock.jsonl"
  for _ in $(seq 1 100); do [ -S counted.sock ] && break; sleep 0.1; done
  DOCKER_HOST=unix://$PWD/counted.sock "$IB" --load --json dsv41-flash-dcp2 >report.json 2>err.txt
  for _ in $(seq 1 50); do [ -s sock.jsonl ] && break; sleep 0.1; done
  cat sock.jsonl
  # One connection (keep-alive) carries the questions and the load.
  up=$(jq -s 'map(.up) | add' sock.jsonl)
  new=$(jq '.layer.size' report.json)
  prebake=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq '.layers[2].size')
  echo "on the socket: $up bytes up; new layers $new + $prebake bytes"
  # The load carried the two new layers, and the base's 200 MB were not sent.
  [ "$up" -gt $((new + prebake)) ]
  [ "$up" -lt $((new + prebake + 1048576)) ]
  [ "$up" -lt $(stat -c %s base.tar) ]
  # What imgbuild reports agrees with the socket (the archive, less headers).
  sent=$(jq -r '.transfers[]' report.json | sed -n 's/.*sent \([0-9]*\) bytes; 1 of 3 layers were already in the daemon.*/\1/p')
  [ -n "$sent" ]
  [ "$sent" -le "$up" ]
  [ "$up" -lt $((sent + 65536)) ]
  jq -e --arg id "$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq -r .config.digest)" \
    '.nodes | length == 1 and .[0].status == "pass" and .[0].image_id == $id' report.json
  # The image runs.
  $D run --rm --network none dsv41-flash-dcp2:local cat "$SITE/vllm/v1/worker/cp_utils.py" |
    cmp - "$ROOT/images/dsv41-flash-dcp2/files/cp_utils.py"
  # imgverify reads it back from the daemon (integrity; docker save has no provenance).
  IMGBUILD_STORE=$PWD/s4 "$IV" --json docker-daemon:dsv41-flash-dcp2:local >v.json
  jq -e '.status == "pass" and .integrity.bad == 0' v.json
  $D rmi -f dsv41-flash-dcp2:local dsv41-flash-b12x:local >/dev/null
}
