# pinload: GNU Make.
#
#   make                  library (static and shared), tools, samples and
#                         examples
#   make bench            the main job: generate the default dataset if
#                         missing, sweep pinload-bench on it, write the plot
#                         (DATA=/path/to/train to use your own data)
#   make test             the Criterion suite (host backend; no GPU needed)
#   make test-gpu         the CUDA-path tests, on a machine with a GPU
#   make install PREFIX=/usr/local DESTDIR=   library, header, pkg-config
#                         files, tools and their man pages (make uninstall)
#   make deps             install the Debian packages the build needs (root)
#   make WERROR=1         warnings are errors (CI builds so)
#   make SANITIZE=address,undefined test    (or SANITIZE=thread)
#   make CUDA=0           build host-only even where CUDA is installed
#   make CUDART=static    link the CUDA runtime statically (cudart_static:
#                         the library then needs only the driver,
#                         libcuda.so.1, found at run time; the wheel's way)
#   make sdist, make wheel   the Python package's sdist and manylinux wheel
#                         (build/wheelhouse; tools/wheel.sh)
#   make NCCL=0           examples/data_parallel without NCCL (its host
#                         exchange only) even where NCCL is installed
#   make CUDA=sim         build against tests/cudasim, the simulated CUDA
#                         runtime, in place of libcudart (in build/sim):
#                         the CUDA backend runs without a GPU
#   make test CUDA=sim    the CUDA-path suites on the simulator (plain
#                         `make test` runs them too, after the host suites)
#   make deps-check       every #include against the dependency rule of
#                         docs/ARCHITECTURE.md (make test runs it first)
#   make config-fields    the Python binding's files written from pl_config
#                         (make config-check, in make test: none is stale)
#   make docs             the docs site in build/docs/site (MkDocs, from the
#                         package index into build/docs-venv), links checked
#   make test-docs        the site, its links, and its examples run (make
#                         test runs it)
#
# CUDA is found at $(CUDA_HOME) (default /usr/local/cuda); without it the
# library builds host-only with the same API. Plain `make` only checks the
# Debian packages it needs and names the missing ones; `make deps`, `make
# test` and `make bench` install them (tools/install-deps.sh, as root).

CC       ?= cc
NVCC     ?= $(CUDA_HOME)/bin/nvcc
CUDA_HOME ?= /usr/local/cuda
PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
DESTDIR  ?=
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)

CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wno-missing-field-initializers
# Warnings fail the build in CI (.ci/run exports WERROR=1), not for users,
# whose newer compilers may warn about what ours does not.
ifeq ($(WERROR),1)
WARN     += -Werror
endif
# -ffp-contract=off: the pixel ops (workers/ops/functional.h) repeat
# torchvision's float32 arithmetic step by step, each step rounded where
# PyTorch rounds; a multiply and an add fused into one rounding (GCC's
# default where the target has FMA) would part them by a level.
CFLAGS_ALL := -std=c11 $(WARN) $(CFLAGS) -ffp-contract=off -fPIC \
              -fvisibility=hidden -pthread
CPPFLAGS_ALL := -D_GNU_SOURCE -Iinclude $(CPPFLAGS) -MMD -MP
# PNG and WebP: libspng and libwebp, found by pkg-config where it is (the
# names it gives, static builds' private ones included), else by name.
IMAGE_LIBS := $(shell pkg-config --libs --static spng libwebp 2>/dev/null || \
                echo -lspng -lz -lwebp)
# libcurl (remote shards): pkg-config's flags, or plain -lcurl without it.
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)
# json-c (config.label_field): likewise.
JSON_LIBS := $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)
LIBS     := -ljpeg $(IMAGE_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm -lpthread

ifeq ($(CUDA),sim)
SIM      := 1
endif

ifneq ($(SANITIZE),)
comma := ,
BUILD    ?= build/san-$(subst $(comma),-,$(SANITIZE))$(if $(SIM),/sim)
CFLAGS_ALL += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all \
              -fno-omit-frame-pointer -O1
LDFLAGS  += -fsanitize=$(SANITIZE)
else
BUILD    ?= build$(if $(SIM),/sim)
endif

ifeq ($(CUDA),0)
HAVE_CUDA :=
else
HAVE_CUDA := $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h)
endif
# nvJPEG's header, for the GPU decoder (device/nvjpeg.c, which loads the
# library itself at run time: nothing links it): the toolkit's, else the
# one tools/install-deps.sh unpacks from the nvidia-nvjpeg wheel into
# build/nvjpeg (never committed). NVJPEG_INC=DIR names another folder;
# without one the library builds without the GPU decoder.
NVJPEG_FIND = $(patsubst %/nvjpeg.h,%,$(firstword $(wildcard \
              $(CUDA_HOME)/include/nvjpeg.h \
              build/nvjpeg/nvidia/cu*/include/nvjpeg.h)))
