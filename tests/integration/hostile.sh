# Hostile content (issue 13, issue 45): a corpus of base images whose
# layers escape or abuse the root (tests/hostile/make_corpus.py: `..`,
# absolute names, links leaving the root or to a file the layer lacks, devices, FIFOs, setuid/setgid,
# duplicates, whiteouts of `..` and the root, names over PATH_MAX, a lying
# PAX record, entries under a link of the layer).  The escaping kinds:
# imgverify names each (exit 4, layer, entry and class), imgbuild refuses each as a
# base unless --allow-unsafe-base.  The privileged kinds (setuid/setgid
# files, devices, FIFOs: what every distribution base holds) are counted and
# reported by both, refused only with --strict-base.  Extracting any of them
# for a container writes nothing outside its folder.

make_corpus() {
  mkdir -p outside
  /usr/bin/python3 "$ROOT/tests/hostile/make_corpus.py" corpus "$PWD/outside" >kinds.tsv
  [ "$(wc -l <kinds.tsv)" -ge 22 ]
  [ "$(grep -c $'\tprivileged$' kinds.tsv)" = 5 ]
  # A definition that builds over any of them.
  mkdir -p def
  echo hello >def/hello.txt
  printf '[image]\nname = over:1\nfrom = scratch\n[copy]\nfile hello.txt /hello.txt\n[new]\n/hello.txt\n' >def/image.conf
}

t_hostile_corpus_named_by_imgverify_and_refused_by_imgbuild() {
  make_corpus
  "$IV" oci:corpus/clean:base
  "$IB" -q --smoke=off --from oci:corpus/clean:base def -t clean:1 >/dev/null
  while IFS=$'\t' read -r kind shown why class; do
    [ "$class" = escape ] || continue
    log "kind $kind"
    expect_fail 4 "layer sha256:[0-9a-f]{64}: entry \`" "$IV" oci:corpus/$kind:base
    # The entry, named with its class (a line per problem of the entry).
    grep 'error:' stderr.txt | grep -F "entry \`$shown" | grep -qF "\`: $why"
    expect_fail 4 "base \`oci:corpus/$kind:base\` has [0-9]+ unsafe entr.*escapes the root or lies" \
      "$IB" --smoke=off --from "oci:corpus/$kind:base" def -t "$kind:1"
    grep -qF "entry \`$shown" stderr.txt
    refute grep -qF "\"$kind:1\"" "$IMGBUILD_STORE/index.json"
    # --strict-base refuses no less.
    expect_fail 4 "unsafe entr" "$IB" --smoke=off --strict-base --from "oci:corpus/$kind:base" def -t "$kind:1"
  done <kinds.tsv
  # Told to, imgbuild builds over such a base (a tool that writes duplicate
  # entries); each entry is a warning.
  "$IB" --json --smoke=off --allow-unsafe-base --from oci:corpus/duplicate:base def -t dup:1 >r.json 2>err.txt
  jq -e '.status == "pass" and ([.problems[] | select(.severity == "warning" and (.message | test("^layer sha256:.*entry `etc/motd`: the same path twice")))] | length == 1)' r.json
  grep -q 'warning: layer sha256:.*etc/motd' err.txt
  # The cached file lists keep what was found: a second build is refused too.
  expect_fail 4 "etc/motd" "$IB" --smoke=off --from oci:corpus/duplicate:base def -t again:1
}

