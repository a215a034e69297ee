# fleet (issue 15): [target] — the JIT toolchains in the image, the driver
# floor, PTX the driver can JIT, the JIT budget.  On real files: CUDA 11.8
# from Debian's non-free archive (amd64 and arm64, scripts/cuda118.sh) and
# the build machine's CUDA 13.0.

CUDA13=/usr/local/cuda
NVCC_REAL=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

cuda118() { "$ROOT/scripts/cuda118.sh"; }

# An image from scratch: NAME, then [copy] lines, then more sections
# (ENV/TARGET text), each as printf arguments already formatted.
fleet_image() { # DIR NAME COPY-LINES EXTRA-SECTIONS
  mkdir -p "$1"
  printf '[image]\nname = %s\nfrom = scratch\ngzip-level = 1\n[copy]\n%s\n[new]\n/\n%s\n' "$2" "$3" "$4" >"$1/image.conf"
}

t_triton_ptxas_from_real_toolchains() {
  local c
  c=$(cuda118)
  local old=$c/amd64/usr/bin/ptxas
  local copies="file $old /usr/bin/ptxas mode=0755
file $CUDA13/bin/ptxas /usr/local/cuda-13.0/bin/ptxas mode=0755
file $c/amd64/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89 /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89"
  # TRITON_PTXAS_PATH names CUDA 11.8's ptxas: it cannot target sm_121a.
  fleet_image old t-old:1 "$copies" $'[env]\nTRITON_PTXAS_PATH = /usr/bin/ptxas\n[target]\ngpu = 12.1'
  expect_fail 6 'gate toolchains: TRITON_PTXAS_PATH=/usr/bin/ptxas is ptxas of CUDA 11.8 \(/usr/bin/ptxas\), which cannot target sm_121a \(needs CUDA 12.9 or later\): point TRITON_PTXAS_PATH at a newer ptxas; the image has /usr/local/cuda-13.0/bin/ptxas \(CUDA 13.0\)' \
    "$IB" old
  refute skopeo inspect "oci:$IMGBUILD_STORE:t-old:1" >/dev/null 2>&1
  # Pointed at CUDA 13.0's: it passes; the old one stays a warning.
  fleet_image new t-new:1 "$copies" $'[env]\nTRITON_PTXAS_PATH = /usr/local/cuda-13.0/bin/ptxas\n[target]\ngpu = 12.1'
  "$IB" new --json >new.json 2>new.err
  jq -e '.status == "pass" and (.gates[] | select(.name == "toolchains") | .status == "pass")' new.json
  jq -e '[.toolchains[] | "\(.kind) \(.path) \(.cuda)"] | sort == ["TRITON_PTXAS_PATH /usr/local/cuda-13.0/bin/ptxas 13.0", "libnvrtc /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89 11.8", "ptxas /usr/bin/ptxas 11.8", "ptxas /usr/local/cuda-13.0/bin/ptxas 13.0"]' new.json
  grep -q 'warning: /usr/bin/ptxas: ptxas of CUDA 11.8 cannot target sm_121a' new.err
  grep -q 'warning: /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89: libnvrtc of CUDA 11.8 cannot target sm_121a' new.err
  # For a GPU that CUDA 11.8 knows (9.0 needs 12.0 for sm_90a; 8.0 is 11.0), the old one is fine.
  fleet_image a100 t-a100:1 "$copies" $'[env]\nTRITON_PTXAS_PATH = /usr/bin/ptxas\n[target]\ngpu = 8.0'
  "$IB" -q a100 >/dev/null
  # Without the variable, Triton uses its own bundled ptxas.
  local triton=/usr/local/lib/python3.12/dist-packages/triton/backends/nvidia/bin/ptxas
  fleet_image bundled t-b:1 "file $old $triton mode=0755
file $CUDA13/bin/ptxas /usr/local/cuda/bin/ptxas mode=0755" $'[target]\ngpu = 12.1'
  expect_fail 6 "Triton will use its own $triton, ptxas of CUDA 11.8, which cannot target sm_121a \\(needs CUDA 12.9 or later\\): set TRITON_PTXAS_PATH to a newer ptxas; the image has /usr/local/cuda/bin/ptxas \\(CUDA 13.0\\)" \
    "$IB" bundled
  # A variable that names nothing in the image.
  fleet_image missing t-m:1 "file $CUDA13/bin/ptxas /usr/local/cuda/bin/ptxas mode=0755" \
    $'[env]\nTRITON_PTXAS_PATH = /opt/ptxas\nCUDA_HOME = /usr/local/cuda-12.9\nTRITON_CUOBJDUMP_PATH = /usr/local/cuda/bin/cuobjdump\n[target]\ngpu = 12.1'
  expect_fail 6 'TRITON_PTXAS_PATH=/opt/ptxas: no such file in the image .*the image has /usr/local/cuda/bin/ptxas \(CUDA 13.0\) \(and 2 more' "$IB" missing
  grep -q 'TRITON_CUOBJDUMP_PATH=/usr/local/cuda/bin/cuobjdump: no such file in the image' stderr.txt
  grep -q 'CUDA_HOME=/usr/local/cuda-12.9: no such folder in the image' stderr.txt
}

