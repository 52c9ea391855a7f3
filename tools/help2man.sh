#!/bin/sh
# help2man.sh TOOL: a man page (roff, section 1) made from TOOL --help, so
# the installed page says what the tool's own help says. The usage lines
# become SYNOPSIS, the rest DESCRIPTION, kept as written (no fill).
set -eu
tool=$1
name=$(basename "$tool")
help=$("$tool" --help 2>&1) || {
    echo "help2man.sh: $tool --help failed" >&2
    exit 1
}
version=$(sed -n 's/^#define PL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' \
    "$(dirname "$0")/../include/pinload/version.h" | paste -sd.)
# roff: a leading dot or quote would be a request; backslashes escape.
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
case $name in
pinload-bench) summary="measure the loader's throughput over a sweep of settings, or plan a job (--plan)" ;;
pinload-dump) summary="write what the loader delivers as images and an index" ;;
pinload-mkdata) summary="generate a dataset of photo-like JPEGs in class folders" ;;
*) summary="a pinload tool" ;;
esac
printf '.TH %s 1 "" "pinload %s" "pinload manual"\n' \
    "$(printf '%s' "$name" | tr a-z A-Z)" "$version"
printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf '%s\n' "$summary" | esc)"
printf '.SH SYNOPSIS\n.nf\n'
printf '%s\n' "$help" | sed -n '/^usage:/,/^[^ u]/{/^usage:/{s/^usage: //;p;d};/^ /p}' | esc
printf '.fi\n.SH DESCRIPTION\n.nf\n'
printf '%s\n' "$help" | awk 'p || (!/^usage:/ && !/^ /) {p = 1} p' | esc
printf '.fi\n.SH SEE ALSO\npinload-bench(1), pinload-dump(1), pinload-mkdata(1); the pinload README\n'
