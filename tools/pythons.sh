#!/bin/sh
# tools/pythons.sh: the CPython interpreters of this machine that the Python
# package supports (3.10 and later: the limited API of 3.10), one per minor
# version, a line each: "3.N PATH". Each minor looked for and not found is
# named on stderr, with where it was looked for, so that a test run says
# which versions it could not cover.
#   PINLOAD_PYTHON_MINORS="10 11 12 13 14"   the 3.N looked for (default)
# Where: python3.N on PATH (a pyenv shim that does not run is passed over),
# /usr/bin, /usr/local/bin, pyenv's versions ($PYENV_ROOT, default
# ~/.pyenv) and uv's (~/.local/share/uv/python). A free-threaded build
# (3.13t) has no limited API and is not one of them.
set -eu
minors=${PINLOAD_PYTHON_MINORS:-10 11 12 13 14}
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}

# Is $1 CPython 3.$2, with the GIL, and able to make a venv?
works() {
    "$1" - "$2" >/dev/null 2>&1 <<'PY'
import sys, sysconfig
import ensurepip, venv  # a venv with pip in it
ok = (sys.implementation.name == "cpython" and
      sys.version_info[:2] == (3, int(sys.argv[1])) and
      not sysconfig.get_config_var("Py_GIL_DISABLED"))
sys.exit(0 if ok else 1)
PY
}

for n in $minors; do
    found=
    # The newest patch release first where several are installed.
    for c in "$(command -v "python3.$n" 2>/dev/null || true)" \
        "/usr/bin/python3.$n" "/usr/local/bin/python3.$n" \
        $(ls -d "$pyenv_root"/versions/3."$n".*/bin/python3."$n" \
            "$HOME"/.local/share/uv/python/cpython-3."$n".*/bin/python3."$n" \
            2>/dev/null | sort -rV); do
        [ -n "$c" ] && [ -x "$c" ] || continue
        if works "$c" "$n"; then
            found=$c
            break
        fi
    done
    if [ -n "$found" ]; then
        echo "3.$n $found"
    else
        echo "pythons.sh: no CPython 3.$n found (python3.$n on PATH," \
            "in /usr/bin, /usr/local/bin, $pyenv_root/versions," \
            "~/.local/share/uv/python)" >&2
    fi
done