# The privileged kinds: a base with setuid/setgid files, devices or FIFOs
# builds with no flag, the report counting them (a note, and every entry in
# the JSON); imgverify passes it and counts them too; --strict-base refuses
# them in both.
t_privileged_base_entries_counted_not_refused() {
  make_corpus
  declare -A key=([setuid]=setuid_files [setgid]=setuid_files [chardev]=device_nodes [blockdev]=device_nodes
    [fifo]=fifos)
  while IFS=$'\t' read -r kind shown _ class; do
    [ "$class" = privileged ] || continue
    log "kind $kind"
    "$IB" --json --smoke=off --from "oci:corpus/$kind:base" def -t "$kind:1" >r.json
    validate r.json
    jq -e --arg k "${key[$kind]}" --arg e "$shown" '.status == "pass" and .exit_code == 0
      and .base.privileged_entries[$k] == 1
      and ([.base.privileged_entries | .setuid_files, .device_nodes, .fifos, .sockets] | add) == 1
      and (.base.privileged_entries.entries | length == 1 and (.[0] | contains("entry `" + $e + "`")))
      and ([.problems[] | select(.gate == "base")] | length == 0)' r.json
    "$IB" --smoke=off --from "oci:corpus/$kind:base" def -t "$kind:1" 2>err.txt
    grep -F "base: " err.txt | grep -qF "$shown"
    refute grep -q 'warning:\|error:' err.txt
    "$IV" --json "oci:corpus/$kind:base" >v.json
    validate v.json
    jq -e --arg k "${key[$kind]}" '.integrity.privileged_entries[$k] == 1' v.json
    "$IV" "oci:corpus/$kind:base" 2>err.txt
    grep -F "image: " err.txt | grep -qF "$shown"
    "$IV" "$kind:1" >/dev/null
    # Refused when asked: both tools, exit 4, the entry named.
    expect_fail 4 "has 1 unsafe entry \(the first: layer sha256:[0-9a-f]{64}: entry \`.*--strict-base" \
      "$IB" --smoke=off --strict-base --from "oci:corpus/$kind:base" def -t "strict-$kind:1"
    grep -qF "entry \`$shown" stderr.txt
    expect_fail 4 "layer sha256:[0-9a-f]{64}: entry \`" "$IV" --strict-base "oci:corpus/$kind:base"
    grep 'error:' stderr.txt | grep -qF "entry \`$shown"
  done <kinds.tsv
}

# A base of no layer (`from = scratch`, or an image that has none) has no
# entry to check: the base-entries check says it skipped, with the reason,
# never a silent pass; the report has no digest and no entry count, and
# --strict-base has nothing to refuse.  A base with a layer is checked.
t_base_of_no_layer_skips_the_entry_check_saying_so() {
  make_corpus
  "$IB" --smoke=off --strict-base def -t s:1 >/dev/null 2>err.txt
  grep -qx 'imgbuild: base entries: skip: `scratch` has no layer, nothing to check' err.txt
  "$IB" --json --smoke=off --strict-base def -t s:1 >r.json
  validate r.json
  jq -e '.status == "pass" and .base == {"name": "scratch", "layers": 0}
         and ([.problems[] | select(.gate == "base")] | length == 0)' r.json
  # An image of no layer named by --from: the same skip, named by it.
  umoci init --layout empty
  umoci new --image empty:base
  "$IB" --smoke=off --strict-base --from oci:empty:base def -t e:1 >/dev/null 2>err.txt
  grep -qx 'imgbuild: base entries: skip: `oci:empty:base` has no layer, nothing to check' err.txt
  # A base with a layer: checked, no skip.
  "$IB" --smoke=off --strict-base --from oci:corpus/clean:base def -t c:1 >/dev/null 2>err.txt
  grep -q 'tagged c:1' err.txt
  refute grep -q 'base entries: skip' err.txt
}

# Issue 46: a base's entries are judged as its first layer is read.  One
# refused there (a setuid file with --strict-base; an escaping entry with
# no flag) stops the build before any layer above it is read: the store
# never gains the upper layer's file list.  With no flag the setuid file is
# counted, and both layers are read.
two_layer_base() { # NAME TAR1: a base of TAR1 under a layer of 24 MB
  mkdir -p big/opt
  head -c 24M /dev/urandom >big/opt/blob
  tar --numeric-owner --owner=0 --group=0 -C big -cf big.tar opt
  umoci init --layout "$1"
  umoci new --image "$1:base"
  umoci raw add-layer --image "$1:base" --tag base "$2"
  umoci raw add-layer --image "$1:base" --tag base big.tar
}
listed() { [ -e "$IMGBUILD_STORE/imgbuild/files/${1#sha256:}" ]; } # DIFF_ID: its file list is in the store

