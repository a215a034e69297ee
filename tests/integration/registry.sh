# The registry transport (issue "Registry and Docker Engine transports"):
# Debian's docker-registry on loopback (open, htpasswd Basic, Bearer tokens
# from tests/registry/token_server.py, TLS), a counting and fault-injecting
# proxy in front of it (tests/registry/proxy.py), skopeo and dockerd to
# judge what was pushed.

# Sum of a jq selection over the proxy's log.
proxied() { jq -s "$1" proxy.jsonl; }

t_registry_thin_push_and_pull_counted() {
  build_base
  registry_start open
  proxy_start
  push_base
  local base_layers
  base_layers=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -c '[.layers[].digest]')
  # A store that has never seen the base: it comes from the registry.
  IMGBUILD_STORE=$PWD/fresh "$IB" --json --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    --push "docker://$PROXY/dsv41-flash-dcp2:1" >report.json 2>err.txt
  cat err.txt
  digest=$(jq -r .manifest report.json)
  # Each base layer was downloaded once, whole.
  for d in $(echo "$base_layers" | jq -r '.[]'); do
    [ "$(proxied "[.[] | select(.method == \"GET\" and (.path | endswith(\"/blobs/$d\")))] | length")" = 1 ]
  done
  # The push: base layers mounted from the base's repository, never sent;
  # the bytes sent are exactly the new blobs (overlay and prebake layers,
  # config, provenance) plus the manifests.
  nbase=$(echo "$base_layers" | jq length)
  [ "$(proxied '[.[] | select(.method == "POST" and (.query | test("mount=")) and .status == 201)] | length')" = "$nbase" ]
  for d in $(echo "$base_layers" | jq -r '.[]'); do
    [ "$(proxied "[.[] | select((.method == \"PUT\" or .method == \"PATCH\") and (.query | contains(\"$d\")))] | length")" = 0 ]
  done
  skopeo inspect --raw "oci:$PWD/fresh:dsv41-flash-dcp2:local" >m.json
  new=$(jq --argjson n "$nbase" '[.config.size, .layers[$n:][].size] | add' m.json)
  prov=$(jq -r --arg d "$digest" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' \
    "$PWD/fresh/index.json")
  provblobs=$(jq '[.config.size, .layers[].size] | add' "$PWD/fresh/blobs/sha256/${prov#sha256:}")
  sent=$(proxied '[.[] | select((.method == "PUT" or .method == "PATCH") and (.path | contains("/blobs/uploads/"))) | .up] | add')
  echo "blob bytes sent $sent; new blobs $new + provenance $provblobs"
  [ "$sent" = $((new + provblobs)) ]
  # 7: the overlay and prebake layers, the config, and the attestation
  # artifact's empty config and three statements.
  jq -r '.transfers[]' report.json | grep "pushed docker://$PROXY/dsv41-flash-dcp2:1: 7 blobs uploaded .* $nbase mounted"
  # The tag went last.
  [ "$(proxied '[.[] | select(.method == "PUT")] | last | .path')" = '"/v2/dsv41-flash-dcp2/manifests/1"' ]
  # skopeo sees it; a copy back to an OCI layout has the same manifest digest.
  [ "$(skopeo inspect --tls-verify=false "docker://$PROXY/dsv41-flash-dcp2:1" | jq -r .Digest)" = "$digest" ]
  skopeo copy -q --src-tls-verify=false "docker://$REG/dsv41-flash-dcp2:1" oci:back:x
  [ "sha256:$(skopeo inspect --raw oci:back:x | sha256sum | cut -d' ' -f1)" = "$digest" ]
  # A second build over the same base moves no base byte.
  : >proxy.jsonl
  IMGBUILD_STORE=$PWD/fresh "$IB" -q --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t again:1 \
    --push "docker://$PROXY/dsv41-flash-dcp2:2" >/dev/null
  [ "$(proxied '[.[] | select(.method == "GET" and (.path | contains("/blobs/")))] | length')" = 0 ]
  [ "$(proxied '[.[] | select(.method == "GET") | .down] | add')" -lt 65536 ]
  # imgverify reads it back from the registry, provenance included.
  IMGBUILD_STORE=$PWD/v "$IV" --json "docker://$REG/dsv41-flash-dcp2:1" >v.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "provenance") | .status == "pass")' v.json
  jq -e --arg n "$((nbase + 3))" '.transfers[0] | test("^pulled docker://.*: " + $n + " blobs fetched")' v.json
  validate v.json
}

t_registry_image_runs_in_docker() {
  build_base
  docker_start
  registry_start open
  push_base
  "$IB" -q --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 --push "docker://$REG/dcp2:run" >out.txt
  # Docker pulls from a loopback registry over plain HTTP, as we do.
  $D pull -q "$REG/dcp2:run" >/dev/null
  [ "$($D image inspect "$REG/dcp2:run" | jq -r '.[0].RepoDigests[0]')" = "$REG/dcp2@$(cut -d' ' -f2 out.txt)" ]
  $D run --rm --network none "$REG/dcp2:run" cat "$SITE/vllm/v1/worker/cp_utils.py" |
    cmp - "$ROOT/images/dsv41-flash-dcp2/files/cp_utils.py"
  $D rmi -f "$REG/dcp2:run" >/dev/null
}

t_registry_basic_auth() {
  build_base
  registry_start basic
  push_base "ci:$REG_PASSWORD"
  auth_file auth.json "$REG" ci "$REG_PASSWORD"
  "$IB" -q --authfile auth.json --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    --push "docker://$REG/dcp2:basic" >out.txt
  [ "$(skopeo inspect --tls-verify=false --creds "ci:$REG_PASSWORD" "docker://$REG/dcp2:basic" | jq -r .Digest)" = \
    "$(cut -d' ' -f2 out.txt)" ]
  # The same credentials through $REGISTRY_AUTH_FILE.
  REGISTRY_AUTH_FILE=$PWD/auth.json "$IV" --json "docker://$REG/dcp2:basic" >v.json
  jq -e '.status == "pass" and .exit_code == 0' v.json
  [ "$(jq -r .manifest v.json)" = "$(cut -d' ' -f2 out.txt)" ]
  # (Over an image that already has the overlay: without its drift pins,
  # which would rightly refuse a base whose files are the overlay's own.)
  copy_images d
  rm d/dsv41-flash-dcp2/manifest.lock
  REGISTRY_AUTH_FILE=$PWD/auth.json "$IB" -q --smoke=off --from "docker://$REG/dcp2:basic" d/dsv41-flash-dcp2 \
    -t over:1 >/dev/null
  # A wrong password: the message names the registry, never the secret.
  auth_file bad.json "$REG" ci wrong-Secret-42
  expect_fail 8 "registry $REG refused the credentials for $REG from .*bad.json" \
    "$IB" --authfile bad.json --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1
  refute grep -q -e wrong-Secret-42 -e "$(printf ci:wrong-Secret-42 | base64 -w0)" stderr.txt stdout.txt
  # No credentials at all.
  HOME=$PWD/nohome expect_fail 8 "registry $REG asks for credentials and none are known" \
    "$IB" --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1
}

t_registry_bearer_tokens_and_scoped_mount() {
  build_base
  registry_start token
  push_base "ci:$REG_PASSWORD"
  auth_file auth.json "$REG" ci "$REG_PASSWORD"
  : >registry-token/token.jsonl
  "$IB" --authfile auth.json --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    --push "docker://$REG/team/dcp2:tok" >out.txt 2>err.txt
  grep -q "1 mounted" err.txt
  # The pull asked for pull on the base; the push for push on its own
  # repository, and the mount for a token that also carries pull on the
  # base's repository.
  jq -se 'map(.scopes) | any(index("repository:dsv41-flash-b12x:pull"))' registry-token/token.jsonl
  jq -se 'map(.scopes) | any(index("repository:team/dcp2:pull,push") and index("repository:dsv41-flash-b12x:pull"))' \
    registry-token/token.jsonl
  [ "$(skopeo inspect --tls-verify=false --creds "ci:$REG_PASSWORD" "docker://$REG/team/dcp2:tok" | jq -r .Digest)" = \
    "$(cut -d' ' -f2 out.txt)" ]
  # The token service refuses a wrong password; nothing leaks.
  auth_file bad.json "$REG" ci wrong-Secret-42
  expect_fail 8 "registry $REG refused the credentials for $REG from .*bad.json.* at its token service" \
    "$IB" --authfile bad.json --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1
  refute grep -q -e wrong-Secret-42 -e "$(printf ci:wrong-Secret-42 | base64 -w0)" stderr.txt stdout.txt
}

# A token service that answers the token request with a Bearer challenge
# of its own (naming itself) is refused, after one token request: a token
# request answers no challenge (answering it asked for another token, and
# that one's for another, as deep as the service liked: the end of the
# stack).
t_registry_token_service_that_challenges_itself_is_refused() {
  cat >loop.py <<'PY'
import os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[2], "a") as f:
            f.write(self.path + "\n")
        realm = "http://127.0.0.1:%d/token" % self.server.server_address[1]
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="%s",service="loop",scope="repository:x:pull"' % realm)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_HEAD = do_GET
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
PY
  service loop.log python3 loop.py loop.port requests.txt
  wait_for_file loop.port
  local host=127.0.0.1:$(cat loop.port)
  IMGBUILD_STORE=$PWD/v expect_fail 8 \
    "registry $host asks for credentials and none are known for it .* at its token service" \
    "$IV" "docker://$host/x:1"
  cat requests.txt
  [ "$(grep -c '^/token' requests.txt)" = 1 ]
}

# The workers' clients start with their caller's token: a push on four
# threads with nothing to mount asks the token service once (the caller's
# ping), not once more per worker.
t_registry_workers_ask_for_no_token_of_their_own() {
  registry_start token
  auth_file auth.json "$REG" ci "$REG_PASSWORD"
  eight_layers
  : >registry-token/token.jsonl
  IMGBUILD_STORE=$PWD/s4 "$IB" --authfile auth.json --smoke=off --transfer-jobs 4 -f D8 -t par:8 \
    --push "docker://$REG/team/par:1" . >out.txt 2>err.txt
  grep -q "pushed docker://$REG/team/par:1: 13 blobs uploaded" err.txt
  cat registry-token/token.jsonl
  [ "$(wc -l <registry-token/token.jsonl)" = 1 ]
  [ "$(skopeo inspect --tls-verify=false --creds "ci:$REG_PASSWORD" "docker://$REG/team/par:1" | jq -r .Digest)" = \
    "$(cut -d' ' -f2 out.txt)" ]
}

t_registry_tls_verified_by_default() {
  build_base
  registry_start tls
  push_base
  expect_fail 8 "registry $REG: its TLS certificate is not trusted .* --tls-verify=false" \
    "$IB" --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1
  "$IB" -q --tls-verify=false --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    --push "docker://$REG/dcp2:tls" >/dev/null
  skopeo inspect --tls-verify=false "docker://$REG/dcp2:tls" >/dev/null
}

t_registry_push_survives_faults() {
  build_base
  registry_start open
  push_base
  proxy_start
  # A 503 on an upload's start, a 500 on a manifest, a connection dropped
  # in the middle of a chunk, a slow answer, and one that stalls past
  # IMGBUILD_REGISTRY_STALL_S.
  cat >faults <<'R'
POST /blobs/uploads/$ status:503 1
PUT /manifests/ status:500 1
PATCH /blobs/uploads/ drop 2
HEAD /blobs/ slow:1 2
GET /manifests/ slow:60 1
R
  # Wide margins both ways on a loaded machine: a 1 s answer is 5 s short of
  # the stall limit, a stalled one 54 s past it.
  IMGBUILD_REGISTRY_CHUNK_SIZE=4096 IMGBUILD_REGISTRY_STALL_S=6 "$IB" --smoke=off \
    --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 --push "docker://$PROXY/dcp2:faults" \
    >out.txt 2>err.txt
  grep pushed err.txt
  proxied 'map(.fault // "none") | group_by(.) | map({(.[0]): length}) | add'
  for f in status:503 status:500 drop slow:1 slow:60; do
    [ "$(proxied "[.[] | select(.fault == \"$f\")] | length")" -ge 1 ]
  done
  # Chunked (4 KiB chunks), and whole: skopeo checks every digest.
  [ "$(proxied '[.[] | select(.method == "PATCH" and .status == 202)] | length')" -gt 3 ]
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/dcp2:faults" | jq -r .Digest)" = "$(cut -d' ' -f2 out.txt)" ]
  skopeo copy -q --src-tls-verify=false "docker://$REG/dcp2:faults" oci:back:x
}

# Every tag of the registry names a manifest whose blobs are all there.
all_tags_whole() {
  local repo tag
  for repo in $(curl -s "http://$REG/v2/_catalog" | jq -r '.repositories[]'); do
    for tag in $(curl -s "http://$REG/v2/$repo/tags/list" | jq -r '.tags // [] | .[]'); do
      rm -rf whole
      skopeo copy -q --src-tls-verify=false "docker://$REG/$repo:$tag" oci:whole:x
    done
  done
}

t_registry_gives_up_clearly_and_tags_nothing() {
  build_base
  registry_start open
  push_base
  proxy_start
  echo 'PUT /manifests/ status:500 1000' >faults
  IMGBUILD_REGISTRY_ATTEMPTS=3 expect_fail 8 \
    "registry $PROXY: put manifest: PUT /v2/dcp2/manifests/sha256:[0-9a-f]{64}: HTTP 500 \(UNAVAILABLE: .*\), gave up after 3 attempts" \
    "$IB" --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 --push "docker://$PROXY/dcp2:1"
  refute skopeo inspect --tls-verify=false "docker://$REG/dcp2:1"
  # Every chunk dropped: the upload gives up; still no tag.  (Under
  # another name: a new record, whose blobs have to go up; the same build
  # again would keep the record the first attempt sent.)
  printf 'PATCH /blobs/uploads/ drop 1000\n' >faults
  IMGBUILD_REGISTRY_ATTEMPTS=2 IMGBUILD_REGISTRY_CHUNK_SIZE=4096 expect_fail 8 "upload blob sha256:.*attempts" \
    "$IB" --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t again:1 --push "docker://$PROXY/dcp2:2"
  refute skopeo inspect --tls-verify=false "docker://$REG/dcp2:2"
  all_tags_whole
}

t_registry_nothing_pushed_unless_every_gate_passed() {
  build_base
  registry_start open
  push_base
  proxy_start
  # No GPU here: --smoke=required refuses; the registry sees no upload.
  expect_fail 7 "smoke" "$IB" --smoke=required --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    --push "docker://$PROXY/dcp2:1"
  [ "$(proxied '[.[] | select(.method != "GET" and .method != "HEAD")] | length')" = 0 ]
  refute skopeo inspect --tls-verify=false "docker://$REG/dcp2:1"
}

t_registry_docker_media_types_index_and_digest() {
  docker_start
  registry_start open
  mkdir r && echo one >r/one && tar -C r -c . | $D import - "$REG/tiny:1" >/dev/null
  $D push -q "$REG/tiny:1" >/dev/null
  skopeo inspect --raw --tls-verify=false "docker://$REG/tiny:1" >tiny.json
  jq -e '.mediaType == "application/vnd.docker.distribution.manifest.v2+json"' tiny.json
  tiny_layer=$(jq -r '.layers[0].digest' tiny.json)
  echo two >two
  printf 'FROM docker://%s/tiny:1\n# imgbuild:new /two\nCOPY two /two\n' "$REG" >Dockerfile
  "$IB" -q --smoke=off -f Dockerfile -t t:1 . >/dev/null
  [ "$(skopeo inspect --raw "oci:$IMGBUILD_STORE:t:1" | jq -r '.layers[0].digest')" = "$tiny_layer" ]
  # By digest.
  d=$(skopeo inspect --tls-verify=false "docker://$REG/tiny:1" | jq -r .Digest)
  "$IB" -q --smoke=off -f Dockerfile -t t:2 --from "docker://$REG/tiny@$d" . >/dev/null
  expect_fail 9 "registry $REG has no tiny@sha256:0{64}" \
    "$IB" --smoke=off -f Dockerfile -t t:3 --from "docker://$REG/tiny@sha256:$(printf '0%.0s' $(seq 64))" .
  # An index of two platforms: the one asked for, else the host's.
  printf 'FROM scratch\n# imgbuild:new /arm-only\nCOPY two /arm-only\n' >D.arm
  "$IB" -q --smoke=off -f D.arm -t arm:1 --platform linux/arm64 --output oci:multi:arm . >/dev/null
  skopeo copy -q --src-tls-verify=false "docker://$REG/tiny:1" oci:multi:amd
  jq -n --slurpfile i multi/index.json '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [$i[0].manifests[] | select(.annotations["org.opencontainers.image.ref.name"] != null)
                  | {mediaType, digest, size, platform: (if .annotations["org.opencontainers.image.ref.name"] == "arm"
                     then {os: "linux", architecture: "arm64"} else {os: "linux", architecture: "amd64"} end)}]}' >idx.json
  idx=$(sha256sum idx.json | cut -d' ' -f1)
  cp idx.json "multi/blobs/sha256/$idx"
  jq --arg d "sha256:$idx" --argjson s "$(stat -c %s idx.json)" '.manifests += [{mediaType:
     "application/vnd.oci.image.index.v1+json", digest: $d, size: $s,
     annotations: {"org.opencontainers.image.ref.name": "all"}}]' multi/index.json >i2 && mv i2 multi/index.json
  skopeo copy -q --all --dest-tls-verify=false oci:multi:all "docker://$REG/multi:1"
  arm_layer=$(skopeo inspect --raw oci:multi:arm | jq -r '.layers[0].digest')
  amd_layer=$(skopeo inspect --raw oci:multi:amd | jq -r '.layers[0].digest')
  printf 'FROM docker://%s/multi:1\n# imgbuild:new /two\nCOPY two /two\n' "$REG" >D.multi
  "$IB" -q --smoke=off -f D.multi -t m:arm --platform linux/arm64 . >/dev/null
  "$IB" -q --smoke=off -f D.multi -t m:host . >/dev/null
  [ "$(skopeo inspect --raw "oci:$IMGBUILD_STORE:m:arm" | jq -r '.layers[0].digest')" = "$arm_layer" ]
  [ "$(skopeo inspect --raw "oci:$IMGBUILD_STORE:m:host" | jq -r '.layers[0].digest')" = "$amd_layer" ]
  expect_fail 9 "no manifest for linux/riscv64" "$IB" --smoke=off -f D.multi -t m:x --platform linux/riscv64 .
  $D rmi -f "$REG/tiny:1" >/dev/null
}

