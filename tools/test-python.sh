#!/bin/sh
# The Python package's tests, as a user would meet it: a virtual
# environment (build/pyenv, made once), NumPy, pytest, mypy, PyTorch,
# torchvision, PyTorch Lightning, timm and Accelerate from the package index, `pip install
# ./python` from this checkout, then pytest.
#   PINLOAD_TEST_TORCH=1   PyTorch is required (CI): failing to install it
#                          fails the run
#   PINLOAD_TEST_TORCH=0   do not install PyTorch (its tests skip)
#   (unset)                install it if the index can be reached, else say
#                          that its tests are skipped
#   PYTHON=python3.13      the interpreter to test with (CPython 3.10 or
#                          newer: the extension is the limited API's)
#   PINLOAD_BUILD=build    where the tools are (pinload-mkdata, -dump)
#   PINLOAD_PYENV=DIR      the virtual environment (default build/pyenv)
# Then the same tests under every other CPython 3.10+ of the machine
# (tools/pythons.sh finds them, and names each minor it did not find), each
# in its own environment (BUILD/pyenv-3.N) with NumPy and pytest only: the
# package built for it, its tests that need no PyTorch.
#   PINLOAD_TEST_PYTHONS=all    every one found (default)
#   PINLOAD_TEST_PYTHONS=none   none
#   PINLOAD_TEST_PYTHONS="python3.10 /opt/py/bin/python3.12"   these
set -eu
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
build=${PINLOAD_BUILD:-build}
venv=${PINLOAD_PYENV:-$build/pyenv}
torch=${PINLOAD_TEST_TORCH:-}

if [ ! -x "$venv/bin/python" ]; then
    echo "test-python: making a virtual environment in $venv"
    "$python" -m venv "$venv"
fi
pip() { "$venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
pip install "numpy>=1.22" pytest mypy
if [ "$torch" != 0 ] && ! "$venv/bin/python" -c 'import torch' 2>/dev/null
then
    echo "test-python: installing PyTorch from the package index"
    if ! pip install torch; then
        [ "$torch" = 1 ] && { echo "test-python: PyTorch is required" >&2; exit 1; }
        echo "test-python: PyTorch could not be installed: its tests skip"
    fi
fi
# torchvision, for the transforms' reference tests
# (python/tests/test_transforms_ref.py: each op against
# torchvision.transforms.v2.functional), under the same rule.
if [ "$torch" != 0 ] && "$venv/bin/python" -c 'import torch' 2>/dev/null &&
    ! "$venv/bin/python" -c 'import torchvision' 2>/dev/null
then
    echo "test-python: installing torchvision from the package index"
    if ! pip install torchvision; then
        [ "$torch" = 1 ] && { echo "test-python: torchvision is required" >&2; exit 1; }
        echo "test-python: torchvision could not be installed: its tests skip"
    fi
fi
# PyTorch Lightning, for the framework tests (Trainer.fit on a loader),
# under the same rule: required with PINLOAD_TEST_TORCH=1.
if [ "$torch" != 0 ] && "$venv/bin/python" -c 'import torch' 2>/dev/null &&
    ! "$venv/bin/python" -c 'import lightning' 2>/dev/null
then
    echo "test-python: installing PyTorch Lightning from the package index"
    if ! pip install lightning; then
        [ "$torch" = 1 ] && { echo "test-python: Lightning is required" >&2; exit 1; }
        echo "test-python: Lightning could not be installed: its tests skip"
    fi
fi
# timm, for the mixup op's reference test (python/tests/
# test_transforms_mixup_ref.py: each batch against timm's own Mixup),
# under the same rule as Lightning.
if [ "$torch" != 0 ] && "$venv/bin/python" -c 'import torch' 2>/dev/null &&
    ! "$venv/bin/python" -c 'import timm' 2>/dev/null
then
    echo "test-python: installing timm from the package index"
    if ! pip install timm; then
        [ "$torch" = 1 ] && { echo "test-python: timm is required" >&2; exit 1; }
        echo "test-python: timm could not be installed: its tests skip"
    fi
fi
# Hugging Face Accelerate, for the prepare/save_state tests: optional
# whatever PINLOAD_TEST_TORCH says (its tests skip without it).
if [ "$torch" != 0 ] && "$venv/bin/python" -c 'import torch' 2>/dev/null &&
    ! "$venv/bin/python" -c 'import accelerate' 2>/dev/null
then
    echo "test-python: installing Accelerate from the package index"
    pip install accelerate ||
        echo "test-python: Accelerate could not be installed: its tests skip"
fi
# As a user installs it: a wheel built from the checkout.
pip install --force-reinstall --no-deps ./python
# The public API's types (python/pyproject.toml's [tool.mypy]), over the
# package and its examples.
echo "test-python: mypy python/pinload python/examples"
vpy=$(cd "$venv/bin" && pwd)/python
(cd python && "$vpy" -m mypy pinload examples)
# From the root, so that `import pinload` is the installed package.
PINLOAD_BUILD=$build "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    python/tests

# The other Pythons: "3.N PATH" lines.
main=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case ${PINLOAD_TEST_PYTHONS:-all} in
none) others= ;;
all) others=$(tools/pythons.sh) ;;
*)
    others=
    for p in $PINLOAD_TEST_PYTHONS; do
        v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
            { echo "test-python: $p does not run" >&2; exit 1; }
        others="$others
$v $p"
    done
    ;;
esac
echo "test-python: tested with Python $main; next, the others found:" \
    "$(echo "$others" | awk -v m="$main" '$1 != "" && $1 != m {print $1}' |
        paste -sd' ')"
echo "$others" | while read -r v p; do
    [ -n "$v" ] && [ "$v" != "$main" ] || continue
    env=$venv-$v
    echo "test-python: Python $v ($p), the tests that need no PyTorch, in $env"
    [ -x "$env/bin/python" ] || "$p" -m venv "$env"
    "$env/bin/python" -m pip -q --disable-pip-version-check install \
        "numpy>=1.22" pytest
    "$env/bin/python" -m pip -q --disable-pip-version-check install \
        --force-reinstall --no-deps ./python
    PINLOAD_BUILD=$build "$env/bin/python" -m pytest -q -p no:cacheprovider \
        python/tests
done