t_base_refused_at_its_first_layer_before_the_layers_above_are_read() {
  make_corpus
  mkdir -p sys/usr/bin
  echo x >sys/usr/bin/su
  chmod 4755 sys/usr/bin/su
  tar --numeric-owner --owner=0 --group=0 -C sys -cf sys.tar usr
  two_layer_base two sys.tar
  ids=$(skopeo inspect --config oci:two:base | jq -r '.rootfs.diff_ids[]')
  d1=$(echo "$ids" | sed -n 1p)
  d2=$(echo "$ids" | sed -n 2p)
  expect_fail 4 'has 1 unsafe entry \(the first: layer sha256:[0-9a-f]{64}: entry `usr/bin/su`: .*--strict-base refuses privileged entries \(in layer 1 of 2: the pull stopped there\)' \
    "$IB" --smoke=off --strict-base --from oci:two:base def -t strict:1
  listed "$d1"
  refute listed "$d2"
  # Not even copied: the pull stopped at the first layer.
  l2=$(skopeo inspect --raw oci:two:base | jq -r '.layers[1].digest')
  [ ! -e "$IMGBUILD_STORE/blobs/sha256/${l2#sha256:}" ]
  # A base in the store already, whose layers no build has listed (copied
  # there by skopeo): judged as the build's view stacks its layers, the same.
  skopeo copy -q oci:two:base "oci:$PWD/held:two:1"
  IMGBUILD_STORE=$PWD/held expect_fail 4 'has 1 unsafe entry .*--strict-base refuses privileged entries \(in layer 1 of 2: the layers above it were not read\)' \
    "$IB" --smoke=off --strict-base --from two:1 def -t strict:2
  IMGBUILD_STORE=$PWD/held refute listed "$d2"
  # With no flag: counted, both layers read, tagged.
  "$IB" --json --smoke=off --from oci:two:base def -t plain:1 >r.json
  jq -e '.status == "pass" and .base.privileged_entries.setuid_files == 1' r.json
  listed "$d2"
  # An entry that escapes the root, in the first layer: refused with no flag, as early.
  /usr/bin/python3 -c '
import io, tarfile
with tarfile.open("esc.tar", "w", format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo("../escaped"); i.size = 2; t.addfile(i, io.BytesIO(b"x\n"))'
  rm -rf big
  two_layer_base esc esc.tar
  e2=$(skopeo inspect --config oci:esc:base | jq -r '.rootfs.diff_ids[1]')
  expect_fail 4 'has 1 unsafe entry .*escapes the root or lies about itself \(in layer 1 of 2: the pull stopped there\)' \
    "$IB" --smoke=off --from oci:esc:base def -t esc:1
  refute listed "$e2"
}

# A new layer gains no setuid/setgid bit from its sources: the writer gives
# a file 0644 or 0755 (tarlayer.c), whatever the source's mode, and only a
# `mode=` of the definition says otherwise; `tree` items alike.
t_new_layer_gains_no_privileged_entry_unless_the_definition_says_so() {
  mkdir -p nl/t/sub
  echo a >nl/su
  echo b >nl/t/sub/sg
  chmod 4755 nl/su
  chmod 2755 nl/t/sub/sg
  [ -u nl/su ]
  [ -g nl/t/sub/sg ]
  printf '[image]\nname = nl:1\nfrom = scratch\n[copy]\nfile su /su\ntree t /t\n[new]\n/su\n/t/\n' >nl/image.conf
  "$IB" -q --smoke=off nl -t nl:1 >/dev/null
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:nl:1" | jq -r '.layers[-1].digest' | cut -d: -f2)
  tar -tvf "$IMGBUILD_STORE/blobs/sha256/$layer" >entries.txt
  grep -q ' su$' entries.txt
  grep -q ' t/sub/sg$' entries.txt
  refute grep -E '^-..[sS]|^-.....[sS]' entries.txt
  grep -qE '^-rwxr-xr-x .* su$' entries.txt
  # Stated by the definition: the entry has it, and the build says so.
  sed -i 's|^file su /su$|&\nfile su /su2 mode=4755|; s|^/su$|/su\n/su2|' nl/image.conf
  "$IB" -q --smoke=off nl -t nl:2 >/dev/null
  layer=$(skopeo inspect --raw "oci:$IMGBUILD_STORE:nl:2" | jq -r '.layers[-1].digest' | cut -d: -f2)
  tar -tvf "$IMGBUILD_STORE/blobs/sha256/$layer" >entries2.txt
  grep -qE '^-rwsr-xr-x .* su2$' entries2.txt
  refute grep -E '^-..[sS].* (su|t/sub/sg)$' entries2.txt
}

# imgverify --allow-unsafe-base: the escaping entries of the base's layers
# are warnings (a base from a tool that writes duplicate entries), those of
# the image's own layers stay errors.
t_imgverify_allow_unsafe_base_warns_for_the_base_only() {
  make_corpus
  # A base alone: every layer is the base's.
  expect_fail 4 'etc/motd' "$IV" oci:corpus/duplicate:base
  "$IV" --allow-unsafe-base oci:corpus/duplicate:base 2>err.txt >/dev/null
  grep -q 'warning: layer sha256:.*entry `etc/motd`: the same path twice' err.txt
  refute grep -q 'error:' err.txt
  # An image built over it: its provenance names the overlay's first layer.
  "$IB" -q --smoke=off --allow-unsafe-base --from oci:corpus/duplicate:base def -t over:1 >/dev/null
  expect_fail 4 'etc/motd' "$IV" over:1
  "$IV" --allow-unsafe-base over:1 2>err.txt >/dev/null
  grep -q 'warning: layer sha256:.*entry `etc/motd`: the same path twice' err.txt
  # An escaping entry of the image's own layer is an error still: a
  # symbolic link of the overlay that leaves the root.
  mkdir -p def2
  echo hello >def2/hello.txt
  printf '[image]\nname = over:2\nfrom = scratch\n[copy]\nfile hello.txt /hello.txt\nsymlink /out ../../../etc/shadow\n[new]\n/hello.txt\n/out\n' >def2/image.conf
  "$IB" -q --smoke=off --allow-unsafe-base --from oci:corpus/duplicate:base def2 -t over:2 >/dev/null
  expect_fail 4 'entry `out`: symbolic link that leaves the root' "$IV" --allow-unsafe-base over:2
  grep -q 'warning: layer sha256:.*entry `etc/motd`' stderr.txt
}

# Every layer extracted for a container (imgverify --run, the smoke test's
# runner), then a look for stray files outside the store's layer folders.
t_hostile_extraction_writes_nothing_outside_its_folder() {
  make_corpus
  while IFS=$'\t' read -r kind _; do
    "$IV" --run "oci:corpus/$kind:base" -- /bin/true >/dev/null 2>&1 || true
  done <kinds.tsv
  [ -d "$IMGBUILD_STORE/imgbuild/rootfs" ]
  ls -A outside >outside.txt
  stray=$(find /tmp /etc /root /var/tmp "$PWD" -xdev -name 'ibstray*' 2>/dev/null |
    grep -v "^$IMGBUILD_STORE/imgbuild/rootfs/[0-9a-f]\{64\}/" | grep -v "^$PWD/corpus/" || true)
  echo "outside: $(cat outside.txt); stray: $stray"
  [ ! -s outside.txt ]
  [ -z "$stray" ]
  # No device node, FIFO or socket was made in a layer folder (whiteouts
  # are the only character devices, 0/0).
  [ -z "$(find "$IMGBUILD_STORE/imgbuild/rootfs" \( -type b -o -type p -o -type s \) -print)" ]
  [ -z "$(find "$IMGBUILD_STORE/imgbuild/rootfs" -type c ! -name '.wh.*' -exec stat -c '%t,%T %n' {} + | grep -v '^0,0 ')" ]
}

# A layer whose tar ends right after its last file's data, without that
# file's padding or the end-of-archive blocks: what `umoci insert` wrote
# before umoci 0.4.8 (umoci issue 436; Debian 12 has 0.4.7), in bases built
# with it or with stacker.  GNU tar calls it truncated; Docker and
# containerd read it whole, and so must imgbuild and imgverify, the last
# file's digest that of its content.  Cut one byte earlier, inside a later
# file's data, or inside a header, it is truncated and refused.
footerless_base() { # LAYOUT BYTES: a base of one layer, full.tar cut to BYTES
  rm -rf "$1"
  umoci init --layout "$1" && umoci new --image "$1:base"
  head -c "$2" full.tar >cut.tar
  umoci raw add-layer --image "$1:base" --tag base cut.tar
}

t_layer_without_tar_footer_is_read_whole_and_a_cut_one_refused() {
  mkdir -p rootfs/opt
  head -c 700 /dev/urandom | base64 -w0 | head -c 700 >rootfs/opt/last.txt
  tar --numeric-owner --owner=0 --group=0 -b1 -C rootfs -cf full.tar opt
  [ "$(stat -c %s full.tar)" = 3072 ] # opt/, last.txt's header, 2 blocks of data, 2 end blocks
  footerless_base lay 1724             # 2 headers and the 700 bytes of data, nothing after
  refute tar -tf cut.tar
  "$IV" oci:lay:base >/dev/null
  umoci init --layout empty && umoci new --image empty:base
  "$IV" --diff --json oci:empty:base oci:lay:base >diff.json
  jq -e --arg d "sha256:$(sha256sum <rootfs/opt/last.txt | cut -d' ' -f1)" \
    '.files | length == 1 and .[0].path == "/opt/last.txt" and .[0].b.sha256 == $d and .[0].b.size == 700' diff.json
  mkdir -p def && echo hello >def/hello.txt
  printf '[image]\nname = over:1\nfrom = scratch\n[copy]\nfile hello.txt /hello.txt\n[new]\n/hello.txt\n' >def/image.conf
  "$IB" -q --smoke=off --from oci:lay:base def -t over:1 >/dev/null
  "$IV" over:1 >/dev/null
  for cut in 1723 1100 800; do
    log "cut at $cut"
    footerless_base "lay$cut" "$cut"
    expect_fail 4 "layer sha256:[0-9a-f]{64}: Truncated" "$IV" "oci:lay$cut:base"
  done
}

# Issue 45, on a real base: Debian bookworm with python3-torch
# (scripts/real-base.sh, debootstrap then umoci) builds with no flag, and
# both tools count its setuid files as find(1) counts them in the rootfs;
# --strict-base refuses it.  Its layout has dev/ emptied, so the devices
# debootstrap made (/dev/null, /dev/zero, ...) go into a second base, a
# layer GNU tar writes from that rootfs/dev: counted as mknod made them.
tall_real_base_builds_with_no_flag_and_counts_its_entries() {
  eval "$("$ROOT/scripts/real-base.sh")" # rootfs, oci, ref
  local setid devs
  setid=$(find "$rootfs" -xdev ! -type d -perm /6000 | wc -l)
  devs=$(find "$rootfs/dev" -xdev \( -type c -o -type b \) | wc -l)
  [ "$setid" -gt 5 ]
  [ "$devs" -gt 3 ]
  mkdir -p plain
  echo hi >plain/note.txt
  printf '[image]\nname = plain:1\nfrom = %s\n[copy]\nfile note.txt /etc/imgbuild-note\n[new]\n/etc/imgbuild-note\n' \
    "$ref" >plain/image.conf
  "$IB" --json --smoke=off plain >r.json
  validate r.json
  jq -e --argjson n "$setid" '.status == "pass" and .base.privileged_entries.setuid_files == $n
    and .base.privileged_entries.device_nodes == 0 and ([.problems[] | select(.gate == "base")] | length == 0)
    and (.base.privileged_entries.entries | any(test("entry `usr/bin/passwd`: setuid or setgid file$")))' r.json
  "$IV" --json plain:1 >v.json
  jq -e --argjson n "$setid" '.status == "pass" and .integrity.privileged_entries.setuid_files == $n' v.json
  expect_fail 4 "base \`$ref\` has $setid unsafe entries .*--strict-base refuses privileged entries" \
    "$IB" --smoke=off --strict-base plain -t strict:1
  # Its devices, as debootstrap made them, in a layer of their own.
  tar --numeric-owner -C "$rootfs" -cf dev.tar dev
  umoci init --layout devbase && umoci new --image devbase:base
  umoci raw add-layer --image devbase:base --tag base dev.tar
  sed -i "s|^from = .*|from = oci:$PWD/devbase:base|" plain/image.conf
  "$IB" --json --smoke=off plain -t plain:2 >d.json
  jq -e --argjson n "$devs" '.status == "pass" and .base.privileged_entries.device_nodes == $n
    and (.base.privileged_entries.entries | any(test("entry `dev/null`: device node$")))' d.json
  "$IV" --json plain:2 >dv.json
  jq -e --argjson n "$devs" '.integrity.privileged_entries.device_nodes == $n' dv.json
  figure "bookworm + python3-torch builds with no flag: $setid setuid/setgid files and $devs device nodes counted as find(1) counts them; --strict-base refuses (exit 4)"
}

# A base whose manifest lies about a layer's size, the layer's bytes being
# ones the store holds already (another image brought them): the copy that
# is skipped still compares the size, so imgbuild refuses the base instead
# of tagging an image whose descriptor imgverify then fails.
t_base_that_lies_about_a_held_layers_size_is_refused() {
  make_corpus
  cp -r corpus/clean liar
  python3 - <<'PY'
import hashlib, json
idx = json.load(open("liar/index.json"))
md = idx["manifests"][0]["digest"]
m = json.load(open("liar/blobs/sha256/" + md[7:]))
m["layers"][0]["size"] += 1
b = json.dumps(m).encode()
d = hashlib.sha256(b).hexdigest()
open("liar/blobs/sha256/" + d, "wb").write(b)
idx["manifests"][0]["digest"], idx["manifests"][0]["size"] = "sha256:" + d, len(b)
json.dump(idx, open("liar/index.json", "w"))
PY
  "$IB" -q --smoke=off --from oci:corpus/clean:base def -t clean:1 >/dev/null
  expect_fail 4 'blob sha256:[0-9a-f]{64}: size is [0-9]+, descriptor says [0-9]+' \
    "$IB" --smoke=off --from oci:liar:base def -t liar:1
  refute grep -qF '"liar:1"' "$IMGBUILD_STORE/index.json"
}
