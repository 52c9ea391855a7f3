#!/bin/sh
# Compare pinload with PyTorch's DataLoader on $1 (extra arguments go to
# compare.py). The Python used: $COMPARE_PYTHON if set; else python3 when
# it already has torch and torchvision (a GPU machine's image, say); else a
# local virtual environment with torch, torchvision and Pillow from the
# package index (once, in build/compare-venv). If torch cannot be
# installed, the comparison falls back to Pillow alone.
set -eu
data=${1:?usage: tools/compare/run.sh DATA [compare.py options]}
shift
py=${COMPARE_PYTHON:-}
if [ -z "$py" ] && python3 -c 'import torch, torchvision' 2>/dev/null; then
    py=python3
fi
if [ -z "$py" ]; then
    venv=${COMPARE_VENV:-build/compare-venv}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --upgrade pip
        "$venv/bin/pip" install -q torch torchvision pillow ||
            "$venv/bin/pip" install -q pillow
    fi
    py=$venv/bin/python
fi
exec "$py" tools/compare/compare.py --data "$data" "$@"
