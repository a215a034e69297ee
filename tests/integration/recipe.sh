# Recipes against images (issue 23): imgverify --recipe with the seed's
# recipe, verbatim in tests/recipes/, against the stand-in images, whose
# vLLM declares the flags and reads the variables the seed uses.

SEED_RECIPE=$ROOT/tests/recipes/dsv41-flash-4x-dcp2.toml

dcp2_image() {
  build_base
  "$IB" -q "$ROOT/images/dsv41-flash-dcp2" --smoke=off >/dev/null
}

# line_of REGEX: the line of the seed recipe that matches (the first).
line_of() { grep -n -m1 -E -- "$1" "$SEED_RECIPE" | cut -d: -f1; }

t_recipe_seed_is_verbatim() {
  # The seed document is the path of the recipe, a blank line, the file.
  cmp <(tail -n +3 /work/shared/seeds/001_6358a0d9b344c002.txt 2>/dev/null || cat "$SEED_RECIPE") "$SEED_RECIPE"
  grep -q '^docker_image = "dsv41-flash-dcp2:local"$' "$SEED_RECIPE"
}

t_recipe_seed_fits_the_dcp2_image() {
  dcp2_image
  "$IV" --recipe "$SEED_RECIPE" --json >out.json 2>err.txt
  [ "$(jq -r .status out.json)" = pass ]
  [ "$(jq -r .ref out.json)" = dsv41-flash-dcp2:local ]
  [ "$(jq '.summary.fail' out.json)" = 0 ]
  # Every flag of args, every [env] variable, every mount has its line.
  [ "$(jq '[.checks[] | select(.check == "flag")] | length' out.json)" = 17 ]
  [ "$(jq '[.checks[] | select(.check == "env")] | length' out.json)" = 15 ]
  [ "$(jq '[.checks[] | select(.check == "mount")] | length' out.json)" = 5 ]
  # The DCP flag's value is checked against the overlay's declared choices.
  jq -e --argjson l "$(line_of '"--dcp-comm-backend", "a2a"')" \
    '.checks[] | select(.subject == "--dcp-comm-backend" and .line == $l and .status == "pass")
     | .message | test("a2a. is one of its choices \\(ag_rs, a2a; .*/v1/worker/cp_utils.py")' out.json
  jq -e '.checks[] | select(.subject == "--block-size") | .message | test("128. is one of its choices")' out.json
  # A variable read through a helper of engram.py (_env_int("…", 32)).
  jq -e '.checks[] | select(.subject == "DSV41_ENGRAM_DISK_THREADS" and .status == "pass")
         | .message | test("engram.py:")' out.json
  jq -e '.checks[] | select(.check == "arch" and .subject == "TORCH_CUDA_ARCH_LIST" and .status == "pass")' out.json
  # The reasoning parser's choices are computed: unchecked, said so.
  jq -e --argjson l "$(line_of '"--reasoning-parser"')" \
    '.checks[] | select(.subject == "--reasoning-parser" and .line == $l and .status == "unchecked")' out.json
  grep -q "^$SEED_RECIPE:$(line_of '"--reasoning-parser"'): flag --reasoning-parser: unchecked: " err.txt
  grep -q 'recipe: .* 1 unchecked' err.txt
}