t_registry_upload_resumes_where_the_registry_stopped() {
  build_base
  registry_start open
  push_base
  proxy_start
  # The third chunk of an upload is lost on its way: the client asks the
  # registry how far it got (GET, 204 + Range: 0-8191) and goes on from
  # there, in the same upload session.  One job: which PATCH is the third,
  # and what comes right after it, is then the order of one upload.
  printf 'PATCH /blobs/uploads/ cut 2+1\n' >faults
  IMGBUILD_REGISTRY_JOBS=1 IMGBUILD_REGISTRY_CHUNK_SIZE=4096 "$IB" -q --smoke=off --from "docker://$PROXY/dsv41-flash-b12x:local" \
    dsv41-flash-dcp2 --push "docker://$PROXY/dcp2:resume" >out.txt
  jq -c '[.method, .path, .query, .status, .fault]' proxy.jsonl | grep -n -A3 '"cut"'
  [ "$(proxied '[.[] | select(.fault == "cut")] | length')" = 1 ]
  # Right after the lost chunk: the status query, then the same session goes on.
  proxied 'map(select(.path | contains("/blobs/uploads/"))) | (map(.fault) | index("cut")) as $i
           | .[$i + 1].method == "GET" and .[$i + 1].status == 204 and .[$i + 1].upload_range == "0-8191"
             and .[$i + 2].method == "PATCH"
             and .[$i + 2].status == 202 and .[$i + 2].path == .[$i].path' | grep -qx true
  # No upload started over: one POST per uploaded blob (the overlay and
  # prebake layers, the config, the attestation artifact's empty config and
  # three statements).
  [ "$(proxied '[.[] | select(.method == "POST" and .query == "")] | length')" = 7 ]
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/dcp2:resume" | jq -r .Digest)" = "$(cut -d' ' -f2 out.txt)" ]
  skopeo copy -q --src-tls-verify=false "docker://$REG/dcp2:resume" oci:back:x
}