t_toolchain_versions_of_arm64_files() {
  local c
  c=$(cuda118)
  file "$c/arm64/usr/bin/ptxas" | grep -q 'ARM aarch64'
  local copies="file $c/arm64/usr/bin/ptxas /usr/bin/ptxas mode=0755
file $c/arm64/usr/lib/aarch64-linux-gnu/libnvrtc.so.11.8.89 /usr/lib/aarch64-linux-gnu/libnvrtc.so.11.8.89
file $c/arm64/usr/lib/aarch64-linux-gnu/libcudart.so.11.8.89 /usr/lib/aarch64-linux-gnu/libcudart.so.11.8.89"
  # An aarch64 image on this x86-64 machine: versions read, nothing run.
  fleet_image arm t-arm:1 "$copies" $'[env]\nTRITON_PTXAS_PATH = /usr/bin/ptxas\n[target]\ngpu = 12.1\nplatform = linux/arm64'
  sed -i 's|^from = scratch$|from = scratch\nplatform = linux/arm64|' arm/image.conf
  expect_fail 6 'TRITON_PTXAS_PATH=/usr/bin/ptxas is ptxas of CUDA 11.8' "$IB" arm
  grep -q 'warning: /usr/lib/aarch64-linux-gnu/libnvrtc.so.11.8.89: libnvrtc of CUDA 11.8 cannot target sm_121a' stderr.txt
  # The platform is checked too.
  fleet_image arm2 t-arm2:1 "$copies" $'[target]\ngpu = 8.0\nplatform = linux/amd64'
  sed -i 's|^from = scratch$|from = scratch\nplatform = linux/arm64|' arm2/image.conf
  expect_fail 6 'the image is linux/arm64, the target.s platform is linux/amd64' "$IB" arm2
  sed -i 's|^platform = linux/amd64$|platform = linux/arm64|' arm2/image.conf
  "$IB" -q arm2 >/dev/null
}

t_driver_floor() {
  local c
  c=$(cuda118)
  local rt="file $CUDA13/lib64/libcudart.so.13 /usr/local/cuda-13.0/lib64/libcudart.so.13"
  # CUDA 13.0's runtime: fine on 580, not on 570 (CUDA 12.8).
  fleet_image r580 t-r580:1 "$rt" $'[target]\ndriver = 580.95.05'
  "$IB" -q r580 >/dev/null
  fleet_image r570 t-r570:1 "$rt" $'[target]\ndriver = 570.124.06'
  expect_fail 6 'gate driver: /usr/local/cuda-13.0/lib64/libcudart.so.13: the CUDA runtime of CUDA 13.0 needs driver 580 or later \(580.65.06 for CUDA 13.0 itself\); the target.s driver 570.124.06 supports CUDA 12.8' \
    "$IB" r570
  # Debian's 11.8 runtime and NVRTC, version from the files: fine on 580.
  fleet_image deb t-deb:1 "file $c/amd64/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89 /usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89
file $c/amd64/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89 /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89" $'[target]\ndriver = 580.95.05'
  "$IB" -q deb >/dev/null
  # ... and on a 515 driver (CUDA 11.7) only under minor-version compatibility: a warning.
  sed -i 's/^driver = .*/driver = 515.105.01/' deb/image.conf
  "$IB" deb -t t-deb:2 2>deb.err >/dev/null
  grep -q 'warning: /usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89: the CUDA runtime of CUDA 11.8 on driver 515.105.01 (CUDA 11.7): runs only under minor-version compatibility' deb.err
  grep -q 'warning: /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89: NVRTC of CUDA 11.8 on driver 515.105.01' deb.err
  # The config's declarations.
  echo x >x
  fleet_image req t-req:1 "file $PWD/x /opt/x" $'[env]\nNVIDIA_REQUIRE_CUDA = cuda>=13.0 brand=tesla,driver>=535,driver<536\nCUDA_VERSION = 13.0.1\n[target]\ndriver = 570.124.06'
  expect_fail 6 'NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535,driver<536: asks for CUDA 13.0, the target.s driver 570.124.06 supports CUDA 12.8: the NVIDIA container toolkit refuses to start it' \
    "$IB" req
  grep -q 'CUDA_VERSION=13.0.1: the image.s CUDA of CUDA 13.0 needs driver 580' stderr.txt
}

