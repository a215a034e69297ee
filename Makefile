# imgbuild — see README.md.  `make image` and `make test` do all the set-up.
CC ?= gcc
CXX ?= g++
PREFIX ?= /usr/local
# SANITIZE=1: ASan+UBSan (build-asan/, and `make test SANITIZE=1` runs the
# suite on it); SANITIZE=fuzz: clang with libFuzzer (build-fuzz/, `make
# fuzzers`).  Each mode has its own folder, so they never mix objects.
SANITIZE ?=
BUILD ?= $(if $(filter 1,$(SANITIZE)),build-asan,$(if $(filter fuzz,$(SANITIZE)),build-fuzz,build))
PKGS := libarchive libcjson libcrypto zlib libzstd liblz4
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fno-common
# Includes name their file from the repository's root ("layers/store/store.h");
# -MMD -MP: each object's .d file lists the headers it includes, so a header's
# change rebuilds exactly its includers (docs/conventions.md).
CPPFLAGS += -I. -DIB_IMAGES_DIR='"$(CURDIR)/images"'
DEPFLAGS = -MMD -MP
PKG_CONFIG ?= pkg-config
# libcurl is not linked: layers/registry/curl.c loads it (dlopen) when a transfer
# needs it, so that a run that talks to no registry and no Docker Engine
# does not load it and its two dozen libraries (libcurl4-openssl-dev gives
# the header, and the runtime library libcurl4).
LDLIBS += $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || echo -larchive -lcjson -lcrypto -lz -lzstd -llz4) -lm -lpthread -lstdc++
# ISA-L's igzip inflates layers when its library is there (libisal-dev,
# which make deps installs; util/gunzip.c), zlib otherwise (an arm64 cross
# build without libisal-dev:arm64).  ISAL=0 forces zlib.
ISAL ?= $(shell $(PKG_CONFIG) --exists libisal 2>/dev/null && echo 1)
ifeq ($(ISAL),1)
CPPFLAGS += -DIB_HAVE_ISAL
LDLIBS += $(shell $(PKG_CONFIG) --libs libisal)
endif
# builder/recipe/toml_shim.cc, the one C++ file: toml++ (libtomlplusplus-dev,
# header-only here) behind a C interface; exceptions and RTTI off.
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -Werror -fno-exceptions -fno-rtti
ifeq ($(SANITIZE),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer
CXXFLAGS += -fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SANITIZE),fuzz)
CC := clang
CXX := clang++
CFLAGS += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
CXXFLAGS += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr,function -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

# The library: every C file of the four components and util/ (kernels/dcp2/
# is the smoke program's, built apart, but for its CPU mirror of the math).
COMPONENTS := util layers symbol-check kernels builder
LIB_SRC := $(filter-out kernels/dcp2/%,$(shell find $(COMPONENTS) -name '*.c' | LC_ALL=C sort)) kernels/dcp2/dcp2_math.c
LIB_CXX := $(shell find $(COMPONENTS) -name '*.cc' | LC_ALL=C sort)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_CXX:%.cc=$(BUILD)/obj/%.o)
UNIT_SRC := $(shell find tests/unit -name '*.c' | LC_ALL=C sort)
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
PROGS := $(BUILD)/imgbuild $(BUILD)/imgverify $(BUILD)/dcp2_smoke
STAND_IN_SO := images/dsv41-flash-b12x/native/_b12x_C.abi3.so images/dsv41-flash-b12x/native/libflashinfer_dcp.so \
  images/dsv41-flash-b12x/native/amd64/lib/libc.so.6
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
SI := images/dsv41-flash-b12x

.PHONY: all deps test-deps image images verify stand-in stand-in-arm64 test test-all test-long test-arm64 arm64 mutate fuzzers fuzz clean install bench man
all: $(PROGS) $(BUILD)/unit-tests $(STAND_IN_SO)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(DEPFLAGS) $(CXXFLAGS) -c $< -o $@

CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard cli/*.c))
-include $(LIB_OBJ:.o=.d) $(UNIT_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
# The programs' objects come from a chain of pattern rules: without this,
# make deletes them as intermediates after the link and recompiles them on
# every run.
.SECONDARY: $(CLI_OBJ)

$(BUILD)/libimgbuild.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The smoke program runs inside images: plain C, libc, libdl and libm only.
DCP2_SMOKE_SRC := kernels/dcp2/dcp2_smoke.c kernels/dcp2/dcp2_math.c kernels/dcp2/kprobe.c
$(BUILD)/dcp2_smoke: $(DCP2_SMOKE_SRC) kernels/dcp2/dcp2_math.h kernels/dcp2/kprobe.h
	$(CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. $(DCP2_SMOKE_SRC) -ldl -lm -o $@

$(BUILD)/%: $(BUILD)/obj/cli/%.o $(BUILD)/libimgbuild.a
	$(CC) $(LDFLAGS) $(filter %.o,$^) $(filter %.a,$^) $(LDLIBS) -o $@
# imgverify's GPU-code listings are a file of their own (cli/imgverify_gpu.c);
# the objects go before the library, so that the archive answers all of them.
$(BUILD)/imgverify: $(BUILD)/obj/cli/imgverify_gpu.o

$(BUILD)/unit-tests: $(UNIT_OBJ) $(BUILD)/libimgbuild.a
	$(CC) $(LDFLAGS) $(UNIT_OBJ) $(BUILD)/libimgbuild.a $(LDLIBS) -o $@

# The stand-in base's native extension (a real shared object, versioned
# symbols) that its definition copies into the image.
$(SI)/native/_b12x_C.abi3.so: $(SI)/native/b12x_ops.c $(SI)/native/b12x_ops.map
	$(CC) -O2 -shared -fPIC -Wl,--version-script=$(SI)/native/b12x_ops.map -Wl,--build-id=none $< -o $@
# Built by nvcc: trtllm_dcp_alltoall as sm_121a SASS, dcp_lse_combine as
# compute_120 PTX only (the kernel the dsv41-flash-dcp2 definition prebakes).
$(SI)/native/libflashinfer_dcp.so: $(SI)/native/flashinfer_dcp.cu $(SI)/flashinfer/csrc/dcp_lse_combine.cu $(SI)/flashinfer/include/dcp_common.cuh
	@test -x "$(NVCC)" || { echo "the stand-in base needs nvcc (CUDA toolkit >= 12.9): set NVCC or install it in /usr/local/cuda" >&2; exit 8; }
	$(NVCC) -c -frandom-seed=1 -Xcompiler -fPIC -gencode arch=compute_121a,code=sm_121a $(SI)/native/flashinfer_dcp.cu -o $(SI)/native/flashinfer_dcp.o
	$(NVCC) -c -frandom-seed=2 -Xcompiler -fPIC -I$(SI)/flashinfer/include -gencode arch=compute_120,code=compute_120 $(SI)/flashinfer/csrc/dcp_lse_combine.cu -o $(SI)/native/dcp_lse_combine.o
	$(NVCC) -shared -Xlinker --build-id=none -Xlinker --strip-all $(SI)/native/flashinfer_dcp.o $(SI)/native/dcp_lse_combine.o -o $@
# Its glibc 2.39 and CPython 3.12: Ubuntu 24.04's packages, pinned by
# native/noble-amd64.lock (scripts/stand-in-cpython.sh says what happens
# where Ubuntu's archive cannot be reached).
$(SI)/native/amd64/lib/libc.so.6: scripts/stand-in-cpython.sh $(SI)/native/noble-amd64.lock
	scripts/stand-in-cpython.sh $(SI)/native/noble-amd64.lock $(SI)/native/amd64
	@touch $@
stand-in: $(STAND_IN_SO)

# The same stand-in for aarch64 (imgbuild dsv41-flash-b12x --platform
# linux/arm64 takes these by its [copy linux/arm64] lines): busybox from
# Debian's busybox-static:arm64 (downloaded and unpacked: it cannot be
# installed beside the amd64 one), the native extension cross-compiled, and
# the two GPU libraries as aarch64 ELF files around device code that nvcc
# writes as fatbins (nvcc cannot compile aarch64 host code here): FlashInfer's
# kernels from the same sources, NCCL's sm_120 code from the x86-64 library.
SIA := $(SI)/native/arm64
STAND_IN_ARM64 := $(SIA)/busybox $(SIA)/_b12x_C.abi3.so $(SIA)/libflashinfer_dcp.so $(SIA)/libnccl.so.2
ARM64_CC ?= aarch64-linux-gnu-gcc
NCCL_X86 ?= /usr/local/cuda/lib/libnccl.so.2
$(SIA)/busybox:
	@mkdir -p $(SIA)/deb
	cd $(SIA)/deb && rm -f busybox-static_*.deb && apt-get download -q -o APT::Sandbox::User=root busybox-static:arm64
	dpkg-deb --fsys-tarfile $(SIA)/deb/busybox-static_*_arm64.deb | tar -xO ./bin/busybox >$@.tmp
	chmod 0755 $@.tmp && mv $@.tmp $@
$(SIA)/_b12x_C.abi3.so: $(SI)/native/b12x_ops.c $(SI)/native/b12x_ops.map
	@mkdir -p $(SIA)
	$(ARM64_CC) -O2 -shared -fPIC -Wl,--version-script=$(SI)/native/b12x_ops.map -Wl,--build-id=none $< -o $@
$(SIA)/libflashinfer_dcp.so: $(SI)/native/flashinfer_dcp.cu $(SI)/flashinfer/csrc/dcp_lse_combine.cu $(SI)/flashinfer/include/dcp_common.cuh $(SI)/native/embed_fatbin.S $(SI)/native/flashinfer_dcp_host.c
	@test -x "$(NVCC)" || { echo "the stand-in base needs nvcc (CUDA toolkit >= 12.9): set NVCC or install it in /usr/local/cuda" >&2; exit 8; }
	@mkdir -p $(SIA)
	$(NVCC) --fatbin -gencode arch=compute_121a,code=sm_121a $(SI)/native/flashinfer_dcp.cu -o $(SIA)/flashinfer_dcp.fatbin
	$(NVCC) --fatbin -I$(SI)/flashinfer/include -gencode arch=compute_120,code=compute_120 $(SI)/flashinfer/csrc/dcp_lse_combine.cu -o $(SIA)/dcp_lse_combine.fatbin
	$(ARM64_CC) -O2 -shared -fPIC -Wl,--build-id=none -s -DFATBIN='"$(SIA)/flashinfer_dcp.fatbin"' \
	  -DFATBIN2='"$(SIA)/dcp_lse_combine.fatbin"' $(SI)/native/flashinfer_dcp_host.c $(SI)/native/embed_fatbin.S \
	  -Wl,--no-as-needed -l:libstdc++.so.6 -o $@
$(SIA)/libnccl.so.2: $(NCCL_X86) scripts/fatbin-select.py $(SI)/native/embed_fatbin.S $(SI)/native/nccl_host.c
	@test -r "$(NCCL_X86)" || { echo "the arm64 stand-in takes NCCL's device code from $(NCCL_X86): set NCCL_X86" >&2; exit 8; }
	@mkdir -p $(SIA)
	objcopy -O binary --only-section=.nv_fatbin $(NCCL_X86) $(SIA)/nccl-x86.fatbin
	scripts/fatbin-select.py $(SIA)/nccl-x86.fatbin $(SIA)/nccl.fatbin 120
	rm -f $(SIA)/nccl-x86.fatbin
	$(ARM64_CC) -O2 -shared -fPIC -Wl,--build-id=none -Wl,-soname,libnccl.so.2 -s -DFATBIN='"$(SIA)/nccl.fatbin"' \
	  $(SI)/native/nccl_host.c $(SI)/native/embed_fatbin.S -o $@
stand-in-arm64: $(STAND_IN_ARM64)

deps:
	@scripts/install-deps.sh build
test-deps:
	@scripts/install-deps.sh test

# The main job: the tools, the stand-in base, then the DCP2 image over it.
image: deps
	$(MAKE) all
	$(BUILD)/imgbuild dsv41-flash-b12x
	$(BUILD)/imgbuild dsv41-flash-dcp2

# Every definition under images/, bases first; then verify each against
# its definition (integrity, provenance, symbols, kernels).
images: deps
	$(MAKE) all
	scripts/build-images.sh build

verify: all
	scripts/build-images.sh verify

# The suite on the tools of this mode: with SANITIZE=1 every program the
# tests start runs under ASan+UBSan, and any report fails its test.
# TEST_SUITES (a regex of suite names, default all) picks what runs.
TEST_SUITES ?= .
test: test-deps
	$(MAKE) all
	$(MAKE) SANITIZE=fuzz fuzzers
	IB_BUILD=$(BUILD) IB_FUZZ_BUILD=build-fuzz IB_SANITIZE=$(filter 1,$(SANITIZE)) \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 tests/run.sh '$(TEST_SUITES)'

# libFuzzer harnesses, one per parser (tests/fuzz/); `make fuzz` runs each
# for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/NAME, never
# written: new inputs go to build-fuzz/corpus/NAME).
FUZZ_SECONDS ?= 180
FUZZERS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
# The definition parsers may name any path: confine.c keeps them in the
# harness's scratch folder.
FUZZ_CONFINE := -Wl,--wrap=open -Wl,--wrap=opendir tests/fuzz/confine.c
$(BUILD)/fuzz/fuzz_definition $(BUILD)/fuzz/fuzz_dockerfile: FUZZ_EXTRA = $(FUZZ_CONFINE)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.c tests/fuzz/confine.c tests/fuzz/fuzz.h $(BUILD)/libimgbuild.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer $< tests/fuzz/fuzz.c $(FUZZ_EXTRA) $(BUILD)/libimgbuild.a $(LDLIBS) -o $@
fuzzers:
	@test "$(SANITIZE)" = fuzz || { echo "make fuzzers: use make SANITIZE=fuzz fuzzers (or make fuzz)" >&2; exit 2; }
	@scripts/install-deps.sh fuzz
	$(MAKE) $(FUZZERS)
fuzz:
	$(MAKE) SANITIZE=fuzz fuzzers
	tests/fuzz/run.sh $(FUZZ_SECONDS)

# Deliberate bugs (tests/mutations.txt), each in a scratch copy of the tree,
# each of which its tests must catch; long (about an hour on 2 cores), not
# part of `make test`.  The table goes to tests/results/mutate-<commit>.md;
# SHARD=K/N runs a share of the list (the shards of one commit merge into
# that table), MUTATE=REGEX picks mutations by name (table: build/mutate.md).
SHARD ?= 1/1
mutate: all
	nice tests/mutate.py --shard $(SHARD) $(MUTATE)

# Everything, with the long campaigns at full size (the 1,000-mutant syntax
# campaigns against CPython 3.11 and 3.13) and the tall_ tests (the link
# gate against glibc's ldd -r on the real Debian bases), and imgverify of a
# 2 GiB layout with the store on an 8 MiB tmpfs (tests/integration/inplace.sh).
# Then the whole suite (normal tier) on the tools built with ASan+UBSan:
# CI sanitizes only the suites listed in .ci/run, as many as its 90 minutes
# hold (tests/README.md gives the measured times).  Then the aarch64 tier: every
# suite with the aarch64 tools under qemu, but the tests that start a
# daemon, a registry or a container (skips).
# The run is on record in tests/results/test-all-<commit>/ (RESULTS):
# summary.md (each long-tier comparison with its figures, every phase's
# counts, failures and skips), what each tall_ test kept of its comparison,
# and a failure's log; tests/results-summary.py writes it.
RESULTS ?= $(CURDIR)/tests/results/test-all-$(shell git rev-parse --short=12 HEAD 2>/dev/null)
test-all: test-deps
	$(MAKE) all
	$(MAKE) SANITIZE=fuzz fuzzers
	IB_RESULTS=$(RESULTS) IMGBUILD_TEST_ALL=1 IMGBUILD_TEST_BIG_MB=2048 tests/run.sh
	IB_RESULTS=$(RESULTS) IB_RESULTS_PHASE=sanitized $(MAKE) test SANITIZE=1
	IB_RESULTS=$(RESULTS) IB_RESULTS_PHASE=arm64 $(MAKE) test-arm64 ARM64_SUITES='^(unit|arm64|core|symbols|kernels|native|triage|fleet|verify|robust|hostile|reports|inplace)$$$$'

# The long tier alone (the tall_ tests: every comparison with a real tool
# on real content), on record as make test-all's first phase is.
test-long: test-deps
	$(MAKE) all
	IB_RESULTS=$(RESULTS) IMGBUILD_TEST_ALL=1 tests/run.sh . '^tall_'

# The benchmark against the peers on bases of real size (bench/run.sh says
# what it runs and what it skips for want of disk); writes bench/RESULTS.md
# and its plots.  BENCH_SCENARIOS, BENCH_RUNS, BENCH_CACHE, BENCH_WORK: see
# bench/run.sh.  Long (tens of minutes to hours); never part of `make test`.
bench:
	$(MAKE) all
	bench/run.sh

# aarch64 (DGX Spark): the tools and unit tests cross-built with Debian's
# aarch64-linux-gnu-gcc against the arm64 -dev packages (multiarch) into
# build-arm64/, never touching build/; build-arm64/qemu/ holds wrappers
# that run them under qemu-aarch64.  `make test-arm64` runs the unit tests
# and the integration suites that need no daemon and no GPU with them.
ARM64 := build-arm64
ARM64_SUITES ?= ^(unit|arm64)$$
arm64:
	@scripts/install-deps.sh arm64
	$(MAKE) BUILD=$(ARM64) CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ \
	  PKG_CONFIG='env PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config' \
	  $(ARM64)/imgbuild $(ARM64)/imgverify $(ARM64)/dcp2_smoke $(ARM64)/unit-tests
	scripts/qemu-wrap.sh $(ARM64)
test-arm64: test-deps arm64
	$(MAKE) all stand-in-arm64
	IB_BUILD=$(ARM64)/qemu IB_NATIVE_BUILD=$(BUILD) IB_NO_DAEMON=1 IB_TEST_PLATFORM=linux/amd64 tests/run.sh '$(ARM64_SUITES)'

clean:
	rm -rf $(BUILD) build-asan build-fuzz $(ARM64) $(STAND_IN_SO) $(SIA) $(SI)/native/amd64 $(SI)/native/deb

# The man pages: imgbuild(1), imgverify(1) and image.conf(5), written in
# go-md2man's Markdown (docs/man/*.md, readable on GitHub as they are) and
# rendered to roff by Debian's go-md2man, which `make deps` installs.  Not
# part of `all`: only `make install` needs them, so a build of the tools
# needs no go-md2man.  tests/integration/docs.sh holds their options to
# --help, so the two cannot drift apart.
MAN_MD := $(wildcard docs/man/*.md)
MAN := $(MAN_MD:docs/man/%.md=$(BUILD)/man/%)
$(MAN): $(BUILD)/man/%: docs/man/%.md
	@mkdir -p $(dir $@)
	@command -v go-md2man >/dev/null || { echo "the man pages need go-md2man: make deps installs it" >&2; exit 8; }
	go-md2man -in $< -out $@
man: $(MAN)

# imgbuild and imgverify in bin/ (their --help is the complete reference,
# their man pages say the same), the smoke program in libexec/imgbuild/, the
# definitions in share/, the man pages in share/man/.
install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/imgbuild $(DESTDIR)$(PREFIX)/share/imgbuild \
	  $(DESTDIR)$(PREFIX)/share/doc/imgbuild $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0755 $(BUILD)/imgbuild $(BUILD)/imgverify $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/dcp2_smoke $(DESTDIR)$(PREFIX)/libexec/imgbuild/
	cp -r images kernels $(DESTDIR)$(PREFIX)/share/imgbuild/
	install -m 0644 README.md docs/*.json $(DESTDIR)$(PREFIX)/share/doc/imgbuild/
	install -m 0644 $(filter %.1,$(MAN)) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(filter %.5,$(MAN)) $(DESTDIR)$(PREFIX)/share/man/man5/