NVJPEG_INC ?= $(NVJPEG_FIND)
# The targets that install what they need fetch it first, so that this
# very make builds with it (the dependency stamp runs too late for the
# variables above).
ifeq ($(NVJPEG_INC),)
ifneq ($(CUDA),0)
ifneq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
ifneq ($(filter test bench deps wheel test-package,$(MAKECMDGOALS)),)
$(shell tools/install-deps.sh --install nvjpeg >&2)
NVJPEG_INC := $(NVJPEG_FIND)
endif
endif
endif
endif
ifneq ($(SIM),)
# The simulated runtime: the library is built exactly as for CUDA (the
# toolkit's headers), but links tests/cudasim instead of libcudart, and has
# no kernels of nvcc's (they need the real runtime): the GPU decoder's are
# the sim's (tests/cudasim/kernels_sim.c, PL_HAVE_GPU_RESIZE), and its
# nvJPEG the fake one, build/sim/libnvjpegsim.so, which the suites load
# (PINLOAD_NVJPEG) and which calls the sim's runtime in the program: its
# symbols are exported from every program (-rdynamic).
ifeq ($(HAVE_CUDA),)
$(error CUDA=sim needs the CUDA toolkit's headers in $(CUDA_HOME)/include)
endif
CPPFLAGS_ALL += -DPL_HAVE_CUDA -DPL_HAVE_GPU_RESIZE -DPL_HAVE_GPU_MIX \
                -I$(CUDA_HOME)/include
CUDASIM  := $(BUILD)/libcudasim.a
LIBS     += $(CUDASIM) -lrt
LDFLAGS  += -rdynamic
SIM_FLAGS := -DPL_CUDA_SIM -I$(CUDA_HOME)/include -Itests/cudasim
HAVE_NVCC :=
else ifneq ($(HAVE_CUDA),)
CPPFLAGS_ALL += -DPL_HAVE_CUDA -I$(CUDA_HOME)/include
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
ifeq ($(CUDART),static)
# The runtime inside the library: it opens the driver (libcuda.so.1) at
# run time, and without one the host backend runs, as with the shared
# runtime missing a GPU.
LIBS     += -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt
else
LIBS     += -L$(CUDA_LIBDIR) -lcudart -Wl,-rpath,$(CUDA_LIBDIR)
endif
# Kernels (the bench's simulated step, the samples) need nvcc as well.
HAVE_NVCC := $(wildcard $(NVCC))
endif
ifneq ($(HAVE_CUDA),)
ifneq ($(NVJPEG_INC),)
CPPFLAGS_ALL += -DPL_HAVE_NVJPEG -isystem $(NVJPEG_INC)
HAVE_NVJPEG := 1
LIBS     += -ldl
endif
endif
# NCCL, for examples/data_parallel's all-reduce: nccl.h (2.14 or newer, for
# communicators that never block) and libnccl in $(NCCL_HOME), default
# $(CUDA_HOME), where the toolkit's packages put them. Not with the
# simulated runtime, on which NCCL cannot run, nor with NCCL=0.
NCCL_HOME ?= $(CUDA_HOME)
HAVE_NCCL :=
ifneq ($(NCCL),0)
ifeq ($(SIM),)
ifneq ($(HAVE_CUDA),)
NCCL_LIBDIR := $(patsubst %/,%,$(firstword $(dir $(wildcard \
               $(NCCL_HOME)/lib64/libnccl.so $(NCCL_HOME)/lib/libnccl.so))))
HAVE_NCCL := $(if $(NCCL_LIBDIR),$(shell awk \
    '/^.define NCCL_MAJOR / { M = $$3 } /^.define NCCL_MINOR / { m = $$3 } \
     END { if (M > 2 || (M == 2 && m >= 14)) print "yes" }' \
    $(NCCL_HOME)/include/nccl.h 2>/dev/null))
endif
endif
endif
# Kernels for every architecture this nvcc knows from sm_75 (Turing: T4,
# RTX 20xx) up, and PTX for the newest, which later GPUs compile at load.
NVCC_ARCHS := $(shell $(NVCC) --list-gpu-arch 2>/dev/null | \
                sed -n 's/^compute_\([0-9]*\)$$/\1/p' | \
                awk '$$1 >= 75' | sort -n | uniq)
ifeq ($(NVCC_ARCHS),)
NVCC_ARCHS := 75 80 90
endif
NVCC_PTX   := $(lastword $(NVCC_ARCHS))
NVCC_GENCODE := \
    $(foreach a,$(NVCC_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
    -gencode arch=compute_$(NVCC_PTX),code=compute_$(NVCC_PTX)
# The host side of every .cu file is compiled so that it needs nothing of
# the C++ runtime (no exceptions, RTTI or thread-safe static guards): the
# library, the tools, samples and examples link as C programs, with no
# libstdc++ (a CUDA image's gcc may find only a static, non-PIC
# libstdc++.a, which cannot go into a PIE or a shared library). make test
# checks it (tools/no-cxx-check.sh).
NVCC_HOST := -fno-exceptions,-fno-rtti,-fno-threadsafe-statics
NVCCFLAGS := -O2 -std=c++17 -Iinclude $(NVCC_GENCODE) -Xcompiler $(NVCC_HOST)

COMMON_SRC  := common/clock.c common/grow.c common/error.c common/names.c \
               common/log.c common/file.c common/machine.c common/braces.c \
               common/float16.c
CODECS_SRC  := codecs/codec.c codecs/jpeg.c codecs/png.c codecs/webp.c
# The augmentation ops (workers/ops/op.h): the table, the spec, the
# pipeline, and one file per kind of op.
OPS_SRC     := workers/ops/op_table.c workers/ops/spec.c \
               workers/ops/pipeline.c workers/ops/geometry.c \
               workers/ops/random_resized_crop.c workers/ops/resize.c \
               workers/ops/center_crop.c workers/ops/flip.c \
               workers/ops/grayscale.c workers/ops/normalize_op.c \
               workers/ops/adjust_color.c workers/ops/adjust_hue.c \
               workers/ops/color_jitter.c workers/ops/gaussian_blur.c \
               workers/ops/solarize.c workers/ops/posterize.c \
               workers/ops/equalize.c workers/ops/autocontrast.c \
               workers/ops/affine.c workers/ops/rotate.c \
               workers/ops/policy.c workers/ops/rand_augment.c \
               workers/ops/trivial_augment.c workers/ops/auto_augment.c \
               workers/ops/random_erasing.c workers/ops/mixup.c
WORKERS_SRC := workers/decode.c workers/resample.c workers/augment.c \
               workers/fileio.c workers/sample.c workers/route.c \
               workers/pool.c workers/balance.c $(OPS_SRC)
INDEX_SRC   := index/tar.c index/idx_file.c index/sample_table.c \
               index/node_tables.c
CATALOG_SRC := catalog/catalog.c catalog/json_label.c catalog/shard_samples.c
REMOTE_SRC  := remote/remote.c remote/cache.c remote/cache_dir.c \
               remote/transfer.c remote/http.c remote/s3.c remote/gs.c \
               remote/hf.c remote/pipe.c
INPUT_SRC   := input/input.c input/folder.c input/list.c input/shards.c
DEVICE_SRC  := device/backend.c device/backend_host.c
ifneq ($(HAVE_CUDA),)
DEVICE_SRC  += device/backend_cuda.c
ifneq ($(HAVE_NVJPEG),)
DEVICE_SRC  += device/nvjpeg.c
endif
endif
# The sample order (order/README.md): the epoch's permutation, the claim
# schedule.
ORDER_SRC   := order/sampler.c order/schedule.c
# A batch's way from the host ring to the caller (delivery/README.md): the
# ring, the copy engine, the device buffers and their hand-off, the output
# plan, the GPU decoder's wiring, the record of bad files.
DELIVERY_SRC := delivery/ring.c delivery/failures.c delivery/copier.c \
                delivery/dev_buffers.c delivery/output.c delivery/decode_gpu.c
LOADER_SRC  := loader/config.c loader/launcher.c loader/cpus.c \
               loader/autotune.c loader/state.c loader/loader.c \
               loader/image.c loader/pinned.c loader/transform.c
LIB_SRC  := $(COMMON_SRC) $(CODECS_SRC) $(INDEX_SRC) $(CATALOG_SRC) \
            $(REMOTE_SRC) $(WORKERS_SRC) $(INPUT_SRC) $(DEVICE_SRC) \
            $(ORDER_SRC) $(DELIVERY_SRC) $(LOADER_SRC)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# With nvcc, the library carries the GPU normalisation kernel, the GPU
# decoder's resize kernels and the batch op's mixing kernel.
ifneq ($(HAVE_NVCC),)
CPPFLAGS_ALL += -DPL_HAVE_NVCC -DPL_HAVE_GPU_RESIZE -DPL_HAVE_GPU_MIX
LIB_OBJ  += $(BUILD)/obj/device/normalize.o $(BUILD)/obj/device/gpu_resize.o \
            $(BUILD)/obj/device/gpu_mix.o
endif

TOOLS    := $(BUILD)/pinload-dump $(BUILD)/pinload-mkdata $(BUILD)/pinload-bench \
            $(BUILD)/pinload-pack
# Samples are short programs users copy; examples/ holds whole programs.
SAMPLES  := $(BUILD)/samples/minimal $(BUILD)/samples/train_loop
EXAMPLES := $(BUILD)/examples/train_classifier $(BUILD)/examples/data_parallel
# The suites live in folders that follow the code (tests/README.md):
# unit suites per module, the public API's end to end (tests/api), the
# tools', and the system's. Their binaries keep flat, unique names:
# $(BUILD)/tests/test_x.
TEST_DIRS := tests/unit/common tests/unit/codecs tests/unit/index \
             tests/unit/workers \
             tests/unit/remote tests/unit/input tests/unit/device \
             tests/unit/order tests/unit/delivery tests/unit/loader \
             tests/api tests/tools tests/system
vpath test_%.c $(TEST_DIRS)
ALL_TEST_SRC := $(foreach d,$(TEST_DIRS),$(wildcard $(d)/test_*.c))
test_bin = $(addprefix $(BUILD)/tests/,$(sort $(basename $(notdir $(1)))))
# The suites of the CUDA backend and the simulator (tests/unit/device) and
# the tools run on simulated CUDA (test_cuda_programs) need the simulated
# runtime: they are built in the CUDA=sim build only, with the loader
# suites (tests/api/test_loader_*.c, one per section) run against
# simulated CUDA.
SIM_ONLY := $(wildcard tests/unit/device/test_*.c) \
            $(wildcard tests/tools/test_cuda_*.c)
TEST_SRC := $(filter-out $(SIM_ONLY),$(ALL_TEST_SRC))
TEST_BIN := $(call test_bin,$(TEST_SRC))
LOADER_TEST_BIN := $(call test_bin,$(wildcard tests/api/test_loader_*.c))
SIM_TEST_BIN := $(call test_bin,$(SIM_ONLY)) $(LOADER_TEST_BIN) \
                $(BUILD)/tests/test_resume
STRESS   := $(BUILD)/tests/stress
# One test runner for every build: the suites compile against
# tests/runner/criterion/criterion.h, a small runner of Criterion's API (a
# process per test, timeouts, --jobs, --filter). Criterion itself cannot
# run under the sanitizers: its sandbox maps its arena at random fixed
# addresses, which ThreadSanitizer's memory layout reserves, and under
# AddressSanitizer its parallel runner leaks 48 bytes of its own.
# -Itests: the suites include the shared headers (testutil.h...) and the
# library's internals ("../delivery/ring.h") as if they stood in tests/.
TEST_INC  := -Itests/runner -Itests
TEST_LINK :=

DEPS_STAMP := $(BUILD)/.deps-build
# What the dependency check does: `check` names missing packages and fails;
# `install` installs them (as root). The README's two commands and `make
# deps` install; every other target only checks.
DEPS_MODE ?= check

.PHONY: all lib tools samples examples test test-gpu bench compare compare-others compare-tools fuzz \
        valgrind default-data \
        install uninstall clean test-install man abi-check \
        sdist wheel test-package \
        print-build print-libs test-python test-python-sanitize \
        test-gpu-session test-gpu-build \
        format deps deps-test deps-check config-fields config-check \
        docs test-docs FORCE
all: lib tools samples examples
# A build made before the suites moved has their old paths in its .d
# files (tests/test_x.c; tests/loader/, tests/unit/input/test_remote*.c
# before remote/ was a room, tests/unit/loader/test_sampler*.c before
# order/ was one, test_ring*.c and test_failures.c before delivery/):
# they need no rule. vpath takes a path it
# has a rule for as found, in TEST_DIRS' order: a folder suites moved to
# comes before the one they left.
tests/test_%.c: ;
tests/loader/test_%.c: ;
tests/unit/input/test_remote.c: ;
tests/unit/input/test_remote_%.c: ;
tests/unit/loader/test_sampler.c: ;
tests/unit/loader/test_sampler_%.c: ;
tests/unit/loader/test_ring.c: ;
tests/unit/loader/test_ring_%.c: ;
tests/unit/loader/test_failures.c: ;
tests/stress.c: ;

# The CMake package's files (find_package(pinload); made below).
CMAKE_FILES := $(BUILD)/cmake/pinloadConfig.cmake \
               $(BUILD)/cmake/pinloadConfigVersion.cmake
lib: $(BUILD)/libpinload.a $(BUILD)/libpinload.so $(BUILD)/pinload.pc \
     $(BUILD)/pinload-static.pc $(CMAKE_FILES)
tools: $(TOOLS)
samples: $(SAMPLES)
examples: $(EXAMPLES)

# Dependencies: checked once per build directory, installed if missing.
$(DEPS_STAMP): tools/install-deps.sh
	@tools/install-deps.sh --$(DEPS_MODE) build
	@mkdir -p $(@D) && touch $@
$(BUILD)/.deps-test: tools/install-deps.sh
	@tools/install-deps.sh --$(DEPS_MODE) test
	@mkdir -p $(@D) && touch $@
deps: DEPS_MODE := install
deps: $(DEPS_STAMP)
deps-test: DEPS_MODE := install
deps-test: $(BUILD)/.deps-test

$(BUILD)/obj/device/normalize.o: device/normalize.cu device/normalize.h \
                                 | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC,-fvisibility=hidden -c $< -o $@

$(BUILD)/obj/device/gpu_resize.o: device/gpu_resize.cu device/gpu_resize.h \
                                  | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC,-fvisibility=hidden -c $< -o $@

$(BUILD)/obj/device/gpu_mix.o: device/gpu_mix.cu device/gpu_mix.h \
                               common/blend.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC,-fvisibility=hidden -c $< -o $@

# The resampler's loops are written to be vectorised; -O3 lets gcc do it.
$(BUILD)/obj/workers/resample.o: CFLAGS_ALL += -O3

# The simulated CUDA runtime, for CUDA=sim builds (tests/cudasim/cudasim.h;
# its files share tests/cudasim/sim.h), with the GPU decoder's kernels run
# on the host (kernels_sim.c). Its symbols keep default visibility: the
# fake nvJPEG, a shared library, calls them in the program.
CUDASIM_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out \
                   tests/cudasim/nvjpegsim.c,$(wildcard tests/cudasim/*.c)))
$(BUILD)/libcudasim.a: $(CUDASIM_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/obj/tests/cudasim/%.o: CFLAGS_ALL += -fvisibility=default
# The fake nvJPEG (tests/cudasim/nvjpegsim.c), as pinload loads the real
# one; its cuda* and cudasim_* calls resolve in the program that loads it.
NVJPEGSIM := $(if $(and $(SIM),$(HAVE_NVJPEG)),$(BUILD)/libnvjpegsim.so)
$(BUILD)/libnvjpegsim.so: tests/cudasim/nvjpegsim.c tests/cudasim/cudasim.h \
                          | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) \
	    -fvisibility=hidden -shared -Wl,-soname,libnvjpeg.so.13 $(LDFLAGS) \
	    -o $@ $< -ljpeg

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

# The static library is one relocatable object whose hidden symbols are
# made local, so the internals cannot clash with a program's own names.
$(BUILD)/libpinload.a: $(LIB_OBJ)
	$(LD) -r -o $(BUILD)/pinload.o $(LIB_OBJ)
	objcopy --localize-hidden $(BUILD)/pinload.o
	rm -f $@ && ar rcs $@ $(BUILD)/pinload.o

# The ABI's number: the SONAME is libpinload.so.$(SOVERSION) and the
# exported symbols carry the version node PINLOAD_$(SOVERSION) (a linker
# version script made from include/pinload.sym), so an incompatible library
# is told apart at load time. It goes up with every release that breaks the
# ABI (docs/ABI.md): 1 since 0.2 regrouped pl_config.
SOVERSION := 1
$(BUILD)/pinload.map: include/pinload.sym Makefile
	@mkdir -p $(@D)
	@{ echo 'PINLOAD_$(SOVERSION) {'; echo '  global:'; \
	   grep -v '^#' $< | sed 's/.*/    &;/'; \
	   echo '  local: *;'; echo '};'; } > $@

$(BUILD)/libpinload.so: $(LIB_OBJ) $(CUDASIM) $(BUILD)/pinload.map
	$(CC) -shared $(CFLAGS_ALL) $(LDFLAGS) -Wl,-soname,libpinload.so.$(SOVERSION) \
	    -Wl,--version-script,$(BUILD)/pinload.map -o $@ $(LIB_OBJ) $(LIBS)

# The install paths the .pc files were made for: rewritten only when they
# change, so that `make install PREFIX=/other` regenerates the .pc files.
PC_PATHS := $(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(LIBS)
$(BUILD)/.pc-paths: FORCE
	@mkdir -p $(@D)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(PC_PATHS)' ]; then \
	    printf '%s\n' '$(PC_PATHS)' > $@; fi
FORCE:

PC_VERSION = $$(sed -n \
    's/^\#define PL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' \
    include/pinload/version.h | paste -sd.)
PC_HEAD = 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
    'Description: pinned-memory JPEG, PNG and WebP data loader that keeps GPUs fed' \
    "Version: $(PC_VERSION)" 'Cflags: -I$${includedir}'

# pinload.pc links the shared library; pinload-static.pc the archive,
# through LIBDIR/pinload-static (a link to it, alone there), so that no
# libpinload.so can be picked and the -l form keeps the archive after the
# program's objects, where CMake's pkg_check_modules(IMPORTED_TARGET) puts
# libraries (a bare archive path lands among the flags, before them).
$(BUILD)/pinload.pc: $(BUILD)/.pc-paths include/pinload/version.h
	@printf '%s\n' $(PC_HEAD) 'Name: pinload' \
	    'Libs: -L$${libdir} -lpinload' 'Libs.private: $(LIBS)' > $@
$(BUILD)/pinload-static.pc: $(BUILD)/.pc-paths include/pinload/version.h
	@printf '%s\n' $(PC_HEAD) 'Name: pinload-static' \
	    'Libs: -L$${libdir}/pinload-static -lpinload $(LIBS)' > $@

# The CMake package (find_package(pinload)): pinload::pinload and
# pinload::pinload_static, relocatable (paths from the file's own place).
CMAKE_SUBST = sed -e "s|@VERSION@|$(PC_VERSION)|g" \
    -e "s|@VERSION_MAJOR@|$$(echo $(PC_VERSION) | cut -d. -f1)|g" \
    -e 's|@SOVERSION@|$(SOVERSION)|g' \
    -e "s|@LIB_TO_INCLUDE@|$$(realpath -m --relative-to='$(LIBDIR)' '$(INCLUDEDIR)')|g" \
    -e 's|@LIBS@|$(subst $(eval) ,;,$(strip $(LIBS)))|g'
$(BUILD)/cmake/%.cmake: cmake/%.cmake.in $(BUILD)/.pc-paths \
                        include/pinload/version.h
	@mkdir -p $(@D)
	@$(CMAKE_SUBST) $< > $@

# Tools, samples and examples see only include/ (the examples also
# tools/cli.h) and link the static library.
$(BUILD)/pinload-%: tools/%.c tools/cli.h $(BUILD)/libpinload.a $(CUDASIM)
	$(CC) -Iinclude -MMD -MP $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< \
	    $(BUILD)/libpinload.a $(LIBS)

# pinload-bench: with nvcc, its simulated training step is a CUDA kernel;
# on the simulated runtime, which runs no kernel, a copy of the batch back
# and a host function that waits (tools/bench_cuda_sim.c).
ifneq ($(SIM),)
BENCH_CUDA_OBJ := $(BUILD)/obj/tools/bench_cuda_sim.o \
                  $(BUILD)/obj/tools/bench_h2d.o
else ifneq ($(HAVE_NVCC),)
BENCH_CUDA_OBJ := $(BUILD)/obj/tools/bench_cuda.o $(BUILD)/obj/tools/bench_h2d.o
$(BUILD)/obj/tools/bench_cuda.o: tools/bench_cuda.cu tools/bench_cuda.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
else
BENCH_CUDA_OBJ := $(BUILD)/obj/tools/bench_cuda_none.o
endif
# (bench_baseline.o comes from the objects' pattern rule, with its own .d.)
# (bench_args.o, bench_report.o and bench_plan.o likewise: the command line,
# the report, the --plan model.)
BENCH_PARTS := $(BUILD)/obj/tools/bench_baseline.o \
               $(BUILD)/obj/tools/bench_args.o $(BUILD)/obj/tools/bench_report.o \
               $(BUILD)/obj/tools/bench_plan.o
$(BUILD)/pinload-bench: tools/bench.c $(BENCH_PARTS) \
                        $(BENCH_CUDA_OBJ) $(BUILD)/libpinload.a $(CUDASIM)
	$(CC) -Iinclude -MMD -MP $(CFLAGS_ALL) $(LDFLAGS) \
	    -o $@ $< $(BENCH_PARTS) $(BENCH_CUDA_OBJ) \
	    $(BUILD)/libpinload.a $(LIBS) -lturbojpeg

# examples/train_classifier: with nvcc its training step runs as CUDA
# kernels (train_kernels.cu); on the simulated runtime it copies each
# batch back on its stream and runs the host maths (PL_SAMPLE_SIM_CUDA);
# otherwise the example is host-only.
TC_DIR   := examples/train_classifier
ifneq ($(SIM),)
TRAIN_CUDA_OBJ :=
TRAIN_NO_CUDA := -DPL_SAMPLE_SIM_CUDA $(SIM_FLAGS)
else ifneq ($(HAVE_NVCC),)
TRAIN_CUDA_OBJ := $(BUILD)/obj/$(TC_DIR)/train_kernels.o
TRAIN_NO_CUDA :=
$(TRAIN_CUDA_OBJ): $(TC_DIR)/train_kernels.cu $(TC_DIR)/train_classifier.h \
                   include/pinload.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
else
TRAIN_CUDA_OBJ :=
TRAIN_NO_CUDA := -DPL_SAMPLE_NO_CUDA
endif
$(BUILD)/examples/train_classifier: $(TC_DIR)/train_classifier.c \
        $(TC_DIR)/train_classifier.h tools/cli.h \
        $(TRAIN_CUDA_OBJ) $(BUILD)/libpinload.a $(CUDASIM)
	@mkdir -p $(@D)
	$(CC) -Iinclude -MMD -MP $(TRAIN_NO_CUDA) $(CFLAGS_ALL) $(LDFLAGS) \
	    -o $@ $< $(TRAIN_CUDA_OBJ) $(BUILD)/libpinload.a $(LIBS)

# With CUDA (real or simulated), samples/train_loop and
# examples/data_parallel call the runtime themselves (PL_SAMPLE_CUDA): to
# ask whether there is a GPU, and for a stream on the loader's.
# (-isystem: nccl.h's declarations are not all prototypes.)
ifneq ($(SIM),)
SAMPLE_CUDA := -DPL_SAMPLE_CUDA $(SIM_FLAGS)
else ifneq ($(HAVE_CUDA),)
SAMPLE_CUDA := -DPL_SAMPLE_CUDA -isystem $(CUDA_HOME)/include
else
SAMPLE_CUDA :=
endif

# examples/data_parallel: its ranks all-reduce with NCCL where the build
# found it (dp_collective.c, PL_SAMPLE_NCCL), and through shared memory
# always; with CUDA it asks the runtime whether there is a GPU before
# giving each rank its local rank's.
DP_DIR   := examples/data_parallel
DP_OBJ   := $(BUILD)/obj/$(DP_DIR)/data_parallel.o \
            $(BUILD)/obj/$(DP_DIR)/dp_collective.o
DP_FLAGS := $(SAMPLE_CUDA)
DP_LIBS  :=
ifneq ($(HAVE_NCCL),)
DP_FLAGS += -DPL_SAMPLE_NCCL -isystem $(NCCL_HOME)/include
DP_LIBS  := -L$(NCCL_LIBDIR) -lnccl -Wl,-rpath,$(NCCL_LIBDIR)
endif
$(DP_OBJ): $(BUILD)/obj/$(DP_DIR)/%.o: $(DP_DIR)/%.c $(DP_DIR)/dp_collective.h \
           tools/cli.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) -Iinclude -MMD -MP $(DP_FLAGS) $(CFLAGS_ALL) -c $< -o $@
$(BUILD)/examples/data_parallel: $(DP_OBJ) $(BUILD)/libpinload.a $(CUDASIM)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $(DP_OBJ) $(BUILD)/libpinload.a \
	    $(DP_LIBS) $(LIBS) -lrt

$(BUILD)/samples/%: samples/%.c $(BUILD)/libpinload.a $(CUDASIM)
	@mkdir -p $(@D)
	$(CC) -Iinclude -MMD -MP $(SAMPLE_CUDA) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< \
	    $(BUILD)/libpinload.a $(LIBS)

# Every object nvcc builds (tools/no-cxx-check.sh reads them).
CU_OBJ := $(filter %/normalize.o %/gpu_resize.o %/gpu_mix.o,$(LIB_OBJ)) \
          $(filter %/bench_cuda.o,$(BENCH_CUDA_OBJ)) $(TRAIN_CUDA_OBJ)

# Tests link the objects themselves, so they can reach the internals.
TEST_HDR := $(wildcard tests/*.h) tests/fuzz/harness.h \
            tests/fuzz/loader_harness.h tests/fuzz/tar_harness.h
$(BUILD)/tests/test_%: test_%.c $(TEST_HDR) $(LIB_OBJ) \
                  $(CUDASIM) $(NVJPEGSIM) \
                  | $(BUILD)/.deps-test
	@mkdir -p $(@D)
	$(CC) $(TEST_INC) $(CPPFLAGS_ALL) $(SIM_FLAGS) $(CFLAGS_ALL) $(LDFLAGS) \
	    -o $@ $< $(LIB_OBJ) $(TEST_LINK) $(LIBS)

# The stress program uses the public API only, like a user's program.
$(STRESS): tests/system/stress.c tests/jpegwrite.h $(BUILD)/libpinload.a \
           $(CUDASIM)
	@mkdir -p $(@D)
	$(CC) -Iinclude -Itests -MMD -MP $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< \
	    $(BUILD)/libpinload.a $(LIBS)

# test_faults links its own build of the library, in which allocations,
# thread creation, mlock and read go through the test's hooks.
FAULT_OBJ := $(LIB_SRC:%.c=$(BUILD)/fault-obj/%.o) \
             $(filter %/normalize.o %/gpu_resize.o %/gpu_mix.o,$(LIB_OBJ))
$(BUILD)/fault-obj/%.o: %.c tests/faults/faults.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS_ALL) -DPL_FAULT_INJECTION -include tests/faults/faults.h \
	    $(CFLAGS_ALL) -c $< -o $@
$(BUILD)/tests/test_faults: tests/system/test_faults.c $(TEST_HDR) \
                            tests/faults/faults.h $(FAULT_OBJ) $(CUDASIM) \
                            | $(BUILD)/.deps-test
	@mkdir -p $(@D)
	$(CC) $(TEST_INC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< \
	    $(FAULT_OBJ) $(TEST_LINK) $(LIBS)

# The launchers' variables are unset: inside a torchrun, SLURM or MPI job
# they would shard every loader the tests make.
LAUNCHER_VARS := RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE SLURM_PROCID \
                 SLURM_NTASKS SLURM_LOCALID SLURM_NTASKS_PER_NODE \
                 SLURM_TASKS_PER_NODE SLURM_NODEID OMPI_COMM_WORLD_RANK \
                 OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK \
                 OMPI_COMM_WORLD_LOCAL_SIZE PMI_RANK PMI_SIZE \
                 MPI_LOCALRANKID MPI_LOCALNRANKS
NO_LAUNCHER := env $(foreach v,$(LAUNCHER_VARS),-u $(v))
# After the host suites, the CUDA-path suites run on the simulated runtime, in $(BUILD)/sim, with the same
# sanitizers: test_cudasim* (the simulator itself), test_cuda* (the CUDA
# backend's ordering, faults, bytes and devices; the tools and samples on
# it) and the loader suites
# (test_loader_*) with every loader on simulated CUDA
# (PINLOAD_TEST_DEVICE=cuda).
# The README's two commands install what they need (as root).
test bench: DEPS_MODE := install

ifneq ($(SIM),)
test: $(SIM_TEST_BIN) $(TOOLS) $(SAMPLES) $(EXAMPLES)
	@set -e; for t in $(SIM_TEST_BIN); do \
	    echo "== $$t (simulated CUDA)"; $(NO_LAUNCHER) \
	    PINLOAD_BUILD=$(BUILD) PINLOAD_TEST_DEVICE=cuda \
	    $$t --jobs $(JOBS); done
ifeq ($(SANITIZE),)
	@echo "== tools/gpu-session.sh, small, on the simulated runtime"
	@$(MAKE) --no-print-directory test-gpu-session
endif
else
test: $(TEST_BIN) $(STRESS) $(TOOLS) $(SAMPLES) $(EXAMPLES) \
      $(BUILD)/libpinload.so
	@echo "== the dependency rule of docs/ARCHITECTURE.md"
	@tools/deps-check.sh
	@set -e; for t in $(TEST_BIN); do \
	    echo "== $$t"; $(NO_LAUNCHER) PINLOAD_BUILD=$(BUILD) \
	    $$t --jobs $(JOBS); done
	@echo "== $(STRESS)"; $(NO_LAUNCHER) $(STRESS)
ifeq ($(SANITIZE),)
	@echo "== nothing built needs the C++ runtime (tools/no-cxx-check.sh)"
	@tools/no-cxx-check.sh $(BUILD)/libpinload.a $(BUILD)/libpinload.so \
	    $(TOOLS) $(SAMPLES) $(EXAMPLES) $(CU_OBJ)
ifneq ($(HAVE_NVCC),)
	@echo "== tests/gpu compiled and linked (running them needs a GPU)"
	@$(MAKE) --no-print-directory test-gpu-build
	@tools/no-cxx-check.sh $(BUILD)/tests/gpu/test_cuda
endif
	@echo "== exported symbols against include/pinload.sym"
	@$(MAKE) --no-print-directory abi-check
	@echo "== the files written from pl_config (tools/config-fields.py)"
	@$(MAKE) --no-print-directory config-check
	@echo "== install into two prefixes, out-of-tree C and C++ builds"
	@$(MAKE) --no-print-directory test-install
	@echo "== the Python package (pip install ./python, pytest)"
	@$(MAKE) --no-print-directory test-python
	@echo "== the sdist and the manylinux wheel, installed and run"
	@$(MAKE) --no-print-directory test-package
	@echo "== the docs site: built, links checked, examples run"
	@$(MAKE) --no-print-directory test-docs
endif
ifneq ($(HAVE_CUDA),)
	@$(MAKE) --no-print-directory CUDA=sim BUILD=$(BUILD)/sim test
else
	@echo "== simulated-CUDA suites skipped: $(if $(filter 0,$(CUDA)),CUDA=0,no CUDA toolkit headers in $(CUDA_HOME)/include)"
endif
endif

# The Python package as users install it (tools/wheel.sh): the sdist
# (which builds from itself alone), the manylinux wheel made from it
# (build/wheelhouse), and that wheel installed in a fresh environment.
sdist: | $(BUILD)/.deps-test
	@PINLOAD_BUILD=$(BUILD) tools/wheel.sh sdist
wheel: | $(BUILD)/.deps-test
	@PINLOAD_BUILD=$(BUILD) tools/wheel.sh wheel
test-package: $(BUILD)/pinload-mkdata | $(BUILD)/.deps-test
	@PINLOAD_BUILD=$(BUILD) tools/wheel.sh wheel
	@PINLOAD_BUILD=$(BUILD) tools/wheel.sh test

# The Python package in a virtual environment (tools/test-python.sh): plain
# builds only (the extension links the library without sanitizers).
test-python: $(TOOLS) lib | $(BUILD)/.deps-test
	@$(NO_LAUNCHER) PINLOAD_BUILD=$(BUILD) tools/test-python.sh

# The package's thread and lifetime tests with the extension and the
# library under a sanitizer (SANITIZE=address,undefined or thread), in
# build/pyenv (test-python makes it); the tools from a plain build.
test-python-sanitize:
	@$(NO_LAUNCHER) SANITIZE=$(SANITIZE) tools/test-python-sanitize.sh

# What python/setup.py links the extension with: the build folder (its
# libpinload.a) and the libraries beside it.
print-build:
	@echo $(BUILD)
print-libs:
	@echo $(LIBS)

DATA ?= data/generated
BENCH_ARGS ?=
# The default dataset, generated when DATA is left at it and it is missing.
default-data: $(BUILD)/pinload-mkdata
	@if [ "$(DATA)" = data/generated ] && [ ! -d data/generated ]; then \
	    echo "== generating the default dataset in data/generated"; \
	    $(BUILD)/pinload-mkdata --out data/generated; fi
bench: all $(BUILD)/.deps-bench default-data
	$(BUILD)/pinload-bench --data $(DATA) --plot $(BUILD)/bench.png \
	    --csv $(BUILD)/bench.csv --json $(BUILD)/bench.json $(BENCH_ARGS)
	@echo "plot: $(BUILD)/bench.png  table: $(BUILD)/bench.csv, $(BUILD)/bench.json"
# PyTorch's DataLoader (or Pillow) beside pinload on the same data, on the
# host or delivered to the GPU (COMPARE_ARGS="--device cuda ..."); uses
# python3 where it has torch and torchvision, else sets up
# build/compare-venv from the package index the first time.
compare: all $(BUILD)/.deps-compare default-data
	COMPARE_VENV=$(BUILD)/compare-venv tools/compare/run.sh $(DATA) \
	    --bench $(BUILD)/pinload-bench $(COMPARE_ARGS)

# NVIDIA DALI's and FFCV's CPU pipelines beside pinload on the same data
# and cores (tools/compare/others.sh): DALI and FFCV are set up in
# build/compare-others-venv the first time (a few GB; FFCV builds against
# OpenCV and TurboJPEG, installed when run as root).
compare-others: all default-data
	tools/compare/others.sh $(DATA) --bench $(BUILD)/pinload-bench \
	    $(COMPARE_ARGS)

# The measurements behind docs/BENCHMARKS.md's decode ceiling and resampler
# choice (the second needs libyuv-dev).
compare-tools: $(BUILD)/.deps-compare $(BUILD)/compare-ceiling \
               $(BUILD)/compare-resize
$(BUILD)/.deps-compare: tools/install-deps.sh
	@tools/install-deps.sh --$(DEPS_MODE) compare
	@mkdir -p $(@D) && touch $@
$(BUILD)/compare-ceiling: tools/compare/ceiling.c
	$(CC) -O2 -std=c11 -D_GNU_SOURCE -o $@ $< -ljpeg
$(BUILD)/compare-resize: tools/compare/resize_libyuv.c $(BUILD)/obj/workers/resample.o \
                         $(BUILD)/obj/common/grow.o
	$(CC) -O2 -std=c11 -D_GNU_SOURCE -Iinclude -o $@ $< \
	    $(BUILD)/obj/workers/resample.o $(BUILD)/obj/common/grow.o -lyuv -lm

$(BUILD)/.deps-bench: tools/install-deps.sh
	@tools/install-deps.sh --$(DEPS_MODE) bench
	@mkdir -p $(@D) && touch $@

# libFuzzer over the decode and augment path, seeded with ../shared/data's
# hard cases and photos and the PNG and WebP fixtures (each behind an
# 8-byte configuration header): the signature takes inputs to each row
# of the table of formats (codecs/).
# Every crash it finds belongs in tests/fuzz/regressions, replayed by
# test_fuzz in every `make test`.
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SRC := $(COMMON_SRC) $(CODECS_SRC) workers/decode.c \
            workers/resample.c workers/augment.c workers/fileio.c \
            workers/sample.c $(OPS_SRC)
$(FUZZ_DIR)/fuzz_decode: tests/fuzz/fuzz_decode.c tests/fuzz/harness.h \
                         $(FUZZ_SRC) | $(BUILD)/.deps-fuzz
	@mkdir -p $(@D)
	clang -g -O1 -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -o $@ \
	    tests/fuzz/fuzz_decode.c $(FUZZ_SRC) -ljpeg $(IMAGE_LIBS) -lm
$(BUILD)/.deps-fuzz: tools/install-deps.sh
	@tools/install-deps.sh --$(DEPS_MODE) fuzz
	@mkdir -p $(@D) && touch $@
# libFuzzer over the whole loader (host backend): each input is a
# configuration and a hostile file tree (tests/fuzz/loader_harness.h);
# what it finds belongs in tests/fuzz/regressions-loader, replayed by
# test_fuzz_loader in every `make test`.
FUZZ_LOADER_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_LOADER_SRC := $(COMMON_SRC) $(CODECS_SRC) $(INDEX_SRC) $(CATALOG_SRC) \
                   $(REMOTE_SRC) $(WORKERS_SRC) $(INPUT_SRC) \
                   $(filter-out device/backend_cuda.c device/nvjpeg.c,$(DEVICE_SRC)) \
                   $(ORDER_SRC) $(DELIVERY_SRC) $(LOADER_SRC)
$(FUZZ_DIR)/fuzz_loader: tests/fuzz/fuzz_loader.c tests/fuzz/loader_harness.h \
                         tests/jpegwrite.h $(FUZZ_LOADER_SRC) \
                         | $(BUILD)/.deps-fuzz
	@mkdir -p $(@D)
	clang -g -O1 -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -D_GNU_SOURCE -pthread -Iinclude -o $@ \
	    tests/fuzz/fuzz_loader.c $(FUZZ_LOADER_SRC) -ljpeg $(IMAGE_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm
# libFuzzer over the tar shard indexer (index/tar.c), seeded with
# tests/fuzz/regressions-tar, which test_fuzz_tar replays.
FUZZ_TAR_SECONDS ?= 30
# The loader over tar shards (fuzz_loader with PINLOAD_FUZZ_SHARDS=1);
# its finds go to tests/fuzz/regressions-shards, replayed by
# test_fuzz_loader.
FUZZ_SHARDS_SECONDS ?= 30
# The tar reader and the little of common/ it calls.
FUZZ_TAR_SRC := index/tar.c common/grow.c common/error.c common/file.c
$(FUZZ_DIR)/fuzz_tar: tests/fuzz/fuzz_tar.c tests/fuzz/tar_harness.h \
                      $(FUZZ_TAR_SRC) index/tar.h | $(BUILD)/.deps-fuzz
	@mkdir -p $(@D)
	clang -g -O1 -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -o $@ \
	    tests/fuzz/fuzz_tar.c $(FUZZ_TAR_SRC)
fuzz: $(FUZZ_DIR)/fuzz_decode $(FUZZ_DIR)/fuzz_loader $(FUZZ_DIR)/fuzz_tar
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds $(FUZZ_DIR)/corpus-loader
	@n=0; if [ -d ../shared/data ]; then \
	    for f in $$(find ../shared/data/hard ../shared/data/photos \
	                     -type f); do \
	        n=$$((n + 1)); \
	        { printf '\002\000\067\077\001\000\007\003'; cat "$$f"; } \
	            > $(FUZZ_DIR)/seeds/s$$n; done; \
	    echo "== fuzz: $$n seeds from ../shared/data"; \
	else echo "== fuzz: ../shared/data is absent: no seeds"; fi
	@for f in tests/fixtures/formats/*.png tests/fixtures/formats/*.webp; do \
	    { printf '\002\000\067\077\001\000\007\003'; cat "$$f"; } \
	        > $(FUZZ_DIR)/seeds/$$(basename "$$f"); done
	$(FUZZ_DIR)/fuzz_decode -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 \
	    $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds tests/fuzz/regressions
	$(NO_LAUNCHER) $(FUZZ_DIR)/fuzz_loader \
	    -max_total_time=$(FUZZ_LOADER_SECONDS) -max_len=1024 -timeout=30 \
	    -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_DIR)/loader- \
	    -print_final_stats=1 $(FUZZ_DIR)/corpus-loader \
	    tests/fuzz/regressions-loader
	@mkdir -p $(FUZZ_DIR)/corpus-tar $(FUZZ_DIR)/corpus-shards
	$(FUZZ_DIR)/fuzz_tar -max_total_time=$(FUZZ_TAR_SECONDS) \
	    -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_DIR)/tar- -print_final_stats=1 \
	    $(FUZZ_DIR)/corpus-tar tests/fuzz/regressions-tar
	$(NO_LAUNCHER) PINLOAD_FUZZ_SHARDS=1 $(FUZZ_DIR)/fuzz_loader \
	    -max_total_time=$(FUZZ_SHARDS_SECONDS) -max_len=1024 -timeout=30 \
	    -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_DIR)/shards- \
	    -print_final_stats=1 $(FUZZ_DIR)/corpus-shards \
	    tests/fuzz/regressions-shards

# valgrind memcheck over the stress program: full epochs, mid-epoch
# destroys with batches held, bad files; any leak or invalid access fails.
valgrind: $(STRESS) | $(BUILD)/.deps-test
	valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
	    --errors-for-leak-kinds=definite,indirect,possible \
	    --error-exitcode=9 --quiet $(STRESS)

# The GPU session's script (tools/gpu-session.sh) must not rot between the
# rare sessions that have a GPU: a small run of its bench, sweep, training
# and contexts phases on the simulated runtime, every step succeeding and every
# figure present (CUDA=sim builds; make test runs it).
GS_DIR := $(BUILD)/gpu-session-test
# The decode phase's lines (in a variable: a comma inside $(if) would end
# its argument).
GS_DECODE_KEYS := 'decode-generated-u8, 2 workers: cpu' 'auto:gpu'
test-gpu-session: $(TOOLS) $(SAMPLES) $(EXAMPLES) $(NVJPEGSIM)
	@rm -rf $(GS_DIR)
	@$(NO_LAUNCHER) GPU_SESSION_SIM=1 GPU_SESSION_BUILD=$(BUILD) \
	    GPU_SESSION_DIR=$(GS_DIR) OUT=$(GS_DIR)/out \
	    GPU_SESSION_PER_CLASS=30 GPU_SESSION_SECONDS=0.3 \
	    GPU_SESSION_BATCH=32 GPU_SESSION_WORKERS=1,2 \
	    tools/gpu-session.sh h2d overlap sweep-generated \
	    $(if $(NVJPEGSIM),decode) train contexts \
	    >/dev/null
	@s=$(GS_DIR)/out; cat $$s/summary.txt; \
	if grep ' rc=' $$s/summary.txt | grep -v ' rc=0 '; then \
	    echo "test-gpu-session: a step failed"; exit 1; fi; \
	for k in 'h2d-u8:' 'h2d-f32:' 'pin on ' 'pin off ' 'pin managed ' \
	    'overlap-1x: pin on' 'overlap-2x: pin off' 'sweep-generated-pin ' \
	    'sweep-generated-eval-f32-gpunorm-off' \
	    $(if $(NVJPEGSIM),$(GS_DECODE_KEYS)); do \
	    grep -q "$$k" $$s/figures.txt || { cat $$s/figures.txt; \
	    echo "test-gpu-session: no '$$k' in figures.txt"; exit 1; }; done; \
	tar -tzf $$s/gpu-results.tar.gz | grep -q logs/train-c.log || { \
	    echo "test-gpu-session: no logs in gpu-results.tar.gz"; exit 1; }; \
	grep -q '^cuda-context .*rc=0 ' $$s/summary.txt || { \
	    echo "test-gpu-session: the contexts phase did not run"; exit 1; }

# tests/gpu links as every program does: with the library's own list
# (LIBS) and the C compiler, its kernels built as the library's are.
# test-gpu-build only compiles and links (make test runs it wherever nvcc
# is, so a link break shows before a GPU sees it); test-gpu runs them.
GPU_TEST_VARS = BUILD=$(abspath $(BUILD)) CUDA_HOME=$(CUDA_HOME) \
    NVCC=$(NVCC) ARCH="$(NVCC_GENCODE)" NVCC_HOST=$(NVCC_HOST) CC="$(CC)" \
    CFLAGS="$(CFLAGS) $(WARN)" LDFLAGS="$(LDFLAGS)" LIBS="$(LIBS)"
test-gpu-build: lib
	@$(MAKE) --no-print-directory -C tests/gpu $(GPU_TEST_VARS) build
test-gpu: lib
	$(MAKE) -C tests/gpu $(GPU_TEST_VARS) run

# Man pages, made from each tool's --help (tools/help2man.sh).
MANPAGES := $(TOOLS:$(BUILD)/%=$(BUILD)/man/%.1)
# The API's pages (section 3), from the header's comments; MANIFEST lists
# them.
MAN3 := $(BUILD)/man/man3/MANIFEST
man: $(MANPAGES) $(MAN3)
$(BUILD)/man/%.1: $(BUILD)/% tools/help2man.sh
	@mkdir -p $(@D)
	tools/help2man.sh $< > $@
$(MAN3): include/pinload.h include/pinload/version.h tools/man3.sh
	tools/man3.sh include/pinload.h $(@D)

# The docs site (tools/docs/site.sh): docs/*.md, the README, the man pages
# and the Python docstrings, built by MkDocs (pinned in
# docs/requirements.txt, installed from the package index into
# $(BUILD)/docs-venv) into $(BUILD)/docs/site, every link and anchor
# checked. test-docs also runs the examples the pages mark to run, and
# shows that a broken link, anchor or example fails; it skips, saying so,
# where the package index cannot be reached.
docs: man
	@PINLOAD_BUILD=$(BUILD) tools/docs/site.sh build
test-docs: man lib $(TOOLS) $(SAMPLES)
	@$(NO_LAUNCHER) PINLOAD_BUILD=$(BUILD) CC="$(CC)" LIBS="$(LIBS)" \
	    tools/docs/site.sh test

TOOL_NAMES := $(notdir $(TOOLS))
install: lib tools man
	install -d $(DESTDIR)$(INCLUDEDIR)/pinload $(DESTDIR)$(LIBDIR)/pkgconfig \
	    $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 644 include/pinload.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 include/pinload/*.h $(DESTDIR)$(INCLUDEDIR)/pinload/
	install -m 644 $(BUILD)/libpinload.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libpinload.so \
	    $(DESTDIR)$(LIBDIR)/libpinload.so.$(SOVERSION)
	ln -sf libpinload.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpinload.so
	install -m 644 $(BUILD)/pinload.pc $(BUILD)/pinload-static.pc \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -d $(DESTDIR)$(LIBDIR)/pinload-static \
	    $(DESTDIR)$(LIBDIR)/cmake/pinload
	ln -sf ../libpinload.a $(DESTDIR)$(LIBDIR)/pinload-static/libpinload.a
	install -m 644 $(CMAKE_FILES) $(DESTDIR)$(LIBDIR)/cmake/pinload/
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(MANPAGES) $(DESTDIR)$(MANDIR)/man1/
	install -d $(DESTDIR)$(MANDIR)/man3
	sed 's|^|$(BUILD)/man/man3/|' $(MAN3) | \
	    xargs install -m 644 -t $(DESTDIR)$(MANDIR)/man3/

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/pinload.h \
	    $(DESTDIR)$(LIBDIR)/libpinload.a \
	    $(DESTDIR)$(LIBDIR)/libpinload.so \
	    $(DESTDIR)$(LIBDIR)/libpinload.so.$(SOVERSION) \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/pinload.pc \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/pinload-static.pc \
	    $(TOOL_NAMES:%=$(DESTDIR)$(BINDIR)/%) \
	    $(TOOL_NAMES:%=$(DESTDIR)$(MANDIR)/man1/%.1)
	[ ! -f $(MAN3) ] || sed 's|^|$(DESTDIR)$(MANDIR)/man3/|' $(MAN3) | \
	    xargs rm -f
	rm -rf $(DESTDIR)$(INCLUDEDIR)/pinload \
	    $(DESTDIR)$(LIBDIR)/pinload-static \
	    $(DESTDIR)$(LIBDIR)/cmake/pinload

# What the built libraries export, against include/pinload.sym.
abi-check: lib
	tools/abi-check.sh include/pinload.sym $(BUILD)/libpinload.so \
	    $(BUILD)/libpinload.a

# pl_config's fields, listed once in include/pinload.h: the Python
# binding's table, keywords, types and docs are written from it
# (tools/config-fields.py). config-check names each stale file, and holds
# the README's configuration table, the header's comments and Python's
# texts against the header and the library: config-defaults, a program
# the script writes from the header's fields, prints what
# pl_config_default() gives.
config-fields:
	@tools/config-fields.py
config-check: $(BUILD)/config-defaults
	@tools/config-fields.py --check --defaults $(BUILD)/config-defaults
$(BUILD)/config-defaults: include/pinload.h tools/config-fields.py \
                          $(BUILD)/libpinload.a $(CUDASIM)
	@tools/config-fields.py --defaults-program > $@.c
	$(CC) -Iinclude $(CFLAGS_ALL) $(LDFLAGS) -o $@ $@.c \
	    $(BUILD)/libpinload.a $(LIBS)

# Every #include against the dependency rule (docs/ARCHITECTURE.md).
deps-check:
	@tools/deps-check.sh

# Installs into two prefixes (one through DESTDIR) and builds a C and a C++
# program against each, shared and static (tests/install/check.sh).
test-install: all
	tests/install/check.sh $(BUILD)

format:
	clang-format -i include/*.h include/pinload/*.h common/*.[ch] loader/*.[ch] \
	    workers/*.[ch] workers/ops/*.[ch] index/*.[ch] catalog/*.[ch] \
	    remote/*.[ch] input/*.[ch] device/*.[ch] device/*.cu tools/*.[ch] \
	    order/*.[ch] delivery/*.[ch] tools/*.cu samples/*.c \
	    examples/*/*.[ch] examples/*/*.cu \
	    tests/*.h tests/*/*.[ch] tests/unit/*/*.c tests/gpu/*.cu \
	    tools/compare/*.c

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