# What the NVIDIA container runtime does with the image before the
# program starts (libnvidia-container, which `docker run --gpus` calls):
# it binds the driver's libcuda.so.VERSION into LIBS (the multiarch folder
# of an image with /etc/debian_version, /usr/lib64 otherwise), adds a
# libcuda.so link unless one exists, and runs ldconfig with LIBS named
# first.  Done here to a copy of the image's files with glibc's ldconfig,
# the oracle: then ROOT's cache says which libcuda.so.1 the loader takes.
#   runtime_ldconfig ROOT LIBS DRIVER-VERSION
runtime_ldconfig() {
  local root=$1 libs=$2 v=$3
  mkdir -p "$root$libs" "$root/etc"
  [ -e "$root/etc/ld.so.conf" ] || : >"$root/etc/ld.so.conf"
  echo 'int cuInit (int f) { return f; }' >driver.c
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 driver.c -o "$root$libs/libcuda.so.$v"
  [ -e "$root$libs/libcuda.so" ] || [ -L "$root$libs/libcuda.so" ] || ln -s libcuda.so.1 "$root$libs/libcuda.so"
  ldconfig -r "$root" -f /etc/ld.so.conf -C /etc/ld.so.cache "$libs" 2>&1 | tee -a ldconfig.log
}
# The file the loader opens for libcuda.so.1 in ROOT after the runtime: the
# first entry of the cache, its links followed inside ROOT (relative links).
loaded_libcuda() {
  local root=$1 p
  p=$(ldconfig -p -C "$root/etc/ld.so.cache" | awk '$1 == "libcuda.so.1" { print $NF; exit }')
  while [ -L "$root$p" ]; do
    local t
    t=$(readlink "$root$p")
    case $t in /*) p=$t ;; *) p=$(dirname "$p")/$t ;; esac
  done
  realpath -m --relative-to=/ "/$p" | sed 's|^|/|'
}

# The image's libcuda against the runtime's, each verdict beside what glibc's
# ldconfig makes of the same files once the runtime has bound the driver's.
t_shipped_libcuda() {
  local m=/usr/lib/x86_64-linux-gnu
  echo 'int cuInit (int f) { return f; }' >img.c
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 img.c -o libcuda.image
  echo 13.1 >debian_version
  # 1. Debian's libcuda1: libcuda.so.1 a link to the file elsewhere.  The
  #    runtime's ldconfig points the link at the driver's, older or newer
  #    than the image's 550: it passes, with no warning.
  mkdir -p root-deb$m/nvidia/current root-deb/etc
  cp debian_version root-deb/etc/
  cp libcuda.image root-deb$m/nvidia/current/libcuda.so.550.163.01
  ln -s libcuda.so.550.163.01 root-deb$m/nvidia/current/libcuda.so.1
  ln -s nvidia/current/libcuda.so.1 root-deb$m/libcuda.so.1
  ln -s libcuda.so.1 root-deb$m/libcuda.so
  fleet_image deb t-deb:1 "tree $PWD/root-deb /" $'[target]\ngpu = 12.1\ndriver = 580.95.05'
  "$IB" deb --json >deb.json 2>deb.err
  jq -e '.gates[] | select(.name == "driver") | .status == "pass"' deb.json
  refute grep -q libcuda deb.err
  for v in 580.95.05 545.23.08; do
    rm -rf r && cp -a root-deb r && runtime_ldconfig r $m $v
    [ "$(loaded_libcuda r)" = "$m/libcuda.so.$v" ]
  done
  # 2. libcuda.so.1 a file, not a link, in the runtime's folder: ldconfig
  #    leaves it, and the loader takes the image's.
  mkdir -p root-file$m root-file/etc && cp debian_version root-file/etc/ && cp libcuda.image root-file$m/libcuda.so.1
  fleet_image file t-file:1 "tree $PWD/root-file /" $'[target]\ngpu = 12.1'
  expect_fail 6 "$m/libcuda.so.1: a libcuda in the image, a file and not a link, where the NVIDIA runtime binds the driver.s: its ldconfig leaves" "$IB" file
  refute skopeo inspect "oci:$IMGBUILD_STORE:t-file:1" >/dev/null 2>&1
  rm -rf r && cp -a root-file r && runtime_ldconfig r $m 580.95.05
  grep -q "$m/libcuda.so.1 is not a symbolic link" ldconfig.log
  [ "$(loaded_libcuda r)" = "$m/libcuda.so.1" ]
  [ ! -L r$m/libcuda.so.1 ]
  #    Declared: the image means it.
  printf 'libcuda = %s/libcuda.so.1\n' $m >>file/image.conf
  "$IB" -q file >/dev/null
  # 3. A libcuda newer than the target's driver: ldconfig links libcuda.so.1
  #    to the newest, the image's; a driver newer than it takes its own,
  #    and the image's is a warning that names the floor.
  mkdir -p root-new$m root-new/etc && cp debian_version root-new/etc/ && cp libcuda.image root-new$m/libcuda.so.590.10.01
  ln -s libcuda.so.590.10.01 root-new$m/libcuda.so.1
  fleet_image new t-new:1 "tree $PWD/root-new /" $'[target]\ngpu = 12.1\ndriver = 580.95.05'
  expect_fail 6 "$m/libcuda.so.590.10.01: a libcuda newer than the target.s driver 580.95.05, where the NVIDIA runtime binds the driver.s: its ldconfig points libcuda.so.1 at the newest, this one" "$IB" new
  rm -rf r && cp -a root-new r && runtime_ldconfig r $m 580.95.05
  [ "$(loaded_libcuda r)" = "$m/libcuda.so.590.10.01" ]
  sed -i 's/^driver = .*/driver = 595.11.02/' new/image.conf
  "$IB" new 2>new.err >/dev/null
  grep -q "warning: $m/libcuda.so.590.10.01: a libcuda where the NVIDIA runtime binds the driver.s: on the target.s driver 595.11.02 its ldconfig points libcuda.so.1 at the driver.s; on a driver older than 590.10.01, at this one" new.err
  rm -rf r && cp -a root-new r && runtime_ldconfig r $m 595.11.02
  [ "$(loaded_libcuda r)" = "$m/libcuda.so.595.11.02" ]
  # 4. libcuda.so leading elsewhere than libcuda.so.1: a warning (CUDA
  #    loads libcuda.so.1, the driver's).
  mkdir -p root-dev$m/other root-dev/etc && cp debian_version root-dev/etc/ && cp libcuda.image root-dev$m/other/libcuda.so.1
  ln -s other/libcuda.so.1 root-dev$m/libcuda.so
  fleet_image dev t-dev:1 "tree $PWD/root-dev /" $'[target]\ngpu = 12.1'
  "$IB" dev 2>dev.err >/dev/null
  grep -q "warning: $m/libcuda.so: leads to the image.s own libcuda, not to $m/libcuda.so.1 that the NVIDIA runtime points at the driver.s" dev.err
  # 5. No /etc/debian_version: the runtime's folder is /usr/lib64, and a
  #    libcuda.so.1 file in the multiarch folder is behind it.
  mkdir -p root-rpm$m && cp libcuda.image root-rpm$m/libcuda.so.1
  mkdir -p root-rpm/etc && printf '%s\n' $m >root-rpm/etc/ld.so.conf
  fleet_image rpm t-rpm:1 "tree $PWD/root-rpm /" $'[target]\ngpu = 12.1'
  "$IB" -q rpm >/dev/null
  rm -rf r && cp -a root-rpm r && runtime_ldconfig r /usr/lib64 580.95.05
  [ "$(loaded_libcuda r)" = "/usr/lib64/libcuda.so.580.95.05" ]
  # 6. A compat libcuda outside the loader's path is fine, until
  #    LD_LIBRARY_PATH names its folder: the loader searches it before the cache.
  fleet_image compat t-compat:1 "file libcuda.image /usr/local/cuda/compat/libcuda.so.1" $'[target]\ngpu = 12.1'
  cp libcuda.image compat/
  "$IB" -q compat >/dev/null
  printf '[env]\nLD_LIBRARY_PATH = /usr/local/cuda/compat/:/usr/lib\n' >>compat/image.conf
  expect_fail 6 '/usr/local/cuda/compat/libcuda.so.1: a libcuda in the image where the loader finds it before the driver.s .*its folder is on LD_LIBRARY_PATH' "$IB" compat
}