t_registry_pull_progress_in_a_terminal() {
  build_base
  registry_start open
  push_base
  in_terminal "$PWD/t.sock" screen.txt "env IMGBUILD_STORE=$PWD/fresh $IB --smoke=off --from docker://$REG/dsv41-flash-b12x:local dsv41-flash-dcp2"
  sed 's/\x1b\[[0-9;]*m//g' screen.txt >plain.txt
  cat plain.txt
  grep -q 'EXIT=0' plain.txt
  grep -Eq "imgbuild: pull docker://$REG/dsv41-flash-b12x:local \[[#.]+\] +100% [0-9.]+ [kMGT]?B / [0-9.]+ [kMGT]?B .*took [0-9]+s" plain.txt
}

t_registry_download_resumes_after_a_broken_transfer() {
  build_base
  registry_start open
  push_base
  proxy_start
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.layers[0].digest')
  size=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.layers[0].size')
  # The base layer's download breaks half-way: the retry asks for the rest
  # (Range), and the layer is not downloaded twice.
  echo "GET /blobs/$layer truncate 1" >faults
  IMGBUILD_STORE=$PWD/fresh "$IB" -q --smoke=off --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 \
    -t x:1 >/dev/null
  jq -c "select(.path | endswith(\"$layer\")) | [.status, .fault, .range, .down]" proxy.jsonl
  half=$(jq -s --arg l "$layer" 'map(select(.path | endswith($l)))[0] | select(.fault == "truncate") | .down' proxy.jsonl)
  # One test per line: under `set -e` only the last of an && list counts.
  [ -n "$half" ]
  [ "$half" -gt 0 ]
  [ "$half" -lt "$size" ]
  jq -se --arg l "$layer" --argjson h "$half" --argjson s "$size" 'map(select(.path | endswith($l)))
     | length == 2 and .[1].status == 206 and .[1].range == "bytes=\($h)-" and .[1].down == $s - $h' proxy.jsonl
  # The layer in the store is whole (its digest is its name, checked again).
  IMGBUILD_STORE=$PWD/fresh "$IV" x:1 >/dev/null
}