# The seed with one change each: the flag renamed, the variable misspelt,
# a value outside the declared choices, an arch without SASS; each fails
# (exit 1) with the recipe line of the change.
t_recipe_mismatches_fail_with_their_line() {
  dcp2_image
  local case sed_expr subject status
  while IFS='|' read -r case sed_expr subject; do
    sed -E "$sed_expr" "$SEED_RECIPE" >"$case.toml"
    refute cmp -s "$case.toml" "$SEED_RECIPE"
    local line
    line=$(diff "$SEED_RECIPE" "$case.toml" | sed -n 's/^\([0-9]*\)c.*/\1/p' | head -1)
    expect_fail 1 "recipe $case.toml does not fit dsv41-flash-dcp2:local: 1 check failed" \
      "$IV" --recipe "$case.toml"
    grep -E "^$case.toml:$line: [a-z]+ $subject: fail: " stderr.txt
    [ "$(grep -c ': fail: ' stderr.txt)" = 1 ]
  done <<'CASES'
renamed|s/"--dcp-comm-backend"/"--dcp-comm-backnd"/|--dcp-comm-backnd
misspelt|s/^DSV41_ENGRAM_DISK_THREADS =/DSV41_ENGRAM_DISK_THREDS =/|DSV41_ENGRAM_DISK_THREDS
choices|s/"--moe-backend", "b12x"/"--moe-backend", "b12y"/|--moe-backend
arch|s/^TORCH_CUDA_ARCH_LIST = "12.1a"/TORCH_CUDA_ARCH_LIST = "9.0a"/|TORCH_CUDA_ARCH_LIST
CASES
  # What the failures say.
  sed -E 's/"--moe-backend", "b12x"/"--moe-backend", "b12y"/' "$SEED_RECIPE" >c.toml
  refute "$IV" --recipe c.toml 2>err.txt
  grep -q 'flag --moe-backend: fail: `b12y` is not one of its choices: auto, triton, flashinfer_cutlass, b12x (.*/vllm/engine/arg_utils.py:[0-9]*)' err.txt
  sed -E 's/^TORCH_CUDA_ARCH_LIST = "12.1a"/TORCH_CUDA_ARCH_LIST = "9.0a"/' "$SEED_RECIPE" >a.toml
  refute "$IV" --recipe a.toml 2>err.txt
  grep -q 'arch TORCH_CUDA_ARCH_LIST: fail: 9.0a (compute 9.0): .*trtllm_dcp_alltoall in /usr/local/lib/python3.12/dist-packages/flashinfer/libflashinfer_dcp.so (no code for it)' err.txt
  sed -E 's/^DSV41_ENGRAM_DISK_THREADS =/DSV41_ENGRAM_DISK_THREDS =/' "$SEED_RECIPE" >m.toml
  refute "$IV" --recipe m.toml 2>err.txt
  # The shared objects were searched too (C getenv) before it failed.
  grep -Eq 'env DSV41_ENGRAM_DISK_THREDS: fail: nothing in the image reads it \(.*, [1-9][0-9]* shared objects scanned\): a typo or a dead knob' err.txt
}

# The base has no DCP2: the seed's DCP flag and the DSV41_DCP_* variables
# fail there, each naming the dsv41-flash-dcp2 overlay as what adds it.
t_recipe_against_the_base_names_the_overlay() {
  build_base
  { cat "$SEED_RECIPE"; printf '\n'; } | python3 -c '
import sys
s = sys.stdin.read()
s = s.replace("[env]\n", "[env]\nDSV41_DCP_STAGE = \"3\"\nDSV41_DCP_COMBINE = \"a2a\"\n", 1)
sys.stdout.write(s)' >r.toml
  expect_fail 1 'recipe r.toml does not fit dsv41-flash-b12x:local' "$IV" --recipe r.toml dsv41-flash-b12x:local
  local l
  l=$(grep -n -m1 '"--dcp-comm-backend"' r.toml | cut -d: -f1)
  grep -q "^r.toml:$l: flag --dcp-comm-backend: fail: .vllm serve. of the image does not accept it .*; the dsv41-flash-dcp2 overlay adds it, at line [0-9]* of /usr/local/lib/python3.12/dist-packages/vllm/v1/worker/cp_utils.py (manifest.txt:[0-9]*)" stderr.txt
  for v in DSV41_DCP_STAGE DSV41_DCP_COMBINE; do
    l=$(grep -n -m1 "^$v =" r.toml | cut -d: -f1)
    grep -q "^r.toml:$l: env $v: fail: nothing in the image reads it .*; the dsv41-flash-dcp2 overlay adds it, at line [0-9]* of .*/v1/worker/cp_utils.py" stderr.txt
  done
  # The flags the base does have still pass there.
  grep -q 'flag --moe-backend: pass' stderr.txt
}

# A JIT-cache mount over the folder the image prebakes into hides the
# prebaked kernels; a mount under a file of the image cannot work.
t_recipe_mounts_over_prebaked_kernels_fail() {
  dcp2_image
  { cat "$SEED_RECIPE"; printf '\n\n[[extra_mounts]]\nhost = "~/cache/dcp2"\ncontainer = "/usr/local/lib/python3.12/dist-packages/vllm/prebaked"\n\n[[extra_mounts]]\nhost = "/tmp/x"\ncontainer = "/bin/busybox/x"\n'; } >m.toml
  expect_fail 1 '2 checks failed' "$IV" --recipe m.toml
  local n
  n=$(wc -l <m.toml)
  grep -Eq "^m.toml:$((n - 4)): mount /usr/local/lib/python3.12/dist-packages/vllm/prebaked: fail: hides [0-9]+ files the image prebakes there, 1 with GPU code" stderr.txt
  grep -q "^m.toml:$n: mount /bin/busybox/x: fail: its parent /bin/busybox is not a folder in the image" stderr.txt
  grep -q 'mount /root/.cache/flashinfer: pass: not in the image (the runtime creates it' stderr.txt
}