# /etc/ld.so.conf.d puts /opt/x in the image's own cache, ahead of nothing
# the runtime injects: the runtime's ldconfig names its folder first, so
# the driver's libcuda.so.1 leads the cache (glibc's ldconfig, the oracle).
t_libcuda_through_ld_so_conf_d() {
  mkdir -p root/opt/x root/etc/ld.so.conf.d
  echo 'int cuInit (int f) { return f; }' >cuda.c
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 cuda.c -o root/opt/x/libcuda.so.1
  echo 'include /etc/ld.so.conf.d/*.conf' >root/etc/ld.so.conf
  echo '/opt/y  # not this one' >root/etc/ld.so.conf.d/a.conf
  echo '/opt/x/' >root/etc/ld.so.conf.d/x.conf
  echo 13.1 >root/etc/debian_version
  ldconfig -r root -X
  ldconfig -p -C root/etc/ld.so.cache | grep -q 'libcuda.so.1 (libc6,x86-64) => /opt/x/libcuda.so.1'
  fleet_image conf t-conf:1 "tree $PWD/root /" $'[target]\ngpu = 12.1'
  "$IB" conf --json >conf.json 2>conf.err
  jq -e '.gates[] | select(.name == "driver") | .status == "pass"' conf.json
  refute grep -q libcuda conf.err
  cp -a root r && runtime_ldconfig r /usr/lib/x86_64-linux-gnu 580.95.05
  ldconfig -p -C r/etc/ld.so.cache | grep -q 'libcuda.so.1 (libc6,x86-64) => /opt/x/libcuda.so.1'
  [ "$(loaded_libcuda r)" = /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05 ]
  # The same folder on LD_LIBRARY_PATH comes before the cache: it fails,
  # and imgverify against that definition names it as the build did.
  cp -r conf llp
  printf '[env]\nLD_LIBRARY_PATH = /opt/x\n' >>llp/image.conf
  expect_fail 6 'gate driver: /opt/x/libcuda.so.1: a libcuda in the image where the loader finds it before the driver.s .*LD_LIBRARY_PATH' \
    "$IB" llp
  sed -i 's|^\[target\]$|&\nlibcuda = /opt/x/libcuda.so.1|' llp/image.conf
  "$IB" -q -t t-llp:1 llp >/dev/null
  sed -i '/^libcuda = /d' llp/image.conf
  expect_fail 6 '/opt/x/libcuda.so.1: a libcuda in the image where the loader finds it' "$IV" t-llp:1 --definition llp
}

