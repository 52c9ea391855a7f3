#!/bin/sh
# abi-check.sh LIST LIB.so [LIB.a]: the symbols the libraries export (their
# defined global functions and data) must be exactly LIST's (one name per
# line, # comments). Prints what is missing or extra and fails if either.
set -eu
list=$1
shift
want=$(grep -v '^#' "$list" | sed '/^$/d' | sort)
status=0
for lib in "$@"; do
    case $lib in
    *.so*) got=$(nm -D --defined-only "$lib" | awk 'NF == 3 && $2 ~ /[TDBRW]/ {print $3}' | sed 's/@.*//' | sort -u) ;;
    *) got=$(nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /[TDBRW]/ {print $3}' | sort -u) ;;
    esac
    missing=$(printf '%s\n' "$want" | comm -23 - "$(printf '%s\n' "$got" >"${TMPDIR:-/tmp}/abi-got.$$"; echo "${TMPDIR:-/tmp}/abi-got.$$")")
    extra=$(printf '%s\n' "$want" | comm -13 - "${TMPDIR:-/tmp}/abi-got.$$")
    rm -f "${TMPDIR:-/tmp}/abi-got.$$"
    if [ -n "$missing" ]; then
        echo "abi-check: $lib does not export (in $list):" $missing >&2
        status=1
    fi
    if [ -n "$extra" ]; then
        echo "abi-check: $lib exports what $list does not list:" $extra >&2
        status=1
    fi
    [ -n "$missing$extra" ] || echo "abi-check: $lib: $(printf '%s\n' "$got" | wc -l) symbols, as listed"
done
exit $status
