#!/bin/sh
# man3.sh HEADER OUTDIR: the API's man pages (section 3), made from the
# public header's own comments so that they cannot drift from it.
#   pinload.3        the header's opening comment: what pinload is (its
#                    first line, "pinload: ...", the NAME), the life of a
#                    program, status codes, thread safety, ABI
#   one page per section of the header (the "/* -----" banners): its
#                    functions' prototypes as SYNOPSIS, then each
#                    declaration's comment and code, in the header's order
#   NAME.3           for every function, function-like macro and type: a
#                    ".so" link to the page that documents it
# Writes OUTDIR/MANIFEST, the pages' names, one per line (make uninstall).
# A banner whose title has no page name below fails the run: a new section
# of the header needs a name here, never a page nobody chose.
set -eu
header=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's/^#define PL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' \
    "$here/../include/pinload/version.h" | paste -sd.)
mkdir -p "$out"
rm -f "$out"/*.3 "$out/MANIFEST"

awk -v out="$out" -v version="$version" '
# Page name and one-line summary of each banner title.
function page_of(title) {
    if (title == "Versions and errors") return "pl_errors"
    if (title == "Configuration") return "pl_config"
    if (title == "The loader") return "pl_loader"
    if (title == "What a loader is") return "pl_loader_info"
    if (title == "Where a loader stands") return "pl_loader_state"
    if (title == "What a loader did") return "pl_loader_stats"
    if (title ~ /^Decoding one file/) return "pl_image"
    if (title ~ /^Transforms/) return "pl_transform"
    return ""
}
# roff: backslashes escaped; a leading dot or quote would be a request.
function esc(s) {
    gsub(/\\/, "\\e", s)
    if (s ~ /^[.\047]/) s = "\\&" s
    return s
}
function emit(file, s) { print s > file }
# Code as a reader of the page needs it: no export macro, no padding
# before the line continuations of a macro.
function shown(s) {
    gsub(/  +\\$/, " \\", s)
    return esc(s)
}
# A block of code without the export macro, its continuation lines moved
# left by as much.
function unexport(code,    n, l, i, r, cont) {
    n = split(code, l, "\n")
    r = ""; cont = 0
    for (i = 1; i <= n; i++) {
        if (l[i] ~ /PL_EXPORT /) { sub(/PL_EXPORT /, "", l[i]); cont = 1 }
        else if (cont && l[i] ~ /^          /) l[i] = substr(l[i], 11)
        if (l[i] ~ /;/) cont = 0
        r = r (i > 1 ? "\n" : "") l[i]
    }
    return r
}
# The text of a comment block (its lines without /*, * and */): filled
# paragraphs, and indented lines (code in comments) kept as they are.
function comment_roff(file, n, lines,    i, l, pre, text) {
    pre = 0
    for (i = 1; i <= n; i++) {
        l = lines[i]
        if (l ~ /^    /) {
            if (!pre) { emit(file, ".PP\n.RS\n.nf"); pre = 1 }
            emit(file, esc(l))
            continue
        }
        if (pre) { emit(file, ".fi\n.RE"); pre = 0 }
        if (l == "") { emit(file, ".PP"); continue }
        emit(file, esc(l))
    }
    if (pre) emit(file, ".fi\n.RE")
}
function strip_comment(l) {
    sub(/^\/\* ?/, "", l)
    sub(/^ \* ?/, "", l)
    sub(/^ \*$/, "", l)
    sub(/ *\*\/$/, "", l)
    return l
}
# The names an item declares: functions, function-like macros, types.
function names_of(code,    n, m, s, found) {
    found = ""
    s = code
    while (match(s, /PL_EXPORT [^(]*[ *]([a-z_0-9]+)\(/)) {
        m = substr(s, RSTART, RLENGTH - 1); sub(/.*[ *]/, "", m)
        found = found " " m; s = substr(s, RSTART + RLENGTH)
    }
    s = code
    while (match(s, /#define (pl_[a-z_0-9]+)\(/)) {
        m = substr(s, RSTART + 8, RLENGTH - 9)
        found = found " " m; s = substr(s, RSTART + RLENGTH)
    }
    if (match(code, /\} (pl_[a-z_0-9]+);/)) {
        m = substr(code, RSTART + 2, RLENGTH - 3); found = found " " m
    } else if (match(code, /typedef [^;{]* \(?\*?(pl_[a-z_0-9]+)\)?[;(]/)) {
        m = substr(code, RSTART, RLENGTH - 1); sub(/.* \(?\*?/, "", m)
        sub(/\)$/, "", m); found = found " " m
    }
    return substr(found, 2)
}
function flush_item(    f, names, k, nn, arr, i) {
    if (page == "" || (ncom == 0 && code == "")) { ncom = 0; code = ""; return }
    f = out "/" page ".3"
    names = names_of(code)
    nn = split(names, arr, " ")
    for (i = 1; i <= nn; i++) {
        if (!(arr[i] in owner)) { owner[arr[i]] = page; order[++nnames] = arr[i] }
        if (code ~ ("PL_EXPORT|#define " arr[i] "\\(")) {
            if (!(page in syn)) syn[page] = ""
        }
    }
    # SYNOPSIS: the prototypes and function-like macros, as declared.
    if (code ~ /PL_EXPORT|#define pl_[a-z_0-9]+\(/) {
        syn[page] = syn[page] unexport(code) "\n"
    }
    body[page] = body[page] sprintf("\001%d", ++nitems)
    item_names[nitems] = names
    item_ncom[nitems] = ncom
    for (i = 1; i <= ncom; i++) item_com[nitems, i] = com[i]
    item_code[nitems] = unexport(code)
    ncom = 0; code = ""
}
BEGIN { state = "top"; page = ""; ncom = 0; code = ""; incom = 0 }
# The opening comments, up to the include guard: pinload(3).
state == "top" {
    if ($0 ~ /^#ifndef PINLOAD_H/) { state = "pre"; next }
    # The first line, "pinload: what it is.", is the NAME of pinload(3).
    if (ntop == 0 && summary == "" && $0 ~ /^\/\* pinload: /) {
        summary = $0; sub(/^\/\* pinload: /, "", summary); sub(/\.$/, "", summary)
        next
    }
    top[++ntop] = strip_comment($0)
    next
}
# A banner: "/* -----" then " * Title */".
/^\/\* -------------------------+$/ { flush_item(); banner = 1; next }
banner {
    banner = 0
    title = strip_comment($0)
    page = page_of(title)
    if (page == "") {
        printf "man3.sh: no page name for the header section \"%s\": add one to tools/man3.sh\n", title > "/dev/stderr"
        failed = 1; exit 1
    }
    pages[++npages] = page; ptitle[page] = title
    state = "sec"
    next
}
state != "sec" { next }
/^#ifdef __cplusplus/ { flush_item(); state = "end"; next }
incom {
    com[++ncom] = strip_comment($0)
    if ($0 ~ /\*\//) incom = 0
    next
}
/^\/\*/ && code == "" {
    if (ncom > 0) flush_item()
    com[++ncom] = strip_comment($0)
    if ($0 !~ /\*\//) incom = 1
    next
}
/^$/ { flush_item(); next }
{ code = code (code == "" ? "" : "\n") $0 }
END {
    if (failed) exit 1
    flush_item()
    th = ".TH %s 3 \"\" \"pinload %s\" \"pinload manual\"\n"
    # pinload(3)
    f = out "/pinload.3"
    printf th, "PINLOAD", version > f
    emit(f, ".SH NAME\npinload \\- " esc(summary))
    emit(f, ".SH SYNOPSIS\n.nf\n#include <pinload.h>\n.fi\n.PP\nLink with \\fB$(pkg-config --libs pinload)\\fP, or CMake\\(aqs \\fBpinload::pinload\\fP.")
    emit(f, ".SH DESCRIPTION")
    comment_roff(f, ntop, top)
    emit(f, ".SH SEE ALSO")
    s = ""
    for (i = 1; i <= npages; i++) s = s (s == "" ? "" : ",\n") "\\fB" pages[i] "\\fP(3)"
    emit(f, s "; pinload-bench(1), pinload-dump(1), pinload-mkdata(1), pinload-pack(1); the README and docs/ of the source")
    man[++nman] = "pinload.3"
    for (i = 1; i <= npages; i++) {
        p = pages[i]; f = out "/" p ".3"
        printf th, toupper(p), version > f
        fn = ""
        for (k = 1; k <= nnames; k++)
            if (owner[order[k]] == p) fn = fn (fn == "" ? "" : ", ") order[k]
        emit(f, ".SH NAME\n" esc(fn) " \\- " esc(tolower(substr(ptitle[p], 1, 1)) substr(ptitle[p], 2)))
        emit(f, ".SH SYNOPSIS\n.nf\n#include <pinload.h>\n")
        n = split(syn[p], sl, "\n")
        for (k = 1; k <= n; k++) if (sl[k] != "") emit(f, "\\fB" shown(sl[k]) "\\fP")
        emit(f, ".fi\n.SH DESCRIPTION")
        n = split(substr(body[p], 2), its, "\001")
        for (k = 1; k <= n; k++) {
            it = its[k] + 0
            if (item_names[it] != "") {
                nm = item_names[it]; gsub(/ /, ", ", nm)
                emit(f, ".SS " esc(nm))
            } else emit(f, ".PP")
            delete cl
            for (j = 1; j <= item_ncom[it]; j++) cl[j] = item_com[it, j]
            comment_roff(f, item_ncom[it], cl)
            if (item_code[it] != "") {
                emit(f, ".PP\n.RS\n.nf")
                m = split(item_code[it], code_lines, "\n")
                for (j = 1; j <= m; j++) emit(f, shown(code_lines[j]))
                emit(f, ".fi\n.RE")
            }
        }
        emit(f, ".SH SEE ALSO\n\\fBpinload\\fP(3)")
        man[++nman] = p ".3"
    }
    # One name per page that documents it.
    for (k = 1; k <= nnames; k++) {
        nm = order[k]
        if ((nm ".3") in seen || nm == owner[nm]) continue
        seen[nm ".3"] = 1
        f = out "/" nm ".3"
        emit(f, ".so man3/" owner[nm] ".3")
        man[++nman] = nm ".3"
    }
    for (k = 1; k <= nman; k++) print man[k] > (out "/MANIFEST")
}
' "$header"