t_ptx_version_against_the_driver() {
  printf 'extern "C" __global__ void k_ptx(float *x) { x[threadIdx.x] *= 2.0f; }\n' >k.cu
  # SASS for 12.1 (the kernel gate passes) and PTX .version 9.0 (CUDA 13).
  mkdir -p p
  "$NVCC_REAL" -fatbin -gencode arch=compute_121a,code=sm_121a -gencode arch=compute_120,code=compute_120 k.cu -o p/k.fatbin
  "$IV" --kernels --json p/k.fatbin | jq -e '[.files[].entries[] | select(.kind == "ptx") | .ptx_version] == ["9.0"]'
  fleet_image p t-p:1 "file k.fatbin /opt/k/k.fatbin" $'[kernels]\nrequire /opt/k/* k_ptx\n[target]\ndriver = 570.124.06'
  expect_fail 6 'gate ptx: image.conf:[0-9]+: kernel k_ptx: compute_120 PTX in /opt/k/k.fatbin has .version 9.0; the target.s driver 570.124.06 JITs PTX up to 8.7' "$IB" p
  sed -i 's/^driver = .*/driver = 580.95.05/' p/image.conf
  "$IB" -q p >/dev/null
  # Not a required kernel: a warning of the JIT budget, no failure.
  sed -i '/^\[kernels\]$/d; /^require /d; s/^driver = .*/driver = 570.124.06/' p/image.conf
  "$IB" p -t t-p:2 2>p.err >/dev/null
  grep -q 'warning: /opt/k/k.fatbin: 1 PTX entry of .version 9.0, newer than the driver.s JIT takes (8.7)' p.err
  "$IV" --jit-budget --driver 570.124.06 --json p/k.fatbin | jq -e '.driver_ptx == "8.7" and .files[0].ptx_too_new == 1'
}

