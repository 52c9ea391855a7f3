#!/bin/sh
# The docs site: Markdown, man pages and docstrings made into HTML by MkDocs.
#   tools/docs/site.sh build   stage the pages in BUILD/docs/src, build the
#                              site in BUILD/docs/site (mkdocs --strict),
#                              check its links (tools/docs/linkcheck.py)
#   tools/docs/site.sh test    build, then run the pages' examples marked
#                              to run (tools/docs/examples.py) and show that
#                              the checks fail on a broken link, a broken
#                              anchor and a failing example (make test-docs)
# MkDocs comes from the package index, pinned (docs/requirements.txt), into
# a virtual environment of its own, BUILD/docs-venv, made once (again when
# the pins change). Where the index cannot be reached, `test` says so and
# skips (exit 0): it needs no other network, and fetches no external link.
# `build` fails then, and so does `test` with PINLOAD_TEST_DOCS=1 (CI).
# Needs BUILD/man (make man: the API's pages from the header, the tools'
# from their --help); `test` needs the library, the tools and the samples.
#   PINLOAD_BUILD=build   the build folder;  PYTHON=python3  the interpreter
#   that makes the environment;  LIBS  the library's link list (examples).
set -eu
cd "$(dirname "$0")/../.."
mode=${1:-build}
build=${PINLOAD_BUILD:-build}
venv=$build/docs-venv
out=$build/docs
python=${PYTHON:-python3}

case "$mode" in
build | test) ;;
*) echo "usage: $0 build|test" >&2; exit 2 ;;
esac

# The environment, made again when docs/requirements.txt changes. A pip
# failure that is a failure to reach the index (no route, no name, a
# refused or timed-out connection) skips the test; any other fails it.
if ! cmp -s docs/requirements.txt "$venv/requirements.txt" 2>/dev/null; then
    echo "docs: installing MkDocs (docs/requirements.txt) in $venv"
    rm -rf "$venv"
    mkdir -p "$build"
    "$python" -m venv "$venv"
    log=$build/docs-pip.log
    if ! "$venv/bin/python" -m pip -q --disable-pip-version-check install \
        --retries 1 --timeout 20 -r docs/requirements.txt >"$log" 2>&1; then
        cat "$log" >&2
        rm -rf "$venv"
        if grep -Eq 'NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|No route to host|Connection refused|ConnectTimeout|timed out|ProxyError' "$log"; then
            echo "docs: the package index cannot be reached: MkDocs cannot be installed" >&2
            if [ "$mode" = test ] && [ "${PINLOAD_TEST_DOCS:-}" != 1 ]; then
                echo "test-docs: skipped (no package index)"
                exit 0
            fi
        fi
        exit 1
    fi
    cp docs/requirements.txt "$venv/requirements.txt"
fi
py=$venv/bin/python

# The pages as MkDocs reads them: docs/ as it is; the README and the
# CHANGELOG, whose links to docs/X.md become X.md; the man pages and the
# docstrings made into pages.
rm -rf "$out/src"
mkdir -p "$out/src/api"
cp docs/*.md docs/*.png "$out/src/"
sed 's#](docs/#](#g' README.md >"$out/src/readme.md"
sed 's#](docs/#](#g' CHANGELOG.md >"$out/src/changelog.md"
"$py" tools/docs/man2md.py "$out/src/api" "$build"/man/man3/*.3 "$build"/man/*.1
"$py" tools/docs/pyapi.py "$out/src/python-api.md"
cp docs/mkdocs.yml "$out/mkdocs.yml"
echo "docs: mkdocs build --strict ($out/site)"
# Not --quiet: MkDocs 1.6 then counts no warning, and --strict passes all.
if ! "$venv/bin/mkdocs" build --strict -f "$out/mkdocs.yml" \
    >"$out/mkdocs.log" 2>&1; then
    grep -v '^INFO ' "$out/mkdocs.log" >&2
    echo "docs: mkdocs build --strict failed ($out/mkdocs.log)" >&2
    exit 1
fi
"$py" tools/docs/linkcheck.py "$out/site" "$out/external-links.txt"
echo "docs: $out/site/index.html"
[ "$mode" = build ] && exit 0

# The examples marked to run, from the pages' sources.
PINLOAD_BUILD=$build "$py" tools/docs/examples.py "$out/examples" \
    docs/*.md README.md

# The checks must be able to fail: a copy of the site with a link to a
# page that does not exist, and one with an anchor that does not; a page
# with an example that exits 1; a staged page with a broken link, which
# mkdocs --strict must refuse.
neg=$out/negative
rm -rf "$neg"
mkdir -p "$neg"
cp -r "$out/site" "$neg/site1"
sed -i 's#</body>#<a href="no-such-page.html">x</a></body>#' "$neg/site1/install.html"
if "$py" tools/docs/linkcheck.py "$neg/site1" "$neg/ext1.txt" >"$neg/1.log"; then
    echo "test-docs: linkcheck passed a link to a missing page" >&2; exit 1
fi
grep -q 'install.html:.*no-such-page.html: no such file' "$neg/1.log"
cp -r "$out/site" "$neg/site2"
sed -i 's#</body>#<a href="tuning.html\#no-such-anchor">x</a></body>#' "$neg/site2/install.html"
if "$py" tools/docs/linkcheck.py "$neg/site2" "$neg/ext2.txt" >"$neg/2.log"; then
    echo "test-docs: linkcheck passed a missing anchor" >&2; exit 1
fi
grep -q 'no id "no-such-anchor" in tuning.html' "$neg/2.log"
printf '# x\n\n<!-- test-docs: run -->\n```sh\nexit 3\n```\n' >"$neg/fails.md"
if PINLOAD_BUILD=$build "$py" tools/docs/examples.py "$neg/examples" \
    "$neg/fails.md" >"$neg/3.log" 2>&1; then
    echo "test-docs: a failing example passed" >&2; exit 1
fi
grep -q 'fails.md:4 (sh): FAILED (exit 3)' "$neg/3.log"
cp -r "$out/src" "$neg/src"
printf '\n[a page that is not there](no-such-page.md)\n' >>"$neg/src/install.md"
cp docs/mkdocs.yml "$neg/mkdocs.yml"
if "$venv/bin/mkdocs" build --strict -f "$neg/mkdocs.yml" \
    >"$neg/4.log" 2>&1; then
    echo "test-docs: mkdocs --strict built a page with a broken link" >&2
    exit 1
fi
grep -q 'no-such-page.md' "$neg/4.log"
echo "test-docs: a missing page, a missing anchor, a failing example and a broken Markdown link each fail the check"
