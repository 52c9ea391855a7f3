#!/bin/sh
# tests/install/check.sh BUILD: `make install` checked from the outside.
# Installs into two prefixes (the second staged through DESTDIR, as a
# package build does), then for each: the pkg-config files name that prefix;
# an out-of-tree C and a C++ program build against it, shared and static,
# and take a batch from data made by the installed pinload-mkdata; the
# static programs need no libpinload.so (ldd), the shared ones load the
# prefix's; the tools and man pages are there; a CMake project
# (tests/install/cmake) finds the package, asks for its version (a newer
# one is refused) and builds with both imported targets and, where the
# prefix is final, through pinload-static.pc; a C program links statically
# with only `pkg-config --static --libs pinload` and needs no C++ runtime; the API's man pages are
# there for every function and macro and render cleanly. Last, installing the same
# build again with a new PREFIX must give .pc files naming the new one.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinload-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
cc=${CC:-cc}
cxx=${CXX:-c++}
# The SONAME the library was linked with: what an installed program loads.
soname=$(objdump -p "$root/$build/libpinload.so" 2>/dev/null |
    sed -n 's/^ *SONAME *//p')
case "$soname" in
libpinload.so.[0-9]*) ;;
*) fail "$build/libpinload.so has no SONAME libpinload.so.N ('$soname')" ;;
esac

install_to() { # PREFIX [DESTDIR]
    make -C "$root" --no-print-directory -s BUILD="$build" PREFIX="$1" \
        DESTDIR="${2:-}" install >"$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log" >&2; fail "make install PREFIX=$1"; }
}

check_prefix() { # PREFIX (as the .pc files must name it) ROOT (where it lies)
    prefix=$1 at=$2
    pcdir=$at/lib/pkgconfig
    for pc in pinload pinload-static; do
        [ -f "$pcdir/$pc.pc" ] || fail "$pcdir/$pc.pc missing"
        got=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=prefix "$pc")
        [ "$got" = "$prefix" ] || fail "$pc.pc: prefix $got, want $prefix"
    done
    for t in pinload-bench pinload-dump pinload-mkdata; do
        [ -x "$at/bin/$t" ] || fail "$at/bin/$t missing"
        page=$at/share/man/man1/$t.1
        [ -s "$page" ] || fail "$page missing"
        if command -v groff >/dev/null 2>&1; then
            groff -man -Tutf8 -ww -z "$page" 2>"$tmp/groff.err"
            [ ! -s "$tmp/groff.err" ] || { cat "$tmp/groff.err" >&2; fail "$page: groff warnings"; }
        fi
        head -1 "$page" | grep -q '^\.TH ' || fail "$page: no .TH header"
    done
    check_man3 "$at/share/man"
    data=$tmp/data-$$
    rm -rf "$data"
    "$at/bin/pinload-mkdata" --out "$data" --classes 2 --per-class 4 \
        --size-range 32-48 >/dev/null || fail "installed pinload-mkdata"
    # When staged through DESTDIR the .pc files name the final prefix:
    # point the compiler at where the files lie now instead.
    flags="-I$at/include"
    for lang in c cpp; do
        compiler=$cc std=-std=c11
        [ "$lang" = cpp ] && compiler=$cxx std=-std=c++17
        shared=$tmp/hello-$lang-shared static=$tmp/hello-$lang-static
        # shellcheck disable=SC2046
        $compiler $std $flags "$here/hello.$lang" -o "$shared" \
            -L"$at/lib" $(PKG_CONFIG_PATH=$pcdir pkg-config --libs pinload |
                sed "s|-L$prefix/lib||") -Wl,-rpath,"$at/lib" ||
            fail "$lang shared build against $at"
        # shellcheck disable=SC2046
        $compiler $std $flags "$here/hello.$lang" -o "$static" \
            $(PKG_CONFIG_PATH=$pcdir pkg-config --libs pinload-static |
                sed "s|$prefix/lib/|$at/lib/|") ||
            fail "$lang static build against $at"
        ldd "$static" | grep -q libpinload &&
            fail "$lang static program loads libpinload: $(ldd "$static" | grep libpinload)"
        ldd "$shared" | grep -q "$at/lib/$soname" ||
            fail "$lang shared program does not load $at/lib/$soname: $(ldd "$shared" | grep pinload)"
        "$shared" "$data" >/dev/null 2>"$tmp/run.err" ||
            { cat "$tmp/run.err" >&2; fail "$lang shared program"; }
        "$static" "$data" >/dev/null 2>"$tmp/run.err" ||
            { cat "$tmp/run.err" >&2; fail "$lang static program"; }
    done
    check_pc_static "$at" "$pcdir"
    check_cmake "$at" "$1"
    echo "test-install: $prefix: pkg-config, tools, man pages, C and C++ shared and static, CMake: ok"
}

