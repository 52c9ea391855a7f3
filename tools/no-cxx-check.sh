#!/bin/sh
# no-cxx-check.sh FILE...: pinload is a C library, and nothing it builds may
# need the C++ runtime. A CUDA image's gcc may find only a static, non-PIC
# libstdc++.a, which no PIE or shared library can take (the 2026-11-27 GPU
# run: "relocation R_X86_64_PC32 against undefined hidden symbol
# `DW.ref.__gxx_personality_v0' can not be used when making a PIE object").
#
# For an archive or object: no undefined symbol of libstdc++ or of C++
# exception handling (__cxa_*, __gxx_*, _Unwind_*, mangled _Z names such as
# operator new). For a program or shared library: no DT_NEEDED libstdc++.
# Prints each offender and fails if there is one.
set -eu
status=0
for f in "$@"; do
    [ -f "$f" ] || { echo "no-cxx-check: $f: missing" >&2; status=1; continue; }
    case $f in
    *.a | *.o)
        bad=$(nm -u "$f" 2>/dev/null |
            awk '$1 == "U" && $2 ~ /^(__cxa_|__gxx_|_Unwind_|_Z)/ {print $2}' |
            sort -u)
        if [ -n "$bad" ]; then
            echo "no-cxx-check: $f needs the C++ runtime:" $bad >&2
            status=1
        fi
        ;;
    *)
        bad=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
            grep -E '^lib(stdc\+\+|c\+\+)' || true)
        if [ -n "$bad" ]; then
            echo "no-cxx-check: $f links $bad" >&2
            status=1
        fi
        ;;
    esac
done
[ $status -ne 0 ] || echo "no-cxx-check: $# files need no C++ runtime"
exit $status