t_registry_corrupt_blob_is_refused() {
  build_base
  registry_start open
  push_base
  proxy_start
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.layers[0].digest')
  echo "GET /blobs/$layer corrupt 1" >faults
  # Refused as it is written, naming the damage (not later, as a blob
  # missing from where its digest says).
  IMGBUILD_STORE=$PWD/fresh expect_fail 4 "blob $layer: content has digest sha256:" \
    "$IB" --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1
  [ ! -e "fresh/blobs/sha256/${layer#sha256:}" ]
  refute grep -q '"x:1"' fresh/index.json
  # The next pull, undamaged, works.
  IMGBUILD_STORE=$PWD/fresh "$IB" -q --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t x:1 >/dev/null
}

t_registry_kill_mid_transfer_leaves_both_sides_whole() {
  build_base
  registry_start open
  push_base
  proxy_start
  # Killed while the base layer is being fetched into an empty store (its
  # blob writer open), and while the push uploads: the store and the
  # registry stay whole, no tag is written, and the next run finishes.
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-b12x:local" | jq -r '.layers[0].digest')
  printf 'GET /blobs/%s slow:60 1\n' "$layer" >faults
  (IMGBUILD_STORE=$PWD/fresh exec "$IB" -q --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t k:1 \
    >/dev/null 2>&1) &
  pid=$!
  # Killed once the proxy holds the layer's request (it logs a slow request
  # when it starts waiting), not after a guessed delay.
  for _ in $(seq 1 600); do
    jq -se --arg l "$layer" 'any(.path | endswith($l))' proxy.jsonl >/dev/null 2>&1 && break
    sleep 0.1
  done
  kill -0 $pid # still running: the kill lands mid-transfer
  kill -9 $pid
  wait $pid || true
  jq -se --arg l "$layer" 'any(.path | endswith($l))' proxy.jsonl
  [ ! -e "fresh/blobs/sha256/${layer#sha256:}" ]
  IMGBUILD_STORE=$PWD/fresh "$IV" --store >/dev/null
  refute grep -q '"k:1"' fresh/index.json
  printf 'PATCH /blobs/uploads/ slow:3 1\nPUT /blobs/uploads/ slow:3 1\n' >faults
  (IMGBUILD_STORE=$PWD/fresh IMGBUILD_REGISTRY_CHUNK_SIZE=4096 exec "$IB" -q \
    --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t k:1 --push "docker://$PROXY/dcp2:k" \
    >/dev/null 2>&1) &
  pid=$!
  for _ in $(seq 1 300); do grep -q '"PATCH"\|"PUT"' proxy.jsonl && break; sleep 0.1; done
  kill -9 $pid 2>/dev/null || true
  wait $pid || true
  refute skopeo inspect --tls-verify=false "docker://$REG/dcp2:k"
  all_tags_whole
  IMGBUILD_STORE=$PWD/fresh "$IV" --store >/dev/null
  rm -f faults
  IMGBUILD_STORE=$PWD/fresh "$IB" -q --from "docker://$PROXY/dsv41-flash-b12x:local" dsv41-flash-dcp2 -t k:1 \
    --push "docker://$PROXY/dcp2:k" >out.txt
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/dcp2:k" | jq -r .Digest)" = "$(cut -d' ' -f2 out.txt)" ]
}

