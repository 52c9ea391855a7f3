"""Builds pinload._pinload: the C extension over include/pinload.h.

By default the library is built from this checkout with its own Makefile
(`make lib`, in ../build) and linked statically into the extension, so the
wheel needs nothing but the libraries the C library itself links (libjpeg,
libcurl, and libcudart where the CUDA toolkit was found). Environment:

  PINLOAD_MAKE_ARGS="CUDA=0"   extra arguments for make (CUDA=0: host only)
  PINLOAD_USE_INSTALLED=1      link the installed library instead, found
                               with pkg-config (pinload-static.pc)
"""
import os
import re
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version():
    with open(os.path.join(ROOT, "include", "pinload", "version.h")) as f:
        text = f.read()
    parts = [re.search(r"#define PL_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def run(cmd):
    print(" ".join(shlex.quote(c) for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


class BuildExt(build_ext):
    def build_extensions(self):
        ext = self.extensions[0]
        if os.environ.get("PINLOAD_USE_INSTALLED") == "1":
            flags = shlex.split(run(["pkg-config", "--cflags", "--libs",
                                     "pinload-static"]))
            ext.extra_compile_args += [f for f in flags if f.startswith("-I")]
            ext.extra_link_args += [f for f in flags
                                    if not f.startswith("-I")]
        else:
            make = ["make", "-C", ROOT, "--no-print-directory"]
            make += shlex.split(os.environ.get("PINLOAD_MAKE_ARGS", ""))
            run(make + ["-j%d" % (os.cpu_count() or 2), "lib"])
            build = run(make + ["-s", "print-build"]).strip()
            libs = shlex.split(run(make + ["-s", "print-libs"]))
            ext.include_dirs.append(os.path.join(ROOT, "include"))
            ext.extra_objects.append(
                os.path.join(ROOT, build, "libpinload.a"))
            # Archives the Makefile names by path (the simulated CUDA
            # runtime's, in a CUDA=sim build) are relative to the root.
            ext.extra_link_args += [a if a.startswith("-")
                                    else os.path.join(ROOT, a) for a in libs]
        # Linked with the CUDA runtime (or the simulated one): the extension
        # may ask it which device the calling thread is on.
        if any("cudart" in f or "cudasim" in f for f in ext.extra_link_args):
            ext.define_macros.append(("PINLOAD_PY_CUDA", "1"))
        # Always compile and link again: setuptools only looks at the
        # extension's own sources, not at the library linked into it, and
        # would keep an extension built against an older libpinload.a.
        self.force = True
        super().build_extensions()


setup(
    version=version(),
    ext_modules=[Extension(
        "pinload._pinload",
        sources=["src/_pinload.c"],
        depends=["src/dlpack.h"],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra",
                            "-Wno-missing-field-initializers"],
    )],
    cmdclass={"build_ext": BuildExt},
)