# A static link made with only what `pkg-config --static --libs pinload`
# names, in a libdir that holds the archive alone (a distribution's static
# package): the C program links (no C++ runtime, nothing missing), needs
# no libpinload.so and no libstdc++, and runs.
check_pc_static() { # ROOT PCDIR
    sonly=$tmp/static-only
    rm -rf "$sonly" && mkdir -p "$sonly"
    cp "$1/lib/libpinload.a" "$sonly/"
    flags=$(PKG_CONFIG_PATH=$2 pkg-config --static --libs \
        --define-variable=libdir="$sonly" pinload)
    prog=$tmp/hello-pc-static
    # shellcheck disable=SC2086
    $cc -std=c11 -I"$1/include" "$here/hello.c" -o "$prog" $flags ||
        fail "static link with only pkg-config --static --libs pinload ($flags)"
    ldd "$prog" | grep -Eq 'libpinload|libstdc\+\+' &&
        fail "pkg-config --static program loads: $(ldd "$prog" | grep -E 'libpinload|libstdc')"
    "$prog" "$data" >/dev/null 2>"$tmp/run.err" ||
        { cat "$tmp/run.err" >&2; fail "pkg-config --static program"; }
}

# The API's pages: every exported function and every function-like macro
# of the header has one (its family's page, or a .so link to it), each
# renders without a warning, and pinload(3) holds the life of a program.
check_man3() { # MANDIR
    m3=$1/man3
    [ -s "$m3/pinload.3" ] || fail "$m3/pinload.3 missing"
    names=$(grep -v '^#' "$root/include/pinload.sym";
        sed -n 's/^#define \(pl_[a-z_0-9]*\)(.*/\1/p' "$root/include/pinload.h")
    for n in $names; do
        [ -s "$m3/$n.3" ] || fail "no man page for $n"
        target=$(sed -n 's/^\.so //p' "$m3/$n.3")
        [ -z "$target" ] || [ -s "$1/$target" ] ||
            fail "$m3/$n.3 points at $target, which is missing"
    done
    if command -v groff >/dev/null 2>&1; then
        for page in "$m3"/*.3; do
            (cd "$1" && groff -man -Tutf8 -ww -z "man3/${page##*/}") \
                2>"$tmp/groff.err"
            [ ! -s "$tmp/groff.err" ] || { cat "$tmp/groff.err" >&2; fail "$page: groff warnings"; }
        done
    fi
    grep -q 'pl_loader_release(l, b, stream);' "$m3/pinload.3" ||
        fail "pinload(3) lacks the header's life of a program"
    grep -q 'PL_EPOCH_END once' "$m3/pl_loader.3" ||
        fail "pl_loader(3) lacks pl_loader_next's comment"
    # A new section of the header needs a page name: refused until then.
    sed 's|^ \* What a loader did \*/$| * Something new */|' \
        "$root/include/pinload.h" >"$tmp/new.h"
    grep -q 'Something new' "$tmp/new.h" || fail "the header's sections changed"
    if "$root/tools/man3.sh" "$tmp/new.h" "$tmp/man3" 2>"$tmp/man3.err"; then
        fail "tools/man3.sh took a section it has no page name for"
    fi
    grep -q '"Something new"' "$tmp/man3.err" ||
        fail "tools/man3.sh did not name the section: $(cat "$tmp/man3.err")"
}

