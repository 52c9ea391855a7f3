#!/bin/sh
# Installs the Debian packages pinload needs, or says which to install.
#   tools/install-deps.sh build   what `make` needs
#   tools/install-deps.sh test    what `make test` needs on top (with
#                                 Python's venv and headers)
#   tools/install-deps.sh bench   what `make bench` needs on top (gnuplot)
#   tools/install-deps.sh fuzz    what `make fuzz` needs (clang, libFuzzer)
#   tools/install-deps.sh compare what `make compare` and `make compare-tools`
#                                 need (python3-venv, libyuv-dev)
#   tools/install-deps.sh nvjpeg  nvJPEG's header for the GPU decoder, from
#                                 the nvidia-nvjpeg wheel into build/nvjpeg
#                                 (build does it too; no Debian package)
#   tools/install-deps.sh all     build, test, bench and fuzz (default)
#   tools/install-deps.sh --check WHAT   only name what is missing
# As root with apt-get, missing packages are installed; otherwise the exact
# apt-get command is printed and the script fails.
set -eu

# --check: never install, only name what is missing (plain `make`);
# --install: install as root (`make deps`, `make test`, `make bench`, CI).
mode=install
case "${1:-}" in
--check) mode=check; shift ;;
--install) mode=install; shift ;;
esac
what=${1:-all}
cc=${CC:-cc}
need=""

have_header() {
    printf '#include <stdio.h>\n#include <%s>\n' "$1" |
        "$cc" -E -x c - >/dev/null 2>&1
}
want() { need="$need $1"; }

check_build() {
    command -v "$cc" >/dev/null 2>&1 || want gcc
    command -v objcopy >/dev/null 2>&1 || want binutils
    have_header jpeglib.h || want libjpeg62-turbo-dev
    have_header turbojpeg.h || want libturbojpeg0-dev # bench --baseline
    have_header spng.h || want libspng-dev            # PNG
    have_header webp/decode.h || want libwebp-dev     # WebP
    have_header zlib.h || want zlib1g-dev             # libspng's static link
    have_header curl/curl.h || want libcurl4-openssl-dev # remote shards
    have_header json-c/json.h || want libjson-c-dev   # config.label_field
}
check_test() {
    command -v djpeg >/dev/null 2>&1 || want libjpeg-turbo-progs
    command -v gnuplot >/dev/null 2>&1 || want gnuplot-nox # test_bench
    command -v valgrind >/dev/null 2>&1 || want valgrind
    command -v pkg-config >/dev/null 2>&1 || want pkg-config # test-install
    command -v c++ >/dev/null 2>&1 || want g++                # test-install
    command -v cmake >/dev/null 2>&1 || want cmake            # test-install
    command -v script >/dev/null 2>&1 || want bsdutils        # tools on a tty
    check_python
}
# The Python package: an interpreter with venv and its C headers.
check_python() {
    py=${PYTHON:-python3}
    if ! command -v "$py" >/dev/null 2>&1; then
        want "python3 python3-venv python3-dev"
        return
    fi
    "$py" -c 'import ensurepip, venv' >/dev/null 2>&1 || want python3-venv
    "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(
    sysconfig.get_paths()["include"], "Python.h")))' >/dev/null 2>&1 ||
        want python3-dev
}

check_fuzz() {
    printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }\n' |
        clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 ||
        want "clang libclang-rt-14-dev"
}
check_bench() {
    command -v gnuplot >/dev/null 2>&1 || want gnuplot-nox
}
check_compare() {
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || want python3-venv
    have_header libyuv.h || want libyuv-dev
}

# nvJPEG's header (nvjpeg.h), for the GPU decoder's build: the CUDA
# toolkit's, else the one in the nvidia-nvjpeg wheel from the package
# index, unpacked into build/nvjpeg (never committed; the library itself is
# loaded at run time, never linked). Only where the toolkit's runtime
# headers are; without the header the library builds without the GPU
# decoder, so `check` only says so.
nvjpeg_header() {
    cuda=${CUDA_HOME:-/usr/local/cuda}
    [ -f "$cuda/include/cuda_runtime_api.h" ] || return 0
    [ -f "$cuda/include/nvjpeg.h" ] && return 0
    ls build/nvjpeg/nvidia/cu*/include/nvjpeg.h >/dev/null 2>&1 && return 0
    if [ "$mode" = check ]; then
        echo "install-deps: no nvjpeg.h: pinload builds without its GPU" \
            "decoder (make deps fetches the nvidia-nvjpeg wheel's)" >&2
        return 0
    fi
    py=${PYTHON:-python3}
    rm -rf build/nvjpeg && mkdir -p build/nvjpeg
    if "$py" -m pip -q --disable-pip-version-check download --no-deps \
        -d build/nvjpeg 'nvidia-nvjpeg>=13,<14' >/dev/null 2>&1 &&
        "$py" -m zipfile -e build/nvjpeg/nvidia_nvjpeg-*.whl build/nvjpeg; then
        echo "install-deps: nvjpeg.h from $(basename build/nvjpeg/*.whl)"
    else
        echo "install-deps: cannot fetch the nvidia-nvjpeg wheel: pinload" \
            "builds without its GPU decoder" >&2
    fi
}

case "$what" in
build) check_build; nvjpeg_header ;;
nvjpeg) nvjpeg_header ;;
test) check_test ;;
bench) check_bench ;;
fuzz) check_fuzz ;;
compare) check_compare ;;
all) check_build; nvjpeg_header; check_test; check_bench; check_fuzz ;;
*) echo "usage: $0 build|test|bench|fuzz|compare|nvjpeg|all" >&2; exit 2 ;;
esac

[ -z "$need" ] && exit 0

if [ "$mode" = install ] && [ "$(id -u)" = 0 ] &&
    command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing:$need"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $need >/dev/null
    exit 0
fi
echo "install-deps: missing Debian packages:$need" >&2
echo "install-deps: run: sudo apt-get install$need (or: make deps)" >&2
exit 1
