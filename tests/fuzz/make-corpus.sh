#!/usr/bin/env bash
# Write the seed corpora of the fuzz harnesses (tests/fuzz/corpus/NAME/)
# from real inputs of this repository: the definitions under images/, the
# Dockerfile the core suite writes, the overlay's Python files, objects
# that gcc and nvcc build from the tests' sources, and registry documents
# in the shapes that the registry and token service of the tests send.
# Run it again when a format grows; the corpora are committed.
set -eu
cd "$(dirname "$0")/../.."
C=tests/fuzz/corpus
SEP=$'\n%%\n'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed() { mkdir -p "$C/$1"; cat >"$C/$1/$2"; }

# image.conf (+ manifest.txt)
for conf in images/*/image.conf tests/gpu/nccl-layer/image.conf; do
  name=$(basename "$(dirname "$conf")")
  { cat "$conf"; [ -f "$(dirname "$conf")/manifest.txt" ] && { printf '%s' "$SEP"; cat "$(dirname "$conf")/manifest.txt"; }; true; } |
    sed 's|^manifest manifest.txt [^ ]*|manifest manifest.txt src|' | seed definition "$name"
done
seed definition every-key <<'X'
[image]
name = t:1
from = scratch
platform = linux/arm64
cmd = ["/bin/sh", "-c", "true"]
gzip-level = 6
[copy]
file src/a.py /opt/a.py mode=0755
tree src/pkg /opt/pkg
symlink /opt/l a.py
manifest manifest.txt src /opt
[new]
/opt/
[env]
A = 1
[label]
l = v
[symbols]
python-path /opt
check-package pkg
unresolved error
python pkg/b.py f
native /opt/*.so f@V1 g
[kernels]
target 12.1 9.0
require /opt/*.so k
[prebake]
arch sm_121a
flags -O3
jobs 2
source k.cu /opt/k.fatbin include inc
source image:/x.cu /opt/x.fatbin include image:/inc
[smoke]
program smoke
kernels /opt/k.fatbin
nccl /usr/lib/libnccl.so.2
dcp 2
ranks 2
timeout 60
args --x 1
%%
# flat target
a.py sub/a.py
pkg/b.py b.py
X

# Dockerfile (+ build args): the shape core.sh writes, and the rest of the subset
{
  echo "ARG BASE=dsv41-flash-b12x:local"
  echo "FROM \$BASE"
  echo "# imgbuild:new /usr/local/lib/python3.12/dist-packages/vllm/v1/core/candidate_blocks.py"
  grep -v '^#' images/dsv41-flash-dcp2/manifest.txt | head -5 | while read -r flat target; do
    [ -n "$flat" ] && echo "COPY $flat /usr/local/lib/python3.12/dist-packages/vllm/$target"
  done
  echo 'ENV DSV41_DCP_STAGE=3 DSV41_DCP_COMBINE=ag_rs \'
  echo '    DSV41_DCP_PREFILL_GATHER=0'
  echo 'LABEL org.opencontainers.image.title=dsv41-flash-dcp2 \'
  echo '      org.opencontainers.image.description="DeepSeek V4.1 Flash (DCP2)"'
} | seed dockerfile dcp2
seed dockerfile subset <<'X'
# syntax comment
ARG V
ARG D=/opt
FROM scratch AS base
COPY --chmod=0644 a.py "${D}/a b.py"
COPY dir/ a.py $D/x/
ENV LEGACY value with spaces
ENV K="quoted \"v\"" L='single $V' M=\$literal
LABEL a=b "c d"=e
CMD ["python3", "-c", "print(1)"]
%%
V=1
D=/srv
X

# Python modules: the overlay's files and the scanner's reference corpus
mkdir -p "$C/pysyms"
for f in $(find images tests/pyref/corpus -name '*.py' -size -12k | sort); do
  cp "$f" "$C/pysyms/$(echo "$f" | tr / _)"
done

# ELF: a versioned shared object like the stand-in's native extension,
# a plain one, an object file.
gcc -O2 -shared -fPIC -Wl,--version-script=images/dsv41-flash-b12x/native/b12x_ops.map \
  -Wl,--build-id=none -s images/dsv41-flash-b12x/native/b12x_ops.c -o "$tmp/b12x.so"
printf 'int f(void){return 1;}\nint g;\n' >"$tmp/p.c"
gcc -O2 -shared -fPIC -s "$tmp/p.c" -o "$tmp/p.so"
gcc -O2 -c "$tmp/p.c" -o "$tmp/p.o"
mkdir -p "$C/elfsyms"
cp "$tmp/b12x.so" "$tmp/p.so" "$tmp/p.o" "$C/elfsyms/"

# GPU code, as the kernels suite compiles it.
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$C/cudabin"
if [ -x "$NVCC" ]; then
  printf '%s\n' 'extern "C" __global__ void trtllm_dcp_alltoall(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }' \
    '__global__ void cpp_kernel(int *y) { y[threadIdx.x] = threadIdx.x; }' >"$tmp/k.cu"
  "$NVCC" -fatbin -gencode arch=compute_121a,code=sm_121a -gencode arch=compute_120,code=compute_120 "$tmp/k.cu" -o "$C/cudabin/multi.fatbin"
  "$NVCC" -fatbin --compress-mode=none -gencode arch=compute_120,code=compute_120 "$tmp/k.cu" -o "$C/cudabin/ptx-none.fatbin"
  "$NVCC" -fatbin --compress-mode=size -Xfatbin -compress-all -gencode arch=compute_120f,code=sm_120f "$tmp/k.cu" -o "$C/cudabin/zstd.fatbin"
  "$NVCC" -fatbin --compress-mode=speed -Xfatbin -compress-all -gencode arch=compute_100a,code=sm_100a "$tmp/k.cu" -o "$C/cudabin/lz4.fatbin"
  "$NVCC" -cubin -arch=sm_121a "$tmp/k.cu" -o "$C/cudabin/k.cubin"
  "$NVCC" -c -rdc=true -Xcompiler -fPIC -gencode arch=compute_121a,code=sm_121a "$tmp/k.cu" -o "$C/cudabin/rdc.o"
  "$NVCC" -c -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 "$tmp/k.cu" -o "$C/cudabin/host.o"
else
  echo "make-corpus: no nvcc; cudabin seeds left as they are" >&2
fi
# The GPU-code records (kernels/kindex.c) of those seeds, and of a host
# ELF file without GPU code (no-code), are krecord's seeds: written by
# ib_kernels_cache_save, not by this script (it has no tool that writes
# one); made again by hand when the record's format changes.

# docker-archive: manifest.json, index.json, config, OCI manifest, name
cfg='{"architecture":"arm64","os":"linux","config":{"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:'$(printf layer | sha256sum | cut -c1-64)'"]}}'
cfgd=$(printf '%s' "$cfg" | sha256sum | cut -c1-64)
lay=$(printf layer | sha256sum | cut -c1-64)
man='{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$cfgd'","size":'${#cfg}'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:'$lay'","size":5}]}'
mand=$(printf '%s' "$man" | sha256sum | cut -c1-64)
printf '%s' '[{"Config":"cfg.json","RepoTags":["a:1"],"Layers":["l1/layer.tar","l2/layer.tar"]}]' "$SEP" "$SEP" "$cfg" "$SEP" "$SEP" | seed docker_archive classic
printf '%s' '[{"Config":"cfg.json","RepoTags":["a:1","b:2"],"Layers":["l1/layer.tar"]},{"Config":"blobs/sha256/'$cfgd'","RepoTags":["c:3"],"Layers":["blobs/sha256/'$lay'"]}]' "$SEP" "$SEP" "$cfg" "$SEP" "$SEP" "b:2" | seed docker_archive named
printf '%s' "$SEP" '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$mand'","size":'${#man}',"annotations":{"io.containerd.image.name":"a:1"}}]}' "$SEP" "$cfg" "$SEP" "$man" "$SEP" | seed docker_archive oci
printf '%s' '[{"Config":"blobs/sha256/'$cfgd'","RepoTags":null,"Layers":["blobs/sha256/'$lay'"]}]' "$SEP" '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$mand'","size":'${#man}'},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$mand'","size":1,"annotations":{"vnd.imgbuild.subject":"sha256:'$mand'"}}]}' "$SEP" "$cfg" "$SEP" "$man" "$SEP" | seed docker_archive both
# The same two pulled into a store (the harness's sixth part), as imgbuild --from does.
{ cat "$C/docker_archive/both"; printf '%s' "$SEP" store; } | seed docker_archive both-store
{ cat "$C/docker_archive/named"; printf '%s' "$SEP" store; } | seed docker_archive named-store

# registry JSON: first byte = claimed media type and platform (see the harness)
printf '\x01%s' "$man" | seed registry_json oci-manifest
printf '\x03%s' '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":1469,"digest":"sha256:'$cfgd'"},"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":3,"digest":"sha256:'$lay'"}]}' | seed registry_json docker-manifest
printf '\xc2%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$mand'","size":7143,"platform":{"architecture":"amd64","os":"linux"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$cfgd'","size":7682,"platform":{"architecture":"arm64","os":"linux","variant":"v8"}}]}' | seed registry_json oci-index
printf '\x04%s' '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"sha256:'$mand'","size":7143,"platform":{"architecture":"arm64","os":"linux"}}]}' | seed registry_json docker-list
printf '\x00%s' '{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"t"}},{"code":"DENIED"}]}' | seed registry_json errors

# WWW-Authenticate, token answer, auth file
printf '%s' 'Bearer realm="http://127.0.0.1:5001/token",service="registry",scope="repository:app:pull,push repository:base:pull"' "$SEP" '{"token":"eyJ0","access_token":"eyJ0","expires_in":600}' "$SEP" '{"auths":{"https://h:1/v1/":{"auth":"dXNlcjpwYXNz"}}}' | seed registry_auth bearer
printf '%s' 'Bearer service="registry",scope="repository:app:pull",error="invalid_token"' "$SEP" '{"access_token":"abc"}' "$SEP" '{"auths":{"h:1":{"auth":"dXNlcjpwYXNz"},"index.docker.io":{"auth":"eDp5"}}}' | seed registry_auth no-realm
printf '%s' 'Basic realm="Registry Realm"' "$SEP" '{}' "$SEP" '{"auths":{"https://h:1/v1/":{"auth":"dXNlcjpwYXNz"}}}' | seed registry_auth basic
# Records of whole layer reads (layers/read/readthrough.c), in the format the
# reader writes, without their end line (the harness seals each input):
# this libarchive's version (a read refuses another), no hostile entry,
# and two (one name with a newline in it).
rules=$(sed -n 's/^#define IB_TAR_CHECK_RULES \([0-9]*\)$/\1/p' layers/tar/tarcheck.h)
libarchive=$(pkg-config --modversion libarchive | awk -F. '{ printf "%d%03d%03d", $1, $2, $3 }')
readthrough() { printf '%s' "$2" | seed readthrough "$1"; } # NAME BODY
head="imgbuild-read-through 1 $rules $libarchive"
readthrough clean "$head
size 4815
diff_id sha256:$lay
"
h1='entry `usr/bin/su`: setuid or setgid file'
h2='entry `a
b`: name with a `..` component'
readthrough hostile "$head
size 0
diff_id sha256:$cfgd
hazard ${#h1}
$h1
hazard ${#h2}
$h2
"
echo "make-corpus: $(find "$C" -type f | wc -l) seeds in $C" >&2