t_jit_budget_before_and_after_prebake() {
  build_base
  # The base ships dcp_lse_combine as compute_120 PTX only: a GB10 JITs it.
  "$IV" --jit-budget --json dsv41-flash-b12x:local >before.json
  jq -e '[.files[] | select(.path | endswith("libflashinfer_dcp.so"))][0] | .jit == 1 and .jit_kernels == ["dcp_lse_combine"] and .jit_ptx_bytes > 0' before.json
  "$IV" --jit-budget dsv41-flash-b12x:local >before.txt
  grep -q 'jit: dcp_lse_combine' before.txt
  # What the first use costs: every file's PTX to JIT, over ptxas's
  # measured rate (kernels/jitbudget.h), in the JSON and the last line.
  jq -e '.jit_ptx_bytes == ([.files[].jit_ptx_bytes] | add) and .jit_ptx_bytes > 0
    and .jit_rate_bytes_per_core_second == 420000
    and ((.jit_core_seconds_estimate - .jit_ptx_bytes / 420000) | fabs) < 0.000001' before.json
  tail -1 before.txt | grep -Eq "^1 kernels JIT-compiled at first use \($(jq .jit_ptx_bytes before.json) bytes of PTX: about 0 core-seconds of ptxas at 0.42 MB/s\)"
  # After prebake, its SASS is in the image: nothing JITs, in the build's
  # gate (which walks the files one record at a time, twice: what runs
  # anywhere, then each file's row) as in imgverify's listing.
  # (the budget kept by an earlier build of the fixture's store dropped)
  rm -rf "$IMGBUILD_STORE/imgbuild/jitbudget"
  "$IB" dsv41-flash-dcp2 >/dev/null 2>build.err
  grep -q 'jit-budget: [0-9]* files, 0 kernels would JIT at first use, [0-9]* have no code for the target$' build.err
  # Built again over the same GPU files: the budget kept by the first build,
  # word for word, and no record walked.
  "$IB" dsv41-flash-dcp2 -t again:1 >/dev/null 2>again.err
  grep -q 'jit-budget: [0-9]* files, 0 kernels would JIT at first use, [0-9]* have no code for the target (kept from a build with the same GPU files and target)' again.err
  diff <(grep 'jit-budget: warning' build.err) <(grep 'jit-budget: warning' again.err)
  [ "$(grep -c 'jit-budget: warning' build.err)" -gt 0 ]
  "$IV" --jit-budget --json dsv41-flash-dcp2:local >after.json
  jq -e '[.files[].jit] | add == 0' after.json
  jq -e '[.files[] | select(.path | endswith("libflashinfer_dcp.so"))][0].covered_elsewhere == 1' after.json
  # Entry counts are those of the kernel inspector, relocatable ones apart.
  "$IV" --kernels --json dsv41-flash-dcp2:local '*libnccl.so*' >k.json
  [ "$(jq '[.files[].entries[] | select(.relocatable | not) | select(.kind == "sass")] | length' k.json)" = \
    "$(jq '[.files[] | select(.path | endswith("libnccl.so.2"))][0].sass_entries' after.json)" ]
  # The gates ran in the build, and imgverify reruns them from the provenance.
  "$IV" --json dsv41-flash-dcp2:local >v.json
  # (The stand-in has no CUDA toolchain and nothing that asks of the
  # driver: those two skip, issue 45.)
  jq -e '[.gates[] | select(.name == ("toolchains", "driver", "ptx", "jit-budget")) | .status] == ["skip", "skip", "pass", "pass"]' v.json
}

