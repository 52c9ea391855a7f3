#!/bin/sh
# Set up a local virtual environment with torch, torchvision and Pillow from
# the package index (once, in build/compare-venv), then compare pinload with
# PyTorch's DataLoader on $1 (extra arguments go to compare.py). If torch
# cannot be installed, the comparison falls back to Pillow alone.
set -eu
data=${1:?usage: tools/compare/run.sh DATA [compare.py options]}
shift
venv=${COMPARE_VENV:-build/compare-venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q torch torchvision pillow ||
        "$venv/bin/pip" install -q pillow
fi
exec "$venv/bin/python" tools/compare/compare.py --data "$data" "$@"
