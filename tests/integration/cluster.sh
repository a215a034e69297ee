# Every node gets the image (issue 25): thin loads over SSH into each node's
# own Docker Engine.  Two dockerds on private sockets stand in for two
# Sparks, each behind Debian's sshd on a loopback port of its own (keys made
# here; sessions reach that node's daemon), and behind a counting relay
# (tests/docker/tcpcount.py) that counts the SSH stream and can cut it.
# imgbuild runs `ssh` as a user would: through $PATH, honouring the SSH
# configuration, which here is the test's (a wrapper adds -F).

# cluster_up: nodes n1 and n2 holding the base, their sshds and relays,
# ssh/config naming them node1 and node2.  Sets P1 P2 (the relays' ports).
cluster_up() {
  [ "$(id -u)" = 0 ] || skip_test "sshd for the stand-in nodes runs as root"
  [ -x /usr/sbin/sshd ] || skip_test "no /usr/sbin/sshd (openssh-server; scripts/install-deps.sh test)"
  build_base
  "$IB" -q dsv41-flash-b12x --output docker-archive:base.tar >/dev/null
  ssh_keys "$PWD/keys"
  local n
  for n in 1 2; do
    node_start "$PWD/n$n"
    node_docker "$PWD/n$n" load -q -i base.tar >/dev/null
    ssh_node_start "$PWD/n$n" "$PWD/keys"
    service "n$n/relay.log" python3 "$ROOT/tests/docker/tcpcount.py" "$PWD/n$n/relay.port" "$SSHD_PORT" \
      "$PWD/n$n/relay.jsonl" "$PWD/n$n/cut"
    wait_for_file "n$n/relay.port"
  done
  P1=$(cat n1/relay.port)
  P2=$(cat n2/relay.port)
  # The known host is the test's host key, under one alias for both relays.
  echo "imgbuild-test-node $(cut -d' ' -f1,2 keys/host_key.pub)" >keys/known_hosts
  cat >ssh_config <<EOF
Host node1
  HostName 127.0.0.1
  Port $P1
Host node2
  HostName 127.0.0.1
  Port $P2
Host *
  User $(id -un)
  IdentityFile $PWD/keys/id
  IdentitiesOnly yes
  HostKeyAlias imgbuild-test-node
  UserKnownHostsFile $PWD/keys/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  LogLevel ERROR
EOF
  mkdir -p bin
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$PWD/ssh_config" >bin/ssh
  chmod +x bin/ssh
  export PATH=$PWD/bin:$PATH
}

# Bytes that went up node N's relay (the SSH stream), since the last call.
relay_up() {
  local f=n$1/relay.jsonl
  for _ in $(seq 1 50); do [ -s "$f" ] && break; sleep 0.1; done
  jq -s 'map(.up) | add // 0' "$f"
  mv "$f" "$f.$(date +%s%N)"
}

# The sha256 of every file of the overlay's tree, as the running image on
# node N sees it.
node_files() {
  node_docker "n$1" run --rm --network none dsv41-flash-dcp2:local \
    sh -c "cd $SITE/vllm && busybox find . -type f | busybox sort | busybox xargs sha256sum"
}

t_cluster_load_over_ssh_sends_only_new_layers() {
  cluster_up
  "$IB" --json --load ssh://node1 --load "ssh://$(id -un)@127.0.0.1:$P2" dsv41-flash-dcp2 >report.json 2>err.txt
  cat err.txt
  validate report.json
  up1=$(relay_up 1)
  up2=$(relay_up 2)
  new=$(jq '.layer.size' report.json)
  prebake=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq '.layers[2].size')
  echo "SSH stream up: node1 $up1 bytes, node2 $up2 bytes; new layers $new + $prebake bytes; base.tar $(stat -c %s base.tar)"
  for up in "$up1" "$up2"; do
    # Each node got the two new layers, and less than them + 1 MiB.
    [ "$up" -gt $((new + prebake)) ]
    [ "$up" -lt $((new + prebake + 1048576)) ]
  done
  id=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq -r .config.digest)
  jq -e --arg id "$id" '.status == "pass" and (.nodes | length == 2)
    and all(.nodes[]; .status == "pass" and .image_id == $id and .layers_present == 1 and .layers == 3)' report.json
  jq -e '.nodes[0].host == "ssh://node1"' report.json
  jq -e 'any(.transfers[]; test("^docker load ssh://node1: sent [0-9]+ bytes; 1 of 3 layers"))' report.json
  # Every node runs the image, with the same files as ours.
  umoci unpack --image "$IMGBUILD_STORE:dsv41-flash-dcp2:local" ours >/dev/null
  (cd "ours/rootfs$SITE/vllm" && find . -type f | LC_ALL=C sort | xargs sha256sum) >ours.sums
  node_files 1 >n1.sums
  node_files 2 >n2.sums
  [ "$(wc -l <ours.sums)" -gt 20 ]
  cmp ours.sums n1.sums
  cmp ours.sums n2.sums
  # imgverify asks a node what it has, over SSH: integrity, and our image ID
  # (the store's dsv41-flash-dcp2:local).
  "$IV" --json docker-daemon:dsv41-flash-dcp2:local --host ssh://node1 >v.json
  jq -e --arg id "$id" '.status == "pass" and .integrity.bad == 0 and .image_id.match
    and .image_id.daemon == $id and .image_id.host == "ssh://node1"' v.json
  # A node whose dsv41-flash-dcp2:local is another image fails.
  node_docker n2 tag dsv41-flash-b12x:local dsv41-flash-dcp2:local
  expect_fail 4 "docker-daemon:dsv41-flash-dcp2:local at ssh://node2 is not our image $id" \
    "$IV" docker-daemon:dsv41-flash-dcp2:local --host ssh://node2
}