# Issue 18: blobs moved in parallel (--transfer-jobs, IMGBUILD_REGISTRY_JOBS).
# par:8, 8 layers of 512 KiB of random bytes each (gzip keeps their size):
# a Dockerfile's COPYs make one layer, so each of D1..D8 adds one over the
# last.  Built the same in the stores s1 and s4 (a Dockerfile build is
# deterministic), so that each store pushes every blob itself: neither
# remembers a source to mount from.  D8 builds par:8 again to push it.
eight_layers() {
  local i s
  for i in 1 2 3 4 5 6 7 8; do
    head -c 524288 /dev/urandom >"l$i"
    { [ "$i" = 1 ] && echo 'FROM scratch' || echo "FROM par:$((i - 1))"
      echo "# imgbuild:new /l$i"
      echo "COPY l$i /l$i"; } >"D$i"
  done
  for s in s1 s4; do
    for i in 1 2 3 4 5 6 7 8; do
      IMGBUILD_STORE=$PWD/$s "$IB" -q --smoke=off -f "D$i" -t "par:$i" . >"$s.out"
    done
  done
  [ "$(cut -d' ' -f2 s1.out)" = "$(cut -d' ' -f2 s4.out)" ]
  [ "$(skopeo inspect --raw "oci:$PWD/s1:par:8" | jq '.layers | length')" = 8 ]
}

# The most requests the proxy had at once among those JQ-FILTER selects.
most_in_flight() { proxied "[.[] | select($1) | .inflight] | max"; }

# A base pulled from a registry is listed as it arrives (layers/view/pull_lists.h):
# the last layer's download is held by the proxy until the test lets it
# go, and meanwhile the lists of the layers before it appear in the store's
# cache, by diff_id.  Without the lister they would only come after the
# whole pull, and the wait below would run out.
t_registry_base_listed_while_it_downloads() {
  registry_start open
  proxy_start
  local i
  for i in 1 2 3; do
    head -c 300000 /dev/urandom >"p$i.bin"
    echo "print($i)" >"m$i.py"
    { [ "$i" = 1 ] && echo 'FROM scratch' || echo "FROM b:$((i - 1))"
      echo "# imgbuild:new /opt/p$i.bin"; echo "# imgbuild:new /opt/m$i.py"
      echo "COPY p$i.bin /opt/p$i.bin"
      echo "COPY m$i.py /opt/m$i.py"; } >"D$i"
    IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f "D$i" -t "b:$i" . >/dev/null
  done
  IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f D3 -t b:3 --push "docker://$PROXY/b3:1" . >/dev/null
  printf 'FROM b:3\n# imgbuild:new /top\nCOPY top /top\n' >Dover
  echo top >top
  skopeo inspect --config "oci:$PWD/s0:b:3" | jq -r '.rootfs.diff_ids[]' | sed 's/^sha256://' >diff_ids
  skopeo inspect --raw "oci:$PWD/s0:b:3" | jq -r '.layers[].digest' >layers
  [ "$(wc -l <diff_ids)" = 3 ]
  printf 'GET /blobs/%s$ wait:%s/go 1\n' "$(sed -n 3p layers)" "$PWD" >faults
  IMGBUILD_STORE=$PWD/fresh "$IB" --smoke=off --transfer-jobs 1 --from "docker://$PROXY/b3:1" -f Dover -t over:1 . \
    >over.out 2>over.err &
  local pid=$! listed=0
  for i in $(seq 1 1200); do
    if [ -e "fresh/imgbuild/files/$(sed -n 1p diff_ids)" ] && [ -e "fresh/imgbuild/files/$(sed -n 2p diff_ids)" ]; then
      listed=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Two layers listed while the third is still on its way: the build is
  # waiting for it, and its list is not there.
  local waiting=0
  kill -0 "$pid" 2>/dev/null && waiting=1
  [ -e "fresh/imgbuild/files/$(sed -n 3p diff_ids)" ] && waiting=0
  touch go
  wait "$pid"
  cat over.err
  echo "listed before the last layer came: $listed; build still waiting for it: $waiting"
  [ "$listed" = 1 ]
  [ "$waiting" = 1 ]
  grep -q "base docker://$PROXY/b3:1: 3 of 3 layers listed while the pull went on" over.err
  # The same image as one built over the base straight from the store.
  IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f Dover -t over:1 . >/dev/null
  [ "$(skopeo inspect --raw "oci:$PWD/fresh:over:1" | jq -c .layers)" = \
    "$(skopeo inspect --raw "oci:$PWD/s0:over:1" | jq -c .layers)" ]
}