# Malformed recipes: one error line naming the file and line.
t_recipe_malformed_names_the_line() {
  printf 'docker_image = "x:1"\nshm_size = "32 gigs"\n' >bad-size.toml
  expect_fail 3 'bad-size.toml:2: shm_size: `32 gigs` is not a size' "$IV" --recipe bad-size.toml
  printf 'docker_image = "x:1"\n\ntensor_parallel_size = "4"\n' >bad-type.toml
  expect_fail 3 'bad-type.toml:3: tensor_parallel_size: expected an integer, found string' "$IV" --recipe bad-type.toml
  printf 'args = [\n  "--a",\n  "b"\n\n[env]\n' >bad-toml.toml
  expect_fail 3 'bad-toml.toml:[45]:[0-9]+: ' "$IV" --recipe bad-toml.toml
  # TOML 1.0 that a line-based reading gets wrong: a key twice is an error.
  printf 'docker_image = "a:1"\ndocker_image = "b:1"\n' >dup.toml
  expect_fail 3 'dup.toml:2:[0-9]+: ' "$IV" --recipe dup.toml
  printf 'shm_size = "1g"\n' >noimage.toml
  expect_fail 2 'names no docker_image' "$IV" --recipe noimage.toml
}

# d/dsv41-flash-dcp2 naming a recipe ([recipe] file = …, relative to the
# definition's folder).
recipe_definition() { # RECIPE-FILE
  copy_images d
  cp "$1" d/dsv41-flash-dcp2/recipe.toml
  printf '\n[recipe]\n# The launcher recipe that runs this image.\nfile = recipe.toml\n' >>d/dsv41-flash-dcp2/image.conf
}

# imgbuild checks the recipes that use the image before it tags it: a
# misspelt variable stops the build (exit 1, the recipe line named, no
# tag); the seed's recipe passes, and its shape is the smoke test's.
t_recipe_gate_checks_before_the_tag() {
  build_base
  sed -E 's/^DSV41_ENGRAM_DISK_THREADS =/DSV41_ENGRAM_DISK_THREDS =/' "$SEED_RECIPE" >bad.toml
  recipe_definition bad.toml
  local l
  l=$(grep -n -m1 '^DSV41_ENGRAM_DISK_THREDS' bad.toml | cut -d: -f1)
  expect_fail 1 "gate recipe: .*/recipe.toml:$l: env DSV41_ENGRAM_DISK_THREDS: nothing in the image reads it" \
    "$IB" d/dsv41-flash-dcp2 --smoke=off
  grep -Eq 'gate recipe +fail' stderr.txt
  refute "$IV" dsv41-flash-dcp2:local 2>/dev/null
  # The seed: the gate passes (its unchecked value is a warning), tagged.
  recipe_definition "$SEED_RECIPE"
  "$IB" d/dsv41-flash-dcp2 --json >report.json 2>err.txt
  validate report.json
  [ "$(jq -r '.gates[] | select(.name == "recipe") | .status' report.json)" = pass ]
  jq -e '.problems[] | select(.gate == "recipe" and .severity == "warning") | .message
         | test("recipe.toml:86: flag --reasoning-parser: unchecked: ")' report.json
  # The smoke test's shape is the recipe's (no GPU here: it says so, skips).
  jq -e '.smoke_shape | .ranks_served == 4 and .dcp == 2 and .shm_bytes == 34359738368' report.json
  "$IB" d/dsv41-flash-dcp2 -t again:1 2>err.txt >/dev/null
  grep -q 'recipe: .*/recipe.toml: 41 passed, 0 failed, 1 unchecked' err.txt
  grep -Eq 'gate recipe +pass' err.txt
  grep -q 'smoke: shape of .*/recipe.toml: TP 4 x PP 1 = 4 ranks over 4 nodes, DCP 2, shm 32gb; this machine has no GPU' err.txt
  # Without [recipe] the gate says why it checked nothing.
  "$IB" "$ROOT/images/dsv41-flash-dcp2" --smoke=off -t plain:1 2>err2.txt >/dev/null
  grep -Eq 'gate recipe +skip .*no \[recipe\] in .*image.conf' err2.txt
}

# A recipe with no check that can run (issue 45): the gate checked
# nothing, so it says skip with its reason, never pass.
t_recipe_with_nothing_to_check_is_a_skip() {
  build_base
  printf '# a recipe that says nothing about the image\n' >empty.toml
  recipe_definition empty.toml
  "$IB" d/dsv41-flash-dcp2 --smoke=off --json >r.json
  validate r.json
  jq -e '.gates[] | select(.name == "recipe") | .status == "skip" and (.reason | test("no check of the \\[recipe\\] files"))' r.json
  "$IB" d/dsv41-flash-dcp2 --smoke=off -t again:1 2>err.txt >/dev/null
  grep -Eq 'gate recipe +skip' err.txt
}
