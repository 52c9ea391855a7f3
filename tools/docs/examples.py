#!/usr/bin/env python3
"""examples.py WORK PAGE.md...: run the docs' examples marked to run.

A fenced block right after the line

    <!-- test-docs: run -->

is run; every other block is text. The blocks of one page run in order,
in one folder of their own (WORK/PAGE), which holds

    data/train   a small generated ImageFolder tree (4 classes x 8 JPEGs)
    build        a link to the build folder (build/pinload-bench,
                 build/samples/minimal...)
    examples     a link to the repository's examples/ (their scripts)

so an example reads as a user would type it at the repository's root
after `make`. By the fence's language:

    c        compiled against the header and build/libpinload.a (with
             $LIBS, the library's link list) and run, without arguments
    sh       run by sh -eu
    python   run by $PYTHON (default build/pyenv/bin/python) if it can
             import pinload (and torch, where the block imports it);
             otherwise skipped, saying why

Each must exit 0 within $DOCS_EXAMPLE_TIMEOUT seconds (default 60).
Prints one line per example and "docs examples: N passed, N failed, N
skipped"; exit 1 if one failed, or if a marker stands before no fenced
block. Environment: PINLOAD_BUILD (default build), CC, LIBS, PYTHON.
"""

import os
import re
import shutil
import subprocess
import sys
import time

MARK = "<!-- test-docs: run -->"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def blocks(path):
    """[(line, lang, code)] of the marked blocks of a page; exits on a
    marker that no fenced block follows."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != MARK:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() == "":
            j += 1
        m = re.match(r"^(```+)\s*(\w+)", lines[j]) if j < len(lines) else None
        if not m:
            sys.exit("docs examples: %s:%d: the marker is not followed by a "
                     "fenced block with a language" % (path, i + 1))
        fence, lang = m.group(1), m.group(2)
        k = j + 1
        while k < len(lines) and lines[k].strip() != fence:
            k += 1
        if k == len(lines):
            sys.exit("docs examples: %s:%d: unclosed fence" % (path, j + 1))
        out.append((j + 1, lang, "\n".join(lines[j + 1:k]) + "\n"))
        i = k + 1
    return out


def run(cmd, cwd, timeout, env):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode("utf-8", "replace")


def python_skip(python, code):
    """Why a Python block cannot run here, or None."""
    if not (python and os.access(python, os.X_OK)):
        return "no Python environment at %s (make test-python makes it)" % python
    mods = ["pinload"] + (["torch"] if re.search(r"^\s*(import|from) torch\b|"
                                                  r"pinload\.torch", code, re.M)
                          else [])
    for mod in mods:
        rc, _ = run([python, "-c", "import " + mod], ROOT, 60, os.environ.copy())
        if rc != 0:
            return "%s cannot import %s" % (python, mod)
    return None


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: examples.py WORK PAGE.md...")
    work, pages = os.path.abspath(argv[1]), argv[2:]
    build = os.path.abspath(os.environ.get("PINLOAD_BUILD", "build"))
    cc = os.environ.get("CC", "cc")
    libs = os.environ.get("LIBS", "").split()
    python = os.environ.get("PYTHON", os.path.join(build, "pyenv", "bin", "python"))
    timeout = float(os.environ.get("DOCS_EXAMPLE_TIMEOUT", "60"))
    found = [(p, b) for p in pages for b in blocks(p)]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(work, "data-train")
    rc, out = run([os.path.join(build, "pinload-mkdata"), "--out", data,
                   "--classes", "4", "--per-class", "8", "--quiet"],
                  work, 120, os.environ.copy())
    if rc != 0:
        print(out)
        sys.exit("docs examples: pinload-mkdata failed (%s)" % rc)
    env = os.environ.copy()
    env["PINLOAD_CACHE_DIR"] = os.path.join(work, "cache")
    passed = failed = skipped = 0
    made = set()
    for page, (line, lang, code) in found:
        name = os.path.splitext(os.path.basename(page))[0]
        cwd = os.path.join(work, name)
        if cwd not in made:
            os.makedirs(os.path.join(cwd, "data"))
            os.symlink(data, os.path.join(cwd, "data", "train"))
            os.symlink(build, os.path.join(cwd, "build"))
            os.symlink(os.path.join(ROOT, "examples"),
                       os.path.join(cwd, "examples"))
            made.add(cwd)
        where = "%s:%d (%s)" % (os.path.relpath(page, ROOT), line, lang)
        t0 = time.time()
        if lang == "c":
            src = os.path.join(cwd, "example-%d.c" % line)
            exe = os.path.join(cwd, "example-%d" % line)
            with open(src, "w", encoding="utf-8") as f:
                f.write(code)
            rc, out = run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
                           "-D_GNU_SOURCE", "-pthread", "-I",
                           os.path.join(ROOT, "include"), "-o", exe, src,
                           os.path.join(build, "libpinload.a")] + libs,
                          cwd, timeout, env)
            if rc == 0:
                rc, out = run([exe], cwd, timeout, env)
        elif lang == "sh":
            rc, out = run(["sh", "-euc", code], cwd, timeout, env)
        elif lang == "python":
            why = python_skip(python, code)
            if why:
                print("docs example %s: skipped: %s" % (where, why))
                skipped += 1
                continue
            rc, out = run([python, "-c", code], cwd, timeout, env)
        else:
            sys.exit("docs examples: %s: no way to run %s" % (where, lang))
        if rc == 0:
            passed += 1
            print("docs example %s: ok (%.1f s)" % (where, time.time() - t0))
        else:
            failed += 1
            print(out.rstrip())
            print("docs example %s: FAILED (%s)" % (
                where, "timed out" if rc == "timeout" else "exit %s" % rc))
    print("docs examples: %d passed, %d failed, %d skipped" % (
        passed, failed, skipped))
    return 1 if failed or not found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
