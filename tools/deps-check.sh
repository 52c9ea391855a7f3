#!/bin/sh
# The dependency rule of docs/ARCHITECTURE.md, checked on every quoted
# #include of the library, the tools, the samples and the examples:
#
#   include/  the public header; includes nothing of ours
#   common/   includes common/ only
#   codecs/, device/
#             include common/
#   index/    includes codecs/ and common/
#   catalog/  includes index/, codecs/ and common/
#   remote/   includes catalog/, index/, codecs/ and common/ (never input/)
#   workers/  includes workers/ops/, codecs/ and common/
#   workers/ops/
#             the augmentation ops, a room inside workers/: includes
#             common/ only (ops see pixels, never a decoder, a file or
#             the pool), so each op runs on an image alone
#   input/    includes remote/, catalog/, index/, codecs/ and common/
#   order/    the sample order (the epoch's permutation, the claim
#             schedule): includes common/ only
#   delivery/ a batch's way from the host ring to the caller (the ring,
#             the copy engine, the device buffers and their hand-off, the
#             output plan, the GPU decoder's wiring, the record of bad
#             files): includes order/, catalog/, workers/, device/ and
#             common/ (never input/ nor loader/)
#   loader/   includes all of the above; nothing includes it
#   tools/, samples/, examples/, python/src/
#             the public header and their own folder only
#
# Each folder includes itself as well; any other arrow is forbidden, so
# none runs back up and there is no circle.
#
# Exceptions, each with its reason:
#   examples/ -> tools/cli.h
#             the examples parse their options with the tools' parser
#             (header-only, no part of the library).
#   tools/compare/resize_libyuv.c -> workers/
#             the comparison tool measures the library's own resampler
#             against libyuv; it is not installed and not a user of the API.
#
# Prints every forbidden arrow as FILE:LINE: FROM -> TO (HEADER) and exits
# 1 when there is one.
#   tools/deps-check.sh [ROOT]    ROOT: the source tree (default: the one
#                                 holding this script)
set -eu
cd "${1:-$(dirname "$0")/..}"

# Which folders FROM may include, besides itself and include/.
allowed() {
    case "$1" in
    include | common) echo "" ;;
    codecs | device) echo "common" ;;
    index) echo "codecs common" ;;
    catalog) echo "index codecs common" ;;
    remote) echo "catalog index codecs common" ;;
    workers) echo "workers/ops codecs common" ;;
    workers/ops) echo "common" ;;
    input) echo "remote catalog index codecs common" ;;
    order) echo "common" ;;
    delivery) echo "order catalog workers device common" ;;
    loader) echo "delivery input remote catalog index workers workers/ops order codecs device common" ;;
    *) echo "" ;;
    esac
}

# FILE, TO module, the included file's path.
exception() {
    case "$1:$2:$3" in
    examples/*:tools:tools/cli.h) return 0 ;;
    tools/compare/resize_libyuv.c:workers:*) return 0 ;;
    esac
    return 1
}

# The module a source file belongs to: its top folder (python/src and
# workers/ops are one each).
module_of() {
    case "$1" in
    python/src/*) echo "python/src" ;;
    workers/ops/*) echo "workers/ops" ;;
    */*) echo "${1%%/*}" ;;
    *) echo "." ;;
    esac
}

files=$(find include common index device codecs catalog remote workers \
    input order delivery loader tools samples examples python/src -type f \( -name '*.c' -o -name '*.h' -o \
    -name '*.cu' -o -name '*.cc' -o -name '*.cpp' \) 2>/dev/null | sort)

bad=0
checked=0
for f in $files; do
    from=$(module_of "$f")
    dir=$(dirname "$f")
    # FILE:LINE:HEADER for each quoted include.
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1 \2/' >"${TMPDIR:-/tmp}/deps.$$" ||
        true
    while read -r line hdr; do
        checked=$((checked + 1))
        if [ -f "$dir/$hdr" ]; then
            target=$(realpath --relative-to=. "$dir/$hdr")
        elif [ -f "include/$hdr" ]; then
            target="include/$hdr"
        else
            echo "$f:$line: \"$hdr\" is neither beside it nor in include/"
            bad=1
            continue
        fi
        to=$(module_of "$target")
        [ "$to" = "$from" ] && continue
        [ "$to" = include ] && continue
        ok=0
        for a in $(allowed "$from"); do
            [ "$a" = "$to" ] && ok=1
        done
        if [ $ok = 0 ] && ! exception "$f" "$to" "$target"; then
            echo "$f:$line: $from -> $to ($hdr): forbidden by docs/ARCHITECTURE.md"
            bad=1
        fi
    done <"${TMPDIR:-/tmp}/deps.$$"
done
rm -f "${TMPDIR:-/tmp}/deps.$$"

if [ $bad = 0 ]; then
    echo "deps-check: $checked includes in $(echo "$files" | wc -l) files follow the rule"
fi
exit $bad