check_cmake() { # ROOT (where the files lie) PREFIX (what the .pc files name)
    at=$1
    command -v cmake >/dev/null 2>&1 ||
        fail "cmake is missing (tools/install-deps.sh --install test)"
    pkgconfig=OFF
    [ "$1" = "$2" ] && pkgconfig=ON
    version=$(PKG_CONFIG_PATH=$at/lib/pkgconfig pkg-config --modversion pinload)
    mm=${version%.*}
    cm=$tmp/cmake-build
    rm -rf "$cm"
    PKG_CONFIG_PATH=$at/lib/pkgconfig cmake -S "$here/cmake" -B "$cm" \
        -DCMAKE_PREFIX_PATH="$at" -DPINLOAD_WANT="$mm" \
        -DPINLOAD_PKGCONFIG=$pkgconfig >"$tmp/cmake.log" 2>&1 ||
        { cat "$tmp/cmake.log" >&2; fail "cmake configure against $at"; }
    grep -q "pinload $version from $at/lib/cmake/pinload" "$tmp/cmake.log" ||
        fail "find_package did not report $version from $at: $(grep pinload "$tmp/cmake.log")"
    cmake --build "$cm" >"$tmp/cmake.log" 2>&1 ||
        { cat "$tmp/cmake.log" >&2; fail "cmake build against $at"; }
    progs="hello_shared hello_static hello_cpp_static"
    [ $pkgconfig = ON ] && progs="$progs hello_pkgconfig"
    for p in $progs; do
        case $p in
        *shared) ldd "$cm/$p" | grep -q "$at/lib/$soname" ||
            fail "CMake $p does not load $at/lib/$soname" ;;
        *) ldd "$cm/$p" | grep -q libpinload &&
            fail "CMake $p loads libpinload: $(ldd "$cm/$p" | grep libpinload)" ;;
        esac
        "$cm/$p" "$data" >/dev/null 2>"$tmp/run.err" ||
            { cat "$tmp/run.err" >&2; fail "CMake $p"; }
    done
    # A newer minor version than installed is refused, by find_package.
    major=${mm%.*} minor=${mm#*.}
    rm -rf "$cm"
    if cmake -S "$here/cmake" -B "$cm" -DCMAKE_PREFIX_PATH="$at" \
        -DPINLOAD_WANT="$major.$((minor + 1))" -DPINLOAD_PKGCONFIG=OFF \
        >"$tmp/cmake.log" 2>&1; then
        fail "find_package(pinload $major.$((minor + 1))) accepted $version"
    fi
    grep -q "$version" "$tmp/cmake.log" ||
        fail "the refusal does not name the installed $version"
}

a=$tmp/prefix-a
install_to "$a"
check_prefix "$a" "$a"

b=/opt/pinload-test-$$
install_to "$b" "$tmp/stage"
check_prefix "$b" "$tmp/stage$b"

# The same build installed again elsewhere: the .pc files follow.
c=$tmp/prefix-c
install_to "$c"
got=$(PKG_CONFIG_PATH=$c/lib/pkgconfig pkg-config --variable=prefix pinload)
[ "$got" = "$c" ] || fail "reinstalled with PREFIX=$c, pinload.pc still says $got"
make -C "$root" --no-print-directory -s BUILD="$build" PREFIX="$c" uninstall
left=$(find "$c" -type f | head -5)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "test-install: reinstall with another PREFIX and uninstall: ok"

# Plain `make` only checks the Debian packages; the README's commands and
# `make deps` install them.
fresh=$tmp/fresh-build
for target in all lib tools samples; do
    make -C "$root" --no-print-directory -n BUILD="$fresh" "$target" 2>/dev/null |
        grep 'install-deps.sh' >"$tmp/deps.txt" || true
    grep -q -- '--install' "$tmp/deps.txt" &&
        fail "make $target would install packages: $(cat "$tmp/deps.txt")"
    grep -q -- '--check build' "$tmp/deps.txt" ||
        fail "make $target does not check the build's packages"
done
for target in deps test bench; do
    make -C "$root" --no-print-directory -n BUILD="$fresh" "$target" 2>/dev/null |
        grep -q -- 'install-deps.sh --install' ||
        fail "make $target does not install what it needs"
done
echo "test-install: plain make checks packages, make deps/test/bench install them: ok"
