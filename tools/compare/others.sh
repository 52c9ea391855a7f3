#!/bin/sh
# Compare pinload with NVIDIA DALI's and FFCV's CPU pipelines on $1 (extra
# arguments go to others.py). The Python used: $COMPARE_PYTHON if set; else
# python3 when it already has DALI and FFCV; else a local virtual
# environment with DALI (nvidia-dali-cuda120) and FFCV from the package
# index (in build/compare-others-venv, or $COMPARE_OTHERS_VENV). FFCV
# builds from source against OpenCV and TurboJPEG with a C++ compiler: the
# Debian packages are installed when this runs as root and they are
# missing, else named; it also pulls in PyTorch (a few GB). If FFCV cannot
# be installed, others.py skips it, saying so; it is tried once a virtual
# environment (remove $venv/.ffcv-tried to try again).
set -eu
data=${1:?usage: tools/compare/others.sh DATA [others.py options]}
shift
py=${COMPARE_PYTHON:-}
if [ -z "$py" ] && python3 -c 'import nvidia.dali, ffcv.loader' 2>/dev/null; then
    py=python3
fi
if [ -z "$py" ]; then
    venv=${COMPARE_OTHERS_VENV:-build/compare-others-venv}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --upgrade pip
    fi
    py=$venv/bin/python
    "$py" -c 'import nvidia.dali' 2>/dev/null ||
        "$venv/bin/pip" install -q nvidia-dali-cuda120 ||
        echo "others.sh: DALI (nvidia-dali-cuda120) could not be installed" >&2
    if ! "$py" -c 'import ffcv.loader' 2>/dev/null &&
            [ ! -e "$venv/.ffcv-tried" ]; then
        need=
        for p in libopencv-dev pkg-config libturbojpeg0-dev g++; do
            dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
        done
        if [ -n "$need" ] && [ "$(id -u)" = 0 ] &&
                command -v apt-get >/dev/null; then
            apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                    --no-install-recommends $need >/dev/null || true
        elif [ -n "$need" ]; then
            echo "others.sh: FFCV's build needs the Debian packages:$need" \
                "(apt-get install them as root)" >&2
        fi
        touch "$venv/.ffcv-tried"
        # FFCV imports Pillow without declaring it
        "$venv/bin/pip" install -q ffcv pillow ||
            echo "others.sh: FFCV could not be installed (see above):" \
                "others.py skips it" >&2
    fi
fi
exec "$py" tools/compare/others.py --data "$data" "$@"