# Issue 18: the toolchains' CUDA versions made in the file-list pass
# (kernels/cudaver.c's indexer).  A cold build (a store that never saw the
# base) finds every version cached and reads no layer for them; with the
# indexers off (IMGBUILD_NO_INDEXERS=1) the gate reads the files from the
# base's layer itself, as a store made before the indexer does.  Both
# decide the same, and every record the gate made is byte for byte the
# indexer's.  The files: real ones (a 54 MB NVRTC whose version string is
# 42 MB in, read in 1 MiB steps), cuobjdump, and nvcc as Debian ships it,
# a shell script with no version string (a record of 0), reached also
# through a link (libnvrtc.so.11.2, the driver gate's glob).
t_toolchain_versions_made_in_the_list_pass() {
  local c lib
  c=$(cuda118)
  lib=/usr/lib/x86_64-linux-gnu
  fleet_image base t-base:1 "file $c/amd64/usr/bin/ptxas /usr/bin/ptxas mode=0755
file $c/amd64/usr/bin/cuobjdump /usr/bin/cuobjdump mode=0755
file $c/amd64/usr/bin/nvcc /usr/bin/nvcc mode=0755
file $c/amd64$lib/libnvrtc.so.11.8.89 $lib/libnvrtc.so.11.8.89
symlink $lib/libnvrtc.so.11.2 libnvrtc.so.11.8.89" ''
  "$IB" -q base --output "oci:$PWD/layout:base" >/dev/null
  echo x >x
  mkdir over
  cp x over/
  printf '[image]\nname = t-over:1\nfrom = oci:%s/layout:base\n[copy]\nfile x /opt/x\n[new]\n/opt/x\n' "$PWD" >over/image.conf
  printf '[env]\nTRITON_PTXAS_PATH = /usr/bin/ptxas\n[target]\ngpu = 8.0\ndriver = 515.105.01\n' >>over/image.conf
  for mode in one own; do
    off=
    [ "$mode" = own ] && off=1
    (export IMGBUILD_NO_INDEXERS=$off IMGBUILD_STORE="$PWD/s-$mode"
     "$IB" --smoke=off --report "json:$mode.json" over >"$mode.out" 2>"$mode.err")
    jq -e '[.gates[] | select(.name == ("toolchains", "driver")) | .status] == ["pass", "pass"]' "$mode.json"
    jq -c '.toolchains' "$mode.json" >"$mode.tools"
    grep -E '^imgbuild: (toolchains|driver): ' "$mode.err" | grep -v 'CUDA versions of' >"$mode.problems" || true
  done
  cmp one.out own.out # the same manifest digest
  cmp one.tools own.tools
  cmp one.problems own.problems
  # Not vacuous: every kind read, the script has no version, the driver gate warned.
  jq -e '. == [{"kind":"cuobjdump","path":"/usr/bin/cuobjdump","cuda":"11.8"},{"kind":"nvcc","path":"/usr/bin/nvcc","cuda":null,"note":"no version string"},{"kind":"ptxas","path":"/usr/bin/ptxas","cuda":"11.8"},{"kind":"libnvrtc","path":"/usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89","cuda":"11.8"},{"kind":"TRITON_PTXAS_PATH","path":"/usr/bin/ptxas","cuda":"11.8"}]' one.tools
  grep -q 'warning: /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.8.89: NVRTC of CUDA 11.8 on driver 515.105.01' one.problems
  # The cold build read no layer for the versions; without the indexer the gate did.
  grep -q '^imgbuild: toolchains: CUDA versions of 4 files: 0 read in 0 layer passes, 4 cached$' one.err
  grep -q '^imgbuild: toolchains: CUDA versions of 4 files: 4 read in 1 layer passes, 0 cached$' own.err
  # Every record the gate made is the indexer's, byte for byte, and no other.
  diff -r s-own/imgbuild/cudaver s-one/imgbuild/cudaver
  [ "$(ls s-one/imgbuild/cudaver | wc -l)" = 4 ]
  grep -qx 0 s-one/imgbuild/cudaver/"$(sha256sum "$c/amd64/usr/bin/nvcc" | cut -c1-64)"
  grep -qx 11080 s-one/imgbuild/cudaver/"$(sha256sum "$c/amd64$lib/libnvrtc.so.11.8.89" | cut -c1-64)"
}

