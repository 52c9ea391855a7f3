#!/bin/sh
# The Python package under a sanitizer: libpinload.a built with the
# Makefile's SANITIZE, the extension compiled and linked with the same
# -fsanitize, installed into a folder of its own (BUILD/site, put first
# on PYTHONPATH: no environment is changed), and pytest run with the
# sanitizer's runtime preloaded, since CPython is not built with it.
#   SANITIZE=address,undefined | thread   required
#   PINLOAD_PYENV=DIR   the environment with pytest and NumPy (default
#                       build/pyenv, made by tools/test-python.sh)
#   PINLOAD_SAN_TESTS   the test files (default: threads and lifetimes)
# Any report fails the run, and is printed. Leaks are not looked for here
# (CPython keeps its own allocations at exit); the C suites are run under
# LeakSanitizer. Left out: under TSan, tests that fork a process with
# threads (TSan refuses that) or count the process's threads (TSan adds
# one); under ASan, the one that bounds resident memory over 200 loaders
# (ASan's quarantine keeps what is freed). gcc's runtimes
# (cc -print-file-name) are preloaded.
set -eu
cd "$(dirname "$0")/.."
san=${SANITIZE:?set SANITIZE=address,undefined or SANITIZE=thread}
venv=${PINLOAD_PYENV:-build/pyenv}
build=build/py-san-$(echo "$san" | tr , -)
cc=${CC:-cc}
default_tests="python/tests/test_survival.py python/tests/test_ownership.py
python/tests/test_loader.py python/tests/test_warnings.py
python/tests/test_extras.py"
tests=${PINLOAD_SAN_TESTS:-$default_tests}

[ -x "$venv/bin/python" ] || {
    echo "test-python-sanitize: no $venv: run tools/test-python.sh first," \
        "or set PINLOAD_PYENV" >&2
    exit 1
}
case $san in
thread)
    preload=$($cc -print-file-name=libtsan.so)
    deselect="not keyboard_interrupt and not ctrl_c and not worker_processes" ;;
*address*)
    preload=$($cc -print-file-name=libasan.so)
    case $san in *undefined*)
        preload="$preload $($cc -print-file-name=libubsan.so)" ;; esac
    deselect="not leaves_threads_and_memory_flat" ;;
*)
    echo "test-python-sanitize: SANITIZE=$san: address,undefined or" \
        "thread" >&2
    exit 1 ;;
esac

echo "test-python-sanitize: the package against a $san build, in $build"
mkdir -p "$build"
rm -rf "$build/site" "$build"/report.*
CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=$san" \
LDFLAGS="-fsanitize=$san" \
PINLOAD_MAKE_ARGS="SANITIZE=$san CUDA=0 BUILD=$build" \
    "$venv/bin/python" -m pip -q --disable-pip-version-check install \
    --no-build-isolation --no-deps --target "$build/site" ./python

log=$(pwd)/$build/report
opts="log_path=$log"
status=0
# shellcheck disable=SC2086 # the test files are words
LD_PRELOAD="$preload" PYTHONPATH="$(pwd)/$build/site" \
ASAN_OPTIONS="detect_leaks=0:$opts" UBSAN_OPTIONS="print_stacktrace=1:$opts" \
TSAN_OPTIONS="$opts" PINLOAD_BUILD=${PINLOAD_BUILD:-build} \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    ${deselect:+-k "$deselect"} $tests || status=$?
if ls "$log".* >/dev/null 2>&1; then
    cat "$log".*
    echo "test-python-sanitize: $san reported the above" >&2
    exit 1
fi
[ $status = 0 ] || exit $status
echo "test-python-sanitize: no $san report"
