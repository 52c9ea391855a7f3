"""Builds pinload._pinload: the C extension over include/pinload.h.

By default the library is built with its own Makefile (`make lib`) and
linked statically into the extension, so the wheel needs nothing but the
libraries the C library itself links (libjpeg, libspng, libwebp, libcurl
and json-c, and libcudart where the CUDA toolkit was found; none with
CUDART=static). The C sources are the
checkout's (this folder's parent), or, in an sdist (tools/wheel.sh), its
own csrc/ folder: the sdist builds from itself alone. A missing Debian
package is named by the Makefile's check. Environment:

  PINLOAD_MAKE_ARGS="CUDA=0"   extra arguments for make (CUDA=0: host only;
                               CUDART=static: the CUDA runtime inside)
  PINLOAD_USE_INSTALLED=1      link the installed library instead, found
                               with pkg-config (pinload-static.pc)

The extension is built against CPython's limited API of 3.10
(Py_LIMITED_API 0x030A0000): one `_pinload.abi3.so`, and one wheel tagged
cp310-abi3, for CPython 3.10 and every later version. A free-threaded
CPython has no limited API: there the same sources build against the full
API, for that version only.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# An sdist carries the C library in csrc/; a checkout has it above.
ROOT = (os.path.join(HERE, "csrc")
        if os.path.exists(os.path.join(HERE, "csrc", "Makefile"))
        else os.path.dirname(HERE))


# The stable ABI of CPython 3.10 (the oldest pyproject.toml allows).
LIMITED_API = (sys.implementation.name == "cpython"
               and not sysconfig.get_config_var("Py_GIL_DISABLED"))


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
        # An extension of another ABI tag left in the build folder by an
        # earlier build (_pinload.cpython-311-*.so beside _pinload.abi3.so)
        # would go into the wheel too, and be imported first.
        out = self.get_ext_fullpath(ext.name)
        for old in glob.glob(os.path.join(os.path.dirname(out),
                                          "_pinload.*so")):
            if os.path.abspath(old) != os.path.abspath(out):
                print("removing " + old, flush=True)
                os.remove(old)
        # Always compile and link again: setuptools only looks at the
        # extension's own sources, not at the library linked into it, and
        # would keep an extension built against an older libpinload.a.
        self.force = True
        super().build_extensions()


setup(
    version=version(),
    ext_modules=[Extension(
        "pinload._pinload",
        sources=["src/module.c", "src/config.c", "src/loader.c",
                 "src/batch.c", "src/view.c", "src/logq.c"],
        depends=["src/pinload_py.h", "src/dlpack.h"],
        py_limited_api=LIMITED_API,
        define_macros=[("Py_LIMITED_API", "0x030A0000")] if LIMITED_API
        else [],
        # An API the limited API lacks is undeclared there: an error, not
        # a warning and a symbol missing at import.
        extra_compile_args=["-std=c11", "-Wall", "-Wextra",
                            "-Wno-missing-field-initializers",
                            "-Werror=implicit-function-declaration",
                            "-Werror=incompatible-pointer-types"],
    )],
    cmdclass={"build_ext": BuildExt},
    # The wheel's tag: cp310-abi3, installable on every CPython 3.10+.
    options={"bdist_wheel": {"py_limited_api": "cp310"}} if LIMITED_API
    else {},
)