# A pull that runs ahead of its listers waits for them (layers/view/pull_lists.h):
# with the bound at 1 MiB and one transfer at a time, the third layer is
# asked for only once the first, slow to list, is listed; a pull whose
# config has not come does not wait (nothing would list what it fetched).
t_registry_pull_waits_for_its_listers() {
  registry_start open
  proxy_start
  # Layer 2: 8 MB of noise (its blob is that size) and 300 MB of zeros to
  # inflate and hash (it lists in a second or more); 1, 3 and 4 are quick.
  # (Layer 1, small, is the one a build's judge waits for anyway,
  # pull_lists.h: the bound is seen on the layers after it.)
  head -c 1000 /dev/urandom >p0.bin
  head -c 8000000 /dev/urandom >p1.bin
  head -c 300000000 /dev/zero >z1.bin
  head -c 2000000 /dev/urandom >p2.bin
  head -c 2000000 /dev/urandom >p3.bin
  printf 'FROM scratch\n# imgbuild:new /opt/p0.bin\nCOPY p0.bin /opt/p0.bin\n' >D0
  printf 'FROM b:0\n# imgbuild:new /opt/p1.bin\n# imgbuild:new /opt/z1.bin\nCOPY p1.bin /opt/p1.bin\nCOPY z1.bin /opt/z1.bin\n' >D1
  printf 'FROM b:1\n# imgbuild:new /opt/p2.bin\nCOPY p2.bin /opt/p2.bin\n' >D2
  printf 'FROM b:2\n# imgbuild:new /opt/p3.bin\nCOPY p3.bin /opt/p3.bin\n' >D3
  local i
  for i in 0 1 2 3; do IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f "D$i" -t "b:$i" . >/dev/null; done
  IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f D3 -t b:3 --push "docker://$PROXY/w3:1" . >/dev/null
  skopeo inspect --config "oci:$PWD/s0:b:3" | jq -r '.rootfs.diff_ids[]' | sed 's/^sha256://' >diff_ids
  skopeo inspect --raw "oci:$PWD/s0:b:3" | jq -r '.layers[].digest' >layers
  printf 'FROM b:3\n# imgbuild:new /top\nCOPY top /top\n' >Dover
  echo top >top
  : >proxy.jsonl
  IMGBUILD_STORE=$PWD/fresh IMGBUILD_LIST_AHEAD_MIB=1 "$IB" --smoke=off --transfer-jobs 1 \
    --from "docker://$PROXY/w3:1" -f Dover -t over:1 . >over.out 2>over.err
  cat over.err
  grep -q "base docker://$PROXY/w3:1: 4 of 4 layers listed while the pull went on" over.err
  grep -Eq "base docker://$PROXY/w3:1: transfers waited for the listers [0-9]+ times?, [0-9.]+s in all \(more than 1 MiB fetched and not listed\)" over.err
  local asked listed
  asked=$(jq -r --arg d "$(sed -n 4p layers)" 'select(.method == "GET" and (.path | endswith($d))) | .t' proxy.jsonl | head -1)
  listed=$(stat -c %.9Y "fresh/imgbuild/files/$(sed -n 2p diff_ids)")
  echo "layer 2 listed at $listed, layer 4 asked for at $asked"
  python3 -c 'import sys; sys.exit(not float(sys.argv[1]) <= float(sys.argv[2]))' "$listed" "$asked"
  # The config held by the proxy, the layers fetched beside it: none waits.
  printf 'GET /blobs/%s$ wait:%s/go 1\n' "$(skopeo inspect --raw "oci:$PWD/s0:b:3" | jq -r .config.digest)" "$PWD" >faults
  : >proxy.jsonl
  IMGBUILD_STORE=$PWD/fresh2 IMGBUILD_LIST_AHEAD_MIB=1 "$IB" --smoke=off --transfer-jobs 2 \
    --from "docker://$PROXY/w3:1" -f Dover -t over:1 . >over2.out 2>over2.err &
  local pid=$! got=0
  for i in $(seq 1 600); do
    got=$(jq -r 'select(.method == "GET" and (.path | test("/blobs/")) and .status == 200) | .path' proxy.jsonl | sort -u | wc -l)
    [ "$got" -ge 4 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  touch go
  wait "$pid"
  cat over2.err
  echo "layers fetched while the config was held: $got"
  [ "$got" = 4 ]
  ! grep -q "transfers waited" over2.err
  # The same image either way, and as one built over the base in the store.
  IMGBUILD_STORE=$PWD/s0 "$IB" -q --smoke=off -f Dover -t over:1 . >/dev/null
  [ "$(skopeo inspect --raw "oci:$PWD/fresh:over:1" | jq -c .layers)" = \
    "$(skopeo inspect --raw "oci:$PWD/s0:over:1" | jq -c .layers)" ]
  [ "$(skopeo inspect --raw "oci:$PWD/fresh2:over:1" | jq -c .layers)" = \
    "$(skopeo inspect --raw "oci:$PWD/s0:over:1" | jq -c .layers)" ]
}

t_registry_parallel_push_same_image_as_serial() {
  registry_start open
  proxy_start
  eight_layers
  IMGBUILD_STORE=$PWD/s1 IMGBUILD_REGISTRY_JOBS=1 "$IB" --smoke=off -f D8 -t par:8 \
    --push "docker://$PROXY/par1:1" . >p1.out 2>p1.err
  IMGBUILD_STORE=$PWD/s4 "$IB" --smoke=off --transfer-jobs 4 -f D8 -t par:8 \
    --push "docker://$PROXY/par4:1" . >p4.out 2>p4.err
  cat p1.err p4.err
  digest=$(cut -d' ' -f2 s1.out)
  [ "$(cut -d' ' -f2 p1.out)" = "$digest" ]
  [ "$(cut -d' ' -f2 p4.out)" = "$digest" ]
  # Each push sent every blob itself: 9 (8 layers and the config) and the
  # attestation artifact's 4; the same counts in both notes.
  grep -q "pushed docker://$PROXY/par1:1: 13 blobs uploaded .*, 0 mounted, 0 already there" p1.err
  grep -q "pushed docker://$PROXY/par4:1: 13 blobs uploaded .*, 0 mounted, 0 already there" p4.err
  # The bytes each note says are the bytes the proxy saw go up (blobs and
  # manifests): the workers' counts were all added.
  for n in 1 4; do
    [ "$(sed -n 's/.*uploaded (\([0-9]*\) bytes).*/\1/p' "p$n.err")" = \
      "$(proxied "[.[] | select(.path | startswith(\"/v2/par$n/\")) | .up] | add")" ]
  done
  # A tool we did not write reads both back whole, with that digest.
  for repo in par1 par4; do
    [ "$(skopeo inspect --tls-verify=false "docker://$REG/$repo:1" | jq -r .Digest)" = "$digest" ]
    skopeo copy -q --src-tls-verify=false "docker://$REG/$repo:1" "oci:back-$repo:x"
    [ "sha256:$(skopeo inspect --raw "oci:back-$repo:x" | sha256sum | cut -d' ' -f1)" = "$digest" ]
  done
  # Pulled back with 4 jobs into a fresh store: the same blobs, each its
  # digest, and imgverify passes.
  IMGBUILD_STORE=$PWD/fresh "$IV" --transfer-jobs 4 --json "docker://$PROXY/par4:1" >v.json
  jq -e '.status == "pass"' v.json
  jq -e '.transfers[0] | test("^pulled docker://.*: 9 blobs fetched .*, 0 already in the store")' v.json
  for d in $(skopeo inspect --raw "oci:$PWD/s4:par:8" | jq -r '.config.digest, .layers[].digest'); do
    [ "sha256:$(sha256sum "fresh/blobs/sha256/${d#sha256:}" | cut -d' ' -f1)" = "$d" ]
  done
  all_tags_whole
}

t_registry_parallel_transfers_overlap() {
  registry_start open
  proxy_start
  eight_layers
  # Each blob request waits 0.3 s in the proxy: requests sent at once are
  # then seen at once, even on a loaded machine.
  printf 'HEAD /blobs/sha256: delay:0.3 1000\nGET /blobs/sha256: delay:0.3 1000\n' >faults
  IMGBUILD_STORE=$PWD/s1 "$IB" -q --smoke=off --transfer-jobs 1 -f D8 -t par:8 \
    --push "docker://$PROXY/par1:1" . >/dev/null
  one=$(most_in_flight 'true')
  mv proxy.jsonl push1.jsonl
  # The default is 4 jobs.
  IMGBUILD_STORE=$PWD/s4 "$IB" -q --smoke=off -f D8 -t par:8 --push "docker://$PROXY/par4:1" . >/dev/null
  four=$(most_in_flight '.path | contains("/blobs/")')
  manifest_first=$(proxied '[.[] | select(.method == "PUT" and (.path | contains("/manifests/")))][0].inflight')
  mv proxy.jsonl push4.jsonl
  IMGBUILD_STORE=$PWD/fresh IMGBUILD_REGISTRY_JOBS=4 "$IV" "docker://$PROXY/par4:1" >/dev/null 2>&1
  pull=$(most_in_flight '.method == "GET" and (.path | contains("/blobs/"))')
  echo "most requests at once: push with 1 job $one, with 4 jobs $four; pull with 4 jobs $pull"
  [ "$one" = 1 ]
  [ "$four" -ge 3 ]
  [ "$four" -le 4 ]
  [ "$pull" -ge 3 ]
  [ "$pull" -le 4 ]
  # Every blob request had its answer before the first manifest went up.
  [ "$manifest_first" = 1 ]
}

# One upload fails and the others would not: the workers take no new blob
# after it (a loop would have stopped there too).  Every PUT after the
# failing one waits 2 s in the proxy, so each worker's next look at the run
# comes after the failure; 3 finished + 4 in flight = 7 blobs at most of 9.
t_registry_parallel_failure_stops_the_other_workers() {
  registry_start open
  proxy_start
  eight_layers
  printf 'PUT /blobs/uploads/ status:500 3+1\nPUT /blobs/uploads/ delay:2 3+1000\n' >faults
  IMGBUILD_STORE=$PWD/s4 IMGBUILD_REGISTRY_ATTEMPTS=1 expect_fail 8 "upload blob sha256:[0-9a-f]{64}" \
    "$IB" --smoke=off --transfer-jobs 4 -f D8 -t par:8 --push "docker://$PROXY/par:1" .
  started=$(proxied '[.[] | select(.method == "HEAD" and (.path | contains("/blobs/"))) | .path] | unique | length')
  echo "blobs started: $started of 9"
  [ "$started" -le 7 ]
  [ "$(proxied '[.[] | select(.path | contains("/manifests/"))] | length')" = 0 ]
}

t_registry_parallel_failure_tags_nothing_and_resumes() {
  registry_start open
  proxy_start
  eight_layers
  # Three uploads finish, then every upload's last PUT fails.
  printf 'PUT /blobs/uploads/ status:500 3+100000\n' >faults
  IMGBUILD_STORE=$PWD/s4 IMGBUILD_REGISTRY_ATTEMPTS=2 expect_fail 8 \
    "upload blob sha256:[0-9a-f]{64} \(2 attempts\): registry $PROXY: finish upload: PUT /v2/par/blobs/uploads/.*HTTP 500" \
    "$IB" --smoke=off --transfer-jobs 4 -f D8 -t par:8 --push "docker://$PROXY/par:1" .
  grep error: stderr.txt | sed -E 's/sha256:[0-9a-f]{64}/BLOB/g; s|uploads/[^:]*:|uploads/ID:|' >err4.txt
  # No manifest went up, no tag is there; no blob was started after the
  # first failure: 3 successes, and the 4 blobs in flight at most.
  [ "$(proxied '[.[] | select(.path | contains("/manifests/"))] | length')" = 0 ]
  refute skopeo inspect --tls-verify=false "docker://$REG/par:1"
  started=$(proxied '[.[] | select(.method == "HEAD") | .path] | unique | length')
  echo "blobs started before giving up: $started of 9"
  [ "$started" -le 7 ]
  # The same failure with one job gives the same error, but for its blob.
  printf 'PUT /blobs/uploads/ status:500 3+99999\n' >faults
  IMGBUILD_STORE=$PWD/s1 IMGBUILD_REGISTRY_ATTEMPTS=2 expect_fail 8 "upload blob" \
    "$IB" --smoke=off --transfer-jobs 1 -f D8 -t par:8 --push "docker://$PROXY/par:1" .
  grep error: stderr.txt | sed -E 's/sha256:[0-9a-f]{64}/BLOB/g; s|uploads/[^:]*:|uploads/ID:|' >err1.txt
  cat err1.txt err4.txt
  diff err1.txt err4.txt
  # The rerun completes: what is there is not sent again.
  rm faults
  IMGBUILD_STORE=$PWD/s4 "$IB" --smoke=off --transfer-jobs 4 -f D8 -t par:8 \
    --push "docker://$PROXY/par:1" . >out.txt 2>err.txt
  grep pushed err.txt
  there=$(sed -n 's/.* \([0-9]*\) already there.*/\1/p' err.txt)
  [ "$there" -ge 6 ]
  grep -q ": $((13 - there)) blobs uploaded" err.txt
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/par:1" | jq -r .Digest)" = "$(cut -d' ' -f2 out.txt)" ]
  all_tags_whole
}

# Issue 18, the thin push, request by request: the workers' clients start
# on the caller's session (its scheme and token: no GET /v2/ of their
# own); the attestation's blobs, new with every build, go up with the
# image's, in parallel, not one by one after them; and the image manifest
# goes up once, under its tag (the registry has it by digest as well).
# Each blob HEAD waits 0.3 s in the proxy, so requests sent at once are
# seen at once.
t_registry_push_sends_no_request_it_does_not_need() {
  registry_start open
  proxy_start
  eight_layers
  printf 'HEAD /blobs/sha256: delay:0.3 1000\n' >faults
  IMGBUILD_STORE=$PWD/s4 "$IB" -q --smoke=off --transfer-jobs 4 -f D8 -t par:8 --push "docker://$PROXY/par4:1" . \
    >out.txt
  digest=$(cut -d' ' -f2 out.txt)
  [ "$(proxied '[.[] | select(.method == "GET" and .path == "/v2/")] | length')" = 1 ]
  # The workers did work: blob requests were in flight together.
  [ "$(most_in_flight '.path | contains("/blobs/")')" -ge 3 ]
  prov=$(jq -r --arg d "$digest" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' \
    s4/index.json)
  blobs=$(jq -c '[.config.digest, .layers[].digest]' "s4/blobs/sha256/${prov#sha256:}")
  [ "$(echo "$blobs" | jq length)" = 4 ]
  att=$(jq -s --argjson b "$blobs" \
    '[.[] | select(.method == "HEAD" and ((.path | split("/") | last) as $d | $b | index($d)) != null) | .inflight]' \
    proxy.jsonl)
  echo "the attestation's blob HEADs, requests in flight at each: $att"
  [ "$(echo "$att" | jq length)" = 4 ]
  [ "$(echo "$att" | jq max)" -ge 2 ]
  [ "$(proxied "[.[] | select(.method == \"PUT\" and (.path | endswith(\"/manifests/$digest\")))] | length")" = 0 ]
  [ "$(proxied '[.[] | select(.method == "PUT" and .path == "/v2/par4/manifests/1")] | length')" = 1 ]
  [ "sha256:$(skopeo inspect --raw --tls-verify=false "docker://$REG/par4@$digest" | sha256sum | cut -d' ' -f1)" = \
    "$digest" ]
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/par4:1" | jq -r .Digest)" = "$digest" ]
  all_tags_whole
}

# A rebuild whose inputs did not change keeps its attestation (times
# aside, it says what the last one said, and its blobs are in the
# registry): its push writes one thing, the new tag, as skopeo's copy of
# an image the registry has would.  The rebuild is a second later, so
# every time the record stamps differs.  A rebuild under another name
# records another invocation: a new record, pushed in place of the old.
t_registry_rebuild_of_the_same_inputs_writes_only_its_tag() {
  registry_start open
  proxy_start
  head -c 65536 /dev/urandom >f
  printf 'FROM scratch\n# imgbuild:new /f\nCOPY f /f\n' >Dockerfile
  "$IB" -q --smoke=off -f Dockerfile -t same:1 --push "docker://$PROXY/same:1" . >out1.txt
  digest=$(cut -d' ' -f2 out1.txt)
  records() {
    jq -r --arg d "$digest" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' \
      "$IMGBUILD_STORE/index.json"
  }
  listed() {
    curl -sf "http://$REG/v2/same/manifests/sha256-${digest#sha256:}" \
      -H 'Accept: application/vnd.oci.image.index.v1+json' | jq -c '[.manifests[].digest]'
  }
  prov=$(records)
  sleep 1.1
  : >proxy.jsonl
  "$IB" --smoke=off -f Dockerfile -t same:1 --push "docker://$PROXY/same:2" . >out2.txt 2>err.txt
  [ "$(cut -d' ' -f2 out2.txt)" = "$digest" ]
  [ "$(records)" = "$prov" ]
  grep "the record of an earlier build of the same inputs stands: attestation $prov" err.txt
  proxied '[.[] | select(.method != "GET" and .method != "HEAD") | .method + " " + .path]' >writes.json
  cat writes.json
  jq -e '. == ["PUT /v2/same/manifests/2"]' writes.json
  [ "$(listed)" = "[\"$prov\"]" ]
  IMGBUILD_STORE=$PWD/fresh "$IV" --json "docker://$REG/same:2" >v.json
  jq -e '.status == "pass" and (.gates[] | select(.name == "provenance") | .status == "pass")' v.json
  : >proxy.jsonl
  "$IB" -q --smoke=off -f Dockerfile -t other:1 --push "docker://$PROXY/same:3" . >/dev/null
  prov2=$(records)
  [ "$prov2" != "$prov" ]
  [ "$(proxied "[.[] | select(.method == \"PUT\" and (.path | endswith(\"/manifests/$prov2\")))] | length")" = 1 ]
  [ "$(listed)" = "[\"$prov2\"]" ]
}

# An attestation blob that cannot go up fails the push before any manifest
# (nothing tagged); the rerun sends what is missing and tags.  The image's
# 9 blobs are asked for first (one job: in order), then the attestation's:
# from the 10th upload on, the registry fails.
t_registry_attestation_blob_failure_tags_nothing() {
  registry_start open
  proxy_start
  eight_layers
  printf 'POST /blobs/uploads/ status:500 9+1000\n' >faults
  for jobs in 1 4; do
    : >proxy.jsonl
    IMGBUILD_STORE=$PWD/s4 IMGBUILD_REGISTRY_ATTEMPTS=2 expect_fail 8 "upload blob sha256:" \
      "$IB" --smoke=off --transfer-jobs "$jobs" -f D8 -t par:8 --push "docker://$PROXY/par:1" .
    [ "$(proxied '[.[] | select(.path | contains("/manifests/"))] | length')" = 0 ]
    refute skopeo inspect --tls-verify=false "docker://$REG/par:1"
    echo 'POST /blobs/uploads/ status:500 1000' >faults # the image's blobs are there now
  done
  digest=$(sed -n 's/.*tagged par:8 \(sha256:[0-9a-f]*\).*/\1/p' stderr.txt)
  prov=$(jq -r --arg d "$digest" '.manifests[] | select(.annotations["vnd.imgbuild.subject"] == $d) | .digest' \
    s4/index.json)
  # The blob that failed is one of the attestation's.
  failed=$(grep -o 'upload blob sha256:[0-9a-f]*' stderr.txt | head -1 | cut -d' ' -f3)
  jq -e --arg f "$failed" '[.config.digest, .layers[].digest] | index($f) != null' "s4/blobs/sha256/${prov#sha256:}"
  rm faults
  IMGBUILD_STORE=$PWD/s4 "$IB" --smoke=off --transfer-jobs 4 -f D8 -t par:8 --push "docker://$PROXY/par:1" . \
    >out2.txt 2>err.txt
  grep pushed err.txt
  [ "$(skopeo inspect --tls-verify=false "docker://$REG/par:1" | jq -r .Digest)" = "$(cut -d' ' -f2 out2.txt)" ]
  all_tags_whole
}

# A registry on loopback that speaks plain HTTP is found so by a bare TLS
# handshake with nothing verified: no client, the parallel transfers'
# included, loads the system's CA bundle (tens of milliseconds each time)
# to ask it.  A TLS registry is still verified: t_registry_tls_verified_by_default.
t_registry_plain_http_loopback_never_loads_the_ca_bundle() {
  build_base
  registry_start open
  push_base
  traced -f -qq -e trace=openat,open -o opens.txt "$IB" --transfer-jobs 4 \
    --from "docker://$REG/dsv41-flash-b12x:local" dsv41-flash-dcp2 --push "docker://$REG/dcp2:plain" >/dev/null 2>err.txt
  grep -q 'wrote docker://' err.txt
  refute grep -q 'ca-certificates\|/etc/ssl/' opens.txt
  skopeo inspect --tls-verify=false "docker://$REG/dcp2:plain" >/dev/null
}