t_cluster_node_stopped_mid_transfer_then_rerun() {
  cluster_up
  # How many bytes go up before the archive: cut node2 halfway into it.
  "$IB" -q --json --load ssh://node1 dsv41-flash-dcp2 >probe.json
  pre=$(( $(relay_up 1) - $(jq '.nodes[0].archive_bytes' probe.json) ))
  node_docker n1 rmi -f dsv41-flash-dcp2:local >/dev/null
  echo $((pre + ($(jq '.nodes[0].archive_bytes' probe.json) / 2))) >n2/cut
  node2=ssh://$(id -un)@127.0.0.1:$P2
  rc=0
  "$IB" --json --load ssh://node1 --load "$node2" dsv41-flash-dcp2 >stopped.json 2>err.txt || rc=$?
  cat err.txt
  [ "$rc" = 8 ]
  validate stopped.json
  jq -s 'map(select(.cut)) | length == 1' n2/relay.jsonl | grep -q true
  # The stopped node is named with its error; the other completed.
  grep -q "load: $node2: Docker Engine at $node2: " err.txt
  [ "$(grep -c 'error:' err.txt)" = 1 ]
  grep -q "error: .*load: 1 of 2 nodes does not have dsv41-flash-dcp2:local: $node2" err.txt
  jq -e '.nodes[0].status == "pass" and .nodes[1].status == "fail" and (.nodes[1].error | length > 0)' stopped.json
  node_docker n1 image inspect dsv41-flash-dcp2:local >/dev/null
  refute node_docker n2 image inspect dsv41-flash-dcp2:local >/dev/null 2>&1
  relay_up 1 >/dev/null
  relay_up 2 >/dev/null
  # The rerun, nodes from a file, on a terminal: node1 has the image (only
  # named), node2 gets the new layers; a progress line per node.
  rm n2/cut
  printf '# the cluster\nnode1\n%s  # by address\n' "$node2" >nodes.txt
  in_terminal "$PWD/t.sock" screen.txt "cd $PWD && env PATH=$PATH IMGBUILD_STORE=$IMGBUILD_STORE $IB --nodes nodes.txt dsv41-flash-dcp2"
  cat screen.txt
  grep -q 'EXIT=0' screen.txt
  grep -Eq "imgbuild: load ssh://node1 +done: it had the image, named it" screen.txt
  grep -Eq "imgbuild: load $node2 +done: sent [0-9.]+ kB, 1 of 3 layers were there" screen.txt
  grep -q 'docker load ssh://node1: sent 0 bytes; 3 of 3 layers were already in the daemon (it had the image: tagged only)' screen.txt
  grep -q "docker load $node2: sent [1-9][0-9]* bytes; 1 of 3 layers were already in the daemon; image" screen.txt
  [ "$(relay_up 1)" -lt 65536 ]
  node_files 1 >n1.sums
  node_files 2 >n2.sums
  cmp n1.sums n2.sums
}

# The nodes are loaded side by side (IMGBUILD_LOAD_JOBS, default 4): the
# SSH sessions of node1 and node2 (their relays' logs) overlap in time; with
# IMGBUILD_LOAD_JOBS=1 one node's sessions all end before the other's begin.
# (A short name: a node's containerd socket lives under the test's folder,
# and a unix socket's path has at most 108 bytes.)
t_cluster_loads_side_by_side() {
  cluster_up
  local jobs
  for jobs in "" 1; do
    rm -f n1/relay.jsonl n2/relay.jsonl
    node_docker n1 rmi -f dsv41-flash-dcp2:local >/dev/null 2>&1 || true
    node_docker n2 rmi -f dsv41-flash-dcp2:local >/dev/null 2>&1 || true
    IMGBUILD_LOAD_JOBS=$jobs "$IB" -q --load ssh://node1 --load ssh://node2 dsv41-flash-dcp2 >/dev/null
    for n in 1 2; do
      for _ in $(seq 1 50); do [ -s "n$n/relay.jsonl" ] && break; sleep 0.1; done
      jq -s '{first: (map(.opened) | min), last: (map(.closed) | max), n: length}' "n$n/relay.jsonl" >"span$n.json"
    done
    # Two spans overlap when each begins before the other ends.
    overlap=$(jq -n --slurpfile a span1.json --slurpfile b span2.json \
      '$a[0].first < $b[0].last and $b[0].first < $a[0].last')
    echo "IMGBUILD_LOAD_JOBS=${jobs:-unset}: node1 $(jq -c . span1.json), node2 $(jq -c . span2.json); overlap $overlap"
    if [ -z "$jobs" ]; then
      [ "$overlap" = true ]
    else
      [ "$overlap" = false ]
    fi
    node_docker n1 image inspect dsv41-flash-dcp2:local >/dev/null
    node_docker n2 image inspect dsv41-flash-dcp2:local >/dev/null
  done
}

t_cluster_bad_hosts() {
  expect_fail 2 'Docker host `tcp://10.0.0.2:2375`: tcp:// is not supported' "$IB" --load tcp://10.0.0.2:2375 x
  expect_fail 2 'Docker host `ssh://node:99999`: bad port' "$IB" --load ssh://node:99999 x
  printf 'ssh://ok\nunix://relative\n' >nodes.txt
  expect_fail 2 'nodes.txt: Docker host `unix://relative`: the socket path must be absolute' "$IB" --nodes nodes.txt x
}