# A gate with nothing to check says skip, with its reason, never pass
# (issue 45): a scratch image of one text file with [target] (and [native])
# has no toolchain, nothing that asks of the driver, no required kernel's
# PTX, no GPU code, no shared object.  imgverify reruns them the same, and
# --require-gates turns those skips into a failure (exit 6).
t_fleet_gates_skip_over_nothing() {
  echo 'just text' >note.txt
  fleet_image txt t-txt:1 "file note.txt /etc/note.txt" $'[target]\ngpu = 12.1\n[native]'
  cp note.txt txt/
  "$IB" --json -q txt >r.json
  validate r.json
  for g in toolchains driver ptx jit-budget native; do
    jq -e --arg g "$g" '[.gates[] | select(.name == $g)] | length == 1 and .[0].status == "skip"
      and (.[0].reason | length > 0)' r.json || { log "gate $g"; jq --arg g "$g" '.gates[] | select(.name == $g)' r.json >&2; return 1; }
  done
  jq -e '.gates[] | select(.name == "toolchains") | .reason | test("no CUDA toolchain in the image")' r.json
  jq -e '.gates[] | select(.name == "driver") | .reason | test("nothing that asks anything of the driver")' r.json
  jq -e '.gates[] | select(.name == "ptx") | .reason | test("no \\[kernels\\] requirement")' r.json
  jq -e '.gates[] | select(.name == "jit-budget") | .reason | test("no shared object, cubin or fatbin")' r.json
  jq -e '.gates[] | select(.name == "native") | .reason | test("matched no shared object")' r.json
  # The same in imgverify, from the recorded definition.
  "$IV" --json t-txt:1 >v.json
  validate v.json
  jq -e '[.gates[] | select(.name == ("toolchains", "driver", "ptx", "jit-budget") and .status == "skip")] | length == 4' v.json
  # Asked to, imgverify fails on a skip: exit 6, the gate and its reason named.
  expect_fail 6 'gate toolchains did not run, and --require-gates names it: no CUDA toolchain' \
    "$IV" --require-gates toolchains,driver,ptx,jit-budget t-txt:1
  grep -q 'gate jit-budget did not run, and --require-gates names it: no shared object' stderr.txt
  expect_fail 6 'gate driver did not run' "$IV" --require-gates driver t-txt:1
  # Without [target], each of the four says so.
  fleet_image plain t-plain:1 "file note.txt /etc/note.txt" ''
  cp note.txt plain/
  "$IB" --json -q plain >p.json
  jq -e '[.gates[] | select(.name == ("toolchains", "driver", "ptx", "jit-budget")) | select(.status == "skip" and (.reason | test("^no \\[target\\] in ")))] | length == 4' p.json
  jq -e '.gates[] | select(.name == "native") | .status == "skip" and (.reason | test("^no \\[native\\] in "))' p.json
  # With something to check, the same gates pass and --require-gates is met:
  # a CUDA runtime (its name says 12.8) asks the driver for CUDA 12.8.
  mkdir -p rt && echo 'not ELF' >rt/libcudart.so.12.8.90
  fleet_image rt t-rt:1 "file libcudart.so.12.8.90 /usr/local/cuda/lib64/libcudart.so.12.8.90" $'[target]\ngpu = 12.1\ndriver = 580.95.05'
  "$IB" --json -q rt >r2.json
  jq -e '.gates[] | select(.name == "driver") | .status == "pass"' r2.json
  "$IV" --require-gates driver t-rt:1 >/dev/null
  # That library holds no GPU code: the budget has nothing to judge.
  jq -e '.gates[] | select(.name == "jit-budget") | .status == "skip" and (.reason | test("none of the image.s 1 shared objects, cubins and fatbins has GPU code"))' r2.json
  # A required kernel with SASS only: the kernel gate passes, the budget
  # passes over its GPU code, and the PTX check has no PTX to judge.
  printf 'extern "C" __global__ void k_sass(float *x) { x[threadIdx.x] *= 2.0f; }\n' >ks.cu
  mkdir -p s
  "$NVCC_REAL" -fatbin -gencode arch=compute_121a,code=sm_121a ks.cu -o s/ks.fatbin
  fleet_image s t-s:1 "file ks.fatbin /opt/k/ks.fatbin" $'[kernels]\nrequire /opt/k/* k_sass\n[target]\ngpu = 12.1'
  "$IB" --json -q s >s.json
  jq -e '[.gates[] | select(.name == ("kernels", "ptx", "jit-budget")) | .status] == ["pass", "skip", "pass"]' s.json
  jq -e '.gates[] | select(.name == "ptx") | .reason | test("have no PTX in the 1 file")' s.json
}
